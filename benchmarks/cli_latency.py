"""Where people wait (issue 35): the CLI's start against kubectl, the operator at rest against Kubeflow's.

1. **The CLI.** Each command below runs ``--repeat`` times (default 9), the commands taking turns
   (one of each, then the next round), so that every command meets the same load. Per run: the
   CPU seconds (user + system) of the child and all it waited for (``RUSAGE_CHILDREN``), and its
   wall time. Reported: the median of each, and the CPU as a multiple of ``kubectl version
   --client`` measured in the same rounds (the goal: at most 3x) and of a bare ``python -c pass``
   of the interpreter t9k-jobs runs in (what no Python command line can go below).

   ``kubectl version --client``, ``python -c pass``, what the verbs are made of (``python -c
   "import typer"``, ``pydantic``, ``t9k_jobs.api`` (the API models, not built), ``aiohttp``),
   ``t9k-jobs --help``, ``version``,
   ``validate`` and ``render`` of examples/pytorch-ddp/job.yaml, ``get`` of local runs (none, and
   ``--runs`` finished ones made by ``t9k-jobs run`` first), and against the test API server
   (tools/controlplane: etcd and kube-apiserver on loopback, the CRDs installed, ``--runs``
   PyTorchTrainingJobs created, no operator): ``t9k-jobs get`` beside ``kubectl get
   pytorchtrainingjobs``.
2. **The operator at rest.** On the same API server, its jobs deleted (no job, no node), t9k-jobs' operator
   (``python -m t9k_jobs.cli operator``, as benchmarks/real_node.py and cluster_scale.py start it)
   and Kubeflow's training operator v1 (tools/controlplane/build-peers.sh; PyTorchJob only), one
   after the other: started, ready (``/readyz``), then left alone for ``--idle`` seconds while
   its ``VmRSS`` is read every 0.5 s. Reported: the RSS at the end of the idle time and the most
   seen from the start (MiB).

    python benchmarks/cli_latency.py                      # both, writes benchmarks/results-cli-latency.json
    python benchmarks/cli_latency.py --no-operators       # only the CLI
    python benchmarks/cli_latency.py --report benchmarks/results-cli-latency.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from controlplane import ControlPlane  # noqa: E402
from operators import (  # noqa: E402
    OperatorRun,
    build,
    kubeflow_operator,
    pytorchjob_crd,
    start_training_operator,
    t9k_operator,
    training_operator_version,
)

from t9k_jobs.cluster.client import KubeClient  # noqa: E402

JOB = ROOT / "examples" / "pytorch-ddp" / "job.yaml"
#: What ``--runs`` local runs run: one replica that prints a line.
HELLO = """apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: {name}
spec:
  successRules:
    - {{"worker": [0]}}
  replicaSpecs:
    - type: worker
      replicas: 1
      template:
        spec:
          containers:
            - name: c
              image: python
              command: ["python", "-c", "print('hello')"]
"""


@dataclass
class Command:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    cpu_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)
    exit_codes: list[int] = field(default_factory=list)

    def run(self) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            self.argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=self.environ(),
            cwd=self.cwd,
        )
        self.wall_s.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu_s.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        self.exit_codes.append(done.returncode)

    def environ(self) -> dict[str, str]:
        """This environment with ``env`` on top, writing ``.pyc`` files (as Python does unless told
        not to: a command line is measured as it runs every time after its first)."""
        env = {**os.environ, **self.env}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        return env

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_s)

    @property
    def wall(self) -> float:
        return statistics.median(self.wall_s)


@dataclass
class Idle:
    system: str
    rss_end_mib: float
    rss_max_mib: float
    samples: int
    idle_s: float


def t9k_jobs_argv() -> list[str]:
    """How t9k-jobs is started: its console script beside this interpreter, as a user types it."""
    script = Path(sys.executable).with_name("t9k-jobs")
    return [str(script)] if script.exists() else [sys.executable, "-m", "t9k_jobs.cli"]


def make_local_runs(runs_dir: Path, n: int) -> None:
    """``n`` finished local runs of a one-line GenericJob under ``runs_dir``."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        manifest = runs_dir.parent / f"hello-{i}.yaml"
        manifest.write_text(HELLO.format(name=f"hello-{i}"))
        subprocess.run(
            [*t9k_jobs_argv(), "run", str(manifest), "-q", "--no-watch", "--run-dir", str(runs_dir / f"hello-{i}")],
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=runs_dir.parent,
        )


