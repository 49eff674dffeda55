"""The dashboard against the real API server (issue 30): its namespace is a boundary; what it costs
the API server does not grow with its open pages (informers, not a read per page per second); an
API server that accepts connections and never answers costs each page its own request timeout once.

The dashboards are real ``t9k-jobs dashboard`` processes; the jobs are written to the API server as
a user would create them (no operator runs: the tests are about what the dashboard reads and does).
"""

from __future__ import annotations

import http.client
import json
import re
import secrets
import signal
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests import helpers
from tests.dashboard.conftest import Dashboard
from tests.helpers import replica, template, wait_until

from .conftest import started_plane
from .kube import Kube, job_path

LIMIT = 90.0


def generic(name: str) -> dict[str, Any]:
    return helpers.job("GenericJob", name, {"replicaSpecs": [replica("worker", 1, template(["true"], image="busybox"))]})


def put(kube: Kube, ns: str, name: str) -> None:
    body = generic(name)
    body["metadata"]["namespace"] = ns
    kube.create(job_path(ns, "GenericJob"), body)


@pytest.fixture
def other_namespace(kube: Kube) -> Iterator[str]:
    name = f"t-{secrets.token_hex(4)}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kube.delete(f"/api/v1/namespaces/{name}")


def ask(board: Dashboard, path: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(
        board.url + path, method=method, headers={"Authorization": f"Bearer {board.token}", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=LIMIT) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def dashboards(control_plane: Any) -> Iterator[Any]:
    started: list[Dashboard] = []

    def start(*args: str) -> Dashboard:
        board = Dashboard("--kubeconfig", str(control_plane.kubeconfig), *args)
        started.append(board)
        return board

    yield start
    for board in started:
        board.stop()


def test_its_namespace_is_a_boundary(kube: Kube, namespace: str, other_namespace: str, dashboards: Any) -> None:
    put(kube, namespace, "mine")
    put(kube, other_namespace, "theirs")
    board = dashboards("-n", namespace, "--allow-actions")
    status, body = ask(board, "/api/jobs")
    assert status == 200 and [j["name"] for j in json.loads(body)["jobs"]] == ["mine"]
    assert ask(board, f"/api/job/gj/mine?namespace={namespace}")[0] == 200
    for path in (f"/api/job/gj/theirs?namespace={other_namespace}", f"/job/gj/theirs?namespace={other_namespace}",
                 f"/api/job/gj/theirs/logs/page?namespace={other_namespace}",
                 f"/api/job/gj/theirs/events?namespace={other_namespace}"):
        status, body = ask(board, path)
        assert status == 404 and "busybox" not in body and "not found" in body, (path, body)
    status, body = ask(board, f"/api/job/gj/theirs/actions/delete?namespace={other_namespace}", "POST",
                       {"X-T9k-Dashboard": "1"})
    assert status == 404, body
    assert kube.exists(job_path(other_namespace, "GenericJob", "theirs"))
    # -A opens every namespace the kubeconfig's user may read.
    every = dashboards("-A")
    status, body = ask(every, "/api/jobs")
    assert {(j["namespace"], j["name"]) for j in json.loads(body)["jobs"]} >= {(namespace, "mine"), (other_namespace, "theirs")}
    assert ask(every, f"/api/job/gj/theirs?namespace={other_namespace}")[0] == 200


def _apiserver_reads(plane: Any) -> int:
    """The API server's count of GET and LIST requests for jobs, pods and events so far."""
    context = ssl.create_default_context(cafile=str(plane.ca_file))
    request = urllib.request.Request(plane.server + "/metrics", headers={"Authorization": f"Bearer {plane.token}"})
    with urllib.request.urlopen(request, timeout=LIMIT, context=context) as answer:
        text = answer.read().decode()
    total = 0
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        if labels.get("verb") in ("GET", "LIST") and labels.get("resource") in (
            "genericjobs", "pytorchtrainingjobs", "deepspeedjobs", "colossalaijobs", "pods", "events"
        ):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def _open_streams(board: Dashboard, paths: list[str]) -> list[http.client.HTTPConnection]:
    where = urlsplit(board.url)
    opened = []
    for path in paths:
        conn = http.client.HTTPConnection(where.hostname, where.port, timeout=LIMIT)
        conn.request("GET", path, headers={"Authorization": f"Bearer {board.token}"})
        answer = conn.getresponse()
        assert answer.status == 200, (path, answer.status, answer.read())
        assert answer.fp.read1(1), path
        opened.append(conn)
    return opened


@pytest.fixture
def own_plane(tmp_path: Path) -> Iterator[Any]:
    """An API server of this test's own: the session's may hold an operator another module started,
    whose reads the API server's counters would add to the dashboard's."""
    yield from started_plane(tmp_path / "plane")


def test_twenty_open_pages_cost_the_api_server_no_reads(own_plane: Any) -> None:
    """The dashboard watches (one informer per resource) and its pages read from its caches: with
    twenty job pages and the list open, the API server sees no more GET or LIST requests than with
    none (before, each page read its job, pods and Events once a second)."""
    control_plane, kube, namespace = own_plane, Kube(own_plane.kubeconfig), "team"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for i in range(5):
        put(kube, namespace, f"job-{i}")
    board = Dashboard("--kubeconfig", str(own_plane.kubeconfig), "-n", namespace)
    try:
        assert ask(board, "/api/jobs")[0] == 200  # the informers have listed
        pages = [f"/api/job/gj/job-{i % 5}/events?namespace={namespace}" for i in range(20)] + ["/api/jobs/events"] * 2
        opened = _open_streams(board, pages)
        try:
            before = _apiserver_reads(control_plane)
            # Something changes, so that every page has something to show: each job's status, twice.
            for rounds in range(2):
                for i in range(5):
                    path = job_path(namespace, "GenericJob", f"job-{i}")
                    obj = kube.get(path)
                    obj["status"] = {"phase": "Running" if rounds == 0 else "Succeeded"}
                    kube.replace_status(path, obj)
            wait_until(lambda: json.loads(ask(board, "/api/jobs")[1])["jobs"][0]["phase"] == "Succeeded",
                       "the dashboard to see the change", LIMIT)
            time.sleep(3)  # pages open over a few seconds of their polling interval (1 s)
            after = _apiserver_reads(control_plane)
        finally:
            for conn in opened:
                conn.close()
    finally:
        board.stop()
    # Our own GET of /api/jobs above reads the cache too; only the statuses we wrote were GETs.
    assert after - before <= 10 + 2, (before, after)


def test_a_silent_api_server_costs_each_page_its_own_timeout(tmp_path: Path, dashboards: Any, control_plane: Any) -> None:
    """An API server that accepts connections and never answers: five pages asked at once are
    answered (saying so) after about one request timeout, not five; Ctrl-C then ends it cleanly."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = silent.accept()
                held.append(conn)  # accepted, never answered
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "silent",
        "clusters": [{"name": "silent", "cluster": {"server": f"https://127.0.0.1:{silent.getsockname()[1]}",
                                                     "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "u", "namespace": "default"}}],
    }))
    board = Dashboard("--kubeconfig", str(config), "--request-timeout", "4s")
    try:
        answers: list[tuple[int, str]] = []
        started = time.monotonic()
        threads = [threading.Thread(target=lambda: answers.append(ask(board, "/api/jobs"))) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(LIMIT)
        elapsed = time.monotonic() - started
        assert len(answers) == 5
        for status, body in answers:
            assert status == 502 and "127.0.0.1" in body, body
        assert elapsed < 5 * 4, f"{elapsed:.1f} s: the five pages waited one after another"
        board.proc.send_signal(signal.SIGINT)
        board.proc.wait(LIMIT)
        output = "".join(board.output)
        assert board.proc.returncode == 0 and "Traceback" not in output, output
    finally:
        board.stop()
        stop.set()
        silent.close()
        for conn in held:
            conn.close()
