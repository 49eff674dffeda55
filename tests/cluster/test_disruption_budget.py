"""A gang job's PodDisruptionBudget against the real API server (issue 43, part 4): while the gang
runs, the Eviction API (what ``kubectl drain`` calls) refuses to evict one of its ranks (429);
once the job finished the budget is gone and the eviction goes through; a paused job and a plain
job have none. The tests play the kubelet; kube-controller-manager's disruption controller keeps
the budget's status, as on a real cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import helpers
from tests.helpers import replica, template

from .kube import Kube, KubeError, job_path, pod_path
from .operator_proc import OperatorProcess

SCHED = {"t9kScheduler": {"queue": "default", "priority": 0}}
PDBS = "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"


@pytest.fixture(scope="module")
def operator(control_plane, tmp_path_factory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("operator-pdb") / "operator.log"
    op = OperatorProcess(control_plane.kubeconfig, log, "--no-leader-elect", "--log-level", "DEBUG").start()
    yield op
    assert op.stop() == 0, op.tail()


def gang(kube: Kube, ns: str, name: str, scheduler: bool = True) -> str:
    specs = [replica(t, 1, template(["python", "train.py"], image="example.registry/pytorch:2.1"), restartPolicy="OnFailure")
             for t in ("master", "worker")]  # fmt: skip
    spec = {"replicaSpecs": specs, **({"scheduler": SCHED} if scheduler else {})}
    kube.create(job_path(ns, "PyTorchTrainingJob"), helpers.job("PyTorchTrainingJob", name, spec, namespace=ns))
    return job_path(ns, "PyTorchTrainingJob", name)


def run_all(kube: Kube, ns: str, name: str) -> None:
    for pod in (f"{name}-master-0", f"{name}-worker-0"):
        Kube.wait_for(lambda p=pod: kube.get(pod_path(ns, p)), timeout=60, what=f"pod {pod}")
        kube.set_pod_phase(ns, pod, "Running")


def evict(kube: Kube, ns: str, pod: str) -> int:
    """POST an Eviction for ``pod``; the HTTP status (201 evicted, 429 refused by a budget)."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": ns}}
    try:
        kube.create(f"{pod_path(ns, pod)}/eviction", body)
    except KubeError as exc:
        return exc.status
    return 201


def test_a_running_gang_refuses_an_eviction_until_it_finished(operator, kube: Kube, namespace: str) -> None:
    path = gang(kube, namespace, "ddp")
    run_all(kube, namespace, "ddp")
    pdb = Kube.wait_for(
        lambda: (b := kube.get(f"{PDBS.format(ns=namespace)}/ddp")).get("status", {}).get("currentHealthy") == 2 and b,
        timeout=60, what="the budget counting both ranks")  # fmt: skip
    assert pdb["spec"]["minAvailable"] == 2 and pdb["status"]["disruptionsAllowed"] == 0, pdb
    assert pdb["metadata"]["ownerReferences"][0]["name"] == "ddp"
    assert evict(kube, namespace, "ddp-worker-0") == 429
    assert not kube.get(pod_path(namespace, "ddp-worker-0"))["metadata"].get("deletionTimestamp")
    kube.set_pod_phase(namespace, "ddp-master-0", "Succeeded")
    Kube.wait_for(lambda: (kube.get(path).get("status") or {}).get("phase") == "Succeeded", timeout=60, what="Succeeded")
    Kube.wait_for(lambda: not kube.exists(f"{PDBS.format(ns=namespace)}/ddp"), timeout=60, what="the budget deleted")
    assert evict(kube, namespace, "ddp-worker-0") == 201


def test_a_paused_gang_and_a_plain_job_have_none(operator, kube: Kube, namespace: str) -> None:
    gang(kube, namespace, "plain", scheduler=False)
    path = gang(kube, namespace, "paused")
    Kube.wait_for(lambda: kube.exists(f"{PDBS.format(ns=namespace)}/paused"), timeout=60, what="the budget")
    kube.patch(path, {"spec": {"runMode": {"pause": {"enabled": True}}}})
    Kube.wait_for(lambda: (kube.get(path).get("status") or {}).get("phase") == "Paused", timeout=60, what="Paused")
    Kube.wait_for(lambda: not kube.exists(f"{PDBS.format(ns=namespace)}/paused"), timeout=60, what="the budget gone")
    Kube.wait_for(lambda: kube.get(pod_path(namespace, "plain-master-0")), timeout=60, what="the plain job's pod")
    assert [b["metadata"]["name"] for b in kube.list(PDBS.format(ns=namespace))] == []
