"""A local run's TensorBoard: ``spec.tensorboardSpec`` served on a loopback port while the run runs.

On a cluster the operator creates a ``TensorBoard`` object and T9k's TensorBoard controller serves
it, reading the ``trainingLogFilesets`` (``t9k://pvc/CLAIM/PATH``) from the claims (reference §1.9).
A local run serves the same folders, found through ``--volume CLAIM=DIR``
(:func:`t9k_jobs.local.volumes.tensorboard_folders`), with the ``tensorboard`` package (the
optional extra ``tensorboard``) on ``127.0.0.1`` and a free port, from when the engine creates the
TensorBoard until the run ends. Without the package the job runs and a Warning says what to install.

TensorBoard has no login, and every account of this machine reaches a loopback port. So it serves
under a path of 128 random bits (its ``--path_prefix``; every other path answers 404), a
capability URL as the dashboard's token is: only who holds the URL (the run's user: the terminal,
``describe``, the run dir, which is 0700) reads the run's summaries. The prefix reaches TensorBoard
through its environment (readable by its user and root only), never its command line, which any
account reads in ``ps``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path

from .ownership import write_atomic
from .rundir import RunDir

#: What a run without the package says to install.
INSTALL_HINT = (
    "the tensorboard package is not installed where t9k-jobs runs: install the extra "
    "(pip install 't9k-jobs[tensorboard]', or bash scripts/bootstrap.sh examples,tensorboard)"
)
#: Seconds the TensorBoard gets to end after SIGTERM before SIGKILL.
STOP_GRACE = 5.0
#: The variable that hands TensorBoard its secret path prefix (not on its command line).
PREFIX_ENV = "T9K_JOBS_TENSORBOARD_PREFIX"
#: What runs TensorBoard: its own ``tensorboard.main`` with the prefix taken from the environment.
_LAUNCH = (
    "import os, sys\n"
    "from tensorboard import main\n"
    f"sys.argv = ['tensorboard', *sys.argv[1:], '--path_prefix', os.environ.pop({PREFIX_ENV!r})]\n"
    "main.run_main()\n"
)


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
        self.prefix = "/" + secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None
        self._ready = False

    @property
    def url(self) -> str:
        """Where it answers: the loopback port and the secret prefix (the module docstring)."""
        return f"http://127.0.0.1:{self.port}{self.prefix}/"

    def argv(self) -> list[str]:
        """TensorBoard's command line: each folder a run named after its last two path parts (one
        folder: ``--logdir``), loopback only, the Python loader (no data-server binary to start).
        The path prefix is not in it: :meth:`start` passes it in the environment."""
        if len(self.folders) == 1:
            logdir = ["--logdir", str(self.folders[0])]
        else:
            names = ["/".join(f.parts[-2:]).replace(",", "_").replace(":", "_") for f in self.folders]
            logdir = ["--logdir_spec", ",".join(f"{n}:{f}" for n, f in zip(names, self.folders))]
        return [
            sys.executable, "-c", _LAUNCH, *logdir,
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
                env={**self.env, PREFIX_ENV: self.prefix},
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
            with contextlib.suppress(OSError):  # the run dir is 0700; the file is the user's alone too
                write_atomic(RunDir(self.run_dir).tensorboard_url, self.url + "\n", mode=0o600)
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
