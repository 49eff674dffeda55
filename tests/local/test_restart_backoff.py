"""Local restarts back off as the kubelet's do (issue 33): the first restart of a replica is at
once, the next ones wait 10 s, 20 s, 40 s... up to 5 minutes, and a replica that ran 10 minutes
starts the count again. While it waits, the replica is Pending with ``CrashLoopBackOff`` and when it
starts next, in ``describe``, ``get`` and the events. Before, a replica failing at once restarted
about nine times a second."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import yaml

from t9k_jobs.local.processes import BACKOFF_RESET, Crashes, restart_delay
from tests.helpers import job, template, wait_until

from .conftest import py


def test_the_delays_double_from_ten_seconds_to_five_minutes() -> None:
    assert [restart_delay(n) for n in range(1, 10)] == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_a_long_run_starts_the_count_again() -> None:
    crashes = Crashes()
    assert [crashes.next_delay() for _ in range(3)] == [0, 10, 20]
    crashes.started, crashes.ended = 1000.0, 1000.0 + BACKOFF_RESET
    assert crashes.next_delay() == 0
    crashes.started, crashes.ended = 5000.0, 5001.0
    assert crashes.next_delay() == 10


def _event_times(events: str, reason: str) -> list[dt.datetime]:
    return [dt.datetime.strptime(line.split()[0], "%H:%M:%S") for line in events.splitlines() if f" {reason}:" in line]


def test_a_replica_that_fails_at_once_waits_out_its_back_off(tmp_path: Path) -> None:
    code = "import sys; print('failing', flush=True); sys.exit(3)"
    manifest = job("GenericJob", "crashy", {"replicaSpecs": [
        {"type": "worker", "replicas": 1, "restartPolicy": {"policy": "OnFailure", "limit": 3}, "template": template(py(code))}
    ]})
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest))
    run_dir = tmp_path / "t9k-runs" / "crashy-1"
    proc = subprocess.Popen([sys.executable, "-m", "t9k_jobs.cli", "run", str(path), "--quiet", "--run-dir", str(run_dir)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def describe() -> str:
            return subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "describe", "gj", "crashy", "--run-dir", str(run_dir)],
                                  capture_output=True, text=True, timeout=60, check=False).stdout

        def backing_off() -> str | None:
            text = describe()
            why = next((line for line in text.splitlines() if line.startswith("Why:")), "")
            return text if "CrashLoopBackOff: back-off 10s" in why else None

        seen = wait_until(backing_off, "describe's why to say the 10 s back-off", 120, interval=0.5)
        assert "next start at" in seen and "Pending" in seen, seen
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out  # the limit of 3 restarts reached: Failed
    events = (run_dir / "events.log").read_text()
    restarts = _event_times(events, "RestartingReplica")
    assert len(restarts) == 3, events
    # The first restart at once; the second after at least 10 s, the third after at least 20 s more
    # (the event log has whole seconds: a second less).
    assert (restarts[2] - restarts[1]).total_seconds() >= 9, events
    waits = [line for line in events.splitlines() if "CrashLoopBackOff" in line]
    assert any("back-off 10s" in w for w in waits) and any("back-off 20s" in w for w in waits), events
