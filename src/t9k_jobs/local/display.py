"""What ``t9k-jobs run`` shows: a live status table on a terminal, plain lines elsewhere."""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.color import ColorSystem
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markup import escape
from rich.segment import Segment
from rich.style import Style
from rich.table import Table
from rich.text import Text

from ..engine import Event
from .rundir import RunDir

if TYPE_CHECKING:
    from ..api import Job
    from .pod_runner import ReplicaPod

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


#: Seconds between two draws on a terminal: the log lines that came meanwhile are printed in one
#: write with the status table below them, or, when none came, the table is redrawn if it changed.
DRAW_INTERVAL = 0.25
#: Characters of log lines that wait for the next draw at most. On a terminal, lines beyond it
#: are not shown (a note says how many; job.log has them all): the replicas never wait for the
#: terminal. Elsewhere (a file, a pipe) the run writes them out at once instead, and waits for
#: the reader as a replica waits for its pipe.
PENDING_LIMIT = 4 << 20
#: What rich's Text removes from a line before printing it (BEL, BS, VT, FF, CR).
_CONTROL = "\x07\x08\x0b\x0c\r"
_NO_CONTROL = str.maketrans("", "", _CONTROL)


class _Current:
    """A renderable that draws what it holds at the time it is drawn: the live status table,
    swapped by :meth:`Display.update` without drawing."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.renderable


class _Raw:
    """Lines laid out already (their styles as escape codes), written as they are: no markup,
    no wrapping, no per-line work in rich."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Segment(self.text)


