"""A job saved from a cluster runs here (issue 31): ``t9k-jobs get KIND NAME -o yaml`` against the
real API server, piped into ``t9k-jobs run -``, reproduces the job on this machine.

What the server set on the job (its status, written here as the operator would, through the
status subresource; ``uid``, ``resourceVersion``, ``generation``, ``creationTimestamp``,
``managedFields``) is dropped as a create drops it, so the run starts the job anew, with its
claim given a folder by ``--volume``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests import helpers
from tests.helpers import replica

from .kube import Kube, job_path
from .test_verbs import LIMIT, put, set_status


def test_get_o_yaml_piped_into_run_reproduces_the_job_here(control_plane, kube: Kube, namespace: str, tmp_path: Path) -> None:
    claim = tmp_path / "claim"
    claim.mkdir()
    code = "import os, pathlib; pathlib.Path('out-' + os.environ['R']).write_text(os.getcwd())"
    spec = {
        "containers": [{
            "name": "main", "image": "python:3.11", "command": ["python", "-c", code], "workingDir": "/t9k/mnt",
            "env": [{"name": "R", "value": "$(rank)"}], "volumeMounts": [{"name": "data", "mountPath": "/t9k/mnt"}],
        }],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "tutorial"}}],
    }  # fmt: skip
    manifest = helpers.job("GenericJob", "saved", {"replicaSpecs": [replica("worker", 2, {"spec": spec})]})
    put(kube, namespace, manifest)
    set_status(kube, namespace, "GenericJob", "saved", {
        "phase": "Succeeded", "conditions": [{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "done"}],
    })  # fmt: skip
    stored = kube.get(job_path(namespace, "GenericJob", "saved"))
    assert stored["status"]["phase"] == "Succeeded" and stored["metadata"]["uid"]

    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}
    saved = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "get", "gj", "saved", "-n", namespace, "-o", "yaml"],
        capture_output=True, text=True, timeout=LIMIT, env=env, check=False,
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    document = yaml.safe_load(saved.stdout)
    assert document["status"]["phase"] == "Succeeded" and document["metadata"]["resourceVersion"]

    local = {k: v for k, v in env.items() if k != "KUBECONFIG"}
    done = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "run", "-", "--volume", f"tutorial={claim}", "--run-dir", str(tmp_path / "r"), "--quiet"],
        input=saved.stdout, capture_output=True, text=True, timeout=240, env=local, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: <stdin>: ")]
    assert len(notes) == 1 and "status" in notes[0] and "metadata.uid" in notes[0] and "metadata.resourceVersion" in notes[0]
    assert yaml.safe_load((tmp_path / "r" / "status.yaml").read_text())["phase"] == "Succeeded"
    assert sorted(p.name for p in claim.iterdir()) == ["out-0", "out-1"]
    assert (claim / "out-0").read_text() == "/t9k/mnt"
