"""Applying the policies' decisions (:mod:`.decisions`) to a pass's :class:`~.context.Tally`.

The one place a pass's working state changes: :func:`~.reconcile.reconcile` asks each policy
for its decision and hands it here; the status is then derived from the tally once
(:func:`~.status.finish_status`)."""

from __future__ import annotations

from typing import Any

from .context import Tally
from .decisions import (
    Clock,
    CleanUp,
    Deadline,
    Ending,
    ForceDeletes,
    NodeLosses,
    Pause,
    Preemption,
    Queue,
    Replica,
    Restarts,
    Walk,
)
from .node_loss import NODE_LOST
from .progress import NO_PROGRESS, Stall
from .types import ObservedPod


def apply_deadline(t: Tally, d: Deadline) -> None:
    """When the deadline passes (a wake-up), or, once it passed, the running pods to stop (the
    pass then ends the job with the deadline's outcome: :func:`end`)."""
    t.wake(d.wake)
    for pod in d.stop:
        t.delete_pod(pod, "DeadlineExceeded")


def apply_pause(t: Tally, d: Pause) -> None:
    """The job is paused: its pods go, every replica is reported ``Deleted``, the deadline's
    clock stops (``startTime`` cleared)."""
    for pod in d.stop:
        t.delete_pod(pod, "Paused")
    t.replicas = {rs.name: rs for rs in d.replicas}
    t.start_time = None


def apply_clock(t: Tally, d: Clock) -> None:
    """The job starts: its ``startTime``, and a wake-up at its deadline."""
    t.start_time = d.start_time
    t.wake(d.wake)


def apply_node_losses(t: Tally, d: NodeLosses) -> None:
    """The pods of replicas whose node was lost on this pass are deleted, each said once."""
    for pod, event in d.pods:
        t.delete_pod(pod, NODE_LOST)
        t.plan.events.append(event)


def apply_force_deletes(t: Tally, d: ForceDeletes) -> None:
    """Pods on a lost node past their grace period, force-deleted whoever deleted them first: they
    are being deleted already, so no other decision deletes them (:meth:`Tally.delete_pod` skips
    those); and a wake-up for the next node-loss decision."""
    for delete, event in d.deletes:
        t.plan.delete.append(delete)
        t.plan.events.append(event)
    t.wake(d.wake)


def apply_no_progress(t: Tally, stall: Stall, stop: tuple[ObservedPod, ...] = ()) -> None:
    """The job made no progress (:mod:`.progress`): its replicas' stacks are dumped first, the
    stall said (the job's ending says it when it fails), and ``stop``'s pods deleted."""
    t.stalled = True
    t.plan.dump_stacks = tuple(pod.name for pod, _, _ in stall.silent)
    if not stop:
        t.plan.events.append(stall.event)
    for pod in stop:
        t.delete_pod(pod, NO_PROGRESS)


def apply_walk(t: Tally, walk: Walk, unjudged: tuple[tuple[str, int], ...] = ()) -> None:
    """The replicas as classified: their statuses, pods to create and delete, ends, events. The
    ends of ``unjudged`` replicas (``(type, index)``: a preemption relaunches them, :func:`apply_preemption`)
    are neither final nor restarts."""
    for r in walk.replicas:
        _replica(t, r)
        if r.create:
            t.creates.append((r.group, r.index))
        if r.preempted:
            t.preempted.append(r.name)
        judged = (r.group.type, r.index) not in unjudged
        if judged and r.restart is not None:
            t.restarts.append((r.group, r.index, r.restart, r.counted))
        if judged and r.fails_job is not None and t.fails_job is None:
            t.fails_job = r.fails_job
        if judged and r.final is not None:
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
    """The replicas a preemption relaunches with it, uncounted (their ends were left unjudged:
    :func:`apply_walk`), and its event."""
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


def apply_creates(t: Tally, pods: tuple[dict[str, Any], ...]) -> None:
    """The replica pods to create (:func:`~.desired.replica_pods`), after the other children."""
    t.plan.create.extend(pods)


def apply_clean_up(t: Tally, d: CleanUp) -> None:
    """A finished job's clean-up: its pods to delete, its wake-up, its replicas as reported."""
    for pod in d.pods:
        t.delete_pod(pod, "CleanUp")
    t.wake(d.wake)
    t.replicas = {rs.name: rs for rs in d.replicas}


def end(t: Tally, d: Ending) -> str:
    """End the job: set ``completionTime``, drop the wake-ups asked for so far (a deadline's, a
    conflict's recheck; the clean-up may ask for its own), clean up, and say how it ended.
    Returns the phase. The replicas it wanted created are never made: :func:`~.reconcile.decide`
    returns before it builds their pods."""
    t.completion_time = d.completion_time
    t.plan.requeue_after = None
    apply_clean_up(t, d.clean_up)
    t.plan.events.append(d.event)
    for release in d.release:
        if all((x.kind, x.name) != (release.kind, release.name) for x in t.plan.delete):
            t.plan.delete.append(release)
    return d.phase


def _replica(t: Tally, r: Replica) -> None:
    if r.delete is not None and r.pod is not None:
        t.delete_pod(r.pod, r.delete)
    t.replicas[r.name] = r.status
