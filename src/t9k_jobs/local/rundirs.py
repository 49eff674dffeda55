"""Day-two verbs over local runs: find them, read their status, follow their logs, wait, stop.

A local run is a run directory written by :func:`t9k_jobs.local.runtime.run_job`:
``runtime.pid`` (the process that runs it, locked by it: :mod:`t9k_jobs.local.ownership`),
``run.json`` (kind, name, start, replicas: what ``get`` reads), ``job.yaml`` (the job as it runs:
written at the start and again when an edit is applied), ``manifest.yaml`` (the run's own copy of
its manifest, which ``pause``/``resume``/``scale`` edit: :mod:`t9k_jobs.local.edits`),
``manifest.path`` (the user's manifest it watches), ``status.yaml`` (written whole; and
``status.json``, the same status for fast reading, trusted only while it names that very
``status.yaml``),
``events.log``, ``job.log`` (every replica, ``[worker-1] `` prefixes) and
``<pod>.<container>.log``. Runs are found under a runs directory (default ``./t9k-runs``), one
level deep; a job is named by kind and name: the run of that name whose runtime runs, else the
newest.

Whether a run is still going is proven, never guessed (:func:`t9k_jobs.local.ownership.runtime_state`):
the runtime holds a lock on its ``runtime.pid`` and has that very file open. A run whose runtime is
gone while its status is not terminal (stopped by ``delete``, Ctrl-C, a kill) has the phase
``Stopped`` here; one whose state cannot be told (``runtime.pid`` or ``status.yaml`` missing or
unreadable, a lock held by a process we cannot see) has the phase ``Unknown``, with the reason, and
no verb signals anything for it.

Errors are those of :mod:`t9k_jobs.errors` (``RunsError`` is their base, ``JobsError``), each
one line: :class:`UsageError` and :class:`NotSupported` (exit code 2), :class:`NotFound` and
the others (exit code 1).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from ..api import JobStatus
from ..frameworks import parse_job
from ..api.common import TERMINAL_PHASES
from ..errors import AlreadyExists, JobsError, NotFound, NotSupported, UsageError
from ..loglines import LineReader
from ..words import STOPPED, UNKNOWN
from .ownership import GONE, RuntimeState, runtime_state, working_dir

#: Where ``t9k-jobs run`` puts run directories by default, relative to the working directory.
DEFAULT_RUNS_DIR = Path("t9k-runs")
#: Seconds between two looks at a run's files while following or waiting.
POLL = 0.2
#: Seconds ``delete`` waits beyond the longest replica grace period for the runtime to exit.
STOP_MARGIN = 15.0

#: Every verb's error (``str()`` one line, ``exit_code`` the CLI's code): the SDK's base error.
RunsError = JobsError

# ----------------------------------------------------------------------------- the runtime's process


def runtime_pid(run_dir: Path) -> int | None:
    """The pid of the runtime of the run in ``run_dir`` while it runs, proven
    (:func:`t9k_jobs.local.ownership.runtime_state`), else None (gone, or not known)."""
    return runtime_state(run_dir).pid


#: The run-dir file with what ``get`` needs without parsing the manifest: kind, name, when it
#: started (epoch seconds) and how many replicas the job has; written by the runtime.
RUN_INFO = "run.json"


def _yaml_load(text: str) -> Any:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


# ----------------------------------------------------------------------------- one run


@dataclass
class Observation:
    """One look at a run: its ``status`` (None before the first, or when unreadable), why the
    status could not be read (``status_problem``, None when it was or when there is none yet),
    its ``runtime`` (:class:`RuntimeState`), the ``phase`` shown (:data:`STOPPED` for a runtime gone
    before a terminal phase, :data:`UNKNOWN` when it cannot be told) and, for :data:`UNKNOWN`, the
    ``reason``."""

    status: JobStatus | None
    status_problem: str | None
    runtime: RuntimeState
    phase: str
    reason: str | None = None

    @property
    def alive(self) -> bool:
        return self.runtime.running

    @property
    def pid(self) -> int | None:
        return self.runtime.pid


@dataclass
class LocalRun:
    """One run directory of a job. ``created``: epoch seconds the run started."""

    run_dir: Path
    kind: str
    name: str
    created: float
    info: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, run_dir: Path, resolved: bool = False) -> LocalRun | None:
        """The run in ``run_dir``, or None when it is not one: ``run.json`` (written by the runtime)
        when it is readable, else ``job.yaml`` (a run of an older version). ``resolved``: the
        path is absolute with no links already (a listing resolves its runs dir once)."""
        run_dir = run_dir if resolved else run_dir.resolve()
        try:
            info = json.loads((run_dir / RUN_INFO).read_bytes())
            if isinstance(info, dict) and isinstance(info.get("kind"), str) and isinstance(info.get("name"), str):
                created = info.get("created")
                if isinstance(created, (int, float)):
                    return cls(run_dir, info["kind"], info["name"], float(created), info)
        except (OSError, ValueError):
            pass
        try:
            path = run_dir / "job.yaml"
            manifest = _yaml_load(path.read_text(encoding="utf-8"))
            created = path.stat().st_mtime
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("metadata"), dict):
            return None
        kind, name = manifest.get("kind"), manifest["metadata"].get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            return None
        run = cls(run_dir, kind, name, created)
        run.__dict__["manifest"] = manifest
        return run

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """The job as it runs (``job.yaml``), ``{}`` when it cannot be read."""
        try:
            data = _yaml_load((self.run_dir / "job.yaml").read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    @cached_property
    def job(self) -> Any:
        """The typed job (one of the API kinds), or None when ``job.yaml`` no longer validates."""
        try:
            return parse_job(self.manifest, str(self.run_dir / "job.yaml"))
        except Exception:  # noqa: BLE001 - written by an older version: shown without the spec
            return None

    def read_status(self) -> tuple[JobStatus | None, str | None]:
        """``(status, problem)``: the status the runtime wrote last (``status.yaml``, written whole)
        and, when there is a ``status.yaml`` that cannot be read as a status, why."""
        path = self.run_dir / "status.yaml"
        data: Any = None
        try:
            st = path.stat()
            cached = json.loads((self.run_dir / "status.json").read_bytes())
            ident = cached.get("statusYaml") or {}
            if (ident.get("ino"), ident.get("size"), ident.get("mtime_ns")) == (st.st_ino, st.st_size, st.st_mtime_ns):
                data = cached.get("status")  # the same status, for this very status.yaml: no YAML to parse
        except (OSError, ValueError, AttributeError):
            pass
        try:
            if data is None:
                text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None, None
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"status.yaml cannot be read: {getattr(exc, 'strerror', None) or exc}"
        try:
            if data is None:
                data = _yaml_load(text)
            if not isinstance(data, dict):
                return None, "status.yaml holds no status mapping"
            return JobStatus.model_validate(data), None
        except Exception as exc:  # noqa: BLE001 - damaged, or from another version
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            return None, f"status.yaml is not a status: {first[:120]}"

    def status(self) -> JobStatus | None:
        """The status the runtime wrote last, or None (none yet, or unreadable)."""
        return self.read_status()[0]

    def runtime(self) -> RuntimeState:
        """Its runtime's state, proven (:func:`t9k_jobs.local.ownership.runtime_state`)."""
        return runtime_state(self.run_dir)

    def pid(self) -> int | None:
        """The runtime's pid while it provably runs."""
        return self.runtime().pid

    def observe(self) -> Observation:
        """Look at the run once (status, runtime) and decide the phase shown: a terminal phase
        in ``status.yaml`` is final; otherwise :data:`UNKNOWN` (with the reason) when the runtime
        or the status cannot be told, the status's phase while the runtime runs (``Pending``
        before its first status), :data:`STOPPED` once it is gone."""
        status, problem = self.read_status()
        runtime = self.runtime()
        if status is not None and status.phase in TERMINAL_PHASES:
            return Observation(status, None, runtime, status.phase)
        if runtime.unknown:
            return Observation(status, problem, runtime, UNKNOWN, runtime.reason)
        if problem is not None:
            return Observation(status, problem, runtime, UNKNOWN, problem)
        if runtime.running:
            return Observation(status, None, runtime, status.phase if status is not None else "Pending")
        if status is None:
            return Observation(
                None, None, runtime, UNKNOWN,
                "its runtime is gone and there is no status.yaml (removed, or the run ended before writing one)",
            )
        return Observation(status, None, runtime, STOPPED)

    def phase(self) -> str:
        """The phase shown for the job now (:meth:`observe`)."""
        return self.observe().phase

    def groups(self) -> list[Any]:
        """The job's replica groups (:class:`t9k_jobs.frameworks.base.ReplicaGroup`), ``[]`` when
        ``job.yaml`` does not validate."""
        if self.job is None:
            return []
        from ..frameworks import framework_for

        return list(framework_for(self.job).groups(self.job))

    def replicas_wanted(self, status: JobStatus | None) -> int:
        """How many replicas the job has (``run.json``, else its spec, else its status)."""
        count = self.info.get("replicas")
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        groups = self.groups()
        if groups:
            return sum(g.replicas for g in groups)
        return sum(len(t.replicas) for t in status.tasks) if status is not None else 0

    def to_object(self) -> dict[str, Any]:
        """The job as an API object (``-o yaml|json``): the manifest it runs, its status, and
        annotations ``t9k-jobs.local/run-dir``, ``.../runtime-pid`` (while it runs),
        ``.../phase`` (with :data:`STOPPED`, :data:`UNKNOWN`) and ``.../unknown-reason``."""
        obj = dict(self.manifest)
        meta = dict(obj.get("metadata") or {})
        seen = self.observe()
        meta["creationTimestamp"] = dt.datetime.fromtimestamp(self.created, dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        notes = {
            "t9k-jobs.local/run-dir": str(self.run_dir),
            "t9k-jobs.local/phase": seen.phase,
        }
        if seen.pid is not None:
            notes["t9k-jobs.local/runtime-pid"] = str(seen.pid)
        if seen.reason is not None:
            notes["t9k-jobs.local/unknown-reason"] = seen.reason
        meta["annotations"] = {**(meta.get("annotations") or {}), **notes}
        obj["metadata"] = meta
        if seen.status is not None:
            obj["status"] = seen.status.dump()
        return obj

    def events(self, last: int = 20) -> list[str]:
        """The last ``last`` lines of ``events.log`` (``HH:MM:SS Type Reason: message``)."""
        try:
            return (
                (self.run_dir / "events.log")
                .read_text(encoding="utf-8", errors="replace")
                .splitlines()[-last:]
            )
        except OSError:
            return []

# ----------------------------------------------------------------------------- finding runs


def runs_dir_default() -> Path:
    """``./t9k-runs`` under the working directory, where ``t9k-jobs run`` writes by default."""
    return working_dir() / DEFAULT_RUNS_DIR


def list_runs(
    runs_dir: Path | None = None, kind: str | None = None, name: str | None = None, latest: bool = True
) -> list[LocalRun]:
    """Runs under ``runs_dir`` (default ``./t9k-runs``), of ``kind`` and ``name`` when given,
    sorted by kind, name and start. ``latest``: only the newest run of each kind and name, and
    every other one whose runtime still runs (or cannot be told: nothing live is hidden).
    A runs directory that does not exist holds no runs.

    Each run is read from its small ``run.json`` (no manifest is parsed), so a lookup by name over
    a thousand finished runs reads a thousand small files (docs/benchmarks.md)."""
    base = runs_dir if runs_dir is not None else runs_dir_default()
    try:
        root = base.resolve()
        with os.scandir(root) as listing:  # the entries' types come with the listing: no stat each
            entries = sorted(e.name for e in listing if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    runs = []
    for entry in entries:
        run = LocalRun.load(root / entry, resolved=True)
        if run is None or (kind is not None and run.kind != kind) or (name is not None and run.name != name):
            continue
        runs.append(run)
    runs.sort(key=lambda r: (r.kind, r.name, r.created, r.run_dir.name))
    return newest_and_live(runs, lambda r: r.runtime().state != GONE) if latest else runs


def newest_and_live(runs: list[LocalRun], not_gone: Callable[[LocalRun], bool]) -> list[LocalRun]:
    """Of ``runs`` (sorted by kind, name and start), the newest of each kind and name, and every
    other one that ``not_gone`` says may still run (its runtime is not proven gone: nothing live
    is hidden); in the same order."""
    newest: dict[tuple[str, str], LocalRun] = {}
    for run in runs:
        newest[(run.kind, run.name)] = run
    keep = {id(r) for r in newest.values()}
    return [r for r in runs if id(r) in keep or not_gone(r)]


def live_runs(runs: list[LocalRun]) -> list[LocalRun]:
    """Those of ``runs`` whose runtime provably runs."""
    return [r for r in runs if r.runtime().running]


def find_run(
    kind: str | None, name: str | None, runs_dir: Path | None = None, run_dir: Path | None = None
) -> LocalRun:
    """The run to act on: the one in ``run_dir`` when given (it must be of ``kind`` and ``name``
    when those are given); else, of the runs of ``kind`` and ``name`` under ``runs_dir``, the one
    whose runtime runs, or the newest when none runs.

    Raises :class:`UsageError` without a ``name`` (and no ``run_dir``: a verb never picks a job
    for a missing name), or when several runs of that name run (``--run-dir`` names one),
    :class:`NotFound` naming what was looked for and where."""
    if run_dir is not None:
        run = LocalRun.load(run_dir)
        if run is None:
            raise NotFound(f"{run_dir} is not a local run directory (no job.yaml in it)")
        if (kind is not None and run.kind != kind) or (name is not None and run.name != name):
            raise NotFound(
                f"{run_dir} holds {run.kind} {run.name}, not {kind or run.kind} {name or run.name}"
            )
        return run
    from ..words import check_name

    check_name(name)
    base = runs_dir if runs_dir is not None else runs_dir_default()
    found = list_runs(base, kind, name, latest=False)
    return pick_run(found, [(r, r.pid()) for r in live_runs(found)], kind, name, base)


def pick_run(
    found: list[LocalRun], live: list[tuple[LocalRun, int | None]], kind: str | None, name: str, base: Path
) -> LocalRun:
    """:func:`find_run`'s choice among ``found`` (the runs of that kind and name, oldest first),
    given ``live`` (those whose runtime provably runs, with its pid): the live one, else the
    newest. Raises :class:`NotFound` (none), :class:`UsageError` (several live)."""
    if not found:
        what = f"{kind.lower() if kind else 'job'} {name!r}"
        raise NotFound(f"no local run of {what} in {base} (use --runs-dir or --run-dir to look elsewhere)")
    if len(live) > 1:
        dirs = ", ".join(f"{r.run_dir} (pid {pid})" for r, pid in live)
        raise UsageError(
            f"{len(live)} runs of {live[0][0].kind} {name} are running: {dirs}; name one with --run-dir"
        )
    return live[0][0] if live else found[-1]


# ----------------------------------------------------------------------------- logs


def log_source(
    run: LocalRun, replica_type: str | None, index: int | None, container: str | None
) -> tuple[Path, Callable[[str], bool] | None]:
    """The file to read and a filter of its lines for the replicas asked for. Raises
    :class:`UsageError` (``index`` without ``replica_type``, ``container`` without ``index``),
    :class:`NotFound` (a replica type, replica or container the job does not have: what it has is
    named)."""
    if replica_type is None and index is None:
        if container is not None:
            raise UsageError("--container needs --type and --index")
        return run.run_dir / "job.log", None
    if replica_type is None:
        raise UsageError("--index needs --type")
    groups = run.groups()
    types = [g.type for g in groups]
    if groups and replica_type not in types:
        raise NotFound(f"{run.kind} {run.name} has no replica type {replica_type!r}; it has {', '.join(types)}")
    if index is None:  # every replica of one type, from job.log
        if container is not None:
            raise UsageError("--container needs --type and --index")
        tag = re.compile(rf"^\[{re.escape(replica_type)}(-\d+)?(/[^\]]*)?\] ")
        return run.run_dir / "job.log", lambda line: bool(tag.match(line))
    pod = f"{run.name}-{replica_type}-{index}"
    containers = _containers(run, replica_type)
    if not groups:  # job.yaml no longer validates: the files are all there is
        if container is None:
            raise NotFound(f"{run.kind} {run.name}: its job.yaml does not validate; give --container")
        path = run.run_dir / f"{pod}.{container}.log"
        if not path.exists():
            raise NotFound(f"{run.kind} {run.name} has no log of {pod} container {container!r}")
        return path, None
    if container is None:
        container = containers[0]
    elif container not in containers:
        raise NotFound(f"{pod} has no container {container!r}; it has {', '.join(containers)}")
    path = run.run_dir / f"{pod}.{container}.log"
    replicas = next(g.replicas for g in groups if g.type == replica_type)
    if index >= replicas and not path.exists():  # one that ran before a scale-down still has its log
        raise NotFound(
            f"{run.kind} {run.name} has no replica {replica_type}-{index}: {replica_type} has {replicas} "
            f"(indexes 0 to {replicas - 1})" if replicas else f"{run.kind} {run.name} has no {replica_type} replicas"
        )
    return path, None


def _containers(run: LocalRun, replica_type: str) -> list[str]:
    """The container names of ``replica_type``'s pods, from the job's spec."""
    for group in run.groups():
        if group.type == replica_type:
            return [c.get("name", "") for c in (group.template.get("spec") or {}).get("containers") or []]
    return []


#: Bytes read at a time from a log file, forwards or backwards: what bounds the memory of
#: ``logs`` (with the longest line, which is yielded whole).
LOG_BLOCK = 1 << 20
#: Bytes of a line's start that a filter of ``logs --type`` looks at (its ``[worker-1] `` prefix).
FILTER_HEAD = 4096


def _lines_backwards(f: Any, size: int, block: int = LOG_BLOCK) -> Iterator[tuple[int, bytes]]:
    """``(offset, head)`` of each line of the open binary file ``f`` (the first ``size`` bytes),
    last line first: ``offset`` where it starts, ``head`` its first :data:`FILTER_HEAD` bytes. A
    last line without a newline is a line; the nothing after a final newline is not. Reads
    ``block`` bytes at a time and keeps no more than a block and a head in memory."""
    pos = size
    head = b""  # the first FILTER_HEAD bytes of the line being read, from the blocks read so far
    while pos > 0:
        start = max(0, pos - block)
        f.seek(start)
        chunk = f.read(pos - start)
        pos = start
        end = len(chunk)
        nl = chunk.rfind(b"\n", 0, end)
        while nl >= 0:
            line_start = start + nl + 1
            if line_start < size:
                yield line_start, (chunk[nl + 1 : end] + head)[:FILTER_HEAD]
            head = b""
            end = nl
            nl = chunk.rfind(b"\n", 0, end)
        head = (chunk[:end] + head)[:FILTER_HEAD]
    if size > 0:
        yield 0, head


def tail_offset(path: Path, lines: int, keep: Callable[[str], bool] | None = None) -> int:
    """Where the last ``lines`` lines of ``path`` (those ``keep`` accepts, when given) start: a
    byte offset (the file's size for 0 lines; 0 when it has fewer). A last line without a newline
    counts. Reads from the end in blocks: the memory taken does not grow with the file."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if lines <= 0:
                return size
            found = 0
            for offset, head in _lines_backwards(f, size):
                if keep is None or keep(head.decode("utf-8", errors="replace")):
                    found += 1
                    if found == lines:
                        return offset
    except FileNotFoundError:
        return 0
    return 0


class LogSourceGone(JobsError):
    """``logs -f``: the run dir or the log being followed went away (removed or moved); exit 1."""


class LogReader:
    """One log of a run read forward, in bounded memory: the reader of :func:`follow_logs` and of
    the dashboard's followed logs (which calls :meth:`read` in a worker thread and waits between
    calls on its event loop).

    ``path`` and ``keep`` come from :func:`log_source`. ``tail``: the first :meth:`read` gives
    only the last ``tail`` lines written so far (None: all). Lines are what
    :mod:`t9k_jobs.loglines` makes of the bytes: at most :data:`~t9k_jobs.loglines.MAX_LINE`
    bytes each (a longer line is cut into pieces, each a line), a carriage return's last state,
    U+FFFD for bytes that are not UTF-8; a 100 MB progress bar with no newline costs a few
    hundred KB to read. A file that is replaced or truncated is read again from its start."""

    def __init__(self, run: LocalRun, path: Path, keep: Callable[[str], bool] | None, tail: int | None) -> None:
        self.run = run
        self.path = path
        self.keep = keep
        self.tail = tail
        self.pos = tail_offset(path, tail, keep) if tail is not None else 0
        self.lines = LineReader()
        self.ident: tuple[int, int] | None = None
        try:
            st = os.stat(run.run_dir)
            self.dir_ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            self.dir_ident = None

    def _kept(self, lines: list[str]) -> list[str]:
        return lines if self.keep is None else [line for line in lines if self.keep(line)]

    def read(self, limit: int = 16 * LOG_BLOCK) -> tuple[list[str], bool]:
        """``(lines, more)``: the whole lines written since the last read, from at most ``limit``
        bytes; ``more`` when the file holds more than that (read again). The first read with a
        ``tail`` reads to the end and gives its last ``tail`` lines only."""
        if self.tail is not None:
            tail, self.tail = self.tail, None
            last: deque[str] = deque(maxlen=tail)
            more = True
            while more:
                lines, more = self.read(limit)
                last.extend(lines)
            return list(last) if tail > 0 else [], False
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            return [], False
        out: list[str] = []
        with f:
            st = os.fstat(f.fileno())
            if self.ident is not None and (self.ident != (st.st_dev, st.st_ino) or st.st_size < self.pos):
                self.pos, self.lines = 0, LineReader()  # replaced or truncated: read it from its start
            self.ident = (st.st_dev, st.st_ino)
            f.seek(self.pos)
            taken = 0
            while taken < limit:
                data = f.read(min(LOG_BLOCK, limit - taken))
                if not data:
                    return self._kept(out), False
                taken += len(data)
                self.pos += len(data)
                out += self.lines.feed(data)
            return self._kept(out), True

    def rest(self) -> list[str]:
        """The last line when it has no newline (at the end: the file is complete)."""
        return self._kept(self.lines.finish())

    def gone(self) -> str | None:
        """Why following cannot go on (the run dir or the file removed, moved or replaced), or None."""
        try:
            st = os.stat(self.run.run_dir)
        except FileNotFoundError:
            return f"the run dir {self.run.run_dir} is gone (removed or moved) while following its logs"
        except OSError:
            return None
        if self.dir_ident is not None and (st.st_dev, st.st_ino) != self.dir_ident:
            return f"the run dir {self.run.run_dir} was replaced while following its logs"
        if self.ident is not None and not self.path.exists():
            return f"{self.path} was removed while following it"
        return None


def follow_logs(
    run: LocalRun,
    replica_type: str | None = None,
    index: int | None = None,
    container: str | None = None,
    follow: bool = False,
    tail: int | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[str]:
    """Lines (without newline) of the run's logs: every replica merged, ``[worker-1] `` prefixed
    (``job.log``), every replica of ``replica_type``, or one replica's container log
    (``replica_type`` and ``index``; ``container`` defaults to the first one).

    ``tail``: only the last ``tail`` lines written so far (None: all), a last line without a
    newline counted; the start is found by reading from the end (:func:`tail_offset`). Lines are
    read as :class:`LogReader` reads them: memory stays bounded whatever the file's size and its
    longest line. ``follow``: go on yielding lines as they are written until the runtime has
    exited (the status is terminal or the run was stopped) and the file is read to its end; a
    replica restarted or replaced keeps writing to the same files, so its new lines come too. A
    file that is not there yet is waited for while the runtime runs.

    Raises :class:`UsageError`/:class:`NotFound` for replicas that are not in the job;
    :class:`LogSourceGone` when, while following, the run dir or the file being read is removed or
    moved (a silent end would look like a finished job)."""
    path, keep = log_source(run, replica_type, index, container)
    reader = LogReader(run, path, keep, tail)
    while True:
        alive = run.runtime().running  # read before the file: lines written before it ended are not missed
        more = True
        while more:
            lines, more = reader.read()
            yield from lines
        stop = not follow or not alive or (should_stop is not None and should_stop())
        if follow and not stop:
            problem = reader.gone()
            if problem is not None:
                raise LogSourceGone(problem)
        if stop:
            yield from reader.rest()
            if follow and not alive and (should_stop is None or not should_stop()):
                problem = reader.gone()
                if problem is not None:
                    raise LogSourceGone(problem)
            return
        time.sleep(POLL)


# ----------------------------------------------------------------------------- stop


@dataclass
class StopResult:
    """What ``stop_run`` did: ``was_running``, whether the runtime ``exited`` by itself after
    SIGTERM (else it was killed), the seconds it took, and processes of the run swept after."""

    was_running: bool
    exited: bool = True
    seconds: float = 0.0
    swept: int = 0


def grace_seconds(run: LocalRun) -> float:
    """The longest ``terminationGracePeriodSeconds`` of the job's pod templates (seconds;
    the local default, 10, where none is set)."""
    from .processes import DEFAULT_GRACE_SECONDS

    longest = DEFAULT_GRACE_SECONDS
    for group in run.groups():
        value = (group.template.get("spec") or {}).get("terminationGracePeriodSeconds")
        if isinstance(value, (int, float)):
            longest = max(longest, float(value))
    return longest


def stop_run(run: LocalRun, timeout: float | None = None) -> StopResult:
    """Stop ``run``: SIGTERM to its runtime, which stops every replica gracefully (SIGTERM, then
    SIGKILL after the pod's grace period) and exits; wait for it up to ``timeout`` seconds
    (default :func:`grace_seconds` + :data:`STOP_MARGIN`), then SIGKILL it (its watchdog kills
    what is left within a second). Processes still carrying the run's marker after that are
    killed. The run directory is kept. A run that is not running is left as it is
    (``was_running`` False) apart from that sweep.

    Only a runtime proven to be the run's (:func:`t9k_jobs.local.ownership.runtime_state`) is
    signalled, through a pidfd pinned before the proof is checked again; raises
    :class:`JobsError` (nothing signalled) when the runtime's state cannot be told."""
    from .ownership import NotOurs, pinned, signal_runtime, wait_exit
    from .processes import RUN_ENV, marked

    state = run.runtime()
    if state.unknown:
        raise JobsError(
            f"{run.kind} {run.name}: cannot tell whether its runtime runs ({state.reason}); nothing was "
            f"signalled. Look for its processes with: grep -l T9K_JOBS_RUN_DIR={run.run_dir} /proc/*/environ"
        )
    pid = state.pid
    result = StopResult(was_running=pid is not None)
    started = time.monotonic()
    if pid is not None:
        limit = timeout if timeout is not None else grace_seconds(run) + STOP_MARGIN
        try:
            with pinned(run.run_dir, pid) as pidfd:
                signal_runtime(pidfd, pid, signal.SIGTERM)
                while run.runtime().running and time.monotonic() - started < limit:
                    time.sleep(POLL)
                if run.runtime().running:
                    result.exited = False
                    signal_runtime(pidfd, pid, signal.SIGKILL)
                    while run.runtime().running and time.monotonic() - started < limit + 10:
                        time.sleep(POLL)
                # The lock goes as the process ends: wait for its end itself, briefly.
                wait_exit(pidfd, 5.0)
        except NotOurs:
            result.was_running = False  # it ended between the look and the signal
    if run.runtime().unknown:
        return result  # not proven gone: nothing else is touched
    # The runtime sweeps its processes as it ends, its watchdog when it is killed; anything
    # left now escaped both.
    deadline = time.monotonic() + (3.0 if pid is not None and not result.exited else 0.0)
    while True:
        left = marked({RUN_ENV: str(run.run_dir)})
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(POLL)
    for leftover in left:
        try:
            os.kill(leftover, signal.SIGKILL)
            result.swept += 1
        except (ProcessLookupError, PermissionError):
            pass
    result.seconds = time.monotonic() - started
    return result


def purge(run: LocalRun) -> None:
    """Remove ``run``'s directory, only once its runtime is proven gone (raises
    :class:`RunsError` while it runs or when that cannot be told)."""
    state = run.runtime()
    if state.running:
        raise RunsError(f"{run.kind} {run.name} is still running in {run.run_dir}; stop it first")
    if state.unknown:
        raise RunsError(f"{run.kind} {run.name}: cannot tell whether its runtime runs ({state.reason}); not removed")
    shutil.rmtree(run.run_dir)


# ----------------------------------------------------------------------------- pause, resume, scale

#: Seconds an edit of the watched manifest is given to be applied by the runtime.
APPLY_TIMEOUT = 15.0


def watched_manifest(run: LocalRun) -> Path | None:
    """The manifest file ``run``'s runtime applies edits of (``manifest.path`` in the run dir), or
    None when it watches none (started from standard input, or with ``--no-watch``)."""
    from .runtime import WATCHED_MANIFEST

    try:
        text = (run.run_dir / WATCHED_MANIFEST).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text) if text else None


