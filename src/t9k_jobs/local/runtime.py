"""``t9k-jobs run``: carry out the engine's plans with processes on this machine.

The local twin of the operator's reconcile loop: snapshot the pods, call :func:`t9k_jobs.engine.reconcile`,
start and stop process groups as the plan says, store the new status (and lost attempts), and go
round again when a process ends, the manifest file changes, the plan asks, or half a second passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from ..addressing import replica_prefix
from ..api import Job, ManifestError, fixed_field_changes
from ..api.common import TERMINAL_PHASES
from ..api.created import as_created
from ..engine import Event, Observed, Plan, Runtime, desired_hash_of, reconcile, restart_attempt_label
from ..engine.progress import NO_PROGRESS
from ..frameworks import load_manifest, parse_job
from ..frameworks.base import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from ..render import to_yaml
from ..sshkeys import materialize
from .addressing import LocalAddressing, write_child_files
from .checks import SSHD_PRIVSEP_DIR, cannot_run_reason, prepare_host, start_notes
from .display import Display
from .edits import manifest_doc, merge_edit, read_copy, rewrite_job, without_status, write_copy
from .gpus import GpuAllocator, GpuInventory, set_visible_devices
from .injector import Injection, Injector
from .launch import LocalLauncher
from .lost import LostAttempts
from .ownership import StopNote, dir_lock, working_dir, write_atomic
from .pod_runner import PodRunner, ProcessRunner, ReplicaPod
from .podman import PodmanRunner
from .processes import RUN_ENV, Crashes, base_environment, write_python_shims
from .rundir import (
    RunDir,
    RunDirError,
    RunOptions,
    already_running,
    make_run_dir,
    new_default_run_dir,
    publish_runtime,
    write_run_info,
    write_status,
)
from .sandbox import Sandbox, SandboxError, detect
from .stacks import dump_replicas
from .tensorboard import INSTALL_HINT as TB_HINT
from .tensorboard import LocalTensorBoard
from .tensorboard import available as tensorboard_available
from .volumes import tensorboard_folders

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2
EXIT_INTERRUPTED = 130
#: Seconds a finished job's replicas that still run get to end by themselves before the run stops them.
END_GRACE = 5.0
#: Signals that stop a run: Ctrl-C, a kill, a closed terminal or dropped ssh session, Ctrl-\\.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def run_job(job: Job, options: RunOptions, run_dir: Path | None = None, quiet: bool = False) -> int:
    """Run ``job`` here until it finishes or is interrupted; return the process exit code.

    ``options``: what ``run`` was asked besides the job, checked once
    (:func:`t9k_jobs.local.options.run_options`): the file the job was read from (its edits are
    followed when ``watch``; ``None`` when it came from standard input), the GPUs replicas get
    (``--gpus``; default: this machine's, discovered when a replica first asks for one), the folder
    of each claim (or foreign configMap or secret) the pods mount (``--volume``: :mod:`.volumes`),
    ``--python`` (the interpreter ``python``, ``python3`` and ``torchrun`` mean), ``--inject``
    (:mod:`.inject`) and ``--ttl`` (:mod:`.prune`). 0 when the job Succeeded, 1 when it Failed or
    when a run of the same job is running in the same runs dir (the run dir's parent;
    AlreadyExists, unless ``allow_duplicate``), 2 when it cannot run here, 130 (143) when stopped by
    SIGINT (SIGTERM). Logs go to ``run_dir`` (default ``./t9k-runs/<job>-<time>``):
    ``<pod>.<container>.log`` per container, ``job.log`` interleaved, ``status.yaml``,
    ``events.log`` and ``objects.yaml`` (the non-pod objects the operator would create);
    ``manifest.yaml`` is the run's own copy of the manifest (:mod:`t9k_jobs.local.edits`). Each
    container runs in namespaces of its own where the machine allows (:mod:`.sandbox`). A status
    the job carries is not read: a run starts anew.
    """
    gpus = options.gpus if options.gpus is not None else GpuInventory.discovered()  # probed once, when first asked
    options = dataclasses.replace(options, gpus=gpus)
    manifest = options.manifest
    job = _anew(job)
    display = Display(quiet=quiet)
    try:
        sandbox = detect()
    except SandboxError as exc:
        display.error(str(exc))
        return EXIT_CANNOT_RUN
    reason = cannot_run_reason(job, gpus, options.volumes, sandbox, options.python, options.container_engine)
    if reason is not None:
        display.error(reason)
        return EXIT_CANNOT_RUN
    for line in start_notes(job, options.volumes):
        display.note(line)
    user_doc = manifest_doc(manifest) if manifest is not None else None
    try:
        run_dir = make_run_dir(run_dir) if run_dir is not None else new_default_run_dir(job)
    except RunDirError as exc:
        display.error(str(exc))
        return EXIT_CANNOT_RUN
    return _start(job, run_dir, options, display, sandbox, user_doc, copy_written=False)


def run_prepared(run_dir: Path) -> int:
    """Run the run that ``run -d``'s parent prepared in ``run_dir``
    (:func:`t9k_jobs.local.rundirs.start_detached`; ``python -m t9k_jobs.local RUN_DIR``): the job
    is the run's own copy of its manifest (``manifest.yaml``), its options ``options.json``
    (:class:`~t9k_jobs.local.rundir.RunOptions`), both parsed and checked by the parent. Quiet;
    exit codes as :func:`run_job`'s."""
    display = Display(quiet=True)
    files = RunDir(run_dir)
    try:
        options = RunOptions.read(run_dir)
        doc = read_copy(run_dir)
        if doc is None:
            raise ValueError(f"{files.copy} holds no job")
        job = _anew(parse_job(doc, str(files.copy)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        display.error(f"cannot run the run prepared in {run_dir}: {getattr(exc, 'strerror', None) or exc}")
        return EXIT_CANNOT_RUN
    try:
        sandbox = detect()
    except SandboxError as exc:
        display.error(str(exc))
        return EXIT_CANNOT_RUN
    user_doc = doc if options.manifest is not None else None
    return _start(job, run_dir.resolve(), options, display, sandbox, user_doc, copy_written=True)


def _anew(job: Job) -> Job:
    """``job`` without what the API server sets: a saved job starts anew (the CLI says so once)."""
    doc, dropped = as_created(job.dump())
    return parse_job(doc, f"{job.kind}/{job.name}") if dropped else job


def _start(
    job: Job,
    run_dir: Path,
    options: RunOptions,
    display: Display,
    sandbox: Sandbox,
    user_doc: dict[str, Any] | None,
    copy_written: bool,
) -> int:
    """Publish this process as the runtime of the run in ``run_dir`` (made, checked) and run it
    (:func:`run_job`, :func:`run_prepared`); ``copy_written``: the run's copy of its manifest is
    there already."""
    files = RunDir(run_dir)
    manifest = options.manifest
    try:
        # One job, one run: the check and the start are one step (the runtimes take turns on the lock).
        with dir_lock(run_dir.parent):
            if not options.allow_duplicate:
                taken = already_running(run_dir.parent, job.kind, job.name)
                if taken is not None:
                    with contextlib.suppress(OSError):
                        if not any(run_dir.iterdir()):
                            run_dir.rmdir()
                    display.error(taken)
                    return EXIT_FAILED
            # What the verbs read (t9k_jobs.local.rundir): this runtime's pid, locked for as long as
            # it lives (published first: a run dir with a job is never without it), the job as it
            # started, the run's own copy of the manifest, and last the run's identity (run.json),
            # which makes the run visible to the verbs with everything they read in place.
            pid_lock = publish_runtime(run_dir)
            files.job.write_text(to_yaml([job.dump()]), encoding="utf-8")
            if not copy_written:
                write_copy(run_dir, user_doc if user_doc is not None else without_status(job))
            if options.watch and manifest is not None:
                # The user's file whose edits this run follows (merged into its copy).
                files.watched.write_text(f"{manifest.resolve()}\n", encoding="utf-8")
            write_run_info(run_dir, job, time.time(), options.ttl)
    except OSError as exc:
        display.error(f"cannot write in {run_dir}: {exc.strerror or exc}")
        return EXIT_CANNOT_RUN
    # pid_lock stays open until this process exits: the kernel drops the lock as the process
    # ends, so "nobody holds it" means the runtime is gone, not about to go.
    runner = LocalRunner(
        job,
        manifest,
        run_dir,
        display,
        options.watch,
        options.gpus if options.gpus is not None else GpuInventory.discovered(),
        user_doc=user_doc,
        volumes=options.volumes,
        sandbox=sandbox,
        python=options.python,
        injections=options.injections,
        container_engine=options.container_engine,
    )
    runner.pid_lock = pid_lock
    return asyncio.run(runner.run())


class LocalRunner:
    """The reconcile loop over local process groups (see the module docstring)."""

    def __init__(
        self,
        job: Job,
        manifest: Path | None,
        run_dir: Path,
        display: Display,
        watch: bool,
        gpus: GpuInventory | None = None,
        user_doc: dict[str, Any] | None = None,
        volumes: dict[str, Path] | None = None,
        sandbox: Sandbox | None = None,
        python: str | None = None,
        injections: tuple[Injection, ...] = (),
        pod_runner: PodRunner | None = None,
        container_engine: str | None = None,
    ) -> None:
        """``pod_runner``: how the replicas run (:mod:`.pod_runner`); default: a
        :class:`~.pod_runner.ProcessRunner` in ``sandbox`` (default: none) with ``volumes``, or
        with ``container_engine`` (``--container-engine``) a :class:`~.podman.PodmanRunner`."""
        self.job = job
        #: ``--inject``: the failures to make happen, and what they did to the pods.
        self.injector = Injector(injections)
        #: ``--volume``: the folder of each claim (or foreign configMap or secret) pods mount.
        self.volumes = dict(volumes or {})
        #: How containers are contained (:mod:`.sandbox`): namespaces where the machine allows.
        self.sandbox = sandbox if sandbox is not None else Sandbox("none")
        self.python = python
        self.tensorboard: LocalTensorBoard | None = None
        # Every pod takes GPUs of its own when it starts and gives them back when its processes
        # end; a pod whose GPUs are still held by one being stopped waits (Pending) for them.
        self.gpus = GpuAllocator(gpus if gpus is not None else GpuInventory.discovered())
        self.gpu_waiting: dict[str, ReplicaPod] = {}  # by pod UID
        # Restarts back off as the kubelet's do (CrashLoopBackOff): per replica, and the pods
        # waiting out their back-off (by pod UID) with the timer that starts them.
        self.crashes: dict[str, Crashes] = {}
        self.backing_off: dict[str, asyncio.TimerHandle] = {}
        self.manifest = manifest.resolve() if manifest is not None else None
        self.run_dir = run_dir
        self.display = display
        self.watch = watch and self.manifest is not None
        self.addressing = LocalAddressing(run_dir.resolve())
        # What the engine decides for: this machine's addressing and launcher, the default gang mode, no
        # queue, no drain (no PodDisruptionBudget); without the tensorboard package no TensorBoard.
        unserved = frozenset({"PodDisruptionBudget"} | (set() if tensorboard_available() else {"TensorBoard"}))
        # A node here is lost only by --inject node-lost, which loses it at once: no limit to wait.
        self.runtime = Runtime(
            self.addressing, LocalLauncher(), unserved=unserved, unserved_hint=TB_HINT, node_lost_after=0.0, one_node=True
        )
        self.pods: dict[str, ReplicaPod] = {}
        self.others: set[tuple[str, str]] = set()
        self.objects: list[dict[str, Any]] = []
        # Every process of the run carries its run directory: how a sweep (and a user) tells this
        # run's processes, the ranks its launchers start included, from anything else.
        # --python: python, python3 and torchrun mean it (small scripts in <run dir>/bin).
        shims = write_python_shims(RunDir(run_dir).bin, python) if python is not None else None
        self.base_env = {**base_environment(python, shims), RUN_ENV: str(run_dir.resolve())}
        self.container_engine = container_engine
        make_runner = ProcessRunner if container_engine is None else functools.partial(PodmanRunner, engine=container_engine)
        self.pod_runner: PodRunner = pod_runner or make_runner(
            sandbox=self.sandbox, base_env=self.base_env,
            default_dir=self.manifest.parent if self.manifest is not None else working_dir(),
            run_dir=run_dir, volumes=self.volumes, sink=self._line, on_change=self._changed,
            on_fatal=self._fatal, on_event=self._event, on_error=self.display.error,
        )  # fmt: skip
        self.wake = asyncio.Event()
        self.stop_signal: int | None = None
        self.mtime = self._mtime()
        # The user's manifest as this run last read it: the base of the merge of their next edit.
        self.user_base = user_doc
        self.copy_path = RunDir(run_dir).copy
        self.copy_sig = self._signature(self.copy_path)
        # The run dir as it was when the run started: one removed or moved stops the run.
        try:
            st = os.stat(run_dir)
            self.run_dir_ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            self.run_dir_ident = None
        self.deletions: set[asyncio.Task[None]] = set()
        self.finished_at: float | None = None
        self.fatal: str | None = None
        # Why the run stopped before its job finished, if it does: space reserved now (a full disk).
        self.stop_note = StopNote(RunDir(run_dir).stopped)
        self.lost = LostAttempts(run_dir, self._fatal)
        self.job_log = open(RunDir(run_dir).job_log, "a", encoding="utf-8")  # noqa: SIM115 - closed in run()
        self.events_log = open(RunDir(run_dir).events, "a", encoding="utf-8")  # noqa: SIM115

    def _mtime(self) -> tuple[int, int, int] | None:
        return self._signature(self.manifest) if self.manifest is not None else None

    @staticmethod
    def _signature(path: Path) -> tuple[int, int, int] | None:
        """What tells a file changed: (modification time in ns, size, inode); None when absent."""
        try:
            st = path.stat()
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _check_run_dir(self) -> None:
        """Stop the run when its run dir was removed or moved: its status, logs and pid file are
        gone with it, so no verb could see or stop it, and its replicas would run on unseen."""
        if self.run_dir_ident is None or self.fatal is not None:
            return
        try:
            st = os.stat(self.run_dir)
            same = (st.st_dev, st.st_ino) == self.run_dir_ident
        except FileNotFoundError:
            same = False
        except OSError:
            return
        if not same:
            self._fatal(f"the run dir {self.run_dir} was removed or moved while the job ran")

    def _changed(self) -> None:
        self.wake.set()

    #: Whether a flush of job.log is scheduled for the end of this turn of the event loop.
    job_log_flush_due = False
    #: The descriptor holding this runtime's lock on runtime.pid (kept until the process exits).
    pid_lock: int | None = None

    def _line(self, pod: str, container: str, lines: bytes) -> None:
        """The sink of every container's output: ``lines`` (UTF-8, one or more lines joined by
        ``b"\\n"``, see ``LineSink``) go to job.log as ``[prefix] line``, one block at a time, and
        to the display."""
        pod_obj = self.pods.get(pod)
        several = pod_obj is not None and len(pod_obj.manifest["spec"]["containers"]) > 1
        prefix = replica_prefix(self.job.name, pod, container if several else None)
        tag = f"[{prefix}] ".encode()
        try:
            # Bytes through the text file's buffer: the lines are UTF-8 already, and only this
            # method writes job.log. Flushed once per turn of the event loop, not per line.
            self.job_log.buffer.write(tag + lines.replace(b"\n", b"\n" + tag) + b"\n")
        except OSError as exc:
            self._fatal(f"cannot write {self.job_log.name}: {exc.strerror or exc}")
        self._flush_job_log_soon()
        self.display.log(prefix, lines.decode("utf-8", errors="replace"))

    def _flush_job_log_soon(self) -> None:
        """Flush job.log at the end of this turn of the event loop: the blocks that several
        containers' reads brought in one turn go out in one write, and job.log can be read
        while the run goes on (it is complete once the run has closed it)."""
        if self.job_log_flush_due:
            return
        try:
            asyncio.get_running_loop().call_soon(self._flush_job_log)
            self.job_log_flush_due = True
        except RuntimeError:  # no loop (a direct call): flush now
            self._flush_job_log()

    def _flush_job_log(self) -> None:
        self.job_log_flush_due = False
        if self.job_log.closed:
            return
        try:
            self.job_log.buffer.flush()
        except OSError as exc:
            self._fatal(f"cannot write {self.job_log.name}: {exc.strerror or exc}")

    def _fatal(self, message: str) -> None:
        """The run cannot go on (its directory cannot be written): stop every replica, exit 1."""
        if self.fatal is None:
            self.fatal = message
            self.display.error(f"{message}; stopping the run")
            self.stop_note.write(f"the runtime stopped the run: {message}")
        self.wake.set()

    def _on_signal(self, signum: int) -> None:
        """The first SIGINT/SIGTERM/SIGHUP/SIGQUIT stops every replica gracefully (SIGTERM, then
        SIGKILL after its grace period); a second one kills them at once."""
        if self.stop_signal is None:
            self.stop_signal = signum
            self.stop_note.write(f"stopped by {signal.Signals(signum).name} (t9k-jobs delete, Ctrl-C or a kill)")
            self.display.note(
                f"received {signal.Signals(signum).name}: stopping every replica (again to kill them at once)"
            )
        else:
            self.display.note(f"received {signal.Signals(signum).name} again: killing every replica now")
            self._kill_now()
        self.wake.set()

    def _kill_now(self) -> None:
        for pod in self.pods.values():
            pod.kill()
        self.pod_runner.kill_all()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)
        self.pod_runner.begin()
        self.display.start(self.job, self.run_dir)
        if self.container_engine is not None:
            self.display.note(f"replicas run in their images ({self.container_engine}, host network)")
        elif self.sandbox.kind != "bwrap":
            self.display.note(f"replicas run {self.sandbox.describe()}")
        try:
            prepare_host(self.job)
        except OSError as exc:
            self._fatal(f"cannot make {SSHD_PRIVSEP_DIR}, which each worker's sshd needs: {exc.strerror or exc}")
        try:
            return await self._loop()
        finally:
            await self._teardown()
            if self.tensorboard is not None:
                self.tensorboard.stop()
            self.pod_runner.close()
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)
            self.display.stop(self.job)
            self.stop_note.discard()
            for log in (self.job_log, self.events_log):
                with contextlib.suppress(OSError):  # a full disk was reported already
                    log.close()

    async def _loop(self) -> int:
        while True:
            if self.stop_signal is not None:
                return EXIT_INTERRUPTED if self.stop_signal == signal.SIGINT else 128 + self.stop_signal
            self._check_run_dir()
            if self.fatal is not None:
                return EXIT_FAILED
            self._reload_manifest()
            self._inject()
            plan = reconcile(self.job, self._observe(), time.time(), self.runtime)
            try:
                self._apply(plan)
            except OSError as exc:  # status, events or objects could not be written
                self._fatal(f"cannot write in {self.run_dir}: {exc.strerror or exc}")
                continue
            if plan.finished and not self.deletions and self.job.status is not None:
                if self.job.status.phase in TERMINAL_PHASES and not self._ending_together():
                    return EXIT_SUCCEEDED if self.job.status.phase == "Succeeded" else EXIT_FAILED
            self.wake.clear()
            timeout = 0.5 if plan.requeue_after is None else max(0.01, min(0.5, plan.requeue_after))
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=timeout)
            except asyncio.TimeoutError:
                pass

    def _ending_together(self) -> bool:
        """Whether to wait a moment before leaving: replicas still running when the job ended get
        :data:`END_GRACE` seconds to end by themselves (ranks of one job end together, a moment
        apart), so that their status shows how they ended rather than being stopped."""
        if self.finished_at is None:
            self.finished_at = time.monotonic()
        running = any(not p.observe().terminal for p in self.pods.values() if not p.deleting)
        return running and time.monotonic() - self.finished_at < END_GRACE

    def _inject(self) -> None:
        """Fire the ``--inject`` failures whose time has come (:class:`.injector.Injector`), each
        said in an ``Injected`` event; the engine then acts on them as on the real thing."""
        phase = self.job.status.phase if self.job.status is not None else None
        for line in self.injector.fire(phase, self.job.name, self.pods, time.time()):
            self._event(Event("Warning", "Injected", line))

    def _observe(self) -> Observed:
        tb = self.tensorboard
        served = tb is not None and tb.ready()
        return Observed(
            pods={name: self.injector.observe(pod) for name, pod in self.pods.items()},
            unreachable_nodes=self.injector.unreachable(self.pods.values()),
            others=frozenset(self.others),
            desired_hashes={(o["kind"], o["metadata"]["name"]): desired_hash_of(o) for o in self.objects},
            ready=frozenset({("TensorBoard", tb.name)}) if tb is not None and served else frozenset(),
            served_at={("TensorBoard", tb.name): tb.url} if tb is not None and served else {},
        )

    def _start_tensorboard(self, obj: dict[str, Any]) -> None:
        """Serve the job's TensorBoard (:mod:`.tensorboard`) over its folders on this machine; the
        loop looks again until it answers. A TensorBoard that cannot start is said once."""
        folders, _problems = tensorboard_folders(self.job, self.volumes)  # checked before the run
        tb = LocalTensorBoard(obj["metadata"]["name"], folders, self.run_dir, dict(self.base_env))
        try:
            tb.start()
        except OSError as exc:
            self.display.error(f"cannot start TensorBoard: {exc.strerror or exc}")
            return
        self.tensorboard = tb
        if tb.proc is not None:
            self.pod_runner.helper(tb.proc.pid)
        self.display.note(f"TensorBoard {tb.name}: {tb.url} (serving {', '.join(map(str, folders))})")

    def _apply(self, plan: Plan) -> None:
        # A job that made no progress: said first, then its replicas' stacks, before anything ends them.
        said = [e for e in plan.events if e.reason == NO_PROGRESS] if plan.dump_stacks else []
        for event in said + dump_replicas(self.pods, plan, self.run_dir):
            self._event(event)
        made_objects = False
        for obj in plan.create:
            kind, name = obj["kind"], obj["metadata"]["name"]
            if kind == "Pod":
                self._start_pod(obj)
            else:
                if kind == "TensorBoard" and self.tensorboard is None:
                    self._start_tensorboard(obj)
                self.others.add((kind, name))
                made = materialize(obj)
                self.objects.append(made)
                write_child_files(self.addressing, made)
                made_objects = True
        for obj in plan.update:  # the desired content of a child: its files are written again
            key = (obj["kind"], obj["metadata"]["name"])
            made = materialize(obj)
            self.objects = [made if (o["kind"], o["metadata"]["name"]) == key else o for o in self.objects]
            write_child_files(self.addressing, made)
            made_objects = True
        for delete in plan.delete:
            if delete.kind != "Pod" and (delete.kind, delete.name) in self.others:
                self.others.discard((delete.kind, delete.name))
                self.objects = [o for o in self.objects if (o["kind"], o["metadata"]["name"]) != (delete.kind, delete.name)]
                made_objects = True
        if made_objects:
            write_atomic(RunDir(self.run_dir).objects, to_yaml(self.objects))
        for delete in plan.delete:
            pod = self.pods.get(delete.name)
            if delete.kind != "Pod" or pod is None or pod.deleting or (delete.uid and pod.uid != delete.uid):
                continue
            task = asyncio.get_running_loop().create_task(self._delete(pod))
            self.deletions.add(task)
            task.add_done_callback(self.deletions.discard)
        self.lost.add(plan.lost)
        for event in plan.events:
            if event not in said:
                self._event(event)
        old = self.job.status.dump() if self.job.status is not None else None
        if plan.status.dump() != old:
            self.job = self.job.model_copy(update={"status": plan.status})
            # Whole or not at all: a reader never sees half a status. status.json is the same
            # status for `get` over many runs (JSON reads ten times faster than YAML), valid only
            # for the status.yaml it names (a status.yaml changed by anyone else is read instead).
            write_status(self.run_dir, plan.status.dump())
        self.display.update(self.job, self.pods)

    def _address(self, pod: dict[str, Any]) -> str:
        """The replica's own loopback address (:meth:`LocalAddressing.own_address`), where its host
        name resolves inside its namespaces."""
        labels = pod["metadata"].get("labels") or {}
        index = int(labels.get(LABEL_REPLICA_INDEX, "0"))
        return self.addressing.own_address(self.job.name, str(labels.get(LABEL_REPLICA_TYPE, "")), index)

    def _event(self, event: Event) -> None:
        """Write ``event`` to ``events.log`` and show it. Raises ``OSError``."""
        self.events_log.write(f"{time.strftime('%H:%M:%S')} {event.type} {event.reason}: {event.message}\n")
        self.events_log.flush()
        self.display.event(event)

    def _start_pod(self, manifest: dict[str, Any]) -> None:
        own_objects = {
            (o["kind"], o["metadata"]["name"]): Path(self.addressing.child_file(o["kind"], o["metadata"]["name"], "-") or "").parent
            for o in self.objects
            if o["kind"] in ("ConfigMap", "Secret")
        }
        # A copy: its containers' env gets their GPUs at start.
        pod = self.pod_runner.make(copy.deepcopy(manifest), self._address(manifest), own_objects)
        self.pods[pod.name] = pod
        crashes = self.crashes.setdefault(pod.name, Crashes())
        attempt = restart_attempt_label(pod.labels) or 0
        delay = crashes.next_delay() if attempt > 0 else 0.0
        if delay > 0:
            at = time.strftime("%H:%M:%S", time.localtime(time.time() + delay))
            pod.backoff = f"back-off {delay:g}s restarting failed {pod.name}: next start at {at}"
            self.display.note(f"{pod.name}: {pod.backoff}")
            self.backing_off[pod.uid] = asyncio.get_running_loop().call_later(delay, self._backed_off, pod)
            return
        self._start_or_wait(pod)

    def _backed_off(self, pod: ReplicaPod) -> None:
        """``pod``'s back-off is over: it starts, unless it was deleted meanwhile."""
        self.backing_off.pop(pod.uid, None)
        pod.backoff = None
        if pod.deleting or self.pods.get(pod.name) is not pod or self.stop_signal is not None:
            return
        self._start_or_wait(pod)
        self.wake.set()

    def _start_or_wait(self, pod: ReplicaPod) -> None:
        """Start ``pod``, or have it wait for its GPUs (held by pods still stopping)."""
        if not self._start_with_gpus(pod):
            self.gpu_waiting[pod.uid] = pod
            held = ", ".join(
                f"{p.name} ({','.join(g.id for g in self.gpus.held.get(p.uid, ()))})"
                for p in self.pods.values()
                if p.uid in self.gpus.held
            )
            self.display.note(f"{pod.name} waits for its GPUs, held by {held or 'pods still stopping'}")

    def _start_with_gpus(self, pod: ReplicaPod) -> bool:
        """Start ``pod`` with GPUs of its own in its containers' env; False when too few are free
        now (the GPUs of a pod being stopped: it waits for them)."""
        assignment = self.gpus.assign(pod.uid, pod.manifest["spec"])
        if assignment is None:
            return False
        set_visible_devices(pod.manifest, assignment)
        pod.start()
        assert pod.task is not None
        crashes = self.crashes.setdefault(pod.name, Crashes())
        crashes.started, crashes.ended = time.monotonic(), None
        pod.task.add_done_callback(lambda _task, pod=pod: self._gpus_released(pod))
        pod.task.add_done_callback(lambda _task, c=crashes: setattr(c, "ended", time.monotonic()))
        return True

    def _gpus_released(self, pod: ReplicaPod) -> None:
        """``pod``'s processes have all ended: its GPUs go back, and pods that waited for GPUs
        start if the job goes on."""
        if not self.gpus.release(pod.uid):
            return
        ending = self.stop_signal is not None or self.fatal is not None or self.finished_at is not None
        if self.job.status is not None and self.job.status.phase in TERMINAL_PHASES:
            ending = True
        for uid, waiting in list(self.gpu_waiting.items()):
            gone = waiting.deleting or self.pods.get(waiting.name) is not waiting
            if ending or gone or self._start_with_gpus(waiting):
                del self.gpu_waiting[uid]
        self.wake.set()

    async def _delete(self, pod: ReplicaPod) -> None:
        self.gpu_waiting.pop(pod.uid, None)  # one that never started has nothing to stop
        timer = self.backing_off.pop(pod.uid, None)
        if timer is not None:
            timer.cancel()
        await pod.terminate()
        if self.pods.get(pod.name) is pod:
            del self.pods[pod.name]
        self.wake.set()

    def _reload_manifest(self) -> None:
        """Apply an edit of the run's manifest copy (pause, resume, scale, or a user's edit of the
        copy: the local ``kubectl edit``), keeping the status; first merge into the copy what the
        user changed in their own file since the run last read it (when it follows that file)."""
        if self.watch and self.manifest is not None:
            self._merge_user_edit()
        sig = self._signature(self.copy_path)
        if sig == self.copy_sig or sig is None:
            return
        self.copy_sig = sig
        try:
            new = load_manifest(self.copy_path)
        except ManifestError as exc:
            for line in exc.lines():
                self.display.error(f"{line} (edit ignored; the job goes on with the previous spec)")
            return
        if new.dump().get("spec") == self.job.dump().get("spec"):
            return
        if new.kind != self.job.kind or new.name != self.job.name:
            self.display.error("the edited manifest names another job; edit ignored")
            return
        for problem in fixed_field_changes(self.job, new):
            self.display.error(f"{problem} (edit ignored; the job goes on with the previous spec)")
            return
        reason = cannot_run_reason(new, self.gpus.inventory, self.volumes, self.sandbox, self.python, self.container_engine)
        if reason is not None:
            self.display.error(f"{reason} (edit ignored; the job goes on with the previous spec)")
            return
        self.job = new.model_copy(update={"status": self.job.status})
        for problem in rewrite_job(self.run_dir, self.job):
            self.display.error(problem)
        self.display.note("manifest changed: applying the new spec")

    def _merge_user_edit(self) -> None:
        """Carry what the user changed in their manifest file since the run last read it into the
        run's copy (:func:`t9k_jobs.local.edits.merge_edit`); an edit that does not validate is
        reported and left out (the next valid one is merged against the last valid one)."""
        assert self.manifest is not None
        mtime = self._mtime()
        if mtime == self.mtime:
            return
        self.mtime = mtime
        try:
            load_manifest(self.manifest)
        except ManifestError as exc:
            for line in exc.lines():
                self.display.error(f"{line} (edit ignored; the job goes on with the previous spec)")
            return
        new_doc = manifest_doc(self.manifest)
        if new_doc is None or new_doc == self.user_base:
            return
        try:
            parse_job(new_doc, str(self.manifest))
        except ManifestError:
            return  # changed again while being read: the next look takes it
        base = self.user_base if self.user_base is not None else {}
        try:
            with dir_lock(self.run_dir):
                ours = read_copy(self.run_dir)
                merged = merge_edit(base, new_doc, ours if ours is not None else base)
                write_copy(self.run_dir, merged)
        except OSError as exc:
            self._fatal(f"cannot write {self.copy_path}: {exc.strerror or exc}")
            return
        self.user_base = new_doc

    async def _count_down(self, live: list[ReplicaPod]) -> None:
        """Say how long the stop may take: SIGTERM was sent; SIGKILL follows after the longest
        grace period of the replicas still running, counted down every 5 s (every second in the
        last 5) until they have all ended."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(p.grace_seconds for p in live)
        first = True
        while True:
            running = [p for p in live if p.pids()]
            left = deadline - loop.time()
            if not running or left <= 0:
                return
            if first:
                self.display.note(
                    f"stopping {len(running)} replica(s): SIGTERM sent, SIGKILL in {left:.0f}s "
                    "if they have not ended (a second stop signal kills them at once)"
                )
                first = False
            else:
                self.display.note(f"{len(running)} replica(s) still stopping: SIGKILL in {left:.0f}s")
            await asyncio.sleep(min(left, 1.0 if left <= 5 else 5.0))

    async def _teardown(self) -> None:
        """Stop every process group still running (clean-up policy None keeps them on a cluster)."""
        live = [p for p in self.pods.values() if p.pids()]
        countdown = asyncio.get_running_loop().create_task(self._count_down(live)) if live else None
        await asyncio.gather(*(p.terminate() for p in live), *list(self.deletions), return_exceptions=True)
        if countdown is not None:
            countdown.cancel()
        for pod in self.pods.values():
            if pod.task is not None and not pod.task.done():
                pod.task.cancel()


__all__ = ["LocalRunner", "run_job", "run_prepared"]
