"""The verbs act only on processes proven to be a run's runtime (issue 20), and say Unknown when
they cannot tell: run dirs made by hand here stand for the cases a real run dir can get into
(a pid file naming a stranger, a lock held by someone else, files missing or damaged). Strangers
are real processes started here; the checks read /proc, never the code under test.

No sleep decides a result: waits are on conditions (``wait_until``).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_jobs import Client
from t9k_jobs.errors import JobsError, UsageError
from t9k_jobs.local.ownership import GONE, RUNNING, UNKNOWN
from t9k_jobs.local.rundir import publish_runtime, runtime_state

from tests.helpers import job, template, wait_until

from .conftest import alive, py

LIMIT = 60.0


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", *args],
        capture_output=True, text=True, timeout=LIMIT, cwd=cwd, env=env, check=False,
    )


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip().removeprefix("error: ")


def make_run(runs: Path, name: str, status: dict[str, Any] | None, pid: int | None) -> Path:
    """A run dir as a runtime leaves it: run.json, job.yaml, status.yaml and runtime.pid (naming
    ``pid``, locked by nobody) when given."""
    run_dir = runs / f"{name}-20260101-000000"
    run_dir.mkdir(parents=True)
    manifest = job("GenericJob", name, {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(py("pass"))}]})
    (run_dir / "job.yaml").write_text(yaml.safe_dump(manifest))
    (run_dir / "run.json").write_text(json.dumps({"kind": "GenericJob", "name": name, "created": time.time(), "replicas": 1}))
    if status is not None:
        (run_dir / "status.yaml").write_text(yaml.safe_dump(status))
    if pid is not None:
        (run_dir / "runtime.pid").write_text(f"{pid}\n")
    return run_dir


RUNNING_STATUS = {"phase": "Running", "aggregate": {"running": 1}}
SUCCEEDED_STATUS = {"phase": "Succeeded", "completionTime": "2026-01-01T00:00:00Z"}


@pytest.fixture
def stranger() -> Any:
    """An unrelated process (``sleep``), started before any run file is written; killed after."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_pid_file_naming_a_stranger_never_gets_it_signalled(tmp_path: Path, stranger) -> None:
    # The old check (alive and started before the file's mtime) took the stranger for the runtime:
    # a copied or touched run dir, a reused pid. Nobody holds this run's lock: the runtime is gone.
    runs = tmp_path / "t9k-runs"
    run_dir = make_run(runs, "copied", RUNNING_STATUS, stranger.pid)
    assert runtime_state(run_dir).state == GONE
    row = cli(tmp_path, "get", "gj", "copied", "-o", "wide").stdout.splitlines()[1].split()
    assert row[1] == "Stopped" and row[6] == "-", row  # no pid shown
    done = cli(tmp_path, "delete", "gj", "copied")
    assert done.returncode == 0 and "is not running (Stopped); nothing to stop" in done.stdout, done.stdout + done.stderr
    assert stranger.poll() is None and alive(stranger.pid), "the stranger was signalled"

    finished = make_run(tmp_path / "other", "done", SUCCEEDED_STATUS, stranger.pid)
    described = cli(tmp_path, "describe", "gj", "done", "--run-dir", str(finished)).stdout
    assert "Runtime:     not running" in described and "Phase:       Succeeded" in described
    assert Client.local(run_dir=finished).get("gj", "done").metadata.annotations.get("t9k-jobs.local/runtime-pid") is None


def test_a_lock_held_by_another_process_than_the_named_one_is_unknown(tmp_path: Path, stranger) -> None:
    # As on a shared volume where the run goes on elsewhere: the lock is held, but not by the
    # process runtime.pid names. Nothing can be proven: Unknown, and nothing is signalled.
    runs = tmp_path / "t9k-runs"
    run_dir = make_run(runs, "elsewhere", RUNNING_STATUS, stranger.pid)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(run_dir / 'runtime.pid')!r}, os.O_RDONLY)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        state = runtime_state(run_dir)
        assert state.state == UNKNOWN and f"not by process {stranger.pid}" in (state.reason or "")
        row = cli(tmp_path, "get", "gj", "elsewhere").stdout.splitlines()[1].split()
        assert row[1] == "Unknown", row
        assert "Why:         its state cannot be told: runtime.pid is locked, but not by process" in cli(
            tmp_path, "describe", "gj", "elsewhere"
        ).stdout
        line = one_line(cli(tmp_path, "delete", "gj", "elsewhere"), 1)
        assert "cannot tell whether its runtime runs" in line and "nothing was signalled" in line
        assert one_line(cli(tmp_path, "delete", "gj", "elsewhere", "--purge"), 1)
        assert run_dir.exists()
        assert "cannot wait" in one_line(cli(tmp_path, "wait", "gj", "elsewhere", "--for=Succeeded"), 1)
        with pytest.raises(JobsError, match="nothing was signalled"):
            Client.local(runs).delete("gj", "elsewhere")
        assert alive(stranger.pid) and holder.poll() is None, "a process was signalled"
    finally:
        holder.kill()
        holder.wait()


