"""benchmarks/cli_latency.py run small: it must keep working end to end (issue 35).

Not a measurement (one round proves nothing about speed): a fresh clone can run it, every
command it times succeeds (the script exits 1 otherwise), and what it reports is complete.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(420)
def test_cli_latency_times_every_command_and_both_operators_at_rest(tmp_path: Path) -> None:
    results = tmp_path / "cli.json"
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cli_latency.py"), "--repeat", "1", "--runs", "1",
         "--idle", "1", "--out", str(results)],  # fmt: skip
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=400,
        check=False,
    )
    assert out.returncode == 0, f"exit {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    data = json.loads(results.read_text())
    names = [c["name"] for c in data["commands"]]
    for expected in ("kubectl version --client", "t9k-jobs validate job.yaml", "t9k-jobs get (API server, 1 jobs)"):
        assert expected in names, names
    assert all(len(c["cpu_s"]) == 1 and c["cpu"] > 0 and c["wall"] > 0 for c in data["commands"]), data["commands"]
    idle = {i["system"]: i for i in data["operators"]}
    assert set(idle) == {"t9k-jobs", "training-operator"}
    assert all(10 < i["rss_end_mib"] <= i["rss_max_mib"] for i in idle.values()), idle
    assert "| `t9k-jobs get (local, 1 runs)` |" in out.stdout and "| t9k-jobs |" in out.stdout
