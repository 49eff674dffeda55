"""The dashboard over a cluster, in a real browser (Debian's headless chromium through Selenium):
a GenericJob's page on the real node shows its pods' node, their Events, the timeline from the
pods' own times, its logs and its loss plot; a job that cannot start says why in describe's words.

Real pods only: nothing here writes a status. The dashboard is a real ``t9k-jobs dashboard``
process with the CLI's cluster options (``--kubeconfig``, ``-n``).
"""

from __future__ import annotations

import os
from typing import Any

from t9k_jobs import Client
from tests import helpers
from tests.dashboard.conftest import Dashboard, browser  # noqa: F401 - the browser fixture
from tests.dashboard.test_browser import js, page_state
from tests.helpers import replica, template, wait_until

from .conftest import TRAINING_IMAGE

LIMIT = 600.0  # seconds: real pods on a loaded 2-core machine


def _job(name: str, replicas: int, command: list[str], **container: Any) -> dict[str, Any]:
    pod = template(command, name="main", image=TRAINING_IMAGE, **container)
    return helpers.job("GenericJob", name, {"replicaSpecs": [replica("worker", replicas, pod, restartPolicy={"policy": "Never"})]})


def test_a_cluster_jobs_page_shows_its_pods_node_events_and_why(node, namespace: str, browser) -> None:  # noqa: F811
    code = "print('epoch 1/2 loss 0.5000 test_accuracy 0.9000', flush=True)\nprint('epoch 2/2 loss 0.2500 test_accuracy 0.9500', flush=True)"
    with Client.cluster(node.kubeconfig, namespace=namespace) as client:
        client.create(_job("shown", 2, ["python", "-c", code]))
        client.create(_job("no-room", 1, ["true"], resources={"requests": {"cpu": "64"}}))
        env = {**os.environ, "KUBECONFIG": str(node.kubeconfig)}
        board = Dashboard("--kubeconfig", str(node.kubeconfig), "-n", namespace, env=env)
        try:
            board.open_in(browser, f"/job/GenericJob/shown?namespace={namespace}")

            def done(state: dict[str, Any]) -> bool:
                return state["phase"] == "Succeeded" and len(state["replicas"]) == 2

            state = wait_until(lambda: (lambda s: s if done(s) else None)(page_state(browser)), "shown Succeeded", LIMIT, interval=0.5)
            assert set(state["replicas"].values()) == {"Succeeded"}
            assert all(n.startswith("t9k-node") for n in state["nodes"]), state["nodes"]

            events = wait_until(
                lambda: js(
                    browser,
                    "return [...document.querySelectorAll('#events tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent))",
                ),
                "the job's events",
                LIMIT,
            )
            pods = {row[3] for row in events}
            assert {"pod/shown-worker-0", "pod/shown-worker-1"} <= pods, events
            assert any(row[2] == "Scheduled" and row[3] == "pod/shown-worker-0" for row in events), events
            timeline = js(browser, "return document.getElementById('timeline').textContent")
            assert "scheduled on t9k-node" in timeline and "ended: Completed, exit code 0" in timeline

            log = wait_until(
                lambda: (lambda s: s["log"] if len(s["log"]) >= 4 else None)(page_state(browser)), "the merged log", LIMIT
            )
            assert "[worker-1] epoch 2/2 loss 0.2500 test_accuracy 0.9500" in log
            plot = wait_until(
                lambda: js(browser, "const p = window.t9kDashboard.plot; return p && p.data[0].length === 2 ? p.data : null"),
                "the plot",
                LIMIT,
            )
            assert plot[0] == [1, 2] and [0.5, 0.25] in plot[1:]

            described = client.describe("gj", "no-room")
            why = wait_until(
                lambda: next((line.split(":", 1)[1].strip() for line in client.describe("gj", "no-room").splitlines() if line.startswith("Why:") and "Unschedulable" in line), None),
                "describe to say why no-room waits",
                LIMIT,
            )
            assert "Insufficient cpu" in why, described
            board.open_in(browser, f"/job/GenericJob/no-room?namespace={namespace}")
            shown = wait_until(
                lambda: (lambda s: s["why"] if s["why"] and "Unschedulable" in s["why"] else None)(page_state(browser)),
                "the page to say why",
                LIMIT,
            )
            assert shown == why

            board.open_in(browser)
            rows = wait_until(
                lambda: js(browser, "return [...document.querySelectorAll('#jobs tbody tr')].map((tr) => tr.dataset.name)"),
                "the list",
                LIMIT,
            )
            assert sorted(rows) == ["no-room", "shown"]
            assert js(browser, "return document.querySelector('#jobs tbody tr .ns').textContent") == namespace
        finally:
            board.stop()


def test_twenty_closed_log_pages_of_a_running_cluster_job_leave_no_socket(node, namespace: str) -> None:
    """Issue 30: on a cluster, twenty pages following a quiet running job's logs that go away
    leave no thread, file handle or socket to the API server behind (before, 44 threads and 92
    handles were still there minutes later)."""
    from tests.dashboard.test_shared import _counts, _open_streams, _settled

    code = "import time\nprint('started', flush=True)\ntime.sleep(3600)"
    with Client.cluster(node.kubeconfig, namespace=namespace) as client:
        client.create(_job("quiet", 1, ["python", "-c", code]))
        wait_until(lambda: client.get("gj", "quiet").status and client.get("gj", "quiet").status.phase == "Running",
                   "quiet Running", LIMIT, interval=1.0)
        board = Dashboard("--kubeconfig", str(node.kubeconfig), "-n", namespace)
        try:
            pid = board.proc.pid
            paths = [f"/api/job/gj/quiet/logs/follow?namespace={namespace}"] * 10 + [
                f"/api/job/gj/quiet/metrics/follow?namespace={namespace}"] * 5 + [
                f"/api/job/gj/quiet/events?namespace={namespace}"] * 5
            for conn in _open_streams(board, paths):  # once, so that pools grow to what 20 pages need
                conn.close()
            baseline = wait_until(lambda: _settled(pid), "the dashboard to settle", LIMIT, interval=0.5)
            opened = _open_streams(board, paths)
            during = _counts(pid)
            assert during[1] >= baseline[1] + 20, (during, baseline)
            for conn in opened:
                conn.close()

            def back() -> tuple[int, int] | None:
                now = _counts(pid)
                return now if now[0] <= baseline[0] and now[1] <= baseline[1] else None

            wait_until(back, f"threads and handles back to {baseline} (during {during})", 60, interval=0.5)
        finally:
            board.stop()
            client.delete("gj", "quiet")
