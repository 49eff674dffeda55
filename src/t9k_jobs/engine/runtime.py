"""The runtime the engine decides for: what it can carry out, fixed for its life.

:func:`~.reconcile.reconcile` takes one :class:`Runtime` beside the job, what exists
(:class:`~.types.Observed`, which says only that) and ``now``. The operator builds its Runtime
once, at start-up, from what its API server serves (it restarts itself when that changes:
:mod:`t9k_jobs.cluster.operator`); ``render`` passes a cluster with T9k's PodGroup, or the gang
mode it is asked for; the local runner passes its addressing, its launcher and the kinds it does
not serve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..addressing import Addressing, ClusterAddressing
from ..frameworks.types import GANG_MODES, GangMode, Launcher

#: The default of ``--node-lost-after``: seconds a node is unreachable before its replicas are lost.
NODE_LOST_AFTER = 60.0


@dataclass(frozen=True)
class Runtime:
    """What a runtime can carry out.

    ``addressing``: how replicas reach each other (Kubernetes Services by default; the local
    runtime passes its own). ``launcher``: how launches over ssh start (``None``: pods, as on a
    cluster). ``gang``: how it carries out ``spec.scheduler.t9kScheduler`` (:data:`GangMode`):
    ``t9k`` (T9k's PodGroup, the default, as ``render`` assumes), ``native``
    (``scheduling.k8s.io/v1beta1`` PodGroup) or ``none`` (default scheduler; the job gets a
    ``GangScheduling`` condition and one Warning); another value raises ``ValueError``.
    ``queueing``: whether it queues ``t9kScheduler`` jobs through Kueue (its Workload API is
    served): such a job gets a Workload and no pod until it is admitted (:mod:`.admission`).
    ``unserved``: kinds of optional children it does not serve (no TensorBoard CRD, a local run
    without the ``tensorboard`` package): never planned and never waited for (``Initialized``
    does not count them; ``status.tensorboard`` says it is unavailable); it leaves them out of
    :attr:`~.types.Observed.others`; a job that asks for one gets a ``TensorBoardUnavailable``
    Warning event once, with ``unserved_hint`` (why, and what to do). ``node_lost_after``: seconds a node stays unreachable before
    the replicas on it count as lost (reason ``NodeLost``: :mod:`.node_loss`); the operator's
    ``--node-lost-after``. ``ttl_after_finished``: seconds a finished job is kept when its own
    annotation does not say (:mod:`.ttl`; the operator's ``--ttl-after-finished``), ``None``: kept.
    """

    addressing: Addressing = field(default_factory=ClusterAddressing)
    launcher: Launcher | None = None
    gang: GangMode = "t9k"
    queueing: bool = False
    unserved: frozenset[str] = frozenset()
    node_lost_after: float = NODE_LOST_AFTER
    unserved_hint: str = "TensorBoards are not served here"
    ttl_after_finished: int | None = None
    #: Every pod runs on one machine (a local run): a job's topology always holds (:mod:`.topology`).
    one_node: bool = False

    def __post_init__(self) -> None:
        if self.gang not in GANG_MODES:
            raise ValueError(f"gang mode {self.gang!r} is not one of {', '.join(GANG_MODES)}")
