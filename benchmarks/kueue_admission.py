"""Kueue admission on the real node: create -> first pod of a job, with and without Kueue's queue.

One command brings up the real node of tools/node with Kueue v0.17.0 installed (``Node.up(...,
kueue=...)``: its image built by tools/images, its manifests rendered by ``tools/kueue/manifests.sh
--no-visibility``), runs t9k-jobs' operator out of the cluster as ``real_node.py`` does (started once
Kueue answers, so it queues ``t9kScheduler`` jobs), makes one namespace whose LocalQueue ``default``
points to a ClusterQueue with ample quota (1000 CPUs, 1 TiB: nothing waits for room), and then,
``--repeat`` rounds, the order alternating, creates the same GenericJob of one worker (pause
image, 100m CPU):

(A) ``plain``: without ``spec.scheduler``; seconds from the create request returning until the
    job's first pod is seen (ADDED on a pod watch);
(B) ``kueue``: with ``spec.scheduler.t9kScheduler {queue: default, priority: 0}``; seconds from the
    create until (1) the Workload the operator writes is seen (watch on kueue.x-k8s.io/v1beta2
    workloads), (2) its ``Admitted`` condition is seen True, and (3) the first pod is seen (also:
    the native PodGroup the operator makes for a t9kScheduler job, where served).

Reported: create -> first pod for A and B; Kueue's admission time (2)-(1); the operator's own time
with Kueue, (1)-create (writing the Workload) plus (3)-(2) (its reaction to the admission: the pass,
the PodGroup, the pod); and that sum less the same round's A create -> first pod, the time the
operator adds over a job without Kueue. The issue's goal: the operator's added time at most 0.1 s.

One uncounted warm-up job of each mode comes first (what a first use costs: Kueue's first
admission, and the garbage collector, which learns of the Workload kind only at its next discovery
resync, up to 30 s after Kueue's install, deleting the first Workload late). After each job it is
deleted and its pods and Workload are awaited gone, so jobs never overlap. All times are
this process's monotonic clock at the watch event (not polled), so the same watch latency is in
every step. The operator may create the pod before this process has read the answer to its POST
(a slow answer: the watch event comes first), so a step can be 0.000 s; the POST's own time is
recorded too (``create_request_s``), the first table also counts from the POST sent, and the job's
own ADDED event on a watch (``job_seen_s``) gives the operator's Workload write on the same clock
as the other steps. Results (every run, the machine, the load average, the versions and the exact command)
go to ``--out``; Markdown tables of medians, minima and maxima to stdout. The node is taken down at
the end, also on Ctrl-C, SIGTERM or failure. Needs root; waits while another node is up on this
machine (real_node.py's helpers).

    python benchmarks/kueue_admission.py [--repeat 5] [--out benchmarks/results-kueue-admission.json]
    python benchmarks/kueue_admission.py --report benchmarks/results-kueue-admission.json
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import importlib.metadata
import json
import logging
import math
import os
import secrets
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "node"))
import real_node  # noqa: E402 - benchmarks/ is the script's directory, first on sys.path
from operators import num, t9k_operator, until
from real_node import (
    LIVE,
    NODES,
    BenchError,
    _QuietReaped,
    machine,
    make_namespace,
    on_sigterm,
    one_line,
    sh,
    start_node,
    stop_leftovers,
    stop_tasks,
)

from node import NODE_NAME, SANDBOX_IMAGE, Node, NodeError, preflight
from t9k_jobs.cluster.client import (
    NATIVE_PODGROUPS,
    PODS,
    RESOURCEFLAVORS,
    WORKLOADS,
    ApiError,
    KubeClient,
    Resource,
)
from t9k_jobs.cluster.informer import Informer

GENERICJOBS = Resource("batch.tensorstack.dev", "v1beta1", "genericjobs", "GenericJob")
CLUSTERQUEUES = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
LOCALQUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
OWNER_NAME = "tensorstack.dev/owner-name"
IMAGES = ("pause", "kueue")  # the job's container is the pause image: nothing else to import
MODES = ("plain", "kueue")
NAMESPACE = "bench-kueue"
QUEUE = "default"
CLUSTER_QUEUE = "bench-kueue"
FLAVOR = "bench-kueue-flavor"
GOAL_S = 0.1  # the bound on the operator's own added time
STEPS = ("job_seen", "workload", "quota_reserved", "admitted", "podgroup", "first_pod", "bound", "running")


def progress(msg: str) -> None:
    print(f"[kueue-admission {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# real_node's helpers (wait_for_machine, start_node) report through its progress(): under our name.
real_node.progress = progress


# --------------------------------------------------------------------------- the job


def job(name: str, queued: bool) -> dict[str, Any]:
    container = {"name": "worker", "image": SANDBOX_IMAGE, "resources": {"requests": {"cpu": "100m"}}}
    spec: dict[str, Any] = {
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 1,
                "restartPolicy": {"policy": "Never"},
                "template": {"spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}},
            }
        ]
    }
    if queued:
        spec["scheduler"] = {"t9kScheduler": {"queue": QUEUE, "priority": 0}}
    return {
        "apiVersion": GENERICJOBS.api_version,
        "kind": "GenericJob",
        "metadata": {"name": name},
        "spec": spec,
    }


# --------------------------------------------------------------------------- results


@dataclass
class Run:
    """One job. Times are seconds from the create request's answer (monotonic, at the watch event)."""

    mode: str
    round: int  # 0: the warm-up, not counted
    job: str = ""
    create_request_s: float = math.nan  # the POST itself
    job_seen_s: float = math.nan  # the job seen on a watch (may come before the POST's answer is read)
    workload_s: float = math.nan  # (1) the Workload seen
    quota_reserved_s: float = math.nan  # its QuotaReserved seen True
    admitted_s: float = math.nan  # (2) its Admitted seen True
    podgroup_s: float = math.nan  # the native PodGroup seen (t9kScheduler, where served)
    first_pod_s: float = math.nan  # (3) the first pod seen
    bound_s: float = math.nan  # that pod bound to the node
    running_s: float = math.nan  # that pod Running
    load_before: list[float] = field(default_factory=list)
    error: str = ""

    # -- the shares, per run
    @property
    def kueue_admission_s(self) -> float:
        return self.admitted_s - self.workload_s

    @property
    def operator_after_admission_s(self) -> float:
        return self.first_pod_s - self.admitted_s

    @property
    def operator_s(self) -> float:
        return self.workload_s + self.operator_after_admission_s


