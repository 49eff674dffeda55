"""What one reconcile pass works on (:class:`Pass`), the engine's constants, and its clock.

A pass reads the job, what exists and ``now``; the policies (one module each) add to its
replica statuses, finals, restarts and creates, and to the plan. Nothing here does I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..api.common import JobStatus, ReplicaStatus, TaskStatus
from ..api.kinds import JobBase
from ..frameworks import BuildContext, Final, Framework, ReplicaGroup
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


@dataclass
class Pass:
    """Working state of one reconcile pass."""

    job: JobBase
    fw: Framework
    groups: list[ReplicaGroup]
    observed: Observed
    now: float
    ctx: BuildContext
    old: JobStatus
    status: JobStatus
    plan: Plan
    replicas: dict[str, ReplicaStatus] = field(default_factory=dict)
    finals: dict[tuple[str, int], Final] = field(default_factory=dict)
    restarts: list[tuple[ReplicaGroup, int, str]] = field(default_factory=list)
    creates: list[tuple[ReplicaGroup, int]] = field(default_factory=list)
    #: Replicas (pod names) found taken by the scheduler's preemption on this pass
    #: (:mod:`.preemption`): recreated without counting a restart or a backoff.
    preempted: list[str] = field(default_factory=list)
    owned: list[dict[str, Any]] = field(default_factory=list)

    def prior(self, name: str) -> ReplicaStatus | None:
        for task in self.old.tasks:
            for rs in task.replicas:
                if rs.name == name:
                    return rs
        return None

    def delete_pod(self, pod: ObservedPod, reason: str) -> None:
        if not pod.deleting and all((d.kind, d.name) != ("Pod", pod.name) for d in self.plan.delete):
            self.plan.delete.append(Delete("Pod", pod.name, pod.uid, reason))

    def event(self, type_: str, reason: str, message: str) -> None:
        self.plan.events.append(Event(type_, reason, message))  # type: ignore[arg-type]


def task_of(status: JobStatus, replica_type: str) -> TaskStatus:
    task = status.task(replica_type)
    if task is None:
        task = TaskStatus(type=replica_type)
        status.tasks.append(task)
    return task
