"""``describe``'s why of a job whose replica's node was lost (issue 25; engine/node_loss.py).

The job objects are shaped as the operator writes them: the replica being replaced keeps the
lost pod's reason ``NodeLost`` and message; a ``Never`` replica ends ``Failed`` with them."""

from __future__ import annotations

from typing import Any

from t9k_jobs.sdk import present
from t9k_jobs.sdk.cluster_api import raw_view
from tests import helpers
from tests.helpers import replica, template

LOST = "node t9k-node-2 unreachable since 2026-11-27T03:00:00Z, over the 60 s limit"


def job(phase: str, replicas: list[dict[str, Any]], conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec = {"replicaSpecs": [replica("worker", 2, template(name="c", image="x"))]}
    status = {"phase": phase, "backoffCount": 1, "conditions": conditions or [],
              "tasks": [{"type": "worker", "restartCount": 1, "replicas": replicas}]}  # fmt: skip
    return helpers.job("GenericJob", "g", spec, namespace="ns", status=status)


def test_a_replica_lost_with_its_node_says_which_node_since_when_and_what_follows():
    replicas = [
        {"name": "g-worker-0", "phase": "Running", "uid": "u0", "restartCount": 0},
        {"name": "g-worker-1", "phase": "Creating", "restartCount": 1, "reason": "NodeLost", "message": LOST,
         "containers": [{"name": "c", "state": "Terminated", "reason": "NodeLost", "message": LOST}]},
    ]  # fmt: skip
    why = present.why(raw_view(job("Running", replicas), [], None, detail=True))
    assert why is not None and why.startswith(f"g-worker-1 lost with its node ({LOST})"), why
    assert "force-deleted once its grace period has passed" in why and "restart 1" in why


def test_a_job_failed_by_a_lost_node_names_it():
    replicas = [{"name": "g-worker-1", "phase": "Failed", "restartCount": 0, "reason": "NodeLost", "message": LOST}]
    failed = {"type": "Failed", "status": "True", "reason": "Failed", "message": "replica g-worker-1 failed (NodeLost)"}
    why = present.why(raw_view(job("Failed", replicas, [failed]), [], None, detail=True))
    assert why is not None and f"g-worker-1: Failed (NodeLost: {LOST})" in why, why
