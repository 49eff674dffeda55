"""The run directory is new and private to its run, a bad one is refused in one line, and a full
disk ends the run with the reason instead of leaving it Running for ever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import job, template, wait_until

from .conftest import alive, carrying, kill_run, py

pytestmark = pytest.mark.e2e
QUICK = job("GenericJob", "quick", {"replicaSpecs": [
    {"type": "worker", "replicas": 1, "restartPolicy": {"policy": "Never"}, "template": template(py("print('hi')"))}]})


def cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "t9k_jobs.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def test_two_runs_started_together_get_two_directories(tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(QUICK))
    # --allow-duplicate: three runs of one job at once (without it, one runs and two are refused:
    # tests/cli/test_one_run.py).
    procs = [subprocess.Popen([sys.executable, "-m", "t9k_jobs.cli", "run", str(manifest), "--quiet", "--allow-duplicate"], cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(3)]
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, out
    dirs = sorted((tmp_path / "t9k-runs").iterdir())
    assert len(dirs) == 3, dirs
    for d in dirs:
        assert (d / "status.yaml").exists() and d.stat().st_mode & 0o777 == 0o700
        assert yaml.safe_load((d / "status.yaml").read_text())["phase"] == "Succeeded"


@pytest.mark.parametrize("kind", ["not-empty", "symlink", "file", "proc", "unwritable"])
def test_a_run_dir_that_cannot_be_its_own_is_refused(tmp_path: Path, kind: str) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(QUICK))
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "run"
    if kind == "not-empty":
        target.mkdir()
        (target / "job.log").write_text("another run's log\n")
    elif kind == "symlink":
        target.symlink_to(outside)
    elif kind == "file":
        target.write_text("x")
    elif kind == "proc":
        target = Path("/proc/self/t9k-run")
    else:
        target = Path("/sys/t9k-run")  # sysfs refuses new entries, even to root
    out = cli("run", str(manifest), "--run-dir", str(target))
    assert out.returncode == 2, out
    assert out.stderr.strip().count("\n") == 0 and "--run-dir" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert list(outside.iterdir()) == []  # nothing written through the link


def test_a_full_disk_ends_the_run_with_the_reason(tmp_path: Path) -> None:
    """The run dir on a 256 KiB tmpfs (a mount namespace of the test's own) and a replica that
    writes more: the run ends, exit 1, saying there is no space left; no replica is left."""
    if os.geteuid() != 0:
        raise AssertionError("this test needs root (a tmpfs in a mount namespace of its own); scripts/test.sh runs as root")
    chatty = "import sys, time\nwhile True:\n    sys.stdout.write('x' * 4096 + '\\n'); sys.stdout.flush(); time.sleep(0.001)\n"
    doc = job("GenericJob", "chatty", {"replicaSpecs": [
        {"type": "worker", "replicas": 1, "restartPolicy": {"policy": "Never"}, "template": template(py(chatty))}]})
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    small = tmp_path / "small"
    small.mkdir()
    out = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         f'mount -t tmpfs -o size=256k t9k-full {small} && "$0" -m t9k_jobs.cli run {manifest} '
         f'--quiet --run-dir {small}/run; code=$?; "$0" -m t9k_jobs.cli describe gj chatty --run-dir {small}/run; '
         'exit $code', sys.executable],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 1, out
    assert "No space left on device" in out.stderr and "Traceback" not in out.stderr, out.stderr
    # Later, describe says why it stopped, though the disk was full when it did (issue 33: it said
    # "stopped by delete, Ctrl-C or a kill").
    why = next(line for line in out.stdout.splitlines() if line.startswith("Why:"))
    assert "its runtime stopped before the job finished: the runtime stopped the run: cannot write" in why, out.stdout
    assert "No space left on device" in why, out.stdout
    assert [p for p in carrying(f"T9K_JOBS_RUN_DIR={small}/run".encode()) if alive(p)] == []


def test_run_options_are_written_and_read_whole(tmp_path: Path) -> None:
    """Issue 34: ``run -d``'s parent parses ``--gpus``, ``--volume`` and ``--python`` once and hands
    them to its runtime in ``options.json``; the runtime reads them back as they were."""
    from t9k_jobs.local.gpus import DECLARED, GpuInventory
    from t9k_jobs.local.rundir import RunDir, RunOptions

    options = RunOptions(
        manifest=tmp_path / "job.yaml",
        watch=False,
        gpus=GpuInventory.declared("0,1"),
        allow_duplicate=True,
        volumes={"data": tmp_path / "data"},
        python=sys.executable,
    )
    options.write(tmp_path)
    assert (tmp_path / RunDir.OPTIONS).stat().st_mode & 0o777 == 0o600
    back = RunOptions.read(tmp_path)
    assert back.gpus is not None and back.gpus.source == DECLARED
    assert [g.id for g in back.gpus.gpus] == ["0", "1"]
    assert (back.manifest, back.watch, back.allow_duplicate, back.volumes, back.python) == (
        tmp_path / "job.yaml", False, True, {"data": tmp_path / "data"}, sys.executable)
    RunOptions(manifest=None).write(tmp_path)  # standard input; this machine's GPUs, discovered
    back = RunOptions.read(tmp_path)
    assert (back.manifest, back.gpus, back.watch, back.volumes) == (None, None, True, {})


def test_a_detached_run_is_its_run_dir_run_by_python_m_t9k_jobs_local(tmp_path: Path) -> None:
    """Issue 34: ``run -d`` no longer starts the CLI again: the parent writes the run dir (the run's
    copy of its manifest, its options) and starts ``python -m t9k_jobs.local RUN_DIR``."""
    doc = job("GenericJob", "behind", {"replicaSpecs": [
        {"type": "worker", "replicas": 1, "restartPolicy": {"policy": "Never"},
         "template": template(py("import time; time.sleep(60)"))}]})
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    done = cli("run", "-d", str(manifest), "--gpus", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "t9k-runs").iterdir()
    try:
        runtime = int((run_dir / "runtime.pid").read_text())
        argv = Path(f"/proc/{runtime}/cmdline").read_bytes().split(b"\0")[:-1]
        assert argv[1:] == [b"-m", b"t9k_jobs.local", str(run_dir).encode()], argv
        assert yaml.safe_load((run_dir / "manifest.yaml").read_text()) == doc
        assert (run_dir / "options.json").exists() and (run_dir / "runtime.log").exists()
        assert cli("get", "gj", "behind", cwd=tmp_path).stdout.splitlines()[1].split()[1] in ("Pending", "Running")
    finally:
        kill_run(run_dir)
    wait_until(lambda: not alive(runtime), "the runtime to end", 30)


def test_a_delete_while_run_d_starts_stops_the_new_run_not_an_older_one(tmp_path: Path) -> None:
    """Issue 40: ``delete`` a moment after ``run -d`` (before ``run -d`` returned) found only the
    older, stopped run of the name, said "nothing to stop" and exited 0 while the new run went on.
    Now a run that ``run -d`` is starting (``starting.json``) is waited for, and it is the one
    stopped."""
    doc = job("GenericJob", "racer", {"replicaSpecs": [
        {"type": "worker", "replicas": 1, "restartPolicy": {"policy": "Never"},
         "template": template(py("import time; time.sleep(120)"))}]})
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(doc))
    first = cli("run", "-d", str(manifest), "--gpus", "none", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert cli("delete", "gj", "racer", cwd=tmp_path).returncode == 0  # an older run, stopped
    starting = subprocess.Popen([sys.executable, "-m", "t9k_jobs.cli", "run", "-d", str(manifest), "--gpus", "none"],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        marker = wait_until(lambda: next((tmp_path / "t9k-runs").glob("*/starting.json"), None),
                            "run -d to start its run", 60, interval=0.01)  # fmt: skip
        deleted = cli("delete", "gj", "racer", cwd=tmp_path)
        out, err = starting.communicate(timeout=120)
        assert starting.returncode == 0, out + err
        assert deleted.returncode == 0, deleted.stdout + deleted.stderr
        assert "nothing to stop" not in deleted.stdout and "stopping GenericJob racer" in deleted.stdout, deleted.stdout
        assert f"logs and status kept in {marker.parent}" in deleted.stdout, deleted.stdout
        assert not marker.exists()
        runtime = int((marker.parent / "runtime.pid").read_text())
        wait_until(lambda: not alive(runtime), "the new run's runtime to end", 60)
    finally:
        if starting.poll() is None:
            starting.kill()
        for run_dir in (tmp_path / "t9k-runs").iterdir():
            kill_run(run_dir)
