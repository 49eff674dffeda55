"""Training metrics in log lines: the per-epoch loss and accuracy the examples print.

The examples' rank 0 prints ``epoch 3/15 loss 0.1234 test_accuracy 0.9500`` (examples/*/train*.py);
in the merged log that line carries its replica, ``[worker-0] epoch 3/15 loss ...``. A line counts
when it names an epoch (``epoch N`` or ``epoch N/M``, any case, ``epoch=N`` and ``epoch: N`` too)
and at least one ``NAME VALUE`` pair whose name has ``loss`` or ``acc`` in it (``loss``,
``val_loss``, ``test_accuracy``, ``acc``), the value a decimal number, ``=`` or ``:`` between them
allowed. Pure functions; no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

_PREFIX = re.compile(r"^\[([A-Za-z0-9_.-]{1,120})\] ")
_EPOCH = re.compile(r"\bepoch\b\s*[=:]?\s*(\d{1,9})(?:\s*/\s*\d{1,9})?", re.IGNORECASE)
_PAIR = re.compile(
    r"\b([A-Za-z_][A-Za-z0-9_./-]{0,60})\s*[=:]?\s+(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?!\w)|"
    r"\b([A-Za-z_][A-Za-z0-9_./-]{0,60})\s*[=:]\s*(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?!\w)"
)
#: Longest line looked at (a longer one is cut first): a huge line costs no more than this.
MAX_LINE = 4096


@dataclass(frozen=True)
class Point:
    """One metric value: ``replica`` (``worker-0``; ``""`` for an unprefixed line), ``metric``
    (``loss``), ``epoch`` (an int) and ``value`` (a finite float)."""

    replica: str
    metric: str
    epoch: int
    value: float


def is_metric(name: str) -> bool:
    """Whether ``name`` is plotted: it has ``loss`` or ``acc`` in it (any case)."""
    low = name.lower()
    return "loss" in low or "acc" in low


def parse_line(line: str) -> list[Point]:
    """The metric points of one log line (``[]`` for most lines)."""
    text = line[:MAX_LINE]
    replica = ""
    prefix = _PREFIX.match(text)
    if prefix:
        replica, text = prefix.group(1), text[prefix.end():]
    epoch = _EPOCH.search(text)
    if epoch is None:
        return []
    number = int(epoch.group(1))
    out = []
    for match in _PAIR.finditer(text):
        name = match.group(1) or match.group(3)
        raw = match.group(2) or match.group(4)
        if name.lower() == "epoch" or not is_metric(name):
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if math.isfinite(value):
            out.append(Point(replica, name, number, value))
    return out


class Series:
    """Points gathered from a stream of lines, at most ``limit`` of them (later ones are dropped
    and counted in ``dropped``, so memory stays bounded whatever the log's size)."""

    def __init__(self, limit: int = 50_000) -> None:
        self.limit = limit
        self.points: list[Point] = []
        self.dropped = 0

    def add_line(self, line: str) -> list[Point]:
        """Parse ``line``; the points kept from it."""
        found = parse_line(line)
        room = max(0, self.limit - len(self.points))
        self.dropped += max(0, len(found) - room)
        kept = found[:room]
        self.points.extend(kept)
        return kept


def as_json(points: list[Point]) -> list[dict[str, object]]:
    """Points as JSON-ready mappings (``replica``, ``metric``, ``epoch``, ``value``)."""
    return [{"replica": p.replica, "metric": p.metric, "epoch": p.epoch, "value": p.value} for p in points]


__all__ = ["MAX_LINE", "Point", "Series", "as_json", "is_metric", "parse_line"]
