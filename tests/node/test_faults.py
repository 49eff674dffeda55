"""Faults on the real node: containerd, the kubelet, the API server and etcd, each stopped and
started again (a real process restart: ``Node.stop_component`` / ``start_component``, the hooks of
``tools/node/restart.sh``) while jobs run, with the operator in the cluster (two pods, a Lease).

One test per component. Each creates three GenericJobs of two replicas whose containers wait for
a file in a hostPath directory, so the test decides when they end without the API server:

* ``during-ok`` (both exit 0) and ``during-fail`` (worker-1 exits 1) are released while the
  component is down: their containers end during the fault;
* ``across`` (both exit 0) is released once everything is back: its pods run through the fault.

Then: every job ends in its phase (Succeeded, Failed, Succeeded), the kubelet reports the exits,
the operator leads again by itself (a live operator pod renews the Lease, both are Ready), and no
pod was duplicated or replaced: a watch that follows the namespace through the fault saw exactly
the six pods, one uid each, none restarted. :func:`run_fault` is also what
``benchmarks/node_faults.py`` measures (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import http.client
import json
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests import helpers
from tests.helpers import replica, template, wait_until

from ..cluster.kube import Kube, KubeError, job_path, pod_path
from .conftest import TRAINING_IMAGE, Node, NodeError

FAULTS = ("containerd", "kubelet", "kube-apiserver", "etcd")
OPERATOR_NS = "t9k-jobs-system"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NS}/leases/t9k-jobs-operator"
OPERATOR_PODS = "app.kubernetes.io/name=t9k-jobs,app.kubernetes.io/component=operator"
# name -> (worker-1 fails, released while the component is down, expected phase)
JOBS = {
    "during-ok": (False, True, "Succeeded"),
    "during-fail": (True, True, "Failed"),
    "across": (False, False, "Succeeded"),
}
TIMEOUT = 300  # seconds for any one wait: generous, a loaded 2-core machine is the target
# An unreachable or half-up API server: the waits below count these as "not yet".
UNREACHABLE = (KubeError, AssertionError, OSError, http.client.HTTPException, ValueError)


# ``wait_until`` where errors of an API server that is down count as "not yet".
until = functools.partial(wait_until, timeout=TIMEOUT, interval=0.3, ignore=UNREACHABLE)


def generic_job(name: str, sync: Path, fail: bool) -> dict[str, Any]:
    """Two workers that wait for ``sync/go``, leave ``sync/exited-<pod>`` and exit 0 (worker-1
    exits 1 when ``fail``). restartPolicy Never: a container the fault killed would fail the job."""
    script = 'while [ ! -e /sync/go ]; do sleep 0.2; done; touch "/sync/exited-$POD_NAME"; '
    script += 'case "$POD_NAME" in *-worker-1) exit 1;; esac; exit 0' if fail else "exit 0"
    pod = template(
        ["sh", "-c", script],
        name="main",
        image=TRAINING_IMAGE,
        pod={
            "terminationGracePeriodSeconds": 5,
            "volumes": [{"name": "sync", "hostPath": {"path": str(sync), "type": "Directory"}}],
        },
        env=[{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        volumeMounts=[{"name": "sync", "mountPath": "/sync"}],
    )
    spec = {
        "successRules": [{"worker": [0, 1]}],
        "failureRules": [{"worker": [0]}, {"worker": [1]}],
        "replicaSpecs": [replica("worker", 2, pod, restartPolicy={"policy": "Never"})],
    }
    return helpers.job("GenericJob", name, spec)


class PodRecorder:
    """Every (pod name, uid) the API server reports in ``namespace`` while it runs: a list, then
    watches resumed from the last resourceVersion across outages (a new list after 410 Gone), so
    a pod created and deleted again between two looks of the test is seen too."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.path = kube, pod_path(namespace)
        self.seen: dict[str, set[str]] = {}
        self.rv = ""
        self._ssl = ssl.create_default_context(cafile=kube.ca_file)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pods@{namespace}", daemon=True)

    def __enter__(self) -> PodRecorder:
        self._thread.start()
        until(lambda: self.rv, "the pod watch to list")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _record(self, pod: dict[str, Any]) -> None:
        self.seen.setdefault(pod["metadata"]["name"], set()).add(pod["metadata"]["uid"])

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self.rv:
                    listing = self.kube.request("GET", self.path)
                    for pod in listing.get("items", []):
                        self._record(pod)
                    self.rv = listing["metadata"]["resourceVersion"]
                self._watch()
            except (*UNREACHABLE, urllib.error.URLError):
                self._stop.wait(0.5)

    def _watch(self) -> None:
        query = urllib.parse.urlencode(
            {"watch": "true", "resourceVersion": self.rv, "allowWatchBookmarks": "true",
             "timeoutSeconds": "30"}
        )
        req = urllib.request.Request(
            f"{self.kube.server}{self.path}?{query}", headers={"Authorization": f"Bearer {self.kube.token}"}
        )
        try:
            resp = urllib.request.urlopen(req, context=self._ssl, timeout=5)
        except urllib.error.HTTPError as exc:
            if exc.code == 410:
                self.rv = ""
            raise
        with resp:
            for line in resp:
                if self._stop.is_set():
                    return
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        self.rv = ""  # compacted: list again (what exists is recorded then)
                    return
                if event.get("type") != "BOOKMARK":
                    self._record(obj)
                self.rv = obj["metadata"]["resourceVersion"]


