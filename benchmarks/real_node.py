"""Real-node benchmark: t9k-jobs' operator and Kubeflow's training operator with real pods on one node.

One command brings up the real node of tools/node (kubelet, containerd, CoreDNS, kube-proxy, with
the pause and training images built by tools/images and the CRDs of both operators), then, for
each repeat and each system in turn, alone on the node, with the operator out of the cluster:

1. the main job, examples/pytorch-ddp/job.yaml as is for t9k-jobs (2 workers, torchrun, c10d
   rendezvous, 15 epochs on the training image), and the PyTorchJob that does the same training
   for the training operator (:func:`kf_main_job` says how it is derived): seconds from the create
   to every rank's pod Running, to rank 0's ``epoch 1/15`` line (its timestamp in the container
   log), and to the job's Succeeded;
2. a burst: ``--burst`` (20) two-replica jobs created at once, each replica running a one-second
   Python script on the training image; seconds until all are Succeeded;
3. the operator's CPU seconds, peak RSS and API requests (from its metrics).

Between systems the namespaces are deleted and the benchmark waits until no pod is left; the node
is taken down at the end, also on Ctrl-C, SIGTERM or failure. Results (medians over ``--repeat``,
ratios ours/theirs) are printed as Markdown tables and written to ``--out`` with the machine, the
load average, the versions and the exact command. Needs root; only one node runs per machine, so
the benchmark waits while another one (tools/node, e.g. the node tests) is up.

    python benchmarks/real_node.py --out benchmarks/results-real-node.json [--repeat 3]
    python benchmarks/real_node.py --report benchmarks/results-real-node.json
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime as dt
import importlib.metadata
import json
import logging
import math
import os
import platform
import re
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

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "node"))
from node import NODE_NAME, REGISTRY, Node, NodeError, preflight
from operators import (
    KF_JOBS,
    T9K_JOBS,
    OperatorRun,
    kf_phase,
    kubeflow_operator,
    num,
    pytorchjob_crd,
    start_training_operator,
    t9k_operator,
    t9k_phase,
    training_operator_version,
    until,
)

from t9k_jobs.cluster.client import (
    CONFIGMAPS,
    NAMESPACES,
    PODS,
    ApiError,
    KubeClient,
    Resource,
)
from t9k_jobs.cluster.informer import Informer

JOB_YAML = ROOT / "examples" / "pytorch-ddp" / "job.yaml"
SYSTEMS = ("t9k-jobs", "training-operator")
SHORT = {"t9k-jobs": "t9k", "training-operator": "kf"}
IMAGES = ("pause", "training")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
BURST_SCRIPT = "import time; time.sleep(1)"
FIRST_LINE = re.compile(r"^distributed \(gloo\): world_size (\d+)")
EPOCH = re.compile(r"^epoch (\d+)/(\d+) ")
FINAL = re.compile(r"^final test_accuracy ([0-9.]+)")
NODE_POLL_S = 30.0
IMAGE_IDS: set[str] = set()  # the training image's digests, as the pods report them
LIVE: set[OperatorRun] = set()  # operators started and not stopped yet (stopped on any exit)
WORK: list[Path] = []  # this run's work directory (node state, logs), once made

# What the training operator is given for the main job, in words (also written to the results).
PYTORCHJOB_CHOICE = (
    "The PyTorchJob has the example's replicas (2 replicas of type Worker, no Master), its pod "
    "template (image, OMP_NUM_THREADS, requests), restartPolicy ExitCode, backoffLimit and "
    "activeDeadlineSeconds, cleanPodPolicy Running for cleanUpPolicy Unfinished, and "
    "elasticPolicy {rdzvBackend: c10d, maxRestarts: 0} with nprocPerNode '1'; its command is "
    "`torchrun train.py --epochs 15`. The training operator then gives each pod PET_NNODES=2:2 "
    "(min = max = the worker count), PET_NPROC_PER_NODE=1, PET_RDZV_BACKEND=c10d, "
    "PET_RDZV_ENDPOINT=digits-ddp-worker-0:23456 and PET_MAX_RESTARTS=0, which torchrun reads "
    "as its flags: the same torchrun rendezvous as t9k-jobs' --nnodes=2 --nproc_per_node=1 "
    "--rdzv_backend=c10d --rdzv_endpoint=digits-ddp-worker-0:23456 --max_restarts=0, and no init "
    "container (the training operator adds one, alpine nslookup, only to workers of a job with a "
    "Master)."
)


class BenchError(RuntimeError):
    """A failure that ends the benchmark; its message is one line."""


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


# --------------------------------------------------------------------------- jobs


def t9k_main_job() -> dict[str, Any]:
    return yaml.safe_load(JOB_YAML.read_text())


def training_image(job: dict[str, Any]) -> str:
    return job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"]


def kf_main_job(ours: dict[str, Any]) -> dict[str, Any]:
    """The PyTorchJob that runs the same training as ``ours`` (PYTORCHJOB_CHOICE says how)."""
    spec = ours["spec"]
    (replicas,) = spec["replicaSpecs"]  # the example has one replica type, worker
    torchrun = spec["torchrunConfig"]
    if not torchrun.get("enabled"):
        raise BenchError(f"{JOB_YAML} no longer runs torchrun; update kf_main_job")
    template = copy.deepcopy(replicas["template"])
    c = template["spec"]["containers"][0]
    args = [str(a) for a in c.get("args") or []] or [str(a) for a in c["command"][1:]]
    c["command"], c["args"] = ["torchrun"], args
    run_policy = spec.get("runPolicy") or {}
    clean = {"Unfinished": "Running", "All": "All", "None": "None"}[run_policy.get("cleanUpPolicy", "None")]
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": ours["metadata"]["name"]},
        "spec": {
            "nprocPerNode": str(torchrun.get("procPerNode", "1")),
            "elasticPolicy": {
                "rdzvBackend": torchrun.get("rdzvBackend", "c10d"),
                "maxRestarts": int(torchrun.get("maxRestarts", 0)),
            },
            "runPolicy": {
                k: v
                for k, v in {
                    "backoffLimit": run_policy.get("backoffLimit"),
                    "activeDeadlineSeconds": run_policy.get("activeDeadlineSeconds"),
                    "cleanPodPolicy": clean,
                }.items()
                if v is not None
            },
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": replicas["replicas"],
                    "restartPolicy": replicas.get("restartPolicy", "OnFailure"),
                    "template": template,
                }
            },
        },
    }


def burst_container(image: str) -> dict[str, Any]:
    return {"name": "pytorch", "image": image, "command": ["python", "-c", BURST_SCRIPT]}


def t9k_burst_job(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"backoffLimit": 2, "cleanUpPolicy": "Unfinished"},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 2,
                    "restartPolicy": "ExitCode",
                    "template": {"spec": {"containers": [burst_container(image)]}},
                }
            ],
        },
    }


def kf_burst_job(name: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"backoffLimit": 2, "cleanPodPolicy": "Running"},
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "ExitCode",
                    "template": {"spec": {"containers": [burst_container(image)]}},
                }
            },
        },
    }


# --------------------------------------------------------------------------- results


@dataclass
class Run:
    """One system, one repeat. Times are seconds from the job's create (the burst's first create)."""

    system: str
    repeat: int
    # the main job
    pods_created_s: float = math.nan  # both pods exist
    scheduled_s: float = math.nan  # both pods bound to the node
    running_s: float = math.nan  # both pods Running
    first_line_s: float = math.nan  # rank 0's first line (after torch import, rendezvous, process group)
    first_epoch_s: float = math.nan  # rank 0's "epoch 1/15" line (container log timestamp)
    first_epoch_seen_s: float = math.nan  # when this process read that line
    last_epoch_s: float = math.nan  # rank 0's last epoch line
    exited_s: float = math.nan  # the first pod whose containers all terminated, as seen in its status
    pod_succeeded_s: float = math.nan  # the first pod with phase Succeeded
    succeeded_s: float = math.nan  # the job Succeeded
    rank0_pod: str = ""
    world_size: int = 0
    accuracy: float = math.nan
    pod_times: dict[str, dict[str, float]] = field(default_factory=dict)
    # the burst
    burst_jobs: int = 0
    burst_created_s: float = math.nan  # every create answered
    burst_pods_s: float = math.nan  # every pod exists
    burst_succeeded_s: float = math.nan  # every job Succeeded
    burst_succeeded_p50_s: float = math.nan
    # the operator
    cpu_s: float = math.nan
    peak_rss_mib: float = math.nan
    requests: dict[str, float] = field(default_factory=dict)
    load_before: list[float] = field(default_factory=list)
    load_after: list[float] = field(default_factory=list)
    error: str = ""


def median(runs: list[Run], attr: str) -> float:
    """The median of ``attr`` over the runs without error; ``a-b`` is the median of the differences."""
    if "-" in attr:
        a, b = attr.split("-")
        values = [getattr(r, a) - getattr(r, b) for r in runs if not r.error]
    else:
        values = [getattr(r, attr) for r in runs if not r.error]
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def ratio(a: float, b: float) -> str:
    return "–" if math.isnan(a) or math.isnan(b) or b == 0 else f"{a / b:.2f}"


def tables(runs: list[Run], burst: int) -> str:
    by = {s: [r for r in runs if r.system == s] for s in SYSTEMS}
    main_cols = [
        ("all ranks Running (s)", "running_s", 1),
        ("rank 0's first epoch (s)", "first_epoch_s", 1),
        ("Succeeded (s)", "succeeded_s", 1),
        (f"burst: {burst} jobs Succeeded (s)", "burst_succeeded_s", 1),
        ("operator CPU (s)", "cpu_s", 1),
        ("operator peak RSS (MiB)", "peak_rss_mib", 0),
    ]
    out = [
        "| system | runs | "
        + " | ".join(c[0] for c in main_cols)
        + " | API requests GET/POST/PUT/PATCH/DELETE |",
        "|---" * (len(main_cols) + 3) + "|",
    ]
    med = {s: {attr: median(rs, attr) for _, attr, _ in main_cols} for s, rs in by.items()}
    for s, rs in by.items():
        ok = [r for r in rs if not r.error]
        failed = [r for r in rs if r.error]
        why = failed[0].error.replace("|", "/") if failed else ""
        runs_txt = f"{len(ok)}" + (f" (+{len(failed)} failed: {why})" if failed else "")
        req = ""
        if ok:
            req = "/".join(
                str(round(statistics.median(r.requests.get(m, 0) for r in ok)))
                for m in ("GET", "POST", "PUT", "PATCH", "DELETE")
            )
        cells = " | ".join(num(med[s][attr], d) for _, attr, d in main_cols)
        out.append(f"| {s} | {runs_txt} | {cells} | {req} |")
    ours, theirs = med["t9k-jobs"], med["training-operator"]
    cells = " | ".join(ratio(ours[attr], theirs[attr]) for _, attr, _ in main_cols)
    out.append(f"| ours/theirs | | {cells} | |")

    steps = [
        ("pods created", "pods_created_s"),
        ("pods scheduled", "scheduled_s"),
        ("pods Running", "running_s"),
        ("rank 0's first line", "first_line_s"),
        ("epoch 1", "first_epoch_s"),
        ("last epoch", "last_epoch_s"),
        ("first rank exited", "exited_s"),
        ("first pod Succeeded", "pod_succeeded_s"),
        ("job Succeeded", "succeeded_s"),
        ("burst: pods created", "burst_pods_s"),
        ("burst: job p50", "burst_succeeded_p50_s"),
    ]
    # The operator's own share of the main job: the first pods, and the last step, from the first
    # rank's exit (its containers terminated) to the job's Succeeded; all between is the workload.
    shares = [
        ("create → pods created", "pods_created_s"),
        ("first rank exited → job Succeeded", "succeeded_s-exited_s"),
    ]
    out += [
        "",
        "Where the time goes (medians, seconds from the create):",
        "",
        "| system | " + " | ".join(s[0] for s in steps) + " | load avg (1 min) before |",
        "|---" * (len(steps) + 2) + "|",
    ]
    for s, rs in by.items():
        ok = [r for r in rs if not r.error and r.load_before]
        load = statistics.median(r.load_before[0] for r in ok) if ok else math.nan
        out.append(f"| {s} | " + " | ".join(num(median(rs, a), 2) for _, a in steps) + f" | {num(load, 2)} |")
    out += [
        "",
        "The operator's own share of the main job (medians of each run's difference, seconds):",
        "",
        "| system | " + " | ".join(s[0] for s in shares) + " |",
        "|---" * (len(shares) + 1) + "|",
    ]
    for s, rs in by.items():
        out.append(f"| {s} | " + " | ".join(num(median(rs, a), 2) for _, a in shares) + " |")
    return "\n".join(out)


# --------------------------------------------------------------------------- watching pods and jobs


def pod_view(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    containers = status.get("containerStatuses") or []
    states = [c.get("state") or {} for c in containers]
    return {
        "uid": obj["metadata"].get("uid", ""),
        "phase": status.get("phase") or "Pending",
        "bound": bool((obj.get("spec") or {}).get("nodeName")),
        "exited": bool(states) and all("terminated" in s for s in states),
        "image_id": containers[0].get("imageID", "") if containers else "",
    }


class Tracker:
    """Monotonic times at which this process first saw each pod and job reach each step."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, float]] = {}
        self.image_ids: set[str] = set()
        self.jobs: dict[str, dict[str, float]] = {}
        self.failed: dict[str, str] = {}

    def on_pod(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        if new is None:
            return
        now = time.monotonic()
        t = self.pods.setdefault(key[1], {"created": now})
        if new["bound"]:
            t.setdefault("scheduled", now)
        if new["phase"] in ("Running", "Succeeded", "Failed"):
            t.setdefault("running", now)
        if new["exited"]:
            t.setdefault("exited", now)
        if new["phase"] in ("Succeeded", "Failed"):
            t.setdefault(new["phase"].lower(), now)
        if new["image_id"]:
            self.image_ids.add(new["image_id"])

    def on_job(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        if not new:
            return
        now = time.monotonic()
        self.jobs.setdefault(key[1], {}).setdefault(new, now)
        if new == "Failed":
            self.failed[key[1]] = "Failed"

    def job_phase_time(self, name: str, phase: str) -> float | None:
        return self.jobs.get(name, {}).get(phase)


async def watching(client: KubeClient, ns: str, jobs: Resource, tracker: Tracker) -> list[asyncio.Task[Any]]:
    pods = Informer(client, PODS, namespace=ns, transform=pod_view)
    pods.add_handler(tracker.on_pod)
    job_inf = Informer(client, jobs, namespace=ns, transform=t9k_phase if jobs is T9K_JOBS else kf_phase)
    job_inf.add_handler(tracker.on_job)
    tasks = [asyncio.create_task(pods.run()), asyncio.create_task(job_inf.run())]
    await asyncio.wait_for(asyncio.gather(pods.synced.wait(), job_inf.synced.wait()), 60)
    return tasks


async def stop_tasks(tasks: list[asyncio.Task[Any]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def log_time(stamp: str) -> float:
    """Wall-clock seconds of a container log timestamp (RFC 3339, nanoseconds)."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", stamp)
    if not m:
        raise ValueError(f"not a log timestamp: {stamp!r}")
    frac = f".{(m[2] or '0')[:6].ljust(6, '0')}"
    zone = "+00:00" if m[3] == "Z" else m[3]
    return dt.datetime.fromisoformat(m[1] + frac + zone).timestamp()


class LogFollower:
    """``kubectl logs -f --timestamps`` of one pod: the times of rank 0's lines, if this pod is rank 0."""

    def __init__(self, kubectl: list[str], ns: str, pod: str) -> None:
        self.argv = [*kubectl, "logs", "-f", "--timestamps", "-n", ns, pod, "-c", "pytorch"]
        self.pod = pod
        self.first_line: float | None = None  # wall-clock
        self.world_size = 0
        self.first_epoch: float | None = None  # wall-clock, from the log timestamp
        self.first_epoch_seen: float | None = None  # monotonic, when read
        self.last_epoch: float | None = None
        self.accuracy: float | None = None
        self.proc: asyncio.subprocess.Process | None = None

    async def run(self, done: asyncio.Event) -> None:
        """Follow the log until the container ends (restarting kubectl if it stops early)."""
        while self.accuracy is None and not done.is_set():
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
            )
            assert self.proc.stdout is not None
            try:
                async for raw in self.proc.stdout:
                    stamp, _, text = raw.decode(errors="replace").rstrip("\n").partition(" ")
                    self.read(stamp, text)
            finally:
                if self.proc.returncode is None:
                    self.proc.kill()
                await self.proc.wait()
            if self.accuracy is None and not done.is_set():
                await asyncio.sleep(0.5)

    def read(self, stamp: str, text: str) -> None:
        if m := FIRST_LINE.match(text):
            self.first_line, self.world_size = log_time(stamp), int(m[1])
        elif m := EPOCH.match(text):
            t = log_time(stamp)
            if m[1] == "1" and self.first_epoch is None:
                self.first_epoch, self.first_epoch_seen = t, time.monotonic()
            if m[1] == m[2]:
                self.last_epoch = t
        elif m := FINAL.match(text):
            self.accuracy = float(m[1])

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()


# --------------------------------------------------------------------------- one system


async def make_namespace(client: KubeClient, ns: str) -> None:
    """Create ``ns`` and wait for what its pods need: the default ServiceAccount and the CA ConfigMap."""
    await client.create(NAMESPACES, None, {"metadata": {"name": ns}})

    async def ready() -> bool:
        try:
            await client.get(SERVICEACCOUNTS, ns, "default")
            await client.get(CONFIGMAPS, ns, "kube-root-ca.crt")
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    await until(ready, 60, f"the default ServiceAccount of {ns}")


async def clean(client: KubeClient, namespaces: list[str], timeout: float) -> None:
    """Delete ``namespaces`` and wait until they and every pod on the node are gone."""
    for ns in namespaces:
        try:
            await client.delete(NAMESPACES, None, ns)
        except ApiError as exc:
            if exc.status != 404:
                raise

    async def gone() -> bool:
        for ns in namespaces:
            try:
                await client.get(NAMESPACES, None, ns)
                return False
            except ApiError as exc:
                if exc.status != 404:
                    raise
        return not (await client.list(PODS))["items"]

    await until(gone, timeout, f"namespaces {', '.join(namespaces)} and their pods to go", interval=0.5)


async def main_job(
    client: KubeClient, node: Node, system: str, ns: str, run: Run, timeout: float, kubectl: list[str]
) -> None:
    job = t9k_main_job()
    if system != "t9k-jobs":
        job = kf_main_job(job)
    name = job["metadata"]["name"]
    res = T9K_JOBS if system == "t9k-jobs" else KF_JOBS
    expected = job_replicas(job)
    tracker = Tracker()
    tasks = await watching(client, ns, res, tracker)
    followers: dict[str, LogFollower] = {}
    done = asyncio.Event()
    try:
        t0, wall0 = time.monotonic(), time.time()
        await client.create(res, ns, job)

        def step() -> bool:
            for pod, t in tracker.pods.items():
                if "running" in t and pod not in followers:
                    followers[pod] = f = LogFollower(kubectl, ns, pod)
                    tasks.append(asyncio.create_task(f.run(done)))
            if name in tracker.failed:
                raise BenchError(f"{system}: job {ns}/{name} Failed; see its pods' logs")
            return tracker.job_phase_time(name, "Succeeded") is not None

        await until(step, timeout, f"{system}: job {name} Succeeded", interval=0.1)
        rank0 = next((f for f in followers.values() if f.first_epoch is not None), None)
        if rank0 is None or rank0.accuracy is None:
            # The job can be Succeeded before the last log lines were read: give kubectl a moment.
            await until(
                lambda: any(f.accuracy is not None for f in followers.values()), 30, "rank 0's last log line"
            )
            rank0 = next(f for f in followers.values() if f.accuracy is not None)
        done.set()
        pods = [t for p, t in tracker.pods.items() if p.startswith(f"{name}-")]
        # For the breakdown: when the kubelet reports a pod Succeeded (it may come after the job's).
        try:
            await until(lambda: any("succeeded" in t for t in pods), 15, "a pod Succeeded", interval=0.1)
        except TimeoutError:
            pass
        if len(pods) < expected:
            raise BenchError(f"{system}: saw {len(pods)} pods of {name}, expected {expected}")

        def latest(key: str) -> float:
            vals = [t.get(key) for t in pods]
            return math.nan if any(v is None for v in vals) else max(vals) - t0  # type: ignore[type-var]

        def earliest(key: str) -> float:
            vals = [t[key] for t in pods if key in t]
            return min(vals) - t0 if vals else math.nan

        run.pods_created_s = latest("created")
        run.scheduled_s = latest("scheduled")
        run.running_s = latest("running")
        run.exited_s = earliest("exited")
        run.pod_succeeded_s = earliest("succeeded")
        run.succeeded_s = tracker.jobs[name]["Succeeded"] - t0
        run.rank0_pod = rank0.pod
        run.world_size = rank0.world_size
        run.accuracy = rank0.accuracy if rank0.accuracy is not None else math.nan
        run.first_line_s = (rank0.first_line - wall0) if rank0.first_line else math.nan
        run.first_epoch_s = rank0.first_epoch - wall0 if rank0.first_epoch else math.nan
        run.first_epoch_seen_s = rank0.first_epoch_seen - t0 if rank0.first_epoch_seen else math.nan
        run.last_epoch_s = rank0.last_epoch - wall0 if rank0.last_epoch else math.nan
        run.pod_times = {p: {k: round(v - t0, 3) for k, v in t.items()} for p, t in tracker.pods.items()}
        if run.world_size != expected:
            raise BenchError(f"{system}: rank 0 reports world_size {run.world_size}, expected {expected}")
        IMAGE_IDS.update(tracker.image_ids)
    finally:
        done.set()
        for f in followers.values():
            f.kill()
        await stop_tasks(tasks)


def job_replicas(job: dict[str, Any]) -> int:
    if job["kind"] == "PyTorchJob":
        return sum(r["replicas"] for r in job["spec"]["pytorchReplicaSpecs"].values())
    return sum(r["replicas"] for r in job["spec"]["replicaSpecs"])


async def burst(
    client: KubeClient, system: str, ns: str, run: Run, n: int, image: str, timeout: float
) -> None:
    make = t9k_burst_job if system == "t9k-jobs" else kf_burst_job
    res = T9K_JOBS if system == "t9k-jobs" else KF_JOBS
    jobs = [make(f"burst-{i}", image) for i in range(n)]
    tracker = Tracker()
    tasks = await watching(client, ns, res, tracker)
    try:
        t0 = time.monotonic()
        await asyncio.gather(*(client.create(res, ns, j) for j in jobs))
        run.burst_created_s = time.monotonic() - t0
        names = [j["metadata"]["name"] for j in jobs]

        def all_succeeded() -> bool:
            if tracker.failed:
                raise BenchError(f"{system}: burst job(s) {', '.join(sorted(tracker.failed))} Failed")
            return all(tracker.job_phase_time(j, "Succeeded") is not None for j in names)

        await until(all_succeeded, timeout, f"{system}: {n} burst jobs Succeeded", interval=0.1)
        done = [tracker.jobs[j]["Succeeded"] - t0 for j in names]
        run.burst_jobs = n
        run.burst_succeeded_s = max(done)
        run.burst_succeeded_p50_s = statistics.median(done)
        created = [t["created"] for t in tracker.pods.values()]
        run.burst_pods_s = max(created) - t0 if len(created) >= 2 * n else math.nan
    finally:
        await stop_tasks(tasks)


async def one_system(
    client: KubeClient, node: Node, system: str, rep: int, peers: Path, work: Path, args: argparse.Namespace
) -> Run:
    """``system``'s operator alone on the node: the main job, then the burst; everything deleted after."""
    run = Run(system, rep, load_before=[round(x, 2) for x in os.getloadavg()])
    tag = f"bench-{SHORT[system]}-{rep}"
    namespaces = [f"{tag}-main", f"{tag}-burst"]
    logs = work / "bench" / f"{system}-{rep}"
    logs.mkdir(parents=True, exist_ok=True)
    kubectl = [*node.kubectl, f"--cache-dir={work / 'kubectl-cache'}"]
    op: OperatorRun | None = None
    lock = None
    cancelled = False
    try:
        if system == "t9k-jobs":
            op = t9k_operator(node.kubeconfig, logs, None, None, None)
            LIVE.add(op)
            op.start()
        else:
            op = kubeflow_operator(node.kubeconfig, logs, peers, None, None, None)
            LIVE.add(op)
            lock = await start_training_operator(client, op)
        await op.wait_ready(op.ready_url)
        await make_namespace(client, namespaces[0])
        progress(f"{system} #{rep + 1}: main job")
        await main_job(client, node, system, namespaces[0], run, args.timeout, kubectl)
        progress(
            f"{system} #{rep + 1}: Running {run.running_s:.1f} s, epoch 1 {run.first_epoch_s:.1f} s, "
            f"Succeeded {run.succeeded_s:.1f} s (accuracy {run.accuracy:.4f}); burst of {args.burst}"
        )
        await make_namespace(client, namespaces[1])
        image = training_image(t9k_main_job())
        await burst(client, system, namespaces[1], run, args.burst, image, args.timeout)
        progress(f"{system} #{rep + 1}: burst Succeeded in {run.burst_succeeded_s:.1f} s")
        run.cpu_s = op.cpu_seconds()
        run.peak_rss_mib = op.peak_rss / 2**20
        run.requests = op.requests_by_method()
    except asyncio.CancelledError:
        cancelled = True
        raise
    except Exception as exc:  # noqa: BLE001 - recorded; the next system still runs
        run.error = one_line(exc)
        progress(f"{system} #{rep + 1}: failed: {run.error} (operator log: {logs})")
    finally:
        if op is not None:
            op.stop()
            LIVE.discard(op)
        if lock is not None:
            lock.close()
        if not cancelled:  # on Ctrl-C the node goes down anyway
            extra = ["kubeflow"] if system == "training-operator" else []
            try:
                await clean(client, namespaces + extra, args.timeout)
            except Exception as exc:
                raise BenchError(f"clean-up after {system} failed: {one_line(exc)}") from exc
    run.load_after = [round(x, 2) for x in os.getloadavg()]
    return run


# --------------------------------------------------------------------------- the node


def progress(msg: str) -> None:
    print(f"[real-node {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(what: str, *cmd: str, log: Path, env: dict[str, str] | None = None) -> str:
    """Run a build step; BenchError in one line (the full output in ``log``) when it fails."""
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    log.write_text(f"$ {shlex.join(cmd)}\n{out.stdout}\n{out.stderr}")
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise BenchError(f"{what} failed (exit {out.returncode}): {tail} (full output: {log})")
    return out.stdout


def prepare(work: Path) -> dict[str, Any]:
    """Packages, binaries, images and peers, built (or found cached) before the node comes up."""
    if os.geteuid() != 0:
        raise BenchError("a real node needs root (containerd, cgroups, network namespaces); run as root")
    logs = work / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    progress("building (or finding cached) the control plane, the node, the images and the peers")
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
    peers = sh(
        "build-peers.sh", "bash", str(ROOT / "tools/controlplane/build-peers.sh"), log=logs / "peers.log"
    )
    archives = dict(line.split(None, 1) for line in images.splitlines() if line.strip())
    missing = [i for i in IMAGES if i not in archives]
    if missing:
        raise BenchError(f"tools/images/build.sh printed no archive for {', '.join(missing)}")
    return {
        "cp_bin": Path(cp_bin.split()[-1]),
        "node_bin": Path(node_bin.split()[-1]),
        "peers": Path(peers.split()[-1]),
        "images": [archives[i] for i in IMAGES],
    }


def other_node() -> str | None:
    """The directory of a live node of someone else's on this machine, if any."""
    try:
        other = json.loads(REGISTRY.read_text())["dir"]
    except (OSError, ValueError, KeyError):
        return None
    out = subprocess.run(
        [sys.executable, str(ROOT / "tools/node/node.py"), "status", "--dir", other],
        capture_output=True,
        text=True,
        check=False,
    )
    # Exit 0: all of it runs. A node with some of its parts running is still someone's node.
    return other if out.returncode == 0 or " running" in out.stdout else None


def wait_for_machine(deadline: float) -> None:
    said = None
    while (other := other_node()) is not None:
        if time.monotonic() > deadline:
            raise BenchError(f"a node from {other} is still up after the --wait-node time; try again later")
        if said != other:
            progress(f"a node runs from {other}; waiting for it to go (checking every {NODE_POLL_S:.0f} s)")
            said = other
        time.sleep(NODE_POLL_S)


def start_node(node: Node, images: list[str], wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        wait_for_machine(deadline)
        progress(f"starting the node in {node.dir}")
        try:
            node.up(images)
            return
        except NodeError as exc:
            busy = "a node already runs from" in str(exc) or "another node holds" in str(exc)
            if not busy or time.monotonic() > deadline:
                raise
            progress(f"the machine is busy ({one_line(exc)}); waiting")
            time.sleep(NODE_POLL_S)


async def versions(client: KubeClient) -> dict[str, Any]:
    server = await client.request("GET", "/version")
    node = await client.get(NODES, None, NODE_NAME)
    info = node["status"]["nodeInfo"]
    try:
        ours = importlib.metadata.version("t9k-jobs")
    except importlib.metadata.PackageNotFoundError:
        ours = "?"
    return {
        "t9k-jobs": ours,
        "training-operator": training_operator_version(),
        "kube-apiserver": server.get("gitVersion"),
        "kubelet": info.get("kubeletVersion"),
        "container runtime": info.get("containerRuntimeVersion"),
        "node OS": info.get("osImage"),
        "kernel": info.get("kernelVersion"),
        "node capacity": node["status"].get("capacity"),
        "training image": training_image(t9k_main_job()),
    }


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.node()}: {os.cpu_count()} CPUs ({model}), {mem:.0f} GiB, "
        f"Linux {platform.release()}, Python {platform.python_version()}"
    )


async def bench(
    node: Node, peers: Path, work: Path, args: argparse.Namespace, save: Any
) -> tuple[list[Run], dict[str, Any]]:
    # SIGTERM ends the run as Ctrl-C does: the main task is cancelled, every finally runs.
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    client = await KubeClient.from_config(node.kubeconfig, qps=0, burst=1)
    runs: list[Run] = []
    try:
        info = await versions(client)
        for rep in range(args.repeat):
            # Alternate the order (ABBA...) so that a drift in the machine's load favours neither.
            for system in args.systems if rep % 2 == 0 else args.systems[::-1]:
                runs.append(await one_system(client, node, system, rep, peers, work, args))
                save(runs, info)
    finally:
        await client.close()
    return runs, info


class _QuietReaped(logging.Filter):
    """asyncio's child watcher warns "Unknown child process pid N" when a killed ``kubectl logs``
    was reaped first by the subprocess module's own clean-up (a known race between the two); the
    benchmark never reads that exit status, so the warning says nothing here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Unknown child process pid")


def on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def stop_leftovers() -> None:
    """Operators still running (an interrupted run): killed, they run in sessions of their own."""
    for op in list(LIVE):
        if op.proc is not None and op.proc.poll() is None:
            op.proc.kill()
            op.proc.wait()
        LIVE.discard(op)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="See docs/benchmarks.md (Real node) for what it measures."
    )
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results-real-node.json", help="results JSON"
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs of each system (medians reported); default 1")
    ap.add_argument("--burst", type=int, default=20, help="jobs created at once in the burst; default 20")
    ap.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help="comma-separated, run in this order each repeat (default: t9k-jobs,training-operator)",
    )
    ap.add_argument("--timeout", type=float, default=600, help="seconds per phase (job, burst, clean-up)")
    ap.add_argument(
        "--wait-node",
        type=float,
        default=3 * 3600,
        help="seconds to wait while another node is up on this machine (default 3 h)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs) after a clean run")
    ap.add_argument(
        "--report", type=Path, nargs="+", help="print the tables of earlier results files and exit"
    )
    args = ap.parse_args()
    try:
        if args.report:
            for i, f in enumerate(args.report):
                data = json.loads(f.read_text())
                known = {f.name for f in fields(Run)}
                runs = [Run(**{k: v for k, v in r.items() if k in known}) for r in data["runs"]]
                print(("\n" if i else "") + f"{f} ({data['command']}; {data['machine']}):\n")
                print(tables(runs, data.get("burst", 20)))
            return 0
        args.systems = [s for s in args.systems.split(",") if s]
        unknown = [s for s in args.systems if s not in SYSTEMS]
        if unknown or args.repeat < 1 or args.burst < 1:
            raise BenchError(
                f"unknown system {', '.join(unknown)} (known: {', '.join(SYSTEMS)})"
                if unknown
                else "--repeat and --burst must be at least 1"
            )
        return bench_main(args)
    except KeyboardInterrupt:
        logs = f"; logs in {WORK[0]}" if WORK else ""
        print(f"real_node: interrupted; everything it started was stopped{logs}", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - any failure: one line, and where the logs are
        msg = str(exc) if isinstance(exc, BenchError) else one_line(exc)
        if WORK and str(WORK[0]) not in msg:
            msg += f" (logs in {WORK[0]})"
        print(f"real_node: {msg}", file=sys.stderr)
        return 1


def bench_main(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, on_sigterm)
    logging.getLogger("asyncio").addFilter(_QuietReaped())
    work = Path(tempfile.mkdtemp(prefix="bench-node-", dir="/tmp"))
    WORK.append(work)
    started = dt.datetime.now(dt.UTC)
    load_start = [round(x, 2) for x in os.getloadavg()]
    built = prepare(work)
    crds = [ROOT / "deploy" / "crds", pytorchjob_crd(built["peers"], work / "bench")]
    node = Node(work, built["cp_bin"], built["node_bin"], crds)
    command = shlex.join([sys.executable, *sys.argv])
    ours, theirs = t9k_main_job(), kf_main_job(t9k_main_job())
    image = training_image(ours)

    def save(runs: list[Run], info: dict[str, Any]) -> None:
        data = {
            "command": command,
            "argv": sys.argv,
            "started": started.isoformat(timespec="seconds"),
            "machine": machine(),
            "load_average": {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]},
            "versions": {**info, "training image ids": sorted(IMAGE_IDS)},
            "burst": args.burst,
            "burst_script": BURST_SCRIPT,
            "pytorchjob_choice": PYTORCHJOB_CHOICE,
            "jobs": {
                "t9k-jobs": {"main": ours, "burst": t9k_burst_job("burst-0", image)},
                "training-operator": {"main": theirs, "burst": kf_burst_job("burst-0", image)},
            },
            "runs": [asdict(r) for r in runs],
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1) + "\n")

    runs: list[Run] = []
    try:
        start_node(node, built["images"], args.wait_node)
        progress(f"node {NODE_NAME} Ready; load average {os.getloadavg()[0]:.2f}")
        try:
            runs, _ = asyncio.run(bench(node, built["peers"], work, args, save))
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
    print(tables(runs, args.burst))
    failed = [r for r in runs if r.error]
    if failed:
        print(
            f"real_node: {len(failed)} of {len(runs)} runs failed (first: {failed[0].system} "
            f"#{failed[0].repeat + 1}: {failed[0].error}); logs kept in {work}",
            file=sys.stderr,
        )
        return 1
    if args.keep:
        progress(f"logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
