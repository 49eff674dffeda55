"""The small words every layer may say: ages and times, tables, a job's ``-o name`` and short
kind name, the phases a local run may show beyond the API's, and the check of a name that goes
into a URL (issue 34: the runtimes, the SDK and the dashboard use them; they need nothing of ours
but the kinds' table and the errors).

Pure functions of plain values; no I/O. Times are printed as RFC 3339 in UTC
(``2024-05-01T10:00:00Z``), as the API server writes ``creationTimestamp``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from .api import GROUP, KINDS
from .errors import UsageError

#: The phase shown for a local run whose runtime is gone while its status was not terminal.
STOPPED = "Stopped"
#: The phase shown when a local run's state cannot be told; ``unknown_reason`` says why.
UNKNOWN = "Unknown"


# ----------------------------------------------------------------------------- ages, tables, names


def human_age(seconds: float) -> str:
    """A short age like kubectl's AGE column: ``42s``, ``3m20s``, ``25m``, ``5h``, ``3d``."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 600:
        return f"{s // 60}m{s % 60}s"
    if s < 3 * 3600:
        return f"{s // 60}m"
    if s < 48 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def parse_time(value: str | None) -> float | None:
    """Epoch seconds of an RFC 3339 timestamp (``2024-05-01T10:00:00Z``), None when absent or unreadable."""
    if not value or not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def age_of(value: str | None, now: float) -> str:
    """:func:`human_age` since an RFC 3339 timestamp, ``-`` when there is none."""
    when = parse_time(value)
    return human_age(now - when) if when is not None else "-"


def format_table(headers: list[str], rows: list[list[Any]]) -> list[str]:
    """Rows under upper-case headers in columns three spaces apart, as kubectl prints them."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return ["   ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]


def short(text: str | None, limit: int = 100) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...``."""
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def ref(kind: str, name: str) -> str:
    """``genericjob.batch.tensorstack.dev/NAME``, as ``-o name`` prints a job."""
    return f"{kind.lower()}.{GROUP}/{name}"


def short_name(kind: str) -> str:
    """The kind's short name (``gj``), from :mod:`t9k_jobs.api.kinds`; the kind itself when unknown."""
    cls = KINDS.get(kind)
    return cls.SHORT_NAME if cls is not None and cls.SHORT_NAME else kind


def rfc3339(when: float | None) -> str:
    """Epoch seconds as RFC 3339 in UTC (``2024-05-01T10:00:00Z``), ``-`` for None."""
    if when is None:
        return "-"
    return dt.datetime.fromtimestamp(when, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ----------------------------------------------------------------------------- a name in a URL

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def type_name(value: Any) -> str:
    """The name of ``value``'s type as an error says it (``None`` for None)."""
    return "None" if value is None else type(value).__name__


def check_name(value: Any, what: str = "NAME") -> str:
    """``value`` as a job name: a non-empty string that can be one URL path segment. Returns it.

    Raises :class:`UsageError` naming ``what`` (``NAME``, ``--namespace``) for ``None``, a
    non-string, an empty or blank string, ``.``/``..``, or one holding ``/`` or ``%``."""
    if value is None:
        raise UsageError(f"{what}: a job name is required (got None)")
    if not isinstance(value, str):
        raise UsageError(f"{what}: expected a job name (a string), got {type_name(value)} {value!r}")
    if not value.strip():
        raise UsageError(f"{what}: a job name is required; {value!r} is empty (kubectl: resource name may not be empty)")
    check_segment(value, what)
    if len(value) > 253 or not _SUBDOMAIN.fullmatch(value):
        raise UsageError(
            f"{what}: {value!r} is not a job name: lower-case letters, digits, '-' and '.', starting and "
            "ending with a letter or digit, at most 253 characters (RFC 1123)"
        )
    return value


def check_segment(value: str, what: str) -> str:
    """``value`` when it can be one path segment of an API URL; else :class:`UsageError`."""
    if value in (".", ".."):
        raise UsageError(f"{what}: {value!r} is not a name (it may not be '.' or '..')")
    for bad in ("/", "%"):
        if bad in value:
            raise UsageError(f"{what}: {value!r} is not a name (it may not contain {bad!r})")
    if value != value.strip():
        raise UsageError(f"{what}: {value!r} is not a name (leading or trailing whitespace)")
    return value
