"""Day-two verbs over local runs: find them, read their status, follow their logs, wait, stop.

A local run is a run directory written by :func:`t9k_jobs.local.runner.run_job`: ``job.yaml``
(the job as it runs: written at the start, its modification time, and again when an edit of the
watched manifest is applied), ``manifest.path`` (the manifest it watches), ``runtime.pid`` (the process that runs it), ``status.yaml``,
``events.log``, ``job.log`` (every replica, ``[worker-1] `` prefixes) and
``<pod>.<container>.log``. Runs are found under a runs directory (default ``./t9k-runs``), one
level deep; a job is named by kind and name, and the newest run of that name wins.

Whether a run is still going is read from ``runtime.pid`` and /proc: the process must be alive
(not a zombie) and have started before the pid file was written, so a pid reused by an
unrelated process later is not taken for the runtime. A run whose runtime is gone while its
status is not terminal (stopped by ``delete``, Ctrl-C, a kill) has the phase ``Stopped`` here.

Errors are those of :mod:`t9k_jobs.errors` (``RunsError`` is their base, ``JobsError``), each
one line: :class:`UsageError` and :class:`NotSupported` (exit code 2), :class:`NotFound` and
the others (exit code 1).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from ..api import GROUP, KINDS, JobStatus, parse_job
from ..api.common import TERMINAL_PHASES
from ..errors import JobsError, NotFound, NotSupported, UsageError
from ..show import (
    condition_lines,
    ended_why,
    exit_codes,
    format_table,
    human_age,
    replica_problems,
    replica_reason,
    spec_lines,
)

#: Where ``t9k-jobs run`` puts run directories by default, relative to the working directory.
DEFAULT_RUNS_DIR = Path("t9k-runs")
#: The phase shown for a run whose runtime is gone while its status was not terminal.
STOPPED = "Stopped"
#: Seconds between two looks at a run's files while following or waiting.
POLL = 0.2
#: Seconds ``delete`` waits beyond the longest replica grace period for the runtime to exit.
STOP_MARGIN = 15.0

_SHORT_NAMES = {"gj": "GenericJob", "pj": "PyTorchTrainingJob", "dj": "DeepSpeedJob", "caij": "ColossalAIJob"}


#: Every verb's error (``str()`` one line, ``exit_code`` the CLI's code): the SDK's base error.
RunsError = JobsError

# ----------------------------------------------------------------------------- names, durations


def resolve_kind(text: str) -> str:
    """The kind named by ``text``: a kind (``GenericJob``), its plural, lower case or not, or a
    short name (``gj pj dj caij``); ``kind.group`` forms (``genericjobs.batch.tensorstack.dev``)
    too. Raises :class:`UsageError` naming the accepted forms."""
    word = text.strip().lower()
    if word.endswith("." + GROUP):
        word = word[: -len(GROUP) - 1]
    if word in _SHORT_NAMES:
        return _SHORT_NAMES[word]
    for kind in KINDS:
        if word in (kind.lower(), kind.lower() + "s"):
            return kind
    accepted = ", ".join(f"{k} ({short})" for short, k in _SHORT_NAMES.items())
    raise UsageError(f"unknown kind {text!r}: use one of {accepted}, or their plurals")


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go-like duration (``30s``, ``5m``, ``1h30m``, ``500ms``) or a plain number of
    seconds (``90``, ``2.5``). Raises :class:`UsageError` for anything else or a negative value."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        pos, seconds = 0, 0.0
        for match in _DURATION.finditer(value):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
        if pos != len(value) or not value:
            raise UsageError(
                f"bad duration {text!r}: use seconds or a Go duration such as 30s, 5m, 1h30m"
            ) from None
    if seconds < 0 or math.isnan(seconds):
        raise UsageError(f"bad duration {text!r}: it must be zero or more")
    return seconds


# ----------------------------------------------------------------------------- the runtime's process


def _proc_start(pid: int) -> float | None:
    """When ``pid`` started (epoch seconds), or None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] in ("Z", "X"):
            return None
        ticks = int(fields[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, IndexError, ValueError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def runtime_pid(run_dir: Path) -> int | None:
    """The pid of the runtime of the run in ``run_dir`` while it is alive, else None.

    Alive: ``runtime.pid`` names a process that is not a zombie and started no later than the
    pid file was written (a pid reused since belongs to a newer process)."""
    path = run_dir / "runtime.pid"
    try:
        pid = int(path.read_text().split()[0])
        written = path.stat().st_mtime
    except (OSError, ValueError, IndexError):
        return None
    started = _proc_start(pid)
    # Start times are in clock ticks since boot (1/100 s): allow for that rounding.
    if started is None or started > written + 1.0:
        return None
    return pid


# ----------------------------------------------------------------------------- one run


@dataclass
class LocalRun:
    """One run directory of a job. ``created``: epoch seconds the run started (``job.yaml``'s
    modification time)."""

    run_dir: Path
    kind: str
    name: str
    created: float
    manifest: dict[str, Any] = field(repr=False)

    @classmethod
    def load(cls, run_dir: Path) -> LocalRun | None:
        """The run in ``run_dir``, or None when it is not one (no readable ``job.yaml``)."""
        try:
            path = run_dir / "job.yaml"
            manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
            created = path.stat().st_mtime
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            return None
        if not isinstance(manifest, dict) or not isinstance(manifest.get("metadata"), dict):
            return None
        kind, name = manifest.get("kind"), manifest["metadata"].get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            return None
        return cls(run_dir.resolve(), kind, name, created, manifest)

    @cached_property
    def job(self) -> Any:
        """The typed job (one of the API kinds), or None when ``job.yaml`` no longer validates."""
        try:
            return parse_job(self.manifest, str(self.run_dir / "job.yaml"))
        except Exception:  # noqa: BLE001 - written by an older version: shown without the spec
            return None

    def status(self) -> JobStatus | None:
        """The status the runtime wrote last (``status.yaml``), or None before the first one."""
        try:
            data = yaml.safe_load((self.run_dir / "status.yaml").read_text(encoding="utf-8"))
            return JobStatus.model_validate(data) if isinstance(data, dict) else None
        except Exception:  # noqa: BLE001 - being rewritten, or from another version
            return None

    def pid(self) -> int | None:
        """The runtime's pid while it runs (:func:`runtime_pid`)."""
        return runtime_pid(self.run_dir)

    def phase(self, status: JobStatus | None = None, alive: bool | None = None) -> str:
        """The job's phase, :data:`STOPPED` when its runtime is gone before a terminal phase."""
        status = status if status is not None else self.status()
        alive = alive if alive is not None else self.pid() is not None
        phase = status.phase if status is not None else "Pending"
        if not alive and phase not in TERMINAL_PHASES:
            return STOPPED
        return phase

    def groups(self) -> list[Any]:
        """The job's replica groups (:class:`t9k_jobs.frameworks.base.ReplicaGroup`), ``[]`` when
        ``job.yaml`` does not validate."""
        if self.job is None:
            return []
        from ..frameworks import framework_for

        return list(framework_for(self.job).groups(self.job))

    def replicas_wanted(self, status: JobStatus | None) -> int:
        """How many replicas the job has (its spec; else those in its status)."""
        groups = self.groups()
        if groups:
            return sum(g.replicas for g in groups)
        return sum(len(t.replicas) for t in status.tasks) if status is not None else 0

    def summary(self, now: float | None = None) -> dict[str, Any]:
        """One row of ``get``: ``name kind phase ready ("1/2") restarts age pid run_dir``."""
        status = self.status()
        pid = self.pid()
        running = status.aggregate.running if status is not None and pid is not None else 0
        restarts = sum(t.restart_count for t in status.tasks) if status is not None else 0
        return {
            "name": self.name,
            "kind": self.kind,
            "phase": self.phase(status, pid is not None),
            "ready": f"{running}/{self.replicas_wanted(status)}",
            "restarts": restarts,
            "age": human_age((now or time.time()) - self.created),
            "backoff": status.backoff_count if status is not None else 0,
            "pid": pid,
            "run_dir": str(self.run_dir),
        }

    def to_object(self) -> dict[str, Any]:
        """The job as an API object (``-o yaml|json``): the manifest it started with, its status,
        and annotations ``t9k-jobs.local/run-dir``, ``.../runtime-pid`` (while it runs) and
        ``.../phase`` (with :data:`STOPPED`)."""
        obj = dict(self.manifest)
        meta = dict(obj.get("metadata") or {})
        status = self.status()
        pid = self.pid()
        meta["creationTimestamp"] = dt.datetime.fromtimestamp(self.created, dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        notes = {
            "t9k-jobs.local/run-dir": str(self.run_dir),
            "t9k-jobs.local/phase": self.phase(status, pid is not None),
        }
        if pid is not None:
            notes["t9k-jobs.local/runtime-pid"] = str(pid)
        meta["annotations"] = {**(meta.get("annotations") or {}), **notes}
        obj["metadata"] = meta
        if status is not None:
            obj["status"] = status.dump()
        return obj

    def ref(self) -> str:
        """``genericjob.batch.tensorstack.dev/NAME`` (``-o name``)."""
        return f"{self.kind.lower()}.{GROUP}/{self.name}"

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

    def why(self, status: JobStatus | None = None, alive: bool | None = None) -> str | None:
        """One line saying why the job is not (or no longer) Running, or None when it runs well.

        From, in order: a runtime gone before the end, the Failed/Completed condition, pause
        mode, and each replica that is not running with its reason and message (a container
        that cannot start, init containers, GPUs held by others, a restart backoff)."""
        status = status if status is not None else self.status()
        alive = alive if alive is not None else self.pid() is not None
        phase = self.phase(status, alive)
        if phase == STOPPED:
            return "its runtime is not running (stopped by delete, Ctrl-C or a kill) before the job finished"
        replicas = replica_problems(status)
        if phase in TERMINAL_PHASES and status is not None:
            return ended_why(status)
        if phase == "Paused":
            short = {v: k for k, v in _SHORT_NAMES.items()}.get(self.kind, self.kind)
            return f"paused (spec.runMode.pause): t9k-jobs resume {short} {self.name}"
        if status is None:
            return "the runtime has not written a status yet"
        failure = status.condition("ReplicaFailure")
        if replicas:
            return replicas
        if failure is not None and failure.status == "True":
            return failure.message
        if phase != "Running":
            return f"{phase}: no replica reports a reason"
        return None


# ----------------------------------------------------------------------------- finding runs


def runs_dir_default() -> Path:
    """``./t9k-runs`` under the working directory, where ``t9k-jobs run`` writes by default."""
    return Path.cwd() / DEFAULT_RUNS_DIR


def list_runs(
    runs_dir: Path | None = None, kind: str | None = None, name: str | None = None, latest: bool = True
) -> list[LocalRun]:
    """Runs under ``runs_dir`` (default ``./t9k-runs``), of ``kind`` and ``name`` when given,
    sorted by kind, name and start. ``latest``: only the newest run of each kind and name.
    A runs directory that does not exist holds no runs."""
    base = runs_dir if runs_dir is not None else runs_dir_default()
    try:
        entries = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    runs = []
    for entry in entries:
        run = LocalRun.load(entry)
        if run is None or (kind is not None and run.kind != kind) or (name is not None and run.name != name):
            continue
        runs.append(run)
    runs.sort(key=lambda r: (r.kind, r.name, r.created, r.run_dir.name))
    if latest:
        newest: dict[tuple[str, str], LocalRun] = {}
        for run in runs:
            newest[(run.kind, run.name)] = run
        runs = list(newest.values())
    return runs


def find_run(
    kind: str | None, name: str | None, runs_dir: Path | None = None, run_dir: Path | None = None
) -> LocalRun:
    """The run to act on: the one in ``run_dir`` when given (it must be of ``kind`` and ``name``
    when those are given), else the newest run of ``kind`` and ``name`` under ``runs_dir``.
    Raises :class:`NotFound` naming what was looked for and where."""
    if run_dir is not None:
        run = LocalRun.load(run_dir)
        if run is None:
            raise NotFound(f"{run_dir} is not a local run directory (no job.yaml in it)")
        if (kind is not None and run.kind != kind) or (name is not None and run.name != name):
            raise NotFound(
                f"{run_dir} holds {run.kind} {run.name}, not {kind or run.kind} {name or run.name}"
            )
        return run
    base = runs_dir if runs_dir is not None else runs_dir_default()
    found = list_runs(base, kind, name)
    if not found:
        what = f"{kind.lower() if kind else 'job'} {name!r}" if name else (kind or "job")
        raise NotFound(f"no local run of {what} in {base} (use --runs-dir or --run-dir to look elsewhere)")
    return found[-1]


# ----------------------------------------------------------------------------- logs


def log_source(
    run: LocalRun, replica_type: str | None, index: int | None, container: str | None
) -> tuple[Path, Callable[[str], bool] | None]:
    """The file to read and a filter of its lines for the replicas asked for. Raises
    :class:`UsageError` (``index`` without ``replica_type``), :class:`NotFound` (a replica type or
    container the job does not have)."""
    if replica_type is None and index is None:
        return run.run_dir / "job.log", None
    if replica_type is None:
        raise UsageError("--index needs --type")
    if index is None:  # every replica of one type, from job.log
        tag = re.compile(rf"^\[{re.escape(replica_type)}(-\d+)?(/[^\]]*)?\] ")
        return run.run_dir / "job.log", lambda line: bool(tag.match(line))
    pod = f"{run.name}-{replica_type}-{index}"
    containers = _containers(run, replica_type)
    if container is None:
        if not containers:
            raise NotFound(f"{run.kind} {run.name} has no replica type {replica_type!r}")
        container = containers[0]
    elif containers and container not in containers:
        raise NotFound(f"{pod} has no container {container!r}; it has {', '.join(containers)}")
    return run.run_dir / f"{pod}.{container}.log", None


def _containers(run: LocalRun, replica_type: str) -> list[str]:
    """The container names of ``replica_type``'s pods, from the job's spec."""
    for group in run.groups():
        if group.type == replica_type:
            return [c.get("name", "") for c in (group.template.get("spec") or {}).get("containers") or []]
    return []


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

    ``tail``: only the last ``tail`` lines written so far (None: all). ``follow``: go on yielding
    lines as they are written until the runtime has exited (the status is terminal or the run was
    stopped) and the file is read to its end; a replica restarted or replaced keeps writing to
    the same files, so its new lines come too. A file that is not there yet is waited for while
    the runtime runs. Raises :class:`UsageError`/:class:`NotFound` for replicas that are not in
    the job."""
    path, keep = log_source(run, replica_type, index, container)
    keep = keep or (lambda _line: True)
    pos, pending = 0, b""
    ident = None
    first = True
    while True:
        alive = run.pid() is not None  # read before the file: lines written before it ended are not missed
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                if ident is not None and (ident != (st.st_dev, st.st_ino) or st.st_size < pos):
                    pos, pending = 0, b""  # replaced or truncated: read it from its start
                ident = (st.st_dev, st.st_ino)
                f.seek(pos)
                data = f.read()
                pos += len(data)
        except FileNotFoundError:
            data = b""
        chunk = pending + data
        lines = chunk.split(b"\n")
        pending = lines.pop()
        text = [line.decode("utf-8", errors="replace") for line in lines]
        text = [line for line in text if keep(line)]
        if first:
            if tail is not None:
                text = text[-tail:] if tail > 0 else []
            first = False
        yield from text
        if not follow or not alive or (should_stop is not None and should_stop()):
            if pending and keep(pending.decode("utf-8", errors="replace")):
                yield pending.decode("utf-8", errors="replace")
            return
        time.sleep(POLL)


# ----------------------------------------------------------------------------- wait


WAIT_PHASES = ("Succeeded", "Failed", "Running")


def wait_phase(target: str) -> str:
    """The phase ``target`` names (any case), one of :data:`WAIT_PHASES`; raises
    :class:`UsageError` for anything else."""
    wanted = next((p for p in WAIT_PHASES if p.lower() == target.strip().lower()), None)
    if wanted is None:
        raise UsageError(f"--for={target!r} is not accepted: use Succeeded, Failed or Running")
    return wanted


@dataclass
class WaitResult:
    """How a wait ended: ``reached`` the phase asked for, and a one-line ``message``."""

    reached: bool
    phase: str
    message: str


def wait_for(
    run: LocalRun, target: str, timeout: float | None = None, clock: Callable[[], float] = time.monotonic
) -> WaitResult:
    """Wait until ``run``'s job is in phase ``target`` (``Succeeded``, ``Failed`` or ``Running``,
    any case), it ends in another terminal phase or is stopped (not reached), or ``timeout``
    seconds pass (None: no limit; not reached). Polls the run's files every :data:`POLL` s.
    Raises :class:`UsageError` for another target."""
    wanted = wait_phase(target)
    end = None if timeout is None else clock() + timeout
    what = f"{run.kind} {run.name}"
    while True:
        status = run.status()
        alive = run.pid() is not None
        phase = run.phase(status, alive)
        if phase == wanted:
            return WaitResult(True, phase, f"{what} is {phase}")
        if phase in TERMINAL_PHASES or phase == STOPPED:
            why = run.why(status, alive)
            return WaitResult(
                False, phase, f"{what} ended {phase}, not {wanted}" + (f": {why}" if why else "")
            )
        if end is not None and clock() >= end:
            return WaitResult(
                False,
                phase,
                f"timed out after {_seconds(timeout)} waiting for {what} to be {wanted}; it is {phase}",
            )
        time.sleep(POLL if end is None else max(0.0, min(POLL, end - clock())))


def _seconds(value: float | None) -> str:
    return f"{value:g}s" if value is not None else "-"


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
    (``was_running`` False) apart from that sweep."""
    from .processes import RUN_ENV, marked

    pid = run.pid()
    result = StopResult(was_running=pid is not None)
    started = time.monotonic()
    if pid is not None:
        limit = timeout if timeout is not None else grace_seconds(run) + STOP_MARGIN
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        while run.pid() is not None and time.monotonic() - started < limit:
            time.sleep(POLL)
        if run.pid() is not None:
            result.exited = False
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            while run.pid() is not None and time.monotonic() - started < limit + 10:
                time.sleep(POLL)
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
    """Remove ``run``'s directory (only once its runtime is gone; raises :class:`RunsError`
    while it runs)."""
    if run.pid() is not None:
        raise RunsError(f"{run.kind} {run.name} is still running in {run.run_dir}; stop it first")
    shutil.rmtree(run.run_dir)


# ----------------------------------------------------------------------------- text output


def describe(run: LocalRun, events: int = 15) -> list[str]:
    """``describe``'s lines for ``run``: identity and runtime, a spec summary per replica type,
    why it is not Running (when it is not), conditions, a per-replica table (phase, restarts,
    exit codes, reason) and the last ``events`` lines of ``events.log``."""
    status = run.status()
    pid = run.pid()
    phase = run.phase(status, pid is not None)
    out = [
        f"Name:        {run.name}",
        f"Kind:        {run.kind}",
        f"Run dir:     {run.run_dir}",
        f"Runtime:     {f'running, pid {pid}' if pid is not None else 'not running'}",
        (
            f"Created:     {dt.datetime.fromtimestamp(run.created).strftime('%Y-%m-%d %H:%M:%S')} "
            f"({human_age(time.time() - run.created)} ago)"
        ),
        f"Phase:       {phase}",
    ]
    if status is not None:
        out.append(f"Backoff:     {status.backoff_count}")
        for label, value in (("Started:", status.start_time), ("Completed:", status.completion_time)):
            if value:
                out.append(f"{label:<12} {value}")
    why = run.why(status, pid is not None)
    if why and phase != "Succeeded":
        out.append(f"Why:         {why}")
    out.append("Spec:")
    if run.job is not None:
        out += spec_lines(run.job, run.manifest.get("spec") or {})
    else:
        out.append("  (job.yaml no longer validates; see it in the run dir)")
    out.append("Conditions:")
    out += condition_lines(status)
    out.append("Replicas:")
    rows = []
    for task in status.tasks if status is not None else []:
        for rs in task.replicas:
            rows.append([rs.name, rs.phase, rs.restart_count, exit_codes(rs), replica_reason(rs)])
    if rows:
        out += [
            "  " + line for line in format_table(["NAME", "PHASE", "RESTARTS", "EXIT CODE", "REASON"], rows)
        ]
    else:
        out.append("  <none>")
    out.append("Events:")
    lines = run.events(events)
    out += [f"  {line}" for line in lines] if lines else ["  <none>"]
    return out


# ----------------------------------------------------------------------------- pause, resume, scale

#: Seconds an edit of the watched manifest is given to be applied by the runtime.
APPLY_TIMEOUT = 15.0


def watched_manifest(run: LocalRun) -> Path | None:
    """The manifest file ``run``'s runtime applies edits of (``manifest.path`` in the run dir), or
    None when it watches none (started from standard input, or with ``--no-watch``)."""
    from .runner import WATCHED_MANIFEST

    try:
        text = (run.run_dir / WATCHED_MANIFEST).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return Path(text) if text else None


def edit_spec(
    run: LocalRun, path: list[str], value: Any, verb: str, timeout: float = APPLY_TIMEOUT
) -> LocalRun:
    """Set ``path`` (e.g. ``["spec", "runMode", "pause", "enabled"]``) to ``value`` in the manifest
    the running ``run`` watches, as a person editing it would (comments and layout kept,
    :func:`t9k_jobs.yamledit.set_field`), and wait up to ``timeout`` seconds for the runtime to
    apply it (its ``job.yaml`` shows the new spec). Returns the run as it is then.

    Raises :class:`NotSupported` when the run watches no manifest, :class:`JobsError` when it is
    not running, when the manifest holds edits the run did not apply, when the file cannot be
    edited or written, or when the runtime did not apply the edit in time; ``verb`` names the
    action in those messages (``pause``)."""
    from ..api import fixed_field_changes
    from ..api.reading import ReadError, decode, parse_documents
    from ..yamledit import EditError, set_field

    what = f"{run.kind} {run.name}"
    if run.pid() is None:
        raise JobsError(f"{what} is not running ({run.phase()}): nothing to {verb}")
    manifest = watched_manifest(run)
    if manifest is None:
        raise NotSupported(
            f"{verb} is not supported for this local run: it watches no manifest (it was started from "
            "standard input or with --no-watch)"
        )
    if run.job is None:
        raise JobsError(f"{what}: {run.run_dir / 'job.yaml'} does not validate; cannot {verb} it")

    def parse(text: str) -> Any:
        try:
            docs = parse_documents(text)
            return parse_job(docs[0], str(manifest)) if len(docs) == 1 else None
        except (ReadError, ValueError):
            return None

    try:
        real = manifest.resolve(strict=True)
        text = decode(real.read_bytes())
    except (OSError, ReadError) as exc:
        raise JobsError(f"cannot read {manifest}, the manifest the run watches: {exc}") from None
    current = parse(text)
    if current is None or current.dump().get("spec") != run.job.dump().get("spec"):
        raise JobsError(
            f"{manifest} holds edits the run has not applied (see {run.run_dir / 'runtime.log'}); "
            f"fix or undo them, then {verb} again"
        )
    try:
        new_text = set_field(text, path, value)
    except EditError as exc:
        raise JobsError(f"cannot {verb}: {manifest} cannot be edited in place: {exc}") from None
    new = parse(new_text)
    if new is None:
        raise JobsError(f"cannot {verb}: the edited manifest would not validate")
    problems = fixed_field_changes(run.job, new)
    if problems:
        raise UsageError(problems[0])
    wanted = new.dump().get("spec")
    try:
        tmp = real.with_name(f".{real.name}.t9k-jobs-edit")
        tmp.write_text(new_text, encoding="utf-8")
        shutil.copymode(real, tmp)
        os.replace(tmp, real)
    except OSError as exc:
        raise JobsError(f"cannot write {manifest}: {exc.strerror or exc}") from None
    end = time.monotonic() + timeout
    while True:
        now = LocalRun.load(run.run_dir) or run
        if now.job is not None and now.job.dump().get("spec") == wanted:
            return now
        if now.pid() is None:
            raise JobsError(f"{what} stopped before it applied the edit of {manifest}")
        if time.monotonic() >= end:
            log = run.run_dir / "runtime.log"
            where = f"; see {log}" if log.exists() else ""
            raise JobsError(f"edited {manifest}, but the run has not applied it in {timeout:g}s{where}")
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
    while runtime_pid(run_dir) != proc.pid:
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
            error = RunsError(f"the run did not start: {last}")
            error.exit_code = proc.returncode if proc.returncode and proc.returncode > 0 else 1
            raise error
        time.sleep(0.05)
    with contextlib.suppress(OSError):
        os.replace(side, run_dir / "runtime.log")
    run = LocalRun.load(run_dir)
    assert run is not None  # job.yaml is written before runtime.pid
    return run


__all__ = [
    "APPLY_TIMEOUT",
    "DEFAULT_RUNS_DIR",
    "NotSupported",
    "STOPPED",
    "LocalRun",
    "NotFound",
    "RunsError",
    "StopResult",
    "UsageError",
    "WaitResult",
    "edit_spec",
    "find_run",
    "follow_logs",
    "list_runs",
    "log_source",
    "parse_duration",
    "purge",
    "resolve_kind",
    "runtime_pid",
    "start_detached",
    "stop_run",
    "wait_for",
    "wait_phase",
    "watched_manifest",
]
