"""DeepSpeedJob and ColossalAIJob in real pods: real sshd in the workers of a stock image (OpenSSH's
defaults, StrictModes on), the real launchers (deepspeed over pdsh, colossalai run over paramiko)."""

from __future__ import annotations

import re

from tests import helpers
from tests.helpers import template

from ..cluster.kube import Kube, core_path, job_path, pod_path
from .conftest import TRAINING_IMAGE, wait_phase
from .test_examples import apply_example, replicas
from .test_lifecycle import condition, create, running_pod


def final_accuracy(text: str) -> float:
    found = re.search(r"final test_accuracy ([\d.]+)", text)
    assert found, text[-3000:]
    return float(found.group(1))


def test_deepspeed_example_trains_over_ssh(node, kube: Kube, kubectl, namespace: str) -> None:
    """ZeRO over 2 workers: worker-0's deepspeed reaches both sshds with the job's key (refused
    before the keys were copied out of the Secret volume), trains to >= 0.90; worker-1, which only
    served ssh, then ends by itself and keeps its log."""
    job = apply_example(kubectl, "deepspeed-digits", namespace)
    name = job["metadata"]["name"]
    path = job_path(namespace, "DeepSpeedJob", name)
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=900)
    launcher = kubectl("logs", "-n", namespace, f"{name}-worker-0").stdout
    assert done["status"]["phase"] == "Succeeded", (done["status"], launcher[-3000:])
    assert final_accuracy(launcher) >= 0.90
    Kube.wait_for(lambda: replicas(kube.get(path))[f"{name}-worker-1"]["phase"] == "Succeeded", timeout=120,
                  what="worker-1 to end by itself once the launcher is done")
    worker = kubectl("logs", "-n", namespace, f"{name}-worker-1").stdout
    assert "Accepted publickey for root" in worker and "this worker is done" in worker, worker


def test_colossalai_example_trains_over_ssh(node, kube: Kube, kubectl, namespace: str) -> None:
    """The launcher's colossalai run reaches both workers' sshd (paramiko), the Booster trains to >= 0.90."""
    job = apply_example(kubectl, "colossalai-digits", namespace)
    name = job["metadata"]["name"]
    done = wait_phase(kube, job_path(namespace, "ColossalAIJob", name), ("Succeeded", "Failed"), timeout=900)
    launcher = kubectl("logs", "-n", namespace, f"{name}-launcher").stdout
    assert done["status"]["phase"] == "Succeeded", (done["status"], launcher[-3000:])
    assert final_accuracy(launcher) >= 0.90


def test_one_worker_deepspeed_job(node, kube: Kube, kubectl, namespace: str) -> None:
    """worker-0 alone: deepspeed reaches its own sshd over the job's Service name."""
    env = [{"name": "DS_ACCELERATOR", "value": "cpu"}, {"name": "OMP_NUM_THREADS", "value": "1"}]
    job = helpers.job("DeepSpeedJob", "solo", {
        "config": {"slotsPerWorker": 1, "run": {"python": ["train_deepspeed.py", "--epochs", "2"]}},
        "worker": {"replicas": 1, "template": template(name="worker", image=TRAINING_IMAGE, env=env)}})
    done = wait_phase(kube, create(kube, namespace, job), ("Succeeded", "Failed"), timeout=600)
    logs = kubectl("logs", "-n", namespace, "solo-worker-0").stdout
    assert done["status"]["phase"] == "Succeeded", (done["status"], logs[-3000:])
    assert "final test_accuracy" in logs


def test_colossalai_job_whose_launcher_fails(node, kube: Kube, kubectl, namespace: str) -> None:
    """A script that does not exist: torchrun fails on the workers, colossalai run exits 1, the job
    fails with the launcher's exit code."""
    job = helpers.job("ColossalAIJob", "broken", {
        "launcher": {"image": TRAINING_IMAGE},
        "worker": {"replicas": 1, "command": ["no_such_script.py"],
                   "template": template(name="worker", image=TRAINING_IMAGE)}})
    done = wait_phase(kube, create(kube, namespace, job), ("Succeeded", "Failed"), timeout=600)
    assert done["status"]["phase"] == "Failed", done["status"]
    assert "broken-launcher failed with exit code 1" in condition(done, "Failed")["message"], done["status"]
    assert kube.exists(pod_path(namespace, "broken-launcher"))