def operator_pods(kube: Kube) -> dict[str, dict[str, Any]]:
    pods = kube.list(f"/api/v1/namespaces/{OPERATOR_NS}/pods", OPERATOR_PODS)
    return {p["metadata"]["name"]: p for p in pods if not p["metadata"].get("deletionTimestamp")}


def restarts(pod: dict[str, Any]) -> int:
    return sum(c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses", []))


# Run inside the node's network namespace: each operator pod's /readyz and its process start time
# (from /metrics), first-hand; pod statuses in the API can be stale right after an outage.
_PROBE = """
import json, re, sys, urllib.request
out = {}
for ip in sys.argv[1:]:
    row = out[ip] = {}
    try:
        with urllib.request.urlopen(f"http://{ip}:8080/readyz", timeout=3) as r:
            row["readyz"] = r.read().decode().strip()
        with urllib.request.urlopen(f"http://{ip}:8080/metrics", timeout=3) as r:
            m = re.search(r"^process_start_time_seconds (\\S+)$", r.read().decode(), re.M)
            row["started"] = float(m.group(1)) if m else 0.0
    except Exception as exc:
        row["readyz"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def operators(node: Node, kube: Kube) -> dict[str, dict[str, Any]]:
    """Operator pod name -> {"readyz": its answer or the error, "started": process start (epoch s)}."""
    ips = {p["status"].get("podIP"): n for n, p in operator_pods(kube).items() if p["status"].get("podIP")}
    out = subprocess.run(
        ["nsenter", "-t", str(node.state["anchor"]), "--net", "--", sys.executable, "-c", _PROBE, *ips],
        capture_output=True, text=True, timeout=30, check=True,
    )
    return {ips[ip]: row for ip, row in json.loads(out.stdout).items()}


def one_leader(view: dict[str, dict[str, Any]], want: int = 2) -> bool:
    """``want`` operator pods answer ready, exactly one of them as the leader."""
    answers = [row.get("readyz", "") for row in view.values()]
    ready = len(answers) == want and all(a.startswith("ok (") for a in answers)
    return ready and answers.count("ok (leader)") == 1


def leads_since(kube: Kube, since: dt.datetime) -> str:
    """The operator pod that renewed the Lease after ``since`` and runs; '' while there is none."""
    spec = kube.get(LEASE).get("spec", {})
    holder, renewed = spec.get("holderIdentity") or "", spec.get("renewTime")
    if not holder or not renewed or dt.datetime.fromisoformat(renewed) <= since:
        return ""
    pod = operator_pods(kube).get(holder)
    return holder if pod and pod["status"].get("phase") == "Running" else ""


def start_delays(kube: Kube, namespace: str, paths: dict[str, str]) -> dict[str, float]:
    """Where the start of the jobs took its time (whole seconds, the API's timestamps): the latest
    pod creation after its job's, and the longest wait of a pod for the scheduler."""
    stamp = lambda t: dt.datetime.fromisoformat(t).timestamp()  # noqa: E731
    jobs = {n: stamp(kube.get(p)["metadata"]["creationTimestamp"]) for n, p in paths.items()}
    created = scheduled = 0.0
    for pod in kube.list(pod_path(namespace)):
        born = stamp(pod["metadata"]["creationTimestamp"])
        created = max(created, born - jobs[pod["metadata"]["name"].rsplit("-worker-", 1)[0]])
        cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
        scheduled = max(scheduled, stamp(cond["lastTransitionTime"]) - born)
    return {"pods_created_s": created, "pods_scheduled_s": scheduled}


def run_fault(node: Node, kube: Kube, namespace: str, component: str) -> dict[str, Any]:
    """Stop ``component`` while the three jobs of this module run, release two of them while it is
    down, start it again, and follow everything to the end. Returns the timings (seconds) and
    ``problems``: each check that failed, in words (empty when the node held). Raises
    AssertionError when a wait times out."""
    sync_root = node.dir / "faults" / namespace
    paths: dict[str, str] = {}
    for name, (fail, _, _) in JOBS.items():
        sync = sync_root / name
        sync.mkdir(parents=True)
        sync.chmod(0o777)
        obj = generic_job(name, sync, fail)
        obj["metadata"]["namespace"] = namespace
        kube.create(job_path(namespace, "GenericJob"), obj)
        paths[name] = job_path(namespace, "GenericJob", name)
    expected = {f"{job}-worker-{i}" for job in JOBS for i in (0, 1)}
    during = {f"{job}-worker-{i}": sync_root / job / f"exited-{job}-worker-{i}"  # pod -> its exit marker
              for job, (_, released_during, _) in JOBS.items() if released_during for i in (0, 1)}
    out: dict[str, Any] = {"component": component, "problems": []}
    problems: list[str] = out["problems"]

    with PodRecorder(kube, namespace) as recorder:
        started = time.monotonic()

        def all_running() -> dict[str, str]:
            pods = kube.list(pod_path(namespace))
            ok = len(pods) == len(expected) and all(p["status"].get("phase") == "Running" for p in pods)
            return ok and {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}

        uids = until(all_running, "the six pods to run")
        for name, path in paths.items():
            until(lambda: kube.get(path).get("status", {}).get("phase") == "Running", f"{name} to be Running")
        out["jobs_running_s"] = round(time.monotonic() - started, 1)
        out.update(start_delays(kube, namespace, paths))
        view = until(lambda: one_leader(v := operators(node, kube)) and v,
                     "two operator pods ready, one leading")
        out["leader_before"] = next(n for n, row in view.items() if row["readyz"] == "ok (leader)")

        # -- the fault: stop, let two jobs end while it is down, start again ----------------------
        t_stop, stop_at = time.monotonic(), time.time()
        stopped = False
        try:
            out["stop_s"] = round(node.stop_component(component), 1)
            stopped = True
            for name, (_, released_during, _) in JOBS.items():
                if released_during:
                    (sync_root / name / "go").touch()
            until(lambda: all(m.exists() for m in during.values()), "the released containers to end",
                  timeout=120, interval=0.1)
            out["start_s"] = round(node.start_component(component), 1)
            stopped = False
        finally:
            if stopped:  # leave the node whole for the tests after this one
                with contextlib.suppress(NodeError):
                    node.start_component(component)
        t_back = time.monotonic()
        back_at = dt.datetime.now(dt.UTC)
        out["down_s"] = round(t_back - t_stop, 1)

        # -- recovery -------------------------------------------------------------------------------
        def exits_reported() -> bool:
            phases = {p["metadata"]["name"]: p["status"].get("phase") for p in kube.list(pod_path(namespace))}
            return all(phases.get(p) in ("Succeeded", "Failed") for p in during)

        until(exits_reported, "the kubelet to report the exits of the released pods")
        out["kubelet_reported_s"] = round(time.monotonic() - t_back, 1)
        for name, (_, released_during, _) in JOBS.items():
            if released_during:
                until(lambda: kube.get(paths[name]).get("status", {}).get("phase") in ("Succeeded", "Failed"),
                      f"{name} to end")
        out["jobs_ended_s"] = round(time.monotonic() - t_back, 1)
        leader = until(lambda: leads_since(kube, back_at),
                       "an operator pod to renew the Lease after the fault")
        out["lease_renewed_s"] = round(time.monotonic() - t_back, 1)
        view = until(lambda: one_leader(v := operators(node, kube)) and v,
                     "both operator pods to answer /readyz again, one as the leader")
        out["operators_ready_s"] = round(time.monotonic() - t_back, 1)
        out["operators_restarted"] = sorted(n for n, row in view.items() if row.get("started", 0) > stop_at)

        released = time.monotonic()
        (sync_root / "across" / "go").touch()
        until(lambda: kube.get(paths["across"]).get("status", {}).get("phase") in ("Succeeded", "Failed"),
              "across to end")
        out["across_ended_s"] = round(time.monotonic() - released, 1)
        # The watch has caught up with the last pod update before it is stopped.
        last_rv = kube.request("GET", pod_path(namespace))["metadata"]["resourceVersion"]
        until(lambda: int(recorder.rv or 0) >= int(last_rv), "the pod watch to catch up", timeout=60)

    # -- what must hold ----------------------------------------------------------------------------
    pods = {p["metadata"]["name"]: p for p in kube.list(pod_path(namespace))}
    out["phases"] = {}
    for name, (fail, _, phase) in JOBS.items():
        job = kube.get(paths[name])
        status = job.get("status", {})
        out["phases"][name] = status.get("phase")
        if status.get("phase") != phase:
            problems.append(f"{name} ended {status.get('phase')}, not {phase}: {status.get('conditions')}")
        if status.get("backoffCount", 0) or any(t.get("restartCount", 0) for t in status.get("tasks", [])):
            problems.append(f"{name} restarted a replica: {status}")
        for i in (0, 1):
            pod = pods.get(f"{name}-worker-{i}", {})
            code = 1 if fail and i == 1 else 0
            states = [c.get("state", {}) for c in pod.get("status", {}).get("containerStatuses", [])]
            got = [s.get("terminated", {}).get("exitCode") for s in states]
            if got != [code] or restarts(pod):
                problems.append(
                    f"{name}-worker-{i}: exit codes {got} (want [{code}]), restarts {restarts(pod)}")
    duplicates = {n: sorted(u) for n, u in recorder.seen.items() if n not in expected or len(u) > 1}
    replaced = {n: p["metadata"]["uid"] for n, p in pods.items() if uids.get(n) != p["metadata"]["uid"]}
    out["duplicate_pods"] = len(duplicates) + len(replaced)
    if set(recorder.seen) != expected or duplicates or replaced:
        problems.append(f"pods seen {sorted(recorder.seen)}; duplicated {duplicates}; replaced {replaced}")
    out["jobs_lost"] = sum(out["phases"][n] != JOBS[n][2] for n in JOBS)
    out["leader_after"] = leader
    return out


@pytest.mark.timeout(600)  # a few waits of up to TIMEOUT each, on a loaded machine
@pytest.mark.parametrize("component", FAULTS)
def test_jobs_survive_a_restart_of(component: str, node: Node, kube: Kube, namespace: str) -> None:
    """containerd, the kubelet, kube-apiserver, etcd: stopped (SIGTERM, SIGKILL after 15 s) and
    started again while jobs run; jobs end right, the operator recovers, no pod is duplicated."""
    result = run_fault(node, kube, namespace, component)
    print(f"\n{component}: {json.dumps(result)}")
    assert not result["problems"], "\n".join(result["problems"])
