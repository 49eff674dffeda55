"""DeepSpeedJob run locally with deepspeed's real launcher (no-ssh mode, one per worker), and the
kinds or modes a local run refuses, each with one line that says why and what to do instead."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import job, template, wait_until

from .conftest import REPO, carrying

pytestmark = pytest.mark.e2e


def test_deepspeed_example_trains_with_zero_over_two_workers(start) -> None:
    """examples/deepspeed-digits: ZeRO stage 2 over 2 workers on CPU, test accuracy >= 0.90; both
    workers end by themselves (the one that did not decide is not stopped as unfinished)."""
    run = start(REPO / "examples" / "deepspeed-digits" / "job.yaml", "--quiet")
    assert run.finish(600) == 0, run.output
    status = run.status()
    assert status["phase"] == "Succeeded"
    phases = {r["name"]: r["phase"] for t in status["tasks"] for r in t["replicas"]}
    assert phases == {"digits-deepspeed-worker-0": "Succeeded", "digits-deepspeed-worker-1": "Succeeded"}
    log = (run.run_dir / "digits-deepspeed-worker-0.worker.log").read_text()
    assert "ZeRO stage 2" in log, log[-2000:]
    final = float(re.search(r"final test_accuracy ([\d.]+)", log).group(1))
    assert final >= 0.90, log[-2000:]
    assert "rank 1 of 2 joined" in (run.run_dir / "digits-deepspeed-worker-1.worker.log").read_text()
    # The launcher's hostfile is a file of the run, as a pod would see the ConfigMap.
    assert (run.run_dir / "children" / "configmap" / "digits-deepspeed-launch" / "hostfile").read_text() == (
        "worker-0 slots=1\nworker-1 slots=1\n"
    )
    secret = run.run_dir / "children" / "secret" / "digits-deepspeed-ssh" / "id_ed25519"
    assert secret.stat().st_mode & 0o777 == 0o600


def test_a_stopped_deepspeed_run_leaves_no_process(start) -> None:
    """Ctrl-C while the ranks train: every process of every worker (launcher, launch.py, ranks) ends."""
    run = start(REPO / "examples" / "deepspeed-digits" / "job.yaml", "--quiet")
    run.wait_for(lambda s: s.get("phase") == "Running", timeout=120)
    marker = f"T9K_JOBS_RUN_DIR={run.run_dir.resolve()}".encode()
    ours = lambda pattern=b"": carrying(marker, pattern)  # noqa: E731
    ranks = lambda: ours(b"--local_rank=")  # noqa: E731

    wait_until(lambda: len(ranks()) >= 2, "the 2 ranks to start", 180, interval=0.2)
    assert len(ranks()) == 2 and len(ours()) >= 6, "2 runners, 2 launch.py and 2 ranks carry the run's marker"
    run.signal(signal.SIGINT)
    assert run.finish(60) == 130, run.output
    left = [p for p in _children(run.proc.pid)]
    assert not left and not ours(), (left, ours())


def _children(root: int) -> list[int]:
    """Every live descendant of ``root`` (by parent pid)."""
    parents: dict[int, int] = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                parents[int(pid)] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"config": {"customCommand": "deepspeed train.py"}}, "customCommand is not run locally"),
        ({"runMode": {"debug": {"enabled": True}}}, "debug mode runs sshd"),
    ],
)
def test_what_a_local_deepspeed_run_refuses(tmp_path: Path, change: dict, needle: str) -> None:
    job = yaml.safe_load((REPO / "examples" / "deepspeed-digits" / "job.yaml").read_text())
    for key, value in change.items():
        job["spec"].setdefault(key, {}).update(value)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    out = subprocess.run([sys.executable, "-m", "t9k_jobs.cli", "run", str(path), "--run-dir", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and needle in out.stderr + out.stdout, out
    assert "Traceback" not in out.stderr


def test_colossalai_example_trains_over_real_sshd_workers(start) -> None:
    """examples/colossalai-digits: each worker a real sshd on a loopback address of its own, the
    launcher's colossalai run reaches them over ssh (paramiko) with the job's key; >= 0.90."""
    run = start(REPO / "examples" / "colossalai-digits" / "job.yaml", "--quiet")
    assert run.finish(600) == 0, run.output
    assert run.status()["phase"] == "Succeeded"
    log = (run.run_dir / "digits-colossalai-launcher.launcher.log").read_text()
    assert float(re.search(r"final test_accuracy ([\d.]+)", log).group(1)) >= 0.90, log[-2000:]
    worker = (run.run_dir / "digits-colossalai-worker-0.worker.log").read_text()
    assert "Accepted publickey for" in worker, worker


def test_a_stopped_colossalai_run_leaves_no_process(start) -> None:
    """The ranks run in sshd sessions (their own sessions, not the worker's process group): a stop
    of the run ends them too."""
    run = start(REPO / "examples" / "colossalai-digits" / "job.yaml", "--quiet")
    marker = f"T9K_JOBS_RUN_DIR={run.run_dir.resolve()}".encode()
    ours = lambda pattern=b"": carrying(marker, pattern)  # noqa: E731

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(ours(b"train_colossalai.py")) < 3:  # torchrun per worker + ranks
        time.sleep(0.2)
    assert ours(b"train_colossalai.py"), run.output
    run.signal(signal.SIGTERM)
    assert run.finish(60) == 143, run.output
    assert not ours(), [Path(f"/proc/{p}/cmdline").read_bytes() for p in ours()]
    assert not [p for p in _children(run.proc.pid)]


def test_deepspeed_elastic_rescale_locally_rewrites_the_hostfile_and_relaunches(start, tmp_path: Path) -> None:
    """§4.7 in a local run: raising expectedReplicas in the manifest rewrites the run's hostfile,
    starts worker-1 and relaunches worker-0 with the new host count (every local worker is a
    launcher), without counting a restart; the job then ends as usual."""
    release = tmp_path / "release"
    script = tmp_path / "wait.py"
    script.write_text(
        "import os, sys, time\n"
        f"while not os.path.exists({str(release)!r}):\n"
        "    time.sleep(0.05)\n"
        "print('released', os.environ.get('RANK'), flush=True)\n"
    )
    manifest = job(
        "DeepSpeedJob",
        "ds-elastic",
        {
            "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 2, "expectedReplicas": 1},
            "config": {"slotsPerWorker": 1, "run": {"python": [str(script)]}},
            "worker": {"replicas": 1, "template": template(name="worker")},
        },
    )
    run = start(manifest, "--quiet")
    hostfile = run.run_dir / "children" / "configmap" / "ds-elastic-launch" / "hostfile"
    first = run.wait_for(lambda s: s.get("phase") == "Running", timeout=120)
    assert hostfile.read_text() == "worker-0 slots=1\n"
    uid = {r["name"]: r.get("uid") for t in first["tasks"] for r in t["replicas"]}["ds-elastic-worker-0"]

    manifest["spec"]["elastic"]["expectedReplicas"] = 2
    run.manifest.write_text(yaml.safe_dump(manifest, sort_keys=False))
    status = run.wait_for(
        lambda s: {r["name"]: (r["phase"], r.get("uid")) for t in s["tasks"] for r in t["replicas"]}.keys()
        == {"ds-elastic-worker-0", "ds-elastic-worker-1"}
        and all(r["phase"] == "Running" for t in s["tasks"] for r in t["replicas"])
        and {r["name"]: r.get("uid") for t in s["tasks"] for r in t["replicas"]}["ds-elastic-worker-0"] != uid,
        timeout=120,
    )
    assert hostfile.read_text() == "worker-0 slots=1\nworker-1 slots=1\n"
    assert status["backoffCount"] == 0
    assert "RelaunchingReplica" in (run.run_dir / "events.log").read_text()
    release.write_text("go")
    assert run.finish(300) == 0, run.output
