"""What the operator keeps of each child object: a slim, typed projection, and the keys it is kept by.

The informers of the job's children (pods, Services, ConfigMaps, PodGroups, TensorBoards, Kueue
Workloads) transform every object with :func:`project_child` as it arrives, so the cache holds
only what the engine reads (:class:`~t9k_jobs.engine.ObservedPod`, a Workload's admission,
readiness, the desired hash); the Node informer keeps :func:`unreachable_since`.

* :class:`JobKey` names a job (``kind``, ``namespace``, ``name``): the work queue's key, the
  expectations' key, the owner a child's labels point at. ``str(key)`` is
  ``Kind/namespace/name``, the form logs show.
* :class:`ChildRef` names a child within its job's namespace (``kind``, ``name``): the key of a
  job's children, its conflicts, and of the expectations' pending creates and deletes.

The SDK reads a live pod the same way (``pod_replica``), so ``get`` and the operator agree.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from ..engine import (
    ContainerState,
    ObservedPod,
    WorkloadState,
    desired_hash_of,
    parse_time,
    restart_attempt_label,
)
from ..frameworks.base import (
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)
from .kueue import Flavors, project_workload


@dataclass(frozen=True, order=True)
class JobKey:
    """A job: ``kind`` (``GenericJob``...), ``namespace``, ``name``."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> JobKey:
        """``Kind/namespace/name`` back to a key; raises ValueError for another shape."""
        kind, namespace, name = text.split("/", 2)
        return cls(kind, namespace, name)


@dataclass(frozen=True, order=True)
class ChildRef:
    """A child of a job, in the job's namespace: ``kind`` (``Pod``, ``Service``...), ``name``."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class Child:
    """Slim projection of a child object: who owns it, and (for pods) what the engine needs."""

    kind: str
    namespace: str
    name: str
    uid: str
    owner: JobKey | None  # the job its labels name, None when they name none
    owner_uid: str | None  # uid in the controller owner reference
    deleting: bool
    pod: ObservedPod | None = None
    ready: bool = False  # a TensorBoard that reports itself ready
    resource_version: str = ""  # the precondition of an update
    desired_hash: str = ""  # its desired-hash annotation (engine.desired)
    workload: WorkloadState | None = None  # a Kueue Workload's admission (node labels not resolved)
    #: A Workload's admission: per pod set, the ResourceFlavors it was given (names).
    flavors: Flavors = ()
    #: A native PodGroup stored without ``spec.schedulingConstraints`` (none asked, or dropped by
    #: the API server: its gate off; :mod:`t9k_jobs.engine.topology`).
    unconstrained: bool = False

    @property
    def ref(self) -> ChildRef:
        return ChildRef(self.kind, self.name)


def job_key(kind: str, namespace: str, name: str) -> JobKey:
    return JobKey(kind, namespace, name)


def project_child(obj: dict[str, Any]) -> Child:
    """A Pod, Service, ConfigMap, Secret, PodGroup or TensorBoard as the controller caches it.

    A pod's ``DisruptionTarget`` condition, when its status is ``"True"``, gives
    :attr:`ObservedPod.disruption_reason` and ``disruption_message`` (``PreemptionByScheduler``:
    the scheduler preempts it; k8s.io/api v0.37.2 core/v1 ``DisruptionTarget``); a ``"False"``
    one (kube-controller-manager clears a stale notice) gives ``None``."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    owner_kind, owner_name = labels.get(LABEL_OWNER_KIND), labels.get(LABEL_OWNER_NAME)
    namespace = meta.get("namespace", "")
    owner = JobKey(owner_kind, namespace, owner_name) if owner_kind and owner_name else None
    owner_uid = None
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            owner_uid = ref.get("uid")
    deleting = bool(meta.get("deletionTimestamp"))
    pod = _project_pod(obj, labels, deleting) if obj.get("kind") == "Pod" else None
    if pod is not None:
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if isinstance(cond, dict) and (cond.get("type"), cond.get("status")) == ("DisruptionTarget", "True"):
                reason, message = cond.get("reason") or None, cond.get("message") or None
                pod = replace(pod, disruption_reason=reason, disruption_message=message)
    workload, flavors = project_workload(obj.get("status") or {}) if obj.get("kind") == "Workload" else (None, ())
    return Child(
        obj.get("kind", ""), namespace, meta["name"], meta.get("uid", ""), owner, owner_uid, deleting, pod,
        ready=obj.get("kind") == "TensorBoard" and _reports_ready(obj.get("status") or {}),
        workload=workload,
        flavors=flavors,
        unconstrained=obj.get("kind") == "PodGroup" and str(obj.get("apiVersion", "")).startswith("scheduling.k8s.io/")
        and not (obj.get("spec") or {}).get("schedulingConstraints"),
        # Kept for children that may be updated; a pod's would make every status write of the
        # kubelet look like a change of what the engine reads.
        resource_version="" if pod is not None else str(meta.get("resourceVersion") or ""),
        desired_hash=desired_hash_of(obj),
    )


