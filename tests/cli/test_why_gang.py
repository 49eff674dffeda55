"""``describe``'s "why" line for pods no scheduler has looked at, per gang mode (issue 22):
it reads the pods' spec, so it never says "wait for the T9k scheduler" where nothing serves it."""

from __future__ import annotations

from typing import Any

from t9k_jobs.sdk import present
from t9k_jobs.sdk.cluster_api import raw_view
from tests import helpers
from tests.helpers import replica, template


def why(raw: dict[str, Any], pods: list[dict[str, Any]], pod_group: dict[str, Any] | None = None) -> str | None:
    return present.why(raw_view(raw, pods, pod_group, detail=True))

CONTAINER = {"name": "c", "image": "x"}
NOT_ENFORCED = "spec.scheduler.t9kScheduler (queue gpu, priority 40) is not enforced: ..."


def job(conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec = {
        "scheduler": {"t9kScheduler": {"queue": "gpu", "priority": 40}},
        "replicaSpecs": [replica("worker", 2, template(**CONTAINER))],
    }
    status = {"phase": "Pending", "conditions": conditions or []}
    return helpers.job("GenericJob", "g", spec, namespace="ns", status=status)


def pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [CONTAINER], **spec}, "status": {}}


def test_t9k_scheduler_pods_wait_for_its_queue() -> None:
    line = why(job(), [pod("g-worker-0", {"schedulerName": "t9k-scheduler"})])
    assert line == "g-worker-0 wait for the T9k scheduler to admit the job's PodGroup (queue gpu)"


def test_native_gang_pods_wait_for_the_gang() -> None:
    pods = [pod(f"g-worker-{i}", {"schedulingGroup": {"podGroupName": "g"}}) for i in range(2)]
    line = why(job(), pods)
    assert line is not None and line.startswith("g-worker-0, g-worker-1 wait for the gang (PodGroup g)")
    assert "T9k" not in line


def test_default_scheduler_pods_name_the_unenforced_gang() -> None:
    cond = {"type": "GangScheduling", "status": "False", "reason": "NotEnforced", "message": NOT_ENFORCED}
    line = why(job([cond]), [pod("g-worker-0", {"schedulerName": "default-scheduler"})])
    assert line == f"g-worker-0 not scheduled yet: no scheduler has looked at it ({NOT_ENFORCED})"
    assert "T9k scheduler" not in line
