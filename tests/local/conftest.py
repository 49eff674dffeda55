"""Helpers for end-to-end tests of ``t9k-jobs run``: real CLI processes, real replicas."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ConditionTimeout, wait_until

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder every user may enter (pytest's is root's own, mode 0700), removed after."""
    path = Path(tempfile.mkdtemp(prefix="t9k-vol-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


class Run:
    """A ``t9k-jobs run`` started in the background, with its run directory."""

    def __init__(self, manifest: Path, run_dir: Path, *extra: str) -> None:
        self.manifest = manifest
        self.run_dir = run_dir
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "t9k_jobs.cli", "run", str(manifest), "--run-dir", str(run_dir), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._chunks: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._chunks.append(line)

    @property
    def output(self) -> str:
        """What the runtime printed so far (stdout and stderr), read as it comes."""
        return "".join(self._chunks)

    def wait_output(self, text: str, timeout: float = 60) -> None:
        """Wait until the runtime has printed ``text``; fail with its output on timeout."""
        try:
            wait_until(lambda: text in self.output, f"{text!r} in the output", timeout, interval=0.05)
        except ConditionTimeout as timed_out:
            pytest.fail(f"{timed_out}\noutput:\n{self.output}")

    def status(self) -> dict[str, Any]:
        path = self.run_dir / "status.yaml"
        try:
            return yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError):
            return {}

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60) -> dict[str, Any]:
        """Poll status.yaml until ``predicate(status)``; fail with the output on timeout or exit."""

        def matched() -> dict[str, Any] | None:
            exited = self.proc.poll() is not None
            status = self.status()  # read after the exit check: the last status counts
            if status and predicate(status):
                return status
            if exited:
                self.finish(5)
                pytest.fail(f"t9k-jobs exited ({self.proc.returncode}) before the status matched:\n{self.output}")
            return None

        try:
            return wait_until(matched, "the status", timeout)
        except ConditionTimeout:
            self.signal(signal.SIGKILL)
            self.finish(10)
            pytest.fail(f"timed out waiting for the status; last status {self.status()}\noutput:\n{self.output}")

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def finish(self, timeout: float = 120) -> int:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(10)
        return self.proc.returncode


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Run]]:
    runs: list[Run] = []

    def _start(manifest: dict[str, Any] | Path, *extra: str, name: str = "job.yaml") -> Run:
        if isinstance(manifest, dict):
            path = tmp_path / name
            path.write_text(yaml.safe_dump(manifest, sort_keys=False))
        else:
            path = manifest
        run = Run(path, tmp_path / f"run-{len(runs)}", *extra)
        runs.append(run)
        return run

    yield _start
    for run in runs:
        if run.proc.poll() is None:
            try:
                os.killpg(run.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            run.finish(10)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def py(code: str) -> list[str]:
    """A container command that runs ``code`` with the interpreter t9k-jobs runs in."""
    return ["python", "-c", code]


def carrying(marker: bytes, pattern: bytes = b"") -> list[int]:
    """Processes whose environment holds ``marker`` (``NAME=value``) and whose command line holds
    ``pattern``, wherever they were reparented (read from /proc, independently of the runtime)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") and (
                    pattern in Path(f"/proc/{pid}/cmdline").read_bytes()
                ):
                    found.append(int(pid))
            except OSError:
                pass
    return found


def kill_run(run_dir: Path) -> None:
    """SIGKILL a detached local run's runtime (its ``runtime.pid``) and every process that carries
    its run dir in its environment, wherever it was reparented: a test's clean-up, whatever state
    the run was left in."""
    try:
        pid = int((run_dir / "runtime.pid").read_text())
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError):
        pass
    for leftover in carrying(f"T9K_JOBS_RUN_DIR={run_dir}".encode()):
        try:
            os.kill(leftover, signal.SIGKILL)
        except OSError:
            pass
