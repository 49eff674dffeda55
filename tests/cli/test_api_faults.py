"""Faults of an API server, a proxy before it and a credential plugin, reproduced for real (issue 33).

A small HTTP server in this process answers the way a broken server or proxy does (200 with an
HTML page, a JSON list, nesting without end, two gigabytes), or as one that restarts (503 while
it starts, 429 with ``Retry-After``); the CLI runs as a real process against it. Each fault ends
in one line and exit 1, in bounded memory; a wait rides out what passes. Kubeconfig exec plugins
are real programs (a shell script): one that never answers is given the command's time and killed;
a bad name is refused before any plugin runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_jobs import Client
from t9k_jobs.errors import ClusterError, UsageError

from .. import helpers

LIMIT = 120.0
#: Far above what a bounded step takes on a loaded 2-core machine, far below "until killed".
WELL_UNDER = 30.0
JOBS = "/apis/batch.tensorstack.dev/v1beta1/namespaces/ns/genericjobs"

#: An answer: (status, headers, body); a body that is a callable writes itself (a stream).
Answer = tuple[int, dict[str, str], Any]


def status_body(code: int, reason: str, message: str) -> bytes:
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                       "reason": reason, "message": message}).encode()  # fmt: skip


def job(phase: str | None = None) -> dict[str, Any]:
    worker = helpers.replica("worker", 1, helpers.template(["true"], name="main", image="busybox"))
    raw = helpers.job("GenericJob", "x", {"replicaSpecs": [worker]}, namespace="ns")
    raw["metadata"].update({"uid": "u-x", "resourceVersion": "7"})
    if phase is not None:
        raw["status"] = {"phase": phase}
    return raw


class FakeApiServer:
    """``http://127.0.0.1:PORT``: each request is answered by ``route(method, path)``; every
    request is counted in :attr:`asked` as ``"METHOD path"``."""

    def __init__(self, route: Callable[[str, str], Answer]) -> None:
        self.route = route
        self.asked: list[str] = []
        self.authorizations: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                outer.asked.append(f"{self.command} {self.path}")
                outer.authorizations.append(self.headers.get("Authorization") or "")
                code, headers, body = outer.route(self.command, self.path)
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                if callable(body):
                    if "Content-Length" not in headers:
                        self.send_header("Connection", "close")
                        self.close_connection = True
                    self.end_headers()
                    try:
                        body(self.wfile)
                    except OSError:  # the client went away: what a bounded reader does
                        self.close_connection = True
                    return
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[str, str], Answer]], FakeApiServer]]:
    servers: list[FakeApiServer] = []

    def start(route: Callable[[str, str], Answer]) -> FakeApiServer:
        servers.append(FakeApiServer(route))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def kubeconfig(path: Path, server: str, user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user or {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "ns"}}],
    }))  # fmt: skip
    return path


def cli(kc: Path, *args: str, timeout: float = LIMIT) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the CLI; ``(result, seconds it took)``."""
    env = {**os.environ, "KUBECONFIG": str(kc)}
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "t9k_jobs.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{args} did not end within {timeout} s: {err}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - started


#: Runs the CLI as ``python -m t9k_jobs.cli`` does and, at its exit, writes the process's peak
#: resident memory (``VmHWM``, KiB: of this process's own memory since its exec; rusage's maxrss
#: would carry the forking test process's) to the file named by ``$PEAK_FILE``.
PEAK = (
    "import atexit, os, re, runpy, sys\n"
    "def peak():\n"
    "    text = open('/proc/self/status').read()\n"
    "    open(os.environ['PEAK_FILE'], 'w').write(re.search(r'VmHWM:\\s+(\\d+)', text).group(1))\n"
    "atexit.register(peak)\n"
    "sys.argv = ['t9k-jobs', *sys.argv[1:]]\n"
    "runpy.run_module('t9k_jobs.cli', run_name='__main__')\n"
)