def edit_spec(
    run: LocalRun, path: list[str], value: Any, verb: str, timeout: float = APPLY_TIMEOUT
) -> LocalRun:
    """Set ``path`` (e.g. ``["spec", "runMode", "pause", "enabled"]``) to ``value`` in the run's own
    copy of its manifest (``manifest.yaml`` in the run dir, :mod:`t9k_jobs.local.edits`; never the
    user's file, which other runs may watch), and wait up to ``timeout`` seconds for the runtime to
    apply it (its ``job.yaml`` shows the new spec). Returns the run as it is then.

    Raises :class:`NotSupported` for a run of an older version (no copy), :class:`JobsError` when
    it is not running (or that cannot be told), when the copy holds edits the run did not apply,
    when it cannot be written, or when the runtime did not apply the edit in time;
    :class:`UsageError` for an edit of a field that cannot change; ``verb`` names the action in
    those messages (``pause``)."""
    from ..api import fixed_field_changes
    from .edits import COPY_FILE, read_copy, set_path, write_copy
    from .ownership import dir_lock

    what = f"{run.kind} {run.name}"
    state = run.runtime()
    if state.unknown:
        raise JobsError(f"{what}: cannot tell whether its runtime runs ({state.reason}); nothing to {verb}")
    if not state.running:
        raise JobsError(f"{what} is not running ({run.phase()}): nothing to {verb}")
    if run.job is None:
        raise JobsError(f"{what}: {run.run_dir / 'job.yaml'} does not validate; cannot {verb} it")
    copy_path = run.run_dir / COPY_FILE
    try:
        with dir_lock(run.run_dir):
            current = read_copy(run.run_dir)
            if current is None:
                raise NotSupported(
                    f"{verb} is not supported for this local run: it has no {COPY_FILE} (started by an older "
                    "t9k-jobs); stop it and run it again"
                )
            try:
                current_job = parse_job(current, str(copy_path))
            except ValueError:
                current_job = None
            if current_job is None or current_job.dump().get("spec") != run.job.dump().get("spec"):
                raise JobsError(
                    f"{copy_path} holds edits the run has not applied (see {run.run_dir / 'runtime.log'}); "
                    f"fix or undo them, then {verb} again"
                )
            try:
                edited = set_path(current, path, value)
                new = parse_job(edited, str(copy_path))
            except ValueError as exc:
                raise JobsError(f"cannot {verb}: the edited manifest would not validate: {exc}") from None
            problems = fixed_field_changes(run.job, new)
            if problems:
                raise UsageError(problems[0])
            write_copy(run.run_dir, edited)
    except OSError as exc:
        raise JobsError(f"cannot {verb}: {copy_path} cannot be written: {exc.strerror or exc}") from None
    wanted = new.dump().get("spec")
    end = time.monotonic() + timeout
    while True:
        now = LocalRun.load(run.run_dir) or run
        if now.job is not None and now.job.dump().get("spec") == wanted:
            return now
        if not now.runtime().running:
            raise JobsError(f"{what} stopped before it applied the edit of {copy_path}")
        if time.monotonic() >= end:
            log = run.run_dir / "runtime.log"
            where = f"; see {log}" if log.exists() else ""
            raise JobsError(f"edited {copy_path}, but the run has not applied it in {timeout:g}s{where}")
        time.sleep(POLL)


