"""Pods as process groups on this machine.

A :class:`LocalPod` runs its init containers one after another, then its containers side by
side, each as its own process group (``start_new_session``) so that everything a container
starts (torchrun's workers, shells' children) is stopped with it. Where the machine allows, each
container also runs in namespaces of its own (:mod:`t9k_jobs.local.sandbox`): the pod's volumes
at their mount paths (:mod:`t9k_jobs.local.volumes`), and a PID namespace that ends with the
container's command. Output goes to one log file per container and, a block of whole lines at a
time, to a callback for the interleaved stream.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import ContainerState, ObservedPod, desired_hash_of, restart_attempt_label
from ..frameworks.base import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from . import procfs
from .rundir import RunDir
from .sandbox import NONE, Sandbox, covering, host_path, hosts_file, inside, wrap
from .volumes import Mount, PodVolumes, VolumeError
from ..loglines import MAX_LINE, READ_SIZE, split_lines
from ..loglines import clean as _clean

#: Grace period when a pod does not set ``terminationGracePeriodSeconds`` (Kubernetes uses 30 s;
#: a local run is interactive, so it waits less before SIGKILL).
DEFAULT_GRACE_SECONDS = 10.0
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

#: Called with ``(pod, container, lines)``: ``lines`` is one or more lines of the container's
#: output as UTF-8 bytes, joined by ``b"\n"``, without the last newline; each line as
#: :func:`_clean` shows it and at most :data:`MAX_LINE` bytes of output long.
LineSink = Callable[[str, str, bytes], None]

# The interleaved stream carries lines of at most MAX_LINE bytes of output (a longer line, or
# output with no newline at all, cut into pieces: t9k_jobs.loglines); the container's own log
# keeps every byte as written. READ_SIZE: bytes taken from a container's pipe at a time.


class ContainerSetupError(Exception):
    """A container that cannot start here: no command, or a missing working directory."""


#: Set on every process of a local run: the run directory (how its processes are found, however
#: they were reparented; a user can read it too).
RUN_ENV = "T9K_JOBS_RUN_DIR"
#: Set on every process of one container of a local run: ``<pod>/<container>``.
CONTAINER_ENV = "T9K_JOBS_CONTAINER"


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: known names replaced, ``$$`` becomes ``$``, others kept."""

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR.sub(one, text)


def exit_code_of(returncode: int) -> int:
    """A process return code as a container exit code: killed by signal N gives 128+N."""
    return 128 - returncode if returncode < 0 else returncode


@dataclass
class LocalContainer:
    name: str
    spec: dict[str, Any]
    proc: asyncio.subprocess.Process | None = None
    exit_code: int | None = None
    error: str | None = None
    reader: asyncio.Task[None] | None = None
    #: Whether ``proc`` is the monitor of namespaces the container runs in (bwrap, unshare): its
    #: processes are then :func:`~t9k_jobs.local.sandbox.inside` it, and signals go to them.
    contained: bool = False
    #: When it started and when it last wrote output (seconds since the epoch; ``None``: not yet).
    started_at: float | None = None
    last_output: float | None = None
    #: When its process ended (seconds since the epoch; ``None``: not yet).
    ended_at: float | None = None

    @property
    def state(self) -> str:
        if self.exit_code is not None:
            return "Terminated"
        if self.proc is not None:
            return "Running"
        return "Waiting"


