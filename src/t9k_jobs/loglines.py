r"""Log output as lines to show: cut at :data:`MAX_LINE`, carriage returns as a terminal leaves them.

A container's output is bytes. What ``job.log``, ``t9k-jobs logs`` and the dashboard show of it is
lines, each at most :data:`MAX_LINE` bytes of output (a longer line, or output with no newline at
all, is cut into pieces, each a line of its own, never inside a UTF-8 character), bytes that are not
UTF-8 replaced by U+FFFD, and of a line that rewrites itself with ``\r`` (a progress bar), its last
state. The local runtime writes ``job.log`` with these rules (:mod:`t9k_jobs.local.processes`), and
every reader of a log applies them again to what it reads (a container's own log file, a pod's log
on a cluster), so the memory a reader takes is bounded by :data:`MAX_LINE` whatever the output
looks like (issue 30: one 100 MB progress-bar line took 443 MB to show).

No I/O; pure functions and one small incremental splitter (:class:`LineReader`).
"""

from __future__ import annotations

#: The longest line, in bytes of output: what the local runtime's interleaved ``job.log`` carries
#: (a longer line is cut into pieces there), and what every log reader holds of one line.
MAX_LINE = 64 * 1024
#: Bytes taken at a time by :func:`split_lines`' callers (a container's pipe, a log file): not
#: above :data:`MAX_LINE`, which is what bounds every line of a read but the first.
READ_SIZE = MAX_LINE


def split_lines(partial: bytes, chunk: bytes) -> tuple[bytes | None, bytes]:
    r"""The whole lines of ``partial + chunk`` and what is left of an unfinished line.

    ``partial`` is the unfinished line of the previous read (at most :data:`MAX_LINE` bytes, no
    newline) and ``chunk`` the new read (at most :data:`READ_SIZE` bytes). Returns ``(lines,
    rest)``: ``lines`` the complete lines joined by ``b"\n"`` without the last newline (None if
    there is none), every one at most :data:`MAX_LINE` bytes (a longer one cut into pieces, each a
    line of its own); ``rest`` at most :data:`MAX_LINE` bytes without newline. Only the new chunk
    is searched (a line inside it is at most ``READ_SIZE`` long), so a long line costs time in
    proportion to its length, not its square.
    """
    data = partial + chunk if partial else chunk
    last = data.rfind(b"\n")
    if last < 0:
        if len(data) <= MAX_LINE:
            return None, data
        pieces = []
        while len(data) > MAX_LINE:
            cut = cut_at(data, MAX_LINE)
            pieces.append(data[:cut])
            data = data[cut:]
        return b"\n".join(pieces), data
    lines, rest = data[:last], data[last + 1 :]
    if last > MAX_LINE:  # only the first line can be too long (partial + the chunk's head)
        end = lines.find(b"\n")
        first, others = (lines, b"") if end < 0 else (lines[:end], lines[end:])
        if len(first) > MAX_LINE:
            pieces = []
            while len(first) > MAX_LINE:
                cut = cut_at(first, MAX_LINE)
                pieces.append(first[:cut])
                first = first[cut:]
            pieces.append(first)
            lines = b"\n".join(pieces) + others
    return lines, rest


def cut_at(data: bytes, limit: int) -> int:
    """Where to cut ``data`` to at most ``limit`` bytes: ``limit``, or up to 3 bytes before it
    so that a UTF-8 character is not split (its continuation bytes are ``0b10xxxxxx``)."""
    cut = limit
    while cut > limit - 3 and 0x80 <= data[cut] <= 0xBF:
        cut -= 1
    return cut if 0x80 > data[cut] or data[cut] > 0xBF else limit


def clean(lines: bytes) -> bytes:
    r"""Lines of output as they are shown, in one pass over a block (the common case, ASCII
    without carriage returns, is returned as is): bytes that are not UTF-8 replaced by U+FFFD,
    and of a line that rewrites itself with ``\r`` (a progress bar), its last state (what follows
    its last ``\r``; a ``\r`` that ends the line, as in ``\r\n``, rewrites nothing)."""
    if not lines.isascii():
        lines = lines.decode("utf-8", errors="replace").encode("utf-8")
    if b"\r" in lines:
        lines = b"\n".join(line.rstrip(b"\r").rsplit(b"\r", 1)[-1] for line in lines.split(b"\n"))
    return lines


def last_state(text: str) -> str:
    r"""What a terminal leaves of one line that rewrites itself with ``\r``: the text after its
    last ``\r`` (a ``\r`` that ends it rewrites nothing). :func:`clean`'s rule, for a line already
    decoded (a pod's log line, after its timestamp)."""
    return text.rstrip("\r").rsplit("\r", 1)[-1] if "\r" in text else text


class LineReader:
    r"""Bytes in, lines to show out (str, without the newline), in bounded memory: at most
    :data:`MAX_LINE` bytes of an unfinished line are held whatever is fed. ``feed(data)`` takes
    any amount (it is split into :data:`READ_SIZE` pieces) and returns the lines it completed;
    ``finish()`` returns the unfinished last line, if any (a last line without a newline is a
    line). Each line as :func:`split_lines` and :func:`clean` make it."""

    def __init__(self) -> None:
        self.partial = b""

    def feed(self, data: bytes) -> list[str]:
        out: list[str] = []
        for start in range(0, len(data), READ_SIZE):
            lines, self.partial = split_lines(self.partial, data[start : start + READ_SIZE])
            if lines is not None:
                out += clean(lines).decode("utf-8").split("\n")
        return out

    def finish(self) -> list[str]:
        if not self.partial:
            return []
        rest, self.partial = self.partial, b""
        return [clean(rest).decode("utf-8")]


__all__ = ["MAX_LINE", "READ_SIZE", "LineReader", "clean", "cut_at", "last_state", "split_lines"]
