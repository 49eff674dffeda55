"""The dashboard's tests: real local runs (detached, through the SDK), the dashboard as a real
``t9k-jobs dashboard`` process, and Debian's headless chromium driven by Selenium.

Nothing here sleeps for a fixed time: every wait is for a condition (``wait_until``, or
Selenium's ``WebDriverWait``), with limits generous enough for a loaded 2-core machine. The
browser is Debian's ``chromium`` with its ``chromium-driver`` (``scripts/test.sh`` installs both);
when they are missing the browser tests fail, saying so, rather than being skipped.
"""

from __future__ import annotations

import os
import re
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

from t9k_jobs import Client
from tests.helpers import job, replica, template, wait_until
from tests.local.conftest import kill_run, py

#: Seconds: generous, the machine may be a loaded 2-core VM.
LIMIT = 120.0
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


@pytest.fixture(autouse=True)
def _no_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about local runs, whatever the shell exported (a set $KUBECONFIG would make
    the dashboard show a cluster)."""
    monkeypatch.delenv("KUBECONFIG", raising=False)


def generic(name: str, code: str, replicas: int = 2, **fields: Any) -> dict[str, Any]:
    """A GenericJob of ``replicas`` workers, each running ``code`` with t9k-jobs' interpreter."""
    return job("GenericJob", name, {"replicaSpecs": [replica("worker", replicas, template(py(code)), **fields)]})


def gated(gate: Path, before: str, after: str) -> str:
    """A replica's code: print ``before``, wait for the file ``gate``, print ``after``, exit 0."""
    return (
        "import pathlib, time\n"
        f"print({before!r}, flush=True)\n"
        f"while not pathlib.Path({str(gate)!r}).exists():\n"
        "    time.sleep(0.05)\n"
        f"print({after!r}, flush=True)\n"
    )


class Runs:
    """Local runs started detached under ``root/t9k-runs`` through the SDK; every one still going
    at the end is killed, with its replicas."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.runs_dir = root / "t9k-runs"
        self.client = Client.local(self.runs_dir)
        self.started: list[Path] = []

    def start(self, manifest: dict[str, Any], volumes: dict[str, str] | None = None) -> Path:
        path = self.root / f"{manifest['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(manifest, sort_keys=False))
        run_dir = self.runs_dir / f"{manifest['metadata']['name']}-{len(self.started)}"
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        started = self.client.run(str(path), run_dir=run_dir, volumes=volumes)
        run_dir = Path(started.metadata.annotations["t9k-jobs.local/run-dir"])
        self.started.append(run_dir)
        return run_dir

    def phase(self, name: str, kind: str = "gj") -> str:
        return self.client.summaries(kind, name)[0].phase

    def cleanup(self) -> None:
        for run_dir in self.started:
            kill_run(run_dir)


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Runs]:
    started = Runs(tmp_path)
    yield started
    started.cleanup()


class Dashboard:
    """``t9k-jobs dashboard --port 0 ARGS`` as a real process (``env``: its environment, default
    this one's); ``url`` is the address it printed (without its token), ``token`` the token,
    ``login`` the whole URL it printed (which trades the token for the cookie)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "t9k_jobs.cli", "dashboard", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env=env,
        )
        self.output: list[str] = []
        self.token = ""
        self.login = ""
        threading.Thread(target=self._read, daemon=True).start()
        found = wait_until(self._url, "the dashboard to print its URL", LIMIT)
        self.url = found

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)

    def _url(self) -> str | None:
        if self.proc.poll() is not None and not self.output:
            raise AssertionError(f"the dashboard exited ({self.proc.returncode}) before printing its URL")
        match = re.search(r"(http://\S+/)\?token=(\S+) ", "".join(self.output))
        if match:
            self.token = match.group(2)
            self.login = match.group(1) + "?token=" + self.token
            return match.group(1).rstrip("/")
        if self.proc.poll() is not None:
            raise AssertionError(f"the dashboard exited ({self.proc.returncode}):\n{''.join(self.output)}")
        return None

    def get(self, path: str, timeout: float = LIMIT) -> Any:
        """GET ``path`` with the token (``urllib``'s answer; raises HTTPError for 4xx/5xx)."""
        import urllib.request

        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {self.token}"})
        return urllib.request.urlopen(request, timeout=timeout)

    def open_in(self, browser: Any, path: str = "/") -> None:
        """Open ``path`` in ``browser``, logged in: the printed URL first (it sets the cookie)."""
        browser.get(self.login)
        if path != "/":
            browser.get(self.url + path)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@pytest.fixture
def dashboard(runs: Runs) -> Iterator[Callable[..., Dashboard]]:
    """Start a dashboard over ``runs`` (``dashboard("--allow-actions")``); stopped at the end."""
    started: list[Dashboard] = []

    def _start(*extra: str) -> Dashboard:
        board = Dashboard("--runs-dir", str(runs.runs_dir), *extra)
        started.append(board)
        return board

    yield _start
    for board in started:
        board.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's chromium, headless, driven by Selenium through Debian's chromedriver."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(
            f"the browser tests need Debian's chromium and chromium-driver ({', '.join(missing)} missing): "
            "apt-get install chromium chromium-driver (scripts/test.sh does it as root)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1600"):
        options.add_argument(arg)
    # A profile of its own: a browser started while another one runs (tests/node/test_dashboard.py
    # imports this fixture, which makes a second session instance) cannot share a locked profile.
    profile = Path(tempfile.mkdtemp(prefix="t9k-dashboard-chromium-"))
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(LIMIT)
    driver.set_script_timeout(LIMIT)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