def test_a_missing_pid_file_is_unknown_not_stopped(tmp_path: Path) -> None:
    runs = tmp_path / "t9k-runs"
    make_run(runs, "nopid", RUNNING_STATUS, None)
    row = cli(tmp_path, "get", "gj", "nopid").stdout.splitlines()[1].split()
    assert row[1] == "Unknown", row
    obj = json.loads(cli(tmp_path, "get", "gj", "nopid", "-o", "json").stdout)
    assert "runtime.pid is missing" in obj["metadata"]["annotations"]["t9k-jobs.local/unknown-reason"]
    assert "runtime.pid is missing" in one_line(cli(tmp_path, "delete", "gj", "nopid"), 1)
    # A terminal phase is final: a finished run without its pid file still shows how it ended.
    make_run(runs, "finished", SUCCEEDED_STATUS, None)
    assert cli(tmp_path, "get", "gj", "finished").stdout.splitlines()[1].split()[1] == "Succeeded"


@pytest.mark.parametrize(
    "content, needle",
    [("phase: [not, a, phase\n", "status.yaml is not a status"), ("- a list\n", "status.yaml holds no status mapping")],
)
def test_an_unreadable_status_is_unknown_with_the_reason(tmp_path: Path, content: str, needle: str) -> None:
    runs = tmp_path / "t9k-runs"
    run_dir = make_run(runs, "damaged", None, None)
    (run_dir / "status.yaml").write_text(content)
    fd = publish_runtime(run_dir)  # this process stands in for its runtime: provably running
    try:
        assert runtime_state(run_dir).state == RUNNING and runtime_state(run_dir).pid == os.getpid()
        summary = Client.local(runs).summaries("gj", "damaged")[0]
        assert summary.phase == "Unknown"
        assert needle in Client.local(runs).describe("gj", "damaged")
    finally:
        os.close(fd)
    assert runtime_state(run_dir).state == GONE, "the lock goes with the runtime"


def test_the_lock_is_on_the_file_not_the_path(tmp_path: Path) -> None:
    # A copy of a live run's pid file is a new file nobody locks; an in-place rewrite of the
    # pid naming another process is not believed.
    run_dir = make_run(tmp_path / "runs", "live", RUNNING_STATUS, None)
    fd = publish_runtime(run_dir)
    try:
        copy = make_run(tmp_path / "copy", "live", RUNNING_STATUS, None)
        (copy / "runtime.pid").write_bytes((run_dir / "runtime.pid").read_bytes())
        assert runtime_state(copy).state == GONE
        with open(run_dir / "runtime.pid", "r+") as f:
            f.write("1\n")
        state = runtime_state(run_dir)
        assert state.state == UNKNOWN and "not by process 1" in (state.reason or "")
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert runtime_state(run_dir).state == GONE
    finally:
        os.close(fd)