def _reports_ready(status: dict[str, Any]) -> bool:
    """Whether a TensorBoard's status says it serves: ``ready: true``, a ``Ready`` condition that
    is True, or phase ``Running`` (T9k documents no TensorBoard status shape; these are the
    conventions its other resources and Kubernetes use)."""
    if status.get("ready") is True or status.get("phase") == "Running":
        return True
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _project_pod(obj: dict[str, Any], labels: dict[str, str], deleting: bool) -> ObservedPod:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    conditions = status.get("conditions") or []
    scheduled = bool(spec.get("nodeName")) or any(
        c.get("type") == "PodScheduled" and c.get("status") == "True" for c in conditions
    )
    unscheduled = next(
        (c for c in conditions if c.get("type") == "PodScheduled" and c.get("status") == "False"), None
    )
    try:
        index = int(labels.get(LABEL_REPLICA_INDEX, "0"))
    except ValueError:
        index = 0
    return ObservedPod(
        node=spec.get("nodeName") or None,
        deletion_deadline=_epoch(meta.get("deletionTimestamp")),
        name=meta["name"],
        uid=meta.get("uid", ""),
        replica_type=labels.get(LABEL_REPLICA_TYPE, ""),
        index=index,
        phase=status.get("phase") or "Pending",
        containers=_project_containers(status.get("containerStatuses")),
        deleting=deleting,
        scheduled=scheduled,
        reason=status.get("reason") or None,
        message=status.get("message") or None,
        scheduling_reason=(unscheduled.get("reason") or None) if unscheduled and not scheduled else None,
        scheduling_message=(unscheduled.get("message") or None) if unscheduled and not scheduled else None,
        init_containers=_project_containers(status.get("initContainerStatuses")),
        desired_hash=desired_hash_of(obj) or None,
        restart_attempt=restart_attempt_label(labels),
        started_at=_started_at(status.get("containerStatuses")),
        **_ran(status.get("containerStatuses")),
    )


def _started_at(statuses: list[dict[str, Any]] | None) -> float | None:
    """When the last of the pod's running containers started (``state.running.startedAt``),
    ``None`` while none runs."""
    starts = [_epoch(((cs.get("state") or {}).get("running") or {}).get("startedAt")) for cs in statuses or []
              if isinstance(cs, dict) and "running" in (cs.get("state") or {})]  # fmt: skip
    known = [t for t in starts if t is not None]
    return max(known) if known else None


def _ran(statuses: list[dict[str, Any]] | None) -> dict[str, float | None]:
    """``ran_from``: the earliest start of the pod's containers (``state.running.startedAt`` or
    ``state.terminated.startedAt``); ``ran_until``: once every container terminated, the latest
    ``finishedAt``, else ``None``."""
    starts, ends, running = [], [], False
    for cs in statuses or []:
        state = (cs.get("state") or {}) if isinstance(cs, dict) else {}
        now = state.get("running") or state.get("terminated")
        if isinstance(now, dict):
            starts.append(_epoch(now.get("startedAt")))
        if isinstance(state.get("terminated"), dict):
            ends.append(_epoch(state["terminated"].get("finishedAt")))
        else:
            running = True
    known = [t for t in starts if t is not None]
    finished = [t for t in ends if t is not None]
    return {"ran_from": min(known) if known else None,
            "ran_until": max(finished) if finished and not running else None}  # fmt: skip


def _epoch(stamp: Any) -> float | None:
    """An RFC 3339 timestamp of the API (``2026-11-27T03:04:05Z``) as seconds since the epoch
    (:func:`~t9k_jobs.engine.parse_time`); ``None`` when absent or not in that form."""
    try:
        return parse_time(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None


def unreachable_since(obj: dict[str, Any]) -> float | None:
    """When a Node's ``Ready`` condition left True (its ``lastTransitionTime``, seconds since the
    epoch) if it is ``False`` or ``Unknown`` now; ``None`` for a Ready node or one without the
    condition (just registered). kube-controller-manager's node lifecycle controller sets it
    ``Unknown`` when the kubelet stopped posting status for ``--node-monitor-grace-period``."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            if cond.get("status") == "True":
                return None
            return _epoch(cond.get("lastTransitionTime")) or time.time()
    return None


def _project_containers(statuses: list[dict[str, Any]] | None) -> tuple[ContainerState, ...]:
    """core/v1 ``ContainerStatus`` entries as :class:`ContainerState`: the state, the exit code,
    and the waiting or terminated reason and message (``ErrImageNeverPull``, ``OOMKilled``...)."""
    out = []
    for cs in statuses or []:
        name, state = cs.get("name", ""), cs.get("state") or {}
        if "terminated" in state:
            t = state["terminated"] or {}
            reason, message = t.get("reason") or None, t.get("message") or None
            out.append(ContainerState(name, "Terminated", t.get("exitCode"), reason, message))
        elif "running" in state:
            out.append(ContainerState(name, "Running"))
        elif "waiting" in state:
            w = state["waiting"] or {}
            reason, message = w.get("reason") or None, w.get("message") or None
            out.append(ContainerState(name, "Waiting", None, reason, message))
        else:
            out.append(ContainerState(name, "Unknown"))
    return tuple(out)
