"""Run ``t9k-jobs operator`` as a real process for the cluster tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ConditionTimeout, wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class OperatorProcess:
    """One operator process; its output goes to ``log``. Not started until :meth:`start`."""

    def __init__(self, kubeconfig: str | Path, log: Path, *args: str) -> None:
        self.kubeconfig = str(kubeconfig)
        self.log = log
        self.args = list(args)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_ready: bool = True) -> OperatorProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        out = open(self.log, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "t9k_jobs.cli",
                "operator",
                "--kubeconfig",
                self.kubeconfig,
                "--metrics-bind-address",
                f"127.0.0.1:{self.port}",
                *self.args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        out.close()
        if wait_ready:
            self.wait_ready()
        return self

    def http(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_ready(self, timeout: float = 60) -> str:
        """The body of /readyz once it answers 200; fail at once, with the log, if the operator exits."""
        proc = self.proc
        assert proc is not None
        last = ""

        def ready() -> tuple[str] | None:
            nonlocal last
            if proc.poll() is not None:
                raise AssertionError(f"operator exited with {proc.returncode}:\n{self.tail()}")
            try:
                code, last = self.http("/readyz")
            except OSError as exc:
                last = str(exc)
                return None
            return (last,) if code == 200 else None  # a tuple: an empty body is ready too

        try:
            (body,) = wait_until(ready, "the operator's /readyz", timeout)
        except ConditionTimeout:
            raise AssertionError(f"operator not ready after {timeout} s ({last}):\n{self.tail()}") from None
        return body

    def leading(self) -> bool:
        """Whether /readyz answers ready as the leader (not as a standby)."""
        code, body = self.http("/readyz")
        return code == 200 and "leader" in body and "standby" not in body

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        _, text = self.http("/metrics")
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(30)

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)
