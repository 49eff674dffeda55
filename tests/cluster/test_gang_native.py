"""Issue 22 on a real API server: how the operator carries out ``spec.scheduler.t9kScheduler``.

The session's control plane is Kubernetes v1.37.2 with the Workload API on (gate
``GenericWorkload``, ``scheduling.k8s.io/v1beta1``): the operator finds it by discovery and gives
each such job a native PodGroup, pods joining it, and the job's PriorityClass where the cluster
admin made it (the chart's ``jobPriorities.allowed``); without one, the default priority, a
``Priority`` condition and one Warning, and the operator makes no PriorityClass (issue 33). A second plane,
started here without the Workload API (as 1.37 ships), gets the default scheduler, a
``GangScheduling`` condition and one Warning. No scheduler or kubelet runs in these planes (the
tests play the kubelet); binding a gang for real is tests/node/test_gang.py.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import ControlPlane, started_plane
from .helm import CHART, helm
from .kube import Kube, KubeError, job_path
from .operator_proc import OperatorProcess
from .test_operator import condition, create, events, pytorch, reasons, run_all, status, wait_phase, wait_pods

SCHED = {"t9kScheduler": {"queue": "gpu", "priority": 40}}
NATIVE = "/apis/scheduling.k8s.io/v1beta1"


def pod_group_path(ns: str, name: str | None = None) -> str:
    return f"{NATIVE}/namespaces/{ns}/podgroups" + (f"/{name}" if name else "")


@pytest.fixture(scope="module")
def operator(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("operator-native") / "operator.log"
    op = OperatorProcess(control_plane.kubeconfig, log, "--no-leader-elect", "--log-level", "DEBUG").start()
    yield op
    code = op.stop()
    assert code == 0, f"operator exited {code} on SIGTERM:\n{op.tail()}"


PRIORITY_CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


@contextlib.contextmanager
def allowed_priorities(kube: Kube, operator: OperatorProcess, *priorities: int) -> Iterator[list[dict[str, Any]]]:
    """The cluster admin allows ``priorities`` as the chart does (``helm template --set
    jobPriorities.allowed={...}``, its PriorityClasses created on the API server); waits until the
    operator has seen each class (its log says so), and deletes them afterwards."""
    out = helm("template", "t9k-jobs", str(CHART), "--set", f"jobPriorities.allowed={{{','.join(map(str, priorities))}}}")
    assert out.returncode == 0, out.stderr
    classes = [d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "PriorityClass"]
    assert sorted(c["value"] for c in classes) == sorted(priorities)
    for pc in classes:
        kube.create(PRIORITY_CLASSES, pc)
    try:
        for pc in classes:
            line = f"PriorityClass {pc['metadata']['name']} exists"
            kube.wait_for(lambda line=line: line in operator.tail(400), what=f"the operator to see {line}")
        yield classes
    finally:
        for pc in classes:
            kube.delete(f"{PRIORITY_CLASSES}/{pc['metadata']['name']}")


def test_the_plane_serves_the_workload_api(kube: Kube) -> None:
    assert kube.get("/version")["gitVersion"] == "v1.37.2"
    served = {r["name"] for r in kube.get(NATIVE)["resources"]}
    assert {"podgroups", "workloads"} <= served


def test_a_t9k_scheduler_job_gets_a_native_pod_group_its_pods_join(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns, name = namespace, "gang"
    with allowed_priorities(kube, operator, 40):
        job = create(kube, pytorch(name, ns, workers=2, scheduler=SCHED))
        live = wait_pods(kube, ns, name, 3, operator)
        pg = kube.get(pod_group_path(ns, name))
        pc = kube.get(f"{PRIORITY_CLASSES}/t9k-priority-40")
        run_all(kube, ns, name)
        st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
        assert not any(c["type"] in ("GangScheduling", "Priority") for c in st.get("conditions") or [])
        assert not {"GangNotEnforced", "PriorityNotEnforced"} & set(reasons(kube, ns, name))
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert pg["spec"]["disruptionMode"] == {"all": {}}
    assert pg["spec"]["priorityClassName"] == "t9k-priority-40"
    assert pg["spec"]["priority"] == 40  # resolved by the Priority admission plugin from the class
    (owner,) = pg["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("PyTorchTrainingJob", job["metadata"]["uid"], True)
    assert "scheduling.k8s.io/podgroup-protection" in pg["metadata"]["finalizers"]
    assert (pc["value"], pc.get("globalDefault", False), pc["preemptionPolicy"]) == (40, False, "PreemptLowerPriority")
    for pod in live.values():
        # The API server kept the field (with the gate off it drops it without a word).
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": name}
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert pod["spec"]["priorityClassName"] == "t9k-priority-40"
        assert pod["spec"]["priority"] == 40


def test_a_priority_the_admin_did_not_allow_runs_at_the_default_priority(
    kube: Kube, namespace: str, operator: OperatorProcess, control_plane: ControlPlane
) -> None:
    """Issue 33: a job creator gains no cluster-wide preemption. Priority 70 has no PriorityClass:
    the operator makes none (its RBAC could not either), the pods and the PodGroup name none (the
    default priority, 0), the job says why in a condition, one Warning event and describe."""
    ns, name = namespace, "unranked"
    if kube.exists(f"{PRIORITY_CLASSES}/t9k-priority-70"):
        kube.delete(f"{PRIORITY_CLASSES}/t9k-priority-70")
    create(kube, pytorch(name, ns, workers=1, scheduler={"t9kScheduler": {"queue": "q", "priority": 70}}))
    live = wait_pods(kube, ns, name, 2, operator)
    for pod in live.values():
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": name}
        assert "priorityClassName" not in pod["spec"]
        assert pod["spec"].get("priority", 0) == 0
    pg = kube.get(pod_group_path(ns, name))
    assert "priorityClassName" not in pg["spec"] and pg["spec"].get("priority", 0) == 0
    cond = kube.wait_for(
        lambda: next((c for c in status(kube, ns, "PyTorchTrainingJob", name).get("conditions") or []
                      if c["type"] == "Priority"), None),
        what="the Priority condition",
    )  # fmt: skip
    assert (cond["status"], cond["reason"]) == ("False", "NoPriorityClass")
    assert "no PriorityClass t9k-priority-70" in cond["message"]
    kube.wait_for(lambda: "PriorityNotEnforced" in reasons(kube, ns, name), what="the PriorityNotEnforced event")
    run_all(kube, ns, name)
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
    warned = [e for e in events(kube, ns, name) if e["reason"] == "PriorityNotEnforced"]
    assert [(e["type"], e.get("count") or 1) for e in warned] == [("Warning", 1)]
    assert not kube.exists(f"{PRIORITY_CLASSES}/t9k-priority-70"), "the operator made a PriorityClass"
    environ = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig)}
    described = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "describe", "pj", name, "-n", ns],
        capture_output=True, text=True, timeout=120, env=environ, check=False,
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert "NoPriorityClass" in described.stdout and "t9k-priority-70" in described.stdout, described.stdout


def test_min_count_follows_the_replicas_when_the_job_is_scaled(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns, name = namespace, "scaled"
    obj = pytorch(name, ns, workers=2, scheduler=SCHED)
    create(kube, obj)
    wait_pods(kube, ns, name, 3, operator)
    specs = obj["spec"]["replicaSpecs"]
    specs[1]["replicas"] = 3
    kube.patch(job_path(ns, "PyTorchTrainingJob", name), {"spec": {"replicaSpecs": specs}})
    wait_pods(kube, ns, name, 4, operator)
    kube.wait_for(
        lambda: kube.get(pod_group_path(ns, name))["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4,
        what="minCount 4 after the scale",
    )


def test_the_pod_group_goes_with_its_job(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """The garbage collector deletes the PodGroup; kube-controller-manager's podgroup-protection
    controller lifts its finalizer once no pod refers to it."""
    ns, name = namespace, "gone"
    create(kube, pytorch(name, ns, workers=1, scheduler=SCHED))
    wait_pods(kube, ns, name, 2, operator)
    assert kube.exists(pod_group_path(ns, name))
    kube.delete(job_path(ns, "PyTorchTrainingJob", name), propagation="Background")
    kube.wait_for(lambda: not kube.exists(pod_group_path(ns, name)), timeout=60, what="the PodGroup deleted")


# --------------------------------------------------------------------------- without the Workload API


@pytest.fixture(scope="module")
def plane_without_workload_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from started_plane(tmp_path_factory.mktemp("controlplane-no-workload"), workload_api=False)


@pytest.fixture(scope="module")
def bare_kube(plane_without_workload_api: ControlPlane) -> Kube:
    return Kube(plane_without_workload_api.kubeconfig)


@pytest.fixture
def bare_namespace(bare_kube: Kube) -> Iterator[str]:
    name = "t-bare"
    bare_kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    bare_kube.delete(f"/api/v1/namespaces/{name}")
    bare_kube.wait_for(lambda: not bare_kube.exists(f"/api/v1/namespaces/{name}"), timeout=60, what="namespace gone")


@pytest.fixture(scope="module")
def bare_operator(plane_without_workload_api: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("operator-bare") / "operator.log"
    op = OperatorProcess(
        plane_without_workload_api.kubeconfig, log, "--no-leader-elect", "--log-level", "DEBUG"
    ).start()
    yield op
    code = op.stop()
    assert code == 0, f"operator exited {code} on SIGTERM:\n{op.tail()}"


def test_without_a_pod_group_api_a_job_warns_once_and_uses_the_default_scheduler(
    bare_kube: Kube, bare_namespace: str, bare_operator: OperatorProcess
) -> None:
    """Path (3): neither T9k's PodGroup nor scheduling.k8s.io/v1beta1 is served, so the job's
    pods go to the default scheduler, the job gets a GangScheduling condition (False,
    NotEnforced) and one Warning GangNotEnforced event, never a silent Pending."""
    kube, ns, name, operator = bare_kube, bare_namespace, "gang", bare_operator
    with pytest.raises(KubeError) as missing:
        kube.get(NATIVE)
    assert missing.value.status == 404
    create(kube, pytorch(name, ns, workers=1, scheduler=SCHED))
    live = wait_pods(kube, ns, name, 2, operator)
    for pod in live.values():
        assert pod["spec"].get("schedulerName") == "default-scheduler"  # the API server's default
        assert "schedulingGroup" not in pod["spec"]
        assert "priorityClassName" not in pod["spec"]
        assert "scheduler.tensorstack.dev/queue" not in pod["metadata"]["labels"]
    gang = kube.wait_for(
        lambda: next(
            (c for c in status(kube, ns, "PyTorchTrainingJob", name).get("conditions") or [] if c["type"] == "GangScheduling"),
            None,
        ),
        what="the GangScheduling condition",
    )
    assert (gang["status"], gang["reason"]) == ("False", "NotEnforced")
    assert "queue gpu, priority 40" in gang["message"]
    kube.wait_for(lambda: "GangNotEnforced" in reasons(kube, ns, name), what="the GangNotEnforced event")
    # More passes (the pods start, the job runs) do not say it again.
    run_all(kube, ns, name)
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
    assert condition(st, "GangScheduling") == gang
    kube.wait_for(lambda: status(kube, ns, "PyTorchTrainingJob", name).get("aggregate", {}).get("running") == 2)
    warned = [e for e in events(kube, ns, name) if e["reason"] == "GangNotEnforced"]
    assert [(e["type"], e.get("count") or 1, e["message"]) for e in warned] == [("Warning", 1, gang["message"])]


T9K_PODGROUP_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduler.tensorstack.dev"},
    "spec": {
        "group": "scheduler.tensorstack.dev",
        "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup", "listKind": "PodGroupList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


def test_the_operator_restarts_when_what_is_served_changes(
    plane_without_workload_api: ControlPlane, bare_kube: Kube, tmp_path: Path
) -> None:
    """T9k's PodGroup CRD installed under a running operator: at its next check it stops with
    exit 3 (its Deployment starts it again, now in gang mode t9k)."""
    kube = bare_kube
    op = OperatorProcess(
        plane_without_workload_api.kubeconfig, tmp_path / "operator.log", "--no-leader-elect", "--discovery-interval", "1"
    ).start()
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    try:
        kube.create(crd, T9K_PODGROUP_CRD)
        assert op.proc is not None
        (code,) = kube.wait_for(
            lambda: (c := op.proc.poll()) is not None and (c,), timeout=60, what="the operator to exit"
        )
        assert code == 3, op.tail()
        assert "now serves PodGroup" in op.tail()
    finally:
        if op.proc is not None and op.proc.poll() is None:
            op.stop()
        try:
            kube.delete(f"{crd}/{T9K_PODGROUP_CRD['metadata']['name']}")
        except KubeError as exc:
            if exc.status != 404:
                raise
        kube.wait_for(
            lambda: not kube.exists(f"{crd}/{T9K_PODGROUP_CRD['metadata']['name']}"), timeout=60, what="the CRD gone"
        )
