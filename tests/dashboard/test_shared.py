"""The dashboard on a machine other people use (issue 30): only who holds its token sees or does
anything (another account of the machine, ``nobody``, tried for real); pages that go away leave
nothing behind (threads, file handles, counted on the real process); one slow action holds up no
other request; Ctrl-C ends it with pages open, without a traceback.

Every dashboard here is a real ``t9k-jobs dashboard`` process over real local runs.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from t9k_jobs.dashboard.server import READ_POOL, READ_THREADS
from t9k_jobs.sdk.local_aio import ACTING_POOL, ACTING_THREADS
from tests.dashboard.conftest import LIMIT, Dashboard, Runs, gated, generic
from tests.helpers import wait_until

SYSTEM_PYTHON = "/usr/bin/python3"


def _as_nobody(script: str, *args: str) -> Any:
    """Run ``script`` with the system's Python as ``nobody`` (uid 65534, no groups): another
    account of this machine. Its last line of output, as JSON."""
    if os.geteuid() != 0:
        pytest.fail("this test switches to another account (nobody): run it as root, as CI does")
    if not Path(SYSTEM_PYTHON).exists():
        pytest.fail(f"{SYSTEM_PYTHON} (Debian's python3) is needed to act as another user")
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", SYSTEM_PYTHON, "-c", script, *args],
        capture_output=True, text=True, timeout=LIMIT, cwd="/", check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


NOBODY_SCRIPT = """
import json, sys, urllib.request, urllib.error
base, token, paths = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {}
def ask(path, method="GET", headers=None):
    request = urllib.request.Request(base + path, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read(2000).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(2000).decode("utf-8", "replace")
for path in paths:
    out[path] = ask(path)
out["POST delete"] = ask("/api/job/gj/shared/actions/delete", "POST", {"X-T9k-Dashboard": "1"})
if token:
    out["with the token"] = ask("/api/jobs", headers={"Authorization": "Bearer " + token})
print(json.dumps(out))
"""


def test_another_account_of_the_machine_sees_nothing_and_stops_nothing(runs: Runs, dashboard: Any, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    runs.start(generic("shared", gated(gate, "secret-line-in-the-log", "done"), replicas=1))
    wait_until(lambda: runs.phase("shared") == "Running", "the run to be Running", LIMIT)
    board = dashboard("--allow-actions")
    paths = ["/", "/job/gj/shared", "/api/jobs", "/api/job/gj/shared", "/api/job/gj/shared/logs/page",
             "/api/job/gj/shared/logs/download", "/api/job/gj/shared/events"]
    seen = _as_nobody(NOBODY_SCRIPT, board.url, "", json.dumps(paths))
    for what, (status, body) in seen.items():
        assert status == 401, (what, status, body)
        assert "shared" not in body and "secret-line" not in body, (what, body)
    assert runs.phase("shared") == "Running"
    # The token is what makes the difference: whoever holds it is let in (here, nobody again).
    seen = _as_nobody(NOBODY_SCRIPT, board.url, board.token, "[]")
    status, body = seen["with the token"]
    assert status == 200 and "shared" in body
    gate.touch()
    wait_until(lambda: runs.phase("shared") == "Succeeded", "the run to succeed", LIMIT)


# ----------------------------------------------------------------------------- nothing left behind


#: The dashboard's bounded thread pools (their system names) and their most threads: they grow to
#: what the load has needed so far and stay (asyncio's default executor does the same); any other
#: thread is counted.
POOLS = {READ_POOL: READ_THREADS, ACTING_POOL: ACTING_THREADS}


def _counts(pid: int) -> tuple[int, int]:
    """``(threads outside the bounded pools, open file descriptors)`` of process ``pid``."""
    return sum(1 for name in _threads(pid) if name not in POOLS), len(os.listdir(f"/proc/{pid}/fd"))


def _pools(pid: int) -> dict[str, int]:
    """How many threads each bounded pool of process ``pid`` has now."""
    names = _threads(pid)
    return {pool: names.count(pool) for pool in POOLS}


def _fds(pid: int) -> list[str]:
    """What each open file descriptor of process ``pid`` is (for a failure's message)."""
    out = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            out.append(f"{fd}:{os.readlink(f'/proc/{pid}/fd/{fd}')}")
        except OSError:
            pass
    return out


def _threads(pid: int) -> list[str]:
    """The names of process ``pid``'s threads (for a failure's message)."""
    out = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            out.append(Path(f"/proc/{pid}/task/{task}/comm").read_text().strip())
        except OSError:
            pass
    return sorted(out)


def _connections(pid: int) -> str:
    """The TCP connections of process ``pid`` with their states (``ss``), for a failure's message."""
    out = subprocess.run(["ss", "-tanp"], capture_output=True, text=True, check=False).stdout
    return "\n".join(line for line in out.splitlines() if f"pid={pid}," in line)


def _open_streams(board: Dashboard, paths: list[str]) -> list[http.client.HTTPConnection]:
    """Open an event stream on each of ``paths`` and read its first bytes (it is live)."""
    where = urlsplit(board.url)
    opened = []
    for path in paths:
        conn = http.client.HTTPConnection(where.hostname, where.port, timeout=LIMIT)
        conn.request("GET", path, headers={"Authorization": f"Bearer {board.token}", "Accept": "text/event-stream"})
        answer = conn.getresponse()
        assert answer.status == 200, (path, answer.status)
        assert answer.fp.read1(1), path
        opened.append(conn)
    return opened


def test_thirty_closed_pages_leave_no_thread_and_no_file_handle(runs: Runs, dashboard: Any, tmp_path: Path) -> None:
    """Pages of a quiet running job (nothing written for as long as they are open) that go away:
    their followed logs, metric readers and job streams end, and the dashboard's threads and file
    handles come back to what they were; its bounded pools stay within their bounds (they keep the
    threads they grew, as a thread pool does, so they are counted apart)."""
    gate = tmp_path / "go"
    runs.start(generic("quiet", gated(gate, "one line, then quiet", "end"), replicas=2))
    wait_until(lambda: runs.phase("quiet") == "Running", "the run to be Running", LIMIT)
    board = dashboard()
    pid = board.proc.pid
    streams = ["/api/job/gj/quiet/logs/follow", "/api/job/gj/quiet/logs/follow?type=worker&index=1",
               "/api/job/gj/quiet/events", "/api/job/gj/quiet/metrics/follow"]
    paths = [streams[i % len(streams)] for i in range(30)]

    # Once, to let the dashboard's pools grow to what thirty pages need.
    for conn in _open_streams(board, paths):
        conn.close()
    baseline = wait_until(lambda: _settled(pid), "the dashboard to settle", LIMIT, interval=0.5)

    opened = _open_streams(board, paths)
    during = _counts(pid)
    assert during[1] >= baseline[1] + 30, (during, baseline)  # thirty connections: the count sees them
    assert _pools(pid)[READ_POOL] >= 1, _threads(pid)  # the streams read in the named pool (so it is told apart)
    for conn in opened:
        conn.close()
    def back() -> tuple[int, int] | None:
        now = _counts(pid)
        return now if now[0] <= baseline[0] and now[1] <= baseline[1] else None

    try:
        after = wait_until(back, f"threads and file handles back to {baseline} (during: {during})", 60, interval=0.5)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; now {_counts(pid)}; threads: {_threads(pid)}; open: {_fds(pid)}; connections: {_connections(pid)}"
        ) from None
    assert after[0] <= baseline[0] and after[1] <= baseline[1]
    assert all(_pools(pid)[pool] <= most for pool, most in POOLS.items()), _threads(pid)
    gate.touch()


def test_a_metrics_stream_says_its_points_at_once_even_none(runs: Runs, dashboard: Any, tmp_path: Path) -> None:
    """A running job that printed no metric yet: the first thing its metrics stream sends is the
    ``points`` event, empty (not a keepalive comment 15 s later), so the page says "no metrics
    yet" as it opens."""
    gate = tmp_path / "go"
    runs.start(generic("nometrics", gated(gate, "no metric here", "end"), replicas=1))
    wait_until(lambda: runs.phase("nometrics") == "Running", "the run to be Running", LIMIT)
    board = dashboard()
    where = urlsplit(board.url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=LIMIT)
    try:
        conn.request("GET", "/api/job/gj/nometrics/metrics/follow",
                     headers={"Authorization": f"Bearer {board.token}", "Accept": "text/event-stream"})
        answer = conn.getresponse()
        assert answer.status == 200
        first = b""
        while b"\n\n" not in first:
            chunk = answer.read1(4096)  # de-chunked
            assert chunk, first
            first += chunk
    finally:
        conn.close()
        gate.touch()
    message = first.split(b"\n\n")[0].decode()
    assert message.startswith("event: points\ndata: "), message
    assert json.loads(message.split("data: ", 1)[1]) == {"points": [], "dropped": 0}


def _settled(pid: int) -> tuple[int, int] | None:
    """The counts once they stopped falling for a second."""
    first = _counts(pid)
    time.sleep(1.0)
    second = _counts(pid)
    return second if second == first else None


# ----------------------------------------------------------------------------- no stalls


def test_a_slow_delete_holds_up_no_other_request(runs: Runs, dashboard: Any, tmp_path: Path) -> None:
    """A replica that ignores SIGTERM takes its whole grace period to stop: the delete answers at
    once that it runs (202), every other request is answered meanwhile, and its outcome comes."""
    code = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ignoring SIGTERM', flush=True)\nwhile True:\n    time.sleep(0.1)\n")
    manifest = generic("stubborn", code, replicas=1)
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["terminationGracePeriodSeconds"] = 20
    runs.start(manifest)
    wait_until(lambda: runs.phase("stubborn") == "Running", "the run to be Running", LIMIT)
    board = dashboard("--allow-actions")
    where = urlsplit(board.url)
    headers = {"Authorization": f"Bearer {board.token}", "X-T9k-Dashboard": "1"}
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=LIMIT)
    conn.request("POST", "/api/job/gj/stubborn/actions/delete", headers=headers)
    answer = conn.getresponse()
    started = json.loads(answer.read())
    assert answer.status == 202 and started["state"] == "running", started
    # While the delete waits for the grace period, the list, the job and its log are answered.
    for path in ("/api/jobs", "/api/job/gj/stubborn", "/api/job/gj/stubborn/logs/page"):
        with board.get(path) as reply:
            assert reply.status == 200
    with board.get(f"/api/actions/{started['action']}") as reply:
        assert json.loads(reply.read())["state"] == "running"  # all of that came before the delete ended
    done = wait_until(
        lambda: (d := json.loads(board.get(f"/api/actions/{started['action']}").read()))["state"] != "running" and d,
        "the delete to end", LIMIT,
    )
    assert done["state"] == "done" and "logs and status kept" in done["message"], done
    assert runs.phase("stubborn") in ("Stopped", "Failed")


def test_ctrl_c_ends_it_with_pages_open_and_no_traceback(runs: Runs, dashboard: Any, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    runs.start(generic("open", gated(gate, "up", "down"), replicas=1))
    wait_until(lambda: runs.phase("open") == "Running", "the run to be Running", LIMIT)
    board = dashboard()
    opened = _open_streams(board, ["/api/jobs/events", "/api/job/gj/open/events", "/api/job/gj/open/logs/follow",
                                   "/api/job/gj/open/metrics/follow"] * 2)
    board.proc.send_signal(signal.SIGINT)
    board.proc.wait(LIMIT)
    output = "".join(board.output)
    assert board.proc.returncode == 0 and "Traceback" not in output, output
    for conn in opened:
        conn.close()
    gate.touch()


@pytest.fixture(autouse=True)
def _setpriv() -> None:
    if shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is needed to act as another user")
