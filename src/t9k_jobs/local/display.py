"""What ``t9k-jobs run`` shows: a live status table on a terminal, plain lines elsewhere."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..engine import Event

if TYPE_CHECKING:
    from ..api import Job
    from .processes import LocalPod

_PHASE_STYLE = {
    "Succeeded": "bold green",
    "Failed": "bold red",
    "Running": "cyan",
    "Pending": "yellow",
    "Creating": "yellow",
    "Paused": "magenta",
    "Resuming": "magenta",
    "Deleted": "dim",
}


class _Console(Console):
    """rich's console, but a reader that goes away (``| head``) does not end the program: stdout
    is pointed at /dev/null and printing goes on into it (rich's own handler exits 1)."""

    pipe_gone = False

    def on_broken_pipe(self) -> None:
        self.pipe_gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


class Display:
    """Terminal output of a local run. ``quiet`` hides the replicas' interleaved logs."""

    def __init__(self, quiet: bool = False, console: Console | None = None) -> None:
        self.quiet = quiet
        self.console = console or _Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)
        self.live: Live | None = None
        self.started = time.monotonic()
        self.last_phase: str | None = None
        self.job: Job | None = None

    def _print(self, *renderables: Any) -> None:
        """Print to stdout, unless its reader has gone (``t9k-jobs run ... | head``): the run goes
        on, its logs in the run dir, and ends with the job's exit code, without a traceback."""
        if getattr(self.console, "pipe_gone", False):
            if self.live is not None:
                self.live = None
            return
        self.console.print(*renderables)

    def start(self, job: Job, run_dir: Path) -> None:
        self.job = job
        self._print(f"[bold]{job.kind}/{job.name}[/bold]: running locally; logs in {escape(str(run_dir))}")
        if self.console.is_terminal:
            self.live = Live(self._table(job, {}), console=self.console, refresh_per_second=4, transient=True)
            self.live.start()

    def log(self, prefix: str, text: str) -> None:
        if self.quiet:
            return
        line = Text(f"[{prefix}] ", style="dim")
        line.append(text)
        self._print(line)

    def event(self, event: Event) -> None:
        style = "red" if event.type == "Warning" else "blue"
        self._print(Text(f"event {event.reason}: {event.message}", style=style))

    def note(self, text: str) -> None:
        self.err.print(Text(f"t9k-jobs: {text}", style="yellow"))

    def error(self, text: str) -> None:
        self.err.print(Text(f"error: {text}", style="bold red"))

    def update(self, job: Job, pods: dict[str, LocalPod]) -> None:
        self.job = job
        if self.live is not None:
            self.live.update(self._table(job, pods))

    def stop(self, job: Job) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
        self._print(self._table(job, {}))
        phase = job.status.phase if job.status else "Pending"
        message = ""
        if job.status is not None:
            completed = job.status.condition("Completed")
            if completed is not None and completed.status == "True":
                message = f": {completed.message}"
        style = _PHASE_STYLE.get(phase, "")
        self._print(Text(f"{job.kind}/{job.name} {phase}{message}", style=style))

    def _table(self, job: Job, pods: dict[str, Any]) -> Group:
        status = job.status
        phase = status.phase if status else "Pending"
        elapsed = time.monotonic() - self.started
        head = Text(f"{job.kind}/{job.name}  phase ", style="bold")
        head.append(phase, style=_PHASE_STYLE.get(phase, ""))
        if status is not None:
            head.append(f"  backoff {status.backoff_count}  elapsed {elapsed:.0f}s", style="dim")
        table = Table(box=None, pad_edge=False)
        for col in ("REPLICA", "PHASE", "RESTARTS", "EXIT CODE", "PIDS"):
            table.add_column(col)
        for task in status.tasks if status else []:
            for rs in task.replicas:
                codes = ",".join(str(c.exit_code) for c in rs.containers if c.exit_code is not None)
                pod = pods.get(rs.name)
                pids = ",".join(str(p) for p in pod.pids()) if pod is not None else ""
                table.add_row(
                    rs.name,
                    Text(rs.phase, style=_PHASE_STYLE.get(rs.phase, "")),
                    str(rs.restart_count),
                    codes or "-",
                    pids or "-",
                )
        return Group(head, table)
