"""The log path of ``t9k-jobs run``: every byte in the container's log, whole and bounded lines in
job.log, memory bounded whatever the output looks like, and the live table on a terminal drawn on
a timer rather than once per line. Behaviour only; how fast it goes is benchmarks/log_throughput.py."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import yaml

from t9k_jobs.frameworks.base import LABEL_REPLICA_INDEX
from t9k_jobs.local.processes import MAX_LINE

from tests.helpers import job, replica, template, wait_until

from .conftest import py

pytestmark = pytest.mark.e2e


def generic(name: str, command: list[str], replicas: int = 1) -> dict:
    """A GenericJob of ``replicas`` workers running ``command``, each with its index in $RANK."""
    rank = {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{LABEL_REPLICA_INDEX}']"}}}
    worker = replica("worker", replicas, template(command, env=[rank]), restartPolicy={"policy": "Never"})
    return job("GenericJob", name, {"replicaSpecs": [worker]})


def vm_hwm_mib(pid: int) -> float | None:
    """Peak resident set size of ``pid`` so far, MiB (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        return None
    return None


# Writes SIZE bytes of a pattern that tells every position apart, with no newline, in writes of
# odd sizes; then waits for the file GO (when given) before it exits.
NO_NEWLINE = (
    "import os, sys, time\n"
    "size, go = int(sys.argv[1]), sys.argv[2]\n"
    "pattern = b''.join(b'%07d,' % i for i in range(1 << 16))\n"
    "out, sent, step = sys.stdout.buffer, 0, 0\n"
    "while sent < size:\n"
    "    n = min(size - sent, 40000 + 7919 * (step % 13))\n"
    "    start = sent % len(pattern)\n"
    "    piece = (pattern[start:] + pattern)[:n]\n"
    "    out.write(piece); out.flush(); sent += n; step += 1\n"
    "while go and not os.path.exists(go):\n"
    "    time.sleep(0.05)\n"
)


def expected_no_newline(size: int) -> bytes:
    pattern = b"".join(b"%07d," % i for i in range(1 << 16))
    return (pattern * (size // len(pattern) + 1))[:size]


def test_a_long_line_is_kept_whole_in_its_log_and_cut_into_bounded_pieces_in_job_log(start) -> None:
    """10 MB without a newline: the container's log has every byte in order; job.log has it as
    lines of at most MAX_LINE bytes each, which put together give the same bytes."""
    size = 10_000_000
    run = start(generic("long", py(NO_NEWLINE) + [str(size), ""]), "--quiet")
    assert run.finish(300) == 0, run.output
    data = expected_no_newline(size)
    logged = (run.run_dir / "long-worker-0.pytorch.log").read_bytes()
    assert len(logged) == size and hashlib.sha256(logged).digest() == hashlib.sha256(data).digest()
    lines = (run.run_dir / "job.log").read_bytes().split(b"\n")
    assert lines[-1] == b""
    pieces = []
    for line in lines[:-1]:
        assert line.startswith(b"[worker-0] ")
        piece = line[len(b"[worker-0] "):]
        assert 0 < len(piece) <= MAX_LINE
        pieces.append(piece)
    assert len(pieces) >= size // MAX_LINE
    assert b"".join(pieces) == data


def test_memory_stays_bounded_whatever_the_lines_look_like(start, tmp_path: Path) -> None:
    """100 MB with no newline: the runtime's peak RSS stays near what a run needs anyway (about
    50 MiB here; before, the unfinished line was kept whole and split again on every read, several
    times the output in memory)."""
    size = 100_000_000
    go = tmp_path / "go"
    run = start(generic("wide", py(NO_NEWLINE) + [str(size), str(go)]), "--quiet")
    log = run.run_dir / "wide-worker-0.pytorch.log"
    wait_until(lambda: log.exists() and log.stat().st_size == size, "the 100 MB to be read", 300)
    # Once job.log has all but the unfinished last piece (at most MAX_LINE bytes, kept until more
    # output or the end), the whole output went through the log path.
    job_log = run.run_dir / "job.log"
    wait_until(lambda: job_log.stat().st_size >= size - MAX_LINE, "job.log to have the output", 120)
    peak = vm_hwm_mib(run.proc.pid)
    go.write_text("")
    assert run.finish(120) == 0, run.output
    assert peak is not None and peak < 150, f"peak RSS of t9k-jobs run: {peak:.0f} MiB"


# Prints COUNT lines of its own (rank, number, a body of varying length, up to 3 reads long),
# each written in two or three parts so that lines straddle reads and replicas' writes interleave.
MANY = (
    "import os, sys\n"
    "rank, count = os.environ['RANK'], int(sys.argv[1])\n"
    "out = sys.stdout.buffer\n"
    "for i in range(count):\n"
    "    body = (b'%s-%d:' % (rank.encode(), i)) * (1 + (i * 7919) % 9000 // 10)\n"
    "    line = b'rank %s line %05d %s end\\n' % (rank.encode(), i, body)\n"
    "    cut = len(line) // 3\n"
    "    out.write(line[:cut]); out.flush(); out.write(line[cut:]); out.flush()\n"
)


def many_line(rank: int, i: int) -> bytes:
    body = (b"%d-%d:" % (rank, i)) * (1 + (i * 7919) % 9000 // 10)
    return b"rank %d line %05d %s end" % (rank, i, body)


def test_lines_of_many_replicas_reach_job_log_whole_and_unmixed(start) -> None:
    """8 replicas x 1500 lines of up to 50 KB, written in parts: job.log has every line once,
    whole, under its replica's prefix, in each replica's order."""
    replicas, count = 8, 1500
    manifest = generic("many", py(MANY) + [str(count)], replicas=replicas)
    run = start(manifest, "--quiet")
    assert run.finish(600) == 0, run.output
    seen: dict[int, list[bytes]] = {r: [] for r in range(replicas)}
    for line in (run.run_dir / "job.log").read_bytes().split(b"\n")[:-1]:
        m = re.match(rb"\[worker-(\d+)\] (.*)\Z", line, re.S)
        assert m, line[:200]
        seen[int(m.group(1))].append(m.group(2))
    for rank in range(replicas):
        assert len(seen[rank]) == count, (rank, len(seen[rank]))
        for i, line in enumerate(seen[rank]):
            assert line == many_line(rank, i), (rank, i, line[:100])


def test_output_is_shown_as_text(start) -> None:
    """Bytes that are not UTF-8 are shown replaced, a line rewritten with \\r by its last state,
    in job.log; the container's log keeps the bytes as written."""
    code = (
        "import sys\n"
        "sys.stdout.buffer.write(b'bad \\xff byte\\nprogress 1\\rprogress 2\\rdone\\r\\nlast, no newline')\n"
    )
    run = start(generic("text", py(code)), "--quiet")
    assert run.finish(120) == 0, run.output
    assert (run.run_dir / "text-worker-0.pytorch.log").read_bytes() == (
        b"bad \xff byte\nprogress 1\rprogress 2\rdone\r\nlast, no newline"
    )
    assert (run.run_dir / "job.log").read_text(encoding="utf-8") == (
        "[worker-0] bad \ufffd byte\n[worker-0] done\n[worker-0] last, no newline\n"
    )


def run_on_a_terminal(manifest: dict, tmp_path: Path, timeout: float = 300) -> tuple[int, str, float]:
    """Run ``manifest`` with a pseudo-terminal for stdin, stdout and stderr (so the live table is
    on); returns the exit code, everything the terminal received, and the seconds it ran."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest, sort_keys=False))
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 150, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["TERM"] = "xterm-256color"
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "t9k_jobs.cli", "run", str(path), "--run-dir", str(tmp_path / "run")],
        stdin=slave, stdout=slave, stderr=slave, start_new_session=True, env=env,
    )
    os.close(slave)
    out = bytearray()
    deadline = started + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 1 << 16)
                except OSError:  # EIO: the run and everything holding the terminal are gone
                    break
                if not data:
                    break
                out += data
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            raise AssertionError(f"the run on a terminal did not end in {timeout} s:\n{out[-3000:].decode(errors='replace')}")
        code = proc.wait(30)
    finally:
        os.close(master)
    return code, out.decode("utf-8", errors="replace"), time.monotonic() - started


def test_the_live_table_is_drawn_on_a_timer_not_per_line(tmp_path: Path) -> None:
    """On a terminal: the replicas' lines and the final table are shown, and the live table is
    drawn a few times a second, not once per line (it was drawn again for every line)."""
    code = "import os\nfor i in range(2000):\n    print('step', i, 'of replica', os.environ['RANK'], flush=True)\n"
    manifest = generic("tty", py(code), replicas=3)
    exit_code, out, seconds = run_on_a_terminal(manifest, tmp_path)
    assert exit_code == 0, out[-3000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)  # the escape codes of styles and cursor moves
    for rank in range(3):
        assert f"[worker-{rank}] step 1999 of replica" in text, text[-3000:]
    assert "REPLICA" in text and "tty-worker-2" in text
    assert "GenericJob/tty Succeeded" in text
    draws = text.count("REPLICA")
    # A draw every 0.25 s at most, plus the first, the last and the final table.
    assert draws <= seconds / 0.25 + 5, (draws, seconds)
    job_log = (tmp_path / "run" / "job.log").read_text()
    assert job_log.count("\n") == 6000 and "[worker-1] step 1999 of replica 1\n" in job_log
