"""Gangs in racks (issue 43, part 1): 20 gangs that each fit one rack, placed by the real
kube-scheduler, with ``t9k-jobs.io/topology-key`` (Required) and without.

Each mode gets a control plane of its own (tools/controlplane: Kubernetes v1.37.2 with the Workload
API and the ``TopologyAwareWorkloadScheduling`` gate on, kube-scheduler running) and the same
nodes: ``--racks`` racks of ``--nodes`` Node objects of ``--cpu`` CPUs each (no kubelet: a bound pod
stays Pending; where the scheduler put it is its ``spec.nodeName``), labelled
``topology.kubernetes.io/rack``. The operator runs as a process; ``--gangs`` PyTorchTrainingJobs of
``--ranks`` pods of 1 CPU each (``t9kScheduler``: a native PodGroup each) are created at once.
Recorded per mode: seconds from the first POST until every pod is bound (``placed_s``), gangs
whose pods span more than one rack (``split``), and gangs not placed within ``--timeout``.
The defaults fill the racks to 15 of 16 CPUs: packed only if no gang is split.

    python benchmarks/topology_placement.py --out benchmarks/results-topology.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.cluster.conftest import started_plane  # noqa: E402
from tests.cluster.kube import Kube, job_path, pod_path  # noqa: E402
from tests.cluster.operator_proc import OperatorProcess  # noqa: E402
from tests.cluster.test_topology import GATES, OWNER, RACK, add_node, gang, namespace_in  # noqa: E402


def progress(msg: str) -> None:
    print(f"[topology {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def one_mode(mode: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    planes = started_plane(work / mode, scheduler=True, apiserver_args=[GATES], scheduler_args=[GATES],
                           controller_manager_args=[GATES])  # fmt: skip
    plane = next(planes)
    try:
        kube = Kube(plane.kubeconfig)
        racks = {}
        for r in range(args.racks):
            for n in range(args.nodes):
                name = f"rack-{r}-node-{n}"
                add_node(kube, name, {RACK: str(r)}, cpu=str(args.cpu))
                racks[name] = str(r)
        op = OperatorProcess(plane.kubeconfig, work / f"{mode}-operator.log", "--no-leader-elect").start()
        try:
            ns = namespace_in(kube, f"bench-{mode}")
            names = [f"g{i:02d}" for i in range(args.gangs)]
            started = time.monotonic()
            for name in names:
                kube.create(job_path(ns, "PyTorchTrainingJob"), gang(ns, name, args.ranks - 1,
                                                                      "Required" if mode == "topology" else None))  # fmt: skip
            placed_s, bound = None, {}
            while time.monotonic() - started < args.timeout:
                pods = kube.list(pod_path(ns))
                bound = {}
                for p in pods:
                    node = p["spec"].get("nodeName")
                    if node:
                        bound.setdefault(p["metadata"]["labels"][OWNER], []).append(racks[node])
                if sum(len(v) for v in bound.values()) == args.gangs * args.ranks:
                    placed_s = time.monotonic() - started
                    break
                time.sleep(0.2)
            split = sorted(n for n, r in bound.items() if len(set(r)) > 1)
            unplaced = sorted(n for n in names if len(bound.get(n, [])) < args.ranks)
            progress(f"{mode}: placed in {placed_s} s, {len(split)} split, {len(unplaced)} not placed")
            return {"mode": mode, "placed_s": None if placed_s is None else round(placed_s, 2),
                    "split": len(split), "split_gangs": split, "not_placed": unplaced}  # fmt: skip
        finally:
            op.stop()
    finally:
        planes.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--racks", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=4, help="nodes per rack")
    ap.add_argument("--cpu", type=int, default=4, help="CPUs per node")
    ap.add_argument("--gangs", type=int, default=20)
    ap.add_argument("--ranks", type=int, default=3, help="pods per gang (a master and ranks-1 workers)")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="topology-bench-") as tmp:
        results = [one_mode(mode, args, Path(tmp)) for mode in ("topology", "plain")]
    doc = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "when": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "args": vars(args) | {"out": str(args.out)},
        "results": results,
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print("| mode | gangs | placed in (s) | split | not placed |\n|---|---|---|---|---|")
    for r in results:
        print(f"| {r['mode']} | {args.gangs} | {r['placed_s']} | {r['split']} | {len(r['not_placed'])} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
