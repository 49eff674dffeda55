"""Throughput of the local runtime's log path, against a plain write of the same bytes.

One generator program makes the output. It runs with its stdout on a file (``plain``: what the
machine does with these bytes), through a pipe into ``cat > file`` (``pipe``: the least any
reader of a pipe costs), under a bare asyncio loop that copies its pipe to two files
(``copier``: the least the runtime's own work costs in Python), or as the replica(s) of a GenericJob under ``t9k-jobs run``, which
reads the pipe, writes ``<pod>.<container>.log`` and ``job.log`` and shows the lines: with
``--quiet`` and stdout on a file (``quiet``), without it and stdout on a file (``file``), and on a
pseudo-terminal whose other side a thread drains (``terminal``: the live status table on, the
lines shown). Cases:

* ``lines``: one replica writes ``--lines-mb`` MB of ``--line-bytes``-byte lines, 1 MiB per write;
* ``replicas``: ``--replicas`` replicas each write ``--lines-each`` lines, one write per line;
* ``nonl``: one replica writes ``--nonl-mb`` MB with no newline at all, 1 MiB per write;
* ``empty``: one replica that writes nothing (the fixed cost of a run: start, reconcile, teardown).

For each (case, mode) the figures are: the write time (the generator's own clock, from its
first write to the return of its last, of the slowest replica: a replica blocks on its pipe
while the runtime is behind, so this is what the log path costs the job); MB/s (10^6 bytes per
second of write time); its ratio to each baseline (median of the ratios within a
repeat); the wall time of the whole
command; the runtime's peak RSS (``VmHWM`` of the ``t9k-jobs run`` process, read from /proc
every 20 ms until it exits); on the terminal, the MB it received and the most draws of the live
status table (occurrences of its ``REPLICA`` header before the live display ended) within any
one second. Each cell is the median of ``--repeat`` runs (peak RSS and draws: the largest).

    python benchmarks/log_throughput.py                          # the full sizes, 3 repeats
    python benchmarks/log_throughput.py --scale 0.05 --repeat 1  # a quick look

Results: ``--out`` (default ``benchmarks/results-log-throughput.json``) and a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import fcntl
import json
import os
import platform
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
MB = 1_000_000
#: The modes that run no t9k-jobs: what the others are compared with.
BASELINES = ("plain", "pipe", "copier")

#: The ``copier`` baseline: a bare asyncio loop that starts the generator (the arguments after
#: the two file names) with its stdout on a pipe and copies what it reads, 64 KiB at a time, to
#: the two files: what the runtime does at the least (a container's log and job.log).
COPIER = r'''
import asyncio, sys
async def main(a, b, argv):
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
    with open(a, "wb", buffering=0) as f, open(b, "wb", buffering=0) as g:
        while data := await proc.stdout.read(65536):
            f.write(data)
            g.write(data)
    return await proc.wait()
sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:])))
'''

#: The generator: ``gen.py MODE AMOUNT LINE_BYTES TIMING_DIR``. MODE ``lines`` writes AMOUNT
#: bytes of LINE_BYTES-byte lines (newline included) in 1 MiB writes; ``each`` writes AMOUNT
#: lines, one write per line; ``nonl`` writes AMOUNT bytes without a newline in 1 MiB writes.
#: It records ``{"start": s, "end": s}`` (CLOCK_MONOTONIC, seconds) in TIMING_DIR/<pid>.json.
GENERATOR = r'''
import json, os, sys, time
mode, amount, width, timing = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
out = sys.stdout.buffer.raw if hasattr(sys.stdout.buffer, "raw") else sys.stdout.buffer
def write_all(data):
    view = memoryview(data)
    while view:
        view = view[out.write(view):]
if mode == "lines":
    per = max(1, (1 << 20) // width)
    block = b"".join(f"step {i:09d} loss 0.{i % 997:06d} lr 3e-4".ljust(width - 1)[: width - 1].encode() + b"\n" for i in range(per))
    start = time.monotonic()
    left = amount
    while left > 0:
        chunk = block if left >= len(block) else block[:left]
        write_all(chunk)
        left -= len(chunk)
elif mode == "each":
    lines = [f"replica line {i:06d} loss 0.{i % 997:06d}\n".encode() for i in range(amount)]
    start = time.monotonic()
    for line in lines:
        write_all(line)
else:
    block = b"x" * (1 << 20)
    start = time.monotonic()
    left = amount
    while left > 0:
        chunk = block if left >= len(block) else block[:left]
        write_all(chunk)
        left -= len(chunk)
end = time.monotonic()
with open(os.path.join(timing, f"{os.getpid()}.json"), "w") as f:
    json.dump({"start": start, "end": end}, f)
'''


class Case:
    """One workload: ``replicas`` generators, each run as ``gen.py MODE AMOUNT LINE_BYTES``."""

    def __init__(self, name: str, mode: str, amount: int, replicas: int, line_bytes: int, nbytes: int) -> None:
        self.name = name
        self.mode = mode
        self.amount = amount
        self.replicas = replicas
        self.line_bytes = line_bytes
        #: Bytes all replicas write together.
        self.nbytes = nbytes

    def argv(self, gen: Path, timing: Path) -> list[str]:
        return ["python", str(gen), self.mode, str(self.amount), str(self.line_bytes), str(timing)]


def cases(args: argparse.Namespace) -> list[Case]:
    lines_bytes = int(args.lines_mb * MB * args.scale)
    each = max(1, int(args.lines_each * args.scale))
    each_len = len("replica line 000000 loss 0.000000\n")
    nonl = int(args.nonl_mb * MB * args.scale)
    out = {
        "lines": Case("lines", "lines", lines_bytes, 1, args.line_bytes, lines_bytes),
        "replicas": Case("replicas", "each", each, args.replicas, 0, each * args.replicas * each_len),
        "nonl": Case("nonl", "nonl", nonl, 1, 0, nonl),
        "empty": Case("empty", "nonl", 0, 1, 0, 0),
    }
    return [out[name] for name in args.cases]


def manifest(case: Case, gen: Path, timing: Path) -> dict[str, Any]:
    argv = case.argv(gen, timing)
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": "bench"},
        "spec": {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": case.replicas,
                    "restartPolicy": {"policy": "Never"},
                    "template": {"spec": {"containers": [{"name": "main", "image": "local", "command": argv}]}},
                }
            ]
        },
    }


def vm_hwm_kib(pid: int) -> int | None:
    """The peak resident set size of ``pid`` so far (KiB), or None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def max_in_window(times: list[float], window: float) -> int:
    """The most of ``times`` (seconds, sorted) that fall in any ``window`` seconds."""
    best, first = 0, 0
    for last, t in enumerate(times):
        while t - times[first] > window:
            first += 1
        best = max(best, last - first + 1)
    return best