@dataclass
class LocalPod:
    """One replica pod run as processes. ``phase`` follows Kubernetes' pod phases."""

    manifest: dict[str, Any]
    base_env: dict[str, str]
    default_dir: Path
    log_dir: Path
    sink: LineSink
    on_change: Callable[[], None]
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    deleting: bool = False
    init: list[LocalContainer] = field(default_factory=list)
    main: list[LocalContainer] = field(default_factory=list)
    init_failed: bool = False
    task: asyncio.Task[None] | None = None
    #: Called with one line when the run cannot go on (its directory cannot be written).
    on_fatal: Callable[[str], None] = lambda message: None
    #: How the containers are contained (default: not at all, process groups only).
    sandbox: Sandbox = field(default_factory=lambda: Sandbox(NONE))
    #: ``--volume``: claim (or foreign configMap/secret) name -> folder of this machine.
    volume_map: dict[str, Path] = field(default_factory=dict)
    #: The job's own ConfigMaps and Secrets: ``(kind, name)`` -> the folder holding their keys.
    own_objects: dict[tuple[str, str], Path] = field(default_factory=dict)
    #: Called with ``POD/CONTAINER`` when an uncontained container has ended: the runtime ends
    #: what it orphaned (reparented to the runtime, a subreaper).
    sweep_orphans: Callable[[str], None] = lambda who: None
    #: The run's own folder under ``/dev/shm`` (its Memory emptyDirs), or None.
    shm: Path | None = None
    volumes: PodVolumes | None = None
    volume_error: str | None = None
    #: The replica's own loopback address: where its host name (the pod's name) resolves inside
    #: its namespaces, as a pod's resolves to its IP.
    address: str = "127.0.0.1"
    #: While the pod waits out a restart back-off before its containers start (the kubelet's
    #: ``CrashLoopBackOff``): the message its not yet started containers wait with.
    backoff: str | None = None
    #: When its grace period ends once it is being deleted (seconds since the epoch).
    deletion_deadline: float | None = None

    def __post_init__(self) -> None:
        spec = self.manifest["spec"]
        self.init = [LocalContainer(c["name"], c) for c in spec.get("initContainers") or []]
        self.main = [LocalContainer(c["name"], c) for c in spec["containers"]]

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.manifest["metadata"].get("labels") or {})

    @property
    def phase(self) -> str:
        if self.init_failed:
            return "Failed"
        if any(c.exit_code is None for c in self.init) or any(c.proc is None and c.exit_code is None for c in self.main):
            return "Pending"
        if any(c.exit_code is None for c in self.main):
            return "Running"
        return "Succeeded" if all(c.exit_code == 0 for c in self.main) else "Failed"

    @property
    def grace_seconds(self) -> float:
        value = self.manifest["spec"].get("terminationGracePeriodSeconds")
        return float(value) if isinstance(value, (int, float)) else DEFAULT_GRACE_SECONDS

    def observe(self) -> ObservedPod:
        """The slim projection the engine reads, with the kubelet's reasons: a container waits
        with ``PodInitializing`` while init containers run, else ``ContainerCreating``; it ends
        ``Completed`` (exit 0), ``Error``, or ``ContainerCannotRun`` with the message that says why
        it could not start here."""
        labels = self.labels
        initializing = any(c.exit_code is None for c in self.init)
        return ObservedPod(
            name=self.name,
            uid=self.uid,
            replica_type=labels.get(LABEL_REPLICA_TYPE, ""),
            index=int(labels.get(LABEL_REPLICA_INDEX, "0")),
            phase=self.phase,  # type: ignore[arg-type]
            containers=tuple(_container_state(c, initializing, self.backoff) for c in self.main),
            deleting=self.deleting,
            reason="ContainerCannotRun" if any(c.error for c in self.init + self.main) else None,
            init_containers=tuple(_container_state(c, False) for c in self.init),
            desired_hash=desired_hash_of(self.manifest) or None,
            restart_attempt=restart_attempt_label(labels),
            started_at=self.started_at,
            deletion_deadline=self.deletion_deadline,
            last_output=max((c.last_output for c in self.main if c.last_output is not None), default=None),
            ran_from=min((c.started_at for c in self.main if c.started_at is not None), default=None),
            ran_until=max((c.ended_at or 0.0 for c in self.main), default=None)
            if self.main and all(c.exit_code is not None for c in self.main) else None,
        )

    @property
    def started_at(self) -> float | None:
        """When its last container started, once every one did (``None`` before)."""
        starts = [c.started_at for c in self.main]
        return None if any(t is None for t in starts) else max(t for t in starts if t is not None)

    def processes(self) -> list[int]:
        """Every live process of the pod: its containers' and their descendants (inside their
        namespaces for contained ones; never a namespace's monitor)."""
        groups, tree, _monitors = self._signal_targets()
        return list(dict.fromkeys(groups + tree))

    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.init + self.main if c.proc is not None and c.exit_code is None]

    # ----------------------------------------------------------------- running

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._run_containers()
        finally:
            if self.volumes is not None:  # every process of the pod has ended: its volumes go
                self.volumes.remove()

    def _prepare_volumes(self) -> None:
        """Set up the pod's volumes before its first container, as the kubelet does; a volume that
        cannot be set up fails every container with the reason (``ContainerCannotRun``)."""
        if not self.manifest["spec"].get("volumes") or not self.sandbox.mounts:
            return
        self.volumes = PodVolumes(self.manifest, self.uid, self.log_dir, self.volume_map, self.own_objects, self.shm)
        try:
            self.volumes.prepare()
        except VolumeError as exc:
            self.volume_error = f"volume setup failed: {exc}"

    async def _run_containers(self) -> None:
        self._prepare_volumes()
        for c in self.init:
            await self._spawn(c)
            await self._wait(c)
            self.on_change()
            if c.exit_code != 0:
                self.init_failed = True
                self.on_change()
                return
            if self.deleting:
                return
        for c in self.main:
            await self._spawn(c)
        self.on_change()
        await asyncio.gather(*(self._wait(c) for c in self.main))
        self.on_change()

    async def _wait(self, c: LocalContainer) -> None:
        """Wait for the container's main process; then, as when a container's PID 1 ends, end
        everything it started (its group, its descendants, whatever carries its marker: a
        ``cmd &`` left behind, a daemon that called setsid) so that its log ends and nothing
        outlives it."""
        if c.proc is None:
            return
        # Not proc.wait(): asyncio's wait also waits for the output pipe to close, which a
        # background child holding it would delay for ever. The exit status comes first.
        while c.proc.returncode is None:
            await asyncio.sleep(0.05)
        c.exit_code = exit_code_of(c.proc.returncode)
        c.ended_at = time.time()
        self.kill_leftovers(c.proc.pid, c.name)
        if not c.contained:
            self.sweep_orphans(f"{self.name}/{c.name}")
        try:
            await asyncio.wait_for(c.proc.wait(), timeout=5)
            if c.reader is not None:
                await asyncio.wait_for(asyncio.shield(c.reader), timeout=5)
        except asyncio.TimeoutError:  # a writer we could not kill keeps the pipe open: stop reading
            if c.reader is not None:
                c.reader.cancel()
        self.on_change()

    def kill(self) -> None:
        """SIGKILL every live container process of the pod and what it started, now."""
        for pid in self.pids():
            self.kill_leftovers(pid, "")

    def kill_leftovers(self, pid: int, container: str) -> None:
        """SIGKILL what the container's process ``pid`` left: its process group, its descendants
        (in a PID namespace the kernel has ended them already), and every process carrying this
        container's marker (:data:`CONTAINER_ENV`)."""
        _signal_groups([pid], signal.SIGKILL)
        signal_each(descendants([pid]), signal.SIGKILL)
        signal_each(marked({**self._run_marker(), CONTAINER_ENV: f"{self.name}/{container}"}), signal.SIGKILL)

    def _run_marker(self) -> dict[str, str]:
        return {k: v for k, v in self.base_env.items() if k == RUN_ENV}

    def _env(self, c: dict[str, Any]) -> dict[str, str]:
        """The container's environment: the base env, then its ``env`` entries in order, each
        value expanded against the entries before it (Kubernetes semantics)."""
        own: dict[str, str] = {}
        meta = self.manifest["metadata"]
        for entry in c.get("env") or []:
            name = entry["name"]
            if "value" in entry:
                own[name] = expand(str(entry.get("value", "")), own)
            elif "valueFrom" in entry:
                ref = (entry["valueFrom"] or {}).get("fieldRef") or {}
                path = ref.get("fieldPath", "")
                fields = {
                    "metadata.name": meta["name"],
                    "metadata.namespace": meta.get("namespace", "default"),
                    "status.podIP": "127.0.0.1",
                    "status.hostIP": "127.0.0.1",
                    "spec.nodeName": os.uname().nodename,
                }
                if path in fields:
                    own[name] = fields[path]
                elif path.startswith("metadata.labels['") and path.endswith("']"):
                    own[name] = meta.get("labels", {}).get(path[len("metadata.labels['") : -2], "")
        env = dict(self.base_env)
        env.update(own)
        env[CONTAINER_ENV] = f"{self.name}/{c['name']}"
        return env

    def _argv(self, c: dict[str, Any], env: dict[str, str]) -> list[str]:
        command = [str(x) for x in c.get("command") or []]
        args = [str(x) for x in c.get("args") or []]
        if not command:
            raise ContainerSetupError(
                f"container {c['name']!r} has no command: the local runtime cannot use an image's "
                "entrypoint; set command (and args) in the pod template"
            )
        # $(VAR) names one of the container's env entries (Kubernetes), even one whose value the
        # base env happens to hold too (a run's GPUs, T9K_JOBS_GPUS, when t9k-jobs runs in one).
        declared = {str(e.get("name")) for e in c.get("env") or [] if isinstance(e, dict)}
        own = {k: v for k, v in env.items() if k in declared}
        return [expand(x, own) for x in command + args]

    def _cwd(self, c: dict[str, Any], mounts: list[Mount]) -> tuple[Path, list[str]]:
        """The container's working directory (a path in the container) and the folders to make
        for it. Without a mount namespace it must exist here. With one, it is looked up through
        the mounts, and a missing one is made as a container runtime makes it: in its volume
        (a read-only one refuses), else on a tmpfs of the container's own."""
        wanted = c.get("workingDir")
        if not wanted:
            return self.default_dir, []
        path = Path(wanted)
        if not path.is_absolute():
            path = self.default_dir / path
        missing = ContainerSetupError(
            f"container {c['name']!r}: workingDir {wanted!r} does not exist on this machine"
            + (f" (resolved to {path})" if str(path) != wanted else "")
        )
        if not self.sandbox.mounts:
            if not path.is_dir():
                raise missing
            return path, []
        here = host_path(str(path), mounts)
        if here.is_dir():
            return path, []
        if os.path.lexists(here):
            raise ContainerSetupError(f"container {c['name']!r}: workingDir {wanted!r} is not a directory")
        mount = covering(str(path), mounts)
        if mount is None:
            return path, [str(path)]
        if mount.read_only:
            raise ContainerSetupError(
                f"container {c['name']!r}: workingDir {wanted!r} does not exist in the read-only volume {mount.volume!r}"
            )
        try:
            here.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ContainerSetupError(f"container {c['name']!r}: cannot make workingDir {wanted!r}: {exc.strerror or exc}") from None
        return path, []

    def _mounts(self, c: dict[str, Any]) -> list[Mount]:
        """The container's volume mounts (none without a mount namespace)."""
        if self.volume_error is not None:
            raise ContainerSetupError(self.volume_error)
        if self.volumes is None or not c.get("volumeMounts"):
            return []
        declared = {str(e.get("name")) for e in c.get("env") or [] if isinstance(e, dict)}
        try:
            return self.volumes.mounts(c, {k: v for k, v in self._env(c).items() if k in declared})
        except VolumeError as exc:
            raise ContainerSetupError(f"container {c['name']!r}: {exc}") from None

    def _check_command(self, argv: list[str], cwd: Path, env: dict[str, str], mounts: list[Mount]) -> None:
        """Raise :class:`ContainerSetupError` when the command cannot be found in the container
        (looked up through its mounts), as starting it directly would: in a namespace the
        failure would otherwise read as the command's own exit code."""
        command = argv[0]
        if "/" in command:
            candidates = [command if command.startswith("/") else os.path.normpath(os.path.join(cwd, command))]
        else:
            candidates = [os.path.join(d or ".", command) for d in env.get("PATH", os.defpath).split(os.pathsep)]
        for candidate in candidates:
            here = host_path(candidate if candidate.startswith("/") else os.path.join(cwd, candidate), mounts)
            if here.is_file() and os.access(here, os.X_OK):
                return
        raise ContainerSetupError(f"cannot start {command!r}: [Errno 2] No such file or directory: {command!r}")

    def _launch(self, c: LocalContainer) -> tuple[list[str], str | Path, dict[str, str]]:
        """What starts container ``c``: the argv, the folder it starts in and its environment
        (marks ``c.contained`` when it runs in namespaces of its own). Raises
        :class:`ContainerSetupError` (said as the container's error) or ``OSError``. A pod runner
        that starts containers another way (:mod:`.podman`) says it here."""
        env = self._env(c.spec)
        argv = self._argv(c.spec, env)
        mounts = self._mounts(c.spec)
        cwd, make = self._cwd(c.spec, mounts)
        if self.sandbox.pids:
            self._check_command(argv, cwd, env, mounts)
            hosts = hosts_file(RunDir(self.log_dir).hosts_file(self.name), self.name, self.address)
            argv, start_dir = wrap(self.sandbox, argv, str(cwd), mounts, make, self.name, hosts)
            c.contained = True
            return argv, start_dir, env
        # No PID namespace: the command becomes the subreaper of what it starts, as a
        # container's PID 1 is, so nothing it orphans escapes to init (the runtime, a
        # subreaper too, gets what is left when it ends: LocalRuntime._sweep_orphans).
        self._check_command(argv, cwd, env, [])
        return [sys.executable, "-c", procfs.SUBREAPER_EXEC, *argv], cwd, env

    async def _spawn(self, c: LocalContainer) -> None:
        log_path = RunDir(self.log_dir).container_log(self.name, c.name)
        log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - closed by the reader
        try:
            argv, start_dir, env = self._launch(c)
            c.proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=start_dir,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            c.started_at = time.time()
        except (ContainerSetupError, OSError) as exc:
            message = str(exc) if isinstance(exc, ContainerSetupError) else f"cannot start {c.name!r}: {exc}"
            log.write((message + "\n").encode())
            log.close()
            self.sink(self.name, c.name, _clean(f"error: {message}".encode()))
            c.error = message
            c.exit_code = 128
            c.ended_at = time.time()
            return
        c.reader = asyncio.get_running_loop().create_task(self._pump(c, log))

    async def _pump(self, c: LocalContainer, log: Any) -> None:
        """Copy the container's output to its log file, every byte, and to the sink a block of
        whole lines per read (see :data:`LineSink`). Memory stays bounded whatever the output
        looks like: what is kept of an unfinished line is at most :data:`MAX_LINE` bytes."""
        assert c.proc is not None and c.proc.stdout is not None
        partial = b""
        try:
            while True:
                chunk = await c.proc.stdout.read(READ_SIZE)
                if not chunk:
                    break
                c.last_output = time.time()
                if log is not None:
                    try:
                        log.write(chunk)
                    except OSError as exc:  # a full disk, a quota: the run cannot keep its logs
                        self.on_fatal(f"cannot write {log.name}: {exc.strerror or exc}")
                        log.close()
                        log = None
                lines, partial = split_lines(partial, chunk)
                if lines is not None:
                    self.sink(self.name, c.name, _clean(lines))
            if partial:
                self.sink(self.name, c.name, _clean(partial))
        finally:
            if log is not None:
                log.close()

    # ----------------------------------------------------------------- stopping

    def _signal_targets(self) -> tuple[list[int], list[int], list[int]]:
        """``(process groups, processes, namespace monitors)`` to signal to stop the pod: a
        container without namespaces is its group and every descendant; a contained one is every
        process inside its PID namespace (never its monitor: a monitor that ends ends the
        namespace at once, which would cut the grace period short)."""
        live = [c for c in self.init + self.main if c.proc is not None and c.exit_code is None]
        groups = [c.proc.pid for c in live if not c.contained]  # type: ignore[union-attr]
        monitors = [c.proc.pid for c in live if c.contained]  # type: ignore[union-attr]
        return groups, descendants(groups) + [p for m in monitors for p in inside(m)], monitors

    async def terminate(self) -> None:
        """SIGTERM every process group of the pod and every descendant of its processes (a
        launcher's ranks may run in sessions of their own, e.g. under an sshd worker), and every
        process inside a contained container's PID namespace; SIGKILL what is left after the
        grace period (a namespace's monitor too, which ends the namespace)."""
        self.deleting = True
        self.deletion_deadline = time.time() + self.grace_seconds
        self.on_change()
        groups, tree, monitors = self._signal_targets()
        _signal_groups(groups, signal.SIGTERM)
        signal_each(tree, signal.SIGTERM)
        # A stopped process (SIGSTOP: a hang rehearsed with --inject, a debugger) acts on SIGTERM
        # only once it runs again, as a container's would when its runtime stops it.
        _signal_groups(groups, signal.SIGCONT)
        signal_each(tree, signal.SIGCONT)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace_seconds
        while (self.pids() or any(procfs.alive(p) for p in tree)) and loop.time() < deadline:
            await asyncio.sleep(0.05)
        more_groups, more, more_monitors = self._signal_targets()
        tree += more
        _signal_groups(groups + more_groups, signal.SIGKILL)
        signal_each(tree + monitors + more_monitors, signal.SIGKILL)
        # Reap: the wait tasks finish once the processes are gone.
        if self.task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self.task.cancel()


