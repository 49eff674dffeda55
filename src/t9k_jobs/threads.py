"""Thread pools whose threads carry their pool's name where the system shows it.

CPython before 3.14 names a thread for Python only (``threading.current_thread().name``); ``top -H``,
``ps -L`` and ``/proc/PID/task/TID/comm`` show every thread as ``python``. A pool made here sets each
of its threads' system name to its prefix (Linux ``prctl(PR_SET_NAME)``, 15 bytes at most; nothing
elsewhere), so a person, or a test, tells a long-running process's bounded pools from a thread
that should not be there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from concurrent.futures import ThreadPoolExecutor

#: ``prctl``'s option that sets the calling thread's name (linux/prctl.h).
_PR_SET_NAME = 15
#: The most bytes a thread's system name holds (16 with its terminating NUL).
NAME_BYTES = 15


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def name_this_thread(name: str) -> None:
    """Set the calling thread's system name to ``name`` (cut to :data:`NAME_BYTES` bytes). Never
    raises: where it cannot be set (not Linux), the thread keeps its name."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:NAME_BYTES]), 0, 0, 0)


def thread_pool(prefix: str, workers: int) -> ThreadPoolExecutor:
    """A :class:`~concurrent.futures.ThreadPoolExecutor` of at most ``workers`` threads, each
    named ``prefix`` for Python (with its number) and for the system (:func:`name_this_thread`).
    Its threads, once started, stay until it is shut down: the pool is bounded, not shrinking."""
    return ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix=prefix, initializer=name_this_thread, initargs=(prefix,)
    )


__all__ = ["NAME_BYTES", "name_this_thread", "thread_pool"]
