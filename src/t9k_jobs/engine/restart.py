"""Restart policy and backoff [§1.4]: whether an ended replica may restart, and which restart.

A restart raises the replica's restart count; its new pod carries that count as its restart
attempt (the ``restart-generation`` label), so the old pod, of an earlier attempt, is known as
the one being replaced by its label alone, on every later pass, whatever the status says."""

from __future__ import annotations

from ..api.common import ReplicaStatus
from ..frameworks import ReplicaGroup
from .context import Pass, Tally
from .decisions import Restart, Restarts
from .replica_status import on_its_way_out


def may_restart(
    p: Pass, g: ReplicaGroup, rc: int, retryable: bool, backoff_count: int, planned: int, counted: bool = True
) -> bool:
    """Whether a retryable end may restart: the per-replica ``limit`` and, for a restart that
    ``counted`` against it, the shared backoff (``backoff_count`` before this pass, ``planned``
    restarts decided earlier on it)."""
    if not retryable:
        return False
    if g.limit is not None and rc >= g.limit:
        return False
    if g.backoff_limit is not None and counted:
        planned = planned if p.fw.restart_scope == "replica" else min(1, planned)
        if backoff_count + planned >= g.backoff_limit:
            return False
    return True


def restarts(p: Pass, t: Tally) -> Restarts | None:
    """The replicas to restart, from those that ended and may (``t.restarts``); ``None`` if none.

    Each pod is deleted and the restart counted now; the next pass creates the new pod. With
    restart scope ``all`` (DeepSpeedJob) one failure restarts every replica and counts one backoff.
    """
    if not t.restarts:
        return None
    todo = t.restarts
    every = p.fw.restart_scope == "all"
    backoff = t.backoff_count
    if every:
        why, counted = todo[0][2], any(c for _, _, _, c in todo)
        todo = [(g, i, why, counted) for g in p.groups for i in range(g.replicas)]
        backoff += counted
    out: list[Restart] = []
    for g, i, why, counted in todo:
        name = g.pod_name(p.job.name, i)
        pod = p.observed.pods.get(name)
        if not every and counted:
            backoff += 1
        prev = t.replicas.get(name)
        rc = (prev.restart_count if prev else 0) + 1
        # Keep what the pod showed, so a later pass reporting the same pod writes the same status.
        if pod is not None:
            status = on_its_way_out(pod, rc)
        else:
            status = ReplicaStatus(name=name, phase="Creating", restart_count=rc)
        out.append(Restart(g, i, status, pod, why, backoff))
    return Restarts(tuple(out), backoff, every)

