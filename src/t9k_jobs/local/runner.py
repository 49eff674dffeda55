"""``t9k-jobs run``: carry out the engine's plans with processes on this machine.

The loop is the local twin of the operator's reconcile loop: snapshot the pods, call
:func:`t9k_jobs.engine.reconcile`, start and stop process groups as the plan says, store the
new status, and go round again when a process ends, the manifest file changes (pause,
resume, elastic ``expectedReplicas``), the plan asks to look again, or half a second passes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any

import yaml

from ..api import Job, ManifestError, load_manifest
from ..api.common import TERMINAL_PHASES
from ..engine import Observed, Plan, materialize, reconcile
from ..render import to_yaml
from .display import Display
from .processes import LocalPod, base_environment

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_CANNOT_RUN = 2
EXIT_INTERRUPTED = 130

_NEEDS = {
    "DeepSpeedJob": (
        ["deepspeed", "pdsh", "sshd"],
        "pip install deepspeed, and apt-get install pdsh openssh-server",
    ),
    "ColossalAIJob": (
        ["colossalai", "sshd"],
        "pip install colossalai, and apt-get install openssh-server",
    ),
}


class LocalAddressing:
    """Every replica's host is this machine; every (replica, port name) gets its own free port.

    Ports are picked once, by binding port 0 on the loopback interface, and kept for the
    whole run so a restarted replica listens where its peers expect it.
    """

    def __init__(self) -> None:
        self._ports: dict[tuple[str, str, int, str], int] = {}

    def host(self, job_name: str, replica_type: str, index: int) -> str:
        return "127.0.0.1"

    def port(self, job_name: str, replica_type: str, index: int, name: str, declared: int) -> int:
        key = (job_name, replica_type, index, name)
        if key not in self._ports:
            self._ports[key] = _free_port(set(self._ports.values()))
        return self._ports[key]


def _free_port(taken: set[int]) -> int:
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in taken:
            return port
    raise RuntimeError("no free TCP port on 127.0.0.1")


def cannot_run_reason(job: Job) -> str | None:
    """Why this machine cannot run ``job`` locally, or ``None`` when it can."""
    need = _NEEDS.get(job.kind)
    if need is None:
        return None
    tools, how = need
    missing = [t for t in tools if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    if missing:
        return (
            f"{job.kind} runs its replicas through an ssh launcher; this machine lacks {', '.join(missing)}. "
            f"Install them ({how}), or use `t9k-jobs render` to see what the operator would create."
        )
    return (
        f"{job.kind} cannot run locally yet: its launcher reaches workers over ssh with keys mounted at "
        "fixed paths, which a local run does not provide. Use `t9k-jobs render` to see what the operator "
        "would create."
    )


def default_run_dir(job: Job) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path.cwd() / "t9k-runs" / f"{job.name}-{stamp}"


def run_job(job: Job, manifest: Path, run_dir: Path | None = None, quiet: bool = False, watch: bool = True) -> int:
    """Run ``job`` here until it finishes or is interrupted; return the process exit code.

    0 when the job Succeeded, 1 when it Failed, 2 when it cannot run here, 130 (143) when
    stopped by SIGINT (SIGTERM). Logs go to ``run_dir`` (default ``./t9k-runs/<job>-<time>``):
    ``<pod>.<container>.log`` per container, ``job.log`` interleaved, ``status.yaml``,
    ``events.log`` and ``objects.yaml`` (the non-pod objects the operator would create).
    """
    reason = cannot_run_reason(job)
    display = Display(quiet=quiet)
    if reason is not None:
        display.error(reason)
        return EXIT_CANNOT_RUN
    run_dir = run_dir or default_run_dir(job)
    run_dir.mkdir(parents=True, exist_ok=True)
    runner = LocalRunner(job, manifest, run_dir, display, watch)
    return asyncio.run(runner.run())


class LocalRunner:
    """The reconcile loop over local process groups (see the module docstring)."""

    def __init__(self, job: Job, manifest: Path, run_dir: Path, display: Display, watch: bool) -> None:
        self.job = job
        self.manifest = manifest.resolve()
        self.run_dir = run_dir
        self.display = display
        self.watch = watch
        self.addressing = LocalAddressing()
        self.pods: dict[str, LocalPod] = {}
        self.others: set[tuple[str, str]] = set()
        self.objects: list[dict[str, Any]] = []
        self.base_env = base_environment()
        self.wake = asyncio.Event()
        self.stop_signal: int | None = None
        self.mtime = self._mtime()
        self.deletions: set[asyncio.Task[None]] = set()
        self.job_log = open(run_dir / "job.log", "a", encoding="utf-8")  # noqa: SIM115 - closed in run()
        self.events_log = open(run_dir / "events.log", "a", encoding="utf-8")  # noqa: SIM115

    def _mtime(self) -> float:
        try:
            return self.manifest.stat().st_mtime
        except OSError:
            return 0.0

    def _changed(self) -> None:
        self.wake.set()

    def _line(self, pod: str, container: str, text: str) -> None:
        prefix = pod[len(self.job.name) + 1 :] if pod.startswith(self.job.name + "-") else pod
        pod_obj = self.pods.get(pod)
        if pod_obj is not None and len(pod_obj.main) > 1:
            prefix = f"{prefix}/{container}"
        self.job_log.write(f"[{prefix}] {text}\n")
        self.job_log.flush()
        self.display.log(prefix, text)

    def _on_signal(self, signum: int) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum
            self.display.note(f"received {signal.Signals(signum).name}: stopping every replica")
        self.wake.set()

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._on_signal, sig)
        self.display.start(self.job, self.run_dir)
        try:
            return await self._loop()
        finally:
            await self._teardown()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            self.display.stop(self.job)
            self.job_log.close()
            self.events_log.close()

    async def _loop(self) -> int:
        while True:
            if self.stop_signal is not None:
                return EXIT_INTERRUPTED if self.stop_signal == signal.SIGINT else 128 + self.stop_signal
            self._reload_manifest()
            plan = reconcile(self.job, self._observe(), time.time(), self.addressing)
            self._apply(plan)
            if plan.finished and not self.deletions and self.job.status is not None:
                if self.job.status.phase in TERMINAL_PHASES:
                    return EXIT_SUCCEEDED if self.job.status.phase == "Succeeded" else EXIT_FAILED
            self.wake.clear()
            timeout = 0.5 if plan.requeue_after is None else max(0.01, min(0.5, plan.requeue_after))
            try:
                await asyncio.wait_for(self.wake.wait(), timeout=timeout)
            except asyncio.TimeoutError:
                pass

    def _observe(self) -> Observed:
        return Observed(
            pods={name: pod.observe() for name, pod in self.pods.items()},
            others=frozenset(self.others),
        )

    def _apply(self, plan: Plan) -> None:
        made_objects = False
        for obj in plan.create:
            kind, name = obj["kind"], obj["metadata"]["name"]
            if kind == "Pod":
                self._start_pod(obj)
            else:
                self.others.add((kind, name))
                self.objects.append(materialize(obj))
                made_objects = True
        if made_objects:
            (self.run_dir / "objects.yaml").write_text(to_yaml(self.objects), encoding="utf-8")
        for delete in plan.delete:
            pod = self.pods.get(delete.name)
            if delete.kind != "Pod" or pod is None or pod.deleting or (delete.uid and pod.uid != delete.uid):
                continue
            task = asyncio.get_running_loop().create_task(self._delete(pod))
            self.deletions.add(task)
            task.add_done_callback(self.deletions.discard)
        for event in plan.events:
            self.events_log.write(f"{time.strftime('%H:%M:%S')} {event.type} {event.reason}: {event.message}\n")
            self.events_log.flush()
            self.display.event(event)
        old = self.job.status.dump() if self.job.status is not None else None
        if plan.status.dump() != old:
            self.job = self.job.model_copy(update={"status": plan.status})
            (self.run_dir / "status.yaml").write_text(
                yaml.safe_dump(plan.status.dump(), sort_keys=False), encoding="utf-8"
            )
        self.display.update(self.job, self.pods)

    def _start_pod(self, manifest: dict[str, Any]) -> None:
        pod = LocalPod(
            manifest=manifest,
            base_env=self.base_env,
            default_dir=self.manifest.parent,
            log_dir=self.run_dir,
            sink=self._line,
            on_change=self._changed,
        )
        self.pods[pod.name] = pod
        pod.start()

    async def _delete(self, pod: LocalPod) -> None:
        await pod.terminate()
        if self.pods.get(pod.name) is pod:
            del self.pods[pod.name]
        self.wake.set()

    def _reload_manifest(self) -> None:
        """Apply an edited manifest (the local ``kubectl edit``), keeping the status."""
        if not self.watch:
            return
        mtime = self._mtime()
        if mtime == self.mtime:
            return
        self.mtime = mtime
        try:
            new = load_manifest(self.manifest)
        except ManifestError as exc:
            for line in exc.lines():
                self.display.error(f"{line} (edit ignored; the job goes on with the previous spec)")
            return
        if new.kind != self.job.kind or new.name != self.job.name:
            self.display.error("the edited manifest names another job; edit ignored")
            return
        self.job = new.model_copy(update={"status": self.job.status})
        self.display.note("manifest changed: applying the new spec")

    async def _teardown(self) -> None:
        """Stop every process group still running (clean-up policy None keeps them on a cluster)."""
        live = [p for p in self.pods.values() if p.pids()]
        if live:
            self.display.note(f"stopping {len(live)} replica(s) still running")
        await asyncio.gather(*(p.terminate() for p in live), *list(self.deletions), return_exceptions=True)
        for pod in self.pods.values():
            if pod.task is not None and not pod.task.done():
                pod.task.cancel()


__all__ = ["LocalAddressing", "LocalRunner", "cannot_run_reason", "run_job"]
