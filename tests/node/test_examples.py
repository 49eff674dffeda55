"""The examples as real pods, created by the operator running in the cluster."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ..cluster.kube import Kube, job_path, pod_path
from .conftest import REPO, wait_phase


def apply_example(kubectl, name: str, namespace: str, **spec: object) -> dict:
    """``kubectl apply -f examples/<name>/job.yaml -n NS``, as a user would (with ``spec`` fields
    added, when given); returns the manifest."""
    path = REPO / "examples" / name / "job.yaml"
    job = yaml.safe_load(Path(path).read_text())
    if not spec:
        kubectl("apply", "-n", namespace, "-f", str(path))
        return job
    job["spec"].update(spec)
    kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(job))
    return job


def replicas(job: dict) -> dict[str, dict]:
    return {r["name"]: r for t in job["status"].get("tasks", []) for r in t.get("replicas", [])}


def test_ddp_example_trains_to_accuracy_in_real_pods(node, kube: Kube, kubectl, namespace: str) -> None:
    """The main example, unchanged: two torchrun ranks in two pods find each other through the job's
    Services, train, and rank 0 prints a test accuracy of at least 0.90 in `kubectl logs`."""
    job = apply_example(kubectl, "pytorch-ddp", namespace)
    name = job["metadata"]["name"]
    path = job_path(namespace, "PyTorchTrainingJob", name)
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=600)
    logs = {p: kubectl("logs", "-n", namespace, p).stdout for p in (f"{name}-worker-0", f"{name}-worker-1")}
    assert done["status"]["phase"] == "Succeeded", (done["status"], logs)
    final = re.search(r"final test_accuracy ([\d.]+)", logs[f"{name}-worker-0"])
    assert final and float(final.group(1)) >= 0.90, logs[f"{name}-worker-0"]
    assert "rank 1 of 2 joined" in logs[f"{name}-worker-1"], logs[f"{name}-worker-1"]
    # Both replicas ended by themselves: neither was taken for unfinished and deleted by the clean-up.
    for rs in replicas(done).values():
        assert rs["phase"] == "Succeeded", done["status"]
    for p in logs:
        pod = kube.get(pod_path(namespace, p))
        assert pod["metadata"]["ownerReferences"][0]["name"] == name
        assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0


def test_generic_exchange_example_succeeds(node, kube: Kube, kubectl, namespace: str) -> None:
    """Three GenericJob ranks exchange messages over TCP through their Services' DNS names."""
    job = apply_example(kubectl, "generic-exchange", namespace)
    name = job["metadata"]["name"]
    done = wait_phase(kube, job_path(namespace, "GenericJob", name), ("Succeeded", "Failed"), timeout=300)
    logs = {i: kubectl("logs", "-n", namespace, f"{name}-worker-{i}").stdout for i in range(3)}
    assert done["status"]["phase"] == "Succeeded", (done["status"], logs)
    for i, text in logs.items():
        others = sorted(set(range(3)) - {i})
        assert f"rank {i} received from {others}" in text, text
    assert "exchange ok" in logs[0], logs[0]
    assert all(rs["phase"] == "Succeeded" for rs in replicas(done).values()), done["status"]


def test_ddp_example_with_the_t9k_scheduler_trains_as_a_gang(
    node, kube: Kube, kubectl, namespace: str, default_queue: str
) -> None:
    """The main example with ``scheduler.t9kScheduler`` added as real T9k manifests write it (the
    sample's DeepSpeed gpt-125m: queue default, priority 50): on this 1.37 cluster the operator
    gives it a native PodGroup, kube-scheduler binds both ranks as one gang, and it trains (Kueue,
    on the node, admits it first through the LocalQueue ``default``: conftest ``default_queue``)."""
    job = apply_example(kubectl, "pytorch-ddp", namespace, scheduler={"t9kScheduler": {"queue": "default", "priority": 50}})
    name = job["metadata"]["name"]
    done = wait_phase(kube, job_path(namespace, "PyTorchTrainingJob", name), ("Succeeded", "Failed"), timeout=600)
    log = kubectl("logs", "-n", namespace, f"{name}-worker-0").stdout
    assert done["status"]["phase"] == "Succeeded", (done["status"], log)
    final = re.search(r"final test_accuracy ([\d.]+)", log)
    assert final and float(final.group(1)) >= 0.90, log
    pg = kube.get(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{name}")
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    assert any(c["type"] == "PodGroupInitiallyScheduled" and c["status"] == "True" for c in pg["status"]["conditions"])
    for i in range(2):
        pod = kube.get(pod_path(namespace, f"{name}-worker-{i}"))
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": name}
        assert pod["spec"]["priorityClassName"] == "t9k-priority-50"
