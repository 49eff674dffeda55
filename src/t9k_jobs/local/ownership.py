"""Which process runs a local run, proven rather than guessed, and files written whole.

A run's runtime holds an exclusive ``flock`` on its ``runtime.pid`` from before the file is
visible (it is written, locked, then renamed into place) until the runtime exits; the kernel drops
the lock however the runtime ends, SIGKILL included. The file holds the runtime's pid; beside it,
``run-dir.id`` holds the identity (device and inode) of the run dir it was published in.

:func:`state_of` proves a runtime alive in two steps, both from the kernel: someone holds the
lock on *this* file (an ``flock`` of ours on it fails), and the process that ``runtime.pid`` names
has this very file (same device and inode) open; and the run dir it is read in is the directory
the runtime published it in (same device and inode), so a copy made with hard links (``cp -al``,
``rsync --link-dest``: new directories, the same files, the same lock) is not the live run, only
its snapshot, and nothing is signalled through it (issue 33). A run dir copied with ``cp -r`` or
rsync has new files that nobody locks; a touched file, a pid reused by a new process, a pid written
by hand: none of these holds the lock. When the lock is held but not provably by the named process (a run dir on
a shared volume used from another machine, a process we may not inspect), the state is *unknown*
and nothing is signalled.

:func:`signal_runtime` signals through a pidfd opened before the proof is checked again, so the
signal reaches that process or none, never a process that took its pid since.

The functions here take the files they act on; their names are :class:`t9k_jobs.local.rundir.RunDir`'s,
and :mod:`t9k_jobs.local.rundir` calls them for a run dir (``runtime_state(run_dir)``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from . import procfs

RUNNING = "running"
GONE = "gone"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class RuntimeState:
    """What is known of a run's runtime: ``state`` is :data:`RUNNING` (``pid`` is its process,
    proven), :data:`GONE` (proven not running here: nobody holds its lock, or this run dir is a
    hard-linked copy of a live one, which ``reason`` then says) or :data:`UNKNOWN` (``reason``
    says why it cannot be told; never act on it)."""

    state: str
    pid: int | None = None
    reason: str | None = None

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    @property
    def unknown(self) -> bool:
        return self.state == UNKNOWN


def write_atomic(path: Path, data: bytes | str, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` whole: into a temporary file beside it, flushed, then renamed
    over it, so a reader sees the old content or the new, never a part. Raises ``OSError``."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


#: Bytes reserved for the note of why a runtime stopped before its job finished (a full disk, a
#: signal: ``stopped.txt``, :class:`StopNote`) when the run starts, so it can be written when nothing
#: else can.
STOP_NOTE_SIZE = 4096


class StopNote:
    """``path`` (``<run dir>/stopped.txt``), with :data:`STOP_NOTE_SIZE` bytes reserved at the start of the
    run (``posix_fallocate``): :meth:`write` overwrites that space in place, so a run that stops
    because its disk is full can still say so. Best effort: a file system without the reservation
    is written as usual, and a failure to write is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written = False
        self.fd: int | None = None
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            with contextlib.suppress(OSError):
                os.posix_fallocate(self.fd, 0, STOP_NOTE_SIZE)
        except OSError:
            self.fd = None

    def write(self, reason: str) -> None:
        """Say ``reason`` (one line, cut to what the reserved space holds), once."""
        if self.fd is None:
            return
        data = reason.replace("\n", " ").encode("utf-8", "replace")[: STOP_NOTE_SIZE - 1] + b"\n"
        with contextlib.suppress(OSError):
            os.pwrite(self.fd, data, 0)
            os.ftruncate(self.fd, len(data))  # frees blocks: never needs any
        self.written = True
        self.close()

    def discard(self) -> None:
        """The run ended without a reason to give: the reserved file goes."""
        self.close()
        if not self.written:
            with contextlib.suppress(OSError):
                self.path.unlink()

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


#: What a local verb says when the folder it was started in is gone (removed while the shell was
#: in it): the default runs dir and run dir are relative to it.
NO_WORKING_DIR = (
    "the current folder no longer exists (removed while this shell was in it): cd to one that "
    "exists, or give --run-dir / --runs-dir"
)


def working_dir() -> Path:
    """The current folder. Raises :class:`~t9k_jobs.errors.UsageError` (one line, exit 2) when it
    was removed: ``os.getcwd()`` then fails with ENOENT."""
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise UsageError(NO_WORKING_DIR) from None


