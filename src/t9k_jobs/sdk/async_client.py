"""The SDK for an event loop: :class:`AsyncClient` (``from t9k_jobs import AsyncClient``), the
dashboard's, with the same verbs, parameters, rules and words as :class:`~t9k_jobs.sdk.client.Client`
(issue 44; a test compares the two). What differs: each verb is a coroutine, ``logs`` is an async
iterator (not a :class:`~t9k_jobs.sdk.view.LogStream`), ``cluster`` is a coroutine and takes
``watch``/``all_namespaces``, ``local`` takes ``watch``; and it has what a watching reader needs
(``views``, ``view``, ``version``, ``changes``, ``problem``, ``open_raw_log``).
"""

from __future__ import annotations

import builtins
import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

from ..api import Job
from ..errors import NotSupported
from .arguments import Duration, KindLike, check_arguments, checked, resolve_kind, seconds, wait_phase
from .backend import AsyncBackend, AsyncRunner, OverBackend
from .client import (
    DEFAULT_REQUEST_TIMEOUT,
    RUN_IS_LOCAL,
    JobLike,
    Wait,
    check_edit,
    checked_run_options,
    described,
    edited,
    job_of,
    job_or_none,
    load_job,
    summaries_kind,
    summary_rows,
)
from .edits import edit_of
from .view import Deleted, Edited, JobSummary, JobView, LogOptions


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

    def __init__(self, backend: AsyncBackend) -> None:
        if not isinstance(backend, AsyncBackend):
            raise TypeError(f"AsyncClient(backend): {type(backend).__name__} is not a t9k_jobs.sdk.backend.AsyncBackend")
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
        cls, runs_dir: str | os.PathLike | None = None, run_dir: str | os.PathLike | None = None,
        container_engine: str | None = None, watch: bool = False,
    ) -> AsyncClient:  # fmt: skip
        """This machine's runs under ``runs_dir`` (default ``./t9k-runs``), or the one in
        ``run_dir``; ``container_engine`` as :meth:`Client.local`; ``watch``: keep them in a cache
        that inotify keeps true (the ``watchfiles`` library; without it, or without inotify, the
        cache looks again every 2 s)."""
        check_arguments(
            "local", {"runs_dir": runs_dir, "run_dir": run_dir, "container_engine": container_engine, "watch": watch}
        )
        from .local_aio import AsyncLocalBackend  # lazy: keeps the local runtime out of a cluster client

        runs, one = Path(runs_dir) if runs_dir else None, Path(run_dir) if run_dir else None
        return cls(AsyncLocalBackend(runs, one, watch, container_engine))

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

    # -- the verbs: Client's names and parameters (tests/api/test_client_parity.py)

    @checked
    async def create(self, job: JobLike, namespace: str | None = None) -> Job:
        """As :meth:`Client.create`."""
        model, manifest, path = await asyncio.to_thread(load_job, job)
        return job_of(await self.backend.create(model, manifest, path, namespace))

    @checked
    async def run(
        self, job: JobLike, run_dir: str | os.PathLike | None = None, gpus: str | None = None, watch: bool = True,
        allow_duplicate: bool = False, volumes: dict[str, str | os.PathLike] | builtins.list[str] | None = None,
        python: str | os.PathLike | None = None, inject: builtins.list[str] | None = None, ttl: int | None = None,
    ) -> Job:  # fmt: skip
        """As :meth:`Client.run` (local only): the job once its runtime has started."""
        if not isinstance(self.backend, AsyncRunner):
            raise NotSupported(RUN_IS_LOCAL)
        model, _manifest, path = await asyncio.to_thread(load_job, job)
        engine = getattr(self.backend, "container_engine", None)
        options = checked_run_options(model, path, run_dir, gpus, watch, allow_duplicate, volumes, python, inject, ttl, engine)
        return job_of(await self.backend.run(model, options, run_dir))

    @checked
    async def get(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """As :meth:`Client.get`."""
        return job_of(await self.backend.get(resolve_kind(kind), name, namespace))

    async def list(
        self, kind: KindLike | None = None, namespace: str | None = None, all_namespaces: bool = False
    ) -> builtins.list[Job]:
        """As :meth:`Client.list`."""
        return [s_job for s in await self.summaries(kind, None, namespace, all_namespaces) if (s_job := job_or_none(s))]

    @checked
    async def summaries(
        self, kind: KindLike | None = None, name: str | None = None, namespace: str | None = None,
        all_namespaces: bool = False, positions: bool = False,
    ) -> builtins.list[JobSummary]:  # fmt: skip
        """As :meth:`Client.summaries`."""
        views = await self.backend.list(summaries_kind(kind, name, all_namespaces), name, namespace, all_namespaces)
        asked = positions and hasattr(self.backend, "queue_positions")
        where = await self.backend.queue_positions(views) if asked else None
        return summary_rows(views, where)

    @checked
    async def describe(self, kind: KindLike, name: str | None = None, namespace: str | None = None) -> str:
        """As :meth:`Client.describe`."""
        kind_name = resolve_kind(kind)
        if name is None:
            return described(await self.backend.list(kind_name, None, namespace, detail=True))
        return described([await self.backend.get(kind_name, name, namespace, detail=True)])

    @checked
    async def wait(
        self, kind: KindLike, name: str, phase: str = "Succeeded", timeout: Duration = None, namespace: str | None = None
    ) -> Job:
        """As :meth:`Client.wait` (on a cluster, a watch; locally, a look every second in a worker thread)."""
        wait = Wait(resolve_kind(kind), name, wait_phase(phase), seconds(timeout), self.server)
        return job_of(wait.outcome(*await self.backend.watch(wait.kind, name, namespace, wait.done, wait.limit)))

    @checked
    async def logs(
        self, kind: KindLike, name: str, replica_type: str | None = None, index: int | None = None,
        container: str | None = None, follow: bool = False, tail: int | None = None, timestamps: bool = False,
        previous: bool = False, namespace: str | None = None,
    ) -> AsyncIterator[str]:  # fmt: skip
        """The job's log lines as :meth:`Client.logs` gives them, as an async iterator (close it
        with ``aclose()`` to stop following early). Raises :class:`NotFound`,
        :class:`UsageError`, :class:`NotSupported` before the first line."""
        options = LogOptions(replica_type, index, container, follow, tail, timestamps, previous)
        return await self.backend.open_logs(resolve_kind(kind), name, options, namespace)

    @checked
    async def delete(
        self, kind: KindLike, name: str, namespace: str | None = None, purge: bool = False, timeout: Duration = None
    ) -> Deleted:
        """As :meth:`Client.delete`."""
        return Deleted(await self.backend.delete(resolve_kind(kind), name, namespace, purge, seconds(timeout)))

    @checked
    async def edit(
        self, kind: KindLike, name: str, verb: str, replicas: int | None = None, namespace: str | None = None
    ) -> Edited:
        """As :meth:`Client.edit`: pause, resume or scale, with the lines they print."""
        check_edit(verb, replicas)
        view = await self.backend.get(resolve_kind(kind), name, namespace)
        if (edit := edit_of(view, verb, replicas)) is not None:
            view = await self.backend.set_field(view, edit[0], edit[1], verb)
        return edited(view, verb, replicas)

    @checked
    async def pause(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """As :meth:`Client.pause`."""
        return job_of((await self.edit(kind, name, "pause", namespace=namespace)).view)

    @checked
    async def resume(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """As :meth:`Client.resume`."""
        return job_of((await self.edit(kind, name, "resume", namespace=namespace)).view)

    @checked
    async def scale(self, kind: KindLike, name: str, replicas: int, namespace: str | None = None) -> Job:
        """As :meth:`Client.scale`."""
        return job_of((await self.edit(kind, name, "scale", replicas, namespace)).view)

    # -- what a watching reader needs (the dashboard's): views, changes, downloads

    @checked
    async def views(self, kind: KindLike | None = None, all_namespaces: bool = False) -> builtins.list[JobView]:
        """Every job of ``kind`` (default: all kinds) in the client's namespace (or all of them);
        locally, the newest run of each name and every live one."""
        return await self.backend.list(resolve_kind(kind) if kind is not None else None, None, None, all_namespaces)

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
    async def open_raw_log(
        self, kind: KindLike, name: str, replica_type: str | None = None, index: int | None = None,
        container: str | None = None, namespace: str | None = None,
    ) -> AsyncIterator[bytes]:  # fmt: skip
        """The log as written, as bytes (a download): a local run's file as it is, a cluster's
        lines newline-ended; about a MiB a chunk. Raises as :meth:`logs`."""
        options = LogOptions(replica_type, index, container)
        return await self.backend.open_raw_log(resolve_kind(kind), name, options, namespace)


__all__ = ["AsyncClient"]
