"""Faults on the real node, measured: containerd, the kubelet, kube-apiserver and etcd, each stopped
and started again while jobs run, with t9k-jobs' operator in the cluster (two pods, Lease election).

One command brings up the real node of tools/node (pause, training and operator images), installs
the operator as ``t9k-jobs install --with-operator`` does, and then, ``--repeat`` times, runs each
fault in turn in a fresh namespace. The scenario is ``run_fault`` of tests/node/test_faults.py, the
one the node tests check: three GenericJobs of two replicas run; the component is stopped (SIGTERM,
SIGKILL after 15 s); two jobs (one that must succeed, one whose worker-1 exits 1) are released so
their containers end while it is down; the component is started again with the same command line;
the third job is released once everything is back. Recorded per fault (seconds):

* ``stop_s``, ``start_s``: the process's stop, and its start until it serves again; ``down_s``:
  from the stop signal until it serves again (includes the few tenths of a second the released
  containers take to end);
* ``kubelet_reported_s``: from the component back until the API server shows the released pods
  Succeeded/Failed; ``jobs_ended_s``: until the operator has written both jobs' final phase;
  ``lease_renewed_s``: until a running operator pod has renewed the Lease; ``operators_ready_s``:
  until both operator pods answer /readyz (asked first-hand, inside the node), one as the leader;
* ``operators_restarted``: operator pods whose process started during the fault (a leader that
  cannot renew its Lease for 10 s exits, and the kubelet restarts it);
* ``phases``, ``jobs_lost`` (a job not in its expected phase), ``duplicate_pods`` (pods other than
  the six, or a second uid under one name, seen by a watch that follows the namespace through the
  fault), ``problems`` (any check of the test that failed).

Results, with the machine, the load average and the exact command, go to ``--out``; a Markdown
table (medians and maxima per fault) to stdout. The node is taken down at the end, also on Ctrl-C,
SIGTERM or failure. Needs root; refuses while another node runs on the machine.

    python benchmarks/node_faults.py --out benchmarks/results-node-faults.json [--repeat 3]
    python benchmarks/node_faults.py --report benchmarks/results-node-faults.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import secrets
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.cluster.kube import Kube, KubeError  # noqa: E402
from tests.node.conftest import IMAGES, Node, NodeError, install_operator, preflight  # noqa: E402
from tests.node.test_faults import FAULTS, JOBS, run_fault  # noqa: E402

TIMINGS = ("down_s", "stop_s", "start_s", "kubelet_reported_s", "jobs_ended_s", "lease_renewed_s",
           "operators_ready_s")


def progress(msg: str) -> None:
    print(f"[node-faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build(*cmd: str) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise NodeError(f"{' '.join(cmd[1:])} failed (exit {out.returncode}): {tail}")
    return out.stdout


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "")
    return (f"{os.cpu_count()} CPUs ({model}), {mem:.0f} GiB, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def new_namespace(kube: Kube) -> str:
    name = f"f-{secrets.token_hex(4)}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    Kube.wait_for(lambda: kube.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"), timeout=120,
                  what=f"the default ServiceAccount of {name}")
    return name


def table(runs: list[dict[str, Any]]) -> str:
    """Markdown: one row per fault, median (max) of each timing, and the totals of what must be zero."""
    head = ["fault", "runs", *TIMINGS, "operator pods restarted", "jobs right", "duplicate pods", "jobs lost"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for fault in FAULTS:
        mine = [r for r in runs if r["component"] == fault]
        if not mine:
            continue
        ok = [r for r in mine if "error" not in r]
        cells = [fault, str(len(mine))]
        for key in TIMINGS:
            values = [r[key] for r in ok if key in r]
            cells.append(f"{statistics.median(values):.1f} ({max(values):.1f})" if values else "-")
        right = sum(r.get("phases", {}).get(j) == JOBS[j][2] for r in ok for j in JOBS)
        cells += [
            str(sum(len(r.get("operators_restarted", [])) for r in ok)),
            f"{right}/{len(JOBS) * len(mine)}",
            str(sum(r.get("duplicate_pods", 0) for r in ok)),
            str(sum(r.get("jobs_lost", len(JOBS)) for r in mine)),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def prepare_node(prefix: str, say: Any = progress) -> tuple[Node, Path, dict[str, str]]:
    """Build (or find cached) the control plane, the node and the images; returns the Node (not
    started) in a new directory ``/tmp/<prefix>*``, that directory, and image name -> archive.
    Raises NodeError when not root or a build fails."""
    if os.geteuid() != 0:
        raise NodeError("a real node needs root (containerd, cgroups, network namespaces); run as root")
    say("building (or finding cached) the control plane, the node and the images")
    build("bash", str(ROOT / "tools/node/packages.sh"))
    preflight()
    cp_bin = Path(build("bash", str(ROOT / "tools/controlplane/build.sh")).split()[-1])
    node_bin = Path(build("bash", str(ROOT / "tools/node/build.sh")).split()[-1])
    lines = build("bash", str(ROOT / "tools/images/build.sh"), *IMAGES).splitlines()
    archives = dict(line.split(None, 1) for line in lines if line.strip())
    work = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # short: containerd's socket path
    return Node(work, cp_bin, node_bin, [ROOT / "deploy" / "crds"]), work, archives


def bench(args: argparse.Namespace) -> int:
    node, work, archives = prepare_node("bench-faults-")
    data: dict[str, Any] = {
        "command": shlex.join(["python", *sys.argv]),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average": {"start": [round(x, 2) for x in os.getloadavg()]},
        "jobs": {name: {"worker-1 exits 1": fail, "released while down": during, "expected": phase}
                 for name, (fail, during, phase) in JOBS.items()},
        "runs": [],
    }

    def save() -> None:
        data["load_average"]["end"] = [round(x, 2) for x in os.getloadavg()]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(data, indent=1) + "\n")

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        progress(f"starting the node in {work}")
        node.up([archives[name] for name in IMAGES])
        install_operator(node)
        kube = Kube(node.kubeconfig)
        data["versions"] = {
            "kube-apiserver": kube.get("/version").get("gitVersion"),
            **{k: v for k, v in kube.get("/api/v1/nodes/t9k-node")["status"]["nodeInfo"].items()
               if k in ("kubeletVersion", "containerRuntimeVersion", "kernelVersion")},
        }
        for repeat in range(args.repeat):
            for fault in args.faults:
                progress(f"round {repeat + 1}/{args.repeat}: {fault}; load average {os.getloadavg()[0]:.2f}")
                ns = new_namespace(kube)
                try:
                    result = run_fault(node, kube, ns, fault)
                except (AssertionError, NodeError, KubeError, OSError) as exc:
                    result = {"component": fault, "error": f"{type(exc).__name__}: {exc}"}
                result["round"] = repeat + 1
                data["runs"].append(result)
                save()
                progress(json.dumps({k: v for k, v in result.items() if k not in ("phases", "leader_after")}))
                try:
                    kube.delete(f"/api/v1/namespaces/{ns}")
                except KubeError:
                    pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        progress("taking the node down")
        node.down()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    save()
    print(f"{data['machine']}; load average {data['load_average']}\n")
    print(table(data["runs"]))
    bad = [r for r in data["runs"] if "error" in r or r.get("problems")]
    if bad:
        print(f"node_faults: {len(bad)} of {len(data['runs'])} faults did not hold; logs kept in {work}",
              file=sys.stderr)
        return 1
    if args.keep:
        progress(f"logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="See docs/reliability.md for what it measures and the results.")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results-node-faults.json")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of all faults (default 3)")
    ap.add_argument("--faults", default=",".join(FAULTS),
                    help=f"comma-separated (default {','.join(FAULTS)})")
    ap.add_argument("--keep", action="store_true", help="keep the node's directory (logs) after a clean run")
    ap.add_argument("--report", type=Path, help="print the table of an earlier results file and exit")
    args = ap.parse_args()
    if args.report:
        data = json.loads(args.report.read_text())
        print(f"{args.report} ({data['command']}; {data['machine']}):\n")
        print(table(data["runs"]))
        return 0
    args.faults = [f for f in args.faults.split(",") if f]
    if any(f not in FAULTS for f in args.faults) or args.repeat < 1:
        print(f"node_faults: --faults takes {','.join(FAULTS)}; --repeat at least 1", file=sys.stderr)
        return 2
    try:
        return bench(args)
    except KeyboardInterrupt:
        print("node_faults: interrupted; the node was taken down", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the node could not start, the operator not install...
        print(f"node_faults: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