#: The kubelet's restart back-off (``CrashLoopBackOff``): the first restart of a replica is at
#: once, each next one waits twice as long as the one before, from :data:`BACKOFF_START` up to
#: :data:`BACKOFF_MAX` seconds; a replica that ran :data:`BACKOFF_RESET` seconds before it ended
#: starts the count again. (Kubernetes docs, "Container restarts": 10 s doubling to 5 min, reset
#: after 10 minutes of running.)
BACKOFF_START = 10.0
BACKOFF_MAX = 300.0
BACKOFF_RESET = 600.0


def restart_delay(restarts: int) -> float:
    """Seconds the ``restarts``-th restart in a row of a replica waits (1: the first, at once)."""
    if restarts <= 1:
        return 0.0
    return min(BACKOFF_MAX, BACKOFF_START * 2 ** (restarts - 2))


class Crashes:
    """One replica's recent restarts, for its back-off: ``count`` restarts in a row, when its last
    pod's containers started and ended (monotonic seconds)."""

    def __init__(self) -> None:
        self.count = 0
        self.started: float | None = None
        self.ended: float | None = None

    def next_delay(self) -> float:
        """The wait of the restart about to happen: the count starts again after a long run."""
        if self.started is not None and self.ended is not None and self.ended - self.started >= BACKOFF_RESET:
            self.count = 0
        self.count += 1
        return restart_delay(self.count)


