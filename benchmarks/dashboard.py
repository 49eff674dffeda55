"""What the dashboard costs where it is left open (issue 30), against another checkout's dashboard
on the same machine and data.

Measured, each on a real ``t9k-jobs dashboard`` process (``--port 0``; the token from the URL it
prints, when it prints one):

* ``idle``: 1000 finished local runs (``benchmarks/local_runs.py``'s copies of one real run; the
  middle one's merged log ``--log-mb`` MB of 100-byte lines) with the job list's event stream open
  for ``--seconds`` s: the dashboard's CPU (user + system, from ``/proc/PID/stat``) as a share of
  one core; then the seconds and CPU of the metrics stream of that big log, for a first page and a
  second;
* ``progress bar``: a real run whose one replica prints a ``\\r`` progress bar of ``--log-mb`` MB
  with no newline: the peak RSS of ``t9k-jobs logs gj NAME --type worker --index 0 --tail 2``
  (``wait4``) and its wall time; the dashboard's peak RSS (``VmHWM``) after one log page of that
  replica; the seconds and CPU of the first metrics stream of its merged log to its end, and of a
  second one; a download of the replica's log (MB/s);
* ``ctrl-c``: seconds from SIGINT to exit with five event streams open;
* ``cluster``: with ``--cluster``, a control plane built by tools/controlplane/build.sh and 5
  jobs: the API server's GET and LIST requests for jobs, pods and Events per second over
  ``--seconds`` s with 1 job page open, then with 20 (from its ``apiserver_request_total``).

    python benchmarks/dashboard.py --code /tmp/old-32a8fc4 --cluster --out benchmarks/results-dashboard.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools" / "controlplane"))
from local_runs import cli, make_runs  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def env_for(code: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    if code is not None:
        env["PYTHONPATH"] = str(code / "src")
    env.update(extra)
    return env


class Board:
    """A dashboard process of ``code`` (this checkout when None) with ``args``."""

    def __init__(self, code: Path | None, cwd: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "t9k_jobs.cli", "dashboard", "--port", "0", *args], cwd=cwd, env=env_for(code),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"(http://[^/\s]+)/(?:\?token=(\S+))? ", line)
        if not found:
            raise SystemExit(f"the dashboard printed no URL: {line}{self.proc.stdout.read()}")
        self.url, self.token = found.group(1), found.group(2)
        self.output: list[str] = []
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout), daemon=True).start()  # type: ignore[arg-type]

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def get(self, path: str) -> bytes:
        request = urllib.request.Request(self.url + path, headers=self.headers())
        with urllib.request.urlopen(request, timeout=600) as answer:
            return answer.read()

    def stream(self, path: str) -> http.client.HTTPConnection:
        where = urlsplit(self.url)
        conn = http.client.HTTPConnection(where.hostname, where.port, timeout=600)
        conn.request("GET", path, headers=self.headers())
        answer = conn.getresponse()
        assert answer.status == 200, (path, answer.status)
        answer.fp.read1(1)
        return conn

    def cpu(self) -> float:
        """Seconds of CPU (user + system) the dashboard took so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> float:
        """SIGINT; the seconds until it exited."""
        started = time.perf_counter()
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return float("inf")
        return time.perf_counter() - started


def idle(code: Path | None, runs: Path, seconds: float, count: int) -> dict[str, Any]:
    board = Board(code, runs.parent, "--runs-dir", str(runs))
    try:
        conn = board.stream("/api/jobs/events")
        time.sleep(5)  # the first full read of the run dirs is not idle
        before, started = board.cpu(), time.perf_counter()
        time.sleep(seconds)
        used = board.cpu() - before
        share = used / (time.perf_counter() - started)
        conn.close()
        # The metric points of a job whose merged log is --log-mb MB (bench-NNNN in the middle),
        # for a first page and for a second one.
        name = f"bench-{count // 2:04d}"
        metrics = {}
        for label in ("first page", "second page"):
            before, t = board.cpu(), time.perf_counter()
            board.get(f"/api/job/gj/{name}/metrics/follow")
            metrics[label] = {"seconds": round(time.perf_counter() - t, 2), "cpu_seconds": round(board.cpu() - before, 2)}
        pages = [board.stream("/api/jobs/events") for _ in range(5)]
        ctrl_c = board.stop()
        for page in pages:
            page.close()
    finally:
        if board.proc.poll() is None:
            board.stop()
    return {"cpu_share_of_a_core": round(share, 4), "ctrl_c_seconds_with_5_streams": round(ctrl_c, 2),
            "metrics of the big merged log": metrics}


PROGRESS = """
import sys
done = 0
total = {size}
while done < total:
    piece = "\\r%10d %s" % (done, "#" * 60)
    sys.stdout.write(piece)
    done += len(piece)
sys.stdout.write("\\nfinished\\n")
"""


def progress_run(base: Path, size_mb: int) -> Path:
    """A real run (``t9k-jobs run``) whose replica prints a progress bar of ``size_mb`` MB."""
    manifest = {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "bar"},
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": {"containers": [
            {"name": "main", "image": "local", "command": ["python", "-c", PROGRESS.format(size=size_mb * 1_000_000)]}
        ]}}}]},
    }
    path = base / "bar.yaml"
    path.write_text(yaml.safe_dump(manifest))
    runs = base / "bar-runs"
    done = subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "run", str(path), "--quiet", "--run-dir",
                           str(runs / "bar-1")], capture_output=True, text=True, check=False, env=env_for(None))
    if done.returncode != 0:
        raise SystemExit(f"the progress-bar run failed: {done.stdout}{done.stderr}")
    return runs


