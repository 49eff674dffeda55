"""A container of a local run in namespaces of its own, as a pod's container is.

Each container of a replica runs in a mount namespace and a PID namespace of its own (and, for a
user other than root, a user namespace, which is what lets it make the other two):

- **mounts**: the rest of the machine looks as it does outside (``/``, ``/dev`` with its GPUs,
  ``/sys``, the run directory), and the pod's volumes are mounted at their ``mountPath``
  (:mod:`t9k_jobs.local.volumes`). Nothing is made on this machine's file systems: a mount point
  that does not exist here is made on a tmpfs laid over its nearest existing folder, with that
  folder's entries bound back in, so ``/t9k/mnt`` appears inside without ``/t9k`` outside.
- **PIDs**: the container's command runs under an init (bubblewrap's, or a few lines of Python
  for util-linux ``unshare``) that is PID 1 of the namespace. When the command ends, the init
  exits with its exit code and the kernel kills whatever the command left in the namespace: a
  daemon that called ``setsid`` and cleared its environment included. ``/proc`` inside shows the
  container's own processes.

How (chosen once per run, :func:`detect`):

``bwrap``
    bubblewrap (Debian's ``bubblewrap``), when it is installed and the machine lets it make the
    namespaces: mounts and PIDs. A job whose containers mount volumes needs it.
``unshare``
    util-linux ``unshare --uts --pid --fork --mount-proc``, when bubblewrap is missing and the run
    is root's: PIDs (and the host name) only, so a job without volume mounts still gets a PID
    namespace per container. A user other than root cannot name the host in a user namespace and
    still be themselves there, so they get ``none``.
``none``
    neither works (a machine that refuses user namespaces, or no bubblewrap for a user other than
    root): a job without volume mounts runs its containers as process groups, as before
    namespaces, and its processes are found by the run's marker and by parentage; a job with
    volume mounts is refused before anything starts.

Every contained container also gets a UTS namespace whose host name is its pod's name, and an
``/etc/hosts`` (this machine's, plus that name at the replica's own loopback address), as a pod's
host name resolves to its IP. Without it, two replicas' processes would look alike (one host name,
and the same PIDs in their own namespaces): torchrun's rendezvous tells nodes apart by
``(host name, pid)``, and would wait for ever for a second node it takes for the first.

``T9K_JOBS_SANDBOX`` (``auto``, the default; ``bwrap``, ``unshare``, ``none``) chooses one by
hand. The processes outside the namespaces (bubblewrap's or unshare's monitor, and the init) carry
the container's environment, so the run's sweeps find them, and their death ends the namespace
(``--die-with-parent``, ``--kill-child``). Signals for the container go to the processes inside
(:func:`inside`), never to the monitor, so a SIGTERM reaches the command with its grace period.

Sources: bwrap(1) (bubblewrap 0.8: ``--unshare-pid``, ``--die-with-parent``, ``--proc``,
``--tmpfs``, ``--perms``, ``--chdir``, ``*-try`` binds; without ``--as-pid-1`` its init is PID 1
and exits with the command's status, 128+N when a signal N ended it); unshare(1) (util-linux 2.38:
``--kill-child``, ``--map-user``, ``--mount-proc``); pid_namespaces(7): the namespace ends with its
init, and the init gets only the signals it has a handler for.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import procfs
from .volumes import Mount

BWRAP = "bwrap"
UNSHARE = "unshare"
NONE = "none"
#: The environment variable that chooses the sandbox by hand (auto, bwrap, unshare, none).
MODE_ENV = "T9K_JOBS_SANDBOX"
MODES = ("auto", BWRAP, UNSHARE, NONE)
#: Seconds a probe of the machine (one namespace made and left) may take.
PROBE_TIMEOUT = 15.0

#: PID 1 of an ``unshare`` container (run as root): names the host (``argv[1]``, the pod's name)
#: and binds the replica's hosts file (``argv[2]``) over ``/etc/hosts``, starts the command
#: (``argv[3:]``), reaps every orphan, and exits with the command's exit code (128+N for a signal
#: N) when the command ends, which ends the namespace. Signals the command should get by default
#: are reset first (Python ignores SIGPIPE, SIGXFSZ).
INIT = """import ctypes, os, signal, socket, sys
socket.sethostname(sys.argv[1])
if ctypes.CDLL(None, use_errno=True).mount(sys.argv[2].encode(), b"/etc/hosts", None, 4096, None) != 0:  # MS_BIND
    sys.exit(f"cannot bind {sys.argv[2]} over /etc/hosts: {os.strerror(ctypes.get_errno())}")
