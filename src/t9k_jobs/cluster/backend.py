"""The cluster backend of :class:`t9k_jobs.Client`: jobs on a Kubernetes cluster as job views.

Synchronous for its callers; underneath it runs the async verbs of :mod:`t9k_jobs.cluster.verbs`
(on kubernetes_asyncio) on an event loop in a daemon thread of its own: each method hands a
coroutine to that loop and waits for it; a followed log is read there and handed over through a
bounded queue. :meth:`ClusterBackend.close` closes the connection and stops the thread (at
interpreter exit too). What is printed about a job is written once, in :mod:`t9k_jobs.show`.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ..api import Job
from ..errors import JobsError, NotSupported
from ..view import JobView, LogOptions, LogStream

T = TypeVar("T")
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
    take (None: no limit). The kubeconfig is read at once (:func:`t9k_jobs.cluster.verbs.connect`)."""

    target = "cluster"

    def __init__(
        self, kubeconfig: Any, context: str | None, namespace: str | None, request_timeout: float | None
    ) -> None:
        from .verbs import connect

        self._loop = _Loop()
        self._holder: dict[str, Any] = {}
        self._finalizer = weakref.finalize(self, _shutdown, self._loop, self._holder)
        try:
            self._holder["cluster"] = self._loop.call(connect(kubeconfig, context, namespace, request_timeout))
        except BaseException:
            self._finalizer()
            raise
        self.namespace: str | None = self._holder["cluster"].namespace
        self.server: str | None = self._holder["cluster"].server

    @property
    def _cl(self) -> Any:
        cluster = self._holder.get("cluster")
        if cluster is None:
            raise JobsError("this client is closed")
        return cluster

    def close(self) -> None:
        self._finalizer()

    # -- reading

    def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        from .verbs import read_view

        return self._loop.call(read_view(self._cl, kind, name, namespace, detail))

    def list(
        self,
        kind: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        all_namespaces: bool = False,
        detail: bool = False,
    ) -> list[JobView]:
        """Every job of ``kind`` (all kinds when None) in ``namespace`` or all namespaces; with
        ``name``, that one job (NotFound when there is none)."""
        from ..api import KINDS
        from .verbs import detail_view, list_jobs, raw_view

        if name is not None and kind is not None:
            return [self.get(kind, name, namespace, detail)]
        kinds = [kind] if kind else list(KINDS)

        async def views() -> list[JobView]:
            raws = await list_jobs(self._cl, kinds, namespace, all_namespaces)
            return [await detail_view(self._cl, r) if detail else raw_view(r) for r in raws]

        return self._loop.call(views())

    def watch(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        done: Callable[[JobView | None], bool],
        timeout: float | None,
    ) -> tuple[JobView | None, bool]:
        """Watch the job (no polling) until ``done(view)`` (``view`` None: deleted) or ``timeout``
        seconds pass, every request included: ``(the last view, whether done said yes)``."""
        from .verbs import raw_view, wait_job

        def done_raw(raw: dict[str, Any] | None) -> bool:
            return done(None if raw is None else raw_view(raw))

        raw, reached = self._loop.call(wait_job(self._cl, kind, name, done_raw, timeout, namespace))
        return (None if raw is None else raw_view(raw)), reached

    def logs(self, kind: str, name: str, options: LogOptions, namespace: str | None = None) -> LogStream:
        from .verbs import open_logs

        agen = self._loop.call(open_logs(self._cl, kind, name, options, namespace))
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
        from .verbs import create_job, raw_view

        body = {k: v for k, v in manifest.items() if k != "status"}
        return raw_view(self._loop.call(create_job(self._cl, body, namespace)))

    def set_field(self, view: JobView, path: list[str], value: Any, verb: str) -> JobView:
        """A JSON merge patch setting ``path`` to ``value``."""
        from .verbs import patch_job, raw_view

        body: Any = value
        for key in reversed(path):
            body = {key: body}
        return raw_view(self._loop.call(patch_job(self._cl, view.kind, view.name, body, view.namespace)))

    def delete(
        self, kind: str, name: str, namespace: str | None = None, purge: bool = False, timeout: float | None = None
    ) -> list[str]:
        """Delete the object; its children follow (the garbage collector). The lines ``delete``
        prints."""
        from ..show import ref
        from .verbs import delete_job

        if purge:
            raise NotSupported("--purge is for local runs; a cluster job's logs go with its pods")
        if timeout is not None:
            raise NotSupported("--timeout is for local runs; on a cluster, wait for the pods to go with kubectl wait")
        self._loop.call(delete_job(self._cl, kind, name, namespace))
        return [f"{ref(kind, name)} deleted"]


__all__ = ["ClusterBackend"]
