"""``describe`` says why a native gang waits and when it was preempted (issue 22).

The objects are plain dicts shaped as the API server returns them: pods with the conditions the
v1.37.2 scheduler writes for a gang it cannot place (the pod that finds no node: its fit error;
the pods that fit: the gang's message), and a ``scheduling.k8s.io/v1beta1`` PodGroup with its
``PodGroupInitiallyScheduled`` and ``DisruptionTarget`` conditions.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from t9k_jobs.cluster.client import ApiError
from t9k_jobs.sdk.gang_why import gang_waiting, node_reasons, preempted_since
from t9k_jobs.sdk import present
from t9k_jobs.sdk.cluster_api import Cluster, pod_replica, raw_view, read_view, status_of
from tests import helpers
from tests.helpers import replica, template


def why(raw: dict[str, Any], pods: list[dict[str, Any]], pod_group: dict[str, Any] | None = None) -> str | None:
    return present.why(raw_view(raw, pods, pod_group, detail=True))

CONTAINER = {"name": "c", "image": "x"}
FIT_ERROR = (
    "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
    "1 No preemption victims found for incoming pod."
)
GANG_MESSAGE = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
PREEMPTED_AT = "2026-11-25T09:12:03Z"


def job(phase: str = "Pending", conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec = {
        "scheduler": {"t9kScheduler": {"queue": "gpu", "priority": 40}},
        "replicaSpecs": [replica("worker", 3, template(**CONTAINER))],
    }
    status = {"phase": phase, "conditions": conditions or []}
    return helpers.job("GenericJob", "g", spec, namespace="ns", status=status)


def pod(i: int, message: str | None = None, node: str | None = None, extra: list[dict] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [CONTAINER], "schedulingGroup": {"podGroupName": "g"}}
    conditions = list(extra or [])
    if node:
        spec["nodeName"] = node
        conditions.append({"type": "PodScheduled", "status": "True"})
    elif message is not None:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message})
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"g-worker-{i}",
            "uid": f"u{i}",
            # Controlled by the job, as the operator makes its pods (a bare pod is no replica).
            "ownerReferences": [{"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "name": "g",
                                 "uid": "job-uid", "controller": True}],
            "labels": {"batch.tensorstack.dev/replica-type": "worker", "batch.tensorstack.dev/replica-index": str(i)},
        },
        "spec": spec,
        "status": {"phase": "Pending", "conditions": conditions},
    }


def pod_group(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}, "disruptionMode": {"all": {}}},
        "status": {"conditions": list(conditions)},
    }


UNSCHEDULABLE = {
    "type": "PodGroupInitiallyScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": GANG_MESSAGE,
    "lastTransitionTime": "2026-11-25T09:00:00Z",
}
DISRUPTED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "PreemptionByScheduler",
    "message": "default-scheduler: preempting to accommodate a higher priority podgroup",
    "lastTransitionTime": PREEMPTED_AT,
}


def stuck_gang() -> list[dict[str, Any]]:
    return [pod(0, GANG_MESSAGE), pod(1, GANG_MESSAGE), pod(2, FIT_ERROR)]


def test_node_reasons_from_scheduler_fit_errors() -> None:
    assert node_reasons(FIT_ERROR) == "1 of 1 nodes: Insufficient cpu"
    two = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s). preemption: x"
    assert node_reasons(two) == "1 of 2 nodes: Insufficient nvidia.com/gpu; 1 of 2 nodes: node(s) had untolerated taint(s)"
    assert node_reasons("0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.") == (
        "pod has unbound immediate PersistentVolumeClaims"
    )
    assert node_reasons(GANG_MESSAGE) is None and node_reasons(None) is None


def test_a_gang_that_does_not_fit_says_how_many_fit_and_why() -> None:
    line = why(job(), stuck_gang(), pod_group(UNSCHEDULABLE))
    assert line == (
        "gang of 3 waiting: 2 of 3 fit (1 of 1 nodes: Insufficient cpu); "
        f"PodGroup g: Unschedulable: {GANG_MESSAGE}"
    )


def test_without_the_pod_group_the_count_is_inferred_from_the_pods() -> None:
    # A bound pod, one held back by its gang, one that found no node.
    pods = [pod(0, node="node-1"), pod(1, GANG_MESSAGE), pod(2, FIT_ERROR)]
    assert why(job(), pods, None) == "gang of 3 waiting: 2 of 3 fit (1 of 1 nodes: Insufficient cpu)"
    # The scheduler's own count wins where the PodGroup says it.
    pg = pod_group({**UNSCHEDULABLE, "message": "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"})
    assert gang_waiting(pods, pg).startswith("gang of 3 waiting: 0 of 3 fit")  # type: ignore[union-attr]


def test_a_gang_no_scheduler_has_tried_keeps_the_earlier_words() -> None:
    pods = [pod(i) for i in range(3)]
    assert gang_waiting(pods, pod_group()) is None
    line = why(job(), pods, pod_group())
    assert line is not None and line.startswith("g-worker-0, g-worker-1, g-worker-2 wait for the gang (PodGroup g)")
    assert gang_waiting([pod(i, node="n") for i in range(3)], pod_group(UNSCHEDULABLE)) is None


def test_a_preempted_job_says_when_from_its_condition() -> None:
    cond = {
        "type": "Preempted",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": f"preempted by higher priority at {PREEMPTED_AT} (g-worker-0, g-worker-1, g-worker-2): ...",
        "lastTransitionTime": PREEMPTED_AT,
    }
    line = why(job(conditions=[cond]), stuck_gang(), pod_group(UNSCHEDULABLE, DISRUPTED))
    assert line is not None
    assert line.startswith(f"preempted by higher priority at {PREEMPTED_AT}; gang of 3 waiting: 2 of 3 fit")
    # Rescheduled since: nothing is said about it while the job runs.
    back = {**cond, "status": "False", "reason": "Rescheduled", "lastTransitionTime": "2026-11-25T09:20:00Z"}
    running = [pod(i, node="node-1") for i in range(3)]
    for p in running:
        p["status"]["phase"] = "Running"
    assert why(job("Running", [back]), running, pod_group(DISRUPTED)) is None


def test_the_pod_group_says_preempted_before_the_operator_does() -> None:
    status = status_of(job())
    assert preempted_since(status, pod_group(DISRUPTED)) == f"preempted by higher priority at {PREEMPTED_AT}"
    assert preempted_since(status_of(job("Running")), pod_group(DISRUPTED)) is None
    other = {**DISRUPTED, "reason": "SomethingElse"}
    assert preempted_since(status, pod_group(other)) is None
    # The job's own condition, newer than the PodGroup's, wins.
    newer = {"type": "Preempted", "status": "False", "reason": "Rescheduled", "message": "",
             "lastTransitionTime": "2026-11-25T10:00:00Z"}  # fmt: skip
    assert preempted_since(status_of(job(conditions=[newer])), pod_group(DISRUPTED)) is None


@pytest.mark.parametrize("marker", [{}, {"uid": "u"}], ids=["attempt-label", "older-uid-marker"])
def test_replicas_being_recreated_after_a_preemption_are_not_called_restarts(marker: dict[str, str]) -> None:
    """The status the engine writes now (no uid) and one an older version wrote (the uid marker)."""
    raw = job(conditions=[{"type": "Preempted", "status": "True", "reason": "PreemptionByScheduler",
                           "message": "m", "lastTransitionTime": PREEMPTED_AT}])  # fmt: skip
    raw["status"]["tasks"] = [
        {"type": "worker", "replicas": [
            {"name": f"g-worker-{i}", "phase": "Creating", "reason": "PreemptionByScheduler", **marker}
            for i in range(3)
        ]}
    ]  # fmt: skip
    line = why(raw, [], None)
    assert line == (
        f"preempted by higher priority at {PREEMPTED_AT}; g-worker-0, g-worker-1, g-worker-2 preempted: "
        "recreated once the scheduler's deletion ends (no restart counted)"
    )
    assert "backoff" not in line


def test_the_pod_projection_reads_the_disruption_notice() -> None:
    notice = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
              "message": "default-scheduler: preempting to accommodate a higher priority pod"}  # fmt: skip
    p = pod(0, node="node-1", extra=[notice])
    p["status"]["phase"] = "Running"
    rs = pod_replica(p)
    assert (rs.reason, rs.message) == ("PreemptionByScheduler", notice["message"])
    cleared = pod(0, node="node-1", extra=[{**notice, "status": "False"}])
    assert pod_replica(cleared).reason is None
    evicted = pod(0, node="node-1", extra=[{**notice, "reason": "EvictionByEvictionAPI"}])
    assert pod_replica(evicted).reason is None  # not a preemption: the pod's own reason, none here


class FakeKube:
    """Answers the GETs and LISTs describe makes, as an API server would (dicts)."""

    def __init__(self, raw: dict[str, Any], pods: list[dict[str, Any]], pg: dict[str, Any] | None) -> None:
        self.raw, self.pods, self.pg = raw, pods, pg
        self.asked: list[str] = []

    async def get(self, res: Any, namespace: str | None, name: str) -> dict[str, Any]:
        self.asked.append(res.path(namespace, name))
        if res.kind == "PodGroup":
            if self.pg is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return self.pg
        return self.raw

    async def list(self, res: Any, namespace: str | None = None, *, params: dict | None = None) -> dict[str, Any]:
        return {"items": self.pods if res.kind == "Pod" else []}


def describe(pg: dict[str, Any] | None) -> tuple[list[str], FakeKube]:
    kube = FakeKube(job(), stuck_gang(), pg)
    cl = Cluster(kube, "ns", "https://example")  # type: ignore[arg-type]
    view = asyncio.run(read_view(cl, "GenericJob", "g", "ns", detail=True))
    return present.describe(view, 0.0), kube


def test_describe_reads_the_pod_group_and_says_why() -> None:
    lines, kube = describe(pod_group(UNSCHEDULABLE))
    assert "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/g" in kube.asked
    assert f"PodGroup:    g (minCount 3): PodGroupInitiallyScheduled=False Unschedulable: {GANG_MESSAGE}" in lines
    assert (
        "Why:         gang of 3 waiting: 2 of 3 fit (1 of 1 nodes: Insufficient cpu); "
        f"PodGroup g: Unschedulable: {GANG_MESSAGE}"
    ) in lines


def test_describe_without_a_served_pod_group_goes_on() -> None:
    lines, _ = describe(None)
    assert not any(line.startswith("PodGroup:") for line in lines)
    assert "Why:         gang of 3 waiting: 2 of 3 fit (1 of 1 nodes: Insufficient cpu)" in lines


@pytest.mark.parametrize("marker", [{}, {"uid": "u"}], ids=["attempt-label", "older-uid-marker"])
def test_a_counted_restart_is_named_with_the_backoff_count(marker: dict[str, str]) -> None:
    """A replica whose failed pod is being replaced (its containers ran) is ``restarting``."""
    raw = job("Running")
    raw["status"]["backoffCount"] = 1
    ran = [{"name": "c", "state": "Terminated", "exitCode": 1}]
    raw["status"]["tasks"] = [
        {"type": "worker", "replicas": [{"name": "g-worker-1", "phase": "Creating", "containers": ran, **marker}]}
    ]
    assert why(raw, [], None) == "restarting g-worker-1 (backoff count 1)"
