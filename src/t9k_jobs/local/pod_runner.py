"""The seam under the local runtime (issue 44): how one replica pod runs on this machine.

The local runtime (:class:`t9k_jobs.local.runtime.LocalRunner`) is the kubelet's and the
operator's twin: it reconciles (the engine decides), keeps the run directory, hands out GPUs, backs
off restarts and says what happens. What it asks of a way to run replicas is two small interfaces,
as a kubelet asks a container runtime:

- :class:`PodRunner`: makes the :class:`ReplicaPod` of a pod manifest the engine created, and owns
  what the run's pods share (:meth:`PodRunner.begin`, :meth:`PodRunner.kill_all`,
  :meth:`PodRunner.close`);
- :class:`ReplicaPod`: starts, watches (:meth:`ReplicaPod.observe`: the engine's
  :class:`~t9k_jobs.engine.ObservedPod`), stops (:meth:`ReplicaPod.terminate`: SIGTERM, the grace
  period, SIGKILL) and reaps one replica; its processes are what ``--inject`` and the stack dumps
  signal.

:class:`ProcessRunner` is the first implementation: each container a process group, in namespaces
of its own where the machine allows (:mod:`.processes`, :mod:`.sandbox`, :mod:`.volumes`). Another
way (a container engine running the replica's image) is one more class with these methods; the
engine and the run directory code do not change. The parts are handed in, not inherited (as
JobSet's controllers are built).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from ..engine import Event, ObservedPod
from .ownership import write_atomic
from .processes import RUN_ENV, LineSink, LocalPod, end_orphans, marked
from .procfs import become_subreaper
from .rundir import RunDir
from .sandbox import Sandbox
from .volumes import make_shm_dir, remove_shm_dir, uses_memory
from .watchdog import start_watchdog


class ReplicaPod(Protocol):
    """One replica pod as a :class:`PodRunner` runs it: what the local runtime reads and asks."""

    uid: str
    #: The pod as the engine made it (its containers' env gets their GPUs before :meth:`start`).
    manifest: dict[str, Any]
    #: Being stopped (:meth:`terminate` was called).
    deleting: bool
    #: While the pod waits out a restart back-off: the message its containers wait with.
    backoff: str | None
    #: Runs the pod from :meth:`start` until every process of it has ended and is reaped.
    task: asyncio.Task[None] | None

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> dict[str, str]: ...

    @property
    def grace_seconds(self) -> float:
        """Seconds between SIGTERM and SIGKILL when it is stopped (``terminationGracePeriodSeconds``)."""
        ...

    def observe(self) -> ObservedPod:
        """The pod as the engine reads it (phase, containers' states and exit codes, times)."""
        ...

    def start(self) -> None:
        """Start its containers (init containers first) on the running event loop: :attr:`task`."""
        ...

    async def terminate(self) -> None:
        """Stop it as the kubelet deletes a pod: SIGTERM, its grace period, SIGKILL; returns once
        nothing of it runs."""
        ...

    def pids(self) -> list[int]:
        """The live main process of each running container (shown, waited for at a stop)."""
        ...

    def processes(self) -> list[int]:
        """Every live process of the pod, descendants included (``--inject``, stack dumps)."""
        ...

    def kill(self) -> None:
        """SIGKILL every process of it now (a second stop signal)."""
        ...


class PodRunner(Protocol):
    """How a local run runs its replica pods (module docstring)."""

    def begin(self) -> None:
        """The run starts (its event loop runs): whatever keeps the pods from outliving it."""
        ...

    def make(self, manifest: dict[str, Any], address: str, own_objects: dict[tuple[str, str], Path]) -> ReplicaPod:
        """The replica pod of ``manifest`` (not started). ``address``: the replica's own loopback
        address, where its host name resolves; ``own_objects``: the job's ConfigMaps and Secrets,
        ``(kind, name)`` -> the folder holding their keys, which its volumes may mount."""
        ...

    def helper(self, pid: int) -> None:
        """``pid`` is a process of the run that is no replica (its TensorBoard): not an orphan."""
        ...

    def kill_all(self) -> None:
        """SIGKILL whatever any replica of the run started that still runs, escaped ones too."""
        ...

    def close(self) -> None:
        """The run ends (its pods have ended): release what the pods shared."""
        ...


class ProcessRunner:
    """Replica pods as process groups on this machine (:class:`~.processes.LocalPod`), contained
    by ``sandbox`` where the machine allows.

    ``base_env``: every container's environment before its own, carrying the run's marker
    (:data:`~.processes.RUN_ENV`: how a sweep, the watchdog and a user tell the run's processes);
    ``default_dir``: the working directory of a container that names none; ``run_dir``: where each
    container's log goes; ``volumes``: ``--volume``, claim name -> folder; ``sink``: every line of
    output; ``on_change``: a container started or ended; ``on_fatal``: the run cannot go on;
    ``on_event``: what the runner has to say (processes left behind); ``on_error``: one line when
    something a pod needs cannot be made (the run's ``/dev/shm`` folder)."""

    def __init__(
        self,
        *,
        sandbox: Sandbox,
        base_env: dict[str, str],
        default_dir: Path,
        run_dir: Path,
        volumes: dict[str, Path],
        sink: LineSink,
        on_change: Callable[[], None],
        on_fatal: Callable[[str], None],
        on_event: Callable[[Event], None],
        on_error: Callable[[str], None],
    ) -> None:
        self.sandbox = sandbox
        self.base_env = base_env
        self.default_dir = default_dir
        self.run_dir = run_dir
        self.volumes = volumes
        self.sink = sink
        self.on_change = on_change
        self.on_fatal = on_fatal
        self.on_event = on_event
        self.on_error = on_error
        #: The run's own folder under /dev/shm, made when a pod first has a Memory emptyDir.
        self.shm: Path | None = None
        #: The processes the run started that are no containers (the watchdog, TensorBoard), and
        #: every container process started: a child of this process that is none of these was
        #: orphaned by an uncontained container and reparented here (:meth:`_sweep_orphans`).
        self.helpers: set[int] = set()
        self.started: set[int] = set()
        self.subreaper = False
        self.pods: list[LocalPod] = []
        self._watchdog: Any = None

    def begin(self) -> None:
        """Adopt what an uncontained container orphans (only where the sandbox has no PID
        namespace; only a runtime that runs, its process its own: a runner embedded in another
        program never touches that program's children), and start the watchdog that ends every
        replica process if this process dies (:func:`~.watchdog.start_watchdog`)."""
        if not self.sandbox.pids:
            self.subreaper = become_subreaper()
        self._watchdog = start_watchdog(self.base_env[RUN_ENV])
        self.helpers.add(self._watchdog.pid)

    #: The pod it makes of a manifest: a subclass that starts containers another way makes its own
    #: (:class:`~.podman.PodmanRunner`), given what it needs in :meth:`_made`.
    pod_class: type[LocalPod] = LocalPod

    def make(self, manifest: dict[str, Any], address: str, own_objects: dict[tuple[str, str], Path]) -> LocalPod:
        pod = self.pod_class(
            manifest=manifest,
            base_env=self.base_env,
            default_dir=self.default_dir,
            log_dir=self.run_dir,
            sink=self.sink,
            on_change=self.on_change,
            on_fatal=self.on_fatal,
            sandbox=self.sandbox,
            address=address,
            volume_map=self.volumes,
            sweep_orphans=self._sweep_orphans,
            shm=self._shm_dir() if uses_memory(manifest) else None,
            own_objects=own_objects,
        )
        self._made(pod)
        self.pods = [p for p in self.pods if p.task is None or not p.task.done()] + [pod]
        return pod

    def _made(self, pod: LocalPod) -> None:
        """A pod was made (:meth:`make`): what a subclass gives its pods."""

    def helper(self, pid: int) -> None:
        self.helpers.add(pid)

    def kill_all(self) -> None:
        for pid in marked({RUN_ENV: self.base_env[RUN_ENV]}):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        """Whatever still carries the run's marker escaped its replica's tree (reparented when its
        parent ended): it goes with the run. The run's /dev/shm folder goes (emptied by the pods
        as they ended, unless they could not), then the watchdog."""
        self.kill_all()
        if self.shm is not None:
            remove_shm_dir(self.shm)
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait()

    def _sweep_orphans(self, who: str) -> None:
        """End what the uncontained container ``who`` left running (:func:`~.processes.end_orphans`),
        said in one Warning event, as a pod's end ends its PID namespace. Only once :meth:`begin`
        made this process a subreaper: every child it has is then one it started or adopted."""
        if not self.subreaper:
            return
        self.started.update(c.proc.pid for pod in self.pods for c in pod.init + pod.main if c.proc is not None)
        ended = end_orphans(self.started | self.helpers)
        if ended:
            self.on_event(Event(
                "Warning", "LeftoverProcesses",
                f"{who} left {len(ended)} process(es) running after it ended, ended now (no PID namespace "
                f"here ends them): {', '.join(ended[:10])}" + (" ..." if len(ended) > 10 else ""),
            ))  # fmt: skip

    def _shm_dir(self) -> Path | None:
        """The run's own folder under ``/dev/shm`` (:func:`~.volumes.make_shm_dir`), made at its
        first use and named in the run dir (``shm.path``: the watchdog removes it if this process
        dies); None, said once, when it cannot be made (the pod's Memory emptyDir then fails it)."""
        if self.shm is None:
            try:
                self.shm = make_shm_dir()
                write_atomic(RunDir(self.run_dir).shm, f"{self.shm}\n", mode=0o600)
            except OSError as exc:
                self.on_error(f"cannot make a folder under /dev/shm for Memory emptyDirs: {exc.strerror or exc}")
                return None
        return self.shm


__all__ = ["PodRunner", "ProcessRunner", "ReplicaPod"]
