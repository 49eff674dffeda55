"""Day-two verbs over local runs: find them, follow their logs, stop, edit, start detached.

A local run is a run directory (:mod:`t9k_jobs.local.rundir` names its files and reads it); a job
is named by kind and name: the run of that name whose runtime runs, else the newest. Whether a run
is still going is proven, never guessed (:func:`t9k_jobs.local.rundir.runtime_state`); no verb
signals anything for a run whose state cannot be told.

Errors are those of :mod:`t9k_jobs.errors` (``RunsError`` is their base, ``JobsError``), each
one line: :class:`UsageError` and :class:`NotSupported` (exit code 2), :class:`NotFound` and
the others (exit code 1).
"""

from __future__ import annotations

import contextlib
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AlreadyExists, JobsError, NotFound, NotSupported, UsageError
from ..frameworks import parse_job
from ..addressing import replica_name
from ..api import Job, fixed_field_changes
from ..loglines import LineReader
from ..words import check_name
from . import procfs
from .ownership import NotOurs, dir_lock, signal_runtime, wait_exit, write_atomic
from .rundir import (
    ALREADY_RUNNING,
    LocalRun,
    RunDir,
    RunOptions,
    list_runs,
    live_runs,
    pinned,
    runs_dir_default,
    runtime_pid,
)

#: Seconds between two looks at a run's files while following or waiting.
POLL = 0.2
#: Seconds ``delete`` waits beyond the longest replica grace period for the runtime to exit.
STOP_MARGIN = 15.0
#: Seconds ``run -d`` waits for its runtime to start (and a lookup by name for a run starting).
START_TIMEOUT = 60.0

#: Every verb's error (``str()`` one line, ``exit_code`` the CLI's code): the SDK's base error.
RunsError = JobsError


# ----------------------------------------------------------------------------- finding runs


def find_run(
    kind: str | None, name: str | None, runs_dir: Path | None = None, run_dir: Path | None = None
) -> LocalRun:
    """The run to act on: the one in ``run_dir`` when given (it must be of ``kind`` and ``name``
    when those are given); else, of the runs of ``kind`` and ``name`` under ``runs_dir``, the one
    whose runtime runs, or the newest when none runs.

    A run of that name that ``run -d`` is starting right now is waited for first
    (:func:`wait_for_starting`): a ``delete`` just after ``run -d`` stops the new run, not an
    older one. Raises :class:`UsageError` without a ``name`` (and no ``run_dir``: a verb never
    picks a job for a missing name), or when several runs of that name run (``--run-dir`` names
    one), :class:`NotFound` naming what was looked for and where."""
    if run_dir is not None:
        run = LocalRun.load(run_dir)
        if run is None:
            raise NotFound(f"{run_dir} is not a local run directory (no job.yaml in it)")
        if (kind is not None and run.kind != kind) or (name is not None and run.name != name):
            raise NotFound(
                f"{run_dir} holds {run.kind} {run.name}, not {kind or run.kind} {name or run.name}"
            )
        return run

    check_name(name)
    base = runs_dir if runs_dir is not None else runs_dir_default()
    wait_for_starting(base, kind, name)
    found = list_runs(base, kind, name, latest=False)
    return pick_run(found, [(r, r.pid()) for r in live_runs(found)], kind, name, base)


