"""Crash safety and high availability: SIGKILL mid-reconcile, and Lease leader election."""

from __future__ import annotations

import signal
import time

from .kube import Kube, job_path, pod_path
from .netcut import ThreadedNetCut
from .operator_proc import OperatorProcess
from .test_operator import pods, pytorch, status, wait_replaced

JOBS = 24
REPLICAS = 4  # one master, three workers


def test_sigkill_mid_reconcile_then_restart_creates_no_duplicate(
    kube: Kube, namespace: str, control_plane, tmp_path
) -> None:
    ns = namespace
    first = OperatorProcess(
        control_plane.kubeconfig,
        tmp_path / "first.log",
        "--no-leader-elect",
        "-n",
        ns,
        "--kube-api-qps",
        "20",
        "--kube-api-burst",
        "5",
    ).start()
    for i in range(JOBS):
        kube.create(job_path(ns, "PyTorchTrainingJob"), pytorch(f"j{i}", ns, workers=REPLICAS - 1))
    # Kill it while it is creating pods: some exist, most do not yet.
    kube.wait_for(lambda: len(kube.list(pod_path(ns))) >= REPLICAS, timeout=60, what="first pods")
    first.kill(signal.SIGKILL)
    time.sleep(0.5)  # requests the dead process had already sent may still land
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.list(pod_path(ns))}
    assert len(before) < JOBS * REPLICAS, (
        "the operator finished before it was killed; the test proves nothing"
    )

    second = OperatorProcess(
        control_plane.kubeconfig, tmp_path / "second.log", "--no-leader-elect", "-n", ns
    ).start()
    try:
        kube.wait_for(lambda: len(kube.list(pod_path(ns))) >= JOBS * REPLICAS, timeout=120, what="all pods")
        time.sleep(1)  # anything extra would show up now
        after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.list(pod_path(ns))}
        assert len(after) == JOBS * REPLICAS, f"{len(after)} pods for {JOBS * REPLICAS} replicas"
        for i in range(JOBS):
            assert set(pods(kube, ns, f"j{i}")) == {f"j{i}-master-0"} | {
                f"j{i}-worker-{w}" for w in range(REPLICAS - 1)
            }
        # Pods made before the crash were kept, not replaced.
        assert {n: after[n] for n in before} == before

        # Every job reaches the right phase once its pods run and its master succeeds.
        for i in range(JOBS):
            for name in pods(kube, ns, f"j{i}"):
                kube.set_pod_phase(ns, name, "Running")
        for i in range(JOBS):
            kube.set_pod_phase(ns, f"j{i}-master-0", "Succeeded")
        for i in range(JOBS):
            kube.wait_for(
                lambda i=i: status(kube, ns, "PyTorchTrainingJob", f"j{i}").get("phase") == "Succeeded",
                timeout=60,
                what=f"j{i} Succeeded",
            )
        assert second.metric("controller_runtime_reconcile_total") > 0
        created = second.metric("t9k_jobs_pods_created_total", kind="PyTorchTrainingJob")
        assert created == JOBS * REPLICAS - len(before), (
            "the restarted operator created exactly the missing pods"
        )
    finally:
        second.stop()


def test_leader_election_takeover(kube: Kube, namespace: str, control_plane, tmp_path) -> None:
    ns = namespace
    common = ["-n", ns, "--lease-namespace", ns, "--lease-name", "t9k-jobs-test"]
    a = OperatorProcess(control_plane.kubeconfig, tmp_path / "a.log", *common, "--identity", "op-a").start()
    kube.wait_for(a.leading, timeout=30)
    b = OperatorProcess(control_plane.kubeconfig, tmp_path / "b.log", *common, "--identity", "op-b").start()
    try:
        assert "standby" in b.http("/readyz")[1]
        lease = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/t9k-jobs-test")
        assert lease["spec"]["holderIdentity"] == "op-a"

        kube.create(job_path(ns, "PyTorchTrainingJob"), pytorch("before", ns, workers=1))
        kube.wait_for(lambda: len(pods(kube, ns, "before")) == 2, what="pods made by the leader")
        assert b.metric("t9k_jobs_pods_created_total") == 0, "the standby must not act"

        a.kill(signal.SIGKILL)
        started = time.monotonic()
        kube.wait_for(b.leading, timeout=40, what="b takes over")
        took = time.monotonic() - started
        assert took < 30, f"takeover took {took:.1f} s"
        lease = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/t9k-jobs-test")
        assert lease["spec"]["holderIdentity"] == "op-b"

        kube.create(job_path(ns, "PyTorchTrainingJob"), pytorch("after", ns, workers=1))
        kube.wait_for(lambda: len(pods(kube, ns, "after")) == 2, what="pods made by the new leader")
        assert b.metric("leader_election_master_status") == 1
    finally:
        b.stop()
        a.stop()


