"""Issue 22 on the real node: ``t9kScheduler`` jobs gang-scheduled by Kubernetes v1.37.2's own
scheduler (Workload API, gate ``GenericWorkload``), with real pods, a real kube-scheduler and the
operator running in the cluster.

CPU requests are sized from what the node has free when each test starts (its allocatable CPU less
what the pods on it request), so the tests hold whatever else runs on the node: ``r`` is 40 % of
it, so two ranks of ``r`` fit and three do not.

The node runs Kueue, so the operator queues these jobs through it first: each test's namespace has
the LocalQueue ``default`` over a quota no test reaches (conftest ``default_queue``), Kueue admits
every job at once, and placement is the scheduler's, as tested here.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests import helpers
from tests.helpers import replica, template

from ..cluster.kube import Kube, core_path, job_path, pod_path
from .conftest import TRAINING_IMAGE, wait_phase

NATIVE = "/apis/scheduling.k8s.io/v1beta1"
#: Namespaces whose pods stay on the node for the whole session (the operator's, Kueue's, CoreDNS's).
SYSTEM_NAMESPACES = ("t9k-jobs-system", "kueue-system", "kube-system")
pytestmark = pytest.mark.usefixtures("default_queue")


def free_millicpu(kube: Kube) -> int:
    """The node's allocatable CPU less the requests of the pods bound to it that have not ended,
    once no pod of another test is left running (the operator's and Kueue's pods stay)."""
    Kube.wait_for(
        lambda: not [p for p in node_pods(kube) if p[0] not in SYSTEM_NAMESPACES and p[2] not in ("Succeeded", "Failed")],
        timeout=180, interval=0.5, what=f"the pods of earlier tests to end: {node_pods(kube)}",
    )
    (node,) = kube.list("/api/v1/nodes")
    total = _millis(node["status"]["allocatable"]["cpu"])
    used = 0
    for pod in kube.list("/api/v1/pods"):
        if pod["spec"].get("nodeName") and pod["status"].get("phase") not in ("Succeeded", "Failed"):
            for c in pod["spec"]["containers"]:
                used += _millis(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
    return total - used


def node_pods(kube: Kube) -> list[tuple[str, str, str, str]]:
    """(namespace, name, phase, CPU requests) of every pod bound to the node: for messages."""
    return [
        (p["metadata"]["namespace"], p["metadata"]["name"], p["status"].get("phase", ""),
         ",".join(((c.get("resources") or {}).get("requests") or {}).get("cpu", "-") for c in p["spec"]["containers"]))
        for p in kube.list("/api/v1/pods") if p["spec"].get("nodeName")
    ]


def _millis(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def gang_job(name: str, ranks: int, cpu_m: int, priority: int, command: str) -> dict[str, Any]:
    """A GenericJob of ``ranks`` workers, each requesting ``cpu_m`` millicpu, on the T9k scheduler."""
    pod = template(
        ["sh", "-c", command],
        name="worker",
        image=TRAINING_IMAGE,
        pod={"terminationGracePeriodSeconds": 2},
        resources={"requests": {"cpu": f"{cpu_m}m"}, "limits": {"cpu": f"{cpu_m}m"}},
    )
    spec = {
        "scheduler": {"t9kScheduler": {"queue": "default", "priority": priority}},
        "replicaSpecs": [replica("worker", ranks, pod, restartPolicy={"policy": "Never"})],
    }
    return helpers.job("GenericJob", name, spec)


def create(kube: Kube, ns: str, obj: dict[str, Any]) -> str:
    obj["metadata"]["namespace"] = ns
    kube.create(job_path(ns, obj["kind"]), obj)
    return job_path(ns, obj["kind"], obj["metadata"]["name"])


def job_pods(kube: Kube, ns: str, job: str) -> list[dict[str, Any]]:
    return kube.list(pod_path(ns), label_selector=f"tensorstack.dev/owner-name={job}")


def describe(node, ns: str, kind: str, name: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "describe", kind, name, "-n", ns, "--kubeconfig", str(node.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def pod_group(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    return kube.get(f"{NATIVE}/namespaces/{ns}/podgroups/{name}")


def pg_condition(pg: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (pg.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def test_a_t9k_scheduler_job_succeeds_as_a_gang(node, kube: Kube, namespace: str) -> None:
    r = free_millicpu(kube) * 2 // 5
    path = create(kube, namespace, gang_job("together", 2, r, 50, "echo rank $RANK; sleep 1"))
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=240)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    pg = pod_group(kube, namespace, "together")
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    scheduled = pg_condition(pg, "PodGroupInitiallyScheduled")
    assert scheduled is not None and scheduled["status"] == "True", pg.get("status")
    pods = job_pods(kube, namespace, "together")
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "together"}
        assert pod["spec"]["priority"] == 50
    assert not any(c["type"] == "GangScheduling" for c in done["status"]["conditions"])


def test_a_gang_that_cannot_fit_binds_none_while_a_smaller_job_runs(node, kube: Kube, namespace: str) -> None:
    """Three ranks of 40 % of the free CPU: two would fit, so one-by-one scheduling would bind two and
    leave them idle; the gang binds none and says why. A two-rank job submitted after it runs."""
    r = free_millicpu(kube) * 2 // 5
    big = create(kube, namespace, gang_job("big", 3, r, 50, "sleep 1"))
    Kube.wait_for(
        lambda: (c := pg_condition(pod_group(kube, namespace, "big"), "PodGroupInitiallyScheduled"))
        and c["status"] == "False" and c,
        timeout=180, interval=0.5, what="the big gang to be found unschedulable",
    )
    small = create(kube, namespace, gang_job("small", 2, r, 50, "sleep 1"))
    done = wait_phase(kube, small, ("Succeeded", "Failed"), timeout=240)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    pods = job_pods(kube, namespace, "big")
    assert len(pods) == 3
    bound = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
    assert bound == [], f"no pod of the gang is bound (r={r}m; {node_pods(kube)})"
    job = kube.get(big)
    assert job["status"]["phase"] == "Pending", job["status"]
    text = describe(node, namespace, "genericjob", "big")
    assert "gang" in text.lower() and "Insufficient cpu" in text, text
    kube.delete(big)


def test_a_higher_priority_gang_preempts_a_lower_one_as_a_unit(node, kube: Kube, namespace: str) -> None:
    """Two ranks of 40 % each at priority 10, running; then two ranks at priority 90, which fit only
    if the lower job gives way. The scheduler preempts both lower pods together; the operator
    recreates them without counting a restart or a backoff, and both jobs succeed."""
    r = free_millicpu(kube) * 2 // 5
    low = create(kube, namespace, gang_job("low", 2, r, 10, "sleep 20"))
    Kube.wait_for(
        lambda: len(p := job_pods(kube, namespace, "low")) == 2
        and all(x["status"].get("phase") == "Running" for x in p) and p,
        timeout=180, interval=0.5, what="both ranks of the low job running",
    )
    first = {p["metadata"]["name"]: p["metadata"]["uid"] for p in job_pods(kube, namespace, "low")}
    high = create(kube, namespace, gang_job("high", 2, r + r // 4, 90, "sleep 1"))
    done = wait_phase(kube, high, ("Succeeded", "Failed"), timeout=240)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    low_done = wait_phase(kube, low, ("Succeeded", "Failed"), timeout=300)
    assert low_done["status"]["phase"] == "Succeeded", low_done["status"]
    now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in job_pods(kube, namespace, "low")}
    assert set(now) == set(first) and all(now[n] != first[n] for n in first), "both ranks were replaced"
    st = low_done["status"]
    assert st.get("backoffCount", 0) == 0, st
    assert all(t.get("restartCount", 0) == 0 for t in st.get("tasks") or []), st
    assert any(c["type"] == "Preempted" for c in st["conditions"]), st["conditions"]
    events = kube.list(core_path(namespace, "events"))
    # kube-scheduler's own events: both ranks preempted for the other group (as a unit).
    by_scheduler = {e["involvedObject"]["name"]: e["message"] for e in events if e["reason"] == "Preempted"
                    and e["involvedObject"]["kind"] == "Pod"}
    assert set(by_scheduler) == set(first), by_scheduler
    assert all("podgroup" in m for m in by_scheduler.values()), by_scheduler
    reasons = {e["reason"] for e in events if e["involvedObject"]["name"] == "low"}
    assert "Preempted" in reasons and "RestartingReplica" not in reasons, reasons
