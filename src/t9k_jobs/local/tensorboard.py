"""A local run's TensorBoard: ``spec.tensorboardSpec`` served on a loopback port while the run runs.

On a cluster the operator creates a ``TensorBoard`` object and T9k's TensorBoard controller serves
it, reading the ``trainingLogFilesets`` (``t9k://pvc/CLAIM/PATH``) from the claims (reference §1.9).
A local run serves the same folders, found through ``--volume CLAIM=DIR``
(:func:`t9k_jobs.local.volumes.tensorboard_folders`), with the ``tensorboard`` package (the
optional extra ``tensorboard``) on ``127.0.0.1`` and a free port, from when the engine creates the
TensorBoard until the run ends. Without the package the job runs and a Warning says what to install.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from .rundir import RunDir

#: What a run without the package says to install.
INSTALL_HINT = (
    "the tensorboard package is not installed where t9k-jobs runs: install the extra "
    "(pip install 't9k-jobs[tensorboard]', or bash scripts/bootstrap.sh examples,tensorboard)"
)
#: Seconds the TensorBoard gets to end after SIGTERM before SIGKILL.
STOP_GRACE = 5.0


def available() -> bool:
    """Whether the interpreter t9k-jobs runs in has TensorBoard's server (``tensorboard.main``,
    what the run starts), not just a package of that name."""
    try:
        return importlib.util.find_spec("tensorboard.main") is not None
    except ImportError:
        return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalTensorBoard:
    """One TensorBoard process over ``folders`` (this machine's), logging to
    ``<run dir>/tensorboard.log``, with ``env`` (the run's: its marker, so the run's sweeps end it
    however the runtime ends)."""

    def __init__(self, name: str, folders: list[Path], run_dir: Path, env: dict[str, str]) -> None:
        self.name = name
        self.folders = folders
        self.run_dir = run_dir
        self.env = env
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._ready = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def argv(self) -> list[str]:
        """TensorBoard's command line: each folder a run named after its last two path parts (one
        folder: ``--logdir``), loopback only, the Python loader (no data-server binary to start)."""
        if len(self.folders) == 1:
            logdir = ["--logdir", str(self.folders[0])]
        else:
            names = ["/".join(f.parts[-2:]).replace(",", "_").replace(":", "_") for f in self.folders]
            logdir = ["--logdir_spec", ",".join(f"{n}:{f}" for n, f in zip(names, self.folders))]
        return [
            sys.executable, "-m", "tensorboard.main", *logdir,
            "--host", "127.0.0.1", "--port", str(self.port), "--load_fast", "false",
        ]  # fmt: skip

    def start(self) -> None:
        """Start it (stdin closed, output to ``tensorboard.log``). Raises ``OSError``."""
        self.port = _free_port()
        with open(RunDir(self.run_dir).tensorboard_log, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
            )

    def exited(self) -> int | None:
        """Its exit code once it has ended, else None."""
        return None if self.proc is None else self.proc.poll()

    def ready(self) -> bool:
        """Whether it answers on its port (checked with a connect until it first does)."""
        if self._ready or self.proc is None or self.proc.poll() is not None:
            return self._ready and self.exited() is None
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.05)
            self._ready = s.connect_ex(("127.0.0.1", self.port)) == 0
        if self._ready:
            with contextlib.suppress(OSError):
                RunDir(self.run_dir).tensorboard_url.write_text(self.url + "\n", encoding="utf-8")
        return self._ready

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after :data:`STOP_GRACE` seconds; its URL file goes."""
        with contextlib.suppress(OSError):
            RunDir(self.run_dir).tensorboard_url.unlink()
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


__all__ = ["INSTALL_HINT", "LocalTensorBoard", "available"]
