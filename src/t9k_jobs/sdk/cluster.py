"""The cluster backends of the SDK: jobs on a Kubernetes cluster as job views.

:class:`AsyncClusterBackend` (for :class:`t9k_jobs.AsyncClient`, the dashboard's) runs the async
verbs of :mod:`t9k_jobs.sdk.cluster_api` on the caller's event loop over one connection, which any
number of coroutines share. With ``watch=True`` it keeps the jobs, their pods, the Events of both
and the native PodGroups in informers (:mod:`t9k_jobs.cluster.informer`: list, then watch) and
answers from them: what twenty open pages cost the API server is one watch per resource, not a
read per page per second (issue 30); :meth:`AsyncClusterBackend.changes` wakes readers on a
change.

:class:`ClusterBackend` (for the synchronous :class:`t9k_jobs.Client`) runs
:class:`AsyncClusterBackend`'s verbs (without informers) on an event loop in a daemon thread of its
own: each method hands that coroutine to the loop and waits for it, so each verb has one body
(issue 44); a followed log is read there and handed over through a bounded queue.
:meth:`ClusterBackend.close` closes the connection and stops the thread (at interpreter exit too).
What is printed about a job is written once, in :mod:`t9k_jobs.sdk.present`.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ..api import GROUP, KINDS, VERSION, Job
from ..changes import Changes
from ..cluster.client import EVENTS, JOB_RESOURCES, NATIVE_PODGROUPS, PODS
from ..cluster.informer import Informer
from ..errors import ClusterError, JobsError, NotFound, NotSupported
from ..frameworks.base import LABEL_OWNER_KIND, LABEL_OWNER_NAME
from ..words import ref
from .cluster_api import (
    _event_time,
    _network_errors,
    connect,
    controlled_by,
    create_job,
    delete_job,
    detail_view,
    list_jobs,
    patch_job,
    pod_group_name,
    pod_sort_key,
    position_of,
    raw_view,
    read_view,
    status_of,
    wait_job,
)
from .queue_position import positions
from .view import Done, JobView, LogOptions, LogStream, Watched, log_chunks

T = TypeVar("T")
GROUP_VERSION = f"{GROUP}/{VERSION}"
_END = object()


class _Loop:
    """An event loop in a daemon thread; :meth:`call` runs a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="t9k-jobs-client", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # interrupted (Ctrl-C): stop the request too
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


