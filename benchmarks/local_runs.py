"""How the day-two verbs scale with the number of local run dirs, and what ``logs --tail`` costs.

One real finished run is made first (``t9k-jobs run`` of a one-replica GenericJob); its run dir
is then copied ``--runs`` times into one runs dir, each copy renamed to a job of its own
(``bench-0000`` ...: ``run.json``, ``job.yaml``, ``manifest.yaml`` rewritten, the status written
again as the runtime writes it), so the runs dir holds that many finished runs as the runtime
leaves them. The runs are made by this checkout; an older version reads what it knows of them
(``job.yaml``, ``status.yaml``). Measured, each the median of
``--repeat`` runs, in this process (no interpreter start-up) and as a CLI command (wall time of
``python -m t9k_jobs.cli ...``, start-up included):

* ``list``: ``Client.local(runs).summaries()`` / ``t9k-jobs get``: every run, one row each;
* ``lookup``: ``Client.local(runs).summaries("gj", NAME)`` / ``t9k-jobs get gj NAME``: one run,
  found by name among all;
* ``tail``: ``t9k-jobs logs gj NAME --tail 10`` of a run whose ``job.log`` is ``--log-mb`` MB,
  with the command's peak RSS (``ru_maxrss`` of the child).

With ``--code DIR`` the same is measured for another checkout's ``src`` (``git archive REV | tar
-x -C DIR``), to compare with an older version on the same machine and data.

    python benchmarks/local_runs.py --runs 1000 --out benchmarks/results-local-runs.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

JOB = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "GenericJob",
    "metadata": {"name": "seed"},
    "spec": {
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "main", "image": "local", "command": ["true"]}]}},
            }
        ]
    },
}


def cli(code: Path | None, cwd: Path, *args: str) -> tuple[float, int, str, float]:
    """Run the CLI (of ``code``'s src when given): (wall seconds, exit code, stderr, peak RSS in
    MiB of that process, from ``wait4``)."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    if code is not None:
        env["PYTHONPATH"] = str(code / "src")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "t9k_jobs.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return took, proc.returncode, err, usage.ru_maxrss / 1024


def make_runs(base: Path, count: int, log_mb: int) -> Path:
    """``count`` finished runs under ``base/t9k-runs``, copies of one real run."""
    manifest = base / "seed.yaml"
    manifest.write_text(yaml.safe_dump(JOB))
    seed_dir = base / "seed-run"
    done = subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "run", str(manifest), "--quiet", "--run-dir",
                           str(seed_dir)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the seed run failed: {done.stdout}{done.stderr}")
    runs = base / "t9k-runs"
    runs.mkdir()
    try:
        from t9k_jobs.local.rundir import write_status
    except ImportError:  # an older version: no status.json
        write_status = None
    for i in range(count):
        name = f"bench-{i:04d}"
        target = runs / f"{name}-20260101-000000"
        shutil.copytree(seed_dir, target)
        for file in ("job.yaml", "manifest.yaml"):
            path = target / file
            if path.exists():
                path.write_text(path.read_text().replace("name: seed", f"name: {name}"))
        info = target / "run.json"
        if info.exists():
            data = json.loads(info.read_text())
            data["name"] = name
            info.write_text(json.dumps(data))
        if write_status is not None:  # as the runtime writes it, for this copy's own status.yaml
            write_status(target, yaml.safe_load((target / "status.yaml").read_text()))
    big = runs / f"bench-{count // 2:04d}-20260101-000000" / "job.log"
    line = b"[worker-0] " + b"x" * 89 + b"\n"
    with open(big, "wb") as f:
        chunk = line * 10_000
        for _ in range(max(1, log_mb * 1_000_000 // len(chunk))):
            f.write(chunk)
    return runs


def in_process(code: Path | None, runs: Path, name: str, repeat: int) -> dict[str, float]:
    """Seconds of the list and the lookup through the SDK (of ``code`` when given), in a child
    interpreter that imports first and then times."""
    script = f"""
import json, statistics, sys, time
from t9k_jobs import Client
runs = {str(runs)!r}
def timed(fn):
    out = []
    for _ in range({repeat}):
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return statistics.median(out)
c = Client.local(runs)
rows = c.summaries()
assert len(rows) >= {int(name.split('-')[1]) + 1}, len(rows)
print(json.dumps({{"list": timed(lambda: c.summaries()), "lookup": timed(lambda: c.summaries("gj", {name!r}))}}))
"""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    if code is not None:
        env["PYTHONPATH"] = str(code / "src")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout)


def measure(code: Path | None, runs: Path, count: int, repeat: int) -> dict[str, Any]:
    name = f"bench-{count // 2:04d}"
    result: dict[str, Any] = {"sdk": in_process(code, runs, name, repeat)}
    for label, args in (("get", ("get",)), ("get NAME", ("get", "gj", name)), ("logs --tail 10", ("logs", "gj", name, "--tail", "10"))):
        times, peaks = [], []
        for _ in range(repeat):
            took, code_, err, peak = cli(code, runs.parent, *args)
            if code_ != 0:
                raise SystemExit(f"{args}: {err}")
            times.append(took)
            peaks.append(peak)
        result[label] = {"seconds": round(statistics.median(times), 3), "peak_rss_mib": round(max(peaks), 1)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--log-mb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--code", type=Path, action="append", default=[], help="another checkout to compare")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results-local-runs.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="t9k-bench-runs-") as tmp:
        runs = make_runs(Path(tmp), args.runs, args.log_mb)
        results = {"runs": args.runs, "log_mb": args.log_mb, "repeat": args.repeat,
                   "machine": f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
                   "date": time.strftime("%Y-%m-%d"), "this": measure(None, runs, args.runs, args.repeat)}
        for code in args.code:
            results[str(code)] = measure(code, runs, args.runs, args.repeat)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