def counted(runs: list[Run], mode: str) -> list[Run]:
    return [r for r in runs if r.mode == mode and r.round > 0 and not r.error]


def added_over_plain(runs: list[Run]) -> list[float]:
    """Per round: the operator's time with Kueue less that round's create -> first pod without."""
    plain = {r.round: r.first_pod_s for r in counted(runs, "plain")}
    return [r.operator_s - plain[r.round] for r in counted(runs, "kueue") if r.round in plain]


def stats(values: list[float], digits: int = 3) -> list[str]:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return ["–", "–", "–"]
    return [num(statistics.median(values), digits), num(min(values), digits), num(max(values), digits)]


def tables(runs: list[Run]) -> str:
    plain, kueue = counted(runs, "plain"), counted(runs, "kueue")
    failed = [r for r in runs if r.error]
    out = [
        "create -> first pod seen (seconds):",
        "",
        "| mode | jobs | median | min | max | from the POST sent, median | create -> pod Running, median |",
        "|---|---|---|---|---|---|---|",
    ]
    for rs, what in ((plain, "A: no spec.scheduler"), (kueue, "B: t9kScheduler, Kueue")):
        first = " | ".join(stats([r.first_pod_s for r in rs]))
        sent = stats([r.create_request_s + r.first_pod_s for r in rs])[0]
        running = stats([r.running_s for r in rs], 2)[0]
        out.append(f"| {what} | {len(rs)} | {first} | {sent} | {running} |")
    steps = [
        ("job seen (watch)", "job_seen_s"),
        ("(1) Workload seen", "workload_s"),
        ("QuotaReserved seen", "quota_reserved_s"),
        ("(2) Admitted seen", "admitted_s"),
        ("native PodGroup seen", "podgroup_s"),
        ("(3) first pod seen", "first_pod_s"),
        ("pod bound", "bound_s"),
    ]
    head = ["| step | median | min | max |", "|---|---|---|---|"]
    out += ["", "B, step by step (seconds from the create):", "", *head]
    for label, attr in steps:
        out.append(f"| {label} | " + " | ".join(stats([getattr(r, attr) for r in kueue])) + " |")
    added = added_over_plain(runs)
    shares = [
        ("Kueue: Workload seen -> Admitted seen, (2)-(1)", [r.kueue_admission_s for r in kueue]),
        ("operator: create -> Workload seen, (1)-create", [r.workload_s for r in kueue]),
        ("operator: job seen -> Workload seen (one watch clock)",
         [r.workload_s - r.job_seen_s for r in kueue]),
        ("operator: Admitted seen -> first pod seen, (3)-(2)", [r.operator_after_admission_s for r in kueue]),
        ("operator with Kueue, (1)-create + (3)-(2)", [r.operator_s for r in kueue]),
        ("operator's added time: the above less the round's A create -> first pod", added),
    ]
    out += ["", "The shares (per-run differences, seconds):", "", "| share" + head[0][6:], head[1]]
    for label, values in shares:
        out.append(f"| {label} | " + " | ".join(stats(values)) + " |")
    loads = [r.load_before[0] for r in plain + kueue if r.load_before]
    out.append("")
    if loads:
        out.append(f"Load average (1 min) before each job: median {statistics.median(loads):.2f}, "
                   f"min {min(loads):.2f}, max {max(loads):.2f}.")
    if added and kueue:
        med_added = statistics.median(added)
        med_op = statistics.median(r.operator_s for r in kueue)
        out.append(
            f"Goal (operator's own added time <= {GOAL_S} s): added over A {med_added:.3f} s "
            f"({'met' if med_added <= GOAL_S else 'NOT met'}); operator's whole time with Kueue "
            f"{med_op:.3f} s ({'met' if med_op <= GOAL_S else 'NOT met'}) (medians)."
        )
    if failed:
        first_failed = failed[0]
        out.append(f"{len(failed)} job(s) failed; first: {first_failed.mode} round {first_failed.round}: "
                   f"{first_failed.error}")
    return "\n".join(out)


