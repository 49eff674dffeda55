"""Finished local runs past their time to live (issue 43): removed by ``get`` and ``run``.

A run's time to live is its job's ``t9k-jobs.io/ttl-seconds-after-finished`` annotation or
``run --ttl`` (kept in ``run.json`` as ``ttlSecondsAfterFinished`` when the run starts), else the
``--ttl`` given to ``get`` or ``run``; counted from the job's ``completionTime``. As the operator
deletes a finished job past its time to live (:mod:`t9k_jobs.engine.ttl`), the verbs that list or
start runs remove the run directories past theirs. Never a run whose runtime runs or cannot be
told, one that Stopped (its runtime ended before the job: kept for its logs and for a look), nor
one without a ``completionTime``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..api.common import TERMINAL_PHASES
from ..engine.context import parse_time
from ..errors import UsageError
from .ownership import GONE, dir_lock
from .rundir import LocalRun, list_runs

#: The key of ``run.json`` that keeps a run's own time to live (seconds).
TTL_KEY = "ttlSecondsAfterFinished"


@dataclass(frozen=True)
class Pruned:
    """One run directory removed (``removed``) or that could not be (``problem``, one line)."""

    run: LocalRun
    phase: str
    ttl: int
    problem: str | None = None

    def line(self) -> str:
        ref = f"{self.run.kind}/{self.run.name}"
        if self.problem is not None:
            return (f"cannot remove {self.run.run_dir} ({ref}, {self.phase} past its {self.ttl} s to live): "
                    f"{self.problem}")  # fmt: skip
        return f"removed {self.run.run_dir}: {ref} {self.phase} more than {self.ttl} s ago (its time to live)"


def ttl_problem(ttl: int | None, run_dir_given: bool) -> str | None:
    """Why ``run --ttl`` is refused (one line), ``None`` when it is not: a negative value, or a
    ``--run-dir`` (a folder the user named is theirs: never removed on a timer)."""
    if ttl is None:
        return None
    if ttl < 0:
        return f"--ttl: {ttl} is not accepted; expected a non-negative integer (seconds)"
    if run_dir_given:
        return "--ttl: a --run-dir is kept (only runs under the runs dir are removed); drop one of them"
    return None


def ttl_of(run: LocalRun, default: int | None) -> int | None:
    """The run's own time to live (``run.json``), else ``default``."""
    own = run.info.get(TTL_KEY)
    if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
        return own
    return default


def prune(runs_dir: Path | None, default: int | None = None, now: float | None = None) -> list[Pruned]:
    """Remove the finished runs under ``runs_dir`` (default ``./t9k-runs``) past their time to live
    (module docstring); ``default``: seconds for runs without their own (``None``: those are kept);
    ``now``: seconds since the epoch. Returns what was removed or could not be; never raises for
    a run (a runs dir that cannot be read holds none)."""
    now = time.time() if now is None else now
    try:
        found = list_runs(runs_dir, latest=False)
    except UsageError:
        return []  # no working directory for ./t9k-runs: the verb says so itself
    out = []
    for run in found:
        ttl = ttl_of(run, default)
        if ttl is None:
            continue
        expired = _expired(run, ttl, now)
        if expired is None:
            continue
        try:
            with dir_lock(run.run_dir.parent):  # no runtime starts in it meanwhile (they take this lock)
                if run.runtime().state != GONE or _expired(run, ttl, now) is None:
                    continue
                shutil.rmtree(run.run_dir)
        except OSError as exc:
            out.append(Pruned(run, expired, ttl, getattr(exc, "strerror", None) or str(exc)))
            continue
        out.append(Pruned(run, expired, ttl))
    return out


def _expired(run: LocalRun, ttl: int, now: float) -> str | None:
    """The run's terminal phase when it is past its time to live and its runtime is gone."""
    seen = run.observe()
    status = seen.status
    if seen.phase not in TERMINAL_PHASES or status is None or not status.completion_time:
        return None
    if seen.runtime.state != GONE:
        return None
    try:
        finished = parse_time(status.completion_time)
    except ValueError:
        return None
    return seen.phase if finished + ttl <= now else None