def publish(pid_file: Path, dir_id: Path) -> int:
    """Make this process the runtime of the run whose pid file is ``pid_file`` (``runtime.pid``):
    write ``dir_id`` (``run-dir.id``: the run dir's ``DEVICE:INODE``), then this pid into a
    temporary file beside ``pid_file``, take an exclusive ``flock`` on it, and rename it into
    place. Returns the file descriptor that holds the lock: keep it open while the run lives
    (closing it, or exiting, releases the lock). Raises ``OSError`` (a file system without locks:
    ``ENOLCK``)."""
    here = os.stat(pid_file.parent)
    write_atomic(dir_id, f"{here.st_dev}:{here.st_ino}\n")
    tmp = pid_file.with_name(f".{pid_file.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.replace(tmp, pid_file)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return fd


def state_of(pid_file: Path, dir_id: Path) -> RuntimeState:
    """Whether the runtime of the run whose pid file is ``pid_file`` (``runtime.pid``, in the run
    dir; ``dir_id``: its ``run-dir.id``) runs, proven as the module docstring says.

    :data:`UNKNOWN` with a reason when ``runtime.pid`` is missing, unreadable or holds no pid, or
    when its lock is held but not by the process it names (another machine, a process we may not
    inspect)."""
    name = pid_file.name
    try:
        here = os.stat(pid_file.parent)
        fd = os.open(pid_file, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return RuntimeState(UNKNOWN, reason=f"{name} is missing from the run dir, so its runtime cannot be told")
    except OSError as exc:
        return RuntimeState(UNKNOWN, reason=f"{name} cannot be read: {exc.strerror or exc}")
    try:
        try:
            text = os.read(fd, 64).decode("ascii", errors="replace").strip()
            st = os.fstat(fd)
        except OSError as exc:
            return RuntimeState(UNKNOWN, reason=f"{name} cannot be read: {exc.strerror or exc}")
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            held = True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                return RuntimeState(UNKNOWN, reason=f"{name} cannot be locked here: {exc.strerror or exc}")
            held = True
        else:
            held = False  # nobody holds it: no runtime runs this run (ours is dropped at close)
    finally:
        os.close(fd)
    if not held:
        return RuntimeState(GONE)
    try:
        pid = int(text.split()[0])
        if pid <= 0:
            raise ValueError
    except (ValueError, IndexError):
        return RuntimeState(UNKNOWN, reason=f"{name} is locked but holds no pid ({text[:20]!r})")
    published = _published_in(dir_id)
    if published is not None and published != (here.st_dev, here.st_ino):
        # The same pid file (a hard link) in another directory: a copy of a live run dir.
        return RuntimeState(GONE, reason=(
            f"this run dir is a copy, made with hard links, of a live run: its {name} is the live "
            "run's, published in another directory; nothing runs this copy"
        ))  # fmt: skip
    owns = procfs.holds_open(pid, (st.st_dev, st.st_ino))
    if owns is None:
        return RuntimeState(UNKNOWN, reason=f"process {pid}, named by {name}, may not be inspected by this user")
    if not owns or not procfs.alive(pid):
        return RuntimeState(
            UNKNOWN,
            reason=(
                f"{name} is locked, but not by process {pid} that it names (the run may be going on "
                "another machine that shares this directory)"
            ),
        )
    return RuntimeState(RUNNING, pid=pid)


def _published_in(dir_id: Path) -> tuple[int, int] | None:
    """The (device, inode) of the run dir whose runtime published the ``runtime.pid`` found beside
    ``dir_id`` (``run-dir.id``: ``DEVICE:INODE``, which a hard-linked copy of the run dir carries
    from the original); None when it does not say (a runtime of an older version)."""
    try:
        dev, _, ino = dir_id.read_text(encoding="ascii").strip().partition(":")
        return int(dev), int(ino)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


class NotOurs(Exception):
    """The process could not be proven to be the run's runtime at the moment of signalling."""


@contextlib.contextmanager
def pinned(pid_file: Path, dir_id: Path, pid: int) -> Iterator[int | None]:
    """A pidfd of ``pid`` (None where the kernel has none), opened and then checked again to be the
    runtime of the run of ``pid_file`` and ``dir_id`` (:func:`state_of`): signals sent through it reach that process or none. Raises
    :class:`NotOurs` when the check fails."""
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        raise NotOurs(f"process {pid} has ended") from None
    except (AttributeError, OSError):
        pidfd = None
    try:
        state = state_of(pid_file, dir_id)
        if not state.running or state.pid != pid:
            raise NotOurs(f"process {pid} is no longer the run's runtime")
        yield pidfd
    finally:
        if pidfd is not None:
            os.close(pidfd)


def signal_runtime(pidfd: int | None, pid: int, sig: int) -> bool:
    """Send ``sig`` to the runtime through ``pidfd`` (from :func:`pinned`), else by pid. False when
    it has ended already."""
    try:
        if pidfd is not None:
            signal.pidfd_send_signal(pidfd, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def wait_exit(pidfd: int | None, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the process of ``pidfd`` to have exited (its pidfd turns
    readable); True when it has, or when there is no pidfd to wait on."""
    if pidfd is None:
        return True
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(max(0, int(timeout * 1000))))


@contextlib.contextmanager
def dir_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the directory ``path`` while the block runs: how the runtimes and
    verbs of one runs dir (starting a run) or one run dir (editing its manifest copy) take turns.
    Raises ``OSError`` when the directory cannot be opened or locked."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


__all__ = [
    "GONE",
    "STOP_NOTE_SIZE",
    "StopNote",
    "RUNNING",
    "UNKNOWN",
    "NotOurs",
    "RuntimeState",
    "dir_lock",
    "pinned",
    "publish",
    "state_of",
    "signal_runtime",
    "wait_exit",
    "write_atomic",
]
