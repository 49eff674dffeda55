"""What gang admission costs on the real node: create -> every rank Running, with and without it.

One command brings up the real node of tools/node (Kubernetes v1.37.2 with the Workload API on,
images built here), installs the operator as ``t9k-jobs install --with-operator`` does, and then,
``--repeat`` rounds, creates the same GenericJob of ``--ranks`` workers twice, side by side in time:
once with ``spec.scheduler.t9kScheduler`` (the operator makes a scheduling.k8s.io/v1beta1 PodGroup,
the pods join it, kube-scheduler binds them together) and once without (each pod scheduled on its
own). The order alternates each round so neither mode always runs first. Each rank requests 100m
CPU, so every job fits: what is measured is the gang's own cost, not waiting for room.

Recorded per job (seconds): ``running_s`` from the POST of the job until the API server shows every
rank's pod Running (polled every 0.1 s); ``bound_s`` until every pod has a node. The job is then
deleted and its pods awaited gone before the next one. Results (with the machine, the load average
and the command) go to ``--out``; a Markdown table of medians and the ratio gang/plain to stdout.
Needs root; refuses while another node runs on the machine.

    python benchmarks/gang_start.py --out benchmarks/results-gang-start.json [--repeat 10] [--ranks 4]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import secrets
import shlex
import shutil
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.node_faults import machine, new_namespace, on_sigterm, prepare_node  # noqa: E402
from tests.cluster.kube import Kube, KubeError  # noqa: E402
from tests.node.conftest import IMAGES, TRAINING_IMAGE, NodeError, install_operator  # noqa: E402

MODES = ("gang", "plain")


def progress(msg: str) -> None:
    print(f"[gang-start {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def job(name: str, ranks: int, gang: bool) -> dict[str, Any]:
    container = {
        "name": "worker",
        "image": TRAINING_IMAGE,
        "command": ["sleep", "600"],
        "resources": {"requests": {"cpu": "100m"}},
    }
    spec: dict[str, Any] = {
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": ranks,
                "restartPolicy": {"policy": "Never"},
                "template": {"spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}},
            }
        ]
    }
    if gang:
        spec["scheduler"] = {"t9kScheduler": {"queue": "default", "priority": 50}}
    return {"apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": name}, "spec": spec}


def one(kube: Kube, ns: str, mode: str, ranks: int) -> dict[str, Any]:
    """Create the job, time it until every rank runs, delete it and wait for its pods to go."""
    name = f"{mode}-{secrets.token_hex(3)}"
    path = f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{ns}/genericjobs"
    selector = f"tensorstack.dev/owner-name={name}"
    t0 = time.monotonic()
    kube.create(path, job(name, ranks, mode == "gang"))
    bound_s = None
    deadline = t0 + 300
    while True:
        pods = kube.list(f"/api/v1/namespaces/{ns}/pods", label_selector=selector)
        now = time.monotonic()
        if bound_s is None and len(pods) == ranks and all(p["spec"].get("nodeName") for p in pods):
            bound_s = now - t0
        if len(pods) == ranks and all(p["status"].get("phase") == "Running" for p in pods):
            running_s = now - t0
            break
        if now > deadline:
            raise NodeError(f"{name}: not every rank ran within 300 s")
        time.sleep(0.1)
    joined = all((p["spec"].get("schedulingGroup") or {}).get("podGroupName") == name for p in pods)
    kube.delete(f"{path}/{name}")
    Kube.wait_for(
        lambda: not kube.list(f"/api/v1/namespaces/{ns}/pods", label_selector=selector),
        timeout=300, interval=0.2, what=f"the pods of {name} gone",
    )
    return {"mode": mode, "job": name, "running_s": round(running_s, 2), "bound_s": round(bound_s or running_s, 2),
            "joined_pod_group": joined}


def table(runs: list[dict[str, Any]]) -> str:
    rows = ["| mode | jobs | create -> all bound, median (max) s | create -> all Running, median (max) s |",
            "|---|---|---|---|"]
    med: dict[str, float] = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        bound = [r["bound_s"] for r in mine]
        running = [r["running_s"] for r in mine]
        med[mode] = statistics.median(running)
        rows.append(f"| {mode} | {len(mine)} | {statistics.median(bound):.2f} ({max(bound):.2f}) | "
                    f"{med[mode]:.2f} ({max(running):.2f}) |")
    if len(med) == 2:
        rows.append(f"\nratio gang/plain of the medians (create -> all Running): {med['gang'] / med['plain']:.3f}")
    return "\n".join(rows)


def bench(args: argparse.Namespace) -> int:
    node, work, archives = prepare_node("bench-gang-", progress)
    data: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average": {"start": [round(x, 2) for x in os.getloadavg()]},
        "ranks": args.ranks,
        "runs": [],
    }

    def save() -> None:
        data["load_average"]["end"] = [round(x, 2) for x in os.getloadavg()]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1) + "\n")

    signal.signal(signal.SIGTERM, on_sigterm)
    failed = False
    try:
        progress(f"starting the node in {work}")
        node.up([archives[name] for name in IMAGES])
        install_operator(node)
        kube = Kube(node.kubeconfig)
        data["versions"] = {"kube-apiserver": kube.get("/version").get("gitVersion")}
        ns = new_namespace(kube)
        one(kube, ns, "plain", args.ranks)  # warm-up: the image's first start, not counted
        for repeat in range(args.repeat):
            order = MODES if repeat % 2 == 0 else MODES[::-1]
            for mode in order:
                try:
                    result = one(kube, ns, mode, args.ranks)
                except (NodeError, KubeError, AssertionError) as exc:
                    result = {"mode": mode, "error": f"{type(exc).__name__}: {exc}"}
                    failed = True
                result["round"] = repeat + 1
                data["runs"].append(result)
                save()
                progress(json.dumps(result))
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        progress("taking the node down")
        node.down()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    save()
    print(f"{data['machine']}; load average {data['load_average']}; {args.ranks} ranks\n")
    print(table([r for r in data["runs"] if "error" not in r]))
    if failed or not all(r.get("joined_pod_group", True) for r in data["runs"] if r.get("mode") == "gang"):
        print(f"gang_start: some jobs failed or a gang's pods did not join its PodGroup; logs kept in {work}",
              file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="See docs/benchmarks.md for the results.")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results-gang-start.json")
    ap.add_argument("--repeat", type=int, default=10, help="rounds of one gang and one plain job (default 10)")
    ap.add_argument("--ranks", type=int, default=4, help="workers per job (default 4)")
    args = ap.parse_args()
    try:
        return bench(args)
    except NodeError as exc:
        print(f"gang_start: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
