"""The presenting written once (issue 23): job views in, the words of ``get``, ``why``,
``describe`` and ``wait`` out, the same for a local run and a cluster job."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_jobs import words
from t9k_jobs.sdk import present
from t9k_jobs.api import JobStatus
from t9k_jobs.frameworks import parse_job
from t9k_jobs.sdk.view import JobView
from t9k_jobs.words import STOPPED, UNKNOWN
from tests.helpers import job, replica, template

CREATED = 1795599764.0  # 2026-11-25T09:42:44Z
MANIFEST = job(
    "GenericJob", "g", {"replicaSpecs": [replica("worker", 2, template(name="c", image="x"))]}, namespace="ns"
)


def view(target: str, phase: str, status: dict[str, Any] | None = None, **extra: Any) -> JobView:
    job = parse_job(MANIFEST)
    return JobView(
        target=target,
        kind="GenericJob",
        name="g",
        namespace="ns" if target == "cluster" else None,
        phase=phase,
        status=JobStatus.model_validate(status) if status is not None else None,
        created=CREATED,
        replicas=2,
        running=1,
        load_job=lambda: job,
        load_spec=lambda: MANIFEST["spec"],
        load_object=lambda: MANIFEST,
        **extra,
    )


FAILED = {
    "phase": "Failed",
    "conditions": [{"type": "Failed", "status": "True", "reason": "Failed", "message": "g-worker-1 failed with exit code 1"}],
}

WHY = [
    ("local", UNKNOWN, None, {"unknown_reason": "status.yaml holds no status mapping"},
     "its state cannot be told: status.yaml holds no status mapping"),
    ("local", STOPPED, {"phase": "Running"}, {},
     "its runtime is not running (stopped by delete, Ctrl-C or a kill) before the job finished"),
    ("local", STOPPED, {"phase": "Running"}, {"stop_reason": "stopped by SIGTERM (t9k-jobs delete, Ctrl-C or a kill)"},
     "its runtime stopped before the job finished: stopped by SIGTERM (t9k-jobs delete, Ctrl-C or a kill)"),
    ("local", "Pending", None, {}, "the runtime has not written a status yet"),
    ("cluster", "Pending", None, {}, "no status yet: the operator has not reconciled it (is it running? "
     "t9k-jobs install --with-operator, or the Helm chart)"),
    ("local", "Failed", FAILED, {}, "g-worker-1 failed with exit code 1"),
    ("cluster", "Failed", FAILED, {}, "g-worker-1 failed with exit code 1"),
    ("local", "Paused", {"phase": "Paused"}, {}, "paused (spec.runMode.pause): t9k-jobs resume gj g"),
    ("cluster", "Paused", {"phase": "Paused"}, {}, "paused (spec.runMode.pause): t9k-jobs resume gj g"),
    ("local", "Resuming", {"phase": "Resuming"}, {}, "resuming from pause"),
    ("local", "Running", {"phase": "Running"}, {}, None),
    ("local", "Pending", {"phase": "Pending"}, {}, "Pending: no replica reports a reason"),
    ("cluster", "Pending", {"phase": "Pending"}, {}, "Pending: no pods yet"),
]  # fmt: skip


@pytest.mark.parametrize(("target", "phase", "status", "extra", "expected"), WHY)
def test_why(target: str, phase: str, status: dict | None, extra: dict, expected: str | None) -> None:
    assert present.why(view(target, phase, status, **extra)) == expected


def test_a_replica_that_does_not_run_well_is_named_on_both_targets() -> None:
    status = {
        "phase": "Pending",
        "tasks": [{"type": "worker", "replicas": [
            {"name": "g-worker-0", "phase": "Pending", "reason": "PodInitializing", "message": "init prep"}]}],
    }  # fmt: skip
    for target in ("local", "cluster"):
        assert present.why(view(target, "Pending", status)) == "g-worker-0: Pending (PodInitializing: init prep)"


ROWS = [
    ("local", {"pid": 42, "run_dir": "/runs/g"}, {"pid": 42, "run_dir": "/runs/g"}),
    ("cluster", {}, {"mode": "Immediate", "queue": None, "priority": None}),
]


@pytest.mark.parametrize(("target", "extra", "wide"), ROWS)
def test_the_get_row(target: str, extra: dict, wide: dict) -> None:
    from pathlib import Path

    if "run_dir" in extra:
        extra = {**extra, "run_dir": Path(extra["run_dir"])}
    row = present.row(view(target, "Running", {"phase": "Running", "backoffCount": 1}, **extra), CREATED + 200)
    assert row == {"phase": "Running", "ready": "1/2", "restarts": 0, "age": "3m20s", "backoff": 1, "wide": wide}


@pytest.mark.parametrize("target", ["local", "cluster"])
def test_describe_prints_created_in_rfc3339_utc_on_both_targets(target: str) -> None:
    lines = present.describe(view(target, "Running", {"phase": "Running"}), CREATED + 5)
    assert "Created:     2026-11-25T09:42:44Z (5s ago)" in lines
    assert ("Namespace:   ns" in lines) == (target == "cluster")
    assert any(line.startswith("Runtime:") for line in lines) == (target == "local")
    header = lines[lines.index("Replicas:") + 1]
    assert header == "  <none>"


def test_describe_lists_replicas_with_a_node_only_on_a_cluster() -> None:
    status = {"phase": "Running", "tasks": [{"type": "worker", "replicas": [{"name": "g-worker-0", "phase": "Running"}]}]}
    pods = [{"metadata": {"name": "g-worker-0"}, "spec": {"nodeName": "n1"}, "status": {}}]
    cluster = present.describe(view("cluster", "Running", status, pods=pods), CREATED)
    local = present.describe(view("local", "Running", status), CREATED)
    assert cluster[cluster.index("Replicas:") + 1].split() == ["NAME", "PHASE", "RESTARTS", "EXIT", "CODE", "NODE", "REASON"]
    assert cluster[cluster.index("Replicas:") + 2].split() == ["g-worker-0", "Running", "0", "-", "n1", "-"]
    assert local[local.index("Replicas:") + 2].split() == ["g-worker-0", "Running", "0", "-", "-"]


def test_wait_messages() -> None:
    failed = view("cluster", "Failed", FAILED)
    assert present.wait_ended(failed, "Succeeded") == "GenericJob g ended Failed, not Succeeded: g-worker-1 failed with exit code 1"
    assert present.wait_deleted("GenericJob", "g", "Running") == "GenericJob g was deleted while waiting for it to be Running"
    running = view("local", "Running", {"phase": "Running"})
    assert present.wait_timed_out("GenericJob", "g", "Succeeded", 2.5, running, None) == (
        "timed out after 2.5s waiting for GenericJob g to be Succeeded; it is Running"
    )
    assert present.wait_timed_out("GenericJob", "g", "Succeeded", 3, None, "https://h:6443").endswith(
        "; the API server at https://h:6443 has not answered"
    )
    unknown = view("local", UNKNOWN, None, unknown_reason="no runtime.pid")
    assert present.wait_unknown(unknown, "Succeeded") == (
        "cannot wait for GenericJob g to be Succeeded: its state cannot be told: no runtime.pid"
    )


def test_short_names_come_from_the_kinds() -> None:
    assert [words.short_name(k) for k in ("GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob")] == [
        "gj", "pj", "dj", "caij"
    ]  # fmt: skip
