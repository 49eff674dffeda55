"""``logs --tail`` reads from the end in bounded memory and counts a last line without a newline;
``logs`` of a replica or container the job does not have is NotFound (issue 20). Run dirs are
made here as a finished run leaves them (no runtime), so the reads are exact.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from t9k_jobs import Client
from t9k_jobs.errors import NotFound, UsageError
from t9k_jobs.local.rundir import LocalRun
from t9k_jobs.local.rundirs import follow_logs, tail_offset

from tests.helpers import job, template

from .conftest import py


def finished_run(tmp_path: Path, job_log: bytes, replicas: int = 2) -> Path:
    run_dir = tmp_path / "t9k-runs" / "tails-1"
    run_dir.mkdir(parents=True)
    manifest = job(
        "GenericJob", "tails",
        {"replicaSpecs": [{"type": "worker", "replicas": replicas, "template": template(py("pass"))}]},
    )
    (run_dir / "job.yaml").write_text(yaml.safe_dump(manifest))
    (run_dir / "run.json").write_text(json.dumps({"kind": "GenericJob", "name": "tails", "created": time.time()}))
    (run_dir / "status.yaml").write_text(yaml.safe_dump({"phase": "Succeeded"}))
    (run_dir / "runtime.pid").write_text("1\n")  # locked by nobody: gone
    (run_dir / "job.log").write_bytes(job_log)
    (run_dir / "tails-worker-0.pytorch.log").write_bytes(b"zero\n")
    return run_dir


def lines(run_dir: Path, **kwargs) -> list[str]:
    run = LocalRun.load(run_dir)
    assert run is not None
    return list(follow_logs(run, **kwargs))


def test_tail_counts_a_last_line_without_a_newline(tmp_path: Path) -> None:
    run_dir = finished_run(tmp_path, b"[worker-0] a\n[worker-1] b\n[worker-0] c")
    assert lines(run_dir, tail=1) == ["[worker-0] c"]  # before: "[worker-1] b" and "[worker-0] c"
    assert lines(run_dir, tail=2) == ["[worker-1] b", "[worker-0] c"]
    assert lines(run_dir, tail=0) == []
    assert lines(run_dir, tail=10) == ["[worker-0] a", "[worker-1] b", "[worker-0] c"]
    assert lines(run_dir, replica_type="worker", tail=1) == ["[worker-0] c"]
    out = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "logs", "gj", "tails", "--tail", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0 and out.stdout == "[worker-0] c\n", out.stdout + out.stderr


def test_tail_with_a_final_newline_and_empty_lines(tmp_path: Path) -> None:
    run_dir = finished_run(tmp_path, b"one\n\nthree\n")
    assert lines(run_dir, tail=1) == ["three"]
    assert lines(run_dir, tail=2) == ["", "three"]
    assert tail_offset(run_dir / "job.log", 3) == 0
    assert tail_offset(run_dir / "missing.log", 3) == 0


def test_tail_of_a_filtered_log_across_blocks(tmp_path: Path) -> None:
    body = b"".join(f"[worker-{i % 2}] line {i}\n".encode() for i in range(50_000))
    run_dir = finished_run(tmp_path, body)
    assert lines(run_dir, replica_type="worker", tail=3) == [
        "[worker-1] line 49997", "[worker-0] line 49998", "[worker-1] line 49999"
    ]
    only_ones = [f"[worker-1] line {i}" for i in range(49_993, 50_000, 2)]
    keep = lambda line: line.startswith("[worker-1]")
    run = LocalRun.load(run_dir)
    assert run is not None
    offset = tail_offset(run_dir / "job.log", 4, keep)
    assert body[offset:].decode().splitlines()[0] == only_ones[0]


def test_tail_of_a_large_log_reads_from_the_end_in_bounded_memory(tmp_path: Path) -> None:
    # 64 MiB of log: the old reader took it all into memory (and more, split into lines).
    run_dir = finished_run(tmp_path, b"")
    line = b"[worker-0] " + b"x" * 1000 + b"\n"
    with open(run_dir / "job.log", "wb") as f:
        block = line * 1024
        f.writelines(block for _ in range(64))
        f.write(b"[worker-1] the end")
    tracemalloc.start()
    try:
        got = lines(run_dir, tail=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got[-1] == "[worker-1] the end" and len(got) == 3
    assert peak < 8 * 2**20, f"peak {peak} bytes for a 64 MiB log"


def test_logs_of_what_the_job_does_not_have_is_not_found(tmp_path: Path) -> None:
    run_dir = finished_run(tmp_path, b"[worker-0] a\n")
    run = LocalRun.load(run_dir)
    assert run is not None
    client = Client.local(run_dir=run_dir)
    assert list(client.logs("gj", "tails", "worker", 0)) == ["zero"]
    with pytest.raises(NotFound, match="has no replica worker-2: worker has 2 .indexes 0 to 1."):
        list(client.logs("gj", "tails", "worker", 2))
    with pytest.raises(NotFound, match="has no replica type 'master'; it has worker"):
        list(client.logs("gj", "tails", "master"))
    with pytest.raises(NotFound, match="has no replica type 'master'"):
        list(client.logs("gj", "tails", "master", 0))
    with pytest.raises(NotFound, match="has no container 'sidecar'; it has pytorch"):
        list(client.logs("gj", "tails", "worker", 0, "sidecar"))
    with pytest.raises(UsageError, match="--container needs --type and --index"):
        list(client.logs("gj", "tails", container="pytorch"))
    out = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "logs", "gj", "tails", "-t", "worker", "-i", "5"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 1 and out.stderr.startswith("error: GenericJob tails has no replica worker-5"), out.stderr
    # A replica gone in a scale-down still has its log, which stays readable.
    (run_dir / "tails-worker-3.pytorch.log").write_bytes(b"three\n")
    assert list(client.logs("gj", "tails", "worker", 3)) == ["three"]


def test_a_replicas_own_log_reads_as_its_part_of_job_log(tmp_path: Path) -> None:
    """Issue 30: a replica that prints a progress bar with no newline (megabytes of ``\\r``
    rewrites) or a line longer than 64 KiB: its own log, read with ``logs --type --index``, gives
    the lines ``job.log`` has for it (the runtime cuts at 64 KiB and keeps a rewritten line's last
    state), ``--tail 2`` the last two of them, and the reader never holds the whole line."""
    code = (
        "import sys\n"
        "for i in range(60000):\n"
        "    sys.stdout.write('\\r%6d %s' % (i, '#' * 40))\n"
        "sys.stdout.write('\\n' + 'y' * 200000 + '\\nend\\n')\n"
    )
    manifest = job("GenericJob", "bar", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(py(code))}]})
    path = tmp_path / "bar.yaml"
    path.write_text(yaml.safe_dump(manifest))
    done = subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "run", str(path), "--quiet", "--run-dir",
                           str(tmp_path / "t9k-runs" / "bar-1")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = tmp_path / "t9k-runs" / "bar-1"
    assert (run_dir / "bar-worker-0.pytorch.log").stat().st_size > 2_000_000  # every byte, as written
    merged = [line.removeprefix("[worker-0] ") for line in (run_dir / "job.log").read_text().splitlines()]
    own = lines(run_dir, replica_type="worker", index=0)
    assert own == merged
    assert max(len(line.encode()) for line in own) <= 64 * 1024
    assert any(line.startswith("  ") and line.endswith("#" * 40) for line in own)  # a progress bar's last state
    assert own[-1] == "end" and own[-2] == "y" * (200000 - 3 * 64 * 1024)
    tracemalloc.start()
    assert lines(run_dir, replica_type="worker", index=0, tail=2) == own[-2:]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, peak
    out = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "logs", "gj", "bar", "--type", "worker", "--index", "0", "--tail", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )
    assert out.returncode == 0 and out.stdout.splitlines() == own[-2:], out.stderr