def progress_bar(code: Path | None, runs: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    took, rc, err, peak = cli(code, runs.parent, "logs", "gj", "bar", "--type", "worker", "--index", "0", "--tail", "2",
                              "--runs-dir", str(runs))
    if rc != 0:
        raise SystemExit(f"logs --tail 2: {err}")
    out["logs --tail 2"] = {"seconds": round(took, 2), "peak_rss_mib": round(peak, 1)}
    board = Board(code, runs.parent, "--runs-dir", str(runs))
    try:
        base_rss = board.peak_rss_mib()
        t = time.perf_counter()
        board.get("/api/job/gj/bar/logs/page?type=worker&index=0")
        out["one log page of the replica"] = {"seconds": round(time.perf_counter() - t, 2),
                                              "dashboard_peak_rss_mib": round(board.peak_rss_mib(), 1),
                                              "dashboard_rss_before_mib": round(base_rss, 1)}
        for label in ("first metrics stream", "second metrics stream"):
            before, t = board.cpu(), time.perf_counter()
            board.get("/api/job/gj/bar/metrics/follow")
            out[label] = {"seconds": round(time.perf_counter() - t, 2), "cpu_seconds": round(board.cpu() - before, 2)}
        size = (runs / "bar-1" / "bar-worker-0.main.log").stat().st_size
        t = time.perf_counter()
        got = len(board.get("/api/job/gj/bar/logs/download?type=worker&index=0"))
        took = time.perf_counter() - t
        out["download of the replica's log"] = {"mb": round(got / 1e6, 1), "file_mb": round(size / 1e6, 1),
                                             "mb_per_second": round(got / 1e6 / took, 1)}
    finally:
        board.stop()
    return out


def cluster(code: Path | None, base: Path, seconds: float) -> dict[str, Any]:
    from controlplane import ControlPlane

    bin_dir = Path(subprocess.run(["bash", str(ROOT / "tools/controlplane/build.sh")], capture_output=True, text=True,
                                  check=True).stdout.strip().splitlines()[-1])
    plane = ControlPlane(base / "cp", bin_dir, crds=[ROOT / "deploy" / "crds"], controller_manager=False)
    plane.start()
    try:
        context = ssl.create_default_context(cafile=str(plane.ca_file))

        def api(method: str, path: str, body: Any = None) -> Any:
            request = urllib.request.Request(plane.server + path, method=method,
                                             data=None if body is None else json.dumps(body).encode(),
                                             headers={"Authorization": f"Bearer {plane.token}", "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60, context=context) as answer:
                return answer.read()

        for i in range(5):
            api("POST", "/apis/batch.tensorstack.dev/v1beta1/namespaces/default/genericjobs", {
                "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": f"job-{i}"},
                "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": {"spec": {"containers": [
                    {"name": "main", "image": "busybox", "command": ["true"]}]}}}]}})

        def reads() -> int:
            total = 0
            for line in api("GET", "/metrics").decode().splitlines():
                if line.startswith("apiserver_request_total{"):
                    labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
                    if labels.get("verb") in ("GET", "LIST") and labels.get("resource") in (
                            "genericjobs", "pytorchtrainingjobs", "deepspeedjobs", "colossalaijobs", "pods", "events"):
                        total += int(float(line.rsplit(" ", 1)[1]))
            return total

        out: dict[str, Any] = {}
        board = Board(code, base, "--kubeconfig", str(plane.kubeconfig), "-n", "default")
        try:
            for pages in (1, 20):
                opened = [board.stream(f"/api/job/gj/job-{i % 5}/events?namespace=default") for i in range(pages)]
                time.sleep(3)
                before, t = reads(), time.perf_counter()
                time.sleep(seconds)
                rate = (reads() - before - 1) / (time.perf_counter() - t)  # less our own read of /metrics? (not counted)
                out[f"{pages} job pages: API reads per second"] = round(max(rate, 0.0), 2)
                for conn in opened:
                    conn.close()
        finally:
            board.stop()
        return out
    finally:
        plane.stop()


def measure(
    code: Path | None, base: Path, runs: Path, bar: Path, seconds: float, with_cluster: bool, count: int
) -> dict[str, Any]:
    result = {"idle with 1000 runs and the list open": idle(code, runs, seconds, count),
              "progress bar": progress_bar(code, bar)}
    if with_cluster:
        result["cluster"] = cluster(code, base / f"cluster-{'this' if code is None else code.name}", seconds)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--log-mb", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--code", type=Path, action="append", default=[], help="another checkout to compare")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results-dashboard.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="t9k-bench-dashboard-") as tmp:
        base = Path(tmp)
        runs = make_runs(base, args.runs, args.log_mb)
        bar = progress_run(base, args.log_mb)
        results: dict[str, Any] = {
            "runs": args.runs, "log_mb": args.log_mb, "seconds": args.seconds,
            "machine": f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", "date": time.strftime("%Y-%m-%d"),
            "this": measure(None, base, runs, bar, args.seconds, args.cluster, args.runs),
        }
        for code in args.code:
            results[str(code)] = measure(code, base, runs, bar, args.seconds, args.cluster, args.runs)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