def test_verbs_without_a_name_act_on_nothing_locally(tmp_path: Path) -> None:
    # Before: find_run(kind, None) took the newest run of any name; `delete gj None` stopped it.
    runs = tmp_path / "t9k-runs"
    make_run(runs, "somebody", SUCCEEDED_STATUS, None)
    client = Client.local(runs)
    # describe without a name describes every job of the kind, as kubectl describe KIND does
    # (issue 23); it changes nothing.
    assert "somebody" in client.describe("gj", None)
    for name in (None, "", "  "):
        for call in (
            lambda name=name: client.get("gj", name),
            lambda name=name: client.describe("gj", name) if name is not None else client.get("gj", name),
            lambda name=name: client.delete("gj", name, purge=True),
            lambda name=name: client.pause("gj", name),
            lambda name=name: client.resume("gj", name),
            lambda name=name: client.scale("pj", name, 2),
            lambda name=name: client.wait("gj", name, timeout=0),
            lambda name=name: list(client.logs("gj", name)),
            lambda name=name: client.summaries("gj", name) if name is not None else client.get("gj", name),
        ):
            with pytest.raises(UsageError, match="NAME: a job name is required") as refused:
                call()
            assert refused.value.exit_code == 2
    assert (runs / "somebody-20260101-000000").exists()
    for verb in ("get", "describe", "delete", "logs", "pause", "resume"):
        line = one_line(cli(tmp_path, verb, "gj", ""), 2)
        assert line.startswith("NAME: a job name is required"), line
    assert one_line(cli(tmp_path, "wait", "gj", " ", "--for=Succeeded"), 2).startswith("NAME:")
    assert one_line(cli(tmp_path, "scale", "pj", "", "--replicas", "1"), 2).startswith("NAME:")
    assert one_line(cli(tmp_path, "delete", "gj", "..", "--purge"), 2) == "NAME: '..' is not a name (it may not be '.' or '..')"
    assert (runs / "somebody-20260101-000000").exists()


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda c: c.get(5, "x"), "kind: expected a kind"),
        (lambda c: c.get("gj", 5), "NAME: expected a job name (a string), got int 5"),
        (lambda c: c.logs("gj", "x", tail="3"), "tail: expected an integer of 0 or more or None, got str '3'"),
        (lambda c: c.logs("gj", "x", tail=-1), "tail: expected an integer of 0 or more, got -1"),
        (lambda c: c.logs("gj", "x", index=True), "index: expected an integer"),
        (lambda c: c.logs("gj", "x", follow="no"), "follow: expected True or False, got str 'no'"),
        (lambda c: c.scale("pj", "x", "2"), "replicas: expected an integer of 0 or more, got str '2'"),
        (lambda c: c.wait("gj", "x", timeout=object()), "timeout: expected seconds"),
        (lambda c: c.wait("gj", "x", phase=None), "phase: expected Succeeded, Failed or Running"),
        (lambda c: c.delete("gj", "x", purge=1), "purge: expected True or False"),
        (lambda c: c.run(42), "job: expected a manifest path"),
        (lambda c: c.get("gj", "x", namespace=""), "namespace: '' is empty"),
        (lambda c: c.get("gj", "x", 7), "namespace: expected a namespace"),
        (lambda c: c.get("gj", "x", "y", "z"), "get: too many positional arguments"),
    ],
)
def test_sdk_arguments_of_the_wrong_type_are_usage_errors(tmp_path: Path, call: Any, needle: str) -> None:
    with pytest.raises(UsageError) as refused:
        call(Client.local(tmp_path / "runs"))
    assert needle in str(refused.value) and refused.value.exit_code == 2
    with pytest.raises(UsageError, match="runs_dir: expected a path"):
        Client.local(runs_dir=3)  # type: ignore[arg-type]


def test_a_hard_linked_copy_of_a_live_run_dir_cannot_act_on_the_run(tmp_path: Path) -> None:
    """Issue 33: ``cp -al t9k-runs BACKUP/`` of a live runs dir shares the runtime's pid file (a
    hard link: the same inode, the same lock), so in BACKUP ``get`` said Running and ``delete``
    stopped the live run. The pid file names the directory it was published in: the copy's run is
    Stopped, says it is a copy, and nothing done there reaches the live run."""
    gate = tmp_path / "never"
    code = f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists():\n    time.sleep(0.05)\n"
    manifest = job("GenericJob", "live", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(py(code))}]})
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(manifest))
    started = cli(tmp_path, "run", "-d", str(path))
    assert started.returncode == 0, started.stdout + started.stderr
    runs = tmp_path / "t9k-runs"
    (run_dir,) = runs.iterdir()
    runtime = runtime_state(run_dir)
    assert runtime.state == RUNNING and runtime.pid is not None
    try:
        wait_until(lambda: cli(tmp_path, "get", "gj", "live").stdout.split("\n")[1].split()[1] == "Running",
                   "the run Running", LIMIT)  # fmt: skip
        backup = tmp_path / "backup"
        backup.mkdir()
        subprocess.run(["cp", "-al", str(runs), str(backup)], check=True)
        copy = backup / "t9k-runs" / run_dir.name
        assert os.stat(copy / "runtime.pid").st_ino == os.stat(run_dir / "runtime.pid").st_ino  # one file
        state = runtime_state(copy)
        assert state.state == GONE and "a copy, made with hard links" in (state.reason or ""), state
        row = cli(backup, "get", "gj", "live").stdout.splitlines()[1].split()
        assert row[1] == "Stopped", row
        assert "a copy, made with hard links, of a live run" in cli(backup, "describe", "gj", "live").stdout
        deleted = cli(backup, "delete", "gj", "live")
        assert deleted.returncode == 0 and "not running" in deleted.stdout, deleted.stdout + deleted.stderr
        assert cli(backup, "pause", "gj", "live").returncode == 1
        purged = cli(backup, "delete", "gj", "live", "--purge")
        assert purged.returncode == 0 and not copy.exists(), purged.stdout + purged.stderr
        # The live run went on through all of it.
        assert alive(runtime.pid) and runtime_state(run_dir).state == RUNNING
        assert cli(tmp_path, "get", "gj", "live").stdout.splitlines()[1].split()[1] == "Running"
    finally:
        done = cli(tmp_path, "delete", "gj", "live")
        assert done.returncode == 0, done.stdout + done.stderr
    assert not alive(runtime.pid)
