"""Applying the policies' decisions (:mod:`.decisions`) to a pass's :class:`~.context.Tally`.

The one place a pass's working state changes: :func:`~.reconcile.reconcile` asks each policy
for its decision and hands it here; the status is then derived from the tally once
(:func:`~.status.finish_status`)."""

from __future__ import annotations

from .context import Tally
from .decisions import CleanUp, Ending, Preemption, Queue, Replica, Restarts, Walk


def apply_walk(t: Tally, walk: Walk) -> None:
    """The replicas as classified: their statuses, pods to create and delete, ends, events."""
    for r in walk.replicas:
        _replica(t, r)
        if r.create:
            t.creates.append((r.group, r.index))
        if r.preempted:
            t.preempted.append(r.name)
        if r.restart is not None:
            t.restarts.append((r.group, r.index, r.restart))
        if r.final is not None:
            t.finals[(r.group.type, r.index)] = r.final
        if r.event is not None:
            t.plan.events.append(r.event)
    for pod in walk.strays:
        t.delete_pod(pod, "ScaledDown")


def apply_queue(t: Tally, d: Queue) -> None:
    """The job waits for its queue: its pods go, its replicas wait, the deadline's clock stops, an
    evicted Workload whose pods are gone is deleted (its quota given back; the next pass queues a
    new one)."""
    for pod in d.stop:
        t.delete_pod(pod, "Evicted" if d.evicted else "NotAdmitted")
    t.replicas = {rs.name: rs for rs in d.replicas}
    t.start_time = None
    t.queued = True
    if d.requeue is not None:
        t.plan.delete.append(d.requeue)


def apply_preemption(t: Tally, d: Preemption) -> None:
    """The replicas a preemption relaunches with it, unjudged and uncounted, and its event."""
    for type_, i in d.unjudged:
        t.finals.pop((type_, i), None)
        t.restarts = [r for r in t.restarts if (r[0].type, r[1]) != (type_, i)]
    for r in d.relaunched:
        _replica(t, r)
        if r.create:
            t.creates.append((r.group, r.index))
    if d.event is not None:
        t.plan.events.append(d.event)


def apply_restarts(t: Tally, d: Restarts) -> None:
    """Count the restarts, delete the pods to restart (or create those already gone), say so."""
    t.backoff_count = d.backoff_count
    if d.every:
        # Every replica starts again, those that ended for good on this pass too (a rank that
        # exited 1 beside one killed with 137, when the kind's outcome did not end the job on
        # it): none is final any more, so ReplicaFailure does not name one on this pass and
        # forget it on the next (found by tests/engine/test_properties.py's convergence check).
        t.finals.clear()
    for x in d.replicas:
        t.task_restarts[x.group.type] = t.task_restarts.get(x.group.type, 0) + 1
        t.replicas[x.status.name] = x.status
        t.creates = [(g, i) for g, i in t.creates if (g.type, i) != (x.group.type, x.index)]
        if x.pod is not None:
            t.delete_pod(x.pod, "Restart")
        else:
            t.creates.append((x.group, x.index))
        message = f"restarting {x.status.name} ({x.why}); backoff count {x.backoff_count}"
        t.event("Normal", "RestartingReplica", message)


def apply_clean_up(t: Tally, d: CleanUp) -> None:
    for pod in d.pods:
        t.delete_pod(pod, "CleanUp")
    t.wake(d.wake)


def end(t: Tally, d: Ending) -> str:
    """End the job: set ``completionTime``, drop a deadline's wake-up (the clean-up may ask for its
    own) and the pods still to be made, clean up, and say how it ended. Returns the phase."""
    t.completion_time = d.completion_time
    t.plan.requeue_after = None
    t.creates.clear()
    t.plan.create = [o for o in t.plan.create if o["kind"] != "Pod"]
    apply_clean_up(t, d.clean_up)
    t.plan.events.append(d.event)
    if d.release is not None and all((x.kind, x.name) != ("Workload", d.release.name) for x in t.plan.delete):
        t.plan.delete.append(d.release)
    return d.phase


def _replica(t: Tally, r: Replica) -> None:
    if r.delete is not None and r.pod is not None:
        t.delete_pod(r.pod, r.delete)
    t.replicas[r.name] = r.status
