"""A local run's lost attempts (issue 42): ``<run dir>/lost.json``, the totals of
:func:`t9k_jobs.engine.cost.add` kept as the runtime carries out each plan, read by ``describe``."""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Callable
from typing import Any

from ..engine import Lost
from ..engine.cost import add
from .ownership import write_atomic
from .rundir import RunDir


def read(run_dir: Path) -> dict[str, Any] | None:
    """The run's totals, ``None`` when it lost nothing or the file cannot be read."""
    try:
        found = json.loads(RunDir(run_dir).lost.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


class LostAttempts:
    """The totals of one run, kept in memory and written whole (atomically) when a pass adds to them."""

    def __init__(self, run_dir: Path, on_fatal: Callable[[str], None]) -> None:
        self.run_dir = run_dir
        self.on_fatal = on_fatal  # called with one line when the run dir cannot be written
        self.totals: dict[str, Any] | None = read(run_dir)  # a run started again in its run dir goes on

    def add(self, lost: tuple[Lost, ...]) -> list[Lost]:
        """Count ``lost`` (each pod once); returns the attempts that were new."""
        if not lost:
            return []
        totals, new = add(self.totals, lost)
        if new:
            self.totals = totals
            path = RunDir(self.run_dir).lost
            try:
                write_atomic(path, json.dumps(totals, separators=(",", ":")))
            except OSError as exc:
                self.on_fatal(f"cannot write {path}: {exc.strerror or exc}")
        return new
