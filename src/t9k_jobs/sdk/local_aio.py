"""This machine's runs for an event loop: the async local backend of :class:`t9k_jobs.AsyncClient`
(the dashboard's), and the runs cache that keeps them up to date by watching their run dirs.

:class:`AsyncLocalBackend` answers what :class:`~t9k_jobs.sdk.local.LocalBackend` answers, as
coroutines: reads of run dirs run in worker threads, a followed log is an async generator that
reads the file in a worker thread only when it grew, and waits on the loop between looks (no
thread is held while a log is quiet). With ``watch=True`` it keeps every run in a
:class:`RunsCache`: the run dirs are read once, then only a run whose files change (inotify,
through the ``watchfiles`` library) or whose runtime may have ended (checked once a second, for
the runs that were running) is read again, and :meth:`AsyncLocalBackend.changes` wakes readers
when anything changed. A thousand finished runs cost nothing while nothing happens (issue 30:
the dashboard's list re-read every run dir every second, 40% of a core).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api import Job
from ..changes import Changes
from ..errors import NotSupported
from ..local.ownership import GONE
from ..local.rundir import LocalRun, Observation, RunDir, RunOptions, newest_and_live, runs_dir_default
from ..local.rundirs import POLL, LogReader, LogSourceGone, log_source, pick_run
from ..threads import thread_pool
from ..words import check_name
from .local import LocalBackend, run_view
from .view import DOWNLOAD_BLOCK, Done, JobView, LogOptions, Watched, log_chunks

log = logging.getLogger("t9k_jobs.local")

#: Seconds between two checks that the runtimes of running runs still run (a runtime killed
#: with SIGKILL writes nothing: only its lock tells).
LIVENESS = 1.0
#: Seconds between two full looks when inotify cannot be used (no ``watchfiles``, no watches left).
FALLBACK_POLL = 2.0
#: Threads for edits and deletes (each may wait for a run): at most this many at once.
ACTING_THREADS = 8
#: Their name (:func:`t9k_jobs.threads.thread_pool`).
ACTING_POOL = "t9k-act"
#: A run's files whose change can change what is shown of it (the logs, but ``events.log``, do not).
WATCHED_FILES = RunDir.SHOWN


@dataclass
class Entry:
    """One run as last read: ``run``, ``seen`` (its observation), ``view`` (what ``get`` shows)
    and ``version`` (the cache's version when it was read: a reader can tell it changed)."""

    run: LocalRun
    seen: Observation
    view: JobView
    version: int


def _read(run_dir: Path) -> tuple[LocalRun, Observation, JobView] | None:
    """Read one run dir (blocking): None when it is not a run (any more)."""
    run = LocalRun.load(run_dir, resolved=True)
    if run is None:
        return None
    seen = run.observe()
    return run, seen, run_view(run, False, seen)


class RunsCache:
    """The runs under ``runs_dir`` (default ``./t9k-runs``), or the one run in ``run_dir``, kept
    up to date: read once, then read again only where files changed or a runtime may have ended.
    :meth:`start` begins watching (idempotent); :attr:`changes` says when anything changed;
    :attr:`problem` why watching does not work (the cache then looks again every
    :data:`FALLBACK_POLL` seconds)."""

    def __init__(self, runs_dir: Path | None = None, run_dir: Path | None = None) -> None:
        self.single = run_dir is not None
        base = run_dir if run_dir is not None else (runs_dir if runs_dir is not None else runs_dir_default())
        self.base = Path(os.path.abspath(base))
        self.entries: dict[Path, Entry] = {}
        self.changes = Changes()
        self.problem: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._lock = asyncio.Lock()  # one refresh at a time: an older read never lands after a newer one

    async def start(self) -> None:
        """Read every run once and begin watching; returns once the first read is done."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="t9k-runs-cache")
        await self._started.wait()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # -- reading

    def _dirs(self) -> list[Path]:
        """The run dirs now (blocking): the one run, or every directory under the runs dir."""
        if self.single:
            return [self.base.resolve()] if self.base.is_dir() else []
        try:
            root = self.base.resolve()
            with os.scandir(root) as listing:
                return [root / e.name for e in listing if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
        except OSError:
            return []

    async def _refresh(self, dirs: list[Path] | None) -> None:
        """Read ``dirs`` again (None: list the runs dir, read what is new, drop what is gone)."""
        async with self._lock:
            await self._refresh_locked(dirs)

    async def _refresh_locked(self, dirs: list[Path] | None) -> None:
        known = set(self.entries)
        if dirs is None:
            listed = await asyncio.to_thread(self._dirs)
            todo = [d for d in listed if d not in known]
            gone = known - set(listed)
        else:
            todo, gone = dirs, set()
        read = await asyncio.to_thread(lambda: {d: _read(d) for d in todo})
        changed = bool(gone)
        for d in gone:
            self.entries.pop(d, None)
        for d, got in read.items():
            if got is None:
                changed |= self.entries.pop(d, None) is not None
                continue
            run, seen, view = got
            old = self.entries.get(d)
            if old is not None and old.seen == seen and old.view.created == view.created and old.run.info == run.info:
                continue
            changed = True
            self.entries[d] = Entry(run, seen, view, self.changes.version + 1)
        if changed:
            self.changes.bump()

    async def _run(self) -> None:
        await self._refresh(None)
        self._started.set()
        liveness = asyncio.get_running_loop().create_task(self._liveness())
        try:
            while True:
                try:
                    await self._watch()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - no inotify here: look every few seconds
                    self.problem = f"cannot watch {self.base} ({type(exc).__name__}: {exc}); looking every {FALLBACK_POLL:.0f}s"
                    log.debug("%s", self.problem)
                await asyncio.sleep(FALLBACK_POLL)
                await self._refresh(None)
                await self._refresh(list(self.entries))
        finally:
            liveness.cancel()
            await asyncio.gather(liveness, return_exceptions=True)

    async def _watch(self) -> None:
        """Follow inotify's changes under the runs dir until it goes (then the caller looks again)."""
        import watchfiles

        while not self.base.is_dir():  # no run yet: the runs dir appears with the first one
            await asyncio.sleep(FALLBACK_POLL)
            await self._refresh(None)
        root = self.base.resolve()
        await self._refresh(None)  # what came while the watch was being set up

        def relevant(change: Any, path: str) -> bool:
            p = Path(path)
            return p.parent == root or p.name in WATCHED_FILES

        self.problem = None
        async for batch in watchfiles.awatch(
            root, watch_filter=relevant, recursive=True, debounce=400, step=100, yield_on_timeout=False
        ):
            top, runs = False, set()
            for _change, path in batch:
                p = Path(path)
                if self.single:
                    runs.add(root)
                elif p.parent == root:
                    top = True
                    runs.add(p)
                else:
                    try:
                        runs.add(root / p.relative_to(root).parts[0])
                    except (ValueError, IndexError):
                        continue
            if top:
                await self._refresh(None)
            await self._refresh([d for d in runs if d.is_dir()] if not self.single else [root])
            if not root.is_dir():
                return

    async def _liveness(self) -> None:
        """Every :data:`LIVENESS` s, read again the runs whose runtime ran at the last look (a
        runtime killed with SIGKILL changes no file: only its lock tells)."""
        while True:
            await asyncio.sleep(LIVENESS)
            live = [d for d, e in self.entries.items() if e.seen.runtime.state != GONE]
            if live:
                states = await asyncio.to_thread(lambda: {d: self.entries[d].run.runtime() for d in live if d in self.entries})
                stale = [d for d, st in states.items() if d in self.entries and st != self.entries[d].seen.runtime]
                if stale:
                    await self._refresh(stale)

    # -- what readers ask

    def runs(self) -> list[Entry]:
        """Every run, sorted by kind, name and start."""
        return sorted(self.entries.values(), key=lambda e: (e.run.kind, e.run.name, e.run.created, e.run.run_dir.name))

    def latest(self, kind: str | None = None) -> list[Entry]:
        """As :func:`~t9k_jobs.local.rundir.list_runs` with ``latest``: the newest run of each
        name and every one that may still run."""
        entries = [e for e in self.runs() if kind is None or e.run.kind == kind]
        by_run = {id(e.run): e for e in entries}
        keep = newest_and_live([e.run for e in entries], lambda r: by_run[id(r)].seen.runtime.state != GONE)
        return [by_run[id(r)] for r in keep]

    def find(self, kind: str | None, name: str) -> Entry:
        """As :func:`~t9k_jobs.local.rundirs.find_run`: the live run of that name, else the newest.
        Raises NotFound, UsageError (several live)."""
        check_name(name)
        found = [e for e in self.runs() if e.run.name == name and (kind is None or e.run.kind == kind)]
        live = [(e.run, e.seen.pid) for e in found if e.seen.alive]
        run = pick_run([e.run for e in found], live, kind, name, self.base)
        return next(e for e in found if e.run is run)


class AsyncLocalBackend:
    """This machine's runs as coroutines, for :class:`t9k_jobs.AsyncClient`. ``runs_dir``,
    ``run_dir`` as for :class:`~t9k_jobs.sdk.local.LocalBackend`; ``watch``: keep every run in
    a :class:`RunsCache` (reads come from it, and :meth:`changes` tells when it changed) instead of
    reading run dirs at each call."""

    target = "local"
    namespace: str | None = None
    server: str | None = None

    def __init__(
        self, runs_dir: Path | None = None, run_dir: Path | None = None, watch: bool = False,
        container_engine: str | None = None,
    ) -> None:  # fmt: skip
        self.sync = LocalBackend(runs_dir, run_dir, container_engine)
        self.cache = RunsCache(runs_dir, run_dir) if watch else None
        # Edits and deletes wait for a run (a delete for its replicas' grace period): threads of
        # their own, so they never take the threads that reads run in.
        self._acting = thread_pool(ACTING_POOL, ACTING_THREADS)

    @property
    def runs_dir(self) -> Path | None:
        return self.sync.runs_dir

    @property
    def run_dir(self) -> Path | None:
        return self.sync.run_dir

    @property
    def container_engine(self) -> str | None:
        return self.sync.container_engine

    async def close(self) -> None:
        if self.cache is not None:
            await self.cache.close()
        self._acting.shutdown(wait=False, cancel_futures=True)

    async def _cache(self) -> RunsCache | None:
        if self.cache is not None:
            await self.cache.start()
        return self.cache

    # -- reading

    async def list(
        self, kind: str | None = None, name: str | None = None, namespace: str | None = None,
        all_namespaces: bool = False, detail: bool = False,
    ) -> list[JobView]:  # fmt: skip
        """As :meth:`LocalBackend.list <t9k_jobs.sdk.local.LocalBackend.list>`; when watching, the
        views of the cache (the newest run of each name and every live one)."""
        self.sync._no_namespace(namespace, all_namespaces)
        cache = await self._cache()
        if cache is None or name is not None or detail:
            return await asyncio.to_thread(self.sync.list, kind, name, None, False, detail)
        return [e.view for e in cache.latest(kind)]

    async def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        """One run's view (``detail``: with the last lines of ``events.log``). Raises NotFound."""
        self.sync._no_namespace(namespace)
        cache = await self._cache()
        if cache is None:
            return await asyncio.to_thread(self.sync.get, kind, name, None, detail)
        entry = cache.find(kind, name)
        if not detail:
            return entry.view
        return await asyncio.to_thread(run_view, entry.run, True, entry.seen)

    async def version(self) -> int:
        """The cache's version now (0 without ``watch``)."""
        cache = await self._cache()
        return cache.changes.version if cache is not None else 0

    async def changes(self, after: int, timeout: float | None = None) -> int:
        """Wait until something changed since version ``after`` (or ``timeout`` s passed); the
        version then. Without ``watch``: waits ``timeout`` and returns ``after + 1`` (look again)."""
        cache = await self._cache()
        if cache is None:
            await asyncio.sleep(timeout if timeout is not None else POLL)
            return after + 1
        return await cache.changes.wait(after, timeout)

    def problem(self) -> str | None:
        """Why the runs are not watched (then looked at every few seconds), or None."""
        return self.cache.problem if self.cache is not None else None

    async def _run_of(self, kind: str, name: str) -> LocalRun:
        cache = await self._cache()
        if cache is not None:
            return cache.find(kind, name).run
        return await asyncio.to_thread(self.sync._find, kind, name)

    def _alive(self, run: LocalRun) -> Callable[[], bool]:
        """Whether the run's runtime runs: the cache's last look when watching, else a look now."""
        cache = self.cache
        if cache is not None:
            return lambda: (e := cache.entries.get(run.run_dir)) is not None and e.seen.alive
        return lambda: run.runtime().running

    async def open_logs(
        self, kind: str, name: str, options: LogOptions, namespace: str | None = None
    ) -> AsyncIterator[str]:
        """The run's log lines (as :func:`~t9k_jobs.local.rundirs.follow_logs` gives them), as an
        async iterator. Raises NotFound/UsageError (``LogOptions.check``: a replica type or
        container not in the job) before the first line; the iterator raises LogSourceGone."""
        self.sync._no_namespace(namespace)
        o = options
        if o.timestamps or o.previous:
            raise NotSupported("--timestamps and --previous are for cluster logs")
        run = await self._run_of(kind, name)
        path, keep = await asyncio.to_thread(_log_source, run, o)
        reader = await asyncio.to_thread(LogReader, run, path, keep, o.tail)
        return _follow(reader, o.follow, self._alive(run), self.cache)

    async def open_raw_log(
        self, kind: str, name: str, options: LogOptions, namespace: str | None = None
    ) -> AsyncIterator[bytes]:
        """The log as written (a download): the file's bytes, read :data:`DOWNLOAD_BLOCK` at a
        time, or for one replica type of the merged log, its lines. Raises as :meth:`open_logs`."""
        self.sync._no_namespace(namespace)
        o = options
        run = await self._run_of(kind, name)
        path, keep = await asyncio.to_thread(_log_source, run, o)
        if keep is not None:
            lines = _follow(await asyncio.to_thread(LogReader, run, path, keep, None), False, lambda: False, None)
            return log_chunks(lines)
        return _file_bytes(path)

    async def watch(self, kind: str, name: str, namespace: str | None, done: Done, timeout: float | None) -> Watched:
        """As :meth:`LocalBackend.watch <t9k_jobs.sdk.local.LocalBackend.watch>`, in a worker thread
        of the loop's default executor (a wait holds one thread while it looks every second)."""
        return await asyncio.to_thread(self.sync.watch, kind, name, namespace, done, timeout)

    # -- writing (each blocks a worker thread, not the loop)

    async def create(
        self, job: Job, manifest: dict[str, Any], path: Path | None, namespace: str | None = None
    ) -> JobView:
        """Locally, creating a job is running it (:meth:`run`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._acting, self.sync.create, job, manifest, path, namespace)

    async def run(self, job: Job, options: RunOptions, run_dir: str | os.PathLike | None = None) -> JobView:
        """As :meth:`LocalBackend.run <t9k_jobs.sdk.local.LocalBackend.run>`: started in the
        background; the view once its runtime has started."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._acting, self.sync.run, job, options, run_dir)

    async def set_field(self, view: JobView, path: list[str], value: Any, verb: str) -> JobView:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._acting, self.sync.set_field, view, path, value, verb)

    async def delete(
        self, kind: str, name: str, namespace: str | None = None, purge: bool = False, timeout: float | None = None
    ) -> list[str]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._acting, self.sync.delete, kind, name, namespace, purge, timeout)