def test_clean_shutdown_releases_the_lease(kube: Kube, namespace: str, control_plane, tmp_path) -> None:
    ns = namespace
    common = ["-n", ns, "--lease-namespace", ns, "--lease-name", "t9k-jobs-release"]
    a = OperatorProcess(control_plane.kubeconfig, tmp_path / "a.log", *common, "--identity", "op-a").start()
    kube.wait_for(a.leading, timeout=30)
    b = OperatorProcess(control_plane.kubeconfig, tmp_path / "b.log", *common, "--identity", "op-b").start()
    try:
        assert a.stop() == 0
        started = time.monotonic()
        kube.wait_for(b.leading, timeout=20, what="b takes over")
        assert time.monotonic() - started < 10, (
            "a released lease is taken at the next retry, not after expiry"
        )
    finally:
        b.stop()


def test_network_partition_short_is_ridden_out_long_gives_up_the_lease(
    kube: Kube, namespace: str, control_plane, tmp_path
) -> None:
    """Cut the operator off the API server (a TCP relay it talks through stops relaying).

    Shorter than the renew deadline (10 s): it keeps the Lease, reconnects its watches and acts
    on what happened meanwhile. Longer: it must stop acting and exit 1, as client-go's leader
    elector does, so that its Deployment restarts it and no two leaders ever act at once.
    """
    ns = namespace
    net = ThreadedNetCut(control_plane.server)
    kubeconfig = net.kubeconfig(control_plane.kubeconfig, tmp_path / "kubeconfig")
    common = ["-n", ns, "--lease-namespace", ns, "--lease-name", "t9k-jobs-partition"]
    op = OperatorProcess(kubeconfig, tmp_path / "op.log", *common, "--identity", "op").start()
    try:
        kube.wait_for(op.leading, timeout=30, what="leadership")
        kube.create(job_path(ns, "PyTorchTrainingJob"), pytorch("a", ns, workers=2))
        kube.wait_for(lambda: len(pods(kube, ns, "a")) == 3, what="pods of a")
        for name in pods(kube, ns, "a"):
            kube.set_pod_phase(ns, name, "Running")
        kube.wait_for(lambda: status(kube, ns, "PyTorchTrainingJob", "a").get("phase") == "Running")
        failed_uid = pods(kube, ns, "a")["a-worker-1"]["metadata"]["uid"]

        net.cut()
        kube.set_pod_phase(ns, "a-worker-1", "Failed", exit_code=1)  # OnFailure: to be replaced
        kube.create(job_path(ns, "PyTorchTrainingJob"), pytorch("b", ns, workers=1))
        time.sleep(4)
        assert not pods(kube, ns, "b"), "nothing can be created through a cut link"
        net.mend()

        kube.wait_for(lambda: len(pods(kube, ns, "b")) == 2, timeout=30, what="pods of b after the cut")
        wait_replaced(kube, ns, "a", "a-worker-1", failed_uid)
        assert op.proc is not None and op.proc.poll() is None, f"exited after a short cut:\n{op.tail()}"
        assert op.leading(), "a short cut must not cost the Lease"

        net.cut()
        try:
            code = op.proc.wait(30)
        finally:
            net.mend()
        assert code == 1, f"exit code {code} after losing the Lease:\n{op.tail()}"
        assert len(pods(kube, ns, "b")) == 2 and len(pods(kube, ns, "a")) == 3, "nothing acted on blind"
    finally:
        op.stop()
        net.close()


def test_an_operator_started_while_the_api_server_is_unreachable_waits_for_it(
    kube: Kube, namespace: str, control_plane, tmp_path
) -> None:
    """Started with the API server cut off (after an outage, the operator pod restarts before the
    API server is back): it stays up, healthy and not ready, retrying with backoff, and works as
    soon as the link is back, instead of exiting into a CrashLoopBackOff."""
    ns = namespace
    net = ThreadedNetCut(control_plane.server)
    kubeconfig = net.kubeconfig(control_plane.kubeconfig, tmp_path / "kubeconfig")
    net.cut()
    op = OperatorProcess(kubeconfig, tmp_path / "op.log", "-n", ns, "--no-leader-elect").start(wait_ready=False)
    try:
        kube.wait_for(lambda: "trying again" in op.tail(), timeout=60, what="a failed discovery, retried")
        kube.wait_for(lambda: op.http("/healthz")[0] == 200, timeout=30, what="/healthz while waiting")
        code, body = op.http("/readyz")
        assert code == 503 and "waiting for the API server" in body, (code, body)
        kube.wait_for(lambda: op.tail().count("trying again") >= 2, timeout=60, what="a second retry")
        assert op.proc is not None and op.proc.poll() is None, f"exited while waiting:\n{op.tail()}"
        net.mend()
        op.wait_ready(timeout=60)
        kube.create(job_path(ns, "PyTorchTrainingJob"), pytorch("late", ns, workers=1))
        kube.wait_for(lambda: len(pods(kube, ns, "late")) == 2, timeout=30, what="pods of late")
    finally:
        op.stop()
        net.close()