del sys.argv[1:3]
pid = os.fork()
if pid == 0:
    for s in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(s, signal.SIG_DFL)
    try:
        os.execvp(sys.argv[1], sys.argv[1:])
    except OSError as exc:
        sys.stderr.write(f"cannot start {sys.argv[1]!r}: {exc}\\n")
        os._exit(127)
while True:
    try:
        child, status = os.wait()
    except ChildProcessError:
        os._exit(1)
    if child == pid:
        code = os.waitstatus_to_exitcode(status)
        os._exit(128 - code if code < 0 else code)
"""


class SandboxError(Exception):
    """The sandbox asked for cannot be used here; the message is one line saying what to do."""


@dataclass(frozen=True)
class Sandbox:
    """How this run's containers are contained: ``kind`` is :data:`BWRAP`, :data:`UNSHARE` or
    :data:`NONE`; ``tool`` the program's path; ``why_not_bwrap`` why bubblewrap is not used (one
    line with what to do), ``None`` when it is."""

    kind: str
    tool: str | None = None
    why_not_bwrap: str | None = None

    @property
    def mounts(self) -> bool:
        """Whether containers get a mount namespace (volumes at their mount paths)."""
        return self.kind == BWRAP

    @property
    def pids(self) -> bool:
        """Whether containers get a PID namespace."""
        return self.kind != NONE

    def describe(self) -> str:
        """What a replica gets, in a few words (the run's start note)."""
        if self.kind == BWRAP:
            return "each container in mount and PID namespaces of its own (bubblewrap)"
        if self.kind == UNSHARE:
            return "each container in a PID namespace of its own (unshare; no bubblewrap, so no volume mounts)"
        return "containers as process groups (no namespaces: " + (self.why_not_bwrap or "turned off") + ")"


def _user_ns_hint() -> str:
    return (
        "enable unprivileged user namespaces (sysctl user.max_user_namespaces=15000; Debian before 11: "
        "kernel.unprivileged_userns_clone=1; Ubuntu 24.04+: kernel.apparmor_restrict_unprivileged_userns=0), "
        "or run as root"
    )


def _probe(argv: list[str]) -> str | None:
    """Run ``argv`` (a namespace made around ``true``); None when it works, else its complaint."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    text = done.stderr.decode(errors="replace").strip().splitlines()
    return text[-1] if text else f"exit code {done.returncode}"


def unshare_argv(tool: str) -> list[str]:
    """``unshare`` making UTS and PID namespaces (and a mount namespace for its ``/proc`` and the
    replica's ``/etc/hosts``) around what follows; root only."""
    return [tool, "--uts", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private"]


@functools.cache
def detect(mode: str | None = None) -> Sandbox:
    """The sandbox this machine allows (see the module), probed once per process by making a
    namespace around ``true``. ``mode``: one of :data:`MODES` (default: ``$T9K_JOBS_SANDBOX``, else
    ``auto``). Raises :class:`SandboxError` for a mode that is not one of them, or one asked for
    by name that does not work here."""
    mode = mode if mode is not None else (os.environ.get(MODE_ENV) or "auto")
    if mode not in MODES:
        raise SandboxError(f"{MODE_ENV}={mode!r} is not accepted; use one of {', '.join(MODES)}")
    if mode == NONE:
        return Sandbox(NONE, why_not_bwrap=f"{MODE_ENV}=none")
    why_not: str | None = None
    if mode in ("auto", BWRAP):
        bwrap = shutil.which(BWRAP)
        if bwrap is None:
            why_not = "bubblewrap is not installed (Debian, Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
        else:
            probe = [bwrap, "--dev-bind", "/", "/", "--unshare-uts", "--unshare-pid", "--die-with-parent", "--", "true"]
            failed = _probe(probe)
            if failed is None:
                return Sandbox(BWRAP, bwrap)
            why_not = f"this machine refuses bubblewrap's namespaces ({failed}): {_user_ns_hint()}"
        if mode == BWRAP:
            raise SandboxError(f"{MODE_ENV}=bwrap: {why_not}")
    unshare = shutil.which(UNSHARE)
    if os.geteuid() != 0:
        if mode == UNSHARE:
            raise SandboxError(f"{MODE_ENV}=unshare: unshare's namespaces are used for root only; install bubblewrap")
        return Sandbox(NONE, why_not_bwrap=why_not)
    if unshare is not None:
        failed = _probe([*unshare_argv(unshare), "--", "true"])
        if failed is None:
            return Sandbox(UNSHARE, unshare, why_not)
        if mode == UNSHARE:
            raise SandboxError(f"{MODE_ENV}=unshare: this machine refuses unshare's namespaces ({failed})")
    elif mode == UNSHARE:
        raise SandboxError(f"{MODE_ENV}=unshare: util-linux unshare is not installed")
    return Sandbox(NONE, why_not_bwrap=why_not or "util-linux unshare is not installed")


def mounts_refused(sandbox: Sandbox) -> str | None:
    """Why containers with volume mounts cannot run with ``sandbox`` (one line, what to do), or
    None when they can."""
    if sandbox.mounts:
        return None
    why = sandbox.why_not_bwrap or (
        f"the {sandbox.kind} sandbox ({MODE_ENV}={sandbox.kind}) mounts no volumes: only bubblewrap does "
        f"(unset {MODE_ENV}, or set it to bwrap)"
    )
    return f"its containers mount volumes, which needs a mount namespace per replica, and {why}"


# --------------------------------------------------------------------------- where paths are


def _parts(path: str) -> tuple[str, ...]:
    return PurePosixPath(path).parts


def _under(path: str, base: str) -> bool:
    p, b = _parts(path), _parts(base)
    return len(p) >= len(b) and p[: len(b)] == b


def covering(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount ``path`` (absolute, in the container) falls in: the deepest whose mount path is
    ``path`` or one of its folders; None when it is the machine's own."""
    best = None
    for m in mounts:
        if _under(path, m.path) and (best is None or len(_parts(m.path)) > len(_parts(best.path))):
            best = m
    return best


def host_path(path: str, mounts: list[Mount]) -> Path:
    """Where ``path`` (absolute, in the container) is on this machine: inside a mount's source,
    else the same path."""
    m = covering(path, mounts)
    if m is None:
        return Path(path)
    rest = _parts(path)[len(_parts(m.path)) :]
    return m.source.joinpath(*rest)


def _deepest_existing(path: str) -> str:
    p = PurePosixPath(path)
    while not os.path.isdir(p) and p != p.parent:
        p = p.parent
    return str(p)


# --------------------------------------------------------------------------- the command lines


def _entries(folder: str, skip: frozenset[str] = frozenset()) -> list[str]:
    """bwrap arguments that put back every entry of ``folder`` (this machine's) at the same path:
    links as links, everything else bound (devices too)."""
    args: list[str] = []
    for name in sorted(os.listdir(folder)):
        if name in skip:
            continue
        path = os.path.join(folder, name)
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--dev-bind-try", path, path]
    return args


def bwrap_argv(
    tool: str,
    argv: list[str],
    cwd: str,
    mounts: list[Mount],
    make: list[str] = (),  # type: ignore[assignment]
    hostname: str | None = None,
    hosts: Path | None = None,
) -> list[str]:
    """bubblewrap's command line for one container: this machine's tree, ``mounts`` at their
    paths (read-only ones read-only), the folders ``make`` (absolute paths in the container that
    exist nowhere, such as a missing ``workingDir``) on a tmpfs, a new ``/proc``, ``hosts`` over
    ``/etc/hosts`` and ``hostname`` in a UTS namespace, ``cwd`` as the working directory, a PID
    namespace whose init ends with the command and with bwrap, then ``argv``. Raises ``OSError``
    when a folder to lay a tmpfs over cannot be listed."""
    ordered = sorted(mounts, key=lambda m: len(_parts(m.path)))
    expand: set[str] = set()
    for i, target in enumerate([m.path for m in ordered] + list(make)):
        earlier = ordered[:i] if i < len(ordered) else ordered
        if any(_under(target, m.path) and m.path != target for m in earlier):
            continue  # made by bwrap inside that mount's source, as the kubelet makes nested mount points
        real = os.path.realpath(target)
        if os.path.lexists(real):
            continue
        expand.add(_deepest_existing(real))
    args = [tool]
    if "/" in expand:
        args += _entries("/", frozenset({"proc"}))
    else:
        args += ["--dev-bind", "/", "/"]
    args += ["--proc", "/proc"]
    for folder in sorted(expand - {"/"}, key=lambda f: len(_parts(f))):
        mode = os.stat(folder).st_mode & 0o7777
        args += ["--perms", f"{mode:04o}", "--tmpfs", folder, *_entries(folder)]
    for m in ordered:
        if m.source.is_dir() or not m.source.exists():
            flag = "--ro-bind" if m.read_only else "--bind"
        else:
            flag = "--ro-bind" if m.read_only else "--dev-bind"  # a file, a socket or a device (hostPath)
        args += [flag, str(m.source), m.path]
    for folder in make:
        if covering(folder, mounts) is None and not os.path.lexists(os.path.realpath(folder)):
            args += ["--dir", folder]
    if hosts is not None:
        args += ["--ro-bind", str(hosts), "/etc/hosts"]
    if hostname is not None:
        args += ["--unshare-uts", "--hostname", hostname]
    args += ["--chdir", cwd, "--unshare-pid", "--die-with-parent", "--", *argv]
    return args


def hosts_file(path: Path, hostname: str, address: str) -> Path:
    """Write the ``/etc/hosts`` of a replica to ``path``: this machine's, then ``address hostname``
    (its own loopback address and its pod's name), as the kubelet writes a pod's. Returns ``path``.
    Raises ``OSError``."""
    try:
        base = Path("/etc/hosts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        base = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(f"{base.rstrip()}\n# t9k-jobs: this replica\n{address}\t{hostname}\n", encoding="utf-8")
    return path


def wrap(
    sandbox: Sandbox,
    argv: list[str],
    cwd: str,
    mounts: list[Mount],
    make: list[str],
    hostname: str,
    hosts: Path,
) -> tuple[list[str], str]:
    """``(the command line to start, the folder to start it in)`` for a container whose command
    is ``argv`` in ``cwd`` (in the container) with ``mounts``; ``make``: folders the container
    should have that exist nowhere (bwrap only); ``hostname`` and ``hosts`` (a file from
    :func:`hosts_file`): its host name and ``/etc/hosts``. Raises ``OSError`` (bwrap's tree cannot
    be laid)."""
    if sandbox.kind == BWRAP:
        assert sandbox.tool is not None
        return bwrap_argv(sandbox.tool, argv, cwd, mounts, make, hostname, hosts), "/"
    if sandbox.kind == UNSHARE:
        assert sandbox.tool is not None
        init = [sys.executable, "-I", "-S", "-c", INIT, hostname, str(hosts)]
        return [*unshare_argv(sandbox.tool), "--", *init, *argv], cwd
    return argv, cwd


# --------------------------------------------------------------------------- the processes inside


def inside(monitor: int) -> list[int]:
    """The processes of a contained container whose monitor (bwrap, unshare) is ``monitor``: every
    descendant below the namespace's init (the monitor's child), which ignores what it has no
    handler for. The PID namespace keeps them all below it, whatever session they made."""
    children = procfs.children()
    out: list[int] = []
    todo = [c for init in children.get(monitor, []) for c in children.get(init, [])]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


__all__ = [
    "BWRAP",
    "INIT",
    "MODES",
    "MODE_ENV",
    "NONE",
    "UNSHARE",
    "Sandbox",
    "SandboxError",
    "bwrap_argv",
    "covering",
    "detect",
    "host_path",
    "hosts_file",
    "inside",
    "mounts_refused",
    "unshare_argv",
    "wrap",
]
