"""What the local runtime and its verbs read of other processes, from Linux's ``/proc``.

Every reader here is one look: a process may end (or its pid be reused) between two of them, so
each answers for the moment it read, and a process that cannot be read (ended, or another user's)
is left out rather than raising. ``/proc/<pid>/stat``'s second field, the command name, may hold
spaces and parentheses: the fields are those after its last ``)`` (:func:`stat_fields`).

Used by :mod:`.ownership` (is the runtime alive, does it hold its pid file open), :mod:`.processes`
(a container's descendants, the processes carrying a run's marker) and :mod:`.sandbox` (the
processes inside a container's PID namespace); and, without namespaces, making a process the one
its orphans go to (:func:`become_subreaper`, :data:`SUBREAPER_EXEC`). The run's watchdog is a script of its own that
imports nothing of ours (:mod:`t9k_jobs.local.watchdog`): it reads ``/proc`` the same way, by hand.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

#: Process states of a process that has ended (zombie, dead): it runs nothing any more.
ENDED_STATES = ("Z", "X")


def pids() -> list[int]:
    """Every process visible now."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name: ``[0]`` the state, ``[1]`` the
    parent pid, ``[19]`` the start time (clock ticks since boot). Raises ``OSError`` (no such
    process) or ``IndexError`` (an unreadable line)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    if not fields:
        raise IndexError(f"/proc/{pid}/stat has no fields")
    return fields


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (not a zombie)."""
    try:
        return stat_fields(pid)[0] not in ENDED_STATES
    except (OSError, IndexError):
        return False


def parents() -> dict[int, int]:
    """pid -> parent pid of every process."""
    out: dict[int, int] = {}
    for pid in pids():
        try:
            out[pid] = int(stat_fields(pid)[1])
        except (OSError, IndexError, ValueError):
            pass
    return out


def children() -> dict[int, list[int]]:
    """parent pid -> its children's pids, of every process."""
    out: dict[int, list[int]] = {}
    for pid, ppid in parents().items():
        out.setdefault(ppid, []).append(pid)
    return out


def comm(pid: int) -> str:
    """The command name of ``pid`` (``/proc/<pid>/comm``), or ``?`` when it cannot be read."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


#: ``prctl``'s option that makes a process a child subreaper (linux/prctl.h).
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux 3.4+): a descendant orphaned below it (a
    double-forked daemon, whatever session it made) is reparented to it instead of to init, so
    it can still be found and ended. Kept across exec, not inherited by children. Whether it
    took; never raises."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


#: What an uncontained container's command runs through: it makes itself a child subreaper, as a
#: container's PID 1 is the one its orphans go to, then executes the command in its place (the
#: same pid). ``python -c SUBREAPER_EXEC COMMAND ARGS...``.
SUBREAPER_EXEC = (
    "import ctypes, os, sys\n"
    f"ctypes.CDLL(None).prctl({PR_SET_CHILD_SUBREAPER}, 1, 0, 0, 0)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])\n"
)


def environ(pid: int) -> set[bytes]:
    """The ``NAME=value`` entries of ``pid``'s environment (as it started). Raises ``OSError``
    (ended, or another user's)."""
    return set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))


def holds_open(pid: int, ident: tuple[int, int]) -> bool | None:
    """Whether process ``pid`` has the file ``ident`` (device, inode) open; None when its open
    files cannot be read (no such process: False)."""
    base = Path(f"/proc/{pid}/fd")
    try:
        entries = os.listdir(base)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    for entry in entries:
        try:
            st = os.stat(base / entry)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == ident:
            return True
    return False


__all__ = [
    "ENDED_STATES", "PR_SET_CHILD_SUBREAPER", "SUBREAPER_EXEC", "alive", "become_subreaper", "children", "comm",
    "environ", "holds_open", "parents", "pids", "stat_fields",
]