async def cluster_jobs(kubeconfig: Path, n: int, delete: bool = False) -> None:
    """Create ``n`` PyTorchTrainingJobs (examples/pytorch-ddp/job.yaml as digits-0...) in
    ``default``, or, with ``delete``, delete them (no operator has run: nothing holds them)."""
    import yaml

    from t9k_jobs.cluster.client import JOB_RESOURCES

    res = JOB_RESOURCES["PyTorchTrainingJob"]
    doc = yaml.safe_load(JOB.read_text())
    client = await KubeClient.from_config(kubeconfig)
    try:
        for i in range(n):
            if delete:
                await client.delete(res, "default", f"digits-{i}")
            else:
                doc["metadata"] = {"name": f"digits-{i}", "namespace": "default"}
                await client.create(res, "default", doc)
    finally:
        await client.close()


def cli_commands(work: Path, kubectl: Path, kubeconfig: Path | None, runs: int) -> list[Command]:
    t9k = t9k_jobs_argv()
    local = {"KUBECONFIG": ""}
    empty = work / "empty"
    empty.mkdir(exist_ok=True)
    with_runs = work / "with-runs" / "t9k-runs"
    make_local_runs(with_runs, runs)
    cmds = [
        Command("kubectl version --client", [str(kubectl), "version", "--client"], local),
        Command("python -c pass", [sys.executable, "-c", "pass"], local),
        # What the verbs are made of: the floor each library sets (not t9k-jobs' own work).
        Command("python: import typer", [sys.executable, "-c", "import typer"], local),
        Command("python: import pydantic", [sys.executable, "-c", "import pydantic"], local),
        Command("python: import t9k_jobs.api", [sys.executable, "-c", "import t9k_jobs.api"], local),
        Command("python: import aiohttp", [sys.executable, "-c", "import aiohttp"], local),
        Command("t9k-jobs --help", [*t9k, "--help"], local),
        Command("t9k-jobs version", [*t9k, "version"], local),
        Command("t9k-jobs validate job.yaml", [*t9k, "validate", str(JOB)], local),
        Command("t9k-jobs render job.yaml", [*t9k, "render", str(JOB)], local),
        Command("t9k-jobs get (local, no runs)", [*t9k, "get"], local, str(empty)),
        Command(f"t9k-jobs get (local, {runs} runs)", [*t9k, "get"], local, str(with_runs.parent)),
    ]
    if kubeconfig is not None:
        cluster = {"KUBECONFIG": str(kubeconfig)}
        cmds += [
            Command(f"t9k-jobs get (API server, {runs} jobs)", [*t9k, "get"], cluster, str(empty)),
            Command(
                f"kubectl get pytorchtrainingjobs ({runs} jobs)",
                [str(kubectl), "get", "pytorchtrainingjobs"],
                cluster,
                str(empty),
            ),
        ]
    return cmds


def measure(cmds: list[Command], repeat: int) -> None:
    for cmd in cmds:  # one unmeasured run each: the page cache and .pyc files are warm for all
        Command(cmd.name, cmd.argv, cmd.env, cmd.cwd).run()
    for _ in range(repeat):
        for cmd in cmds:
            cmd.run()
    bad = [f"{c.name}: exit {c.exit_codes}" for c in cmds if any(c.exit_codes)]
    if bad:
        raise SystemExit("commands failed: " + "; ".join(bad))


async def idle_rss(op: OperatorRun, idle: float, start: Any) -> Idle:
    """Start ``op`` (``start``: a coroutine function that starts it), wait until it is ready, leave
    it ``idle`` seconds; its RSS then, and the most seen since it started (sampled every 0.5 s)."""
    lock = await start(op)
    try:
        await op.wait_ready(op.ready_url)
        seen = []
        end = time.monotonic() + idle
        while time.monotonic() < end:
            seen.append(op.rss())
            await asyncio.sleep(0.5)
        last = op.rss()
        return Idle(op.name, last / 2**20, max(op.peak_rss, last, *seen) / 2**20, len(seen), idle)
    finally:
        op.stop()
        if lock is not None:
            lock.close()


