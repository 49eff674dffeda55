"""The SDK for an event loop: :class:`AsyncClient` (``from t9k_jobs import AsyncClient``), the
dashboard's, with the same rules and words as :class:`~t9k_jobs.sdk.client.Client` (issue 34 gave
it its own module; ``client.py`` holds ``Client``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from .arguments import Duration, KindLike, check_arguments, checked, resolve_kind, seconds
from .backend import OverBackend
from .client import DEFAULT_REQUEST_TIMEOUT, edited
from .edits import edit_of
from .view import Deleted, Edited, JobView, LogOptions


class AsyncClient(OverBackend):
    """The SDK for an event loop (the dashboard's): jobs on one target as coroutines, with the
    same rules and words as :class:`Client`, which any number of tasks may share.

    It returns job views (:class:`t9k_jobs.sdk.view.JobView`, what ``get`` and ``describe`` read) and
    raises the errors of :mod:`t9k_jobs.errors`. Made with :meth:`local` or :meth:`cluster`; with
    ``watch=True`` it keeps the target's jobs in a cache kept true by watching (inotify for local
    runs, informers on a cluster), reads come from it, and :meth:`changes` waits for the next
    change: what many readers cost is what one costs. Close it with :meth:`close` (or ``async
    with``)::

        client = AsyncClient.local(watch=True)
        seen = await client.version()
        while True:
            for view in await client.views():
                print(view.kind, view.name, view.phase)
            seen = await client.changes(seen, timeout=30)
    """

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    @property
    def run_dir(self) -> Path | None:
        """The one local run this client acts on (``local(run_dir=...)``); None otherwise."""
        return getattr(self.backend, "run_dir", None)

    @property
    def runs_dir(self) -> Path | None:
        """The runs dir of a local client (``./t9k-runs`` by default); None on a cluster."""
        if self.target != "local":
            return None
        from ..local.rundir import runs_dir_default  # lazy: keeps the local run dirs out of a cluster client

        return getattr(self.backend, "runs_dir", None) or runs_dir_default()

    @classmethod
    def local(
        cls, runs_dir: str | os.PathLike | None = None, run_dir: str | os.PathLike | None = None, watch: bool = False
    ) -> AsyncClient:
        """This machine's runs under ``runs_dir`` (default ``./t9k-runs``), or the one in
        ``run_dir``; ``watch``: keep them in a cache that inotify keeps true (the ``watchfiles``
        library; without it, or without inotify, the cache looks again every 2 s)."""
        check_arguments("local", {"runs_dir": runs_dir, "run_dir": run_dir, "watch": watch})
        from .local_aio import AsyncLocalBackend  # lazy: keeps the local runtime out of a cluster client

        return cls(AsyncLocalBackend(Path(runs_dir) if runs_dir else None, Path(run_dir) if run_dir else None, watch))

    @classmethod
    async def cluster(
        cls,
        kubeconfig: str | os.PathLike | None = None,
        context: str | None = None,
        namespace: str | None = None,
        request_timeout: Duration = DEFAULT_REQUEST_TIMEOUT,
        watch: bool = False,
        all_namespaces: bool = False,
    ) -> AsyncClient:
        """The cluster of ``kubeconfig`` and ``context``, as :meth:`Client.cluster` (the same
        arguments and errors), over one connection. ``watch``: keep the jobs of ``namespace``
        (every namespace with ``all_namespaces``), their pods, the Events of both and the native
        PodGroups in informers; a job outside them is then not found."""
        check_arguments(
            "cluster",
            {"kubeconfig": kubeconfig, "context": context, "namespace": namespace,
             "request_timeout": request_timeout, "watch": watch, "all_namespaces": all_namespaces},
        )
        from .cluster import AsyncClusterBackend  # lazy: keeps the cluster stack out of a local client
        from .cluster_api import connect  # lazy: keeps the cluster stack out of a local client

        cl = await connect(kubeconfig, context, namespace, seconds(request_timeout) or None)
        return cls(AsyncClusterBackend(cl, watch=watch, all_namespaces=all_namespaces))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stop watching and release the connection."""
        await self.backend.close()

    # -- reading

    @checked
    async def views(self, kind: KindLike | None = None, all_namespaces: bool = False) -> list[JobView]:
        """Every job of ``kind`` (default: all kinds) in the client's namespace (or all of them);
        locally, the newest run of each name and every live one."""
        return await self.backend.list(resolve_kind(kind) if kind is not None else None, None, all_namespaces)

    @checked
    async def view(self, kind: KindLike, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        """One job's view; ``detail``: with what ``describe`` shows (events; a cluster job's pods
        and PodGroup). Raises :class:`NotFound`."""
        return await self.backend.get(resolve_kind(kind), name, namespace, detail)

    async def version(self) -> int:
        """The version of what the client watches (0 without ``watch``)."""
        return await self.backend.version()

    async def changes(self, after: int, timeout: float | None = None) -> int:
        """Wait until what the client watches changed since version ``after`` (or ``timeout``
        seconds passed); the version then. Without ``watch``, it waits ``timeout`` and says
        ``after + 1``: look again."""
        return await self.backend.changes(after, timeout)

    def problem(self) -> str | None:
        """Why what the client watches may be incomplete now (an informer the API server refuses,
        no inotify), one line, or None."""
        return self.backend.problem()

    @checked
    async def open_logs(
        self,
        kind: KindLike,
        name: str,
        replica_type: str | None = None,
        index: int | None = None,
        container: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        namespace: str | None = None,
    ) -> AsyncIterator[str]:
        """The job's log lines as :meth:`Client.logs` gives them, as an async iterator (close it
        with ``aclose()`` to stop following early). Raises :class:`NotFound`,
        :class:`UsageError` before the first line."""
        options = LogOptions(replica_type, index, container, follow, tail)
        return await self.backend.open_logs(resolve_kind(kind), name, options, namespace)

    @checked
    async def open_raw_log(
        self,
        kind: KindLike,
        name: str,
        replica_type: str | None = None,
        index: int | None = None,
        container: str | None = None,
        namespace: str | None = None,
    ) -> AsyncIterator[bytes]:
        """The log as written, as bytes (a download): a local run's file as it is, a cluster's
        lines newline-ended; about a MiB a chunk. Raises as :meth:`open_logs`."""
        options = LogOptions(replica_type, index, container)
        return await self.backend.open_raw_log(resolve_kind(kind), name, options, namespace)

    # -- acting

    async def _edit(self, kind: KindLike, name: str, namespace: str | None, verb: str, replicas: int | None = None) -> Edited:
        """The one edit behind :meth:`pause`, :meth:`resume` and :meth:`scale`, as :meth:`Client.edit`."""
        view = await self.backend.get(resolve_kind(kind), name, namespace)
        edit = edit_of(view, verb, replicas)
        if edit is not None:
            view = await self.backend.set_field(view, edit[0], edit[1], verb)
        return edited(view, verb, replicas)

    @checked
    async def pause(self, kind: KindLike, name: str, namespace: str | None = None) -> Edited:
        """As :meth:`Client.pause`."""
        return await self._edit(kind, name, namespace, "pause")

    @checked
    async def resume(self, kind: KindLike, name: str, namespace: str | None = None) -> Edited:
        """As :meth:`Client.resume`."""
        return await self._edit(kind, name, namespace, "resume")

    @checked
    async def scale(self, kind: KindLike, name: str, replicas: int, namespace: str | None = None) -> Edited:
        """As :meth:`Client.scale`."""
        return await self._edit(kind, name, namespace, "scale", replicas)

    @checked
    async def delete(
        self, kind: KindLike, name: str, namespace: str | None = None, purge: bool = False, timeout: Duration = None
    ) -> Deleted:
        """As :meth:`Client.delete`."""
        return Deleted(await self.backend.delete(resolve_kind(kind), name, namespace, purge, seconds(timeout)))


__all__ = ["AsyncClient"]
