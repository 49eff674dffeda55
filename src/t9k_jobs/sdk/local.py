"""The local backend of :class:`t9k_jobs.Client`: this machine's runs as job views.

It reads and writes run directories through :mod:`t9k_jobs.local.rundir` (and the verbs of
:mod:`t9k_jobs.local.rundirs`) and returns :class:`t9k_jobs.sdk.view.JobView`; what is printed
about a job is written once, in :mod:`t9k_jobs.sdk.present`. Local runs have no namespaces: a
namespace is refused.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..api import Job
from ..errors import NotSupported, UsageError
from ..local.rundir import (
    LocalRun,
    Observation,
    RunDir,
    RunDirError,
    RunOptions,
    list_runs,
    make_run_dir,
    new_default_run_dir,
    stop_reason,
)
from ..local.rundirs import POLL, edit_spec, find_run, follow_logs, log_source, start_detached, stop_run
from ..local.rundirs import purge as purge_run
from ..words import STOPPED, ref
from .view import Done, Event, JobView, LogOptions, LogStream, Watched


def run_view(run: LocalRun, detail: bool = False, seen: Observation | None = None) -> JobView:
    """The view of ``run`` now (its manifest is parsed only when the view's spec is read);
    ``detail``: with the last lines of ``events.log`` as events."""
    seen = seen if seen is not None else run.observe()
    status = seen.status
    running = status.aggregate.running if status is not None and seen.alive else 0
    return JobView(
        target="local",
        kind=run.kind,
        name=run.name,
        namespace=None,
        phase=seen.phase,
        status=status,
        created=run.created,
        replicas=run.replicas_wanted(status),
        running=running,
        load_job=lambda: run.job,
        load_spec=lambda: run.manifest.get("spec") or {},
        load_object=run.to_object,
        source=run,
        run_dir=run.run_dir,
        pid=seen.pid,
        runtime_reason=seen.runtime.reason if seen.runtime.unknown else None,
        unknown_reason=seen.reason,
        events=[Event.local(line) for line in run.events(15)] if detail else [],
        stacks=_stacks(run.run_dir) if detail else [],
        lost=_lost(run.run_dir) if detail else None,
        detailed=detail,
        tensorboard_url=_tensorboard_url(run.run_dir) if seen.alive else None,
        # A hard-linked copy of a live run is Stopped here, and says it is a copy (ownership.py).
        stop_reason=(seen.runtime.reason or stop_reason(run.run_dir)) if seen.phase == STOPPED else None,
    )


#: ``describe`` shows the newest this many stack dumps, and reads at most this much of each.
SHOWN_DUMPS, DUMP_READ = 8, 256 * 1024


def _lost(run_dir: Path) -> dict[str, Any] | None:
    """What the run's lost attempts cost (:mod:`t9k_jobs.local.lost`)."""
    from ..local.lost import read  # lazy: keeps the engine out of all but describe

    return read(run_dir)


def _stacks(run_dir: Path) -> list[tuple[str, list[str]]]:
    """The run's newest stack dumps (:mod:`t9k_jobs.local.stacks`) with their top frames."""
    from ..local.stacks import top_frames  # lazy: keeps the engine out of all but describe

    folder = RunDir(run_dir).path / RunDir.STACKS
    try:
        files = sorted(folder.glob("*.txt"), key=lambda f: (f.stat().st_mtime, f.name))[-SHOWN_DUMPS:]
    except OSError:
        return []
    out = []
    for f in files:
        try:
            with open(f, encoding="utf-8", errors="replace") as fh:
                text = fh.read(DUMP_READ)
        except OSError:
            continue
        pod, _, attempt = f.name.removesuffix(".txt").rpartition(".attempt-")
        out.append((f"{pod} attempt {attempt} ({RunDir.STACKS}/{f.name})", top_frames(text)))
    return out


def _tensorboard_url(run_dir: Path) -> str | None:
    """The URL of the run's TensorBoard while it is served (``tensorboard.url``, written by
    :class:`~t9k_jobs.local.tensorboard.LocalTensorBoard`)."""
    try:
        text = RunDir(run_dir).tensorboard_url.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text if text.startswith("http://127.0.0.1:") else None


class LocalBackend:
    """Runs under ``runs_dir`` (default ``./t9k-runs``); with ``run_dir``, only the run there;
    ``container_engine``: what the runs it starts run their replicas with (None: processes)."""

    target = "local"
    namespace: str | None = None
    server: str | None = None

    def __init__(self, runs_dir: Path | None = None, run_dir: Path | None = None, container_engine: str | None = None) -> None:
        self.runs_dir = runs_dir
        self.run_dir = run_dir
        self.container_engine = container_engine

    def close(self) -> None:
        """Nothing to release."""

    def _no_namespace(self, namespace: str | None, all_namespaces: bool = False) -> None:
        if namespace is not None:
            raise NotSupported("-n/--namespace: local runs have no namespaces")
        if all_namespaces:
            raise NotSupported("-A/--all-namespaces: local runs have no namespaces")

    def _find(self, kind: str | None, name: str | None) -> LocalRun:
        return find_run(kind, name, self.runs_dir, self.run_dir)

    # -- reading

    def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> JobView:
        self._no_namespace(namespace)
        return run_view(self._find(kind, name), detail)

    def list(
        self, kind: str | None = None, name: str | None = None, namespace: str | None = None,
        all_namespaces: bool = False, detail: bool = False,
    ) -> list[JobView]:  # fmt: skip
        """The newest run of each name and every live one (of ``kind``, and ``name`` when given:
        NotFound when it has none); with ``run_dir``, that run."""
        self._no_namespace(namespace, all_namespaces)
        if self.run_dir is not None:
            runs = [self._find(kind, name)]
        elif name is not None:
            runs = list_runs(self.runs_dir, kind, name) or [self._find(kind, name)]  # raises NotFound
        else:
            runs = list_runs(self.runs_dir, kind)
        return [run_view(r, detail) for r in runs]

    def watch(self, kind: str, name: str, namespace: str | None, done: Done, timeout: float | None) -> Watched:
        """Look at the run every :data:`~t9k_jobs.local.rundirs.POLL` s until ``done(view)`` or
        ``timeout`` seconds pass: ``(the last view, whether done said yes)``."""
        self._no_namespace(namespace)
        run = self._find(kind, name)
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            view = run_view(run)
            if done(view):
                return view, True
            if end is not None and time.monotonic() >= end:
                return view, False
            time.sleep(POLL if end is None else max(0.0, min(POLL, end - time.monotonic())))

    def logs(self, kind: str, name: str, options: LogOptions, namespace: str | None = None) -> LogStream:
        self._no_namespace(namespace)
        o = options
        if o.timestamps:
            raise NotSupported("--timestamps: local logs carry no timestamps (lines are kept as printed)")
        if o.previous:
            raise NotSupported("--previous: a restarted local replica writes on in the same log, which logs shows whole")
        run = self._find(kind, name)
        o.check(run.job)
        log_source(run, o.replica_type, o.index, o.container)  # raises for a replica that left no log
        lines = follow_logs(run, o.replica_type, o.index, o.container, follow=o.follow, tail=o.tail)
        return LogStream(lines, lines.close)

    # -- writing

    def create(self, job: Job, manifest: dict[str, Any], path: Path | None, namespace: str | None = None) -> JobView:
        """Locally, creating a job is running it (:meth:`run`) with ``run``'s defaults (nothing to check)."""
        self._no_namespace(namespace)
        manifest = path.resolve() if path is not None else None
        return self.run(job, RunOptions(manifest, container_engine=self.container_engine))

    def run(self, job: Job, options: RunOptions, run_dir: str | os.PathLike | None = None) -> JobView:
        """Start ``job`` with ``options`` (:func:`t9k_jobs.local.options.run_options`: its file, watched
        for edits, and the checked options) in the background, in ``run_dir`` (default: a new one
        under the runs dir, ``./t9k-runs`` unless the client names one, whose finished runs past their time to live go first); the view once
        its runtime has started. Raises :class:`UsageError` when it cannot run here."""
        from ..local.checks import cannot_run_reason  # lazy: keeps asyncio and the engine out of all but run
        from ..local.gpus import GpuInventory  # lazy: keeps subprocess and GPU probes out of all but run
        from ..local.prune import prune  # lazy: keeps the engine out of all but run

        gpus = options.gpus if options.gpus is not None else GpuInventory.discovered()
        reason = cannot_run_reason(job, gpus, options.volumes, python=options.python, engine=options.container_engine)
        if reason is not None:
            raise UsageError(reason)
        try:
            target = make_run_dir(Path(run_dir)) if run_dir is not None else new_default_run_dir(job, self.runs_dir)
        except RunDirError as exc:
            raise UsageError(str(exc)) from None
        if run_dir is None:
            prune(target.parent)  # the finished runs of its runs dir past their time to live
        return run_view(start_detached(job, target, options))

    def set_field(self, view: JobView, path: list[str], value: Any, verb: str) -> JobView:
        """Set ``path`` to ``value`` in the run's own copy of its manifest and wait for the run to
        apply it (:func:`t9k_jobs.local.rundirs.edit_spec`)."""
        return run_view(edit_spec(view.source, path, value, verb))

    def delete(
        self, kind: str, name: str, namespace: str | None = None, purge: bool = False, timeout: float | None = None
    ) -> list[str]:
        """Stop the run gracefully (only a runtime proven to be its own is signalled); keep its run
        dir unless ``purge``. The lines ``delete`` prints."""
        self._no_namespace(namespace)
        run = self._find(kind, name)
        state = run.runtime()
        out = []
        if state.pid is not None:
            out.append(f"stopping {run.kind} {run.name} (runtime pid {state.pid})...")
        result = stop_run(run, timeout)  # raises, signalling nothing, when the runtime cannot be told
        if not result.was_running:
            out.append(f"{run.kind} {run.name} is not running ({run.phase()}); nothing to stop")
        elif result.exited:
            out.append(f"{ref(run.kind, run.name)} stopped in {result.seconds:.1f}s")
        else:
            out.append(f"{ref(run.kind, run.name)} did not stop in time: killed after {result.seconds:.1f}s")
        if result.swept:
            out.append(f"killed {result.swept} leftover process(es) of the run")
        if purge:
            purge_run(run)
            out.append(f"removed {run.run_dir}")
        else:
            out.append(f"logs and status kept in {run.run_dir}")
        return out


__all__ = ["LocalBackend", "run_view"]