async def operators_at_rest(cp: ControlPlane, peers: Path, work: Path, idle: float) -> list[Idle]:
    client = await KubeClient.from_config(cp.kubeconfig)
    try:

        async def ours(op: OperatorRun) -> None:
            op.start()

        async def theirs(op: OperatorRun) -> Any:
            return await start_training_operator(client, op)

        return [
            await idle_rss(t9k_operator(cp.kubeconfig, work, None, None, None), idle, ours),
            await idle_rss(kubeflow_operator(cp.kubeconfig, work, peers, None, None, None), idle, theirs),
        ]
    finally:
        await client.close()


def table(cmds: list[dict[str, Any]], idle: list[dict[str, Any]]) -> str:
    lines = []
    if cmds:
        lines += [
            "| command | CPU (ms) | × kubectl version --client | × python -c pass | wall (ms) |",
            "|---|---|---|---|---|",
        ]
    base = next((c for c in cmds if c["name"] == "kubectl version --client"), None)
    bare = next((c for c in cmds if c["name"] == "python -c pass"), None)
    for c in cmds:
        assert base is not None and bare is not None
        lines.append(
            f"| `{c['name']}` | {1000 * c['cpu']:.0f} | {c['cpu'] / base['cpu']:.1f} | "
            f"{c['cpu'] / bare['cpu']:.1f} | {1000 * c['wall']:.0f} |"
        )
    if idle:
        lines += ["" if lines else "", "| operator | idle RSS (MiB) | most since start (MiB) | idle (s) |", "|---|---|---|---|"]
        for i in idle:
            lines.append(f"| {i['system']} | {i['rss_end_mib']:.0f} | {i['rss_max_mib']:.0f} | {i['idle_s']:.0f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9, help="runs of each command (the median is reported)")
    ap.add_argument("--runs", type=int, default=3, help="local runs, and jobs on the API server, that get lists")
    ap.add_argument("--idle", type=float, default=30.0, help="seconds each operator is left alone once ready")
    ap.add_argument("--no-operators", action="store_true", help="only the CLI")
    ap.add_argument("--no-cli", action="store_true", help="only the operators at rest")
    ap.add_argument("--no-cluster", action="store_true", help="no API server: only the local commands")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results-cli-latency.json")
    ap.add_argument("--report", type=Path, help="print the tables of an earlier results file and exit")
    args = ap.parse_args()
    if args.report:
        data = json.loads(args.report.read_text())
        print(table(data["commands"], data["operators"]))
        return 0
    bin_dir = build("build.sh")
    peers = build("build-peers.sh") if not args.no_operators else None
    work = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    cp = None
    idle: list[Idle] = []
    try:
        kubeconfig = None
        if not args.no_cluster:
            crds = [ROOT / "deploy" / "crds"]
            if peers is not None:
                crds.append(pytorchjob_crd(peers, work))
            cp = ControlPlane(work / "cp", bin_dir, scheduler=False, controller_manager=False, crds=crds)
            cp.start()
            kubeconfig = cp.kubeconfig
            asyncio.run(cluster_jobs(kubeconfig, args.runs))
        cmds = [] if args.no_cli else cli_commands(work, bin_dir / "kubectl", kubeconfig, args.runs)
        load_before = os.getloadavg()
        measure(cmds, args.repeat)
        load_after = os.getloadavg()
        if cp is not None and peers is not None:
            asyncio.run(cluster_jobs(cp.kubeconfig, args.runs, delete=True))  # at rest: no job at all
            idle = asyncio.run(operators_at_rest(cp, peers, work, args.idle))
    finally:
        if cp is not None:
            cp.stop()
        shutil.rmtree(work, ignore_errors=True)
    rows = [{"name": c.name, "argv": c.argv, "cpu": c.cpu, "wall": c.wall, "cpu_s": c.cpu_s, "wall_s": c.wall_s} for c in cmds]
    machine = f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}"
    if peers is not None:
        try:
            machine += f", training operator {training_operator_version()}"
        except (IndexError, OSError):  # build-peers.sh spells its default otherwise
            machine += ", training operator (version not read)"
    args.out.write_text(
        json.dumps(
            {
                "machine": machine,
                "argv": sys.argv,
                "load_avg_before": load_before,
                "load_avg_after": load_after,
                "commands": rows,
                "operators": [asdict(i) for i in idle],
            },
            indent=1,
        )
    )
    print(machine)
    print(f"load average (1, 5, 15 min) before the CLI rounds {load_before}, after {load_after}")
    print(table(rows, [asdict(i) for i in idle]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
