"""Where a hung replica's processes were: their stacks, dumped before the runtime acts on a job
that made no progress (issue 42; :mod:`t9k_jobs.engine.progress`).

For each process of the replica (its containers' processes and every descendant, inside its
namespaces too), py-spy (a PyPI package, a dependency of ours) reads the Python stacks of every
thread from outside, without pausing or changing the process (``py-spy dump --nonblocking``,
which also reads a stopped process). A process that is not Python is said as such. py-spy needs to
read the process's memory (ptrace's access check): Yama's ``ptrace_scope`` 1 (Ubuntu's default)
refuses it to a non-root user for a process that is not its descendant, as does a process that
made itself non-dumpable. Such a process, when the runtime is about to end it anyway (``Restart``,
``Fail``), is sent SIGABRT (and SIGCONT, should it be stopped): a Python replica of a job with a
progress deadline runs with ``PYTHONFAULTHANDLER=1`` (:func:`t9k_jobs.engine.desired.build_pod`),
so Python's faulthandler writes every thread's traceback to its stderr, the replica's log, before
it ends. With ``Warn`` nothing is ended and the file says the process was not read.

One file per replica and restart attempt, ``stacks/<pod>.attempt-<N>.txt`` in the run directory
(:meth:`~t9k_jobs.local.rundir.RunDir.stacks_file`); ``describe`` shows each one's top frames
(:func:`top_frames`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING

from ..engine import Event, Plan, restart_attempt_label
from . import procfs
from .ownership import write_atomic
from .rundir import RunDir

if TYPE_CHECKING:
    from .pod_runner import ReplicaPod

#: Seconds one ``py-spy dump`` may take (it reads memory; a dump takes ~0.1 s).
PY_SPY_TIMEOUT = 10.0
#: How a file names the way a process's stacks were taken.
PY_SPY, FAULTHANDLER, NOT_READ, NOT_PYTHON = "py-spy", "faulthandler", "not read", "not Python"
_HEADER = re.compile(r"^# pid (\d+) \((.*)\): (.*)$")
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([^)]*)\)(?:: "(.*)")?')


@dataclass(frozen=True)
class Dump:
    """A replica's dump: ``path`` (the file), ``methods``: how many processes each way was used
    for (:data:`PY_SPY`, :data:`FAULTHANDLER`, :data:`NOT_READ`, :data:`NOT_PYTHON`)."""

    path: Path
    methods: dict[str, int]

    def summary(self) -> str:
        """``py-spy 2, not Python 1`` (what was used, for the event)."""
        return ", ".join(f"{k} {v}" for k, v in self.methods.items()) or "no process"


def py_spy() -> str | None:
    """The py-spy program: beside this interpreter (the environment that installed us), else on
    ``PATH``; ``None`` when there is none."""
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if os.access(here, os.X_OK) else shutil.which("py-spy")


def _read(spy: str | None, pid: int) -> tuple[str, str]:
    """``(method, text)`` for one process: its stacks by py-spy, or why not."""
    if spy is None:
        return NOT_READ, "py-spy is not installed"
    try:
        done = subprocess.run(
            [spy, "dump", "--pid", str(pid), "--nonblocking"],
            capture_output=True, text=True, timeout=PY_SPY_TIMEOUT, errors="replace",
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return NOT_READ, f"py-spy did not answer in {PY_SPY_TIMEOUT:.0f} s"
    except OSError as exc:
        return NOT_READ, f"py-spy could not run: {exc.strerror or exc}"
    if done.returncode == 0:
        return PY_SPY, done.stdout
    error = next((line.strip() for line in done.stderr.splitlines() if line.strip()), "no message")
    said = done.stderr.lower()
    if "permission denied" in said or "not permitted" in said:
        return NOT_READ, f"py-spy may not read it: {error}"
    return NOT_PYTHON, error


def dump(pids: list[int], path: Path, may_end: bool) -> Dump:
    """Dump the stacks of ``pids`` (one replica's processes) into ``path``. A process py-spy may not
    read is sent SIGABRT and SIGCONT when ``may_end`` (the runtime ends it next anyway): its own
    faulthandler writes its stacks to the replica's log. Raises ``OSError`` when ``path`` cannot be
    written."""
    spy = py_spy()
    parts: list[str] = []
    methods: dict[str, int] = {}
    for pid in dict.fromkeys(pids):
        name = procfs.comm(pid) or "?"
        method, text = _read(spy, pid)
        if method == NOT_READ and may_end:
            try:
                os.kill(pid, signal.SIGABRT)
            except OSError as exc:
                text = f"{text}; SIGABRT refused: {exc.strerror or exc}"
            else:
                method, text = FAULTHANDLER, f"{text}; sent SIGABRT: a Python process writes its stacks to its log"
                # Should it be stopped. The faulthandler may have written its stacks and the process
                # ended, reaped at once, already: ESRCH here is that, not a refusal (a flake once).
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        methods[method] = methods.get(method, 0) + 1
        body = text if method == PY_SPY else ""
        note = "" if method == PY_SPY else text
        parts.append(f"# pid {pid} ({name}): {method}{' - ' + note if note else ''}\n{body}")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "\n".join(parts) or "# no process was running\n")
    return Dump(path, methods)


def dump_replicas(pods: dict[str, ReplicaPod], plan: Plan, run_dir: Path) -> list[Event]:
    """Dump the stacks of the pods ``plan`` names (:attr:`~t9k_jobs.engine.Plan.dump_stacks`) into
    the run dir, each said in one ``StacksDumped`` event; a pod the plan deletes may be asked to
    dump its own (:func:`dump`). Raises ``OSError`` when the run dir cannot be written."""
    out = []
    for name in plan.dump_stacks:
        pod = pods.get(name)
        if pod is None:
            continue
        attempt = restart_attempt_label(pod.labels) or 0
        path = RunDir(run_dir).stacks_file(name, attempt)
        ending = any((d.kind, d.name) == ("Pod", name) for d in plan.delete)
        done = dump(pod.processes(), path, may_end=ending)
        where = path.relative_to(run_dir)
        out.append(Event("Normal", "StacksDumped", f"stacks of {name} (attempt {attempt}) in {where}: {done.summary()}"))
    return out


def top_frames(text: str) -> list[str]:
    """From a dump file: per thread py-spy read, ``pid P (comm) <thread>: <top frame>``, followed by
    `` in <frame>`` for the innermost frame of the process's own script (the ``.py`` file its
    command line names) when that is not the top one; ``pid P (comm): <how>`` for a process it
    did not read."""
    out: list[str] = []
    who = ""
    script: str | None = None
    thread: str | None = None
    frames: list[str] = []

    def flush() -> None:
        if thread is None or not frames:
            return
        line = f"{who} {thread}: {frames[0]}"
        own = next((f for f in frames if script and f.rstrip(")").rsplit("(", 1)[-1].split(":")[0].endswith(script)), None)
        out.append(line + (f" in {own}" if own is not None and own != frames[0] else ""))

    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            flush()
            pid, name, how = header.groups()
            who, thread, frames, script = f"pid {pid} ({name})", None, [], None
            if not how.startswith(PY_SPY):
                out.append(f"{who}: {how}")
            continue
        if line.startswith("Process ") and script is None:
            script = next((Path(w).name for w in line.split()[2:] if w.endswith(".py")), None)
            continue
        m = _THREAD.match(line)
        if m:
            flush()
            thread, frames = m.group(3) or f"thread {m.group(1)}", []
            continue
        if thread is not None and line.startswith("    ") and line.strip():
            frames.append(line.strip())
    flush()
    return out
