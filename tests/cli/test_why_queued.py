"""``describe`` and ``get -o wide`` of a job queued through Kueue (issue 24).

The job objects are shaped as the operator writes them (engine/admission.py): a ``Queued``
condition, True with Kueue's words while the job waits, False once admitted."""

from __future__ import annotations

from typing import Any

from t9k_jobs.sdk import present
from t9k_jobs.sdk.cluster_api import raw_view
from tests import helpers
from tests.helpers import replica, template

MISSING = "waiting in LocalQueue team-a: LocalQueue team-a doesn't exist"


def job(conditions: list[dict[str, Any]], sched: dict[str, Any] | None = None, phase: str = "Pending") -> dict[str, Any]:
    spec: dict[str, Any] = {"replicaSpecs": [replica("worker", 2, template(name="c", image="x"))]}
    if sched is not None:
        spec["scheduler"] = {"t9kScheduler": sched}
    status = {"phase": phase, "conditions": conditions}
    return helpers.job("GenericJob", "g", spec, namespace="ns", status=status)


def queued(status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": "Queued", "status": status, "reason": reason, "message": message}


def test_a_job_kueue_has_not_admitted_says_kueues_words():
    raw = job([queued("True", "Inadmissible", MISSING)], {"queue": "team-a", "priority": 40})
    assert present.why(raw_view(raw, [], None, detail=True)) == MISSING


def test_an_admitted_job_says_why_as_any_other():
    raw = job([queued("False", "Admitted", "admitted by ClusterQueue cq from LocalQueue team-a")], {"queue": "team-a"})
    assert present.why(raw_view(raw, [], None, detail=True)) == "Pending: no pods yet"


def test_the_row_has_the_queue_and_priority():
    cells = present.row(raw_view(job([], {"queue": None, "priority": 7}), [], None), now=0.0)
    assert (cells["wide"]["queue"], cells["wide"]["priority"]) == ("default", 7)
    cells = present.row(raw_view(job([]), [], None), now=0.0)
    assert (cells["wide"]["queue"], cells["wide"]["priority"]) == (None, None)


def test_a_job_whose_pod_group_the_api_server_refused_says_so():
    """Issue 41: ``Why:`` said ``Creating`` while the cause was only in the event list below it."""
    raw = job([], {"queue": "team-a"})
    events = [
        {"type": "Normal", "reason": "Created", "message": "created service g-worker-0", "lastTimestamp": "2026-12-04T10:00:00Z",
         "involvedObject": {"kind": "GenericJob", "name": "g"}},
        {"type": "Warning", "reason": "FailedCreatePodGroup", "lastTimestamp": "2026-12-04T10:00:01Z",
         "message": "cannot create podgroup g: admission webhook denied the request: queue team-a is closed",
         "involvedObject": {"kind": "GenericJob", "name": "g"}},
    ]  # fmt: skip
    assert present.why(raw_view(raw, [], None, events, detail=True)) == (
        "cannot create podgroup g: admission webhook denied the request: queue team-a is closed (FailedCreatePodGroup)"
    )
    assert present.why(raw_view(raw, [], None, events[:1], detail=True)) == "Pending: no pods yet"