def _shutdown(loop: _Loop, holder: dict[str, Any]) -> None:
    """Close the connection and stop the loop (at close, collection or exit)."""
    cluster = holder.pop("cluster", None)
    if cluster is not None and loop.thread.is_alive():
        try:
            asyncio.run_coroutine_threadsafe(cluster.close(), loop.loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
    loop.stop()


class ClusterBackend:
    """The cluster of ``kubeconfig`` and ``context``; ``namespace``: every method's default
    (default: the context's, else ``default``); ``request_timeout``: seconds one request may
    take (None: no limit). The kubeconfig is read at once (:func:`t9k_jobs.sdk.cluster_api.connect`).

    Each verb is :class:`AsyncClusterBackend`'s, run on this backend's loop thread (one body per
    verb, issue 44); a followed log is handed over through a bounded queue (:meth:`logs`)."""

    target = "cluster"

    def __init__(
        self, kubeconfig: Any, context: str | None, namespace: str | None, request_timeout: float | None
    ) -> None:
        self._loop = _Loop()
        self._holder: dict[str, Any] = {}
        self._finalizer = weakref.finalize(self, _shutdown, self._loop, self._holder)
        try:
            self._holder["cluster"] = self._loop.call(
                connect(kubeconfig, context, namespace, request_timeout, one_shot=True)
            )
        except BaseException:
            self._finalizer()
            raise
        self.namespace: str | None = self._holder["cluster"].namespace
        self.server: str | None = self._holder["cluster"].server
        self._backend = AsyncClusterBackend(self._holder["cluster"])

    @property
    def _async(self) -> AsyncClusterBackend:
        if "cluster" not in self._holder:
            raise JobsError("this client is closed")
        return self._backend

    def close(self) -> None:
        self._finalizer()

    # -- reading

    def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        return self._loop.call(self._async.get(kind, name, namespace, detail))

    def list(
        self, kind: str | None = None, name: str | None = None, namespace: str | None = None,
        all_namespaces: bool = False, detail: bool = False,
    ) -> list[JobView]:  # fmt: skip
        """As :meth:`AsyncClusterBackend.list`."""
        return self._loop.call(self._async.list(kind, name, namespace, all_namespaces, detail))

    def queue_positions(self, views: list[JobView]) -> dict[tuple[str, str], str]:
        """As :meth:`AsyncClusterBackend.queue_positions`."""
        return self._loop.call(self._async.queue_positions(views))

    def watch(self, kind: str, name: str, namespace: str | None, done: Done, timeout: float | None) -> Watched:
        """As :meth:`AsyncClusterBackend.watch`."""
        return self._loop.call(self._async.watch(kind, name, namespace, done, timeout))

    def logs(self, kind: str, name: str, options: LogOptions, namespace: str | None = None) -> LogStream:
        """:meth:`AsyncClusterBackend.open_logs` (a job without pods is an error here), its lines
        read on the loop thread and handed over through a bounded queue."""
        agen = self._loop.call(self._async.open_logs(kind, name, options, namespace, require_pods=True))
        lines: queue.Queue[Any] = queue.Queue(maxsize=1000)

        async def pump() -> None:
            item: Any = _END
            try:
                async for line in agen:
                    while True:
                        try:
                            lines.put_nowait(line)
                            break
                        except queue.Full:
                            await asyncio.sleep(0.02)
            except BaseException as exc:  # noqa: BLE001 - handed to the reader (cancel included)
                item = exc
            finally:
                await agen.aclose()
            while True:
                try:
                    lines.put_nowait(item)
                    return
                except queue.Full:
                    if isinstance(item, asyncio.CancelledError):
                        return  # closed by the reader, who reads no more
                    await asyncio.sleep(0.02)

        future = asyncio.run_coroutine_threadsafe(pump(), self._loop.loop)

        def read() -> Iterator[str]:
            try:
                while True:
                    try:
                        item = lines.get(timeout=0.5)
                    except queue.Empty:
                        if future.done() and lines.empty():
                            return
                        continue
                    if item is _END or isinstance(item, asyncio.CancelledError):
                        return
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            finally:
                future.cancel()

        return LogStream(read(), future.cancel)

    # -- writing

    def create(self, job: Job, manifest: dict[str, Any], path: Path | None, namespace: str | None = None) -> JobView:
        return self._loop.call(self._async.create(job, manifest, path, namespace))

    def set_field(self, view: JobView, path: list[str], value: Any, verb: str) -> JobView:
        return self._loop.call(self._async.set_field(view, path, value, verb))

    def delete(
        self, kind: str, name: str, namespace: str | None = None, purge: bool = False, timeout: float | None = None
    ) -> list[str]:
        return self._loop.call(self._async.delete(kind, name, namespace, purge, timeout))


# ----------------------------------------------------------------------------- the async backend

def _slim_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """What a job's view reads of a pod (its replica, node, gang, containers' states and times):
    metadata without managedFields, the spec's node, containers' names and scheduling group, the
    status whole. Ten thousand pods stay small."""
    meta = {k: v for k, v in (pod.get("metadata") or {}).items() if k != "managedFields"}
    spec = pod.get("spec") or {}
    slim_spec: dict[str, Any] = {
        "containers": [{"name": c.get("name")} for c in spec.get("containers") or [] if isinstance(c, dict)],
    }
    for key in ("nodeName", "schedulingGroup", "priorityClassName", "schedulerName"):
        if key in spec:
            slim_spec[key] = spec[key]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": slim_spec, "status": pod.get("status") or {}}


def _slim_event(ev: dict[str, Any]) -> dict[str, Any]:
    """What ``describe`` shows of an Event: its object, type, reason, message and times."""
    meta = ev.get("metadata") or {}
    obj = ev.get("involvedObject") or {}
    return {
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                     "creationTimestamp": meta.get("creationTimestamp")},
        "involvedObject": {"kind": obj.get("kind"), "name": obj.get("name")},
        "type": ev.get("type"), "reason": ev.get("reason"), "message": ev.get("message"),
        "lastTimestamp": ev.get("lastTimestamp"), "eventTime": ev.get("eventTime"),
    }


def _slim_job(job: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (job.get("metadata") or {}).items() if k != "managedFields"}
    return {**job, "metadata": meta}


