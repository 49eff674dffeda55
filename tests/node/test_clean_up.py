"""cleanUpPolicy Unfinished with real pods: ranks that end together keep their results and logs."""

from __future__ import annotations

from tests.helpers import job, replica, template

from ..cluster.kube import Kube, job_path
from .conftest import TRAINING_IMAGE, wait_phase

# Rank 1 tells rank 0 it is done and rank 0 answers: both exit within milliseconds, and the kubelet
# reports the two ends up to a second or so apart (an exit is noticed within its 1 s relist, and a
# pod whose container ended still reads Running for about 1.2 s more).
TOGETHER = r"""
import socket, sys, time
rank, peer = int(sys.argv[1]), sys.argv[2]
if rank == 0:
    s = socket.create_server(("", 4000))
    c, _ = s.accept()
else:
    while True:
        try:
            c = socket.create_connection((peer, 4000), timeout=2)
            break
        except OSError:
            time.sleep(0.1)
c.sendall(b"x"); c.recv(1)
print(f"rank {rank} done", flush=True)
"""
JOBS = 10


def test_ranks_ending_together_keep_their_results(node, kube: Kube, kubectl, namespace: str) -> None:
    """Before the Unfinished clean-up waited a moment, 4 of 10 such jobs recorded rank 1 as Deleted
    (its pod deleted as unfinished, its logs lost) although it exited 0."""
    for i in range(JOBS):
        pod = template(["python", "-c", TOGETHER, "$(RANK)", f"together{i}-worker-0"], image=TRAINING_IMAGE)
        spec = {"runPolicy": {"cleanUpPolicy": "Unfinished"},
                "replicaSpecs": [replica("worker", 2, pod, restartPolicy="Never")]}
        manifest = job("PyTorchTrainingJob", f"together{i}", spec, namespace=namespace)
        kube.create(job_path(namespace, "PyTorchTrainingJob"), manifest)
    deleted = []
    for i in range(JOBS):
        done = wait_phase(kube, job_path(namespace, "PyTorchTrainingJob", f"together{i}"), ("Succeeded", "Failed"))
        assert done["status"]["phase"] == "Succeeded", done["status"]
        # The clean-up's grace ends; the final status must still hold both results.
        done = Kube.wait_for(
            lambda: (j := kube.get(job_path(namespace, "PyTorchTrainingJob", f"together{i}")))["status"]["aggregate"]
            .get("running", 0) == 0 and j, timeout=60, what=f"together{i} to have no running replica")
        phases = [r["phase"] for t in done["status"]["tasks"] for r in t["replicas"]]
        if phases != ["Succeeded", "Succeeded"]:
            deleted.append((f"together{i}", phases))
    assert not deleted, deleted
    assert "rank 1 done" in kubectl("logs", "-n", namespace, "together0-worker-1").stdout
