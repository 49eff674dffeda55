"""One job, one run; a run knows its own processes (issue 20), with real detached runs.

A second ``run -d`` of a running job in the same runs dir is refused; a copied run dir, a missing
pid file or a removed run dir never make a verb signal what is not the run's; a run whose dir
goes away stops itself and ``logs -f`` says so. Replicas that must keep running wait for a file
the test never writes; every wait is on a condition with a generous limit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from t9k_jobs import Client
from t9k_jobs.errors import AlreadyExists, UsageError
from tests.cli.test_local_verbs import LIMIT, _gated, _generic, cli, detached  # noqa: F401
from tests.helpers import wait_until
from tests.local.conftest import alive, carrying, kill_run

pytestmark = pytest.mark.e2e


def _run_dir(done: subprocess.CompletedProcess[str]) -> Path:
    assert done.returncode == 0, done.stdout + done.stderr
    match = re.search(r"run dir (\S+)", done.stdout)
    assert match, done.stdout
    return Path(match.group(1))


_kill = kill_run


def _rows(cwd: Path, *args: str) -> list[list[str]]:
    return [line.split() for line in cli(cwd, "get", *args).stdout.splitlines()[1:]]


def test_a_second_run_of_a_running_job_is_refused_unless_asked(detached, tmp_path: Path) -> None:
    first = detached(_generic("once", _gated(tmp_path / "never", "up", "down"), replicas=1))
    manifest = tmp_path / "once.yaml"
    refused = cli(tmp_path, "run", "-d", str(manifest))
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stdout + refused.stderr
    assert refused.stderr.startswith(f"error: GenericJob once already exists: it is running in {first} ")
    assert "--allow-duplicate" in refused.stderr
    with pytest.raises(AlreadyExists):
        Client.local(tmp_path / "t9k-runs").run(str(manifest), run_dir=tmp_path / "t9k-runs" / "once-sdk")
    assert sorted(p.name for p in (tmp_path / "t9k-runs").iterdir() if not p.name.startswith(".")) == [first.name]
    foreground = cli(tmp_path, "run", str(manifest), "--run-dir", str(tmp_path / "t9k-runs" / "fg"))
    assert foreground.returncode == 1 and "already exists" in foreground.stdout + foreground.stderr
    assert not (tmp_path / "t9k-runs" / "fg").exists()
    # A run in another runs dir is another job's run: it starts.
    elsewhere = _run_dir(cli(tmp_path, "run", "-d", str(manifest), "--run-dir", str(tmp_path / "elsewhere" / "once")))
    second = None
    try:
        second = _run_dir(cli(tmp_path, "run", "-d", str(manifest), "--allow-duplicate"))
        rows = _rows(tmp_path, "gj", "once", "-o", "wide")
        assert sorted(r[7] for r in rows) == sorted([str(first), str(second)]), rows  # every live run
        ambiguous = cli(tmp_path, "delete", "gj", "once")
        assert ambiguous.returncode == 2 and "2 runs of GenericJob once are running" in ambiguous.stderr
        with pytest.raises(UsageError, match="name one with --run-dir"):
            Client.local(tmp_path / "t9k-runs").describe("gj", "once")
        assert alive(int((first / "runtime.pid").read_text())) and alive(int((second / "runtime.pid").read_text()))
        stopped = cli(tmp_path, "delete", "gj", "once", "--run-dir", str(second))
        assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stdout + stopped.stderr
        # The newest run of the name (now Stopped) and every live one.
        assert sorted((r[7], r[1]) for r in _rows(tmp_path, "gj", "once", "-o", "wide")) == sorted(
            [(str(first), "Running"), (str(second), "Stopped")]
        )
    finally:
        _kill(elsewhere)
        if second is not None:
            _kill(second)


def test_a_copied_run_dir_is_never_taken_for_the_original(detached, tmp_path: Path) -> None:
    original = detached(_generic("copied", _gated(tmp_path / "never", "up", "down"), replicas=1))
    runtime = int((original / "runtime.pid").read_text())
    wait_until(lambda: cli(tmp_path, "wait", "gj", "copied", "--for=Running", "--timeout", "1s").returncode == 0, "Running", LIMIT)
    copy = original.with_name(original.name + "-copy")
    shutil.copytree(original, copy)
    os.utime(copy / "runtime.pid")  # touched: newer than the runtime, as rsync or an edit leaves it
    copied = json.loads(cli(tmp_path, "get", "gj", "copied", "--run-dir", str(copy), "-o", "json").stdout)
    assert copied["metadata"]["annotations"]["t9k-jobs.local/phase"] == "Stopped"
    assert "t9k-jobs.local/runtime-pid" not in copied["metadata"]["annotations"]
    done = cli(tmp_path, "delete", "gj", "copied", "--run-dir", str(copy))
    assert done.returncode == 0 and "is not running (Stopped); nothing to stop" in done.stdout, done.stdout + done.stderr
    assert alive(runtime), "deleting the copy signalled the original's runtime"
    assert "Runtime:     not running" in cli(tmp_path, "describe", "gj", "copied", "--run-dir", str(copy)).stdout
    # By name, the live run is the one acted on; the copy is history.
    rows = _rows(tmp_path, "gj", "copied", "-o", "wide")
    assert [r[1] for r in rows if r[7] == str(original)] == ["Running"], rows
    done = cli(tmp_path, "delete", "gj", "copied")
    assert done.returncode == 0 and f"runtime pid {runtime}" in done.stdout, done.stdout + done.stderr
    assert not alive(runtime)


def test_a_live_run_without_its_pid_file_is_unknown_and_nothing_is_signalled(detached, tmp_path: Path) -> None:
    run_dir = detached(_generic("nopid", _gated(tmp_path / "never", "up", "down"), replicas=2))
    marker = f"T9K_JOBS_RUN_DIR={run_dir}".encode()
    runtime = int((run_dir / "runtime.pid").read_text())
    wait_until(lambda: len(carrying(marker, b"python")) >= 2, "both replicas' processes", LIMIT)
    replicas = carrying(marker, b"python")
    (run_dir / "runtime.pid").unlink()
    assert _rows(tmp_path, "gj", "nopid")[0][1] == "Unknown"
    refused = cli(tmp_path, "delete", "gj", "nopid")
    assert refused.returncode == 1 and "runtime.pid is missing" in refused.stderr, refused.stdout + refused.stderr
    assert "nothing was signalled" in refused.stderr
    # Before: "nothing to stop", then every replica SIGKILLed (the job recorded Failed, 137).
    assert alive(runtime) and all(alive(p) for p in replicas)
    status = yaml.safe_load((run_dir / "status.yaml").read_text())
    assert status["phase"] == "Running", status


def test_a_run_whose_dir_is_removed_stops_with_its_replicas_and_logs_f_says_so(detached, tmp_path: Path) -> None:
    run_dir = detached(_generic("vanish", _gated(tmp_path / "never", "up", "down"), replicas=2))
    marker = f"T9K_JOBS_RUN_DIR={run_dir}".encode()
    runtime = int((run_dir / "runtime.pid").read_text())
    wait_until(lambda: len(carrying(marker, b"python")) >= 2, "both replicas' processes", LIMIT)
    follower = subprocess.Popen(
        [sys.executable, "-m", "t9k_jobs.cli", "logs", "gj", "vanish", "-f"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert follower.stdout is not None
        wait_until(lambda: "up" in follower.stdout.readline(), "logs -f to show a line", LIMIT)
        shutil.rmtree(run_dir)
        out, err = follower.communicate(timeout=LIMIT)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 1, out + err
    assert err.startswith("error: the run dir ") and "is gone (removed or moved)" in err and err.count("\n") == 1, err
    wait_until(lambda: not alive(runtime), "the runtime to stop", LIMIT)
    wait_until(lambda: carrying(marker) == [], "the replicas to go with it", LIMIT)


def test_a_moved_run_dir_stops_the_run_and_runtime_log_says_why(detached, tmp_path: Path) -> None:
    run_dir = detached(_generic("moved", _gated(tmp_path / "never", "up", "down"), replicas=1))
    marker = f"T9K_JOBS_RUN_DIR={run_dir}".encode()
    runtime = int((run_dir / "runtime.pid").read_text())
    wait_until(lambda: len(carrying(marker, b"python")) >= 1, "the replica's process", LIMIT)
    moved = tmp_path / "moved-away"
    run_dir.rename(moved)
    wait_until(lambda: not alive(runtime), "the runtime to stop", LIMIT)
    wait_until(lambda: carrying(marker) == [], "the replica to go with it", LIMIT)
    last_words = (moved / "runtime.log").read_text()
    assert f"the run dir {run_dir} was removed or moved while the job ran" in last_words, last_words


def test_status_yaml_is_replaced_whole(detached, tmp_path: Path) -> None:
    # Written into a temporary file and renamed: each write is a new file (a reader never sees half).
    run_dir = detached(_generic("whole", _gated(tmp_path / "go", "up", "down"), replicas=1))
    wait_until(lambda: (run_dir / "status.yaml").exists(), "a first status", LIMIT)
    first = (run_dir / "status.yaml").stat().st_ino
    (tmp_path / "go").write_text("go")
    assert cli(tmp_path, "wait", "gj", "whole", "--for=Succeeded", "--timeout", "90s").returncode == 0
    assert (run_dir / "status.yaml").stat().st_ino != first
    assert not [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")]


def test_runs_started_together_are_one_run(tmp_path: Path) -> None:
    # The check and the start are one step under the runs dir's lock: of three started at once,
    # one runs and two are refused, whatever the timing.
    manifest = tmp_path / "race.yaml"
    manifest.write_text(yaml.safe_dump(_generic("race", _gated(tmp_path / "go", "up", "down"), replicas=1)))
    procs = [
        subprocess.Popen([sys.executable, "-m", "t9k_jobs.cli", "run", "-d", str(manifest)], cwd=tmp_path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    results = [(p.wait(timeout=LIMIT), p.communicate()) for p in procs]
    runs = [Path(p.name) for p in (tmp_path / "t9k-runs").iterdir() if not p.name.startswith(".")]
    try:
        assert sorted(code for code, _ in results) == [0, 1, 1], results
        assert all("already exists: it is running in" in err for code, (_, err) in results if code == 1), results
        assert len(runs) == 1, runs
    finally:
        (tmp_path / "go").write_text("go")
        for run in runs:
            _kill(tmp_path / "t9k-runs" / run)