def write_span(timing: Path) -> float:
    """Seconds the slowest replica spent writing: from its first write to the return of its last."""
    spans = [json.loads(p.read_text()) for p in timing.glob("*.json")]
    if not spans:
        raise RuntimeError(f"no generator timing in {timing}")
    return max(s["end"] - s["start"] for s in spans)


class Drain(threading.Thread):
    """Reads the pty's master side until told to stop: counts the bytes and the table's draws."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.bytes = 0
        self.draws = 0
        #: CLOCK_MONOTONIC of every draw seen (when the bytes holding its header were read).
        self.draw_times: list[float] = []
        #: Where in the stream each draw's header is (bytes from the start).
        self.draw_offsets: list[int] = []
        self.tail = b""
        self.stop = threading.Event()

    def run(self) -> None:
        carry = b""
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                if self.stop.is_set():
                    return
                continue
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:  # EIO: every holder of the other side has closed it
                return
            if not data:
                return
            self.bytes += len(data)
            self.tail = (self.tail + data)[-4096:]
            window = carry + data
            now = time.monotonic()
            at = window.find(b"REPLICA", max(0, len(carry) - 6))
            while at >= 0:
                self.draws += 1
                self.draw_times.append(now)
                self.draw_offsets.append(self.bytes - len(window) + at)
                at = window.find(b"REPLICA", at + 1)
            carry = window[-16:]

    def live_draw_times(self) -> list[float]:
        """The times of the draws made while the live table was on: before rich's last "show
        the cursor" (the final table printed after it is the run's last output, not a redraw)."""
        shown = self.tail.rfind(b"\x1b[?25h")
        if shown < 0:
            return self.draw_times
        end = self.bytes - len(self.tail) + shown
        return [t for t, at in zip(self.draw_times, self.draw_offsets) if at < end]