def peak_rss_kib(kc: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the CLI; ``(result, its peak resident memory in KiB)``."""
    peak_file = kc.parent / "peak"
    env = {**os.environ, "KUBECONFIG": str(kc), "PEAK_FILE": str(peak_file)}
    done = subprocess.run(
        [sys.executable, "-c", PEAK, *args], capture_output=True, text=True, env=env, timeout=LIMIT, check=False
    )
    return done, int(peak_file.read_text())


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr
    return done.stderr.strip().removeprefix("error: ")


# ------------------------------------------------------------------ answers that cannot be used


def deep(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


@pytest.mark.parametrize(
    ("body", "ctype", "said"),
    [
        (b"<html><body><h1>Sign in to the proxy</h1></body></html>", "text/html",
         "is not JSON (text/html): '<html><body><h1>Sign in to the proxy</h1></body></html>'"),
        (b'[{"kind": "GenericJob"}]', "application/json", "is a JSON list, not an object"),
        (deep(100_000), "application/json", "is nested too deep"),
        (b'{"kind": "GenericJob", "metadata": {"name": "x"}, "spec": ' + deep(300) + b"}", "application/json",
         "nests more than 128 levels deep"),
        (b'{"kind": "GenericJob", "spec": {}}', "application/json", "GenericJob x: metadata is missing or not an object"),
        (b'{"kind": "GenericJob", "metadata": {"name": 5}}', "application/json", "metadata.name is missing or not a string"),
        (b'{"kind": "GenericJob", "metadata": {"name": "x"}, "status": "Running"}', "application/json",
         "GenericJob x: status is not an object"),
        (b'{"kind": "Pod", "metadata": {"name": "x"}}', "application/json", "expected a GenericJob, got kind 'Pod'"),
    ],
    ids=["html", "json-list", "nesting-without-end", "nesting-too-deep", "no-metadata", "name-not-a-string",
         "status-not-an-object", "another-kind"],
)
def test_an_answer_that_cannot_be_used_is_one_line(tmp_path: Path, serve, body: bytes, ctype: str, said: str) -> None:
    server = serve(lambda method, path: (200, {"Content-Type": ctype}, body))
    kc = kubeconfig(tmp_path / "kc", server.url)
    for args in (("get", "gj", "x"), ("describe", "gj", "x"), ("wait", "gj", "x", "--for", "Succeeded", "--timeout", "30")):
        done, _ = cli(kc, *args)
        line = one_line(done, 1)
        assert line.startswith(f"the API server at {server.url} gave an answer t9k-jobs cannot use: "), line
        assert said in line, line
    with Client.cluster(kc) as client, pytest.raises(ClusterError, match="cannot use"):
        client.get("gj", "x")


@pytest.mark.parametrize(
    ("page", "said"),
    [
        ({"kind": "GenericJobList", "items": {"x": 1}}, "the list of genericjobs: items is not a list"),
        ({"kind": "GenericJobList", "items": [{"metadata": {}}]}, "items[0]: metadata.name is missing"),
        ({"kind": "GenericJobList", "items": ["x"]}, "items[0]: expected an object, got a JSON str"),
        ({"kind": "GenericJobList", "items": [], "metadata": {"continue": 5}}, "metadata.continue is not a string"),
    ],
    ids=["items-a-mapping", "item-without-name", "item-a-string", "continue-a-number"],
)
def test_a_list_of_another_shape_is_one_line(tmp_path: Path, serve, page: dict[str, Any], said: str) -> None:
    server = serve(lambda method, path: (200, {"Content-Type": "application/json"}, page))
    line = one_line(cli(kubeconfig(tmp_path / "kc", server.url), "get", "gj")[0], 1)
    assert "gave an answer t9k-jobs cannot use" in line and said in line, line


def test_pods_and_events_of_another_shape_are_one_line(tmp_path: Path, serve) -> None:
    def route(method: str, path: str) -> Answer:
        if path.startswith(f"{JOBS}/x"):
            return 200, {}, job("Running")
        if "/pods" in path:
            return 200, {}, {"items": [{"metadata": {"name": "x-worker-0", "labels": {
                "batch.tensorstack.dev/replica-index": 3}}, "status": {"conditions": "none"}}]}
        return 200, {}, {"items": []}

    server = serve(route)
    line = one_line(cli(kubeconfig(tmp_path / "kc", server.url), "describe", "gj", "x")[0], 1)
    assert "cannot use" in line and "x-worker-0" in line, line


def endless(out: Any) -> None:
    """Megabytes of a JSON-looking body without end (until the reader goes)."""
    out.write(b'{"kind": "GenericJob", "metadata": {"name": "x", "annotations": {"a": "')
    chunk = b"x" * 2**20
    for _ in range(2048):  # two gigabytes at most
        out.write(chunk)


@pytest.mark.parametrize("announced", [True, False], ids=["content-length-2g", "no-length"])
def test_a_two_gigabyte_answer_is_refused_in_bounded_memory(tmp_path: Path, serve, announced: bool) -> None:
    """Issue 33: a 2 GB body grew the CLI to 5.6 GB. Announced, it is refused unread; without a
    length, it is read up to 64 MiB and refused. The CLI's peak memory (its own, through wait4)
    stays far below the body."""
    headers = {"Content-Type": "application/json"}
    if announced:
        headers["Content-Length"] = str(2 * 2**30)
    server = serve(lambda method, path: (200, headers, endless))
    kc = kubeconfig(tmp_path / "kc", server.url)
    done, peak_kib = peak_rss_kib(kc, "get", "gj", "x")
    line = one_line(done, 1)
    assert "gave an answer t9k-jobs cannot use" in line and "more than the 67108864" in line, line
    assert peak_kib < 400 * 1024, f"the CLI's peak memory was {peak_kib // 1024} MiB"


# ------------------------------------------------------------------ TLS files and credential plugins


def test_a_ca_file_that_is_not_a_certificate_is_one_line(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("this is not a certificate\n")
    kc = kubeconfig(tmp_path / "kc", "https://127.0.0.1:9", cluster={"certificate-authority": str(ca)})
    line = one_line(cli(kc, "get", "gj", "x")[0], 1)
    assert line.startswith("the kubeconfig cannot be used: the kubeconfig's TLS settings cannot be used: "), line
    assert f"the certificate authority ({ca}) is not a PEM certificate" in line, line


def plugin(tmp_path: Path, body: str) -> Path:
    """An exec credential plugin: a shell script with ``body``."""
    path = tmp_path / "plugin.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def exec_user(command: str | Path) -> dict[str, Any]:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(command),
                     "interactiveMode": "Never"}}  # fmt: skip


def test_a_missing_exec_plugin_is_one_line(tmp_path: Path, serve) -> None:
    server = serve(lambda method, path: (200, {}, job("Running")))
    kc = kubeconfig(tmp_path / "kc", server.url, user=exec_user("t9k-no-such-sso-login"))
    line = one_line(cli(kc, "get", "gj", "x")[0], 1)
    assert line == (
        "the kubeconfig cannot be used: exec plugin 't9k-no-such-sso-login' is not installed (not found on PATH): "
        "install it, or fix users[].user.exec.command in the kubeconfig"
    ), line
    assert server.asked == []


def test_an_exec_plugin_that_fails_or_prints_no_credential_is_one_line(tmp_path: Path, serve) -> None:
    server = serve(lambda method, path: (200, {}, job("Running")))
    failing = plugin(tmp_path, 'echo "first line" >&2\necho "token expired, run sso login" >&2\nexit 3\n')
    kc = kubeconfig(tmp_path / "kc", server.url, user=exec_user(failing))
    line = one_line(cli(kc, "get", "gj", "x")[0], 1)
    assert line.endswith(f"exec plugin '{failing}' failed (exit 3): token expired, run sso login"), line
    failing.write_text('#!/bin/sh\necho "not json"\n')
    assert "printed no ExecCredential (not JSON)" in one_line(cli(kc, "get", "gj", "x")[0], 1)


def test_an_exec_plugin_gives_the_credential(tmp_path: Path, serve) -> None:
    server = serve(lambda method, path: (200, {}, job("Running")))
    ok = plugin(tmp_path, 'echo \'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
                          '"status": {"token": "from-the-plugin"}}\'\n')  # fmt: skip
    kc = kubeconfig(tmp_path / "kc", server.url, user=exec_user(ok))
    done, _ = cli(kc, "get", "gj", "x")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^x\s+Running\s", done.stdout, re.M), done.stdout
    assert server.authorizations == ["Bearer from-the-plugin"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie no one reaped yet counts as gone.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 30
    while alive(pid):
        assert time.monotonic() < deadline, f"the plugin {pid} is still running"
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("args", "bound"),
    [
        (("get", "gj", "x", "--request-timeout", "3s"), "gave no credential within 3 s and was stopped"),
        (("wait", "gj", "x", "--for", "Succeeded", "--timeout", "5"), "timed out after 5s waiting for GenericJob x"),
    ],
    ids=["get-request-timeout", "wait-timeout"],
)
def test_a_credential_plugin_that_never_answers_gets_the_time_then_is_killed(
    tmp_path: Path, serve, args: tuple[str, ...], bound: str
) -> None:
    """Issue 33: a plugin waiting for an SSO login hung ``wait --timeout 5`` and ``get
    --request-timeout 3s`` until killed. Now it gets the time, then it (and what it started) is
    killed, and the command says so in one line."""
    server = serve(lambda method, path: (200, {}, job("Running")))
    pids = tmp_path / "pids"
    hung = plugin(tmp_path, f"echo $$ >> {pids}\nsleep 600 &\necho $! >> {pids}\nwait\n")
    kc = kubeconfig(tmp_path / "kc", server.url, user=exec_user(hung))
    done, took = cli(kc, *args)
    line = one_line(done, 1)
    assert bound in line, line
    assert took < WELL_UNDER, f"{args} took {took:.1f} s"
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    for pid in started:  # the plugin and the sleep it started
        wait_gone(pid)
    assert server.asked == []


def test_arguments_are_refused_before_any_plugin_runs(tmp_path: Path) -> None:
    """Issue 33: bad names were refused only after connecting. Nothing runs here: a plugin that
    ran would leave its mark, and the server does not exist."""
    mark = tmp_path / "ran"
    marker = plugin(tmp_path, f"touch {mark}\nsleep 600\n")
    kc = kubeconfig(tmp_path / "kc", "https://127.0.0.1:9", user=exec_user(marker))
    for args, said in (
        (("get", "gj", "Bad_Name"), "NAME: 'Bad_Name' is not a job name"),
        (("describe", "gj", "a" * 254), "is not a job name"),
        (("delete", "gj", "x", "-n", "Team.A"), "namespace: 'Team.A' is not a namespace"),
        (("get", "nosuchkind", "x"), "unknown kind 'nosuchkind'"),
        (("wait", "gj", "x", "--for", "Done"), "--for='Done' is not accepted"),
        (("wait", "gj", "x", "--for", "Running", "--timeout", "nan"), "bad duration 'nan'"),
        (("wait", "gj", "x", "--for", "Running", "--timeout", "inf"), "bad duration 'inf'"),
        (("logs", "gj", "x_y"), "is not a job name"),
    ):
        done, took = cli(kc, *args)
        line = one_line(done, 2)
        assert said in line, (args, line)
        assert took < WELL_UNDER
    assert not mark.exists(), "a credential plugin ran before the arguments were checked"
    with Client.cluster(kc) as client:
        for call, said in (
            (lambda: client.wait("gj", "x", timeout=float("nan")), "timeout: expected a finite number of seconds"),
            (lambda: client.wait("gj", "x", timeout=float("inf")), "finite"),
            (lambda: client.wait("gj", "x", timeout=-1), "zero or more"),
            (lambda: client.get("gj", "Bad_Name"), "is not a job name"),
        ):
            with pytest.raises(UsageError, match=said):
                call()
    assert not mark.exists()


# ------------------------------------------------------------------ riding out a server that restarts


class Script:
    """Answers of one route in turn; the last one stays."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.lock = threading.Lock()

    def next(self) -> Answer:
        with self.lock:
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


STARTING = (503, {"Content-Type": "application/json"}, status_body(503, "ServiceUnavailable", "apiserver is starting"))
SLOW_DOWN = (429, {"Retry-After": "1"}, status_body(429, "TooManyRequests", "too many requests, try again later"))


def test_wait_rides_out_a_restarting_and_overloaded_server(tmp_path: Path, serve) -> None:
    """Issue 33: ``wait --timeout 60`` exited 1 on the 503 of an API server starting. Now: 503s
    (a restart), 429 with Retry-After and a broken watch are tried again within the timeout, as
    ``kubectl wait`` does; the job's end is then seen, exit 0."""
    gets = Script(STARTING, STARTING, SLOW_DOWN, SLOW_DOWN, (200, {}, job("Running")), STARTING,
                  (200, {}, job("Succeeded")))  # fmt: skip

    def route(method: str, path: str) -> Answer:
        if "watch=true" in path:
            return STARTING  # the watch breaks: the job is read again
        return gets.next()

    server = serve(route)
    kc = kubeconfig(tmp_path / "kc", server.url)
    done, took = cli(kc, "wait", "gj", "x", "--for", "Succeeded", "--timeout", "60")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "GenericJob x is Succeeded"
    reads = [a for a in server.asked if a.startswith(f"GET {JOBS}/x")]
    assert len(reads) >= 7, server.asked
    assert took < WELL_UNDER + 30


def test_get_tries_a_503_again_when_it_says_when(tmp_path: Path, serve) -> None:
    """A ``503`` with ``Retry-After`` (a server starting, or shedding load) is tried again after
    it, as client-go does and as a ``429`` is; a ``503`` that does not say when is an answer
    (one line, exit 1, asked once)."""
    shedding = (503, {"Retry-After": "1", "Content-Type": "application/json"},
                status_body(503, "ServiceUnavailable", "the server is shedding load"))  # fmt: skip
    gets = Script(shedding, shedding, (200, {}, job("Running")))
    server = serve(lambda method, path: gets.next())
    done, took = cli(kubeconfig(tmp_path / "kc", server.url), "get", "gj", "x")
    assert done.returncode == 0, done.stderr
    assert "x" in done.stdout and "Running" in done.stdout, done.stdout
    assert len([a for a in server.asked if a.startswith(f"GET {JOBS}/x")]) == 3, server.asked
    server = serve(lambda method, path: STARTING)
    done, took = cli(kubeconfig(tmp_path / "kc2", server.url), "get", "gj", "x")
    assert "503" in one_line(done, 1) and len(server.asked) == 1 and took < WELL_UNDER, server.asked


def test_a_server_that_answers_too_slowly_is_not_called_unreachable(tmp_path: Path, serve) -> None:
    """The connection is made, the answer does not come within ``--request-timeout``: the line says
    the server did not answer in that time, not that it cannot be reached."""
    release = threading.Event()

    def slow(method: str, path: str) -> Answer:
        release.wait(20)  # bounded: the test's end releases it
        return 200, {}, job("Running")

    server = serve(slow)
    try:
        done, took = cli(kubeconfig(tmp_path / "kc", server.url), "get", "gj", "x", "--request-timeout", "2s")
    finally:
        release.set()
    line = one_line(done, 1)
    assert line == f"the API server at {server.url} did not answer within 2 s (--request-timeout): it may be " \
                   "overloaded, or the request too large for that time", line
    assert took < WELL_UNDER


def test_wait_does_not_retry_what_retrying_cannot_change(tmp_path: Path, serve) -> None:
    server = serve(lambda method, path: (403, {}, status_body(403, "Forbidden", "genericjobs.batch.tensorstack.dev \"x\" is forbidden")))
    done, took = cli(kubeconfig(tmp_path / "kc", server.url), "wait", "gj", "x", "--for", "Succeeded", "--timeout", "60")
    assert one_line(done, 1).startswith("forbidden: "), done.stderr
    assert took < WELL_UNDER and len(server.asked) == 1


def test_wait_on_a_server_that_stays_down_ends_at_its_timeout(tmp_path: Path, serve) -> None:
    server = serve(lambda method, path: STARTING)
    done, took = cli(kubeconfig(tmp_path / "kc", server.url), "wait", "gj", "x", "--for", "Succeeded", "--timeout", "4")
    line = one_line(done, 1)
    assert line.startswith("timed out after 4s waiting for GenericJob x to be Succeeded"), line
    assert len(server.asked) >= 2 and took < WELL_UNDER


def test_logs_follow_rides_out_a_restarting_server(tmp_path: Path, serve) -> None:
    gets = Script((200, {}, job("Running")), STARTING, SLOW_DOWN, STARTING, (200, {}, job("Succeeded")))

    def route(method: str, path: str) -> Answer:
        if "/pods" in path:
            return 200, {}, {"kind": "PodList", "items": []}
        return gets.next()

    server = serve(route)
    done, took = cli(kubeconfig(tmp_path / "kc", server.url), "logs", "gj", "x", "-f")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and done.stdout == ""
    assert len([a for a in server.asked if a.startswith(f"GET {JOBS}/x")]) >= 5, server.asked
    assert took < WELL_UNDER + 30
