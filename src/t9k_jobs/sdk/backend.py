"""What the clients need of a target (issues 23, 34, 44): the :class:`Backend` protocol both
synchronous backends implement (:mod:`t9k_jobs.sdk.local` for this machine's runs,
:mod:`t9k_jobs.sdk.cluster` for a cluster), :class:`AsyncBackend`, the same verbs as coroutines
(:class:`~t9k_jobs.sdk.local_aio.AsyncLocalBackend`,
:class:`~t9k_jobs.sdk.cluster.AsyncClusterBackend`), and :class:`Runner`/:class:`AsyncRunner`, what
only a target that starts jobs itself (this machine) has. ``Client.__init__`` checks a backend
against :class:`Backend` (``runtime_checkable``: the names are there, not their signatures);
``run`` asks for a runner. The parameters of a verb are the same in all four (a test compares them).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..api import Job
from .view import Done, JobView, LogOptions, LogStream, Watched

if TYPE_CHECKING:
    from ..local.rundir import RunOptions


@runtime_checkable
class Backend(Protocol):
    """What a client needs of a target (issue 23): :class:`t9k_jobs.sdk.local.LocalBackend`
    and :class:`t9k_jobs.sdk.cluster.ClusterBackend` implement it. Kinds come resolved
    (``"GenericJob"``), durations in seconds; every method returns job views
    (:class:`t9k_jobs.sdk.view.JobView`) or raises :mod:`t9k_jobs.errors`. ``target``: ``"local"`` or
    ``"cluster"``; ``namespace``: the default namespace (None locally); ``server``: the API
    server's URL (None locally)."""

    target: str
    namespace: str | None
    server: str | None

    def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        """One job; ``detail``: with what ``describe`` shows (events; a cluster job's pods and PodGroup)."""

    def list(
        self, kind: str | None = None, name: str | None = None, namespace: str | None = None,
        all_namespaces: bool = False, detail: bool = False,
    ) -> list[JobView]:  # fmt: skip
        """Every job of ``kind`` (all when None); with ``name``, that job's (NotFound when none)."""

    def create(self, job: Job, manifest: dict[str, Any], path: Path | None, namespace: str | None = None) -> JobView:
        """Submit a validated job (its model, its manifest as written, the file it came from)."""

    def delete(
        self, kind: str, name: str, namespace: str | None = None, purge: bool = False, timeout: float | None = None
    ) -> list[str]:
        """Delete the job; the lines ``delete`` prints."""

    def set_field(self, view: JobView, path: list[str], value: Any, verb: str) -> JobView:
        """The one edit (pause, resume, scale): set the field at ``path`` to ``value``."""

    def logs(self, kind: str, name: str, options: LogOptions, namespace: str | None = None) -> LogStream:
        """The job's log lines."""

    def watch(self, kind: str, name: str, namespace: str | None, done: Done, timeout: float | None) -> Watched:
        """Follow the job until ``done(view)`` (None: deleted) or ``timeout`` s: ``(last view, done)``."""

    def close(self) -> None:
        """Release what the backend holds."""


@runtime_checkable
class Runner(Protocol):
    """A backend that starts jobs on this machine (:class:`t9k_jobs.sdk.local.LocalBackend`):
    what :meth:`t9k_jobs.sdk.client.Client.run` needs beyond :class:`Backend`."""

    def run(self, job: Job, options: RunOptions, run_dir: str | os.PathLike | None = None) -> JobView:
        """Start ``job`` with ``options`` (checked: :func:`t9k_jobs.local.options.run_options`) in
        the background; the view once its runtime has started."""


@runtime_checkable
class AsyncBackend(Protocol):
    """:class:`Backend`'s verbs as coroutines, for :class:`~t9k_jobs.sdk.async_client.AsyncClient`
    (the same parameters, kinds resolved, durations in seconds), with logs as async iterators and
    what a watching client needs: ``version``/``changes`` (its cache's version; without a cache,
    ``changes`` waits ``timeout`` and says ``after + 1``) and ``problem`` (why the cache may be
    incomplete, one line, or None)."""

    target: str
    namespace: str | None
    server: str | None

    async def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        """As :meth:`Backend.get`."""

    async def list(
        self, kind: str | None = None, name: str | None = None, namespace: str | None = None,
        all_namespaces: bool = False, detail: bool = False,
    ) -> list[JobView]:  # fmt: skip
        """As :meth:`Backend.list`."""

    async def create(
        self, job: Job, manifest: dict[str, Any], path: Path | None, namespace: str | None = None
    ) -> JobView:
        """As :meth:`Backend.create`."""

    async def delete(
        self, kind: str, name: str, namespace: str | None = None, purge: bool = False, timeout: float | None = None
    ) -> list[str]:
        """As :meth:`Backend.delete`."""

    async def set_field(self, view: JobView, path: list[str], value: Any, verb: str) -> JobView:
        """As :meth:`Backend.set_field`."""

    async def open_logs(
        self, kind: str, name: str, options: LogOptions, namespace: str | None = None
    ) -> AsyncIterator[str]:
        """The job's log lines as an async iterator (raises before the first line)."""

    async def open_raw_log(
        self, kind: str, name: str, options: LogOptions, namespace: str | None = None
    ) -> AsyncIterator[bytes]:
        """The log as written, about a MiB a chunk (a download)."""

    async def watch(self, kind: str, name: str, namespace: str | None, done: Done, timeout: float | None) -> Watched:
        """As :meth:`Backend.watch`."""

    async def version(self) -> int:
        """The version of what the backend watches (0 without a cache)."""

    async def changes(self, after: int, timeout: float | None = None) -> int:
        """Wait for a change after version ``after`` (or ``timeout`` s); the version then."""

    def problem(self) -> str | None:
        """Why what the backend watches may be incomplete now, or None."""

    async def close(self) -> None:
        """Release what the backend holds."""


@runtime_checkable
class AsyncRunner(Protocol):
    """:class:`Runner` as a coroutine (:class:`t9k_jobs.sdk.local_aio.AsyncLocalBackend`)."""

    async def run(self, job: Job, options: RunOptions, run_dir: str | os.PathLike | None = None) -> JobView:
        """As :meth:`Runner.run`."""


class OverBackend:
    """What :class:`~t9k_jobs.sdk.client.Client` and :class:`~t9k_jobs.sdk.async_client.AsyncClient`
    both say of the backend they hold (``self.backend``): where they act."""

    backend: Any

    @property
    def target(self) -> str:
        """``"local"`` or ``"cluster"``."""
        return self.backend.target

    @property
    def namespace(self) -> str | None:
        """A cluster client's default namespace (None locally)."""
        return self.backend.namespace

    @property
    def server(self) -> str | None:
        """A cluster client's API server URL (None locally)."""
        return self.backend.server


__all__ = ["AsyncBackend", "AsyncRunner", "Backend", "OverBackend", "Runner"]
