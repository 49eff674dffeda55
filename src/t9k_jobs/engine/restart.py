"""Restart policy and backoff [§1.4]: whether an ended replica may restart, and restarting it."""

from __future__ import annotations

from ..api.common import ReplicaStatus
from ..frameworks import ReplicaGroup
from .context import Pass, task_of
from .replica_status import from_pod


def may_restart(p: Pass, g: ReplicaGroup, rc: int, retryable: bool) -> bool:
    """Whether a retryable end may restart: the per-replica ``limit`` and the shared backoff."""
    if not retryable:
        return False
    if g.limit is not None and rc >= g.limit:
        return False
    if g.backoff_limit is not None:
        planned = len(p.restarts) if p.fw.restart_scope == "replica" else min(1, len(p.restarts))
        if p.status.backoff_count + planned >= g.backoff_limit:
            return False
    return True


def apply_restarts(p: Pass) -> None:
    """Delete the pods to restart and count the restarts; the next pass creates them again.

    With restart scope ``all`` (DeepSpeedJob) one failure restarts every replica and counts
    one backoff.
    """
    if not p.restarts:
        return
    todo = p.restarts
    if p.fw.restart_scope == "all":
        why = todo[0][2]
        todo = [(g, i, why) for g in p.groups for i in range(g.replicas)]
        p.status.backoff_count += 1
        # Every replica starts again, those that ended for good on this pass too (a rank that
        # exited 1 beside one killed with 137, when the kind's outcome did not end the job on
        # it): none is final any more, so ReplicaFailure does not name one on this pass and
        # forget it on the next (found by tests/engine/test_properties.py's convergence check).
        p.finals.clear()
    for g, i, why in todo:
        name = g.pod_name(p.job.name, i)
        pod = p.observed.pods.get(name)
        if p.fw.restart_scope == "replica":
            p.status.backoff_count += 1
        task = task_of(p.status, g.type)
        task.restart_count += 1
        prev = p.replicas.get(name)
        rc = (prev.restart_count if prev else 0) + 1
        # Keep what the pod showed so a later pass reporting the same pod writes the same status.
        marker = (
            from_pod(pod, rc).model_copy(update={"uid": pod.uid})
            if pod is not None
            else ReplicaStatus(name=name, phase="Creating", restart_count=rc)
        )
        p.replicas[name] = marker.model_copy(update={"phase": "Creating"})
        p.creates = [(cg, ci) for cg, ci in p.creates if (cg.type, ci) != (g.type, i)]
        if pod is not None:
            p.delete_pod(pod, "Restart")
        else:
            p.creates.append((g, i))
        p.event("Normal", "RestartingReplica", f"restarting {name} ({why}); backoff count {p.status.backoff_count}")
