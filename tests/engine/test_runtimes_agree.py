"""One manifest, three runtimes' observations, one status (issue 23).

The engine decides a job's status from an :class:`~t9k_jobs.engine.Observed` that each runtime
builds its own way: the local runtime from its process groups and the objects it wrote
(:meth:`LocalRunner._observe`), the operator from its informer cache
(:meth:`Controller.observe`), on a cluster that serves the TensorBoard CRD or not. Each test
here plays the same world into each runtime's own observation code, reconciles until nothing is
left to make, and compares the status the engine derives: the same manifest must give the same
conditions wherever it runs.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any, Callable

from t9k_jobs.api import parse_job
from t9k_jobs.api.common import JobStatus
from t9k_jobs.engine import Observed, Runtime, reconcile

from .jobs import pytorch
from .sim import T0

TENSORBOARD = {"trainingLogFilesets": ["t9k://pvc/logs/run1"], "image": "tensorflow/tensorflow:2.11.0"}
RUNNING = object()  # stands for a started process: the local pod's container runs


class World:
    """What exists, fed to one runtime's cache; ``observe`` is that runtime's own projection and
    ``runtime`` what it hands the engine."""

    def __init__(self, observe: Callable[[], Observed], add: Callable[[dict[str, Any]], None], runtime: Runtime) -> None:
        self.observe, self.add, self.runtime = observe, add, runtime


def settle(manifest: dict[str, Any], world_for: Callable[[Any], World], passes: int = 6) -> JobStatus:
    """Reconcile ``manifest`` against one runtime's observation until a pass creates nothing;
    every object the plans create is added to that runtime's cache, pods as running."""
    manifest = copy.deepcopy(manifest)
    manifest["metadata"]["uid"] = "job-uid"
    job = parse_job(manifest)
    world = world_for(job)
    for _ in range(passes):
        plan = reconcile(job, world.observe(), T0, world.runtime)
        job.status = plan.status
        if not plan.create:
            break
        for obj in plan.create:
            world.add(copy.deepcopy(obj))
    assert job.status is not None
    return job.status


def local_world(tmp_path: Path) -> Callable[[Any], World]:
    """The local runtime: a :class:`LocalRunner` that starts no process; pods are
    :class:`LocalPod` objects whose containers run, other objects as :meth:`_apply` keeps them."""
    from t9k_jobs.local.display import Display
    from t9k_jobs.local.gpus import GpuInventory
    from t9k_jobs.local.processes import LocalPod
    from t9k_jobs.local.runtime import LocalRunner
    from t9k_jobs.sshkeys import materialize

    def make(job: Any) -> World:
        runner = LocalRunner(job, None, tmp_path, Display(quiet=True), False, gpus=GpuInventory([], "declared"))
        runner.job_log.close()
        runner.events_log.close()

        def add(obj: dict[str, Any]) -> None:
            if obj["kind"] == "Pod":
                pod = LocalPod(obj, {}, tmp_path, tmp_path, lambda *a: None, lambda: None)
                for c in pod.main:
                    c.proc = RUNNING  # type: ignore[assignment]
                runner.pods[pod.name] = pod
            else:
                runner.others.add((obj["kind"], obj["metadata"]["name"]))
                runner.objects.append(materialize(obj))

        return World(runner._observe, add, runner.runtime)

    return make


def cluster_world(optional_kinds: set[str], made: list[Any]) -> Callable[[Any], World]:
    """The operator: a :class:`Controller` (never contacting an API server) whose informer
    handlers receive each object as the API server would return it; pods Running."""
    from kubernetes_asyncio.client import ApiClient, Configuration

    from t9k_jobs.cluster.client import KubeClient
    from t9k_jobs.cluster.controller import Controller
    from t9k_jobs.cluster.projection import job_key, project_child

    def make(job: Any) -> World:
        client = KubeClient(ApiClient(Configuration(host="https://127.0.0.1:1")))  # never contacted
        ctl = Controller(client, None, 1, optional_kinds=set(optional_kinds))
        made.append(ctl)
        key = job_key(job.kind, job.namespace, job.name)
        uids = iter(range(1, 1000))

        def add(obj: dict[str, Any]) -> None:
            if obj["kind"] not in ("Pod", "Service", "ConfigMap", "Secret") and obj["kind"] not in ctl.served_optional_kinds:
                return  # what _carry_out skips: the API server does not serve it
            obj["metadata"].update(namespace=job.namespace, uid=f"u{next(uids)}", resourceVersion="1")
            if obj["kind"] == "Pod":
                names = [c["name"] for c in obj["spec"]["containers"]]
                obj["status"] = {
                    "phase": "Running",
                    "conditions": [{"type": "PodScheduled", "status": "True"}],
                    "containerStatuses": [{"name": n, "state": {"running": {}}} for n in names],
                }
            c = project_child(obj)
            ctl._on_child("ADDED", (job.namespace, c.name), c, None)

        return World(lambda: ctl.observe(key, "job-uid"), add, ctl.runtime)

    return make


def conditions(status: JobStatus) -> list[tuple[str, str, str, str]]:
    return [(c.type, c.status, c.reason, c.message) for c in status.conditions]


def test_a_tensorboard_job_has_the_same_conditions_locally_and_on_a_cluster(tmp_path: Path, monkeypatch) -> None:
    """Issue 23: a PyTorchTrainingJob with ``tensorboardSpec`` stayed ``Initialized=False`` while
    Running locally (no TensorBoard was served there) and was ``True`` on a cluster. A child of a
    kind the runtime does not serve is not waited for (docs/decisions.md): every runtime says
    Initialized and Running, and ``status.tensorboard`` says where the TensorBoard stands. Since
    issue 31 a local run serves it where the ``tensorboard`` package is (as a cluster with the
    CRD), and says it cannot where it is not (as a cluster without)."""
    from t9k_jobs.local import runtime

    manifest = pytorch(name="j", tensorboardSpec=TENSORBOARD)

    async def on_cluster(kinds: set[str]) -> JobStatus:
        made: list[Any] = []
        try:
            return settle(manifest, cluster_world(kinds, made))
        finally:
            for ctl in made:
                ctl.queue.shut_down()
                await ctl.events_client.close()
                await ctl.client.close()

    for name in ("served", "unserved"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(runtime, "tensorboard_available", lambda: True)
    served = settle(manifest, local_world(tmp_path / "served"))
    monkeypatch.setattr(runtime, "tensorboard_available", lambda: False)
    here = settle(manifest, local_world(tmp_path / "unserved"))
    with_crd = asyncio.run(on_cluster({"PodGroup", "TensorBoard"}))
    without_crd = asyncio.run(on_cluster({"PodGroup"}))

    assert here.phase == served.phase == with_crd.phase == without_crd.phase == "Running"
    assert conditions(here) == conditions(served) == conditions(with_crd) == conditions(without_crd)
    assert here.condition("Initialized").status == "True"
    # Where no TensorBoard can be made, the job says so, the same way in both runtimes.
    assert here.tensorboard == without_crd.tensorboard
    assert (here.tensorboard.type, here.tensorboard.reason) == ("Warning", "DependentUnavailable")
    assert (with_crd.tensorboard.reason, with_crd.tensorboard.ready) == ("DependentNotReady", False)
    assert served.tensorboard == with_crd.tensorboard  # made, not answering yet (no server in this test)
