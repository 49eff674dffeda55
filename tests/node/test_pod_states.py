"""What a real kubelet and scheduler report, carried into the job's status and Events: why pods wait
(no image, no ConfigMap, no room), why a container ended (OOMKilled)."""

from __future__ import annotations

from ..cluster.kube import Kube, core_path
from .conftest import wait_phase
from .test_lifecycle import condition, create, pytorch


def replica_failure(kube: Kube, path: str) -> dict:
    job = kube.get(path)
    return condition(job, "ReplicaFailure") if job.get("status", {}).get("conditions") else {}


def test_pods_that_cannot_start_say_why(node, kube: Kube, namespace: str) -> None:
    """A missing image (pull policy Never), a missing ConfigMap and an unschedulable request: each job
    stays Pending and its ReplicaFailure condition names the replica with the kubelet's or the
    scheduler's reason and message; each replica gets one ReplicaWaiting Warning."""
    no_image = pytorch("no-image", ["true"])
    no_image["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0].update(
        image="localhost/no-such-image:1", imagePullPolicy="Never")
    no_config = pytorch("no-config", ["true"])
    no_config["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "x"}}}]
    no_room = pytorch("no-room", ["true"])
    no_room["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}}
    expected = {
        "no-image": ("ErrImageNeverPull", 'Container image "localhost/no-such-image:1" is not present'),
        "no-config": ("CreateContainerConfigError", 'configmap "absent" not found'),
        "no-room": ("Unschedulable", "Insufficient cpu"),
    }
    paths = {name: create(kube, namespace, job) for name, job in
             (("no-image", no_image), ("no-config", no_config), ("no-room", no_room))}
    for name, (reason, message) in expected.items():
        cond = Kube.wait_for(
            lambda: (c := replica_failure(kube, paths[name])) and reason in c.get("message", "") and c,
            timeout=120, interval=0.5, what=f"{name}'s ReplicaFailure condition to name {reason}",
        )
        assert f"{name}-master-0" in cond["message"] and message in cond["message"], cond
        assert cond["status"] == "False" and cond["reason"] == "ReplicaWaiting", cond
        job = kube.get(paths[name])
        assert job["status"]["phase"] == "Pending", job["status"]
        assert condition(job, "Running")["status"] == "False"
    warnings = kube.wait_for(
        lambda: (w := [e for e in kube.list(core_path(namespace, "events")) if e["reason"] == "ReplicaWaiting"])
        and len({e["involvedObject"]["name"] for e in w}) >= len(expected) and w,
        timeout=30, interval=0.3, what="a ReplicaWaiting Warning for each job",
    )
    assert sorted(e["involvedObject"]["name"] for e in warnings) == sorted(expected), warnings


def test_oom_killed_container_is_reported_as_such(node, kube: Kube, namespace: str) -> None:
    """A container over its memory limit is killed by the kernel (exit 137): the job's failure
    message and Warning say OOMKilled, not just an exit code."""
    job = pytorch("hungry", ["python", "-c", "x = bytearray(1 << 30); print(len(x))"], policy="Never")
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"memory": "64Mi"}}
    path = create(kube, namespace, job)
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=180)
    assert done["status"]["phase"] == "Failed", done["status"]
    message = condition(done, "ReplicaFailure")["message"]
    assert "hungry-master-0 failed with exit code 137 (OOMKilled)" in message, message
    failed = kube.wait_for_events(
        namespace, lambda e: e["involvedObject"]["name"] == "hungry" and e["type"] == "Warning"
        and "OOMKilled" in e["message"], what="the job's OOMKilled Warning",
    )
    assert failed[0]["reason"] != "ReplicaWaiting", failed
