"""The job controller: informers feed a work queue; workers run the engine and carry out its plan.

One reconcile pass for a job key ``Kind/namespace/name``:

1. read the job from the informer cache (or the newer copy this process just wrote);
2. wait while expectations are unmet (children created or deleted but not yet in the cache);
3. parse it with the same models as ``t9k-jobs run``; a spec that does not validate, or that the
   engine cannot handle (it raises), gets one ``InvalidSpec`` Warning event per version of its
   spec (``metadata.generation``), the condition ``SpecValid`` False (reason ``InvalidSpec``) in
   its status, and is left alone, not retried, until its spec changes;
4. build :class:`~t9k_jobs.engine.Observed` from the cached children that carry this job's
   controller owner reference, and call :func:`~t9k_jobs.engine.reconcile`;
5. create what the plan creates (controller owner references are set by the engine), delete
   with UID preconditions, write the status through the status subresource when it changed
   (with the job's resourceVersion as precondition), emit the plan's Events, and requeue
   after ``plan.requeue_after`` seconds. API errors requeue the key with backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import aiohttp

from ..api import Job, JobStatus, ManifestError
from ..api.kinds import KINDS
from ..engine import (
    ContainerState,
    Observed,
    ObservedPod,
    Plan,
    WorkloadState,
    desired_hash_of,
    invalid_spec_status,
    parse_time,
    reconcile,
    restart_attempt_label,
    rfc3339,
)
from ..engine.node_loss import NODE_LOST_AFTER
from ..frameworks import parse_job
from ..frameworks.base import (
    LABEL_OWNER_KIND,
    LABEL_OWNER_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
    PRIORITY_CLASS_PREFIX,
)
from ..sshkeys import materialize
from . import metrics
from .client import (
    CORE_CHILDREN,
    EVENTS,
    JOB_RESOURCES,
    NATIVE_PODGROUPS,
    NODES,
    OPTIONAL_CHILDREN,
    PRIORITYCLASSES,
    RESOURCEFLAVORS,
    ApiError,
    KubeClient,
    Resource,
)
from .expectations import Expectations
from .informer import Informer, Key
from .state import ChildRef, JobKey, JobState, Written
from .workqueue import ShutDown, WorkQueue

log = logging.getLogger("t9k_jobs.controller")

GROUP = "batch.tensorstack.dev"
VERSION = "v1beta1"
CHILD_SELECTOR = f"{LABEL_OWNER_KIND} in ({','.join(sorted(KINDS))})"
COMPONENT = "t9k-jobs-operator"


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
    flavors: tuple[tuple[str, tuple[str, ...]], ...] = ()


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
    from dataclasses import replace

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
    workload, flavors = _project_workload(obj.get("status") or {}) if obj.get("kind") == "Workload" else (None, ())
    return Child(
        obj.get("kind", ""), namespace, meta["name"], meta.get("uid", ""), owner, owner_uid, deleting, pod,
        ready=obj.get("kind") == "TensorBoard" and _reports_ready(obj.get("status") or {}),
        workload=workload,
        flavors=flavors,
        # Kept for children that may be updated; a pod's would make every status write of the
        # kubelet look like a change of what the engine reads.
        resource_version="" if pod is not None else str(meta.get("resourceVersion") or ""),
        desired_hash=desired_hash_of(obj),
    )


def _project_workload(status: dict[str, Any]) -> tuple[WorkloadState, tuple[tuple[str, tuple[str, ...]], ...]]:
    """A Kueue Workload's status as the engine reads it (:class:`~t9k_jobs.engine.WorkloadState`)
    and, per pod set, the flavors of its admission (Kueue v0.17.0 ``workload_types.go``:
    conditions ``QuotaReserved``, ``Admitted``, ``Evicted``; ``status.admission``)."""
    conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}

    def true(type_: str) -> dict[str, Any] | None:
        c = conds.get(type_)
        return c if c is not None and c.get("status") == "True" else None

    evicted, admitted = true("Evicted"), true("Admitted")
    said = evicted or (conds.get("QuotaReserved") if not admitted else admitted) or {}
    admission = status.get("admission") or {}
    flavors = tuple(
        (str(a.get("name", "")), tuple(sorted({str(f) for f in (a.get("flavors") or {}).values()})))
        for a in admission.get("podSetAssignments") or []
        if isinstance(a, dict)
    )
    state = WorkloadState(
        admitted=admitted is not None and evicted is None,
        evicted=(evicted.get("reason") or "Evicted") if evicted is not None else None,
        reason=said.get("reason") or None,
        message=said.get("message") or None,
        cluster_queue=admission.get("clusterQueue") or None,
    )
    return state, flavors


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
    )


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


class Controller:
    """Reconciles the four job kinds in ``namespaces`` (``None``: all) with ``workers`` workers.

    Call :meth:`start_informers` (any replica, so a standby has a warm cache), then
    :meth:`run_workers` (the leader only). ``optional_kinds`` are the optional child kinds
    (PodGroup, TensorBoard) the API server serves; for the others a job is told once, by a
    Warning event, that the object is skipped.
    """

    def __init__(
        self,
        client: KubeClient,
        namespaces: list[str] | None = None,
        workers: int = 8,
        optional_kinds: set[str] | None = None,
        identity: str = "",
        batch_period: float = 1.0,
        native_gang: bool = False,
        node_lost_after: float = NODE_LOST_AFTER,
    ) -> None:
        self.client = client
        # Seconds a node may be unreachable before the replicas on it count as lost (issue 25;
        # :mod:`t9k_jobs.engine.node_loss`); the operator's --node-lost-after.
        self.node_lost_after = node_lost_after
        # Whether scheduling.k8s.io/v1beta1 PodGroups are served (Kubernetes 1.37, gate
        # GenericWorkload): used for t9kScheduler jobs where T9k's own PodGroup is not served.
        self.native_gang = native_gang and "PodGroup" not in (optional_kinds or set())
        # Children's changes enqueue their job after this many seconds, so the changes of one job
        # that arrive together (created, scheduled, running) make one pass and one status write;
        # kube-controller-manager's Job controller batches pod updates the same way, with 1 s.
        # A pod that ends or disappears is queued at once: that is when the job may end or a
        # replica must be replaced.
        self.batch_period = batch_period
        self.events_client = client.sibling()
        self.namespaces: list[str | None] = list(namespaces) if namespaces else [None]
        self.workers = workers
        self.optional_kinds = optional_kinds or set()
        self.identity = identity or f"t9k-jobs-{uuid.uuid4().hex[:8]}"
        self.queue: WorkQueue[JobKey] = WorkQueue()
        self.expectations: Expectations[JobKey, ChildRef] = Expectations()
        self.job_informers: dict[str, list[Informer[dict[str, Any]]]] = {}
        self.child_informers: list[Informer[Child]] = []
        self.flavors: Informer[dict[str, str]] | None = None
        # The cluster's PriorityClasses (names), where a native gang names them: the admin makes
        # the t9k-priority-N classes of the priorities they allow; the operator only reads them.
        self.priority_classes: Informer[bool] | None = None
        # Every node, as when it stopped being Ready (None: Ready): a replica's node lost.
        self.nodes: Informer[float | None] | None = None
        # Every job the controller remembers something about (state.py); a record is dropped
        # as soon as it holds nothing (:meth:`_release`).
        self.jobs: dict[JobKey, JobState] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        # The Events recorded, most recent last, to count repeats (:meth:`_emit_event`).
        self._recorded: OrderedDict[tuple[Any, ...], _Recorded] = OrderedDict()

    # ------------------------------------------------------------------ informers

    def build_informers(self) -> None:
        for ns in self.namespaces:
            for kind, res in JOB_RESOURCES.items():
                inf: Informer[dict[str, Any]] = Informer(self.client, res, namespace=ns)
                inf.add_handler(self._on_job)
                inf.on_relist(lambda kind=kind: self._on_job_relist(kind))
                self.job_informers.setdefault(kind, []).append(inf)
            # Not Secrets: the operator may only create them (rbac.py); it knows a job's Secret
            # exists from that create (:attr:`JobState.secrets`).
            kinds = [r for r in CORE_CHILDREN.values() if r.kind != "Secret"]
            kinds += [self.resource(k) for k in sorted(self.served_optional_kinds)]
            for res in kinds:
                child: Informer[Child] = Informer(
                    self.client, res, namespace=ns, label_selector=CHILD_SELECTOR, transform=project_child
                )
                child.add_handler(self._on_child)
                self.child_informers.append(child)
        if self.queueing:
            # The node labels of Kueue's flavors, put on the pods of an admitted job.
            self.flavors = Informer(self.client, RESOURCEFLAVORS, transform=_flavor_labels)
        if self.gang_mode == "native":
            # Which t9k-priority-N classes exist: a native gang names its class only then.
            self.priority_classes = Informer(self.client, PRIORITYCLASSES, transform=lambda obj: True)
            self.priority_classes.add_handler(self._on_priority_class)
        # Nodes' readiness: the replicas of a node unreachable for node_lost_after are lost.
        self.nodes = Informer(self.client, NODES, transform=unreachable_since)
        self.nodes.add_handler(self._on_node)

    def informers(self) -> list[Informer[Any]]:
        extra: list[Informer[Any]] = [i for i in (self.flavors, self.nodes, self.priority_classes) if i is not None]
        return [i for infs in self.job_informers.values() for i in infs] + list(self.child_informers) + extra

    def _on_node(self, event: str, key: Key, new: float | None, old: float | None) -> None:
        """A node turned unreachable, or Ready again, or went: look at once at every job with a
        pod on it (the engine then asks to look again when the node's limit passes)."""
        if event == "MODIFIED" and new == old:
            return
        if event != "DELETED" and new is None and old is None:
            return
        node = key[1]
        for jkey, state in list(self.jobs.items()):
            if any(c.pod is not None and c.pod.node == node for c in state.children.values()):
                self.queue.add(jkey)

    def _on_priority_class(self, event: str, key: Key, new: bool | None, old: bool | None) -> None:
        """A PriorityClass was made or deleted: look at every job again (rare; a job whose
        priority gains or loses its class changes its ``Priority`` condition, and its pods made
        from then on name the class or not)."""
        if event == "MODIFIED":
            return
        name = key[1]
        if name.startswith(PRIORITY_CLASS_PREFIX):
            log.info(
                "PriorityClass %s %s: t9kScheduler jobs of priority %s %s", name,
                "exists" if event == "ADDED" else "was deleted", name[len(PRIORITY_CLASS_PREFIX):],
                "run at it" if event == "ADDED" else "run at the default priority from now on",
            )  # fmt: skip
        for infs in self.job_informers.values():
            for inf in infs:
                for ns, name in list(inf.store):
                    self.queue.add(JobKey(inf.resource.kind, ns, name))

    def known_priority_classes(self) -> frozenset[str] | None:
        """The names of the cluster's PriorityClasses where a native gang may name them (the
        informer's), else None (the engine then needs none: T9k's PodGroup or Kueue carry the
        priority, or no gang at all)."""
        if self.priority_classes is None:
            return None
        return frozenset(name for _, name in self.priority_classes.store)

    async def start_informers(self) -> None:
        """Start every informer and wait until each has listed once."""
        if not self.job_informers:
            self.build_informers()
        for inf in self.informers():
            self._tasks.append(asyncio.create_task(inf.run(), name=f"informer {inf.name}"))
        await asyncio.gather(*(inf.synced.wait() for inf in self.informers()))
        log.info(
            "caches synced: %d jobs, %d children",
            self.job_count(),
            sum(len(state.children) for state in self.jobs.values()),
        )

    def stopped_tasks(self) -> list[str]:
        """Names of informer tasks that ended (they only end on a bug): the process is unhealthy."""
        return [t.get_name() for t in self._tasks if t.done()]

    @property
    def synced(self) -> bool:
        infs = self.informers()
        return bool(infs) and all(i.synced.is_set() for i in infs)

    def job_count(self) -> int:
        return sum(len(i.store) for infs in self.job_informers.values() for i in infs)

    def _state(self, key: JobKey) -> JobState:
        """The record of ``key``, made when the job had none."""
        state = self.jobs.get(key)
        if state is None:
            state = self.jobs[key] = JobState()
        return state

    def _release(self, key: JobKey) -> None:
        """Drop the record of ``key`` when it holds nothing (else every job ever seen would keep
        an empty one: the soak showed the growth)."""
        state = self.jobs.get(key)
        if state is not None and state.empty:
            del self.jobs[key]

    def _on_job(self, event: str, key: Key, new: dict[str, Any] | None, old: dict[str, Any] | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        jkey = JobKey(obj["kind"], key[0], key[1])
        if event == "DELETED":
            self.expectations.forget(jkey)
            self.queue.forget(jkey)
            state = self.jobs.get(jkey)
            if state is not None:
                was_invalid = state.invalid is not None
                state.forget_job()
                if was_invalid:
                    self._count_invalid(jkey.kind)
            self._set_phase(jkey, None)
            return
        state = self._state(jkey)
        self._set_phase(jkey, ((new or {}).get("status") or {}).get("phase") or "Pending")
        written = state.written
        if written is not None and _caught_up(new, written):
            state.written = None
            if _same_version(new, written.obj):
                # The echo of our own status write: the pass that wrote it saw this world already;
                # children that changed since have queued the job themselves.
                return
        self.queue.add(jkey)

    def _on_job_relist(self, kind: str) -> None:
        # The cache is now at least as new as any of our writes of this kind.
        for jkey, state in list(self.jobs.items()):
            if jkey.kind == kind and state.written is not None:
                state.written = None
                self._release(jkey)

    def _on_child(self, event: str, key: Key, new: Child | None, old: Child | None) -> None:
        c = new if new is not None else old
        assert c is not None
        if old is not None and old.owner and (new is None or new.owner != old.owner):
            self._forget_child(old)
        if c.owner is None:
            return
        if new is None:
            self._forget_child(c)
            self.expectations.observed_delete(c.owner, c.ref)
        else:
            self._state(c.owner).children[c.ref] = new
            self.expectations.observed_create(c.owner, c.ref)
            if new.deleting:
                self.expectations.observed_delete(c.owner, c.ref)
        if _urgent(new, old):
            self.queue.add(c.owner)
        else:
            self.queue.add_after(c.owner, self.batch_period)

    def _forget_child(self, c: Child) -> None:
        """Drop ``c`` from its job's record, and the record once it holds nothing."""
        if c.owner is None:
            return
        state = self.jobs.get(c.owner)
        if state is not None:
            state.children.pop(c.ref, None)
            self._release(c.owner)

    def _set_phase(self, jkey: JobKey, phase: str | None) -> None:
        """Move ``jkey`` to ``phase`` in the jobs gauge (None: the job is gone)."""
        state = self.jobs.get(jkey)
        if state is not None and state.phase is not None:
            metrics.JOBS.labels(kind=jkey.kind, phase=state.phase).dec()
            state.phase = None
        if phase is not None:
            self._state(jkey).phase = phase
            metrics.JOBS.labels(kind=jkey.kind, phase=phase).inc()
        self._release(jkey)

    # ------------------------------------------------------------------ workers

    async def run_workers(self) -> None:
        """Queue every cached job, then process keys until cancelled or the queue shuts down."""
        for infs in self.job_informers.values():
            for inf in infs:
                for ns, name in list(inf.store):
                    self.queue.add(JobKey(inf.resource.kind, ns, name))
        await asyncio.gather(*(self._worker(i) for i in range(self.workers)))

    async def _worker(self, n: int) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            started = time.perf_counter()
            result = "success"
            try:
                result = await self.reconcile_key(key)
                if result != "requeue":
                    self.queue.forget(key)
            except asyncio.CancelledError:
                self.queue.done(key)
                raise
            except Exception as exc:
                result = "error"
                metrics.RECONCILE_ERRORS.labels(controller=metrics.CONTROLLER).inc()
                if isinstance(exc, (ApiError, aiohttp.ClientError, OSError, TimeoutError)):
                    # The API server said no, or could not be reached: retried with backoff; a
                    # traceback would add nothing.
                    log.warning("reconcile %s: %s: %s", key, type(exc).__name__, exc)
                else:
                    log.exception("reconcile %s failed", key)
                self.queue.add_rate_limited(key)
            finally:
                metrics.RECONCILE_TIME.labels(controller=metrics.CONTROLLER).observe(
                    time.perf_counter() - started
                )
                metrics.RECONCILES.labels(controller=metrics.CONTROLLER, result=result).inc()
            self.queue.done(key)

    def job_object(self, key: JobKey) -> dict[str, Any] | None:
        """The newest copy of the job we know: our own last write, else the cache's."""
        cached = None
        for inf in self.job_informers.get(key.kind, []):
            if inf.namespace in (None, key.namespace):
                cached = inf.get(key.namespace, key.name)
                if cached is not None:
                    break
        if cached is None:
            return None
        state = self.jobs.get(key)
        written = state.written if state is not None else None
        if written is not None and written.obj["metadata"].get("uid") == cached["metadata"].get("uid"):
            return written.obj
        return cached

    def observe(self, key: JobKey, uid: str | None) -> Observed:
        """The job's children, as the engine sees them: only those whose controller is this job."""
        pods: dict[str, ObservedPod] = {}
        others: set[tuple[str, str]] = set()
        ready: set[tuple[str, str]] = set()
        desired_hashes: dict[tuple[str, str], str] = {}
        workload = None
        state = self.jobs.get(key) or JobState()
        for ref, c in state.children.items():
            if uid and c.owner_uid != uid:
                continue
            if c.pod is not None:
                pods[ref.name] = c.pod
            else:
                others.add((ref.kind, ref.name))
                desired_hashes[(ref.kind, ref.name)] = c.desired_hash
                if c.ready:
                    ready.add((ref.kind, ref.name))
                if c.workload is not None and ref.name == key.name:
                    workload = self._with_node_labels(c)
        others |= {("Secret", name) for name in state.secrets}
        unreachable: dict[str, float] = {}
        if self.nodes is not None:
            for pod in pods.values():
                since = self.nodes.get("", pod.node) if pod.node else None
                if since is not None:
                    unreachable[pod.node] = since  # type: ignore[index]
        return Observed(
            pods=pods,
            others=frozenset(others),
            conflicts={(ref.kind, ref.name): holder for ref, holder in state.conflicts.items()},
            desired_hashes=desired_hashes,
            ready=frozenset(ready),
            unserved=frozenset(k for k in OPTIONAL_CHILDREN if k not in self.served_optional_kinds),
            gang=self.gang_mode,
            priority_classes=self.known_priority_classes(),
            queueing=self.queueing,
            workload=workload,
            unreachable_nodes=unreachable,
            node_lost_after=self.node_lost_after,
        )

    def _with_node_labels(self, c: Child) -> WorkloadState:
        """``c``'s Workload with, per pod set, the node labels of the flavors it was admitted to
        (merged; a flavor not in the cache adds none)."""
        from dataclasses import replace

        assert c.workload is not None
        if not c.flavors or self.flavors is None:
            return c.workload
        selectors: dict[str, dict[str, str]] = {}
        for pod_set, names in c.flavors:
            labels: dict[str, str] = {}
            for name in names:
                labels.update(self.flavors.get("", name) or {})
            if labels:
                selectors[pod_set] = labels
        return replace(c.workload, node_selectors=selectors)

    @property
    def queueing(self) -> bool:
        """Whether ``t9kScheduler`` jobs are queued through Kueue here: its Workload API is served
        (``kueue.x-k8s.io/v1beta2`` ``workloads``; issue 24, docs/scheduling.md)."""
        return "Workload" in self.optional_kinds

    @property
    def gang_mode(self) -> str:
        """How ``t9kScheduler`` jobs are scheduled here (:data:`~t9k_jobs.frameworks.base.GangMode`):
        ``t9k`` when T9k's PodGroup CRD is served; else ``native`` when Kubernetes' own
        ``scheduling.k8s.io/v1beta1`` PodGroup is (1.37+, gate ``GenericWorkload``); else ``none``
        (the default scheduler, a Warning and a ``GangScheduling`` condition on each such job)."""
        if "PodGroup" in self.optional_kinds:
            return "t9k"
        return "native" if self.native_gang else "none"

    @property
    def served_optional_kinds(self) -> set[str]:
        """The optional child kinds this controller makes and watches: those served, and
        ``PodGroup`` where the native one stands in for T9k's."""
        return self.optional_kinds | ({"PodGroup"} if self.gang_mode == "native" else set())

    def resource(self, kind: str) -> Resource:
        """The API resource of child ``kind``: a core kind, or an optional one as this cluster
        serves it (``PodGroup``: T9k's, or ``scheduling.k8s.io/v1beta1`` in ``native`` mode).

        Raises KeyError for a kind that is not a child kind."""
        if kind == "PodGroup" and self.gang_mode == "native":
            return NATIVE_PODGROUPS
        return CORE_CHILDREN.get(kind) or OPTIONAL_CHILDREN[kind]

    async def reconcile_key(self, key: JobKey) -> str:
        """One pass for ``key``; returns the result label (success, skipped, requeue_after, invalid)."""
        raw = self.job_object(key)
        if raw is None:
            self.expectations.forget(key)
            state = self.jobs.get(key)
            if state is not None:
                state.conflicts.clear()
                state.secrets.clear()
                self._release(key)
            return "skipped"
        meta = raw["metadata"]
        if meta.get("deletionTimestamp"):
            return "skipped"
        if not self.expectations.satisfied(key):
            return "skipped"
        rv = meta.get("resourceVersion", "")
        job = self._parse(key, raw, rv)
        if job is None:
            await self._write_invalid(key, raw)
            return "invalid"
        await self._recheck_conflicts(key, job)
        observed = self.observe(key, meta.get("uid"))
        try:
            plan = reconcile(job, observed, time.time())
            errors = await self._carry_out(key, job, raw, plan)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError, asyncio.CancelledError):
            raise
        except Exception as exc:  # noqa: BLE001 - a spec the engine cannot handle: said once, not retried
            self._invalid(
                key, raw,
                f"t9k-jobs cannot reconcile this spec ({type(exc).__name__}: {exc}); the operator leaves the "
                "job alone until its spec changes (a t9k-jobs bug: please report it with the manifest)",
                exc,
            )  # fmt: skip
            await self._write_invalid(key, raw)
            return "invalid"
        self._valid(key)
        if errors:
            raise errors[0]
        if plan.requeue_after is not None and not plan.finished:
            self.queue.add_after(key, plan.requeue_after + 0.05)
            return "requeue_after"
        return "success"

    def _parse(self, key: JobKey, raw: dict[str, Any], rv: str) -> Job | None:
        state = self._state(key)
        if state.parsed is not None and state.parsed[0] == rv:
            return state.parsed[1]
        try:
            job = parse_job(raw, source=str(key))
        except ManifestError as exc:
            state.parsed = None
            self._invalid(key, raw, f"the job does not validate: {'; '.join(exc.errors)}")
            return None
        state.parsed = (rv, job)
        return job

    def _invalid(self, key: JobKey, raw: dict[str, Any], message: str, exc: Exception | None = None) -> None:
        """The job's spec cannot be acted on (``message`` says why): once per version of its spec
        (``metadata.generation``, which a status write leaves as it is), one line in the log (the
        traceback for ``exc``) and one Warning ``InvalidSpec`` event; the invalid-jobs gauge."""
        state = self._state(key)
        version = _spec_version(raw)
        message = message[:1000]
        if state.invalid != version:
            state.invalid = version
            state.invalid_message = message
            if exc is not None:
                log.error("%s: %s", key, message, exc_info=exc)
            else:
                log.warning("%s: %s", key, message)
            self._emit_event(raw, "Warning", "InvalidSpec", message)
        self._count_invalid(key.kind)

    def _valid(self, key: JobKey) -> None:
        """A pass went through: the job is no longer counted invalid."""
        state = self._state(key)
        if state.invalid is not None:
            state.invalid = state.invalid_message = None
            self._count_invalid(key.kind)

    async def _write_invalid(self, key: JobKey, raw: dict[str, Any]) -> None:
        """Write the status of a job left alone (:func:`~t9k_jobs.engine.invalid_spec_status`: its
        status as it was, and ``SpecValid`` False, reason ``InvalidSpec``), when it changes.
        Raises ApiError (the pass is retried with backoff)."""
        state = self._state(key)
        try:
            old = JobStatus.model_validate(raw["status"]) if raw.get("status") else None
        except ValueError:
            old = None  # a status this version cannot read: written afresh
        new_status = invalid_spec_status(old, state.invalid_message or "the spec cannot be acted on", time.time()).dump()
        if new_status == (raw.get("status") or {}):
            return
        res = JOB_RESOURCES[key.kind]
        body = dict(raw)
        body["status"] = new_status
        try:
            written = await self.client.replace_status(res, body)
        except ApiError as exc:
            metrics.API_ERRORS.labels(verb="update", reason=exc.reason).inc()
            if exc.status == 409:
                state.written = None
            raise
        written.setdefault("kind", key.kind)
        written.setdefault("apiVersion", res.api_version)
        state.written = Written(written, str(raw["metadata"].get("resourceVersion", "")))

    def _count_invalid(self, kind: str) -> None:
        """Set the invalid-jobs gauge of ``kind``."""
        count = sum(1 for k, state in self.jobs.items() if k.kind == kind and state.invalid is not None)
        metrics.INVALID_JOBS.labels(kind=kind).set(count)

    async def _carry_out(self, key: JobKey, job: Job, raw: dict[str, Any], plan: Plan) -> list[Exception]:
        errors: list[Exception] = []
        creates = []
        for obj in plan.create:
            if obj["kind"] in OPTIONAL_CHILDREN and obj["kind"] not in self.served_optional_kinds:
                continue
            creates.append(obj)
        if creates:
            self.expectations.expect(key, creates={_ref(o) for o in creates})
            errors += await self._create_all(key, job, raw, creates)
            if any(isinstance(e, NamespaceTerminating) for e in errors):
                # The namespace, and the job with it, is going away: the pass ends here (no
                # deletes, no status, no events), and without an error, so nothing retries it.
                return []
        if plan.update:
            results = await asyncio.gather(*(self._update(key, job, raw, o) for o in plan.update), return_exceptions=True)
            errors += [r for r in results if isinstance(r, Exception)]
        if plan.delete:
            self.expectations.expect(key, deletes={ChildRef(d.kind, d.name) for d in plan.delete})
            results = await asyncio.gather(
                *(self._delete(key, job, d) for d in plan.delete), return_exceptions=True
            )
            errors += [r for r in results if isinstance(r, Exception)]
        new_status = plan.status.dump()
        if not raw.get("status") and any(o["kind"] == "Pod" for o in creates) and not errors:
            # A new job's first pass: the status it would write only says "creating", and the pass
            # that sees the new pods writes the real one; the budget goes to the creates. (That
            # pass derives the same events again, so these are not sent either.)
            return errors
        if new_status != (raw.get("status") or {}):
            body = dict(raw)
            body["status"] = new_status
            res = JOB_RESOURCES[job.kind]
            try:
                written = await self.client.replace_status(res, body)
            except ApiError as exc:
                metrics.API_ERRORS.labels(verb="update", reason=exc.reason).inc()
                if exc.status == 409:
                    self._state(key).written = None  # stale: read the cache again next time
                errors.append(exc)
                # The events tell of a status not written: the retried pass derives them again
                # from the stored status, so sending them now would send them twice.
                return errors
            else:
                written.setdefault("kind", job.kind)
                written.setdefault("apiVersion", res.api_version)
                state = self._state(key)
                state.written = Written(written, str(raw["metadata"].get("resourceVersion", "")))
                state.parsed = None
                if new_status.get("phase") != (raw.get("status") or {}).get("phase"):
                    log.info("%s: phase %s", key, new_status.get("phase"))
        for ev in plan.events:
            self._emit_event(raw, ev.type, ev.reason, ev.message)
        return errors

    async def _create_all(
        self, key: JobKey, job: Job, raw: dict[str, Any], creates: list[dict[str, Any]]
    ) -> list[Exception]:
        """Create ``creates`` in slow-start batches; return the errors of the batch that failed.

        Children other than pods go first (a pod may mount the ConfigMap or Secret), then pods;
        a batch never mixes the two. Batches of 1, 2, 4... requests, each sent at once and
        awaited before the next, as kube-controller-manager's ``slowStartBatch``
        (``pkg/controller/replicaset``, ``pkg/controller/job``): the first failure ends the
        pass's creates, so a refusal that would repeat (quota, a terminating namespace) costs
        one request, not one per child. The children not sent are no longer expected.
        """
        ordered = [o for o in creates if o["kind"] != "Pod"] + [o for o in creates if o["kind"] == "Pod"]
        size, i = 1, 0
        while i < len(ordered):
            batch = ordered[i : i + size]
            if batch[0]["kind"] != "Pod":
                batch = [o for o in batch if o["kind"] != "Pod"]
            results = await asyncio.gather(
                *(self._create(key, job, raw, o) for o in batch), return_exceptions=True
            )
            i += len(batch)
            errors = [r for r in results if isinstance(r, Exception)]
            if errors:
                for o in ordered[i:]:
                    self.expectations.observed_create(key, _ref(o))
                return errors
            size *= 2
        return []

    async def _create(self, key: JobKey, job: Job, raw: dict[str, Any], obj: dict[str, Any]) -> None:
        ref = _ref(obj)
        kind, name = ref.kind, ref.name
        res = self.resource(kind)
        try:
            await self.client.create(res, job.namespace, materialize(obj))
        except ApiError as exc:
            self.expectations.observed_create(key, ref)
            metrics.API_ERRORS.labels(verb="create", reason=exc.reason).inc()
            if exc.status == 409:
                if kind == "Secret":
                    # Ours from an earlier pass or process: Secrets cannot be read (rbac.py), so
                    # a name taken by another object is not told apart here.
                    self._state(key).secrets.add(name)
                    return
                # Exists already: our cache is behind (fine), or the name is someone else's.
                await self._check_conflict(key, job, res, kind, name)
                return
            if namespace_terminating(exc):
                # The namespace is being deleted, and the job with it: every later create would be
                # refused too, so this is no failure to retry (client-go's controllers do the same);
                # the caller ends the pass.
                log.debug(
                    "%s: not creating %s %s: namespace %s is terminating", key, kind, name, job.namespace
                )
                raise NamespaceTerminating(job.namespace) from exc
            self._emit_event(
                raw, "Warning", f"FailedCreate{kind}", f"cannot create {kind.lower()} {name}: {exc.message}"
            )
            raise
        except Exception:
            self.expectations.observed_create(key, ref)
            raise
        if kind == "Pod":
            metrics.PODS_CREATED.labels(kind=job.kind).inc()
        else:
            metrics.CHILDREN_CREATED.labels(kind=kind).inc()
        if kind == "Secret":  # no informer will report it: it exists now
            self._state(key).secrets.add(name)
            self.expectations.observed_create(key, ref)

    async def _check_conflict(self, key: JobKey, job: Job, res: Resource, kind: str, name: str) -> None:
        """After a 409 on create: whether ``kind/name`` is controlled by another object. If so it
        is remembered as a conflict (the engine stops asking for it and says why) and the job is
        looked at again at once; :meth:`_recheck_conflicts` forgets it when the name is free."""
        holder = await self._holder(res, job, name)
        if holder is None:
            return
        self._state(key).conflicts[ChildRef(kind, name)] = holder
        self.queue.add(key)

    async def _holder(self, res: Resource, job: Job, name: str) -> str | None:
        """Who controls ``name`` of ``res`` in the job's namespace, when it is not this job:
        ``Kind/name`` of its controller, or ``no controller``; None when it is this job's or gone."""
        try:
            obj = await self.client.get(res, job.namespace, name)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        uid = job.metadata.uid
        for ref in obj.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("controller"):
                return None if ref.get("uid") == uid else f"{ref.get('kind')}/{ref.get('name')}"
        return "an object with no controller"

    async def _recheck_conflicts(self, key: JobKey, job: Job) -> None:
        """Forget the conflicts of ``key`` whose names are free again (deleted, or now this job's)."""
        state = self.jobs.get(key)
        if state is None or not state.conflicts:
            return
        for ref in list(state.conflicts):
            res = self.resource(ref.kind)
            holder = await self._holder(res, job, ref.name)
            if holder is None:
                del state.conflicts[ref]
            else:
                state.conflicts[ref] = holder

    async def _update(self, key: JobKey, job: Job, raw: dict[str, Any], obj: dict[str, Any]) -> None:
        """Bring a child to ``obj`` (its desired state): a merge patch of its content, labels and
        desired hash, with the cached resourceVersion as the precondition (a 409 means the cache was
        behind: the pass is retried with what the informer brings)."""
        kind, name = obj["kind"], obj["metadata"]["name"]
        res = self.resource(kind)
        state = self.jobs.get(key)
        cached = state.children.get(ChildRef(kind, name)) if state is not None else None
        meta = obj["metadata"]
        body: dict[str, Any] = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
        body["metadata"] = {"labels": meta.get("labels") or {}, "annotations": meta.get("annotations") or {}}
        if cached is not None and cached.resource_version:
            body["metadata"]["resourceVersion"] = cached.resource_version
        try:
            await self.client.patch(res, job.namespace, name, body)
        except ApiError as exc:
            metrics.API_ERRORS.labels(verb="patch", reason=exc.reason).inc()
            if exc.status not in (404, 409):
                self._emit_event(
                    raw, "Warning", f"FailedUpdate{kind}", f"cannot update {kind.lower()} {name}: {exc.message}"
                )
            raise
        log.info("%s: updated %s %s", key, kind, name)

    async def _delete(self, key: JobKey, job: Job, d: Any) -> None:
        res = self.resource(d.kind)
        try:
            await self.client.delete(res, job.namespace, d.name, uid=d.uid, grace_period=0 if d.force else None)
        except ApiError as exc:
            self.expectations.observed_delete(key, ChildRef(d.kind, d.name))
            if exc.status in (404, 409):
                return  # gone already, or a different object now has the name
            metrics.API_ERRORS.labels(verb="delete", reason=exc.reason).inc()
            raise
        except Exception:
            self.expectations.observed_delete(key, ChildRef(d.kind, d.name))
            raise
        if d.kind == "Pod":
            metrics.PODS_DELETED.labels(kind=job.kind, reason=d.reason).inc()

    # ------------------------------------------------------------------ events

    def _emit_event(self, raw: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Record a core/v1 Event about the job, in the background; failures are only logged.

        As client-go's event recorder (``tools/record``, ``EventCorrelator``): an Event the same
        as one this process recorded (the same job by uid, type, reason and message) is not made
        again: its ``count`` goes up and its ``lastTimestamp`` moves (a patch), so a job that says
        the same thing many times (an invalid spec edited and still invalid, a replica restarted
        for the same reason) has one Event, not one per time. The :data:`RECORDED` most recent are
        remembered; an Event deleted meanwhile (expired) is made anew."""
        meta = raw["metadata"]
        now = rfc3339(time.time())
        message = message[:1024]
        key = (meta.get("namespace"), str(meta.get("uid") or meta["name"]), type_, reason, message)
        seen = self._recorded.pop(key, None)
        if seen is not None:
            seen.count += 1
        else:
            seen = _Recorded(f"{meta['name']}.{uuid.uuid4().hex[:16]}", now)
        self._recorded[key] = seen  # the most recent last
        while len(self._recorded) > RECORDED:
            self._recorded.popitem(last=False)
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": seen.name, "namespace": meta.get("namespace")},
            "involvedObject": {
                "apiVersion": raw.get("apiVersion"),
                "kind": raw.get("kind"),
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self.identity,
            "firstTimestamp": seen.first,
            "lastTimestamp": now,
            "count": seen.count,
        }
        before = seen.sending

        async def send() -> None:
            if before is not None:  # the same Event's earlier record goes first (its create)
                await asyncio.gather(before, return_exceptions=True)
            ns = meta.get("namespace")
            try:
                if event["count"] > 1:
                    try:
                        patch = {"count": event["count"], "lastTimestamp": now, "message": message}
                        await self.events_client.patch(EVENTS, ns, seen.name, patch)
                        return
                    except ApiError as exc:
                        if exc.status != 404:
                            raise
                        # Gone (expired, deleted): made again, under a new name.
                        seen.name = event["metadata"]["name"] = f"{meta['name']}.{uuid.uuid4().hex[:16]}"
                await self.events_client.create(EVENTS, ns, event)
            except Exception as exc:  # noqa: BLE001 - events are best effort
                metrics.API_ERRORS.labels(
                    verb="create", reason=getattr(exc, "reason", type(exc).__name__)
                ).inc()
                log.debug("event %s for %s not recorded: %s", reason, meta["name"], exc)

        task = asyncio.get_running_loop().create_task(send())
        seen.sending = task
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def stop(self, events_grace: float = 5.0) -> None:
        """Stop workers and informers; wait for pending events at most ``events_grace`` seconds
        (those not sent by then are given up: an API server that does not answer must not hold
        the process; :data:`~t9k_jobs.cluster.operator.STOP_WITHIN`)."""
        self.queue.shut_down()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._background:
            await asyncio.wait(self._background, timeout=events_grace)
            for t in self._background:
                t.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)
        await self.events_client.close()


#: How many recorded Events the controller remembers to count repeats on (client-go's
#: ``maxLruCacheEntries``).
RECORDED = 4096


@dataclass
class _Recorded:
    """An Event this process recorded: its ``name``, when it was ``first`` said, how many times
    (``count``), and the task sending its last record (``sending``)."""

    name: str
    first: str
    count: int = 1
    sending: asyncio.Task[None] | None = None


class NamespaceTerminating(Exception):
    """A create was refused because the job's namespace is being deleted: the pass ends, no error."""


def namespace_terminating(exc: ApiError) -> bool:
    """Whether ``exc`` is the API server refusing a create because the namespace is being deleted.

    The answer is 403 Forbidden with the status cause ``NamespaceTerminating`` (core/v1
    ``NamespaceTerminatingCause``).
    """
    causes = (exc.body.get("details") or {}).get("causes") or []
    return exc.status == 403 and any(c.get("reason") == "NamespaceTerminating" for c in causes)


def _flavor_labels(obj: dict[str, Any]) -> dict[str, str]:
    """A ResourceFlavor as the controller keeps it: its ``spec.nodeLabels``."""
    labels = (obj.get("spec") or {}).get("nodeLabels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def _urgent(new: Child | None, old: Child | None) -> bool:
    """A child change that may end the job or needs a replacement: a pod gone or newly ended
    (:attr:`ObservedPod.terminal`: ended by its phase, or by its containers all terminated while
    the kubelet still reports it Running), or a Workload admitted or evicted (its pods are to be
    created or stopped; the queue's own time is Kueue's, not ours to add to)."""
    if new is None:
        return old is not None and old.pod is not None
    if new.workload is not None:
        before = old.workload if old is not None else None
        return before is None or (before.admitted, before.evicted) != (new.workload.admitted, new.workload.evicted)
    return (
        new.pod is not None
        and new.pod.terminal
        and not (old is not None and old.pod is not None and old.pod.terminal)
    )


def _spec_version(raw: dict[str, Any]) -> str:
    """What changes when a job's spec does: ``metadata.generation`` (a status write leaves it),
    else the resourceVersion."""
    meta = raw.get("metadata") or {}
    generation = meta.get("generation")
    return f"g{generation}" if generation is not None else f"rv{meta.get('resourceVersion', '')}"


def _ref(obj: dict[str, Any]) -> ChildRef:
    return ChildRef(obj["kind"], obj["metadata"]["name"])


def _same_version(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    return a is not None and (a.get("metadata") or {}).get("resourceVersion") == b["metadata"].get(
        "resourceVersion"
    )


def _caught_up(cached: dict[str, Any] | None, written: Written) -> bool:
    """Whether the cache's copy has caught up with our write, comparing resourceVersions only for
    equality (the API conventions forbid ordering them): our write was conditional on ``base``,
    so nothing came between; a watch delivers an object's versions in order, so any version the
    cache holds other than ``base`` is our write or a later one."""
    if cached is None:
        return True
    seen = (cached.get("metadata") or {}).get("resourceVersion", "")
    return seen == written.obj["metadata"].get("resourceVersion", "") or seen != written.base
