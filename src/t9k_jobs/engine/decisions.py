"""What the policies decide: small frozen values that :func:`~.reconcile.reconcile` applies.

Each policy reads the pass (:class:`~.context.Pass`) and the replicas as classified
(:class:`Walk`) and returns one of these; none changes the pass or the status. The status is
derived once, from what was applied, at the end of the pass (:func:`~.status.finish_status`), as
JobSet's ``executeFailurePolicy``/``executeSuccessPolicy`` read the classified child Jobs and
make one status update.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api.common import ReplicaStatus
from ..frameworks import Final, Outcome, ReplicaGroup
from .types import Delete, Event, ObservedPod


@dataclass(frozen=True)
class Replica:
    """One desired replica as the walk classified it (:func:`~.replicas.classify`).

    ``status``: its status on this pass; ``pod``: its pod, if one exists; ``delete``: the reason
    to delete that pod (``Restart``, ``Preempted``, ``Relaunch``), ``None`` to leave it;
    ``create``: make its pod; ``replacing``: its pod is the one being replaced, on its way out;
    ``preempted``: the scheduler's preemption took it on this pass; ``restart``: it ended (or
    its pod was deleted) and may restart, and why; ``counted``: that restart counts against the
    job's backoff (not a disruption's, nor a ``RestartIgnoringBackoff`` rule's:
    :mod:`.failure_policy`); ``final``: it ended for good; ``fails_job``: a failure rule fails the
    job on it, the message why; ``event``: one event to emit about it.
    """

    group: ReplicaGroup
    index: int
    status: ReplicaStatus
    pod: ObservedPod | None = None
    delete: str | None = None
    create: bool = False
    replacing: bool = False
    preempted: bool = False
    restart: str | None = None
    final: Final | None = None
    event: Event | None = None
    counted: bool = True
    fails_job: str | None = None

    @property
    def name(self) -> str:
        return self.status.name


@dataclass(frozen=True)
class Walk:
    """Every desired replica, classified, in replica order; ``strays``: pods of replicas no longer
    desired (scaled away), to delete."""

    replicas: tuple[Replica, ...]
    strays: tuple[ObservedPod, ...] = ()


@dataclass(frozen=True)
class Preemption:
    """What a preemption on this pass asks of the other replicas (:func:`~.preemption.preemption`).

    ``unjudged``: ``(type, index)`` of replicas whose end on this pass is not judged (restart
    scope ``all``: their ranks lost a peer); ``relaunched``: replicas relaunched with the
    preempted ones, uncounted (their pod deleted, reason ``Preempted``); ``event``: the Normal
    ``Preempted`` event, when the job's ``Preempted`` condition is about to turn True.
    """

    unjudged: tuple[tuple[str, int], ...] = ()
    relaunched: tuple[Replica, ...] = ()
    event: Event | None = None


@dataclass(frozen=True)
class Restart:
    """One replica to restart: its new status (``Creating``, its restart count raised), its pod to
    delete (``None``: gone already, so it is created at once), why, and ``backoffCount`` after
    it (for the event)."""

    group: ReplicaGroup
    index: int
    status: ReplicaStatus
    pod: ObservedPod | None
    why: str
    backoff_count: int


@dataclass(frozen=True)
class Restarts:
    """The restarts of a pass (:func:`~.restart.restarts`): ``every`` with restart scope ``all``
    (every replica restarts, none is final any more); ``backoff_count`` the job's after them."""

    replicas: tuple[Restart, ...]
    backoff_count: int
    every: bool = False


@dataclass(frozen=True)
class CleanUp:
    """Pods of a finished job to delete by its clean-up policy, when to look again (the
    ``Unfinished`` grace), ``None`` for no wake-up, and every replica's status as a finished job
    reports it (:func:`~.clean_up.clean_up`)."""

    pods: tuple[ObservedPod, ...] = ()
    wake: float | None = None
    replicas: tuple[ReplicaStatus, ...] = ()


@dataclass(frozen=True)
class Ending:
    """The job ends on this pass with ``outcome`` (:func:`~.outcome.ending`): its terminal
    ``phase``, ``completionTime``, clean-up and one event saying how it ended; ``release``: its
    queue's Workload to delete, giving its quota back at once (:mod:`~.admission`), and its
    gang's disruption budget. An ending pass
    makes no replica pod: the pass turns the replicas it wants created into pods only when the job
    goes on (:func:`~.reconcile.decide`)."""

    outcome: Outcome
    phase: str
    completion_time: str
    clean_up: CleanUp
    event: Event
    release: tuple[Delete, ...] = ()


@dataclass(frozen=True)
class Deadline:
    """``activeDeadlineSeconds`` on this pass (:func:`~.deadline.deadline`): the
    ``DeadlineExceeded`` outcome and the running pods to stop once it passed; before that, when
    it passes (``wake``); all empty without a deadline or a clock."""

    outcome: Outcome | None = None
    stop: tuple[ObservedPod, ...] = ()
    wake: float | None = None


@dataclass(frozen=True)
class Clock:
    """The job starts on this pass (:func:`~.deadline.start_clock`): its ``startTime``, and when its
    deadline passes (``wake``, ``None`` without one)."""

    start_time: str
    wake: float | None = None


@dataclass(frozen=True)
class Pause:
    """The job is paused (:func:`~.run_mode.paused`): its pods to delete and every replica's status
    (``Deleted``); its ``startTime`` is cleared."""

    stop: tuple[ObservedPod, ...]
    replicas: tuple[ReplicaStatus, ...]


@dataclass(frozen=True)
class Queue:
    """The job waits for its queue's admission (:func:`~.admission.admission`): its pods to delete
    (reason ``Evicted`` when ``evicted``, else ``NotAdmitted``), every replica's status
    (``Creating``), and the evicted Workload to delete once its pods are gone (``requeue``)."""

    stop: tuple[ObservedPod, ...]
    replicas: tuple[ReplicaStatus, ...]
    requeue: Delete | None = None
    evicted: bool = False


@dataclass(frozen=True)
class NodeLosses:
    """Replicas whose node was lost on this pass (:func:`~.node_loss.losses`): each pod to delete
    (reason ``NodeLost``) with its Warning event."""

    pods: tuple[tuple[ObservedPod, Event], ...] = ()


@dataclass(frozen=True)
class ForceDeletes:
    """Pods being deleted on a lost node past their grace period (:func:`~.node_loss.force_deletes`):
    each forced delete with its Warning ``ForceDeleted`` event, whatever the job's phase; ``wake``:
    when the next node-loss decision comes (a node reaching the limit, a grace period passing)."""

    deletes: tuple[tuple[Delete, Event], ...] = ()
    wake: float | None = None
