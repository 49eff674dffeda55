"""A job the API server accepts and t9k-jobs cannot act on (issue 32), against the real control plane.

The CRDs keep a pod template as it is (``x-kubernetes-preserve-unknown-fields``), so the API server
stores a DeepSpeedJob whose template has ``volumes: 5``. The operator used to raise on every pass
(no Event, no status, and ``describe`` asked whether it was running); now it marks the job: one
Warning ``InvalidSpec`` event per version of the spec, the condition ``SpecValid`` False (reason
``InvalidSpec``), no pod, no retry; ``describe`` says so; an edit that fixes the spec lets it run.
A spec the engine itself cannot handle is marked the same way (tests/cluster/test_controller_invalid.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import template

from .kube import Kube, core_path, job_path, pod_path
from .operator_proc import OperatorProcess

OWNER = "tensorstack.dev/owner-name"
LIMIT = 90.0  # seconds: generous, the machine may be a loaded 2-core VM


@pytest.fixture(scope="module")
def operator(control_plane, tmp_path_factory) -> OperatorProcess:
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    op = OperatorProcess(control_plane.kubeconfig, log, "--no-leader-elect", "--log-level", "DEBUG").start()
    yield op
    code = op.stop()
    assert code == 0, f"operator exited {code} on SIGTERM:\n{op.tail()}"


def deepspeed(name: str, ns: str, volumes: Any) -> dict[str, Any]:
    worker = {"replicas": 2, "template": template(name="worker", image="example/ds:1", pod={"volumes": volumes})}
    spec = {"config": {"run": {"python": ["train.py"]}}, "worker": worker}
    return helpers.job("DeepSpeedJob", name, spec, namespace=ns)


def invalid_events(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return [
        e for e in kube.list(core_path(ns, "events"))
        if e["involvedObject"]["name"] == name and e["reason"] == "InvalidSpec"
    ]  # fmt: skip


def spec_valid(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    conditions = (kube.get(job_path(ns, "DeepSpeedJob", name)).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "SpecValid"), None)


def describe(kubeconfig: Path, ns: str, name: str) -> str:
    environ = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "describe", "dj", name, "-n", ns],
        capture_output=True, text=True, timeout=LIMIT, env=environ, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_template_the_api_server_keeps_is_marked_invalid_once_and_runs_once_fixed(
    kube: Kube, namespace: str, operator: OperatorProcess, control_plane
) -> None:
    ns, name = namespace, "vols"
    kube.create(job_path(ns, "DeepSpeedJob"), deepspeed(name, ns, 5))  # the API server accepts it
    cond = kube.wait_for(lambda: spec_valid(kube, ns, name), timeout=LIMIT, what="SpecValid condition")
    assert (cond["status"], cond["reason"]) == ("False", "InvalidSpec"), cond
    assert cond["message"].startswith("the job does not validate: spec.worker.template.spec.volumes: must be a list"), cond
    (event,) = kube.wait_for(lambda: invalid_events(kube, ns, name), timeout=LIMIT, what="InvalidSpec event")
    assert event["type"] == "Warning" and event["message"] == cond["message"]
    assert kube.get(job_path(ns, "DeepSpeedJob", name))["status"]["phase"] == "Pending"
    assert not kube.list(pod_path(ns), label_selector=f"{OWNER}={name}")
    text = describe(control_plane.kubeconfig, ns, name)
    assert "Why:         the operator leaves it alone until its spec changes: the job does not validate: " in text
    assert "is it running?" not in text
    assert "SpecValid" in text and "InvalidSpec" in text

    # The fix: the operator acts on the new version of the spec; the condition goes.
    kube.patch(job_path(ns, "DeepSpeedJob", name), {"spec": {"worker": {"template": {"spec": {"volumes": []}}}}})
    kube.wait_for(
        lambda: len(kube.list(pod_path(ns), label_selector=f"{OWNER}={name}")) == 2, timeout=LIMIT, what="the pods"
    )
    kube.wait_for(lambda: spec_valid(kube, ns, name) is None, timeout=LIMIT, what="SpecValid gone")
    assert len(invalid_events(kube, ns, name)) == 1, "one InvalidSpec event for the one invalid version"
    assert "Traceback" not in operator.tail(400)