def _starting(base: Path, kind: str | None, name: str) -> list[Path]:
    """The run dirs under ``base`` that ``run -d``'s parent is starting for ``kind``/``name``: its
    ``starting.json`` names them and that parent is alive."""
    out = []
    for marker in base.glob(f"*/{RunDir.STARTING}"):
        try:
            info = json.loads(marker.read_bytes())
            alive = procfs.alive(int(info["pid"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if alive and info.get("name") == name and (kind is None or info.get("kind") == kind):
            out.append(marker.parent)
    return out


def wait_for_starting(base: Path, kind: str | None, name: str, timeout: float = START_TIMEOUT) -> None:
    """Wait, at most ``timeout`` seconds, until no run of ``kind``/``name`` under ``base`` is being
    started by ``run -d`` (:func:`start_detached`: its runtime has published it, or it failed)."""
    end = time.monotonic() + timeout
    while _starting(base, kind, name) and time.monotonic() < end:
        time.sleep(0.05)


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
    """The file to read and a filter of its lines for the replicas asked for, the options checked
    against the job first (the SDK's ``LogOptions.check``: ``--index needs --type``, a replica type
    or container the job does not have). Raises :class:`NotFound` for what only the run's files
    can say: a replica the job does not have and that left no log (what it has is named), and,
    when ``job.yaml`` no longer validates, a container not given or without a log."""
    if replica_type is None:
        return run.files.job_log, None
    if index is None:  # every replica of one type, from job.log
        tag = re.compile(rf"^\[{re.escape(replica_type)}(-\d+)?(/[^\]]*)?\] ")
        return run.files.job_log, lambda line: bool(tag.match(line))
    pod = replica_name(run.name, replica_type, index)
    groups = run.groups()
    if not groups:  # job.yaml no longer validates: the files are all there is
        if container is None:
            raise NotFound(f"{run.kind} {run.name}: its job.yaml does not validate; give --container")
        path = run.files.container_log(pod, container)
        if not path.exists():
            raise NotFound(f"{run.kind} {run.name} has no log of {pod} container {container!r}")
        return path, None
    if container is None:
        container = _containers(run, replica_type)[0]
    path = run.files.container_log(pod, container)
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

    The options are checked against the job first (the SDK's ``LogOptions.check``). Raises
    :class:`NotFound` as :func:`log_source` does;
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
    from .processes import DEFAULT_GRACE_SECONDS  # lazy: keeps asyncio and the engine out of get and logs

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

    Only a runtime proven to be the run's (:func:`t9k_jobs.local.rundir.runtime_state`) is
    signalled, through a pidfd pinned before the proof is checked again; raises
    :class:`JobsError` (nothing signalled) when the runtime's state cannot be told."""
    from .processes import RUN_ENV, marked  # lazy: keeps asyncio and the engine out of get and logs

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
    try:
        text = run.files.watched.read_text(encoding="utf-8").strip()
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
    from .edits import (  # lazy: keeps render and the engine out of get and logs
        read_copy,
        set_path,
        write_copy,
    )

    what = f"{run.kind} {run.name}"
    state = run.runtime()
    if state.unknown:
        raise JobsError(f"{what}: cannot tell whether its runtime runs ({state.reason}); nothing to {verb}")
    if not state.running:
        raise JobsError(f"{what} is not running ({run.phase()}): nothing to {verb}")
    if run.job is None:
        raise JobsError(f"{what}: {run.files.job} does not validate; cannot {verb} it")
    copy_path = run.files.copy
    try:
        with dir_lock(run.run_dir):
            current = read_copy(run.run_dir)
            if current is None:
                raise NotSupported(
                    f"{verb} is not supported for this local run: it has no {RunDir.COPY} (started by an older "
                    "t9k-jobs); stop it and run it again"
                )
            try:
                current_job = parse_job(current, str(copy_path))
            except ValueError:
                current_job = None
            if current_job is None or current_job.dump().get("spec") != run.job.dump().get("spec"):
                raise JobsError(
                    f"{copy_path} holds edits the run has not applied (see {run.files.runtime_log}); "
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
            log = run.files.runtime_log
            where = f"; see {log}" if log.exists() else ""
            raise JobsError(f"edited {copy_path}, but the run has not applied it in {timeout:g}s{where}")
        time.sleep(POLL)


# ----------------------------------------------------------------------------- run -d


def start_detached(job: Job, run_dir: Path, options: RunOptions, timeout: float = START_TIMEOUT) -> LocalRun:
    """Start the runtime of ``job`` in the background for a run in ``run_dir`` (made already, empty),
    and return the run once its runtime has written ``runtime.pid``.

    ``job`` and ``options`` were parsed and checked once, by the caller; the run dir is prepared
    here with what its runtime needs: the run's own copy of its manifest (``manifest.yaml``: the
    user's file as read now, or the job from standard input) and its options (``options.json``,
    :class:`~t9k_jobs.local.rundir.RunOptions`). The runtime is ``python -m t9k_jobs.local RUN_DIR``
    (:func:`t9k_jobs.local.runtime.run_prepared`), a new session (no controlling terminal: closing
    the terminal does not stop it), its standard input ``/dev/null``, its output
    ``<run dir>/runtime.log``. Raises :class:`RunsError` with the runtime's output when it exits
    before starting (:class:`AlreadyExists` when a run of the job runs in the same runs dir), or
    when it has not started in ``timeout`` seconds (it is stopped then); the run dir goes then,
    unless the runtime wrote in it."""
    from .edits import (  # lazy: keeps render and the engine out of get and logs
        manifest_doc,
        without_status,
        write_copy,
    )

    files = RunDir(run_dir)
    user_doc = manifest_doc(options.manifest) if options.manifest is not None else None
    try:
        write_atomic(files.starting, json.dumps({"pid": os.getpid(), "kind": job.kind, "name": job.name}), mode=0o600)
        write_copy(run_dir, user_doc if user_doc is not None else without_status(job))
        options.write(run_dir)
        fd = os.open(files.runtime_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except OSError as exc:
        _discard_prepared(run_dir)
        raise RunsError(f"the run did not start: cannot write in {run_dir}: {exc.strerror or exc}") from None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "t9k_jobs.local", str(run_dir)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    end = time.monotonic() + timeout
    while runtime_pid(run_dir) != proc.pid or LocalRun.load(run_dir) is None:
        if proc.poll() is not None or time.monotonic() >= end:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            try:
                output = files.runtime_log.read_text(errors="replace").strip()
            except OSError:
                output = ""
            _discard_prepared(run_dir)
            last = output.splitlines()[-1] if output else f"exit code {proc.returncode}"
            last = last.removeprefix("error: ")
            if ALREADY_RUNNING in last:
                raise AlreadyExists(last)
            error = RunsError(f"the run did not start: {last}")
            error.exit_code = proc.returncode if proc.returncode and proc.returncode > 0 else 1
            raise error
        time.sleep(0.05)
    run = LocalRun.load(run_dir)
    assert run is not None  # waited for above
    with contextlib.suppress(OSError):
        files.starting.unlink()  # published: a lookup by name sees it now
    return run


def _discard_prepared(run_dir: Path) -> None:
    """Remove a run dir that :func:`start_detached` prepared and whose runtime did not start, when
    it holds nothing else (a runtime that wrote in it leaves it, for its files to say why)."""
    files = RunDir(run_dir)
    ours = {files.COPY, files.OPTIONS, files.RUNTIME_LOG, files.STARTING}
    with contextlib.suppress(OSError):
        files.starting.unlink()
        if set(os.listdir(run_dir)) <= ours:
            for name in ours:
                (run_dir / name).unlink(missing_ok=True)
            run_dir.rmdir()


__all__ = [
    "APPLY_TIMEOUT",
    "POLL",
    "LogReader",
    "LogSourceGone",
    "RunsError",
    "StopResult",
    "edit_spec",
    "find_run",
    "follow_logs",
    "log_source",
    "pick_run",
    "purge",
    "start_detached",
    "stop_run",
    "tail_offset",
    "watched_manifest",
]