ELASTIC_SCRIPT = """\
import os, runpy, sys, time
world = int(os.environ.get("WORLD_SIZE", "1"))
print(f"rank {os.environ.get('RANK')} of {world}", flush=True)
if world < 2:
    # Wait for the second worker: the operator relaunches this launcher with both hosts.
    time.sleep(3600)
sys.argv = ["train_deepspeed.py", "--epochs", "2"]
runpy.run_path("/workspace/train_deepspeed.py", run_name="__main__")
"""


def test_deepspeed_elastic_scale_up_reaches_the_launcher(node, kube: Kube, kubectl, namespace: str) -> None:
    """§4.7 in real pods: raising ``expectedReplicas`` from 1 to 2 patches the hostfile ConfigMap
    in place (same uid), creates worker-1 and relaunches worker-0 (a new pod, no restart counted);
    deepspeed then reaches both sshds and trains with a world of 2."""
    kube.create(core_path(namespace, "configmaps"), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "elastic-script"},
        "data": {"elastic.py": ELASTIC_SCRIPT}})
    env = [{"name": "DS_ACCELERATOR", "value": "cpu"}, {"name": "OMP_NUM_THREADS", "value": "1"}]
    pod = template(name="worker", image=TRAINING_IMAGE, env=env,
                   volumeMounts=[{"name": "script", "mountPath": "/scripts"}],
                   pod={"volumes": [{"name": "script", "configMap": {"name": "elastic-script"}}]})
    job = helpers.job("DeepSpeedJob", "grow", {
        "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 2, "expectedReplicas": 1},
        "config": {"slotsPerWorker": 1, "run": {"python": ["/scripts/elastic.py"]}},
        "worker": {"replicas": 1, "template": pod}})
    path = create(kube, namespace, job)
    first = running_pod(kube, namespace, "grow-worker-0", timeout=300)
    Kube.wait_for(lambda: "rank 0 of 1" in kubectl("logs", "-n", namespace, "grow-worker-0", check=False).stdout,
                  timeout=300, what="the one-worker launch to start its rank")
    hostfile = kube.get(core_path(namespace, "configmaps", "grow-launch"))
    assert hostfile["data"]["hostfile"].count("slots=") == 1, hostfile["data"]

    kube.patch(path, {"spec": {"elastic": {"expectedReplicas": 2}}})
    relaunched = Kube.wait_for(
        lambda: (p := kube.get(pod_path(namespace, "grow-worker-0")))["metadata"]["uid"] != first["metadata"]["uid"]
        and not p["metadata"].get("deletionTimestamp") and p,
        timeout=300, interval=0.3, what="worker-0 to be relaunched")
    patched = kube.get(core_path(namespace, "configmaps", "grow-launch"))
    assert patched["metadata"]["uid"] == hostfile["metadata"]["uid"], "patched in place, not recreated"
    assert patched["data"]["hostfile"].count("slots=") == 2, patched["data"]
    assert relaunched["metadata"]["labels"]["batch.tensorstack.dev/restart-generation"] == \
        first["metadata"]["labels"]["batch.tensorstack.dev/restart-generation"], "a relaunch is no restart"
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=900)
    launcher = kubectl("logs", "-n", namespace, "grow-worker-0").stdout
    assert done["status"]["phase"] == "Succeeded", (done["status"], launcher[-3000:])
    assert "rank 1 of 2" in launcher and "rank 0 of 2" in launcher, launcher[-3000:]
    assert final_accuracy(launcher) > 0
    assert done["status"].get("backoffCount", 0) == 0, done["status"]
