"""Day-two verbs over local runs, end to end: ``run -d``, ``get``, ``logs``, ``wait``,
``describe`` and ``delete`` as real CLI processes against real detached runs.

No sleep decides a result: every test waits for a condition with a generous limit (the
machine may be a loaded 2-core VM), and replicas that must keep running wait for a file the
test writes when it is done with them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import job, replica, template, wait_until
from tests.local.conftest import alive, carrying, kill_run, py

pytestmark = pytest.mark.e2e

LIMIT = 90.0  # seconds: generous, the machine may be loaded


def cli(cwd: Path, *args: str, timeout: float = LIMIT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )


def _gated(gate: Path, before: str, after: str) -> str:
    """A replica that prints ``before``, waits for ``gate`` to exist, prints ``after`` and exits 0."""
    return (
        "import os, pathlib, time\n"
        "i = os.environ.get('T9K_JOBS_CONTAINER', '?')\n"
        f"print({before!r}, flush=True)\n"
        f"while not pathlib.Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.05)\n"
        f"print({after!r}, flush=True)\n"
    )


def _generic(name: str, code: str, replicas: int = 2, **fields: Any) -> dict[str, Any]:
    worker = replica("worker", replicas, template(py(code)), **fields)
    return job("GenericJob", name, {"replicaSpecs": [worker]})


@pytest.fixture
def detached(tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], Path]]:
    """Start a manifest with ``run -d`` in ``tmp_path`` (so runs go to ``tmp_path/t9k-runs``) and
    return its run dir; every run still going at the end is stopped, its processes killed."""
    started: list[Path] = []

    def _start(manifest: dict[str, Any]) -> Path:
        path = tmp_path / f"{manifest['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(manifest, sort_keys=False))
        done = cli(tmp_path, "run", "-d", str(path))
        assert done.returncode == 0, done.stdout + done.stderr
        match = re.search(r"run dir (\S+)", done.stdout)
        assert match, done.stdout
        run_dir = Path(match.group(1))
        started.append(run_dir)
        return run_dir

    yield _start
    for run_dir in started:
        kill_run(run_dir)


def _get_json(cwd: Path, kind: str, name: str) -> dict[str, Any]:
    done = cli(cwd, "get", kind, name, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_run_detached_get_logs_follow_wait(detached, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    run_dir = detached(_generic("two", _gated(gate, "hello", "bye")))
    assert run_dir.parent == tmp_path / "t9k-runs"
    runtime = int((run_dir / "runtime.pid").read_text())
    assert alive(runtime)
    assert os.getsid(runtime) != os.getsid(0), "a detached run has a session of its own"

    # get: Running with both replicas ready, in every format.
    def table_row() -> list[str] | None:
        out = cli(tmp_path, "get", "gj", "two").stdout.splitlines()
        return out[1].split() if len(out) > 1 and out[1].split()[1:3] == ["Running", "2/2"] else None

    row = wait_until(table_row, "get to show two Running 2/2", LIMIT)
    assert row[0] == "two" and row[3] == "0"
    listing = cli(tmp_path, "get").stdout
    assert listing.splitlines()[0].split()[:2] == ["KIND", "NAME"] and "GenericJob" in listing
    obj = _get_json(tmp_path, "genericjobs", "two")
    assert obj["kind"] == "GenericJob" and obj["metadata"]["name"] == "two"
    assert obj["status"]["phase"] == "Running"
    assert obj["metadata"]["annotations"]["t9k-jobs.local/run-dir"] == str(run_dir)
    assert obj["metadata"]["annotations"]["t9k-jobs.local/runtime-pid"] == str(runtime)
    as_yaml = yaml.safe_load(cli(tmp_path, "get", "GenericJob", "-o", "yaml").stdout)
    assert as_yaml["kind"] == "List" and [i["metadata"]["name"] for i in as_yaml["items"]] == ["two"]
    assert cli(tmp_path, "get", "gj", "-o", "name").stdout.strip() == "genericjob.batch.tensorstack.dev/two"
    wide = cli(tmp_path, "get", "gj", "-o", "wide").stdout
    assert str(run_dir) in wide and str(runtime) in wide

    # Both replicas' first lines are in before the followers start.
    wait_until(lambda: (run_dir / "job.log").read_text().count("hello") == 2, "both replicas to print hello", LIMIT)
    one = cli(tmp_path, "logs", "gj", "two", "--type", "worker", "--index", "1")
    assert one.returncode == 0 and one.stdout == "hello\n", one.stdout + one.stderr
    assert cli(tmp_path, "logs", "gj", "two", "--tail", "1").stdout.count("\n") == 1

    follower = subprocess.Popen(
        [sys.executable, "-m", "t9k_jobs.cli", "logs", "gj", "two", "--all", "-f"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    waiter = subprocess.Popen(
        [sys.executable, "-m", "t9k_jobs.cli", "wait", "gj", "two", "--for=Succeeded", "--timeout", "5m"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        gate.write_text("go")
        out, err = follower.communicate(timeout=LIMIT)  # ends by itself when the run ends
        w_out, w_err = waiter.communicate(timeout=LIMIT)
    finally:
        for proc in (follower, waiter):
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert follower.returncode == 0, err
    lines = out.splitlines()
    for index in (0, 1):
        assert f"[worker-{index}] hello" in lines and f"[worker-{index}] bye" in lines, out
    assert waiter.returncode == 0, w_err
    assert "Succeeded" in w_out
    assert not alive(runtime)
    assert _get_json(tmp_path, "gj", "two")["status"]["phase"] == "Succeeded"


def test_logs_follow_picks_up_a_restarted_replica(detached, tmp_path: Path) -> None:
    marker = tmp_path / "tried"
    code = (
        "import pathlib, sys\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        "    m.write_text('1'); print('attempt 1', flush=True); sys.exit(1)\n"
        "print('attempt 2', flush=True)\n"
    )
    manifest = _generic("again", code, replicas=1, restartPolicy={"policy": "OnFailure", "limit": 2})
    detached(manifest)
    merged = cli(tmp_path, "logs", "gj", "again", "-f")
    one = cli(tmp_path, "logs", "gj", "again", "--type", "worker", "--index", "0", "-f")
    assert merged.returncode == 0 and merged.stdout == "[worker-0] attempt 1\n[worker-0] attempt 2\n", merged
    assert one.returncode == 0 and one.stdout == "attempt 1\nattempt 2\n", one
    assert cli(tmp_path, "wait", "gj", "again", "--for=Succeeded").returncode == 0
    row = cli(tmp_path, "get", "gj", "again").stdout.splitlines()[1].split()
    assert row[:4] == ["again", "Succeeded", "0/1", "1"]


def test_wait_on_a_failing_job_exits_1_with_the_reason(detached, tmp_path: Path) -> None:
    detached(_generic("fails", "import sys; print('giving up', flush=True); sys.exit(3)", replicas=1))
    started = time.monotonic()
    done = cli(tmp_path, "wait", "gj", "fails", "--for=Succeeded", "--timeout", "5m")
    assert done.returncode == 1, done.stdout + done.stderr
    assert time.monotonic() - started < LIMIT / 2
    message = done.stderr.strip()
    assert message.count("\n") == 0 and "ended Failed, not Succeeded" in message and "exit code 3" in message
    assert cli(tmp_path, "wait", "gj", "fails", "--for=Failed").returncode == 0


def test_wait_timeout_exits_1(detached, tmp_path: Path) -> None:
    detached(_generic("sleeper", _gated(tmp_path / "never", "up", "down"), replicas=1))
    done = cli(tmp_path, "wait", "gj", "sleeper", "--for=Succeeded", "--timeout", "1s")
    assert done.returncode == 1
    assert "timed out after 1s" in done.stderr and done.stderr.strip().count("\n") == 0


def test_delete_stops_a_detached_run_and_keeps_its_logs(detached, tmp_path: Path) -> None:
    run_dir = detached(_generic("stopme", _gated(tmp_path / "never", "working", "done")))
    marker = f"T9K_JOBS_RUN_DIR={run_dir}".encode()
    runtime = int((run_dir / "runtime.pid").read_text())
    wait_until(
        lambda: cli(tmp_path, "wait", "gj", "stopme", "--for=Running", "--timeout", "1s").returncode == 0,
        "Running",
        LIMIT,
    )
    wait_until(lambda: len(carrying(marker, b"python")) >= 2, "both replicas' processes", LIMIT)

    done = cli(tmp_path, "delete", "gj", "stopme")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped" in done.stdout and str(run_dir) in done.stdout
    assert not alive(runtime)
    assert carrying(marker) == [], "no process of the run is left"
    row = cli(tmp_path, "get", "gj", "stopme").stdout.splitlines()[1].split()
    assert row[:3] == ["stopme", "Stopped", "0/2"]
    assert "working" in (run_dir / "job.log").read_text()
    assert (run_dir / "runtime.log").exists()

    again = cli(tmp_path, "delete", "gj", "stopme")
    assert again.returncode == 0 and "not running" in again.stdout
    stopped = cli(tmp_path, "wait", "gj", "stopme", "--for=Succeeded")
    assert stopped.returncode == 1 and "Stopped" in stopped.stderr
    purged = cli(tmp_path, "delete", "gj", "stopme", "--purge")
    assert purged.returncode == 0 and not run_dir.exists()
    assert cli(tmp_path, "get", "gj", "stopme").returncode == 1


def test_describe_says_why_a_replica_cannot_start(detached, tmp_path: Path) -> None:
    manifest = job(
        "GenericJob",
        "cannot",
        {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(["/nonexistent/t9k-cmd"])}]},
    )
    detached(manifest)
    assert cli(tmp_path, "wait", "gj", "cannot", "--for=Failed", "--timeout", "90s").returncode == 0
    out = cli(tmp_path, "describe", "genericjob", "cannot").stdout
    why = next(line for line in out.splitlines() if line.startswith("Why:"))
    assert "cannot-worker-0" in why and "No such file or directory" in why and "/nonexistent/t9k-cmd" in why
    for section in ("Spec:", "Conditions:", "Replicas:", "Events:"):
        assert section in out
    assert re.search(r"cannot-worker-0\s+Failed\s+0\s+128\s+ContainerCannotRun", out), out


def test_describe_says_why_a_job_is_pending(detached, tmp_path: Path) -> None:
    gate = tmp_path / "never"
    waiting = {"name": "prep", "image": "local", "command": py(_gated(gate, "prep", "prepared"))}
    spec = template(py("print('main')"))
    spec["spec"]["initContainers"] = [waiting]
    detached(
        job("GenericJob", "pending", {"replicaSpecs": [{"type": "worker", "replicas": 1, "template": spec}]})
    )

    def why() -> str | None:
        out = cli(tmp_path, "describe", "gj", "pending").stdout
        line = next((x for x in out.splitlines() if x.startswith("Why:")), "")
        return line if "PodInitializing" in line else None

    assert "pending-worker-0: Pending" in wait_until(why, "describe to say the replica initializes", LIMIT)
    assert cli(tmp_path, "delete", "gj", "pending").returncode == 0


def test_run_detached_from_standard_input(tmp_path: Path, detached) -> None:
    manifest = _generic("piped", "print('from stdin')", replicas=1)
    done = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "run", "-d", "-"],
        input=yaml.safe_dump(manifest),
        capture_output=True,
        text=True,
        timeout=LIMIT,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert cli(tmp_path, "wait", "gj", "piped", "--for", "Succeeded", "--timeout", "90").returncode == 0
    assert cli(tmp_path, "logs", "gj", "piped").stdout == "[worker-0] from stdin\n"


def test_run_detached_that_cannot_run_fails_at_once(tmp_path: Path) -> None:
    manifest = _generic("huge", "print(1)", replicas=1000)
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(manifest))
    done = cli(tmp_path, "run", "-d", str(path))
    assert done.returncode == 2 and "at most" in done.stderr
    assert not (tmp_path / "t9k-runs").exists() or not any((tmp_path / "t9k-runs").iterdir())


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["get", "tfjob"], 2, "unknown kind 'tfjob'"),
        (["wait", "gj", "x", "--for=Done"], 2, "--for='Done' is not accepted"),
        (["wait", "gj", "x", "--for=Succeeded", "--timeout", "5 minutes"], 2, "bad duration"),
        (["logs", "gj", "x"], 1, "no local run of genericjob 'x' in"),
        (["delete", "PyTorchTrainingJobs", "x"], 1, "no local run of pytorchtrainingjob 'x' in"),
        (["describe", "caij", "x", "--run-dir", "nowhere"], 1, "nowhere is not a local run directory"),
    ],
)
def test_errors_are_one_line_with_kubectl_exit_codes(
    tmp_path: Path, args: list[str], code: int, says: str
) -> None:
    done = cli(tmp_path, *args)
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.strip().count("\n") == 0, done.stderr
    assert says in done.stderr
    if code == 1:
        assert str(tmp_path) in done.stderr or "nowhere" in done.stderr


def test_get_without_runs_says_so(tmp_path: Path) -> None:
    done = cli(tmp_path, "get")
    assert done.returncode == 0 and done.stdout == "" and "No local runs found" in done.stderr


def test_durations_and_kinds() -> None:
    from t9k_jobs.errors import UsageError
    from t9k_jobs.sdk.arguments import parse_duration, resolve_kind

    assert parse_duration("30s") == 30 and parse_duration("5m") == 300 and parse_duration("1h30m") == 5400
    assert parse_duration("90") == 90 and parse_duration("500ms") == 0.5 and parse_duration("1.5s") == 1.5
    for bad in ("", "5x", "-1", "1h 2m", "s"):
        with pytest.raises(UsageError):
            parse_duration(bad)
    assert resolve_kind("gj") == "GenericJob" and resolve_kind("PyTorchTrainingJobs") == "PyTorchTrainingJob"
    assert resolve_kind("deepspeedjob") == "DeepSpeedJob" and resolve_kind("CAIJ") == "ColossalAIJob"
    assert resolve_kind("genericjobs.batch.tensorstack.dev") == "GenericJob"


def test_delete_at_once_after_run_d_stops_the_new_run_not_an_older_one(tmp_path: Path) -> None:
    """Issue 33: ``delete`` right after ``run -d``, with an older stopped run of the same job in the
    runs dir, stops the run just started (``run -d`` returns once its runtime is proven), never
    the older one, and says so."""
    gate = tmp_path / "go"
    manifest = tmp_path / "again.yaml"
    manifest.write_text(yaml.safe_dump(_generic("again", _gated(gate, "up", "down"), replicas=1)))
    assert cli(tmp_path, "run", "-d", str(manifest)).returncode == 0
    first = cli(tmp_path, "delete", "gj", "again")
    assert first.returncode == 0, first.stderr
    started = cli(tmp_path, "run", "-d", str(manifest))
    assert started.returncode == 0, started.stderr
    new_dir = re.search(r"run dir (\S+)", started.stdout).group(1)
    done = cli(tmp_path, "delete", "gj", "again")  # at once
    assert done.returncode == 0 and f"logs and status kept in {new_dir}" in done.stdout, done.stdout + done.stderr
    assert "stopped in" in done.stdout, done.stdout
    rows = cli(tmp_path, "get")
    assert rows.returncode == 0 and "Stopped" in rows.stdout and "Running" not in rows.stdout, rows.stdout
