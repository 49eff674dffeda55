"""Inputs and outputs of the reconcile engine.

The engine sees the world as an :class:`Observed` snapshot (slim projections of the job's
pods plus the names of its other children) and answers with a :class:`Plan`. Both runtimes,
the Kubernetes operator and the local process supervisor, build the snapshot and carry out
the plan; neither decides behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..api.common import JobStatus

PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


@dataclass(frozen=True)
class ContainerState:
    """One container of a pod: ``state`` Waiting/Running/Terminated/Unknown, ``exit_code`` when Terminated."""

    name: str
    state: Literal["Waiting", "Running", "Terminated", "Unknown"]
    exit_code: int | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ObservedPod:
    """A slim projection of a replica pod, as the cache keeps it.

    ``replica_type``/``index`` come from the pod's labels; ``deleting`` is true once a
    deletion timestamp is set; ``scheduled`` tells ``Creating`` (not yet bound) from
    ``Pending``; ``reason`` is the pod-level reason (``Evicted``, ``DeadlineExceeded``...).
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

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def exit_code(self, container: str | None) -> int | None:
        """Exit code of ``container`` (or of the first terminated container with a non-zero code)."""
        for c in self.containers:
            if container is not None and c.name == container:
                return c.exit_code
        for c in self.containers:
            if c.exit_code not in (None, 0):
                return c.exit_code
        return None


@dataclass(frozen=True)
class Observed:
    """What exists now: the job's pods by name, and its other children as ``(kind, name)``."""

    pods: dict[str, ObservedPod] = field(default_factory=dict)
    others: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class Delete:
    """Delete ``kind``/``name``, only if its UID is still ``uid`` (``None``: no precondition)."""

    kind: str
    name: str
    uid: str | None
    reason: str


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event about the job: ``type`` Normal or Warning, a CamelCase ``reason``."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass
class Plan:
    """What one reconcile pass wants done.

    ``create``: full objects (Pod, Service, ConfigMap, Secret, PodGroup, TensorBoard) to create,
    in order; ``delete``: objects to delete; ``status``: the job status to write (write it only
    if it differs from the stored one); ``events``: to emit; ``requeue_after``: seconds until
    the engine wants to look again even if nothing changes (deadline), ``None`` for never.
    """

    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[Delete] = field(default_factory=list)
    status: JobStatus = field(default_factory=JobStatus)
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None

    @property
    def finished(self) -> bool:
        """True when the job is in a terminal phase and nothing is left to create or delete."""
        return self.status.phase in ("Succeeded", "Failed") and not self.create and not self.delete


class Addressing(Protocol):
    """How replicas reach each other: host names and port numbers.

    On a cluster a replica's host is its per-replica Service name and a named port is the
    declared port. The local runtime maps every host to this machine and gives each
    replica its own ports so replicas never collide.
    """

    def host(self, job_name: str, replica_type: str, index: int) -> str: ...

    def port(self, job_name: str, replica_type: str, index: int, name: str, declared: int) -> int: ...


class ClusterAddressing:
    """Addressing inside a Kubernetes cluster: ``<job>-<type>-<index>`` Services, declared ports."""

    def host(self, job_name: str, replica_type: str, index: int) -> str:
        return replica_name(job_name, replica_type, index)

    def port(self, job_name: str, replica_type: str, index: int, name: str, declared: int) -> int:
        return declared


def replica_name(job_name: str, replica_type: str, index: int | None) -> str:
    """Pod and Service name of a replica: ``<job>-<type>-<index>``, or ``<job>-<type>`` without index."""
    if index is None:
        return f"{job_name}-{replica_type}"
    return f"{job_name}-{replica_type}-{index}"
