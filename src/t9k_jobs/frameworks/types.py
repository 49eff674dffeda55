"""The plug-ins' vocabulary: the shapes a framework, the engine and the runtimes pass each other.

:class:`ReplicaGroup` (one replica type, normalised across kinds), :class:`BuildContext` (what one
pass builds with), :class:`Final` and :class:`Outcome` (a replica's end, the job's end),
:data:`GangMode`, :class:`LocalRequirement` (what a local run of a kind needs on the machine), and
the :class:`Launcher` protocol a runtime hands in to start launches over ssh (:mod:`.launch` says
what such a launch is, :mod:`.pod_launch` how pods carry it out).
Nothing here builds anything: :mod:`.base` (the :class:`~.base.Framework` interface and the
pod-building steps) and every plug-in import these, and this module imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

from ..addressing import Addressing, replica_name
from ..api.kinds import JobBase
from .launch import SshLaunch

#: The job kind a framework handles: its hooks take that kind, never a looser one.
JobT = TypeVar("JobT", bound=JobBase)

#: How ``spec.scheduler.t9kScheduler`` is carried out, chosen by the runtime from what its API
#: server serves (docs/decisions.md, "t9kScheduler from discovery"): ``t9k``: T9k's own PodGroup
#: (``scheduler.tensorstack.dev/v1beta1``) and the ``t9k-scheduler``; ``native``: a
#: ``scheduling.k8s.io/v1beta1`` PodGroup (Kubernetes 1.37+, gate ``GenericWorkload``) and the
#: default scheduler; ``none``: the default scheduler alone, gang admission not enforced.
GangMode = Literal["t9k", "native", "none"]
GANG_MODES: tuple[GangMode, ...] = ("t9k", "native", "none")
DEFAULT_DEBUG_COMMAND: tuple[str, ...] = ("sleep", "inf")


@dataclass(frozen=True)
class ReplicaGroup:
    """One replica type of a job, normalised across kinds.

    ``replicas``: desired count now (elastic already applied). ``restart_policy``: Never,
    OnFailure, Always or ExitCode. ``limit``: per-replica restart limit (GenericJob) or
    ``None``. ``backoff_limit``: restarts shared by the whole job or ``None``.
    ``indexed``: pod names carry an index (False only for the ColossalAI launcher).
    ``service_ports``: ports on the per-replica headless Service; ``None``: no Service.
    """

    type: str
    replicas: int
    template: dict[str, Any]
    restart_policy: str
    training_container: str
    limit: int | None = None
    backoff_limit: int | None = None
    indexed: bool = True
    in_pod_group: bool = True
    debug_command: tuple[str, ...] = DEFAULT_DEBUG_COMMAND
    service_ports: tuple[dict[str, Any], ...] | None = ()

    def pod_name(self, job_name: str, index: int) -> str:
        return replica_name(job_name, self.type, index if self.indexed else None)


@dataclass(frozen=True)
class BuildContext:
    """What one pass builds with, made once per pass: the addressing, whether resume overrides
    apply, the replica groups wanted now (``()``: ask the framework), how a ``t9kScheduler``
    job is gang-scheduled (:data:`GangMode`), the runtime's launcher of launches over ssh
    (:class:`Launcher`; ``None``: pods, as on a cluster), and, by
    replica type, the node labels a queue's admission puts on its pods (Kueue's flavors) and the
    topology domain of each of its pods (Kueue's Topology Aware Scheduling)."""

    addressing: Addressing
    resumed: bool = False
    groups: tuple[ReplicaGroup, ...] = ()
    gang: GangMode = "t9k"
    launcher: Launcher | None = None
    node_selectors: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Per replica type, one node selector per replica in index order: the topology domain Kueue's
    #: admission gave it (``WorkloadState.placements``).
    placements: dict[str, tuple[dict[str, str], ...]] = field(default_factory=dict)
    #: Kueue's Topology Aware Scheduling places the job (``Observed.queue_topology``): its
    #: Workload asks for the job's topology, and Kueue's placements replace the pod affinity.
    queue_topology: bool = False
    #: The PriorityClasses the cluster has (names; :func:`priority_class_name`), which a native
    #: gang's pods and PodGroup may name; ``None``: not known, every one is taken to exist (render).
    priority_classes: frozenset[str] | None = None


@dataclass(frozen=True)
class Final:
    """A replica whose terminal state will not change: ``succeeded`` or ``failed``.

    ``exit_code``: of the training container, ``None`` when it has none (deleted, evicted before
    it ran). ``reason``: what the exit code does not say, e.g. ``OOMKilled``, ``Evicted``,
    ``deleted``; the engine leaves out the kubelet's plain ``Completed``/``Error``.
    """

    pod: str
    succeeded: bool
    exit_code: int | None = None
    reason: str | None = None

    def describe(self) -> str:
        """``<pod> failed with exit code 137 (OOMKilled)``: the T9k failure dumps' words (reference §1.8)."""
        if self.succeeded:
            return f"{self.pod} succeeded"
        if self.exit_code is not None:
            why = f" ({self.reason})" if self.reason else ""
            return f"{self.pod} failed with exit code {self.exit_code}{why}"
        return f"{self.pod} failed ({self.reason})" if self.reason else f"{self.pod} failed"


@dataclass(frozen=True)
class Outcome:
    """The job's end: ``succeeded`` and the condition message."""

    succeeded: bool
    message: str
    reason: str = ""


@dataclass(frozen=True)
class LocalRequirement:
    """One thing a local run of a job needs on this machine (:meth:`~.base.Framework.local_requirements`):
    the plug-in says what, :func:`t9k_jobs.local.checks.cannot_run_reason` checks it.

    ``what``: ``program``: ``name`` is found on the PATH of the environment the replicas run in
    (``--python``'s folder first), and ``{where}`` in ``missing`` stands for that environment
    (``the environment of --python PY``, ``the environment t9k-jobs runs in``); ``sshd``: ``name``
    is OpenSSH's server, run as a replica: a file this process may execute, and the run makes its
    privilege-separation directory first (:func:`t9k_jobs.local.checks.prepare_host`); ``refused``:
    never met, the job does not run locally at all (``name`` empty). ``missing``: the refusal said
    when it is not met, one line with what to do.
    """

    what: Literal["program", "sshd", "refused"]
    name: str
    missing: str


class Launcher(Protocol):
    """How a runtime starts an :class:`SshLaunch`'s replicas."""

    def hostfile(self, launch: SshLaunch, job_name: str, addressing: Addressing) -> str:
        """The hostfile's text: one worker a line, with ``slots=N`` when the launch has slots."""
        ...

    def runs_tool(self, launch: SshLaunch, replica_type: str, index: int | None) -> bool:
        """Whether this replica runs the launcher tool (it is relaunched when its hosts change)."""
        ...

    def decorate(
        self, job: JobBase, launch: SshLaunch, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """Set the command (and mounts, env) of ``group``'s replica ``index`` in ``pod``, in place."""
        ...
