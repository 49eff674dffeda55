"""Where a queued job stands (issue 43, part 5; :mod:`t9k_jobs.sdk.queue_position`): the line
``describe`` says and the ``N/M`` of ``get -o wide``, read from a PendingWorkloadsSummary shaped as
Kueue v0.17's visibility API answers (``apis/visibility/v1beta2/types.go``). The API itself, in
Kueue's manager on the real node: tests/node/test_kueue.py."""

from __future__ import annotations

from t9k_jobs.sdk.present import why
from t9k_jobs.sdk.queue_position import _queued, place, position_line

PENDING = {
    "kind": "PendingWorkloadsSummary",
    "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
    "items": [
        {"metadata": {"name": "first", "namespace": "ns"}, "priority": 50, "localQueueName": "team-a",
         "positionInClusterQueue": 3, "positionInLocalQueue": 0},
        {"metadata": {"name": "second", "namespace": "ns"}, "priority": 10, "localQueueName": "team-a",
         "positionInClusterQueue": 5, "positionInLocalQueue": 1},
    ],
}  # fmt: skip


def test_the_place_is_counted_from_one_of_the_pending_workloads() -> None:
    assert place(PENDING, "second") == (2, 2)
    assert position_line(PENDING, "first", "team-a", "cq") == "position 1 of 2 in LocalQueue team-a (ClusterQueue cq)"
    assert position_line(PENDING, "first", "team-a", None) == "position 1 of 2 in LocalQueue team-a"
    assert place(PENDING, "admitted-meanwhile") is None and place({}, "x") is None
    assert place({"items": [{"metadata": {"name": "x"}, "positionInLocalQueue": "?"}]}, "x") is None


def test_only_a_job_whose_queued_condition_is_true_is_looked_up() -> None:
    def raw(status: str, queue: str | None = "team-a") -> dict:
        sched = {"t9kScheduler": {"queue": queue}} if queue is not None else {"t9kScheduler": {}}
        return {"spec": {"scheduler": sched}, "status": {"conditions": [{"type": "Queued", "status": status}]}}

    assert _queued(raw("True")) == "team-a" and _queued(raw("True", None)) == "default"
    assert _queued(raw("False")) is None and _queued({"spec": {}}) is None


def test_describe_says_it_after_kueues_own_words() -> None:
    from t9k_jobs.api.common import Condition, JobStatus
    from t9k_jobs.sdk.view import JobView

    status = JobStatus(phase="Pending", conditions=[Condition(type="Queued", status="True", reason="Pending",
                                                              message="waiting in LocalQueue team-a: insufficient quota")])  # fmt: skip
    view = JobView(target="cluster", kind="GenericJob", name="second", namespace="ns", phase="Pending", status=status,
                   created=None, replicas=1, running=0, load_job=lambda: None, load_spec=dict, load_object=dict,
                   source={}, queue_position="position 2 of 2 in LocalQueue team-a (ClusterQueue cq)")  # fmt: skip
    assert why(view) == ("waiting in LocalQueue team-a: insufficient quota; "
                         "position 2 of 2 in LocalQueue team-a (ClusterQueue cq)")  # fmt: skip