class _Pending:
    """What waits for the next draw, in order: log lines ``(prefix, text)`` with ``text`` one or
    more lines; other output ``(None, renderables)``; ``(None, None)`` where lines began to be
    skipped."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[str | None, Any]] = []
        #: Characters of log lines in ``items``.
        self.chars = 0
        #: Lines not shown since the last draw (a terminal that cannot take them all).
        self.skipped = 0

    def take(self) -> tuple[list[tuple[str | None, Any]], int]:
        with self.lock:
            items, skipped = self.items, self.skipped
            self.items, self.chars, self.skipped = [], 0, 0
        return items, skipped


def _draw_every_interval(ref: weakref.ref[Display]) -> None:
    """The drawing thread of a display: a draw every :data:`DRAW_INTERVAL` seconds until the
    display is gone (it holds no reference to it in between) or its terminal is."""
    while True:
        time.sleep(DRAW_INTERVAL)
        display = ref()
        if display is None:
            return
        try:
            display._draw()
        except OSError:  # the terminal has gone (hung up): nothing more can be shown
            return
        del display


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

    # Output goes through one lock (``_out``), so that what is printed keeps its order whichever
    # thread prints it: the run's (events, the final table) or the drawing thread (log lines, the
    # live table, at most every DRAW_INTERVAL). Log lines only wait in ``_pending`` meanwhile.

    @cached_property
    def _out(self) -> threading.RLock:
        return threading.RLock()

    @cached_property
    def _pending(self) -> _Pending:
        return _Pending()

    #: The live table's holder (on a terminal), whether it changed since it was last drawn, the
    #: drawing thread (None until :meth:`start`), and the run dir (for the note on lines not shown).
    _current: _Current | None = None
    _table_changed = False
    _drawing: threading.Thread | None = None
    _run_dir: Path | None = None

    def _print(self, *renderables: Any) -> None:
        """Print to stdout after the log lines waiting, unless its reader has gone (``t9k-jobs
        run ... | head``): the run goes on, its logs in the run dir, and ends with the job's exit
        code, without a traceback. While the live table shows, this waits for the next draw too
        (every print there draws the table again)."""
        if getattr(self.console, "pipe_gone", False):
            if self.live is not None:
                self.live = None
            return
        if self.live is not None and self._drawing is not None:
            with self._pending.lock:
                self._pending.items.append((None, renderables))
            return
        with self._out:
            self.flush()
            self.console.print(*renderables)

    def start(self, job: Job, run_dir: Path) -> None:
        """Print the run's first line; on a terminal, show the live status table (redrawn by a
        thread of the display at most every :data:`DRAW_INTERVAL` seconds, with the log lines that
        came meanwhile above it)."""
        self.job = job
        self._run_dir = run_dir
        self._print(f"[bold]{job.kind}/{job.name}[/bold]: running locally; logs in {escape(str(run_dir))}")
        if self.console.is_terminal:
            self._current = _Current(self._table(job, {}))
            self.live = Live(self._current, console=self.console, auto_refresh=False, transient=True)
            self.live.start(refresh=True)
        if self.live is not None or not self.quiet:
            self._drawing = threading.Thread(
                target=_draw_every_interval, args=(weakref.ref(self),), name="t9k-jobs-display", daemon=True
            )
            self._drawing.start()

    def log(self, prefix: str, text: str) -> None:
        """Show ``text``, one or more lines joined by ``"\\n"`` (no final newline), each as
        ``[prefix] line``. The lines wait for the next draw (at most :data:`DRAW_INTERVAL`
        seconds); past :data:`PENDING_LIMIT` characters waiting, a terminal skips them and
        anything else is written at once."""
        if self.quiet or getattr(self.console, "pipe_gone", False):
            return
        pending = self._pending
        with pending.lock:
            fits = pending.chars + len(text) <= PENDING_LIMIT or not pending.chars
            if self._drawing is not None and fits:
                pending.items.append((prefix, text))
                pending.chars += len(text)
                return
            if self._drawing is not None and self.console.is_terminal:
                if not pending.skipped:
                    pending.items.append((None, None))
                pending.skipped += text.count("\n") + 1
                return
            pending.items.append((prefix, text))
            pending.chars += len(text)
        self.flush()

    def flush(self) -> bool:
        """Print the log lines waiting now (on a terminal, the live table is drawn again below
        them), and a note of the lines skipped since the last draw. Returns whether there was
        anything to print."""
        with self._out:
            items, skipped = self._pending.take()
            if not items:
                return False
            if getattr(self.console, "pipe_gone", False):
                return True
            renderables: list[Any] = []
            lines: list[tuple[str, str]] = []
            for prefix, item in items:
                if prefix is not None:
                    lines.append((prefix, item))
                    continue
                if lines:
                    renderables.append(_Raw(self._lay_out(lines)))
                    lines = []
                # Each in a Group of its own: rich would join texts side by side on one line.
                if item is None:
                    where = RunDir(self._run_dir).job_log if self._run_dir is not None else RunDir.JOB_LOG
                    note = f"... {skipped:,} log lines not shown: more output than the terminal takes; "
                    renderables.append(Group(Text(note + f"every line is in {where}", style="yellow")))
                else:
                    renderables.append(Group(*item))
            if lines:
                renderables.append(_Raw(self._lay_out(lines)))
            self.console.print(*renderables, soft_wrap=True)
            return True

    def _lay_out(self, lines: list[tuple[str, str]]) -> str:
        """The text of log lines as printed: ``[prefix] line`` each, the prefix dim where the
        console has colours, control characters removed as rich's Text does (one pass per block
        of lines, not per line)."""
        styled = self.console.color_system is not None
        dim = Style(dim=True)
        tags: dict[str, str] = {}
        out = []
        for prefix, text in lines:
            tag = tags.get(prefix)
            if tag is None:
                tag = f"[{prefix}] "
                tags[prefix] = tag = dim.render(tag, color_system=ColorSystem.STANDARD) if styled else tag
            if any(c in text for c in _CONTROL):
                text = text.translate(_NO_CONTROL)
            out.append(tag)
            out.append(text.replace("\n", "\n" + tag) if "\n" in text else text)
            out.append("\n")
        return "".join(out)

    def _draw(self) -> None:
        """One draw of the terminal: the log lines waiting with the table below them, or the
        table alone if it changed. Extend here what must show between two draws."""
        with self._out:
            drawn = self.flush()
            live = self.live
            if live is not None and self._table_changed and not drawn:
                live.refresh()
            self._table_changed = False

    def event(self, event: Event) -> None:
        style = "red" if event.type == "Warning" else "blue"
        self._print(Text(f"event {event.reason}: {event.message}", style=style))

    def note(self, text: str) -> None:
        self.err.print(Text(f"t9k-jobs: {text}", style="yellow"))

    def error(self, text: str) -> None:
        self.err.print(Text(f"error: {text}", style="bold red"))

    def update(self, job: Job, pods: dict[str, ReplicaPod]) -> None:
        """Make the live table show ``job`` and ``pods``; it is drawn at the next draw (at most
        :data:`DRAW_INTERVAL` seconds later), not now."""
        self.job = job
        if self.live is not None and self._current is not None:
            self._current.renderable = self._table(job, pods)
            self._table_changed = True

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
