"""Finished local runs past their time to live (issue 43, part 3; :mod:`t9k_jobs.local.prune`):
``get`` and ``run`` remove their run dirs (the job's ``t9k-jobs.io/ttl-seconds-after-finished``,
``run --ttl``, or ``get --ttl`` for runs without their own), never a running or Stopped run, and
never a ``--run-dir`` named by the user. Real runs, real CLI processes."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
import yaml

from tests.helpers import job, replica, template, wait_until
from tests.local.conftest import kill_run, py

from .test_local_verbs import cli

pytestmark = pytest.mark.e2e

TTL = "t9k-jobs.io/ttl-seconds-after-finished"


def manifest(tmp_path: Path, name: str, code: str = "print('done')", ttl: str | None = None) -> Path:
    doc = job("GenericJob", name, {"replicaSpecs": [replica("worker", 1, template(py(code)))]})
    if ttl is not None:
        doc["metadata"]["annotations"] = {TTL: ttl}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def runs(tmp_path: Path) -> dict[str, Path]:
    """The run dirs under ``tmp_path/t9k-runs`` by job name."""
    out = {}
    for d in (tmp_path / "t9k-runs").iterdir() if (tmp_path / "t9k-runs").exists() else []:
        info = json.loads((d / "run.json").read_text())
        out[info["name"]] = d
    return out


def test_runs_past_their_time_to_live_are_removed_and_the_others_kept(tmp_path: Path) -> None:
    # Finished, with their own time to live: the annotation's 0 and run --ttl 1.
    assert cli(tmp_path, "run", "-q", str(manifest(tmp_path, "own", ttl="0"))).returncode == 0
    assert cli(tmp_path, "run", "-q", "--ttl", "1", str(manifest(tmp_path, "flag"))).returncode == 0
    assert json.loads((runs(tmp_path)["flag"] / "run.json").read_text())["ttlSecondsAfterFinished"] == 1
    # Finished without one: kept unless get --ttl says.
    assert cli(tmp_path, "run", "-q", str(manifest(tmp_path, "plain"))).returncode == 0
    # Stopped (its runtime killed before the job ended) and running: never removed.
    gate = tmp_path / "gate"
    waits = f"import pathlib, time\nprint('up', flush=True)\nwhile not pathlib.Path({str(gate)!r}).exists():\n    time.sleep(0.1)\n"
    for name in ("stopped", "running"):
        started = cli(tmp_path, "run", "-d", str(manifest(tmp_path, name, waits, ttl="0")))
        assert started.returncode == 0, started.stderr
    run_dirs = runs(tmp_path)
    for name in ("stopped", "running"):
        wait_until(lambda n=name: "up" in (run_dirs[n] / "job.log").read_text(errors="replace")
                   if (run_dirs[n] / "job.log").exists() else False, f"{name} running", 90)  # fmt: skip
    pid = int((run_dirs["stopped"] / "runtime.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    kill_run(run_dirs["stopped"])
    try:
        # The flag's one second passes; get removes what is past its time to live, and says so.
        wait_until(lambda: cli(tmp_path, "get").returncode == 0 and "flag" not in runs(tmp_path),
                   "the --ttl 1 run removed", 60, interval=0.5)  # fmt: skip
        assert set(runs(tmp_path)) == {"plain", "stopped", "running"}
        listed = cli(tmp_path, "get")
        assert re.search(r"^GenericJob +stopped +Stopped", listed.stdout, re.M) and re.search(r"^GenericJob +running +Running", listed.stdout, re.M), listed.stdout
        # get --ttl 0: every finished run, now the one without its own time to live too.
        pruned = cli(tmp_path, "get", "--ttl", "0")
        assert pruned.returncode == 0, pruned.stderr
        assert re.search(r"^note: removed \S+/plain-\S+: GenericJob/plain Succeeded more than 0 s ago", pruned.stderr, re.M), pruned.stderr
        assert set(runs(tmp_path)) == {"stopped", "running"}
    finally:
        gate.write_text("")
        kill_run(run_dirs["running"])


def test_ttl_with_a_run_dir_or_below_zero_is_refused_in_one_line(tmp_path: Path) -> None:
    path = manifest(tmp_path, "refused")
    for args, expected in (
        (["--ttl", "5", "--run-dir", str(tmp_path / "mine")], "--ttl: a --run-dir is kept"),
        (["--ttl", "-1"], "--ttl: -1 is not accepted; expected a non-negative integer (seconds)"),
    ):
        done = cli(tmp_path, "run", *args, str(path))
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert expected in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "mine").exists() and not (tmp_path / "t9k-runs").exists()