def run_once(case: Case, mode: str, work: Path, gen: Path, timeout: float) -> dict[str, Any]:
    """One run of ``case`` in ``mode`` (see the module's docstring); the figures of that run."""
    run = Path(tempfile.mkdtemp(prefix=f"{case.name}-{mode}-", dir=work))
    timing = run / "timing"
    timing.mkdir()
    os.sync()  # what earlier runs left dirty is written back now, not while this one writes
    result: dict[str, Any] = {"load_1min_before": round(os.getloadavg()[0], 2)}
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if mode in BASELINES:
        outs = [open(run / f"out-{i}", "wb") for i in range(case.replicas)]  # noqa: SIM115
        started = time.monotonic()
        procs = []
        for i, f in enumerate(outs):
            if mode == "plain":
                procs.append(subprocess.Popen(case.argv(gen, timing), stdout=f, env=env))
            elif mode == "pipe":
                g = subprocess.Popen(case.argv(gen, timing), stdout=subprocess.PIPE, env=env)
                procs += [g, subprocess.Popen(["cat"], stdin=g.stdout, stdout=f)]
                assert g.stdout is not None
                g.stdout.close()
            else:
                copy = [sys.executable, "-c", COPIER, str(run / f"out-{i}"), str(run / f"copy-{i}")]
                procs.append(subprocess.Popen([*copy, *case.argv(gen, timing)], env=env))
        codes = [p.wait(timeout) for p in procs]
        result["wall_s"] = time.monotonic() - started
        for f in outs:
            f.close()
        result["exit"] = max(codes)
        written = sum(p.stat().st_size for p in run.glob("out-*"))
    else:
        path = run / "job.yaml"
        path.write_text(yaml.safe_dump(manifest(case, gen, timing), sort_keys=False))
        argv = [sys.executable, "-m", "t9k_jobs.cli", "run", str(path), "--run-dir", str(run / "run")]
        drain: Drain | None = None
        if mode in ("quiet", "file"):
            sink = open(run / "stdout", "wb")  # noqa: SIM115
            started = time.monotonic()
            extra = ["--quiet"] if mode == "quiet" else []
            proc = subprocess.Popen([*argv, *extra], stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        else:
            master, slave = os.openpty()
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
            tenv = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TERM")}
            tenv["TERM"] = "xterm-256color"
            drain = Drain(master)
            drain.start()
            started = time.monotonic()
            proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True, env=tenv)
            os.close(slave)
        peak = 0
        deadline = started + timeout
        while proc.poll() is None:
            peak = max(peak, vm_hwm_kib(proc.pid) or 0)
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                result["timed_out"] = True
                break
            time.sleep(0.02)
        result["wall_s"] = time.monotonic() - started
        result["exit"] = proc.returncode
        result["peak_rss_mib"] = round(peak / 1024, 1)
        if drain is not None:
            drain.stop.set()
            drain.join(10)
            os.close(master)
            result["terminal_bytes"] = drain.bytes
            result["table_draws"] = drain.draws
            result["table_draws_max_in_1s"] = max_in_window(drain.live_draw_times(), 1.0)
            if proc.returncode:  # what the terminal showed last, to tell why
                result["terminal_tail"] = drain.tail[-600:].decode("utf-8", "replace")
        else:
            sink.close()
            result["stdout_bytes"] = (run / "stdout").stat().st_size
        written = sum(p.stat().st_size for p in (run / "run").glob("bench-*.log"))
        job_log = run / "run" / "job.log"
        result["job_log_bytes"] = job_log.stat().st_size if job_log.exists() else 0
    result["write_s"] = write_span(timing) if case.nbytes and not result.get("timed_out") else None
    result["bytes"] = written
    if written != case.nbytes and not result.get("timed_out"):
        raise RuntimeError(f"{case.name}/{mode}: {written} bytes logged, {case.nbytes} expected; see {run}")
    subprocess.run(["rm", "-rf", str(run)], check=False)
    return result