def _container_state(c: LocalContainer, initializing: bool, backoff: str | None = None) -> ContainerState:
    if c.exit_code is not None:
        if c.error:
            return ContainerState(c.name, "Terminated", c.exit_code, "ContainerCannotRun", c.error)
        return ContainerState(c.name, "Terminated", c.exit_code, "Completed" if c.exit_code == 0 else "Error")
    if c.proc is not None:
        return ContainerState(c.name, "Running")
    if backoff is not None:
        return ContainerState(c.name, "Waiting", None, "CrashLoopBackOff", backoff)
    return ContainerState(c.name, "Waiting", None, "PodInitializing" if initializing else "ContainerCreating")


def descendants(roots: list[int]) -> list[int]:
    """Every live descendant of ``roots`` (by parent pid), whatever session or group it is in."""
    children = procfs.children()
    out: list[int] = []
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def end_orphans(known: set[int]) -> list[str]:
    """Kill and reap this process's children that are not in ``known`` (the processes it started),
    with what each started: orphans reparented here, a child subreaper (:func:`.procfs.become_subreaper`),
    when the uncontained container whose command was their subreaper ended (a daemon that
    double-forked, called setsid and cleared its environment included). What a killed orphan
    started is reparented here in turn: looked for again, a bounded number of times. Returns
    ``PID (COMMAND)`` of each that was still running."""
    me = os.getpid()
    ended: list[str] = []
    for _ in range(20):
        orphans = [p for p in procfs.children().get(me, []) if p not in known]
        if not orphans:
            break
        for pid in orphans:
            if procfs.alive(pid):
                ended.append(f"{pid} ({procfs.comm(pid)})")
            signal_each([pid, *descendants([pid])], signal.SIGKILL)
            try:
                os.waitpid(pid, 0)  # a child of this process now: no zombie is left
            except ChildProcessError:
                pass
    return ended