# ----------------------------------------------------------------------------- run -d


def start_detached(
    manifest: Path | None,
    manifest_text: str | None,
    run_dir: Path,
    extra_args: list[str],
    timeout: float = 60.0,
) -> LocalRun:
    """Start ``t9k-jobs run`` in the background for a run in ``run_dir`` (made already, empty),
    and return the run once its runtime has written ``runtime.pid``.

    The runtime is a new session (no controlling terminal: closing the terminal does not stop
    it), its standard input is ``/dev/null`` (or, for a manifest from standard input, a pipe
    that gives ``manifest_text`` and ends), and its output goes to ``<run dir>/runtime.log``:
    written first to ``.<run dir name>.runtime.log`` beside the run directory (the runtime wants
    its directory empty) and moved in once the runtime has started. ``extra_args``: more
    options of ``run`` (``--no-watch``, ``--gpus``). Raises :class:`RunsError` with the
    runtime's output when it exits before starting, or when it has not started in ``timeout``
    seconds (it is stopped then)."""
    side = run_dir.parent / f".{run_dir.name}.runtime.log"
    fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    source = "-" if manifest is None else str(manifest)
    cmd = [
        sys.executable,
        "-m",
        "t9k_jobs.cli",
        "run",
        source,
        "--run-dir",
        str(run_dir),
        "--quiet",
        *extra_args,
    ]
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if manifest is None else subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    if proc.stdin is not None:
        try:
            proc.stdin.write((manifest_text or "").encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
    end = time.monotonic() + timeout
    while runtime_pid(run_dir) != proc.pid or LocalRun.load(run_dir) is None:
        if proc.poll() is not None or time.monotonic() >= end:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            output = side.read_text(errors="replace").strip() if side.exists() else ""
            side.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                if not any(run_dir.iterdir()):
                    run_dir.rmdir()
            last = output.splitlines()[-1] if output else f"exit code {proc.returncode}"
            last = last.removeprefix("error: ")
            if ALREADY_RUNNING in last:
                raise AlreadyExists(last)
            error = RunsError(f"the run did not start: {last}")
            error.exit_code = proc.returncode if proc.returncode and proc.returncode > 0 else 1
            raise error
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        os.replace(side, run_dir / "runtime.log")
    run = LocalRun.load(run_dir)
    assert run is not None  # waited for above
    return run


#: What a runtime says when a run of the same job runs in the same runs dir (AlreadyExists).
ALREADY_RUNNING = "already exists: it is running in"


def already_running(runs_dir: Path, kind: str, name: str) -> str | None:
    """The one line refusing a new run of ``kind`` ``name`` in ``runs_dir`` while one runs there
    (as ``kubectl create`` refuses a name that is taken), or None when none runs."""
    live = live_runs(list_runs(runs_dir, kind, name, latest=False))
    if not live:
        return None
    other = live[-1]
    from ..words import short_name

    short = short_name(kind)
    return (
        f"{kind} {name} {ALREADY_RUNNING} {other.run_dir} (runtime pid {other.pid()}); stop it first "
        f"(t9k-jobs delete {short} {name}), or start another beside it with --allow-duplicate"
    )


__all__ = [
    "ALREADY_RUNNING",
    "APPLY_TIMEOUT",
    "DEFAULT_RUNS_DIR",
    "STOPPED",
    "UNKNOWN",
    "LocalRun",
    "LogSourceGone",
    "NotFound",
    "NotSupported",
    "Observation",
    "RunsError",
    "StopResult",
    "UsageError",
    "already_running",
    "edit_spec",
    "find_run",
    "follow_logs",
    "list_runs",
    "live_runs",
    "log_source",
    "purge",
    "runtime_pid",
    "start_detached",
    "stop_run",
    "tail_offset",
    "watched_manifest",
]
