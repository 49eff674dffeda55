"""The test control plane itself: version, CRDs (names, CEL rules) and garbage collection."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.helpers import job, replica, template

from .kube import GROUP_VERSION, PLURALS, Kube, KubeError, job_path, pod_path

CONTAINER = {
    "name": "pytorch",
    "image": "example.registry/ml/pytorch:2.1-cpu",
    "command": ["python", "train.py"],
}


def pytorch_job(name: str, **spec: Any) -> dict[str, Any]:
    """Two workers of CONTAINER (restartPolicy ExitCode); ``spec`` sets more spec fields."""
    worker = replica("worker", 2, template(**copy.deepcopy(CONTAINER)), restartPolicy="ExitCode")
    return job("PyTorchTrainingJob", name, {"replicaSpecs": [worker], **spec})


def test_apiserver_version(kube: Kube) -> None:
    assert kube.get("/version")["gitVersion"] == "v1.37.2"


def test_crds_established(kube: Kube) -> None:
    for plural in PLURALS.values():
        crd = kube.get(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.batch.tensorstack.dev"
        )
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions.get("Established") == "True", (plural, conditions)


def test_kubectl_short_names(kube: Kube, kubectl, namespace: str) -> None:
    kube.create(job_path(namespace, "PyTorchTrainingJob"), pytorch_job("short"))
    out = kubectl("get", "pj,gj,dj,caij", "-A")
    assert "pytorchtrainingjob.batch.tensorstack.dev/short" in out.stdout, out.stdout
    assert namespace in out.stdout


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 2}},
            "elastic training needs torchrunConfig.enabled: true",
        ),
        (
            {
                "torchrunConfig": {"enabled": True},
                "elastic": {"enabled": True, "minReplicas": 3, "maxReplicas": 2},
            },
            "minReplicas must not be greater than maxReplicas",
        ),
    ],
    ids=["elastic-without-torchrun", "min-over-max"],
)
def test_cel_rule_rejects_at_create(kube: Kube, namespace: str, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(KubeError) as err:
        kube.create(job_path(namespace, "PyTorchTrainingJob"), pytorch_job("bad", **spec))
    assert err.value.status == 422, err.value
    assert err.value.reason == "Invalid"
    assert message in err.value.message, err.value.message
    assert not kube.exists(job_path(namespace, "PyTorchTrainingJob", "bad"))


@pytest.mark.parametrize("kind", ["PyTorchTrainingJob", "DeepSpeedJob"])
def test_the_elastic_range_cannot_change_after_creation(kube: Kube, namespace: str, kind: str) -> None:
    """T9k: minReplicas/maxReplicas "cannot be changed once the job is created" (a transition
    rule in the CRD); expectedReplicas can."""
    elastic = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 2}
    if kind == "PyTorchTrainingJob":
        manifest = pytorch_job("elastic", torchrunConfig={"enabled": True}, elastic=elastic)
    else:
        worker = {"replicas": 2, "template": template(**{**CONTAINER, "name": "worker"})}
        manifest = job(
            "DeepSpeedJob", "elastic", {"elastic": elastic, "config": {"run": {"python": ["train.py"]}}, "worker": worker}
        )
    path = job_path(namespace, kind, "elastic")
    kube.create(job_path(namespace, kind), manifest)
    patch = {"spec": {"elastic": {"expectedReplicas": 3}}}
    assert kube.patch(path, patch)["spec"]["elastic"]["expectedReplicas"] == 3
    for field, value in (("minReplicas", 2), ("maxReplicas", 8)):
        with pytest.raises(KubeError) as err:
            kube.patch(path, {"spec": {"elastic": {field: value}}})
        assert err.value.status == 422, err.value
        assert f"elastic.{field} cannot be changed once the job is created" in err.value.message
    with pytest.raises(KubeError) as err:  # taking the range away is a change too
        kube.patch(path, {"spec": {"elastic": {"maxReplicas": None}}})
    assert err.value.status == 422, err.value


def test_owned_pod_is_garbage_collected(kube: Kube, namespace: str) -> None:
    job = kube.create(job_path(namespace, "PyTorchTrainingJob"), pytorch_job("owner"))
    owner = {
        "apiVersion": GROUP_VERSION,
        "kind": "PyTorchTrainingJob",
        "name": "owner",
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "owner-worker-0", "ownerReferences": [owner]},
        "spec": {"containers": [CONTAINER], "restartPolicy": "Never"},
    }
    kube.create(pod_path(namespace), pod)
    kube.set_pod_phase(namespace, "owner-worker-0", "Running")
    assert kube.get(pod_path(namespace, "owner-worker-0"))["status"]["containerStatuses"][0]["state"][
        "running"
    ]

    kube.delete(job_path(namespace, "PyTorchTrainingJob", "owner"), uid=job["metadata"]["uid"])
    kube.wait_for(
        lambda: not kube.exists(pod_path(namespace, "owner-worker-0")),
        timeout=60,
        what="the owned pod to be garbage-collected",
    )


def test_a_plane_closed_early_leaves_no_process(tmp_path) -> None:
    """A test's own plane (``started_plane``, closed when the test is done with it, before the
    generator ends) stops every process it started: a ``yield`` outside ``try/finally`` left
    kube-apiserver, kube-controller-manager and kube-scheduler running after the test (found as
    orphans after a full run)."""
    from .conftest import started_plane

    planes = started_plane(tmp_path / "plane", scheduler=True)
    plane = next(planes)
    pids = dict(plane.pids())
    assert {"kube-apiserver", "kube-scheduler"} <= set(pids), pids
    planes.close()
    alive = []
    for name, pid in pids.items():
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone
        if state != "Z":
            alive.append(name)
    assert alive == [], alive