def _log_source(run: LocalRun, options: LogOptions) -> tuple[Path, Callable[[str], bool] | None]:
    """What a log of ``run`` reads (:func:`~t9k_jobs.local.rundirs.log_source`), the options
    checked against its job first (:meth:`LogOptions.check`): in a worker thread, it parses the
    run's manifest."""
    options.check(run.job)
    return log_source(run, options.replica_type, options.index, options.container)


async def _follow(
    reader: LogReader, follow: bool, alive: Callable[[], bool], cache: RunsCache | None
) -> AsyncIterator[str]:
    """The lines of ``reader``; ``follow``: on until the runtime has exited and the file is read to
    its end. The file is read in a worker thread only when it grew; between looks the loop waits."""
    while True:
        running = alive()
        more = True
        while more:
            size = await asyncio.to_thread(_size, reader.path)
            if size == reader.pos and reader.tail is None and reader.ident is not None:
                break  # nothing new: no thread needed
            lines, more = await asyncio.to_thread(reader.read)
            for line in lines:
                yield line
        if not follow or not running:
            for line in reader.rest():
                yield line
            if follow:
                problem = await asyncio.to_thread(reader.gone)
                if problem is not None:
                    raise LogSourceGone(problem)
            return
        problem = await asyncio.to_thread(reader.gone)
        if problem is not None:
            raise LogSourceGone(problem)
        await asyncio.sleep(POLL)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


async def _file_bytes(path: Path) -> AsyncIterator[bytes]:
    """The file's bytes as they are now, :data:`DOWNLOAD_BLOCK` at a time (nothing when it is not there)."""
    try:
        f = await asyncio.to_thread(open, path, "rb")
    except FileNotFoundError:
        return
    try:
        while True:
            data = await asyncio.to_thread(f.read, DOWNLOAD_BLOCK)
            if not data:
                return
            yield data
    finally:
        f.close()


__all__ = ["AsyncLocalBackend", "Entry", "RunsCache"]
