"""What the local runtime tells the engine about a pod: the kubelet's phases and reasons."""

from __future__ import annotations

from pathlib import Path

from t9k_jobs.engine import ContainerState
from t9k_jobs.local.processes import LocalPod


def local_pod(tmp_path: Path, init: bool = False) -> LocalPod:
    spec: dict = {"containers": [{"name": "main", "command": ["true"]}]}
    if init:
        spec["initContainers"] = [{"name": "prep", "command": ["true"]}]
    manifest = {
        "metadata": {
            "name": "j-worker-0",
            "labels": {
                "batch.tensorstack.dev/replica-type": "worker",
                "batch.tensorstack.dev/replica-index": "0",
            },
        },
        "spec": spec,
    }
    return LocalPod(manifest, {}, tmp_path, tmp_path, lambda *a: None, lambda: None)


def test_waiting_containers_carry_the_kubelets_benign_reasons(tmp_path: Path) -> None:
    pod = local_pod(tmp_path, init=True)
    seen = pod.observe()
    assert seen.phase == "Pending"
    assert seen.containers == (ContainerState("main", "Waiting", None, "PodInitializing"),)
    assert seen.init_containers == (ContainerState("prep", "Waiting", None, "ContainerCreating"),)
    pod.init[0].exit_code = 0
    assert pod.observe().containers == (ContainerState("main", "Waiting", None, "ContainerCreating"),)


def test_terminated_containers_carry_reasons(tmp_path: Path) -> None:
    pod = local_pod(tmp_path)
    pod.main[0].exit_code = 0
    assert pod.observe().containers == (ContainerState("main", "Terminated", 0, "Completed"),)
    pod.main[0].exit_code = 137
    assert pod.observe().containers == (ContainerState("main", "Terminated", 137, "Error"),)


def test_a_container_that_cannot_start_says_why(tmp_path: Path) -> None:
    pod = local_pod(tmp_path)
    pod.main[0].exit_code, pod.main[0].error = 128, "container 'main': workingDir '/nope' does not exist"
    seen = pod.observe()
    assert seen.phase == "Failed" and seen.reason == "ContainerCannotRun"
    assert seen.containers == (
        ContainerState(
            "main",
            "Terminated",
            128,
            "ContainerCannotRun",
            "container 'main': workingDir '/nope' does not exist",
        ),
    )
