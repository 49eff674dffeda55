"""Scale benchmark: t9k-jobs' operator and Kubeflow's training operator on the same simulated cluster.

For each N (jobs of 4 replicas: 1 master + 3 workers), each operator runs alone on a fresh
control plane (etcd, kube-apiserver, kube-scheduler built by tools/controlplane/build.sh) with
kwok simulating 100 nodes of 8 GPUs; kwok moves bound pods to Running, and, when the benchmark
annotates a pod ``bench.t9k-jobs.dev/outcome: succeed|fail``, to Succeeded (exit 0) or Failed
(exit 137). Measured, all from one watch in this process:

- seconds from the first job create to all 4N pods existing, and to all N jobs Running;
- per job, seconds from its master pod's Succeeded to the job's Succeeded (p50, p99);
- per job, seconds from a worker's Failed (exit 137, restarted by the ExitCode policy on both
  sides, see docs/benchmarks.md) to its replacement pod (same name, new uid);
- the operator's peak RSS (MiB, sampled every 0.25 s) and CPU seconds (user + system);
- the operator's API requests by HTTP method, from its own Prometheus metrics;
- the ceiling: a plain async script that creates the same Services and Pods with the same
  client rate limits, no operator.

Usage (see docs/benchmarks.md for the one command that builds everything first):
    python benchmarks/cluster_scale.py --jobs 100 1000 --out benchmarks/results.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
from controlplane import ControlPlane
from operators import (  # shared with real_node.py
    KF_JOBS,
    T9K_JOBS,
    OperatorRun,
    build,
    kf_phase,
    kubeflow_operator,
    num,
    pytorchjob_crd,
    start_training_operator,
    t9k_operator,
    t9k_phase,
    until,
)

from t9k_jobs.cluster.client import NAMESPACES, PODS, SERVICES, KubeClient, Resource
from t9k_jobs.cluster.informer import Informer

NS = "bench"
REPLICAS = 4
OUTCOME = "bench.t9k-jobs.dev/outcome"
NODES = 100
APISERVER_ARGS = [  # the control plane itself must not be the limit (kwokctl's DisableQPSLimits)
    "--max-requests-inflight=0",
    "--max-mutating-requests-inflight=0",
    "--enable-priority-and-fairness=false",
]


# --------------------------------------------------------------------------- the simulated cluster


def outcome_stage(outcome: str, phase: str, exit_code: int, reason: str) -> str:
    """A kwok Stage: a Running pod annotated ``bench.t9k-jobs.dev/outcome: <outcome>`` ends in ``phase``."""
    return f"""
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {{name: bench-pod-{outcome}}}
spec:
  resourceRef: {{apiGroup: v1, kind: Pod}}
  selector:
    matchExpressions:
    - {{key: '.metadata.deletionTimestamp', operator: DoesNotExist}}
    - {{key: '.status.phase', operator: In, values: ['Running']}}
    - {{key: '.metadata.annotations["{OUTCOME}"]', operator: In, values: ['{outcome}']}}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated: {{exitCode: {exit_code}, reason: {reason}, startedAt: {{{{ $now | Quote }}}}, finishedAt: {{{{ $now | Quote }}}}}}
      {{{{ end }}}}
      phase: {phase}
