"""The scale benchmark and the soak, run small: they must keep working end to end.

These are not measurements (timings here prove nothing); they check that a fresh clone can
run ``benchmarks/cluster_scale.py`` (both operators and the ceiling, on kwok) and
``benchmarks/soak.py``, and that what they report is complete.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / "tools" / "controlplane" / "build-peers.sh"


@pytest.fixture(scope="module")
def peers() -> Path:
    """kwok and Kubeflow's training operator, built once (``scripts/test.sh`` builds them first)."""
    out = subprocess.run(["bash", str(PEERS)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.fail(f"build-peers.sh failed (exit {out.returncode}):\n{out.stderr[-3000:]}", pytrace=False)
    return Path(out.stdout.strip().splitlines()[-1])


def run(script: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )
    assert out.returncode == 0, (
        f"{script} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    )
    return out


@pytest.mark.timeout(420)
def test_cluster_scale_runs_both_operators_and_the_ceiling(peers: Path, tmp_path: Path) -> None:
    n = 3
    results = tmp_path / "results.json"
    args = f"--jobs {n} --limits matched --timeout 120 --out {results}".split()
    out = run("cluster_scale.py", *args, timeout=400)
    data = json.loads(results.read_text())
    by = {r["system"]: r for r in data["results"]}
    assert set(by) == {"ceiling", "t9k-jobs", "training-operator"}
    assert all(r["jobs"] == n and not r["error"] for r in by.values()), by
    assert by["ceiling"]["pods_s"] > 0
    for system in ("t9k-jobs", "training-operator"):
        r = by[system]
        measured = (
            "pods_s running_s succeed_p50_s succeed_p99_s replace_p50_s replace_p99_s peak_rss_mib cpu_s"
        )
        assert all(math.isfinite(r[k]) and r[k] >= 0 for k in measured.split()), r
        assert r["peak_rss_mib"] > 10 and r["cpu_s"] > 0, r
        # 4 Services and 4 Pods per job, and one replacement pod: at least 9 creates per job.
        assert r["requests"].get("POST", 0) >= 9 * n, r["requests"]
        assert r["requests"].get("DELETE", 0) >= n, "each job's failed worker is deleted and replaced"
    assert "| 3 | matched | t9k-jobs |" in out.stdout, "the table is printed"


@pytest.mark.timeout(300)
def test_soak_churns_and_leaves_nothing_behind(peers: Path, tmp_path: Path) -> None:
    result = tmp_path / "soak.json"
    before = set(Path(tempfile.gettempdir()).glob("soak-*"))
    # Memory growth is the long soak's question, not this one's: warm-up dominates 20 s.
    args = f"--minutes 0.33 --in-flight 3 --max-growth 1000 --out {result}".split()
    run("soak.py", *args, timeout=280)
    # Its control plane's folder goes with a soak that passed (each full run left 70 MB in /tmp).
    assert set(Path(tempfile.gettempdir()).glob("soak-*")) <= before
    data = json.loads(result.read_text())
    assert data["jobs_created"] >= 3
    assert data["jobs_succeeded_and_deleted"] == data["jobs_created"]
    assert data["samples"], "RSS sampled"


def test_topology_placement_runs_both_modes_and_packs_the_racks(tmp_path: Path) -> None:
    """``benchmarks/topology_placement.py`` small: 2 gangs of 3 in 2 racks of 2 nodes (2 CPUs
    each, 4 per rack): with the topology none is split, and every gang is placed in both modes."""
    out = tmp_path / "topology.json"
    run("topology_placement.py", "--out", str(out), "--racks", "2", "--nodes", "2", "--cpu", "2", "--gangs", "2",
        "--timeout", "120", timeout=600)  # fmt: skip
    results = {r["mode"]: r for r in json.loads(out.read_text())["results"]}
    assert set(results) == {"topology", "plain"}
    assert results["topology"]["split"] == 0 and not results["topology"]["not_placed"], results
    assert results["plain"]["placed_s"] is not None and not results["plain"]["not_placed"], results