def marked(markers: dict[str, str]) -> list[int]:
    """Processes whose environment holds every ``name=value`` of ``markers`` (a run's, a
    container's marker), wherever they are now; never this process."""
    entries = {f"{k}={v}".encode() for k, v in markers.items()}
    out = []
    for pid in procfs.pids():
        if pid != os.getpid():
            try:
                if entries <= procfs.environ(pid):
                    out.append(pid)
            except OSError:
                pass
    return out


def signal_each(pids: list[int], sig: signal.Signals) -> None:
    """Send ``sig`` to each of ``pids``; one gone or not ours is skipped."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _signal_groups(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def base_environment(python: str | os.PathLike[str] | None = None, shims: Path | None = None) -> dict[str, str]:
    """This process's environment with the directory of a Python first on PATH, so ``python``
    and ``torchrun`` in a command mean that interpreter: ``python`` (``--python``; its folder's
    other programs, a venv's ``deepspeed`` or ``colossalai``, come next), else the interpreter
    t9k-jobs runs in. ``shims``: a folder made by :func:`write_python_shims` for ``python``, put
    before it so ``python``, ``python3`` and ``torchrun`` name it whatever its folder holds."""
    env = dict(os.environ)
    bindir = str(Path(python).parent if python is not None else Path(sys.executable).parent)
    first = ([str(shims)] if shims is not None else []) + [bindir]
    env["PATH"] = os.pathsep.join([*first, env.get("PATH", "")])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


#: The commands a local run's ``--python`` stands for (torchrun as ``python -m torch.distributed.run``,
#: which is what torch's own ``torchrun`` script runs).
SHIMS = {"python": "", "python3": "", "torchrun": "-m torch.distributed.run "}


def write_python_shims(folder: Path, python: str | os.PathLike[str]) -> Path:
    """Write ``python``, ``python3`` and ``torchrun`` into ``folder`` (made, mode 0755): small
    scripts that exec ``python`` (an absolute path), so that a venv's interpreter keeps its venv
    (a symlink would not: Python finds ``pyvenv.cfg`` beside the path it was started by).
    Returns ``folder``. Raises ``OSError``."""
    import shlex

    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    for name, extra in SHIMS.items():
        path = folder / name
        path.write_text(f'#!/bin/sh\nexec {shlex.quote(str(python))} {extra}"$@"\n', encoding="utf-8")
        path.chmod(0o755)
    return folder


def check_python(python: str) -> str:
    """``python`` (``--python``) as an absolute path once it is an interpreter that starts: it must
    be an executable file that runs ``import sys`` and is Python 3. Raises ``ValueError`` with the
    reason (one line)."""
    import shutil
    import subprocess

    found = shutil.which(python) if "/" not in python else python
    if found is None or not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise ValueError(f"{python} is not an executable file")
    path = os.path.abspath(found)
    try:
        done = subprocess.run(
            [path, "-c", "import sys; print(sys.version_info[0])"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"{python} does not start: {exc}") from None
    if done.returncode != 0 or done.stdout.strip() != b"3":
        raise ValueError(f"{python} is not a Python 3 interpreter")
    return path
