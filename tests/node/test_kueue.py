"""Issue 24 on the real node: ``t9kScheduler`` queues and priorities through Kueue v0.17.0, with the
operator in the cluster, real pods, the real kube-scheduler and Kueue's own controller.

Each test makes its own ResourceFlavor, ClusterQueue and LocalQueue (conftest ``make_queues``) with
a CPU quota sized from what the node has free when the test starts: ``r``, 40 % of the free CPU, is
one job's request and the whole quota, so Kueue admits one job at a time while the node could run
two: what holds a job back is the quota, not the node.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..cluster.kube import Kube, core_path, pod_path
from .conftest import KUEUE, delete_queues, exec_ending_its_container, lease_holder, make_queues, wait_phase
from .test_gang import create, describe, free_millicpu, gang_job, job_pods


def queued_job(name: str, cpu_m: int, priority: int, command: str, queue: str = "default") -> dict[str, Any]:
    job = gang_job(name, 1, cpu_m, priority, command)
    job["spec"]["scheduler"]["t9kScheduler"]["queue"] = queue
    return job


def condition(job: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def workloads(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return kube.list(f"{KUEUE}/namespaces/{ns}/workloads")


def events_of(kube: Kube, ns: str, name: str) -> list[str]:
    return [e["reason"] for e in kube.list(core_path(ns, "events")) if e["involvedObject"]["name"] == name]


@pytest.fixture
def quota(kube: Kube, namespace: str):
    """One job's worth of CPU (``r`` millicpu) as the LocalQueue ``default``'s quota, preemption
    ``LowerPriority`` within the ClusterQueue; yields ``r``."""
    r = free_millicpu(kube) * 2 // 5
    make_queues(kube, namespace, cpu=f"{r}m")
    yield r
    delete_queues(kube, namespace)


def test_the_quota_admits_one_job_at_a_time_and_by_priority(node, kube: Kube, namespace: str, quota: int) -> None:
    first = create(kube, namespace, queued_job("first", quota, 50, "sleep 6"))
    Kube.wait_for(
        lambda: [p for p in job_pods(kube, namespace, "first") if p["status"].get("phase") == "Running"],
        timeout=180, interval=0.3, what="the first job running",
    )
    low = create(kube, namespace, queued_job("low", quota, 10, "sleep 1"))
    high = create(kube, namespace, queued_job("high", quota, 40, "sleep 1"))
    # Both wait for quota, with no pod, and say so in Kueue's words.
    for path, name in ((low, "low"), (high, "high")):
        waiting = Kube.wait_for(
            lambda path=path: (q := condition(kube.get(path), "Queued")) and q["reason"] == "Pending" and kube.get(path),
            timeout=60, interval=0.3, what=f"{name} to wait for quota",
        )
        assert "insufficient unused quota for cpu" in condition(waiting, "Queued")["message"], waiting["status"]
        assert waiting["status"]["phase"] == "Pending"
        assert job_pods(kube, namespace, name) == []
    done = {n: wait_phase(kube, p, ("Succeeded", "Failed"), timeout=240) for n, p in
            (("first", first), ("high", high), ("low", low))}  # fmt: skip
    assert {n: j["status"]["phase"] for n, j in done.items()} == dict.fromkeys(done, "Succeeded")
    # One at a time, and the higher priority first although submitted later.
    assert done["first"]["status"]["completionTime"] <= done["high"]["status"]["startTime"]
    assert done["high"]["status"]["completionTime"] <= done["low"]["status"]["startTime"]
    assert "Admitted" in events_of(kube, namespace, "low")
    # Every quota given back: the finished jobs' Workloads are gone.
    Kube.wait_for(lambda: workloads(kube, namespace) == [], timeout=30, what="the Workloads deleted")


def test_a_higher_priority_job_preempts_a_lower_one_and_both_succeed(
    node, kube: Kube, namespace: str, quota: int
) -> None:
    low = create(kube, namespace, queued_job("low", quota, 10, "sleep 8"))
    Kube.wait_for(
        lambda: [p for p in job_pods(kube, namespace, "low") if p["status"].get("phase") == "Running"],
        timeout=180, interval=0.3, what="the low job running",
    )
    (before,) = workloads(kube, namespace)
    high = create(kube, namespace, queued_job("high", quota, 90, "sleep 1"))
    seen: set[str] = set()

    def low_phase() -> dict[str, Any]:
        job = kube.get(low)
        seen.add(job["status"]["phase"])
        return job

    high_done = wait_phase(kube, high, ("Succeeded", "Failed"), timeout=240)
    assert high_done["status"]["phase"] == "Succeeded", high_done["status"]
    low_done = Kube.wait_for(
        lambda: (j := low_phase())["status"]["phase"] in ("Succeeded", "Failed") and j,
        timeout=240, interval=0.3, what="the low job to end",
    )
    st = low_done["status"]
    assert st["phase"] == "Succeeded" and "Failed" not in seen, (seen, st)
    assert st.get("backoffCount", 0) == 0 and all(t.get("restartCount", 0) == 0 for t in st["tasks"]), st
    assert condition(low_done, "Failed")["status"] == "False"
    reasons = events_of(kube, namespace, "low")
    assert "Evicted" in reasons and "RestartingReplica" not in reasons, reasons
    # It ran again after the other: evicted, queued with a new Workload, admitted again.
    assert high_done["status"]["completionTime"] <= st["startTime"]
    kueue_events = [e for e in kube.list(core_path(namespace, "events"))
                    if e["involvedObject"].get("uid") == before["metadata"]["uid"]]  # fmt: skip
    assert any(e["reason"] == "Preempted" for e in kueue_events), [(e["reason"], e["message"]) for e in kueue_events]


def test_a_missing_queue_is_named_and_the_job_holds_no_pod(node, kube: Kube, namespace: str, quota: int) -> None:
    path = create(kube, namespace, queued_job("lost", quota, 10, "true", queue="no-such-queue"))
    job = Kube.wait_for(
        lambda: (q := condition(kube.get(path), "Queued")) and q["reason"] == "Inadmissible" and kube.get(path),
        timeout=60, interval=0.3, what="Kueue to find the queue missing",
    )
    assert job["status"]["phase"] == "Pending"
    assert "LocalQueue no-such-queue doesn't exist" in condition(job, "Queued")["message"]
    assert job_pods(kube, namespace, "lost") == []
    text = describe(node, namespace, "genericjob", "lost")
    assert "waiting in LocalQueue no-such-queue: LocalQueue no-such-queue doesn't exist" in text, text
    assert "Inadmissible" in events_of(kube, namespace, "lost")
    (wl,) = workloads(kube, namespace)
    assert wl["spec"]["queueName"] == "no-such-queue" and wl["spec"]["priority"] == 10
    kube.delete(path)
    # The garbage collector deletes the Workload with its job.
    Kube.wait_for(lambda: workloads(kube, namespace) == [], timeout=60, what="the Workload deleted with the job")


def test_a_job_without_t9k_scheduler_is_untouched_by_kueue(node, kube: Kube, namespace: str, quota: int) -> None:
    job = queued_job("plain", quota, 0, "echo plain")
    del job["spec"]["scheduler"]
    path = create(kube, namespace, job)
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=180)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert condition(done, "Queued") is None
    assert workloads(kube, namespace) == []
    (pod,) = job_pods(kube, namespace, "plain")
    assert not any(k.startswith("kueue.x-k8s.io/") for k in pod["metadata"].get("labels") or {})
    assert not pod["spec"].get("schedulingGates")


# Its steps wait up to 120 + 240 + 240 s, and what the cluster shows is printed when the last one
# times out (failed once in ~20 runs, under load; not reproduced since): past pytest's 300 s.
@pytest.mark.timeout(900)
def test_restarts_of_the_operator_and_of_kueue_lose_nothing_and_duplicate_nothing(
    node, kube: Kube, kubectl, namespace: str, quota: int
) -> None:
    """A job waits for quota held by another; the operator's leader pod and Kueue's pod are
    deleted (both come back through their Deployments). The waiting job keeps its one Workload
    (same uid), gets no pod while it waits, and is admitted and succeeds once the quota is free."""
    holder = create(kube, namespace, queued_job("holder", quota, 50, "while [ ! -f /tmp/done ]; do sleep 0.2; done"))
    Kube.wait_for(
        lambda: [p for p in job_pods(kube, namespace, "holder") if p["status"].get("phase") == "Running"],
        timeout=180, interval=0.3, what="the holder running",
    )
    waiter = create(kube, namespace, queued_job("waiter", quota, 10, "echo waited"))
    Kube.wait_for(lambda: (q := condition(kube.get(waiter), "Queued")) and q["reason"] == "Pending",
                  timeout=60, interval=0.3, what="the waiter to wait for quota")
    (wl,) = [w for w in workloads(kube, namespace) if w["metadata"]["name"] == "waiter"]
    leader = lease_holder(kube)
    pods = kube.list("/api/v1/namespaces/t9k-jobs-system/pods", label_selector="app.kubernetes.io/name=t9k-jobs")
    leader_pod = next(p["metadata"]["name"] for p in pods if leader.startswith(p["metadata"]["name"]))
    kubectl("delete", "pod", "-n", "t9k-jobs-system", leader_pod, "--wait=false")
    for pod in kube.list(pod_path("kueue-system")):
        kubectl("delete", "pod", "-n", "kueue-system", pod["metadata"]["name"], "--wait=false")
    Kube.wait_for(lambda: (h := lease_holder(kube)) and not h.startswith(leader_pod), timeout=120,
                  interval=0.5, what="another operator pod to take the Lease")
    Kube.wait_for(
        lambda: kube.get("/apis/apps/v1/namespaces/kueue-system/deployments/kueue-controller-manager")["status"]
        .get("readyReplicas", 0) >= 1 and len(kube.list(pod_path("kueue-system"))) == 1,
        timeout=240, interval=0.5, what="Kueue back with one ready pod",
    )
    # Ready is not leading: Kueue's new pod answers its probes before it holds its Lease, and a
    # quota freed in that window was seen to strand the waiter (its Workload parked as inadmissible
    # by a replica not yet leading, never tried again; 1 run in ~20). The quota is freed once the
    # new pod leads, which is what this test is about: restarts that lose nothing.
    def kueue_leads() -> bool:
        names = [p["metadata"]["name"] for p in kube.list(pod_path("kueue-system"))]
        leases = kube.list("/apis/coordination.k8s.io/v1/namespaces/kueue-system/leases")
        held = [(lease.get("spec") or {}).get("holderIdentity") or "" for lease in leases]
        return len(names) == 1 and any(h.startswith(names[0]) for h in held)

    Kube.wait_for(kueue_leads, timeout=120, interval=0.5, what="Kueue's new pod to hold its Lease")
    assert job_pods(kube, namespace, "waiter") == []
    exec_ending_its_container(kubectl, namespace, "holder-worker-0", "touch", "/tmp/done")
    try:
        done = wait_phase(kube, waiter, ("Succeeded", "Failed"), timeout=240)
    except AssertionError as exc:  # what the cluster shows then, to tell which step stopped
        seen = [kubectl(*args, check=False).stdout[-3000:] for args in (
            ("get", "pods", "-n", namespace, "-o", "wide"),
            ("get", "workloads.kueue.x-k8s.io", "-n", namespace, "-o", "yaml"),
            ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp"),
            ("get", "genericjobs", "-n", namespace, "-o", "jsonpath={.items[*].status}"),
            ("logs", "-n", "t9k-jobs-system", "deployment/t9k-jobs-operator", "--tail=60"),
            ("logs", "-n", "kueue-system", "deployment/kueue-controller-manager", "--tail=60"),
        )]  # fmt: skip
        raise AssertionError(f"{exc}\n---\n" + "\n---\n".join(seen)) from None
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert wait_phase(kube, holder, ("Succeeded", "Failed"))["status"]["phase"] == "Succeeded"
    created = [e for e in kube.list(core_path(namespace, "events"))
               if e["involvedObject"].get("kind") == "Workload" and e["involvedObject"]["name"] == "waiter"]  # fmt: skip
    # Every event Kueue wrote about a "waiter" Workload is about the one made before the restarts.
    assert {e["involvedObject"].get("uid") for e in created} <= {wl["metadata"]["uid"]}, created
    # One pod, never replaced; the kubelet reports its phase a moment after its container ended.
    Kube.wait_for(lambda: [p["status"].get("phase") for p in job_pods(kube, namespace, "waiter")] == ["Succeeded"],
                  timeout=60, interval=0.3, what="the waiter's one pod Succeeded")
    assert done["status"].get("backoffCount", 0) == 0


@pytest.fixture
def visibility(node, kubectl):
    """Kueue's visibility API (its two APIServices, from Kueue's chart: ``tools/kueue/manifests.sh``
    without ``--no-visibility``) for this test only, Available; removed afterwards (the node's
    Kueue runs without them: an APIService the API server cannot reach breaks every discovery)."""
    import subprocess

    import yaml

    from .conftest import REPO

    rendered = subprocess.run(["bash", str(REPO / "tools" / "kueue" / "manifests.sh")], capture_output=True,
                              text=True, check=True, timeout=600).stdout.split()[-1]  # fmt: skip
    services = [d for d in yaml.safe_load_all(open(rendered)) if isinstance(d, dict) and d.get("kind") == "APIService"]
    assert len(services) == 2, [s["metadata"]["name"] for s in services]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(services))
    names = [s["metadata"]["name"] for s in services]
    try:
        Kube.wait_for(lambda: all(
            any(c["type"] == "Available" and c["status"] == "True" for c in
                yaml.safe_load(kubectl("get", "apiservice", n, "-o", "yaml").stdout)["status"].get("conditions", []))
            for n in names), timeout=180, interval=1, what="Kueue's visibility APIServices Available")  # fmt: skip
        yield
    finally:
        kubectl("delete", "apiservice", *names, "--ignore-not-found", check=False)


def test_describe_and_get_say_where_a_queued_job_stands(node, kube: Kube, kubectl, namespace: str, quota: int,
                                                        visibility) -> None:  # fmt: skip
    """Issue 43, part 5: with one job holding the quota, a second one waits; ``describe`` says
    "position 1 of 1 in LocalQueue default (ClusterQueue ...)" and ``get -o wide`` ``1/1``, from
    Kueue's visibility API."""
    import subprocess
    import sys

    create(kube, namespace, queued_job("holder", quota, 50, "sleep 60"))
    Kube.wait_for(lambda: [p for p in job_pods(kube, namespace, "holder") if p["status"].get("phase") == "Running"],
                  timeout=180, interval=0.3, what="the first job running")  # fmt: skip
    path = create(kube, namespace, queued_job("second", quota, 10, "true"))
    Kube.wait_for(lambda: (q := condition(kube.get(path), "Queued")) and q["reason"] == "Pending",
                  timeout=60, interval=0.3, what="the second job pending")  # fmt: skip
    line = f"position 1 of 1 in LocalQueue default (ClusterQueue queue-{namespace})"
    Kube.wait_for(lambda: line in describe(node, namespace, "genericjob", "second"), timeout=60, interval=1,
                  what="describe saying where it stands")  # fmt: skip
    wide = subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "get", "genericjob", "-n", namespace, "-o", "wide",
                           "--kubeconfig", str(node.kubeconfig)], capture_output=True, text=True, timeout=60)  # fmt: skip
    rows = {r.split()[0]: r.split() for r in wide.stdout.splitlines()[1:]}
    assert rows["second"][-1] == "1/1" and rows["holder"][-1] == "-", wide.stdout
    # The dashboard's job page says it as describe does.
    import json
    import os

    from tests.dashboard.conftest import Dashboard

    board = Dashboard("--kubeconfig", str(node.kubeconfig), "-n", namespace,
                      env={**os.environ, "KUBECONFIG": str(node.kubeconfig)})  # fmt: skip
    try:
        page = Kube.wait_for(lambda: (d := json.loads(board.get(f"/api/job/gj/second?namespace={namespace}").read()))
                             and line in (d.get("why") or "") and d, timeout=60, interval=1, what="the page's why")  # fmt: skip
        assert page["why"].endswith(line), page["why"]
    finally:
        board.stop()
    kubectl("delete", "genericjob", "-n", namespace, "holder", "second", "--wait=false")
