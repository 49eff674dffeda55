"""The job controller: informers feed a work queue; workers run the engine and carry out its plan.

One reconcile pass for a job key ``Kind/namespace/name``:

1. read the job from the informer cache (or the newer copy this process just wrote);
2. wait while expectations are unmet (children created or deleted but not yet in the cache);
3. parse it with the same models as ``t9k-jobs run``; a spec that does not validate, or that the
   engine cannot handle (it raises), gets one ``InvalidSpec`` Warning event per version of its
   spec (``metadata.generation``), the condition ``SpecValid`` False (reason ``InvalidSpec``) in
   its status, and is left alone, not retried, until its spec changes;
4. build :class:`~t9k_jobs.engine.Observed` from the cached children that carry this job's
   controller owner reference, and call :func:`~t9k_jobs.engine.reconcile` with the
   controller's one :class:`~t9k_jobs.engine.Runtime` (built at start-up from discovery);
5. carry out the plan (:mod:`.actuator`): create what it creates (controller owner references
   are set by the engine), delete with UID preconditions, write the status through the status
   subresource when it changed (with the job's resourceVersion as precondition), emit the plan's
   Events, and requeue after ``plan.requeue_after`` seconds. API errors requeue the key with
   backoff.

What it keeps of each child is :mod:`.projection`'s; the Kueue adaptor's cluster half is
:mod:`.kueue`; its bookkeeping per job, :mod:`.state`.
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

from ..api import Job, ManifestError
from ..api.kinds import KINDS
from ..engine import Observed, ObservedPod, Runtime, reconcile, rfc3339
from ..engine.runtime import NODE_LOST_AFTER
from ..frameworks import parse_job
from ..frameworks.base import LABEL_OWNER_KIND, PRIORITY_CLASS_PREFIX
from ..frameworks.types import GangMode
from . import kueue, metrics
from .actuator import Actuator
from .client import (
    CORE_CHILDREN,
    EVENTS,
    JOB_RESOURCES,
    NATIVE_PODGROUPS,
    NODES,
    OPTIONAL_CHILDREN,
    PRIORITYCLASSES,
    ApiError,
    KubeClient,
    Resource,
)
from .expectations import Expectations
from .informer import Informer, Key
from .last_words import LastWords
from .output_probe import OutputProbe
from .projection import Child, ChildRef, JobKey, project_child, unreachable_since
from .state import JobState, Written
from .workqueue import ShutDown, WorkQueue

log = logging.getLogger("t9k_jobs.controller")

CHILD_SELECTOR = f"{LABEL_OWNER_KIND} in ({','.join(sorted(KINDS))})"
COMPONENT = "t9k-jobs-operator"
#: Why a job's TensorBoard is not made on a cluster that does not serve T9k's TensorBoard API.
TENSORBOARD_HINT = (
    "this cluster does not serve T9k's TensorBoard API (tensorboards.tensorstack.dev/v1beta1): install T9k's "
    "TensorBoard controller, or leave tensorboardSpec out"
)


class Controller(Actuator):
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
        ttl_after_finished: int | None = None,
        disruption_budgets: bool = True,
    ) -> None:
        self.client = client
        #: When the replicas of jobs with a progress deadline last wrote to their logs.
        self.output = OutputProbe(client)
        #: What replica pods printed last, kept when they are deleted.
        self.last_words = LastWords(client)
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
        # What the engine decides for, built once from discovery (the operator restarts itself when
        # what the API server serves changes: operator.py). ``node_lost_after``: seconds a node may
        # be unreachable before the replicas on it count as lost (issue 25; the operator's
        # --node-lost-after); ``ttl_after_finished``: seconds a finished job without its own
        # annotation is kept (--ttl-after-finished; None: kept). ``disruption_budgets``: a gang job
        # gets a PodDisruptionBudget (--no-disruption-budgets: none, and none watched).
        self.disruption_budgets = disruption_budgets
        self.runtime = Runtime(
            gang=self.gang_mode, queueing=self.queueing, node_lost_after=node_lost_after,
            ttl_after_finished=ttl_after_finished,
            unserved=frozenset(k for k in OPTIONAL_CHILDREN if k not in self.served_optional_kinds)
            | (frozenset() if disruption_budgets else frozenset({"PodDisruptionBudget"})),
            unserved_hint=TENSORBOARD_HINT,
        )  # fmt: skip
        self.identity = identity or f"t9k-jobs-{uuid.uuid4().hex[:8]}"
        self.queue: WorkQueue[JobKey] = WorkQueue()
        self.expectations: Expectations[JobKey, ChildRef] = Expectations()
        self.job_informers: dict[str, list[Informer[dict[str, Any]]]] = {}
        self.child_informers: list[Informer[Child]] = []
        self.flavors: Informer[kueue.Flavor] | None = None
        # Whether Kueue's Topology Aware Scheduling serves a job's queue (LocalQueues, ClusterQueues).
        self.queue_topology: kueue.QueueTopology | None = None
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
            kinds = [r for r in CORE_CHILDREN.values() if r.kind != "Secret"
                     and (self.disruption_budgets or r.kind != "PodDisruptionBudget")]  # fmt: skip
            kinds += [self.resource(k) for k in sorted(self.served_optional_kinds)]
            for res in kinds:
                child: Informer[Child] = Informer(
                    self.client, res, namespace=ns, label_selector=CHILD_SELECTOR, transform=project_child
                )
                child.add_handler(self._on_child)
                self.child_informers.append(child)
        if self.queueing:
            # The node labels of Kueue's flavors, put on the pods of an admitted job.
            self.flavors = kueue.flavor_informer(self.client)
            self.queue_topology = kueue.QueueTopology(self.client, self.namespaces, self.flavors)
            for inf in [self.flavors, *self.queue_topology.informers()]:
                inf.add_handler(self._on_queue)
        if self.gang_mode == "native":
            # Which t9k-priority-N classes exist: a native gang names its class only then.
            self.priority_classes = Informer(self.client, PRIORITYCLASSES, transform=lambda obj: True)
            self.priority_classes.add_handler(self._on_priority_class)
        # Nodes' readiness: the replicas of a node unreachable for node_lost_after are lost.
        self.nodes = Informer(self.client, NODES, transform=unreachable_since)
        self.nodes.add_handler(self._on_node)

    def informers(self) -> list[Informer[Any]]:
        extra: list[Informer[Any]] = [i for i in (self.flavors, self.nodes, self.priority_classes) if i is not None]
        extra += self.queue_topology.informers() if self.queue_topology is not None else []
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
        self._look_at_every_job()

    def _on_queue(self, event: str, key: Key, new: Any, old: Any) -> None:
        """A Kueue LocalQueue, ClusterQueue or ResourceFlavor came, went or changed what the
        controller keeps of it: look at every job again (rare; a queued job's Workload asks for
        a topology where the queue now serves one, and an admitted job's pods carry the node
        labels of its flavors). Not before every job informer has listed: the first pass of each
        job comes anyway, and a thousand queues listed at start would each enqueue every job."""
        if (event != "MODIFIED" or new != old) and all(
            inf.synced.is_set() for infs in self.job_informers.values() for inf in infs
        ):
            self._look_at_every_job()

    def _look_at_every_job(self) -> None:
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
            self.output.forget(key)

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

    def _queue_of(self, job: Job) -> str | None:
        """The LocalQueue a ``t9kScheduler`` job names (``None``: it names none)."""
        sched = job.scheduler.t9k_scheduler if job.scheduler else None
        return sched.queue_name if sched is not None else None

    def observe(self, key: JobKey, uid: str | None, queue: str | None = None) -> Observed:
        """The job's children, as the engine sees them: only those whose controller is this job;
        ``queue``: the LocalQueue of the job's namespace it names, if any (whether Kueue's
        Topology Aware Scheduling serves it)."""
        pods: dict[str, ObservedPod] = {}
        others: set[tuple[str, str]] = set()
        ready: set[tuple[str, str]] = set()
        desired_hashes: dict[tuple[str, str], str] = {}
        unconstrained: set[tuple[str, str]] = set()
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
                if c.unconstrained:
                    unconstrained.add((ref.kind, ref.name))
                if c.workload is not None and ref.name == key.name:
                    workload = kueue.with_node_labels(c.workload, c.flavors, self.flavors)
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
            priority_classes=self.known_priority_classes(),
            workload=workload,
            unreachable_nodes=unreachable,
            unconstrained=frozenset(unconstrained),
            queue_topology=queue is not None and self.queue_topology is not None
            and self.queue_topology.serves(key.namespace, queue),
        )

    @property
    def queueing(self) -> bool:
        """Whether ``t9kScheduler`` jobs are queued through Kueue here (:func:`.kueue.serves_queueing`)."""
        return kueue.serves_queueing(self.optional_kinds)

    @property
    def gang_mode(self) -> GangMode:
        """How ``t9kScheduler`` jobs are scheduled here (:data:`~t9k_jobs.frameworks.types.GangMode`):
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
        observed = await self.output.fill(key, job, self.observe(key, meta.get("uid"), self._queue_of(job)))
        try:
            plan = reconcile(job, observed, time.time(), self.runtime)
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
        if plan.expire_after == 0:
            return await self._expire(key, job)
        wake = plan.requeue_after if not plan.finished else None
        if plan.expire_after is not None:  # a finished job with a time to live: look again then
            wake = plan.expire_after if wake is None else min(wake, plan.expire_after)
        if wake is not None:
            self.queue.add_after(key, wake + 0.05)
            return "requeue_after"
        return "success"

    async def _expire(self, key: JobKey, job: Job) -> str:
        """Delete a finished job past its time to live (:mod:`t9k_jobs.engine.ttl`), only if it is
        still the one reconciled (its UID), its children with it (background propagation: the
        garbage collector deletes what it owns). Returns the result label ``deleted``; raises
        :class:`ApiError` (retried) except for 404 and 409 (gone, or another job has the name)."""
        try:
            await self.client.delete(JOB_RESOURCES[job.kind], job.namespace, job.name, uid=job.metadata.uid,
                                     propagation="Background")  # fmt: skip
        except ApiError as exc:
            if exc.status not in (404, 409):
                metrics.API_ERRORS.labels(verb="delete", reason=exc.reason).inc()
                raise
        log.info("%s: deleted, finished past its time to live", key)
        return "deleted"

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

    def _count_invalid(self, kind: str) -> None:
        """Set the invalid-jobs gauge of ``kind``."""
        count = sum(1 for k, state in self.jobs.items() if k.kind == kind and state.invalid is not None)
        metrics.INVALID_JOBS.labels(kind=kind).set(count)

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