def summarize(
    case: Case, mode: str, runs: list[dict[str, Any]], base: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    """The row of ``case`` in ``mode``: medians of ``runs``. A ratio to a baseline (``base``: its
    runs by name, see :data:`BASELINES`) is the median of the ratios within each repeat (the modes
    of one repeat run one after another, so the load of the machine changes less between them)."""
    done = [r for r in runs if not r.get("timed_out")]
    row: dict[str, Any] = {"case": case.name, "mode": mode, "bytes": case.nbytes, "runs": runs}
    if not done:
        row["timed_out"] = True
        return row
    row["wall_s"] = round(statistics.median(r["wall_s"] for r in done), 3)
    writes = [r["write_s"] for r in done if r.get("write_s") is not None]
    if writes and case.nbytes:
        write = statistics.median(writes)
        row["write_s"] = round(write, 3)
        row["mb_per_s"] = round(case.nbytes / MB / write, 1) if write > 0 else None
        for name, others in base.items():
            pairs = [(r["write_s"], o["write_s"]) for r, o in zip(runs, others) if r.get("write_s") and o.get("write_s")]
            if pairs and mode != name:
                row[f"ratio_to_{name}"] = round(statistics.median(a / b for a, b in pairs), 2)
    if mode not in BASELINES:
        row["peak_rss_mib"] = max(r["peak_rss_mib"] for r in done)
    if mode == "terminal":
        row["terminal_mb"] = round(statistics.median(r["terminal_bytes"] for r in done) / MB, 1)
        row["table_draws_max_in_1s"] = max(r["table_draws_max_in_1s"] for r in done)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    out = [
        "| case | mode | MB | write (s) | MB/s | write / plain | write / pipe | write / copier | wall (s) "
        "| peak RSS (MiB) | MB on the terminal | table draws in 1 s (most) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        def f(key: str, r: dict[str, Any] = r) -> str:
            v = r.get(key)
            return "timeout" if r.get("timed_out") else ("–" if v is None else str(v))

        out.append(
            f"| {r['case']} | {r['mode']} | {r['bytes'] / MB:.1f} | {f('write_s')} | {f('mb_per_s')} | "
            f"{f('ratio_to_plain')} | {f('ratio_to_pipe')} | {f('ratio_to_copier')} | {f('wall_s')} | "
            f"{f('peak_rss_mib')} | "
            f"{f('terminal_mb')} | {f('table_draws_max_in_1s')} |"
        )
    return "\n".join(out)


def runtime_source() -> dict[str, Any]:
    """Which t9k_jobs the runs imported (PYTHONPATH may point elsewhere than this checkout) and
    the checkout's commit."""
    where = subprocess.run([sys.executable, "-c", "import t9k_jobs; print(t9k_jobs.__file__)"],
                           capture_output=True, text=True, check=False).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()
    return {"t9k_jobs": where, "pythonpath": os.environ.get("PYTHONPATH", ""), "checkout_head": head}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", default=["lines", "replicas", "nonl", "empty"],
                   choices=["lines", "replicas", "nonl", "empty"])
    modes = [*BASELINES, "quiet", "file", "terminal"]
    p.add_argument("--modes", nargs="+", default=modes, choices=modes, help="baselines first: they give the ratios")
    p.add_argument("--lines-mb", type=float, default=200, help="MB (10^6 bytes) of short lines, one replica")
    p.add_argument("--line-bytes", type=int, default=64, help="bytes per line, newline included")
    p.add_argument("--replicas", type=int, default=20)
    p.add_argument("--lines-each", type=int, default=2000, help="lines per replica in the replicas case")
    p.add_argument("--nonl-mb", type=float, default=60, help="MB written with no newline, one replica")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies every size (0.05 for a quick run)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--timeout", type=float, default=600, help="seconds per run before it is killed")
    p.add_argument("--workdir", type=Path, default=None, help="where the runs write (default: a temp dir)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results-log-throughput.json")
    args = p.parse_args()

    work = Path(tempfile.mkdtemp(prefix="t9k-log-bench-", dir=args.workdir))
    gen = work / "gen.py"
    gen.write_text(GENERATOR)
    rows: list[dict[str, Any]] = []
    for case in cases(args):
        modes = [m for m in args.modes if not (case.name == "empty" and m in BASELINES)]
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
        for _ in range(args.repeat):  # the modes one after another, so that a change of load hits them all
            for mode in modes:
                runs[mode].append(run_once(case, mode, work, gen, args.timeout))
                shown = {k: v for k, v in runs[mode][-1].items() if k != "terminal_tail"}
                print(f"{case.name:8} {mode:8} {json.dumps(shown)}", file=sys.stderr, flush=True)
        base = {m: runs[m] for m in BASELINES if m in runs}
        rows += [summarize(case, mode, runs[mode], base) for mode in modes]
    subprocess.run(["rm", "-rf", str(work)], check=False)
    result = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "runtime": runtime_source(),
        "date": dt.date.today().isoformat(),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "kernel": platform.release(),
            "load_1min_at_end": round(os.getloadavg()[0], 2),
        },
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(rows))
    failed = [r for r in rows if r.get("timed_out") or any(x.get("exit") for x in r["runs"])]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
