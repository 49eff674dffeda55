"""A job in one topology domain, placed by the real kube-scheduler (issue 43, part 1;
:mod:`t9k_jobs.engine.topology`).

This module's control plane runs kube-scheduler, with Kubernetes 1.37's Workload API and its
``TopologyAwareWorkloadScheduling`` gate (alpha) on: the operator gives a ``t9kScheduler`` job a
native PodGroup with ``schedulingConstraints.topology``, and its pods a required affinity to each
other on the rack label. Four Node objects in two racks (2 CPUs each; no kubelet: a bound pod
stays Pending, its ``spec.nodeName`` is where the scheduler put it). Gangs that fit one rack each
land in one rack; one that fits no rack waits, none of its pods bound, and says why. A second
plane without the gate: the API server drops the constraint, and the job says its topology is
not placed as a unit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import replica, template

from .conftest import ControlPlane, started_plane
from .kube import Kube, job_path, pod_path
from .operator_proc import OperatorProcess

RACK = "topology.kubernetes.io/rack"
GATES = "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
OWNER = "tensorstack.dev/owner-name"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from started_plane(tmp_path_factory.mktemp("controlplane-topology"), scheduler=True,
                             apiserver_args=[GATES], scheduler_args=[GATES], controller_manager_args=[GATES])  # fmt: skip


@pytest.fixture(scope="module")
def kube_t(plane: ControlPlane) -> Kube:
    return Kube(plane.kubeconfig)


@pytest.fixture(scope="module")
def racks(kube_t: Kube) -> dict[str, str]:
    """Four Ready nodes of 2 CPUs, two per rack: node name -> rack."""
    nodes = {"rack-a-1": "a", "rack-a-2": "a", "rack-b-1": "b", "rack-b-2": "b"}
    for name, rack in nodes.items():
        add_node(kube_t, name, {RACK: rack})
    return nodes


def add_node(kube: Kube, name: str, labels: dict[str, str], cpu: str = "2") -> None:
    """A Node object as a kubelet registers it: labels, capacity, Ready; without the not-ready
    taint the API server's TaintNodesByCondition admission puts on a new node (this plane runs no
    node lifecycle controller to lift it)."""
    kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}})  # fmt: skip
    kube.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    resources = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    kube.patch(f"/api/v1/nodes/{name}/status", {"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now,
                        "lastTransitionTime": now}]}})  # fmt: skip


def operator_for(plane: ControlPlane, log: Path) -> OperatorProcess:
    return OperatorProcess(plane.kubeconfig, log, "--no-leader-elect", "--log-level", "DEBUG").start()


def gang(ns: str, name: str, workers: int, mode: str | None = "Required") -> dict[str, Any]:
    """A PyTorchTrainingJob gang of a master and ``workers`` workers, 1 CPU each, in one rack."""
    pod = template(["python", "train.py"], image="example.registry/pytorch:2.1")
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    specs = [replica("master", 1, pod, restartPolicy="OnFailure")] + [replica("worker", workers, pod, restartPolicy="OnFailure")]
    job = helpers.job("PyTorchTrainingJob", name, {"replicaSpecs": specs,
                                                   "scheduler": {"t9kScheduler": {"queue": "default", "priority": 0}}},
                      namespace=ns)  # fmt: skip
    if mode is not None:
        job["metadata"]["annotations"] = {"t9k-jobs.io/topology-key": RACK, "t9k-jobs.io/topology-mode": mode}
    return job


def namespace_in(kube: Kube, name: str) -> str:
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def pods_of(kube: Kube, ns: str, job: str) -> list[dict[str, Any]]:
    return kube.list(pod_path(ns), label_selector=f"{OWNER}={job}")


def test_gangs_that_fit_a_rack_land_in_one_and_one_that_fits_none_waits(plane, kube_t: Kube, racks: dict[str, str],
                                                                        tmp_path: Path) -> None:  # fmt: skip
    op = operator_for(plane, tmp_path / "operator.log")
    try:
        ns = namespace_in(kube_t, "topology-fit")
        for name in ("one", "two"):  # 3 CPUs each: one rack (4 CPUs) holds one of them, not two
            kube_t.create(job_path(ns, "PyTorchTrainingJob"), gang(ns, name, 2))
        placed = {}
        for name in ("one", "two"):
            pods = Kube.wait_for(lambda n=name: len(p := pods_of(kube_t, ns, n)) == 3
                                 and all(x["spec"].get("nodeName") for x in p) and p,
                                 timeout=120, interval=0.5, what=f"gang {name} bound")  # fmt: skip
            placed[name] = {racks[p["spec"]["nodeName"]] for p in pods}
        assert all(len(r) == 1 for r in placed.values()) and placed["one"] != placed["two"], (placed, op.tail())
        group = kube_t.get(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups/one")
        assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}, group
        condition = next((c for c in kube_t.get(job_path(ns, "PyTorchTrainingJob", "one")).get("status", {})
                          .get("conditions", []) if c["type"] == "Topology"), None)  # fmt: skip
        assert condition is None, condition

        # Five CPUs fit no rack: none of its pods is bound, and the scheduler says why.
        kube_t.create(job_path(ns, "PyTorchTrainingJob"), gang(ns, "big", 4))
        pods = Kube.wait_for(lambda: len(p := pods_of(kube_t, ns, "big")) == 5 and all(
            any(c["type"] == "PodScheduled" and c["status"] == "False" for c in (x.get("status") or {}).get("conditions", []))
            for x in p) and p, timeout=120, interval=0.5, what="the big gang unschedulable")  # fmt: skip
        assert not [p for p in pods_of(kube_t, ns, "big") if p["spec"].get("nodeName")]
        message = next(c["message"] for c in pods[0]["status"]["conditions"] if c["type"] == "PodScheduled")
        print(f"the big gang waits: {message}")
        assert message
    finally:
        assert op.stop() == 0, op.tail()


def test_without_the_gate_the_job_says_its_topology_is_not_placed_as_a_unit(tmp_path: Path) -> None:
    """The same job where the API server runs without the topology gate (as 1.37 ships): the
    PodGroup is stored without its constraint, and the job's ``Topology`` condition and a Warning
    say so; its pods still carry the affinity."""
    planes = started_plane(tmp_path / "plane")
    plane = next(planes)
    try:
        kube = Kube(plane.kubeconfig)
        op = operator_for(plane, tmp_path / "operator.log")
        try:
            ns = namespace_in(kube, "topology-off")
            kube.create(job_path(ns, "PyTorchTrainingJob"), gang(ns, "off", 1))
            cond = Kube.wait_for(lambda: next((c for c in kube.get(job_path(ns, "PyTorchTrainingJob", "off"))
                                               .get("status", {}).get("conditions", []) if c["type"] == "Topology"), None),
                                 timeout=60, interval=0.5, what="the Topology condition")  # fmt: skip
            assert cond["status"] == "False" and cond["reason"] == "TopologyNotEnforced", cond
            assert "TopologyAwareWorkloadScheduling is off" in cond["message"], cond
            events = [e for e in kube.list(f"/api/v1/namespaces/{ns}/events") if e["reason"] == "TopologyNotEnforced"]
            assert len(events) == 1, events
            pod = Kube.wait_for(lambda: kube.get(pod_path(ns, "off-master-0")), timeout=60, what="a pod")
            terms = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert terms[0]["topologyKey"] == RACK, terms
        finally:
            assert op.stop() == 0, op.tail()
    finally:
        planes.close()
