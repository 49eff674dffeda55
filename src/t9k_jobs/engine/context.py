"""What one reconcile pass reads (:class:`Pass`), what it has decided so far (:class:`Tally`),
the engine's constants, and its clock.

A pass reads the job, what exists and ``now``; each policy (one module each) reads them and the
classified replicas and returns a decision (:mod:`.decisions`); :func:`~.reconcile.reconcile`
applies the decisions to the tally, and the status is derived from the tally once, at the end
(:func:`~.status.finish_status`). Nothing here does I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

from ..api.common import JobStatus, ReplicaStatus
from ..api.kinds import JobBase
from ..frameworks import BuildContext, Final, Framework, ReplicaGroup
from .runtime import Runtime
from .types import Delete, Event, Observed, ObservedPod, Plan

ACTIVE = frozenset({"Creating", "Pending", "Running", "Unknown"})
CONFLICT_RECHECK = 30.0  # seconds between looks at a child name held by someone else
UNFINISHED_GRACE = 5.0  # seconds a finished job's running replicas get to end by themselves (cleanUpPolicy Unfinished)
#: Terminated reasons that say no more than the exit code (the kubelet's: 0 Completed, else Error);
#: failure messages and restart events leave them out.
PLAIN_REASONS = frozenset({"Completed", "Error"})
#: Waiting reasons of a container on its ordinary way to running: not reported as a problem.
BENIGN_WAITING = frozenset({"ContainerCreating", "PodInitializing"})
#: Waiting reasons the kubelet alternates between for one cause: one cause, one event.
SAME_CAUSE = {"ImagePullBackOff": "ErrImagePull"}
#: Longest reason message kept in the status (a scheduler's or a start error's can be long).
MESSAGE_LIMIT = 512


def rfc3339(now: float) -> str:
    """``now`` (seconds since the epoch) as an RFC 3339 UTC timestamp with second precision."""
    return datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> float:
    """Inverse of :func:`rfc3339`; raises ``ValueError`` on another format."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


@dataclass(frozen=True)
class Pass:
    """What one reconcile pass reads: the job, its framework and replica groups, what exists,
    ``now``, the build context, the status stored by the previous pass (``old``), the runtime,
    whether the job goes through a queue (``queues``: :func:`~.admission.in_queue`) and the
    children other than pods the job owns. Made once per pass (:func:`~.reconcile.begin`);
    policies read it; none changes it."""

    job: JobBase
    fw: Framework
    groups: list[ReplicaGroup]
    observed: Observed
    now: float
    ctx: BuildContext
    old: JobStatus
    runtime: Runtime
    queues: bool = False
    owned: list[dict[str, Any]] = field(default_factory=list)

    def prior(self, name: str) -> ReplicaStatus | None:
        """Replica ``name``'s status as the previous pass stored it."""
        for task in self.old.tasks:
            for rs in task.replicas:
                if rs.name == name:
                    return rs
        return None

    def desired(self) -> Iterator[tuple[ReplicaGroup, int, str]]:
        """Every desired replica as ``(group, index, pod name)``, in replica order."""
        for g in self.groups:
            for i in range(g.replicas):
                yield g, i, g.pod_name(self.job.name, i)


@dataclass
class Tally:
    """The one accumulator of a pass: :func:`~.reconcile.reconcile` applies each policy's
    decision here, and the job's status is derived from it once, at the end.

    ``plan``: what the runtime is to do (its ``status`` is set last); ``replicas``: each replica's
    status; ``finals``: replicas that ended for good; ``restarts``: replicas that ended and may
    restart, with why; ``creates``: replicas whose pod is to be created; ``preempted``: replicas
    taken by the scheduler's preemption on this pass; ``queued``: whether the job waits
    for its queue's admission (:mod:`.admission`); then the counters and times of
    the status.
    """

    plan: Plan
    start_time: str | None
    completion_time: str | None
    backoff_count: int
    task_restarts: dict[str, int]
    replicas: dict[str, ReplicaStatus] = field(default_factory=dict)
    finals: dict[tuple[str, int], Final] = field(default_factory=dict)
    #: ``(group, index, why, counted)``: counted against the backoff (:mod:`.failure_policy`).
    restarts: list[tuple[ReplicaGroup, int, str, bool]] = field(default_factory=list)
    creates: list[tuple[ReplicaGroup, int]] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    #: The job waits for its queue's admission on this pass (:mod:`.admission`).
    queued: bool = False
    #: The job made no progress by its deadline on this pass (:mod:`.progress`).
    stalled: bool = False
    #: A failure rule fails the job on this pass: why (:mod:`.failure_policy`).
    fails_job: str | None = None

    @classmethod
    def of(cls, old: JobStatus) -> Tally:
        return cls(
            Plan(),
            old.start_time,
            old.completion_time,
            old.backoff_count,
            {t.type: t.restart_count for t in old.tasks},
        )

    def delete_pod(self, pod: ObservedPod, reason: str) -> None:
        """Delete ``pod`` (UID precondition) unless it is on its way out or already to be deleted."""
        if not pod.deleting and all((d.kind, d.name) != ("Pod", pod.name) for d in self.plan.delete):
            self.plan.delete.append(Delete("Pod", pod.name, pod.uid, reason))

    def deletes_pod(self, name: str) -> bool:
        """Whether this pass deletes pod ``name``."""
        return any((d.kind, d.name) == ("Pod", name) for d in self.plan.delete)

    def event(self, type_: str, reason: str, message: str) -> None:
        self.plan.events.append(Event(type_, reason, message))  # type: ignore[arg-type]

    def wake(self, seconds: float | None) -> None:
        """Ask to look again in ``seconds`` (the earliest of the wake-ups asked for wins)."""
        if seconds is not None:
            self.plan.requeue_after = min(self.plan.requeue_after or seconds, seconds)
