"""Issue 33 against the real API server: the operator's way out when the API server hangs, a
wait across an API server that goes away and comes back, Events counted as client-go counts
them, a wait on a job the operator leaves alone, and a bare pod that only carries a job's labels.

The API server "hangs" through a TCP relay that holds every byte (``NetCut.freeze``) and "goes
away" through one that refuses connections (``NetCut.cut``); the faults of answers and credential
plugins are in tests/cli/test_api_faults.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import helpers

from .kube import Kube, job_path, pod_path
from .netcut import ThreadedNetCut
from .operator_proc import OperatorProcess
from .test_invalid_spec import deepspeed, invalid_events

LIMIT = 90.0
#: SIGTERM to the end of the operator process, at most (the issue's goal).
STOP_WITHIN = 5.0


def cli(kubeconfig: Path, *args: str, timeout: float = LIMIT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", *args], capture_output=True, text=True, timeout=timeout, env=env,
        check=False,
    )  # fmt: skip


def stop_took(op: OperatorProcess) -> tuple[int, float]:
    """SIGTERM the operator; ``(its exit code, seconds until it ended)``."""
    assert op.proc is not None and op.proc.poll() is None, op.tail()
    started = time.monotonic()
    op.proc.send_signal(signal.SIGTERM)
    try:
        code = op.proc.wait(60)
    except subprocess.TimeoutExpired:
        op.proc.kill()
        raise AssertionError(f"the operator did not end within 60 s of SIGTERM:\n{op.tail()}") from None
    return code, time.monotonic() - started


# ------------------------------------------------------------------ the operator's way out


def test_the_operator_exits_within_seconds_of_sigterm_while_the_api_server_hangs(
    kube: Kube, namespace: str, control_plane, tmp_path: Path
) -> None:
    """Issue 33: with a hung API server the operator took 23-26 s to exit on SIGTERM (the last
    Events and the Lease's release waited for their requests). Leading, with a job reconciled,
    then the API server hangs: SIGTERM ends it, exit 0, within 5 s."""
    ns = namespace
    net = ThreadedNetCut(control_plane.server)
    kubeconfig = net.kubeconfig(control_plane.kubeconfig, tmp_path / "kubeconfig")
    common = ["-n", ns, "--lease-namespace", ns, "--lease-name", "t9k-jobs-hung", "--identity", "op"]
    op = OperatorProcess(kubeconfig, tmp_path / "op.log", *common).start()
    try:
        kube.wait_for(op.leading, timeout=30, what="leadership")
        kube.create(job_path(ns, "GenericJob"), helpers.job("GenericJob", "hung", {"replicaSpecs": [
            helpers.replica("worker", 2, helpers.template(["true"], name="main", image="busybox"))]}, namespace=ns))  # fmt: skip
        kube.wait_for(lambda: len(kube.list(pod_path(ns))) == 2, what="the job's pods")
        net.freeze()  # from now on the renewals, and the Lease's release at the stop, hang
        code, took = stop_took(op)
        assert code == 0, f"exit {code}:\n{op.tail()}"
        assert took < STOP_WITHIN, f"{took:.1f} s from SIGTERM to exit:\n{op.tail()}"
        assert "Traceback" not in op.tail(400)
    finally:
        net.thaw()
        op.stop()
        net.close()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """``https://127.0.0.1:PORT`` of a socket that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(5)
    for conn in accepted:
        conn.close()
    listener.close()


def test_the_operator_exits_within_seconds_of_sigterm_while_discovery_waits(
    tmp_path: Path, silent_server: str, control_plane
) -> None:
    """Started against an API server that never answers, the operator waits in discovery (one
    request of up to 30 s); SIGTERM ends it at once, exit 0."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(control_plane.kubeconfig.read_text().replace(control_plane.server, silent_server))
    op = OperatorProcess(kubeconfig, tmp_path / "op.log", "--no-leader-elect").start(wait_ready=False)
    try:
        def waiting() -> bool:  # serving /readyz, and waiting for the API server
            try:
                return op.http("/readyz")[0] == 503
            except OSError:
                return False

        Kube.wait_for(waiting, timeout=30, what="the operator serving, waiting for the API server")
        code, took = stop_took(op)
        assert code == 0, f"exit {code}:\n{op.tail()}"
        assert took < STOP_WITHIN, f"{took:.1f} s from SIGTERM to exit:\n{op.tail()}"
    finally:
        op.stop()


# ------------------------------------------------------------------ a wait across a restart


def test_wait_rides_out_an_api_server_that_goes_away_and_comes_back(
    kube: Kube, namespace: str, control_plane, tmp_path: Path
) -> None:
    """The link to the API server is cut (connections refused, as while it restarts) during a
    ``wait --timeout 90``; it comes back, the job succeeds: exit 0, not 1."""
    ns = namespace
    net = ThreadedNetCut(control_plane.server)
    kubeconfig = net.kubeconfig(control_plane.kubeconfig, tmp_path / "kubeconfig")
    kube.create(job_path(ns, "GenericJob"), helpers.job("GenericJob", "across", {"replicaSpecs": [
        helpers.replica("worker", 1, helpers.template(["true"], name="main", image="busybox"))]}, namespace=ns))  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    waiter = subprocess.Popen(
        [sys.executable, "-m", "t9k_jobs.cli", "wait", "gj", "across", "-n", ns, "--for", "Succeeded", "--timeout", "90"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        # The wait is watching once the relay carries a long-lived connection; then cut it.
        kube.wait_for(lambda: net.net.connections > 0, timeout=30, what="the wait connected")
        net.cut()
        time.sleep(3)  # the API server is away this long (no condition: it is the fault's length)
        assert waiter.poll() is None, waiter.communicate()
        net.mend()
        job = kube.get(job_path(ns, "GenericJob", "across"))
        job["status"] = {"phase": "Succeeded"}
        kube.replace_status(job_path(ns, "GenericJob", "across") + "/status", job)
        out, err = waiter.communicate(timeout=LIMIT)
    finally:
        if waiter.poll() is None:
            waiter.kill()
        net.close()
    assert waiter.returncode == 0, err
    assert out.strip() == "GenericJob across is Succeeded"


# ------------------------------------------------------------------ Events counted, a wait on an invalid job


@pytest.fixture(scope="module")
def operator(control_plane, tmp_path_factory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("operator-hardening") / "operator.log"
    op = OperatorProcess(control_plane.kubeconfig, log, "--no-leader-elect").start()
    yield op
    code = op.stop()
    assert code == 0, f"operator exited {code} on SIGTERM:\n{op.tail()}"


def test_a_repeated_event_is_counted_not_made_again(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """Issue 33: the operator made one InvalidSpec Event per version of a spec that stayed
    invalid the same way; client-go's recorder counts a repeat on the one Event (count,
    lastTimestamp). Three versions, one Event, count 3."""
    ns, name = namespace, "again"
    kube.create(job_path(ns, "DeepSpeedJob"), deepspeed(name, ns, 5))
    (first,) = kube.wait_for(lambda: invalid_events(kube, ns, name), timeout=LIMIT, what="the InvalidSpec event")
    for i in (1, 2):  # the template's annotations: a new version of the spec, as invalid as before
        kube.patch(job_path(ns, "DeepSpeedJob", name),
                   {"spec": {"worker": {"template": {"metadata": {"annotations": {"edit": str(i)}}}}}})  # fmt: skip
        kube.wait_for(
            lambda i=i: [e.get("count") for e in invalid_events(kube, ns, name)] == [i + 1], timeout=LIMIT,
            what=f"the InvalidSpec event counted {i + 1} times",
        )  # fmt: skip
    (event,) = invalid_events(kube, ns, name)
    assert event["metadata"]["name"] == first["metadata"]["name"]
    assert event["firstTimestamp"] == first["firstTimestamp"] and event["message"] == first["message"]
    assert kube.get(job_path(ns, "DeepSpeedJob", name))["metadata"]["generation"] == 3


def test_wait_on_a_job_the_operator_leaves_alone_ends_at_once(
    kube: Kube, namespace: str, operator: OperatorProcess, control_plane
) -> None:
    """Issue 33: wait on a job marked InvalidSpec waited its whole timeout. It ends at once,
    exit 1, saying why."""
    ns, name = namespace, "alone"
    kube.create(job_path(ns, "DeepSpeedJob"), deepspeed(name, ns, 5))
    kube.wait_for(lambda: invalid_events(kube, ns, name), timeout=LIMIT, what="the InvalidSpec event")
    started = time.monotonic()
    done = cli(control_plane.kubeconfig, "wait", "dj", name, "-n", ns, "--for", "Succeeded", "--timeout", "300")
    assert time.monotonic() - started < 60
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        f"error: cannot wait for DeepSpeedJob {name} to be Succeeded: the operator leaves it alone until its spec "
        "changes: the job does not validate: spec.worker.template.spec.volumes: must be a list"
    ), done.stderr


# ------------------------------------------------------------------ a bare pod is no replica


def test_a_bare_pod_with_a_jobs_labels_is_not_its_replica(kube: Kube, namespace: str, control_plane) -> None:
    """Issue 33: the verbs listed a Pod that carries a job's owner labels but no controller owner
    reference as a replica (the operator rightly ignores it). describe and logs do not. The job's
    spec is one the operator leaves alone (when one runs in this session), so only the test makes pods."""
    ns = namespace
    job = kube.create(job_path(ns, "DeepSpeedJob"), deepspeed("owned", ns, 5))
    labels = {
        "tensorstack.dev/owner-kind": "DeepSpeedJob", "tensorstack.dev/owner-name": "owned",
        "batch.tensorstack.dev/replica-type": "worker", "batch.tensorstack.dev/replica-index": "0",
    }  # fmt: skip

    def pod(name: str, refs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": labels, "ownerReferences": refs},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}}  # fmt: skip

    kube.create(pod_path(ns), pod("impostor", []))
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "someone", "uid": "0000", "controller": True}
    kube.create(pod_path(ns), pod("adopted", [other]))
    described = cli(control_plane.kubeconfig, "describe", "dj", "owned", "-n", ns)
    assert described.returncode == 0, described.stderr
    assert "impostor" not in described.stdout and "adopted" not in described.stdout, described.stdout
    logs = cli(control_plane.kubeconfig, "logs", "dj", "owned", "-n", ns)
    assert logs.returncode == 1 and "DeepSpeedJob owned has no pods" in logs.stderr, logs.stderr
    ref = {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "DeepSpeedJob", "name": "owned",
           "uid": job["metadata"]["uid"], "controller": True}  # fmt: skip
    kube.create(pod_path(ns), pod("owned-worker-0", [ref]))
    described = cli(control_plane.kubeconfig, "describe", "dj", "owned", "-n", ns)
    assert "owned-worker-0" in described.stdout and "impostor" not in described.stdout, described.stdout


def test_a_stopped_campaign_ends_the_work_it_started_while_leading(control_plane, namespace: str) -> None:
    """The operator's stop cancels its leader campaign; the workers it started while leading
    (kubernetes_asyncio runs them as a task of their own, cancelled only on a lost lease) must end
    with it, not go on mid-request after the process closed its HTTP session (seen: a pass of a
    worker left running wrote a status through the closed session, and the job was logged as a
    spec t9k-jobs cannot reconcile)."""
    import asyncio

    from t9k_jobs.cluster import leader
    from t9k_jobs.cluster.client import KubeClient

    async def go() -> tuple[bool, bool]:
        client = await KubeClient.from_config(control_plane.kubeconfig)
        leading = asyncio.Event()
        work: dict[str, asyncio.Task[Any]] = {}

        async def on_started() -> None:
            task = asyncio.current_task()
            assert task is not None
            work["task"] = task
            leading.set()
            await asyncio.Event().wait()  # a worker that only a cancel ends

        async def on_stopped() -> None:
            pass

        campaign = asyncio.create_task(
            leader.lead(client, "t9k-jobs-campaign", namespace, "op", on_started, on_stopped)
        )
        try:
            await asyncio.wait_for(leading.wait(), timeout=60)
            campaign.cancel()
            await asyncio.gather(campaign, return_exceptions=True)
            return work["task"].done(), work["task"].cancelled()
        finally:
            await client.close()

    done, cancelled = asyncio.run(go())
    assert done and cancelled, "the work started while leading outlived the campaign's cancel"
