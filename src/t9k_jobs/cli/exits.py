"""How a verb of ``t9k-jobs`` ends on an error: each line as ``error: ...`` on stderr, and its exit code."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer

from ..errors import JobsError

EXIT_INVALID = 2


def fail(lines: list[str], code: int = EXIT_INVALID) -> None:
    """Print each of ``lines`` as ``error: LINE`` on stderr and exit with ``code`` (2: invalid input)."""
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def verb_errors() -> Iterator[None]:
    """Turn the verbs' errors (:mod:`t9k_jobs.errors`) into their one line and exit code."""
    try:
        yield
    except JobsError as exc:
        fail(exc.lines(), exc.exit_code)
