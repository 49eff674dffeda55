"""The seam under the local runtime (issue 44; :mod:`t9k_jobs.local.pod_runner`): the runtime runs
a job through any :class:`PodRunner`. Here a second, deliberately plain way to run replicas (each
container one ``sh -c`` process, no namespaces, no volumes) plugs in as one class and its pods,
with nothing else changed: the engine, the run directory, the status and the logs are the
runtime's."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
from pathlib import Path
from typing import Any

import yaml

from t9k_jobs.engine import ContainerState, ObservedPod
from t9k_jobs.frameworks import parse_job
from t9k_jobs.frameworks.base import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from t9k_jobs.local.display import Display
from t9k_jobs.local.gpus import GpuInventory
from t9k_jobs.local.pod_runner import PodRunner, ProcessRunner, ReplicaPod
from t9k_jobs.local.processes import LocalPod
from t9k_jobs.local.runtime import LocalRunner


def members(protocol: type) -> set[str]:
    """The names a protocol asks for: its attributes and its methods and properties."""
    own = {n for n, v in vars(protocol).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    return own | set(getattr(protocol, "__annotations__", {}))


def test_the_process_runner_and_its_pods_have_every_member_of_the_seam(tmp_path: Path) -> None:
    pod = LocalPod({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}, {}, tmp_path, tmp_path,
                   lambda *a: None, lambda: None)  # fmt: skip
    assert not [m for m in members(ReplicaPod) if not hasattr(pod, m)]
    assert not [m for m in members(PodRunner) if not hasattr(ProcessRunner, m)]
    # Same signatures where the protocol gives them.
    for name in ("make", "begin", "kill_all", "close", "helper"):
        assert list(inspect.signature(getattr(ProcessRunner, name)).parameters) == list(
            inspect.signature(getattr(PodRunner, name)).parameters
        ), name


class PlainPod:
    """One replica: each container's ``command`` + ``args`` as a process of its own session."""

    def __init__(self, manifest: dict[str, Any], logs: Path, on_change: Any) -> None:
        self.uid = f"plain-{id(self)}"
        self.manifest = manifest
        self.deleting = False
        self.backoff: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.codes: dict[str, int] = {}
        self.logs = logs
        self.on_change = on_change

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.manifest["metadata"].get("labels") or {})

    @property
    def grace_seconds(self) -> float:
        return 2.0

    def _containers(self) -> list[dict[str, Any]]:
        return list(self.manifest["spec"]["containers"])

    def observe(self) -> ObservedPod:
        states = []
        for c in self._containers():
            code = self.codes.get(c["name"])
            state = "Terminated" if code is not None else "Running" if c["name"] in self.procs else "Waiting"
            states.append(ContainerState(c["name"], state, exit_code=code))  # type: ignore[arg-type]
        if all(s.state == "Terminated" for s in states):
            phase = "Succeeded" if all(s.exit_code == 0 for s in states) else "Failed"
        else:
            phase = "Running" if all(s.state != "Waiting" for s in states) else "Pending"
        return ObservedPod(name=self.name, uid=self.uid, replica_type=self.labels.get(LABEL_REPLICA_TYPE, ""),
                           index=int(self.labels.get(LABEL_REPLICA_INDEX, "0")), phase=phase,  # type: ignore[arg-type]
                           containers=tuple(states), deleting=self.deleting)  # fmt: skip

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        async def one(c: dict[str, Any]) -> None:
            env = {**os.environ, "POD_NAME": self.name}
            with open(self.logs / f"plain-{self.name}.{c['name']}.log", "wb") as out:
                proc = await asyncio.create_subprocess_exec(
                    *c["command"], *(c.get("args") or []), env=env, stdout=out, stderr=out, start_new_session=True
                )
                self.procs[c["name"]] = proc
                self.on_change()
                self.codes[c["name"]] = await proc.wait()
            self.on_change()

        await asyncio.gather(*(one(c) for c in self._containers()))

    async def terminate(self) -> None:
        self.deleting = True
        for proc in self.procs.values():
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGTERM)
        if self.task is not None:
            await self.task

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.returncode is None]

    def processes(self) -> list[int]:
        return self.pids()

    def kill(self) -> None:
        for pid in self.pids():
            os.killpg(pid, signal.SIGKILL)


class PlainRunner:
    """A second way to run replicas: :class:`PlainPod`s, and the record of what it made."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.made: list[str] = []
        self.closed = False
        self.wake: Any = lambda: None

    def begin(self) -> None:
        pass

    def make(self, manifest: dict[str, Any], address: str, own_objects: dict[tuple[str, str], Path]) -> PlainPod:
        self.made.append(manifest["metadata"]["name"])
        return PlainPod(manifest, self.logs, lambda: self.wake())

    def helper(self, pid: int) -> None:
        pass

    def kill_all(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_a_second_runner_plugs_in_and_the_runtime_runs_the_job_through_it(tmp_path: Path) -> None:
    """A GenericJob of two workers, an ``OnFailure`` restart of worker 1's first attempt, through
    :class:`PlainRunner`: the engine restarts it, the job Succeeds, the runtime writes its status."""
    marker = tmp_path / "failed-once"
    script = f'echo "on $POD_NAME"; if [ "$POD_NAME" = plain-worker-1 ] && [ ! -e {marker} ]; then touch {marker}; exit 3; fi'
    manifest = {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "plain"},
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": "OnFailure", "limit": 3}, "template": {"spec": {
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]}}}]},
    }  # fmt: skip
    job = parse_job(manifest)
    plain = PlainRunner(tmp_path)
    runner = LocalRunner(job, None, tmp_path, Display(quiet=True), False, gpus=GpuInventory([], "declared"),
                         pod_runner=plain)  # fmt: skip
    plain.wake = runner.wake.set
    code = asyncio.run(asyncio.wait_for(runner.run(), timeout=120))
    assert code == 0, (tmp_path / "events.log").read_text()
    assert plain.closed and plain.made[:2] == ["plain-worker-0", "plain-worker-1"]
    assert plain.made.count("plain-worker-1") == 2, plain.made  # restarted by the engine's OnFailure
    status = yaml.safe_load((tmp_path / "status.yaml").read_text())
    assert status["phase"] == "Succeeded", status
    assert (tmp_path / "plain-plain-worker-0.main.log").read_text() == "on plain-worker-0\n"