# --------------------------------------------------------------------------- watching


def pod_view(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "job": (obj["metadata"].get("labels") or {}).get(OWNER_NAME, ""),
        "bound": bool((obj.get("spec") or {}).get("nodeName")),
        "running": (obj.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"),
    }


def condition_true(obj: dict[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def workload_view(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "quota_reserved": condition_true(obj, "QuotaReserved"),
        "admitted": condition_true(obj, "Admitted"),
    }


class Watch:
    """Monotonic times at which this process first saw each job's Workload, PodGroup and pods."""

    def __init__(self, client: KubeClient, ns: str, podgroups: bool) -> None:
        self.times: dict[str, dict[str, float]] = {}  # job -> step -> monotonic
        self.pods = Informer(client, PODS, namespace=ns, label_selector=OWNER_NAME, transform=pod_view)
        self.pods.add_handler(self._on_pod)
        self.workloads = Informer(client, WORKLOADS, namespace=ns, transform=workload_view)
        self.workloads.add_handler(self._on_workload)
        self.jobs = Informer(client, GENERICJOBS, namespace=ns, transform=lambda o: None)
        self.jobs.add_handler(self._on_job)
        self.informers: list[Informer[Any]] = [self.pods, self.workloads, self.jobs]
        self.podgroups: Informer[Any] | None = None
        if podgroups:
            self.podgroups = Informer(client, NATIVE_PODGROUPS, namespace=ns, transform=lambda o: None)
            self.podgroups.add_handler(self._on_podgroup)
            self.informers.append(self.podgroups)
        self.tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        self.tasks = [asyncio.create_task(i.run()) for i in self.informers]
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers)), 60)

    def _mark(self, job: str, step: str) -> None:
        self.times.setdefault(job, {}).setdefault(step, time.monotonic())

    def _on_pod(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        if new is None or not new["job"]:
            return
        self._mark(new["job"], "first_pod")
        if new["bound"]:
            self._mark(new["job"], "bound")
        if new["running"]:
            self._mark(new["job"], "running")

    def _on_workload(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        if new is None:
            return
        self._mark(key[1], "workload")  # named like its job
        if new["quota_reserved"]:
            self._mark(key[1], "quota_reserved")
        if new["admitted"]:
            self._mark(key[1], "admitted")

    def _on_job(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        if event == "ADDED":
            self._mark(key[1], "job_seen")

    def _on_podgroup(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        if event == "ADDED":
            self._mark(key[1], "podgroup")  # named like its job

    def seen(self, job: str, step: str) -> bool:
        return step in self.times.get(job, {})

    def gone(self, job: str) -> bool:
        pods = any(p["job"] == job for p in self.pods.store.values())
        return not pods and not any(k[1] == job for k in self.workloads.store)


# --------------------------------------------------------------------------- one job


async def one(client: KubeClient, watch: Watch, mode: str, rnd: int, timeout: float) -> Run:
    """Create the job, time it until its first pod runs, delete it and wait until nothing is left."""
    name = f"{mode}-{rnd}-{secrets.token_hex(2)}"
    run = Run(mode, rnd, name, load_before=[round(x, 2) for x in os.getloadavg()])
    queued = mode == "kueue"
    created = False
    try:
        before = time.monotonic()
        await client.create(GENERICJOBS, NAMESPACE, job(name, queued))
        created = True
        t0 = time.monotonic()
        run.create_request_s = t0 - before
        await until(lambda: watch.seen(name, "running"), timeout, f"the pod of {name} Running", interval=0.05)
        if queued:  # seen before the pod, always (no pod before admission); a moment in case not
            await until(lambda: watch.seen(name, "admitted"), 10, f"the Workload of {name} Admitted")
        t = watch.times[name]
        for step in STEPS:
            if step in t:
                setattr(run, f"{step}_s", t[step] - t0)
        if not queued and "workload" in t:
            run.error = f"{name} has no spec.scheduler but got a Workload"
        if queued and "workload" not in t:
            run.error = f"{name} has t9kScheduler but no Workload was seen"
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded; the next job still runs
        run.error = one_line(exc)
    if created:
        try:
            await client.delete(GENERICJOBS, NAMESPACE, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
        await until(lambda: watch.gone(name), timeout, f"the pods and Workload of {name} gone", interval=0.1)
    return run


# --------------------------------------------------------------------------- the node and the queues


def prepare(work: Path) -> dict[str, Any]:
    """Binaries, images and Kueue's manifests, built (or found cached) before the node comes up."""
    if os.geteuid() != 0:
        raise BenchError("a real node needs root (containerd, cgroups, network namespaces); run as root")
    logs = work / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    progress("building (or finding cached) the control plane, the node, the images and Kueue")
    sh("tools/node/packages.sh", "bash", str(ROOT / "tools/node/packages.sh"), log=logs / "packages.log")
    try:
        preflight()
    except NodeError as exc:
        raise BenchError(str(exc)) from exc
    cp_bin = sh("build.sh", "bash", str(ROOT / "tools/controlplane/build.sh"), log=logs / "build-cp.log")
    node_bin = sh(
        "tools/node/build.sh", "bash", str(ROOT / "tools/node/build.sh"), log=logs / "build-node.log"
    )
    images = sh(
        "tools/images/build.sh",
        "bash",
        str(ROOT / "tools/images/build.sh"),
        *IMAGES,
        log=logs / "build-images.log",
        env={**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable)},
    )
    manifests = sh(
        "tools/kueue/manifests.sh",
        "bash",
        str(ROOT / "tools/kueue/manifests.sh"),
        "--no-visibility",
        log=logs / "kueue-manifests.log",
    )
    archives = dict(line.split(None, 1) for line in images.splitlines() if line.strip())
    missing = [i for i in IMAGES if i not in archives]
    if missing:
        raise BenchError(f"tools/images/build.sh printed no archive for {', '.join(missing)}")
    return {
        "cp_bin": Path(cp_bin.split()[-1]),
        "node_bin": Path(node_bin.split()[-1]),
        "images": [archives[i] for i in IMAGES],
        "kueue": Path(manifests.split()[-1]),
    }


class KueueNode(Node):
    """The real node, Kueue installed by every ``up`` (real_node.start_node calls ``up(images)``)."""

    def __init__(self, *args: Any, kueue: Path, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kueue_manifests = kueue

    def up(self, images: Any = (), timeout: float = 120.0, kueue: Any = None) -> Node:
        return super().up(images, timeout, kueue=kueue or self.kueue_manifests)


async def make_queues(client: KubeClient) -> None:
    """A ResourceFlavor, a ClusterQueue with quota no job here reaches, and the LocalQueue
    ``default`` of the namespace pointing to it; waits until both queues are Active."""
    await client.create(RESOURCEFLAVORS, None, {
        "apiVersion": RESOURCEFLAVORS.api_version, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
    })  # fmt: skip
    quota = [{"name": "cpu", "nominalQuota": "1000"}, {"name": "memory", "nominalQuota": "1Ti"}]
    await client.create(CLUSTERQUEUES, None, {
        "apiVersion": CLUSTERQUEUES.api_version, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
        "spec": {"namespaceSelector": {},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory"],
                                     "flavors": [{"name": FLAVOR, "resources": quota}]}]},
    })  # fmt: skip
    await client.create(LOCALQUEUES, NAMESPACE, {
        "apiVersion": LOCALQUEUES.api_version, "kind": "LocalQueue", "metadata": {"name": QUEUE},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    })  # fmt: skip

    async def active() -> bool:
        cq = await client.get(CLUSTERQUEUES, None, CLUSTER_QUEUE)
        lq = await client.get(LOCALQUEUES, NAMESPACE, QUEUE)
        return condition_true(cq, "Active") and condition_true(lq, "Active")

    await until(active, 60, f"ClusterQueue {CLUSTER_QUEUE} and LocalQueue {NAMESPACE}/{QUEUE} Active")


async def served(client: KubeClient, res: Resource) -> bool:
    try:
        await client.list(res, NAMESPACE)
        return True
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise


def git(*args: str) -> str:
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
    return out.stdout.strip()


async def versions(client: KubeClient, node: Node) -> dict[str, Any]:
    server = await client.request("GET", "/version")
    info = (await client.get(NODES, None, NODE_NAME))["status"]["nodeInfo"]
    kueue = await client.get(DEPLOYMENTS, "kueue-system", "kueue-controller-manager")
    try:
        ours = importlib.metadata.version("t9k-jobs")
    except importlib.metadata.PackageNotFoundError:
        ours = "?"
    import t9k_jobs

    return {
        "t9k-jobs": ours,
        "t9k-jobs source": str(Path(t9k_jobs.__file__).resolve().parent),
        "t9k-jobs commit": git("rev-parse", "--short", "HEAD"),
        "src changed since the commit": git("status", "--porcelain", "--", "src").splitlines(),
        "kube-apiserver": server.get("gitVersion"),
        "kubelet": info.get("kubeletVersion"),
        "container runtime": info.get("containerRuntimeVersion"),
        "kernel": info.get("kernelVersion"),
        "kueue image": kueue["spec"]["template"]["spec"]["containers"][0]["image"],
        "kueue install (s)": round(node.kueue_seconds, 1) if node.kueue_seconds is not None else None,
        "job image": SANDBOX_IMAGE,
    }


async def bench(node: Node, work: Path, args: argparse.Namespace, save: Any) -> list[Run]:
    # SIGTERM ends the run as Ctrl-C does: the main task is cancelled, every finally runs.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    client = await KubeClient.from_config(node.kubeconfig, qps=0, burst=1)
    runs: list[Run] = []
    op = None
    watch: Watch | None = None
    try:
        info = await versions(client, node)
        await make_namespace(client, NAMESPACE)
        await make_queues(client)
        logs = work / "bench"
        op = t9k_operator(node.kubeconfig, logs, None, None, None)
        op.argv[op.argv.index("--log-level") + 1] = args.operator_log_level
        info["operator argv"] = op.argv
        LIVE.add(op)
        op.start()  # after Kueue answers: the operator finds its Workload API at start
        await op.wait_ready(op.ready_url)
        watch = Watch(client, NAMESPACE, await served(client, NATIVE_PODGROUPS))
        await watch.start()
        info["native PodGroups served"] = watch.podgroups is not None
        progress(f"operator ready (log {op.log}); warm-up: one job of each mode, not counted")
        for rnd in range(args.repeat + 1):
            # Alternate the order each round so that a drift in the machine's load favours neither.
            for mode in MODES if rnd % 2 == 0 else MODES[::-1]:
                run = await one(client, watch, mode, rnd, args.timeout)
                runs.append(run)
                save(runs, info)
                if run.error:
                    progress(f"round {rnd} {mode}: failed: {run.error} (operator log: {op.log})")
                elif mode == "plain":
                    progress(f"round {rnd} plain: first pod {run.first_pod_s:.3f} s")
                else:
                    progress(
                        f"round {rnd} kueue: Workload {run.workload_s:.3f} s, "
                        f"Admitted {run.admitted_s:.3f} s, first pod {run.first_pod_s:.3f} s "
                        f"(operator {run.operator_s:.3f} s)"
                    )
        info["operator CPU (s)"] = op.cpu_seconds()
        info["operator API requests"] = op.requests_by_method()
        save(runs, info)
    finally:
        if watch is not None:
            await stop_tasks(watch.tasks)
        if op is not None:
            op.stop()
            LIVE.discard(op)
        await client.close()
    return runs


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="See docs/benchmarks.md (Kueue admission) for what it measures.",
    )
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results-kueue-admission.json", help="results JSON"
    )
    ap.add_argument("--repeat", type=int, default=5, help="rounds of one job of each mode (default 5)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per job and per clean-up")
    ap.add_argument(
        "--wait-node",
        type=float,
        default=3 * 3600,
        help="seconds to wait while another node is up on this machine (default 3 h)",
    )
    ap.add_argument(
        "--operator-log-level", default="WARNING", help="the operator's --log-level (default WARNING)"
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs) after a clean run")
    ap.add_argument(
        "--report", type=Path, nargs="+", help="print the tables of earlier results files and exit"
    )
    args = ap.parse_args()
    try:
        if args.report:
            known = {f.name for f in fields(Run)}
            for i, f in enumerate(args.report):
                data = json.loads(f.read_text())
                runs = [Run(**{k: v for k, v in r.items() if k in known}) for r in data["runs"]]
                print(("\n" if i else "") + f"{f} ({data['command']}; {data['machine']}):\n")
                print(tables(runs))
            return 0
        if args.repeat < 1:
            raise BenchError("--repeat must be at least 1")
        return bench_main(args)
    except KeyboardInterrupt:
        logs = f"; logs in {real_node.WORK[0]}" if real_node.WORK else ""
        print(f"kueue_admission: interrupted; everything it started was stopped{logs}", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - any failure: one line, and where the logs are
        msg = str(exc) if isinstance(exc, BenchError) else one_line(exc)
        if real_node.WORK and str(real_node.WORK[0]) not in msg:
            msg += f" (logs in {real_node.WORK[0]})"
        print(f"kueue_admission: {msg}", file=sys.stderr)
        return 1


def bench_main(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, on_sigterm)
    logging.getLogger("asyncio").addFilter(_QuietReaped())
    work = Path(tempfile.mkdtemp(prefix="bench-kq-", dir="/tmp"))  # short: containerd's socket path
    real_node.WORK.append(work)
    started = dt.datetime.now(dt.UTC)
    load_start = [round(x, 2) for x in os.getloadavg()]
    built = prepare(work)
    crds = [ROOT / "deploy" / "crds"]
    node = KueueNode(work, built["cp_bin"], built["node_bin"], crds, kueue=built["kueue"])
    command = shlex.join([sys.executable, *sys.argv])

    def save(runs: list[Run], info: dict[str, Any]) -> None:
        data = {
            "command": command,
            "argv": sys.argv,
            "env": {k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ},
            "started": started.isoformat(timespec="seconds"),
            "machine": machine(),
            "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
            "versions": info,
            "goal_s": GOAL_S,
            "jobs": {"plain": job("plain-R-xxxx", False), "kueue": job("kueue-R-xxxx", True)},
            "queues": {"ClusterQueue": CLUSTER_QUEUE, "quota": {"cpu": "1000", "memory": "1Ti"},
                       "LocalQueue": f"{NAMESPACE}/{QUEUE}"},
            "runs": [asdict(r) for r in runs],
            "summary": tables(runs).splitlines(),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1) + "\n")

    runs: list[Run] = []
    try:
        start_node(node, built["images"], args.wait_node)
        progress(f"node {NODE_NAME} Ready, Kueue answering in {node.kueue_seconds or 0:.1f} s; "
                 f"load average {os.getloadavg()[0]:.2f}")
        try:
            runs = asyncio.run(bench(node, work, args, save))
        except asyncio.CancelledError:  # SIGTERM (see bench)
            raise KeyboardInterrupt from None
    finally:
        # Nothing may stop the clean-up half-way: a second Ctrl-C or a SIGTERM is ignored now.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_leftovers()
        progress("taking the node down")
        node.down()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    print(machine())
    print(tables(runs))
    failed = [r for r in runs if r.error]
    if failed:
        print(
            f"kueue_admission: {len(failed)} of {len(runs)} jobs failed; logs kept in {work}", file=sys.stderr
        )
        return 1
    if args.keep:
        progress(f"logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