class ClusterWatch:
    """Informers over what a job's view needs, in one namespace (``namespace``) or all (None):
    the four job kinds, the pods the operator made (label ``tensorstack.dev/owner-kind``), the
    Events of jobs and of pods, and the native PodGroups (where served). Started on first use;
    :attr:`changes` is bumped on every change of any of them."""

    def __init__(self, cl: Any, namespace: str | None) -> None:
        kube = cl.kube
        self.server = cl.server
        self.changes = Changes()
        self.jobs = {
            kind: Informer(kube, JOB_RESOURCES[kind], namespace=namespace, transform=_slim_job) for kind in KINDS
        }
        self.pods = Informer(kube, PODS, namespace=namespace, label_selector=LABEL_OWNER_KIND, transform=_slim_pod)
        self.job_events = Informer(
            kube, EVENTS, namespace=namespace, field_selector=f"involvedObject.apiVersion={GROUP_VERSION}",
            transform=_slim_event,
        )
        self.pod_events = Informer(
            kube, EVENTS, namespace=namespace, field_selector="involvedObject.kind=Pod", transform=_slim_event
        )
        self.pod_groups = Informer(kube, NATIVE_PODGROUPS, namespace=namespace)
        self._by_owner: dict[tuple[str, str, str], set[tuple[str, str]]] = {}
        self._events_of: dict[tuple[str, str, str], set[tuple[str, str]]] = {}
        self.pods.add_handler(self._index_pod)
        for inf in (self.job_events, self.pod_events):
            inf.add_handler(self._index_event)
        for inf in self.informers():
            inf.add_handler(lambda *_: self.changes.bump())
        self._tasks: list[asyncio.Task[None]] = []

    def informers(self) -> list[Any]:
        return [*self.jobs.values(), self.pods, self.job_events, self.pod_events, self.pod_groups]

    def _index_pod(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            labels = obj["metadata"].get("labels") or {}
            owner = (key[0], str(labels.get(LABEL_OWNER_KIND, "")), str(labels.get(LABEL_OWNER_NAME, "")))
            keys = self._by_owner.setdefault(owner, set())
            if add:
                keys.add(key)
            else:
                keys.discard(key)
                if not keys:
                    self._by_owner.pop(owner, None)

    def _index_event(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            involved = obj["involvedObject"]
            about = (key[0], str(involved.get("kind")), str(involved.get("name")))
            keys = self._events_of.setdefault(about, set())
            if add:
                keys.add(key)
            else:
                keys.discard(key)
                if not keys:
                    self._events_of.pop(about, None)

    async def start(self, timeout: float | None) -> None:
        """Start the informers (once) and wait until the jobs' have listed, at most ``timeout``
        seconds. Raises :class:`ClusterError` with what the API server said when a job kind cannot
        be listed by then (a silent server, a kind not served, no permission)."""
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(inf.run(optional=inf is self.pod_groups)) for inf in self.informers()]
        waits = [inf.synced.wait() for inf in self.jobs.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        except asyncio.TimeoutError:
            raise ClusterError(
                self.problem() or f"the API server at {self.server} has not answered the list of jobs within {timeout:g} s"
            ) from None

    def problem(self) -> str | None:
        """What keeps the caches from being complete now (one line, naming the server), or None."""
        for inf in self.informers():
            if inf.error is not None:
                return f"the API server at {self.server}: cannot watch {inf.resource.plural}: {inf.error}"
        return None

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def raw(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.jobs[kind].get(namespace, name)

    def all(self, kind: str | None) -> list[dict[str, Any]]:
        kinds = [kind] if kind else list(self.jobs)
        out = [obj for k in kinds for obj in self.jobs[k].store.values()]
        out.sort(key=lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return out

    def pods_of(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]:
        """The job's pods, sorted as :func:`t9k_jobs.sdk.cluster_api.job_pods` sorts them: those with
        its owner labels whose controller is the job (a bare pod that only carries the labels is
        none of its replicas, as the operator sees it)."""
        raw = self.raw(kind, namespace, name)
        uid = (raw or {}).get("metadata", {}).get("uid")
        keys = self._by_owner.get((namespace, kind, name), set())
        pods = [p for k in keys if (p := self.pods.store.get(k)) is not None and controlled_by(p, kind, name, uid)]
        return sorted(pods, key=pod_sort_key)

    def events_of(self, kind: str, namespace: str, name: str, pod_names: set[str], last: int = 20) -> list[dict[str, Any]]:
        found = []
        for about in [(namespace, kind, name), *((namespace, "Pod", p) for p in pod_names)]:
            for key in self._events_of.get(about, ()):
                ev = self.job_events.store.get(key) or self.pod_events.store.get(key)
                if ev is not None:
                    found.append(ev)
        found.sort(key=_event_time)
        return found[-last:]

    def pod_group(self, raw: dict[str, Any], pods: list[dict[str, Any]], namespace: str) -> dict[str, Any] | None:
        name = pod_group_name(raw, pods)
        return self.pod_groups.get(namespace, name) if name is not None else None


class AsyncClusterBackend:
    """A cluster's jobs as coroutines over one connection (``cl``: a
    :class:`~t9k_jobs.sdk.cluster_api.Cluster`), for :class:`t9k_jobs.AsyncClient`. ``watch``: answer
    reads from informers (``cache``, a :class:`ClusterWatch`) over ``namespace`` (the connection's
    default) or every namespace (``all_namespaces``); a job of another namespace is then not found."""

    target = "cluster"

    def __init__(self, cl: Any, watch: bool = False, all_namespaces: bool = False) -> None:
        self.cl = cl
        self.namespace: str | None = cl.namespace
        self.server: str | None = cl.server
        self.all_namespaces = all_namespaces
        self.cache = ClusterWatch(cl, None if all_namespaces else cl.namespace) if watch else None
        # When watching: the view of each job, kept while the informer holds the same object (a
        # view parses the job: a thousand jobs are not parsed again for each change of one).
        self._views: dict[tuple[str, str, str], tuple[dict[str, Any], JobView]] = {}

    async def close(self) -> None:
        if self.cache is not None:
            await self.cache.close()
        await self.cl.close()

    async def _watching(self) -> ClusterWatch | None:
        if self.cache is not None:
            await self.cache.start(self.cl.kube.request_timeout)
        return self.cache

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.cl.namespace

    def problem(self) -> str | None:
        return self.cache.problem() if self.cache is not None else None

    # -- reading

    async def list(
        self, kind: str | None = None, name: str | None = None, namespace: str | None = None,
        all_namespaces: bool = False, detail: bool = False,
    ) -> list[JobView]:  # fmt: skip
        """Every job of ``kind`` (all kinds when None) in ``namespace`` or all namespaces; with
        ``name`` (and a kind), that one job (NotFound when there is none); ``detail``: each with
        what ``describe`` shows."""
        if name is not None and kind is not None:
            return [await self.get(kind, name, namespace, detail)]
        w = await self._watching()
        if w is None or detail:
            raws = await list_jobs(self.cl, [kind] if kind else list(KINDS), namespace, all_namespaces)
            return [await detail_view(self.cl, r) if detail else raw_view(r) for r in raws]
        raws = w.all(kind)
        if not all_namespaces:
            raws = [r for r in raws if r["metadata"].get("namespace") == self._ns(namespace)]
        views, kept = [], {}
        for raw in raws:
            key = (str(raw.get("kind")), str(raw["metadata"].get("namespace")), str(raw["metadata"].get("name")))
            cached = self._views.get(key)
            view = cached[1] if cached is not None and cached[0] is raw else raw_view(raw)
            kept[key] = (raw, view)
            views.append(view)
        if kind is None and all_namespaces == self.all_namespaces:
            self._views = kept
        else:
            self._views.update(kept)
        return views

    async def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        """The job's view; ``detail``: with its pods, PodGroup and Events. Raises NotFound."""
        w = await self._watching()
        if w is None:
            return await read_view(self.cl, kind, name, namespace, detail)
        ns = self._ns(namespace)
        raw = w.raw(kind, ns, name)
        if raw is None:
            raise NotFound(f"{JOB_RESOURCES[kind].kind} {name!r} not found in namespace {ns!r}")
        if not detail:
            return raw_view(raw)
        pods = w.pods_of(kind, ns, name)
        status = status_of(raw)
        names = {p["metadata"]["name"] for p in pods} | {
            rs.name for t in (status.tasks if status is not None else []) for rs in t.replicas
        }
        view = raw_view(raw, pods, w.pod_group(raw, pods, ns), w.events_of(kind, ns, name, names), detail=True)
        # A queued job's place in its Kueue queue (the dashboard's job page says it as describe does).
        view.queue_position = await position_of(self.cl, view, ns)
        return view

    async def queue_positions(self, views: list[JobView]) -> dict[tuple[str, str], str]:
        """Where each queued job of ``views`` stands in its Kueue LocalQueue (:mod:`.queue_position`):
        ``(namespace, name)`` -> ``N/M``."""
        try:
            return await positions(self.cl.kube, [v.source for v in views if isinstance(v.source, dict)])
        except _network_errors() as exc:
            raise self.cl.unreachable(exc) from None

    async def watch(self, kind: str, name: str, namespace: str | None, done: Done, timeout: float | None) -> Watched:
        """Watch the job (no polling) until ``done(view)`` (``view`` None: deleted) or ``timeout``
        seconds pass, every request included: ``(the last view, whether done said yes)``."""

        def done_raw(raw: dict[str, Any] | None) -> bool:
            return done(None if raw is None else raw_view(raw))

        raw, reached = await wait_job(self.cl, kind, name, done_raw, timeout, namespace)
        return (None if raw is None else raw_view(raw)), reached

    async def version(self) -> int:
        w = await self._watching()
        return w.changes.version if w is not None else 0

    async def changes(self, after: int, timeout: float | None = None) -> int:
        """Wait until something watched changed since version ``after`` (or ``timeout`` s); the
        version then. Without ``watch``: waits ``timeout`` and returns ``after + 1``."""
        w = await self._watching()
        if w is None:
            await asyncio.sleep(timeout if timeout is not None else 1.0)
            return after + 1
        return await w.changes.wait(after, timeout)

    async def open_logs(
        self, kind: str, name: str, options: LogOptions, namespace: str | None = None, *, require_pods: bool = False
    ) -> Any:
        """The job's log lines as an async iterator (:func:`t9k_jobs.sdk.cluster_logs.open_logs`; a
        job without pods is an error with ``require_pods``); when watching, new pods and the
        job's end are learnt from the informers, not by polling."""
        from .cluster_logs import open_logs  # lazy: keeps prometheus_client (last_words) out of all but logs

        w = await self._watching()
        if w is None:
            return await open_logs(self.cl, kind, name, options, namespace, require_pods=require_pods)
        ns = self._ns(namespace)

        async def look() -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
            raw = w.raw(kind, ns, name)
            return raw, (w.pods_of(kind, ns, name) if raw is not None else [])

        async def pause(seconds: float) -> None:
            await w.changes.wait(w.changes.version, seconds)

        return await open_logs(self.cl, kind, name, options, ns, look=look, pause=pause, require_pods=require_pods)

    async def open_raw_log(self, kind: str, name: str, options: LogOptions, namespace: str | None = None) -> Any:
        """The log's lines as bytes (a download), newline-ended, about a MiB at a time."""
        lines = await self.open_logs(kind, name, options, namespace)

        return log_chunks(lines)

    # -- writing

    async def create(
        self, job: Job, manifest: dict[str, Any], path: Path | None, namespace: str | None = None
    ) -> JobView:
        """Create the job of ``manifest`` (its status left out)."""
        body = {k: v for k, v in manifest.items() if k != "status"}
        return raw_view(await create_job(self.cl, body, namespace))

    async def set_field(self, view: JobView, path: list[str], value: Any, verb: str) -> JobView:
        """A JSON merge patch setting ``path`` to ``value``."""
        body: Any = value
        for key in reversed(path):
            body = {key: body}
        return raw_view(await patch_job(self.cl, view.kind, view.name, body, view.namespace))

    async def delete(
        self, kind: str, name: str, namespace: str | None = None, purge: bool = False, timeout: float | None = None
    ) -> list[str]:
        """Delete the object; its children follow (the garbage collector). The lines ``delete`` prints."""
        if purge:
            raise NotSupported("--purge is for local runs; a cluster job's logs go with its pods")
        if timeout is not None:
            raise NotSupported("--timeout is for local runs; on a cluster, wait for the pods to go with kubectl wait")
        await delete_job(self.cl, kind, name, namespace)
        return [f"{ref(kind, name)} deleted"]


__all__ = ["AsyncClusterBackend", "ClusterBackend", "ClusterWatch"]