"""


STAGES = "---".join(
    [outcome_stage("succeed", "Succeeded", 0, "Completed"), outcome_stage("fail", "Failed", 137, "Error")]
)


class Cluster:
    """A fresh control plane with kube-scheduler and kwok (``NODES`` fake nodes) in ``workdir``."""

    def __init__(self, workdir: Path, bin_dir: Path, peers: Path, crds: list[Path]) -> None:
        self.dir = workdir
        self.cp = ControlPlane(
            workdir / "cp",
            bin_dir,
            scheduler=True,
            controller_manager=False,
            crds=crds,
            apiserver_args=APISERVER_ARGS,
            scheduler_args=["--kube-api-qps=500", "--kube-api-burst=1000"],  # binding must not be the limit
        )
        self.peers = peers
        self.kwok: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.cp.start()
        home = self.dir / "kwok-home"
        home.mkdir(parents=True, exist_ok=True)
        config = self.dir / "kwok.yaml"
        stages = [
            yaml.safe_dump(
                {
                    "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
                    "kind": "KwokConfiguration",
                    "options": {"podPlayStageParallelism": 16, "nodePlayStageParallelism": 4},
                }
            )
        ]
        stages += [
            (self.peers / "kwok-stages" / f).read_text() for f in ("pod-ready.yaml", "pod-delete.yaml")
        ]
        stages.append(STAGES)
        config.write_text("\n---\n".join(stages))
        log = open(self.dir / "kwok.log", "wb")  # noqa: SIM115 - the child keeps it open
        self.kwok = subprocess.Popen(
            [
                str(self.peers / "bin" / "kwok"),
                f"--kubeconfig={self.cp.kubeconfig}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                f"--config={config}",
                "--node-lease-duration-seconds=0",
                "--server-address=127.0.0.1:0",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HOME": str(home)},
            start_new_session=True,
        )

    async def add_nodes(self, client: KubeClient) -> None:
        nodes = Resource("", "v1", "nodes", "Node", namespaced=False)
        await client.create(NAMESPACES, None, {"metadata": {"name": NS}})

        async def one(i: int) -> None:
            await client.create(
                nodes,
                None,
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": f"kwok-node-{i}",
                        "annotations": {"kwok.x-k8s.io/node": "fake"},
                        "labels": {"type": "kwok", "kubernetes.io/hostname": f"kwok-node-{i}"},
                    },
                    "status": {
                        "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "256", "nvidia.com/gpu": "8"},
                        "capacity": {"cpu": "64", "memory": "512Gi", "pods": "256", "nvidia.com/gpu": "8"},
                    },
                },
            )

        await asyncio.gather(*(one(i) for i in range(NODES)))

        async def ready() -> bool:
            got = await client.list(nodes)
            return (
                sum(
                    1
                    for n in got["items"]
                    if any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in (n.get("status") or {}).get("conditions") or []
                    )
                )
                == NODES
            )

        await until(ready, 60, "kwok nodes Ready")
        # Nodes are created with the not-ready taint; kube-controller-manager's node lifecycle
        # controller (not run here) would lift it once they are Ready.
        await asyncio.gather(
            *(client.patch(nodes, None, f"kwok-node-{i}", {"spec": {"taints": None}}) for i in range(NODES))
        )

    def stop(self) -> None:
        if self.kwok is not None and self.kwok.poll() is None:
            self.kwok.terminate()
            try:
                self.kwok.wait(10)
            except subprocess.TimeoutExpired:
                self.kwok.kill()
        self.cp.stop()


# --------------------------------------------------------------------------- the operators


def ours(cluster: Cluster, qps: float | None, burst: int | None, workers: int | None) -> OperatorRun:
    return t9k_operator(cluster.cp.kubeconfig, cluster.dir, qps, burst, workers)


def theirs(cluster: Cluster, qps: float | None, burst: int | None, workers: int | None) -> OperatorRun:
    return kubeflow_operator(cluster.cp.kubeconfig, cluster.dir, cluster.peers, qps, burst, workers)


PROFILE_DIR: Path | None = None


async def _profile(op: OperatorRun, out: Path) -> None:
    """Sample the operator with py-spy until it exits; collapsed stacks go to ``out``."""
    assert op.proc is not None
    proc = await asyncio.create_subprocess_exec(
        "py-spy", "record", "--pid", str(op.proc.pid), "--format", "raw", "--rate", "50", "-o", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await proc.wait()
    except asyncio.CancelledError:
        proc.send_signal(signal.SIGINT)  # py-spy writes its file and exits
        await proc.wait()
        raise


# --------------------------------------------------------------------------- the jobs


def container() -> dict[str, Any]:
    return {"name": "pytorch", "image": "example.registry/pytorch:2.1", "command": ["python", "train.py"]}


def t9k_job(i: int) -> dict[str, Any]:
    def spec(type_: str, n: int) -> dict[str, Any]:
        return {
            "type": type_,
            "replicas": n,
            "restartPolicy": "ExitCode",
            "template": {"spec": {"containers": [container()]}},
        }

    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": f"job-{i}", "namespace": NS},
        "spec": {
            "replicaSpecs": [spec("master", 1), spec("worker", REPLICAS - 1)],
            "runPolicy": {"backoffLimit": 3},
        },
    }


def kf_job(i: int) -> dict[str, Any]:
    def spec(n: int) -> dict[str, Any]:
        return {
            "replicas": n,
            "restartPolicy": "ExitCode",
            "template": {"spec": {"containers": [container()]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": f"job-{i}", "namespace": NS},
        "spec": {
            "runPolicy": {"backoffLimit": 3},
            "pytorchReplicaSpecs": {"Master": spec(1), "Worker": spec(REPLICAS - 1)},
        },
    }


@dataclass
class Watch:
    """Times (monotonic seconds) at which this process saw things happen."""

    pod_first_seen: dict[str, float] = field(default_factory=dict)
    pod_uid: dict[str, str] = field(default_factory=dict)
    replaced: dict[str, float] = field(default_factory=dict)
    pod_succeeded: dict[str, float] = field(default_factory=dict)
    pod_failed: dict[str, float] = field(default_factory=dict)
    job_running: dict[str, float] = field(default_factory=dict)
    job_succeeded: dict[str, float] = field(default_factory=dict)
    last_event: float = 0.0

    async def quiet(self, seconds: float, timeout: float) -> None:
        """Wait until no pod or job changed for ``seconds`` (the operator has settled)."""
        await until(lambda: time.monotonic() - self.last_event >= seconds, timeout, "the cluster to settle")

    def on_pod(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        now = time.monotonic()
        self.last_event = now
        name = key[1]
        if new is None:
            return
        uid, phase = new
        if name not in self.pod_first_seen:
            self.pod_first_seen[name] = now
            self.pod_uid[name] = uid
        elif uid != self.pod_uid[name] and name not in self.replaced:
            self.replaced[name] = now
        if phase == "Succeeded":
            self.pod_succeeded.setdefault(name, now)
        elif phase == "Failed":
            self.pod_failed.setdefault(name, now)

    def on_job(self, event: str, key: tuple[str, str], new: Any, old: Any) -> None:
        now = time.monotonic()
        self.last_event = now
        if new is None:
            return
        if new == "Running":
            self.job_running.setdefault(key[1], now)
        elif new == "Succeeded":
            self.job_succeeded.setdefault(key[1], now)
            self.job_running.setdefault(key[1], now)


def pod_projection(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["metadata"].get("uid", ""), (obj.get("status") or {}).get("phase") or "Pending"


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


@dataclass
class Result:
    system: str
    limits: str
    jobs: int
    pods_s: float = float("nan")
    running_s: float = float("nan")
    succeed_p50_s: float = float("nan")
    succeed_p99_s: float = float("nan")
    replace_p50_s: float = float("nan")
    replace_p99_s: float = float("nan")
    # The arrival process of the Succeeded phase: seconds from the first to the last master seen
    # Succeeded, and from the first master to the last job seen Succeeded. An operator bound by
    # its client budget drains at qps, so its latencies depend on how bunched the masters were.
    masters_spread_s: float = float("nan")
    succeed_drain_s: float = float("nan")
    peak_rss_mib: float = float("nan")
    cpu_s: float = float("nan")
    requests: dict[str, float] = field(default_factory=dict)
    error: str = ""


async def annotate(client: KubeClient, names: list[str], outcome: str) -> None:
    sem = asyncio.Semaphore(64)

    async def one(name: str) -> None:
        async with sem:
            await client.patch(PODS, NS, name, {"metadata": {"annotations": {OUTCOME: outcome}}})

    await asyncio.gather(*(one(n) for n in names))


def pod_names(i: int) -> tuple[str, str]:
    """(master pod, the worker that fails) of job ``i``: both operators name pods alike."""
    return f"job-{i}-master-0", f"job-{i}-worker-1"


async def run_operator(
    system: str, n: int, limits: str, work: Path, bin_dir: Path, peers: Path, timeout: float
) -> Result:
    res = Result(system, limits, n)
    qps, burst, workers = (50.0, 100, 8) if limits == "matched" else (None, None, None)
    if system == "t9k-jobs":
        crds = [ROOT / "deploy" / "crds"]
    else:
        crds = [pytorchjob_crd(peers, work)]
    cluster = Cluster(work, bin_dir, peers, crds)
    cluster.start()
    op: OperatorRun | None = None
    lock = None
    client = await KubeClient.from_config(cluster.cp.kubeconfig, qps=0, burst=1)
    tasks: list[asyncio.Task[Any]] = []
    try:
        await cluster.add_nodes(client)
        watch = Watch()
        pods_inf = Informer(client, PODS, namespace=NS, transform=pod_projection)
        pods_inf.add_handler(watch.on_pod)
        jobs_res = T9K_JOBS if system == "t9k-jobs" else KF_JOBS
        jobs_inf = Informer(
            client, jobs_res, namespace=NS, transform=t9k_phase if system == "t9k-jobs" else kf_phase
        )
        jobs_inf.add_handler(watch.on_job)
        tasks += [asyncio.create_task(pods_inf.run()), asyncio.create_task(jobs_inf.run())]
        await pods_inf.synced.wait()
        await jobs_inf.synced.wait()

        if system == "t9k-jobs":
            op = ours(cluster, qps, burst, workers)
            op.start()
            if PROFILE_DIR is not None and shutil.which("py-spy"):
                out = PROFILE_DIR / f"t9k-jobs-{n}-{limits}.collapsed"
                tasks.append(asyncio.create_task(_profile(op, out)))
        else:
            op = theirs(cluster, qps, burst, workers)
            lock = await start_training_operator(client, op)
        await op.wait_ready(op.ready_url)

        make = t9k_job if system == "t9k-jobs" else kf_job
        sem = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            async with sem:
                await client.create(jobs_res, NS, make(i))

        t0 = time.monotonic()
        await asyncio.gather(*(create(i) for i in range(n)))
        total = n * REPLICAS
        await until(lambda: len(watch.pod_first_seen) >= total, timeout, f"{total} pods")
        res.pods_s = max(watch.pod_first_seen.values()) - t0
        await until(lambda: len(watch.job_running) >= n, timeout, f"{n} jobs Running")
        res.running_s = max(watch.job_running.values()) - t0

        # A worker of every job fails (exit 137): time to its replacement pod.
        failing = [pod_names(i)[1] for i in range(n)]
        await until(
            lambda: all((pods_inf.get(NS, p) or ("", ""))[1] == "Running" for p in failing),
            timeout,
            "workers Running",
        )
        await watch.quiet(3.0, timeout)
        await annotate(client, failing, "fail")
        await until(lambda: all(p in watch.replaced for p in failing), timeout, "replacement pods")
        lat = [watch.replaced[p] - watch.pod_failed[p] for p in failing if p in watch.pod_failed]
        res.replace_p50_s, res.replace_p99_s = pct(lat, 0.5), pct(lat, 0.99)

        # Every master succeeds: time to the job's Succeeded.
        await until(
            lambda: all((pods_inf.get(NS, p) or ("", ""))[1] == "Running" for p in failing),
            timeout,
            "replacements Running",
        )
        await watch.quiet(3.0, timeout)
        masters = [pod_names(i)[0] for i in range(n)]
        await annotate(client, masters, "succeed")
        await until(lambda: len(watch.job_succeeded) >= n, timeout, f"{n} jobs Succeeded")
        lat = [
            watch.job_succeeded[f"job-{i}"] - watch.pod_succeeded[m]
            for i, m in enumerate(masters)
            if m in watch.pod_succeeded
        ]
        res.succeed_p50_s, res.succeed_p99_s = pct(lat, 0.5), pct(lat, 0.99)
        ended = [watch.pod_succeeded[m] for m in masters if m in watch.pod_succeeded]
        res.masters_spread_s = max(ended) - min(ended)
        res.succeed_drain_s = max(watch.job_succeeded.values()) - min(ended)

        res.requests = op.requests_by_method()
        res.cpu_s = op.cpu_seconds()
        res.peak_rss_mib = op.peak_rss / 2**20
    except Exception as exc:  # noqa: BLE001 - report the failed run and go on with the next
        res.error = f"{type(exc).__name__}: {exc}"
        if op is not None and op.proc is not None and op.proc.poll() is None:
            res.peak_rss_mib = op.peak_rss / 2**20
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if op is not None:
            op.stop()
        if lock is not None:
            lock.close()  # releases the flock
        await client.close()
        cluster.stop()
    return res


async def run_ceiling(n: int, limits: str, work: Path, bin_dir: Path, peers: Path, timeout: float) -> Result:
    """Create the Services and Pods the operators create, with their client limits: the ceiling."""
    res = Result("ceiling", limits, n)
    qps, burst = 50.0, 100  # t9k-jobs' defaults, and the matched limits
    cluster = Cluster(work, bin_dir, peers, [])
    cluster.start()
    setup = await KubeClient.from_config(cluster.cp.kubeconfig, qps=0, burst=1)
    limited = await KubeClient.from_config(cluster.cp.kubeconfig, qps=qps, burst=burst)
    try:
        await cluster.add_nodes(setup)
        sem = asyncio.Semaphore(8)

        async def job(i: int) -> None:
            async with sem:
                names = [f"job-{i}-master-0"] + [f"job-{i}-worker-{w}" for w in range(REPLICAS - 1)]
                await asyncio.gather(
                    *(
                        limited.create(
                            SERVICES,
                            NS,
                            {"metadata": {"name": p}, "spec": {"clusterIP": "None", "selector": {"p": p}}},
                        )
                        for p in names
                    )
                )
                await asyncio.gather(
                    *(
                        limited.create(
                            PODS,
                            NS,
                            {
                                "metadata": {"name": p, "labels": {"p": p}},
                                "spec": {"containers": [container()]},
                            },
                        )
                        for p in names
                    )
                )

        t0 = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(job(i) for i in range(n))), timeout)
        res.pods_s = time.monotonic() - t0
    except Exception as exc:  # noqa: BLE001
        res.error = f"{type(exc).__name__}: {exc}"
    finally:
        await setup.close()
        await limited.close()
        cluster.stop()
    return res


# --------------------------------------------------------------------------- report


def table(results: list[Result]) -> str:
    by = {(r.system, r.limits, r.jobs): r for r in results}
    lines = [
        (
            "| N | limits | system | all pods (s) | all Running (s) | Succeeded p50 / p99 (s) "
            "| masters' spread / drain (s) | replacement p50 / p99 (s) | peak RSS (MiB) | CPU (s) "
            "| API requests (GET/POST/PUT/PATCH/DELETE) | pods: ours/theirs "
            "| Succeeded p99: ours/theirs | pods: ours/ceiling |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        req = (
            "/".join(str(int(r.requests.get(m, 0))) for m in ("GET", "POST", "PUT", "PATCH", "DELETE"))
            if r.requests
            else ""
        )
        ratio_theirs = ratio_p99 = ratio_ceiling = ""
        if r.system == "t9k-jobs":
            peer = by.get(("training-operator", r.limits, r.jobs))
            ceil = by.get(("ceiling", "50/100", r.jobs))
            if peer and not peer.error:
                ratio_theirs = f"{r.pods_s / peer.pods_s:.2f}"
                ratio_p99 = f"{r.succeed_p99_s / peer.succeed_p99_s:.2f}"
            if ceil and not ceil.error:
                ratio_ceiling = f"{r.pods_s / ceil.pods_s:.2f}"
        err = f" ({r.error})" if r.error else ""
        lines.append(
            f"| {r.jobs} | {r.limits} | {r.system}{err} | {num(r.pods_s, 1)} | {num(r.running_s, 1)} | "
            f"{num(r.succeed_p50_s)} / {num(r.succeed_p99_s)} | {num(r.masters_spread_s, 1)} / {num(r.succeed_drain_s, 1)} | "
            f"{num(r.replace_p50_s)} / {num(r.replace_p99_s)} | "
            f"{num(r.peak_rss_mib, 0)} | {num(r.cpu_s, 1)} | {req} | {ratio_theirs} | {ratio_p99} | {ratio_ceiling} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--systems", default="t9k-jobs,training-operator,ceiling")
    ap.add_argument(
        "--limits",
        default="default,matched",
        help="default: each operator's own; matched: 50 qps / 100 burst / 8 workers",
    )
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per phase of one run")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results.json")
    ap.add_argument(
        "--profile", type=Path, help="sample t9k-jobs' operator with py-spy; collapsed stacks go here"
    )
    ap.add_argument(
        "--report",
        type=Path,
        nargs="+",
        help="print the table of each earlier results file (ratios within one file, one run) and exit",
    )
    args = ap.parse_args()
    if args.report:
        for i, f in enumerate(args.report):
            data = json.loads(f.read_text())
            if len(args.report) > 1:
                print(("\n" if i else "") + f"{f} ({' '.join(data['argv'][1:])}):\n")
            print(table([Result(**r) for r in data["results"]]))
        return 0
    global PROFILE_DIR
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        PROFILE_DIR = args.profile
    bin_dir, peers = build("build.sh"), build("build-peers.sh")
    machine = f"{platform.node()}: {os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB, Python {platform.python_version()}"
    results: list[Result] = []
    runs = []
    for n in args.jobs:
        if "ceiling" in args.systems.split(","):
            runs.append((n, "50/100", "ceiling"))
        for limits in args.limits.split(","):
            runs += [(n, limits, s) for s in args.systems.split(",") if s != "ceiling"]
    for n, limits, system in runs:
        work = Path(tempfile.mkdtemp(prefix=f"bench-{system}-{n}-"))
        started = time.monotonic()
        if system == "ceiling":
            r = asyncio.run(run_ceiling(n, limits, work, bin_dir, peers, args.timeout))
        else:
            r = asyncio.run(run_operator(system, n, limits, work, bin_dir, peers, args.timeout))
        results.append(r)
        print(
            f"{system} N={n} limits={limits}: {json.dumps(asdict(r))} ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
        if not r.error:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"  logs kept in {work}", flush=True)
        # Written after every run: a long run cut short keeps what it measured.
        args.out.write_text(
            json.dumps(
                {"machine": machine, "argv": sys.argv, "results": [asdict(r) for r in results]}, indent=1
            )
        )
    print(machine)
    print(table(results))
    return 0 if all(not r.error for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
