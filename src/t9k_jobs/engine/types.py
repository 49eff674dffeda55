"""Inputs and outputs of the reconcile engine.

The engine sees the world as an :class:`Observed` snapshot (slim projections of the job's
pods plus the names of its other children: what exists, nothing of what the runtime can do,
which is its :class:`~.runtime.Runtime`) and answers with a :class:`Plan`. Both runtimes, the
Kubernetes operator and the local process supervisor, build the snapshot and carry out the
plan; neither decides behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..api.common import JobStatus
from ..frameworks.base import LABEL_RESTART_GENERATION

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]

#: The reason of a pod's ``DisruptionTarget`` condition when the scheduler evicts it to make room
#: for higher-priority pods or pod groups (k8s.io/api v0.37.2 core/v1 ``PodReasonPreemptionByScheduler``;
#: the scheduler sets it, then deletes the pod: ``pkg/scheduler/framework/preemption/executor.go``).
#: The same reason marks a native PodGroup preempted as a unit (scheduling/v1beta1 ``PodGroupStatus``).
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


@dataclass(frozen=True)
class ContainerState:
    """One container of a pod, as the kubelet reports it in ``containerStatuses``.

    ``state``: Waiting/Running/Terminated/Unknown. ``exit_code``: when Terminated.
    ``reason``/``message``: the waiting reason and message (``ErrImageNeverPull``,
    ``Container image "x" is not present with pull policy of Never``) or the terminated reason
    and message (``Completed``, ``Error``, ``OOMKilled``, ``StartError``...).
    """

    name: str
    state: Literal["Waiting", "Running", "Terminated", "Unknown"]
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None


def restart_attempt_label(labels: dict[str, str]) -> int | None:
    """The restart attempt a pod's labels carry (its ``restart-generation`` label, a name kept
    on pods as an on-cluster contract), ``None`` when absent or not a number."""
    value = labels.get(LABEL_RESTART_GENERATION)
    return int(value) if value is not None and value.isdigit() else None


@dataclass(frozen=True)
class ObservedPod:
    """A slim projection of a replica pod, as the cache keeps it.

    ``replica_type``/``index`` come from the pod's labels; ``phase`` is the phase the kubelet
    reported (read :attr:`effective_phase` and :attr:`terminal`, not this); ``containers`` are
    the pod's containers (``spec.containers``), ``init_containers`` its init containers;
    ``deleting`` is true once a deletion timestamp is set; ``scheduled`` tells ``Creating`` (not
    yet bound) from ``Pending``; ``reason``/``message`` are the pod-level reason and message
    (``Evicted``, ``DeadlineExceeded``...); ``scheduling_reason``/``scheduling_message`` those of
    a ``PodScheduled=False`` condition (``Unschedulable``, ``0/1 nodes are available: 1
    Insufficient cpu.``); ``disruption_reason``/``disruption_message`` those of a
    ``DisruptionTarget=True`` condition, the pod's notice that it is about to be deleted by a
    disruption (k8s.io/api v0.37.2 core/v1: ``PreemptionByScheduler``, ``EvictionByEvictionAPI``,
    ``DeletionByTaintManager``, ``DeletionByPodGC``, ``TerminationByKubelet``), ``None`` when the
    pod has no such condition or it is not True (kube-controller-manager turns a stale one
    False after 2 minutes when no deletion followed). The local runtime has no scheduler and
    leaves them ``None``.
    """

    name: str
    uid: str
    replica_type: str
    index: int
    phase: PodPhase
    containers: tuple[ContainerState, ...] = ()
    deleting: bool = False
    scheduled: bool = True
    reason: str | None = None
    message: str | None = None
    scheduling_reason: str | None = None
    scheduling_message: str | None = None
    init_containers: tuple[ContainerState, ...] = ()
    #: The pod's ``desired-hash`` annotation: what it was built from (None when absent).
    desired_hash: str | None = None
    #: The replica's restart count this pod was made for, from its ``restart-generation`` label
    #: (None when absent, a pod made before the label existed). Not ``metadata.generation``.
    restart_attempt: int | None = None
    disruption_reason: str | None = None
    disruption_message: str | None = None
    #: The node the pod is bound to (``spec.nodeName``), ``None`` while unscheduled or locally.
    node: str | None = None
    #: When the pod's grace period ends (its ``deletionTimestamp``, seconds since the epoch): the
    #: kubelet should have stopped it by then; ``None`` when it is not being deleted.
    deletion_deadline: float | None = None
    #: When the pod's containers started running (seconds since the epoch): the latest start of
    #: its running containers; ``None`` until one runs (:mod:`.progress`).
    started_at: float | None = None
    #: When a container of the pod last wrote to its log (seconds since the epoch), ``None`` when
    #: it wrote nothing yet or the runtime did not look (:mod:`.progress`).
    last_output: float | None = None
    #: When its first container started running and, once every container has ended, when the
    #: last one ended (seconds since the epoch; ``None``: not yet). What an attempt that ends
    #: without finishing cost (:mod:`.cost`).
    ran_from: float | None = None
    ran_until: float | None = None

    @property
    def preempted(self) -> bool:
        """Whether the scheduler's preemption is taking this pod away (``DisruptionTarget=True``,
        reason ``PreemptionByScheduler``): for a single pod (default preemption) or for a whole
        native gang with ``disruptionMode: all``. Not the program's failure: the engine recreates
        the replica without counting a restart or a backoff (:mod:`t9k_jobs.engine.preemption`)."""
        return self.disruption_reason == PREEMPTION_BY_SCHEDULER

    @property
    def effective_phase(self) -> PodPhase:
        """The phase the engine acts on: the reported one, or the end the containers already show.

        A real kubelet reports a pod whose containers have all terminated with the old phase
        (``Running``, even ``Pending``) for a while before ``Succeeded``/``Failed``. Replica pods
        are ``restartPolicy: Never`` (:func:`~t9k_jobs.frameworks.base.base_pod`), so nothing
        restarts those containers: the pod has ended. As the kubelet computes the phase
        (``pkg/kubelet/kubelet_pods.go`` ``getPhase``, restart policy Never): ``Succeeded`` when
        every container exited 0, else ``Failed``. Init containers do not count; a reported
        ``Succeeded``/``Failed`` is final and kept.
        """
        if self.phase in ("Succeeded", "Failed") or not self.containers:
            return self.phase
        if all(c.state == "Terminated" for c in self.containers):
            return "Succeeded" if all(c.exit_code == 0 for c in self.containers) else "Failed"
        return self.phase

    @property
    def terminal(self) -> bool:
        """Whether the pod has ended (:attr:`effective_phase` Succeeded or Failed)."""
        return self.effective_phase in ("Succeeded", "Failed")

    def ended_container(self, container: str | None) -> ContainerState | None:
        """Container ``container``, or else the first terminated one with a non-zero exit code."""
        for c in self.containers:
            if container is not None and c.name == container:
                return c
        for c in self.containers:
            if c.exit_code not in (None, 0):
                return c
        return None

    def exit_code(self, container: str | None) -> int | None:
        """Exit code of ``container`` (or of the first terminated container with a non-zero code)."""
        c = self.ended_container(container)
        return c.exit_code if c is not None else None


@dataclass(frozen=True)
class WorkloadState:
    """The job's Kueue ``Workload`` as its status stands (Kueue v0.17.0
    ``apis/kueue/v1beta2/workload_types.go``; docs/scheduling.md).

    ``admitted``: condition ``Admitted`` is True (quota reserved and every admission check ready)
    and ``Evicted`` is not: the job may have pods. ``evicted``: the reason of an ``Evicted=True``
    condition (``Preempted``, ``ClusterQueueStopped``, ``Deactivated``...), ``None`` without one.
    ``reason``/``message``: Kueue's words on where the Workload stands: the ``Evicted`` condition's
    when evicted, else ``QuotaReserved=False``'s (``Inadmissible``, "LocalQueue q doesn't exist";
    ``Pending``, "couldn't assign flavors to pod set worker: insufficient unused quota for cpu in
    flavor default, 3 more needed"), else the ``Admitted`` condition's.
    ``cluster_queue``: the ClusterQueue that admitted it. ``node_selectors``: per pod set (replica
    type), the node labels of the ResourceFlavors it was admitted to, which its pods must carry.
    ``placements``: per pod set admitted by Kueue's Topology Aware Scheduling, one node selector
    per pod in rank order, its topology domain (:func:`t9k_jobs.cluster.kueue.placements`).
    """

    admitted: bool = False
    evicted: str | None = None
    reason: str | None = None
    message: str | None = None
    cluster_queue: str | None = None
    node_selectors: dict[str, dict[str, str]] = field(default_factory=dict)
    placements: dict[str, tuple[dict[str, str], ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Observed:
    """What exists now: the job's pods by name, and its other children as ``(kind, name)`` (not
    those of a kind the runtime does not serve: :attr:`~.runtime.Runtime.unserved`).

    ``conflicts``: ``(kind, name)`` of children the job needs whose name is taken by an object
    that this job does not control, mapped to who holds it (``"DeepSpeedJob/train"``, ``"no
    controller"``); a PyTorchTrainingJob and a DeepSpeedJob of one name in one namespace want the
    same pod, Service and ConfigMap names. The engine does not plan them and says so.
    """

    pods: dict[str, ObservedPod] = field(default_factory=dict)
    others: frozenset[tuple[str, str]] = frozenset()
    conflicts: dict[tuple[str, str], str] = field(default_factory=dict)
    #: ``(kind, name)`` -> the ``desired-hash`` annotation of the child ("" when it has none);
    #: a child left out (a Secret, which the operator cannot read) is never updated.
    desired_hashes: dict[tuple[str, str], str] = field(default_factory=dict)
    #: ``(kind, name)`` of children that report themselves ready (a TensorBoard serving).
    ready: frozenset[tuple[str, str]] = frozenset()
    #: Where a ready child serves, when the runtime knows it: ``(kind, name)`` -> URL (a local
    #: run's TensorBoard on its loopback port); ``status.tensorboard``'s note gives it.
    served_at: dict[tuple[str, str], str] = field(default_factory=dict)
    #: The PriorityClasses the cluster has (names), read by the runtime: a native gang's pods and
    #: PodGroup name ``t9k-priority-<N>`` only when it is among them, else they run at the default
    #: priority and the job's ``Priority`` condition says so (the cluster admin makes the classes
    #: of the priorities they allow; docs/scheduling.md). ``None``: not known, every class is
    #: taken to exist (``render``, a local run).
    priority_classes: frozenset[str] | None = None
    #: The job's Workload, when it exists and the runtime queues (:attr:`~.runtime.Runtime.queueing`).
    workload: WorkloadState | None = None
    #: Nodes of the job's pods whose kubelet stopped answering: node name -> when its ``Ready``
    #: condition left True (seconds since the epoch; ``False`` or ``Unknown`` since then). A node
    #: that is Ready, or that a runtime does not know (a local run), is absent (:mod:`.node_loss`).
    unreachable_nodes: dict[str, float] = field(default_factory=dict)
    #: ``(kind, name)`` of children the API server stored without the scheduling constraints the
    #: engine asked for (a native PodGroup's ``schedulingConstraints``, dropped when its feature
    #: gate is off: :mod:`.topology`).
    unconstrained: frozenset[tuple[str, str]] = frozenset()
    #: Kueue's Topology Aware Scheduling places the job: its LocalQueue's ClusterQueue has a
    #: flavor with a Topology (read by the runtime; :mod:`.topology`).
    queue_topology: bool = False


@dataclass(frozen=True)
class Delete:
    """Delete ``kind``/``name``, only if its UID is still ``uid`` (``None``: no precondition).
    ``force``: with a zero grace period, not waiting for a kubelet to confirm (a pod on a lost
    node whose grace period has passed: :mod:`.node_loss`)."""

    kind: str
    name: str
    uid: str | None
    reason: str
    force: bool = False


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event about the job: ``type`` Normal or Warning, a CamelCase ``reason``."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Lost:
    """One attempt lost (:mod:`.cost`): its pod, UID, restart attempt, reason
    (:data:`.cost.REASONS`), the seconds it ran (>= 0) and the GPUs its replica asks for."""

    pod: str
    uid: str
    attempt: int
    reason: str
    seconds: float
    gpus: float

    def dump(self) -> dict[str, Any]:
        return {"pod": self.pod, "uid": self.uid, "attempt": self.attempt, "reason": self.reason,
                "seconds": round(self.seconds, 3), "gpus": self.gpus}  # fmt: skip


@dataclass
class Plan:
    """What one reconcile pass wants done.

    ``create``: full objects (Pod, Service, ConfigMap, Secret, PodGroup, TensorBoard) to create,
    in order; ``delete``: objects to delete; ``status``: the job status to write (write it only
    if it differs from the stored one); ``events``: to emit; ``requeue_after``: seconds until
    the engine wants to look again even if nothing changes (deadline), ``None`` for never.
    """

    create: list[dict[str, Any]] = field(default_factory=list)
    #: Children (never pods) to bring to this desired state: the runtime replaces their content
    #: (the operator with the cached resourceVersion as a precondition).
    update: list[dict[str, Any]] = field(default_factory=list)
    delete: list[Delete] = field(default_factory=list)
    status: JobStatus = field(default_factory=JobStatus)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    #: Pods whose processes' stacks the runtime dumps before it carries out anything else of the
    #: plan (a job that made no progress: :mod:`.progress`), so the dump shows where they hung.
    dump_stacks: tuple[str, ...] = ()
    #: Attempts (replica pods) this pass sees end without finishing, with why and what they ran
    #: (:class:`~.cost.Lost`); the runtime adds them to the job's totals, each pod once.
    lost: tuple[Lost, ...] = ()
    #: Seconds until the finished job is to be deleted (0: now; :mod:`.ttl`), ``None``: it is kept
    #: (or not finished). Not a wake-up: :attr:`finished` does not read it; the operator acts on it.
    expire_after: float | None = None

    @property
    def finished(self) -> bool:
        """True when the job is in a terminal phase, nothing is left to create or delete, and the
        engine does not ask to look again (a clean-up still waiting, :func:`reconcile`)."""
        return (
            self.status.phase in ("Succeeded", "Failed")
            and not self.create
            and not self.update
            and not self.delete
            and self.requeue_after is None
        )
