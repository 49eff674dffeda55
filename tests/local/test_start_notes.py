"""What a local run says as it starts about its volumes (issue 41): a ``workingDir`` under a
claim's mount that the claim's folder does not hold (T9k's tutorials: the claim at ``/t9k/mnt``,
the work in ``/t9k/mnt/tutorial-examples``; ``--volume`` given one level too deep crash-looped for
ten minutes with ``can't open file``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from t9k_jobs.api import parse_job
from t9k_jobs.local.checks import working_dir_notes
from tests.helpers import job

WHERE = "spec.replicaSpecs[0].template.spec.containers[0].workingDir"


def _tutorial(working_dir: str, mount: dict[str, Any] | None = None) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "workingDir": working_dir, "command": ["python", "-c", "print('ran')"],
                 "volumeMounts": [{"name": "data", "mountPath": "/t9k/mnt", **(mount or {})}]}  # fmt: skip
    spec = {"containers": [container], "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "tutorial"}}]}
    return job("GenericJob", "tut", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": spec}}]})


def test_a_working_dir_the_claims_folder_lacks_is_said_with_what_to_give(tmp_path: Path) -> None:
    (tmp_path / "tutorial" / "tutorial-examples" / "job").mkdir(parents=True)
    manifest = parse_job(_tutorial("/t9k/mnt/tutorial-examples/job"))
    assert working_dir_notes(manifest, {"tutorial": tmp_path / "tutorial"}) == []  # the folder that holds it
    deep = tmp_path / "tutorial" / "tutorial-examples"
    (note,) = working_dir_notes(manifest, {"tutorial": deep})  # one level too deep: the README's old example
    assert note == (
        f"{WHERE}: /t9k/mnt/tutorial-examples/job is {deep}/tutorial-examples/job here, which does not exist (claim "
        f"'tutorial' is --volume tutorial={deep}); the run makes it empty, so what the command expects there is "
        "missing: give --volume tutorial= the folder that holds tutorial-examples/job"
    )
    # Through a subPath, the folder meant is under it; a working dir outside every mount, or a
    # claim without a folder (refused elsewhere), says nothing here.
    sub = parse_job(_tutorial("/t9k/mnt/job", {"subPath": "tutorial-examples"}))
    assert working_dir_notes(sub, {"tutorial": tmp_path / "tutorial"}) == []
    assert working_dir_notes(parse_job(_tutorial("/workspace")), {"tutorial": deep}) == []
    assert working_dir_notes(manifest, {}) == []


def test_run_and_run_d_say_it_as_they_start(tmp_path: Path) -> None:
    deep = tmp_path / "tutorial" / "tutorial-examples"
    deep.mkdir(parents=True)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(_tutorial("/t9k/mnt/tutorial-examples")))
    for extra in ([], ["-d"]):
        if (deep / "tutorial-examples").is_dir():
            (deep / "tutorial-examples").rmdir()  # the run before made it, empty, as a container runtime does
        done = subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "run", *extra, "job.yaml", "--quiet" if not extra else "--no-watch",
                               "--volume", f"tutorial={deep}"], cwd=tmp_path, capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{WHERE}: /t9k/mnt/tutorial-examples is {deep}/tutorial-examples here, which does not exist" in done.stderr + done.stdout
        if extra:
            subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "wait", "gj", "tut", "--for", "Succeeded", "--timeout", "60s"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
