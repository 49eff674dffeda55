"""The dashboard's app without a browser (Starlette's TestClient) over a real finished local run,
its bind rules, its metrics parser on the examples' own print format, and ``t9k-jobs dashboard``'s
bad input (one line, exit 2)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from t9k_jobs.errors import UsageError
from tests.dashboard.conftest import LIMIT, Runs, generic

# Starlette 1.x asks for httpx2 under its TestClient; httpx (in the lock) works the same here.
pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")

REPO = Path(__file__).resolve().parents[2]
#: The line the examples' rank 0 prints each epoch (examples/*/train*.py), as a format.
EXAMPLE_FORMAT = 'f"epoch {epoch}/{args.epochs} loss {mean_loss:.4f} test_accuracy {accuracy:.4f}"'


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """One GenericJob run to Succeeded (two replicas printing a few epochs and a line with markup),
    then its merged log made long (25,000 more lines) for the paging tests."""
    root = tmp_path_factory.mktemp("dashboard-app")
    runs = Runs(root)
    code = (
        "import os\n"
        "for e in range(1, 4):\n"
        "    print(f'epoch {e}/3 loss {1 / e:.4f} test_accuracy {1 - 0.1 / e:.4f}', flush=True)\n"
        "print('<b>done</b>', flush=True)\n"
    )
    try:
        run_dir = runs.start(generic("fin", code))
        runs.client.wait("gj", "fin", "Succeeded", timeout=LIMIT)
        with open(run_dir / "job.log", "a") as log:
            for i in range(25_000):
                log.write(f"[worker-0] filler line {i}\n")
        yield runs
    finally:
        runs.cleanup()


#: The token the app tests' dashboards take.
TOKEN = "test-token-0123456789abcdef"


def _app(finished: Runs, allow: bool = False) -> Any:
    from t9k_jobs import AsyncClient
    from t9k_jobs.dashboard.app import create_app
    from t9k_jobs.dashboard.source import JobSource

    source = JobSource(AsyncClient.local(finished.runs_dir, watch=True), allow_actions=allow)
    return create_app(source, TOKEN, 8700)


def _client(finished: Runs, allow: bool = False, token: bool = True) -> Any:
    from starlette.testclient import TestClient

    client = TestClient(_app(finished, allow), base_url="http://127.0.0.1:8700")
    if token:
        client.headers["authorization"] = f"Bearer {TOKEN}"
    return client


@pytest.fixture
def app_client(finished: Runs) -> Iterator[Any]:
    with _client(finished) as client:
        yield client


def _actions_client(finished: Runs, allow: bool) -> Any:
    return _client(finished, allow)


# ----------------------------------------------------------------------------- pages and JSON


def test_the_list_and_the_job_say_what_get_and_describe_say(app_client: Any, finished: Runs) -> None:
    page = app_client.get("/")
    assert page.status_code == 200 and "fin" in page.text
    rows = app_client.get("/api/jobs").json()["jobs"]
    summary = finished.client.summaries("gj", "fin")[0]
    row = next(r for r in rows if r["name"] == "fin")
    assert (row["kind"], row["phase"], row["ready"], row["restarts"]) == ("GenericJob", summary.phase, summary.ready, summary.restarts)

    data = app_client.get("/api/job/gj/fin").json()
    assert data["phase"] == "Succeeded" and data["why"] is None
    described = finished.client.describe("gj", "fin").splitlines()
    same = [line for line in data["describe"] if not line.startswith("Created:")]
    assert same == [line for line in described if not line.startswith("Created:")]
    assert [r["phase"] for r in data["replicas"]] == ["Succeeded", "Succeeded"]
    assert [s["label"] for s in data["logs"]] == ["all replicas", "worker (all)", "worker-0", "worker-1"]
    assert data["actions"] == {"allowed": False}
    assert any("Running -> Succeeded" in e["event"] or e["event"] == "completed" for e in data["timeline"])

    page = app_client.get("/job/GenericJob/fin")
    assert page.status_code == 200
    # The data the page starts with is JSON whose markup cannot end the script element.
    initial = re.search(r'<script type="application/json" id="initial">(.*?)</script>', page.text, re.S).group(1)
    assert "<" not in initial and json.loads(initial)["job"]["name"] == "fin"


def test_unknown_jobs_and_kinds_are_named_not_crashed_on(app_client: Any) -> None:
    missing = app_client.get("/api/job/gj/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["error"]
    page = app_client.get("/job/gj/nope")
    assert page.status_code == 404 and "nope" in page.text
    bad = app_client.get("/api/job/notakind/fin")
    assert bad.status_code == 400 and "unknown kind" in bad.json()["error"]
    assert app_client.get("/api/job/gj/fin/logs/page?page=x").status_code == 400
    assert app_client.get("/api/job/gj/fin/logs/page?type=nosuch&index=0").status_code == 404
    assert app_client.get("/api/job/gj/fin/logs/search?q=").status_code == 400


def test_a_foreign_host_header_is_refused(app_client: Any, finished: Runs) -> None:
    """DNS rebinding: a page of another site whose name resolves to 127.0.0.1 gets nothing; bound
    beyond loopback (--address 0.0.0.0), the check stays on for the names it answers for."""
    assert app_client.get("/api/jobs", headers={"host": "evil.example:8700"}).status_code == 400
    assert app_client.get("/api/jobs", headers={"host": "localhost:8700"}).status_code == 200
    from starlette.testclient import TestClient

    from t9k_jobs import AsyncClient
    from t9k_jobs.dashboard.app import create_app
    from t9k_jobs.dashboard.server import allowed_hosts, parse_bind
    from t9k_jobs.dashboard.source import JobSource

    hosts = allowed_hosts(parse_bind("8700", "0.0.0.0"), ("dash.example",))
    app = create_app(JobSource(AsyncClient.local(finished.runs_dir, watch=True)), TOKEN, 8700, hosts)
    with TestClient(app, base_url="http://127.0.0.1:8700", headers={"authorization": f"Bearer {TOKEN}"}) as client:
        assert client.get("/api/jobs", headers={"host": "evil.example:8700"}).status_code == 400
        assert client.get("/api/jobs", headers={"host": "dash.example:8700"}).status_code == 200
        assert client.get("/api/jobs", headers={"host": f"{socket.gethostname()}:8700"}).status_code == 200


# ----------------------------------------------------------------------------- logs


def test_log_pages_hold_one_page_whatever_the_size(app_client: Any) -> None:
    first = app_client.get("/api/job/gj/fin/logs/page?page=0&size=1000").json()
    total = first["total"]
    assert total >= 25_008 and first["pages"] == -(-total // 1000) and first["first"] == 1
    assert len(first["lines"]) == 1000 and any("epoch 1/3" in line for line in first["lines"])
    last = app_client.get("/api/job/gj/fin/logs/page?size=1000").json()
    assert last["page"] == first["pages"] - 1 and last["first"] == last["page"] * 1000 + 1
    assert last["lines"][-1] == "[worker-0] filler line 24999"
    assert len(last["lines"]) == total - last["page"] * 1000
    one = app_client.get("/api/job/gj/fin/logs/page?type=worker&index=1").json()
    assert one["lines"][:3] == [f"epoch {e}/3 loss {1 / e:.4f} test_accuracy {1 - 0.1 / e:.4f}" for e in (1, 2, 3)]


def test_search_and_download_read_the_whole_log(app_client: Any) -> None:
    found = app_client.get("/api/job/gj/fin/logs/search", params={"q": "FILLER LINE 12345"}).json()
    assert [m["line"] for m in found["matches"]] == ["[worker-0] filler line 12345"]
    assert found["matches"][0]["number"] > 12345 and not found["more"]
    many = app_client.get("/api/job/gj/fin/logs/search", params={"q": "filler"}).json()
    assert len(many["matches"]) == 1000 and many["more"]
    download = app_client.get("/api/job/gj/fin/logs/download")
    assert download.status_code == 200 and 'filename="fin.log"' in download.headers["content-disposition"]
    lines = download.text.splitlines()
    assert lines[-1] == "[worker-0] filler line 24999" and len(lines) >= 25_008


def test_metrics_follow_the_merged_log_to_its_end(app_client: Any) -> None:
    with app_client.stream("GET", "/api/job/gj/fin/metrics/follow") as answer:
        body = "".join(answer.iter_text())
    events = [
        (m.group(1), json.loads(m.group(2))) for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", body)
    ]
    assert events[-1][0] == "end"
    points = [p for name, data in events if name == "points" for p in data["points"]]
    worker0 = [(p["metric"], p["epoch"], p["value"]) for p in points if p["replica"] == "worker-0"]
    assert worker0 == [
        (metric, e, value)
        for e in (1, 2, 3)
        for metric, value in (("loss", round(1 / e, 4)), ("test_accuracy", round(1 - 0.1 / e, 4)))
    ]


# ----------------------------------------------------------------------------- actions


def test_actions_need_the_flag_the_header_and_the_same_origin(finished: Runs) -> None:
    with _actions_client(finished, allow=False) as client:
        refused = client.post("/api/job/gj/fin/actions/pause", headers={"x-t9k-dashboard": "1"})
        assert refused.status_code == 403 and "--allow-actions" in refused.json()["error"]
    with _actions_client(finished, allow=True) as client:
        assert client.post("/api/job/gj/fin/actions/pause").status_code == 403  # no header: a plain form
        foreign = client.post(
            "/api/job/gj/fin/actions/pause", headers={"x-t9k-dashboard": "1", "origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        assert client.get("/api/job/gj/fin/actions/pause").status_code in (400, 405)  # only a POST acts
        unknown = client.post("/api/job/gj/fin/actions/explode", headers={"x-t9k-dashboard": "1"})
        assert unknown.status_code == 400
        # Through the client's verb: a finished job has nothing to pause, in the CLI's words.
        done = client.post(
            "/api/job/gj/fin/actions/pause", headers={"x-t9k-dashboard": "1", "origin": "http://127.0.0.1:8700"}
        )
        assert done.status_code == 409 and "has finished (Succeeded): there is nothing to pause" in done.json()["error"]
        scale = client.post("/api/job/gj/fin/actions/scale", headers={"x-t9k-dashboard": "1"}, json={"replicas": "two"})
        assert scale.status_code == 400


# ----------------------------------------------------------------------------- metrics


def test_the_examples_print_the_format_the_plot_reads() -> None:
    from t9k_jobs.dashboard.metrics import parse_line

    for script in ("pytorch-ddp/train.py", "deepspeed-digits/train_deepspeed.py", "colossalai-digits/train_colossalai.py"):
        source = (REPO / "examples" / script).read_text()
        assert EXAMPLE_FORMAT.replace("args.epochs", "") in source.replace("args.epochs", ""), script
    line = "[worker-0] " + f"epoch {3}/{15} loss {0.123456:.4f} test_accuracy {0.97:.4f}"
    points = [(p.replica, p.metric, p.epoch, p.value) for p in parse_line(line)]
    assert points == [("worker-0", "loss", 3, 0.1235), ("worker-0", "test_accuracy", 3, 0.97)]
    assert parse_line("[worker-0] final test_accuracy 0.9700") == []
    assert parse_line("rank 0 of 2 joined on host") == []
    assert [(p.metric, p.epoch, p.value) for p in parse_line("Epoch: 2, val_loss=1e-3 acc: .5")] == [
        ("val_loss", 2, 0.001),
        ("acc", 2, 0.5),
    ]
    assert parse_line("epoch 1 loss nan") == []
    assert len(parse_line("epoch 1 loss 0.5 " + "x" * 100_000)) == 1


def test_metric_series_are_bounded() -> None:
    from t9k_jobs.dashboard.metrics import Series

    series = Series(limit=3)
    for e in range(1, 4):
        series.add_line(f"epoch {e} loss 1.0 accuracy 0.5")
    assert len(series.points) == 3 and series.dropped == 3


# ----------------------------------------------------------------------------- where it binds


def test_it_binds_to_loopback_unless_address_is_spelled_out() -> None:
    from t9k_jobs.dashboard.server import Bind, allowed_hosts, parse_bind

    assert parse_bind("8700", None) == Bind("127.0.0.1", 8700, True)
    assert parse_bind("0", None).port == 0
    assert parse_bind("localhost:9000", None) == Bind("localhost", 9000, True)
    assert parse_bind("[::1]:9000", None) == Bind("::1", 9000, True)
    assert parse_bind("9000", "0.0.0.0") == Bind("0.0.0.0", 9000, False)
    assert parse_bind("9000", "127.0.0.5").loopback
    beyond = allowed_hosts(parse_bind("9000", "0.0.0.0"), ("dash.example",))
    assert "*" not in beyond and socket.gethostname() in beyond and "dash.example" in beyond
    assert "127.0.0.1" in beyond and "0.0.0.0" not in beyond
    assert "evil.example" not in allowed_hosts(parse_bind("9000", None))
    for port, address, words in (
        ("0.0.0.0:9000", None, "not a loopback address"),
        ("10.1.2.3:9000", None, "spelled out with --address"),
        ("127.0.0.1:9000", "0.0.0.0", "cannot be combined"),
        ("nine", None, "not a port number"),
        ("70000", None, "outside 0 to 65535"),
        ("9000", " ", "empty"),
        ("9000", "no-such-host.invalid", "neither an IP address"),
    ):
        with pytest.raises(UsageError, match=words):
            parse_bind(port, address)


def _dashboard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "dashboard", *args],
        capture_output=True,
        text=True,
        timeout=LIMIT,
        cwd=cwd,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--port", "http"], "--port: 'http' is not a port number"),
        (["--port", "0.0.0.0:8080"], "not a loopback address"),
        (["--address", "no-such-host.invalid"], "--address"),
        (["--local", "-n", "team-a"], "--local: -n/--namespace is a cluster option"),
        (["--tensorboard-url", "javascript:alert(1)"], "--tensorboard-url: 'javascript:alert(1)' is not an http"),
        (["--tensorboard-url", "https://console/{job}"], "--tensorboard-url: unknown field {job}"),
        (["--tensorboard-url", "https://console/{name!r}"], "--tensorboard-url: {name!r} has a conversion or format spec"),
        (["--tensorboard-url", "https://console/{name:>9}"], "--tensorboard-url: {name:>9} has a conversion"),
        (["--token", "short"], "--token: a token has 16 to 256 characters"),
        (["--token", "x" * 20 + " y"], "--token: a token has 16 to 256 characters"),
        (["--allow-host", "*"], "--allow-host: '*' is not a host name"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], words: str, tmp_path: Path) -> None:
    done = _dashboard(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1 and words in done.stderr, done.stderr


def test_a_port_in_use_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = _dashboard("--port", str(port), "--local", cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


def test_the_printed_url_answers_and_ctrl_c_ends_it(tmp_path: Path) -> None:
    from tests.dashboard.conftest import Dashboard

    board = Dashboard("--runs-dir", str(tmp_path / "t9k-runs"))
    try:
        import urllib.request

        assert board.url.startswith("http://127.0.0.1:") and board.token
        with urllib.request.urlopen(board.url + "/healthz", timeout=LIMIT) as answer:
            assert json.loads(answer.read()) == {"ok": True}
        assert "read-only" in "".join(board.output)
    finally:
        board.stop()
    assert board.proc.returncode == 0, "".join(board.output)


# ----------------------------------------------------------------------------- a cluster job's view


class _OneJobBackend:
    """An async cluster backend that knows one job (a view built as the cluster backend builds it
    from the server's objects): what the page makes of a cluster job's pods and Events."""

    target = "cluster"
    namespace = "team-a"
    server = "https://127.0.0.1:6443"

    def __init__(self, view: Any) -> None:
        self.view = view

    async def get(self, kind: str, name: str, namespace: str | None = None, detail: bool = False) -> Any:
        return self.view

    async def list(self, *args: Any, **kwargs: Any) -> list[Any]:
        return [self.view]

    async def version(self) -> int:
        return 1

    def problem(self) -> None:
        return None

    async def close(self) -> None:
        pass

    async def _unused(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the job page reads only get, list and version")

    # The rest of AsyncClient's AsyncBackend (the page never calls them).
    create = delete = set_field = open_logs = open_raw_log = watch = changes = _unused


def test_a_cluster_jobs_pods_give_nodes_events_and_timeline() -> None:
    import asyncio

    from t9k_jobs import AsyncClient
    from t9k_jobs.sdk.cluster_api import raw_view
    from t9k_jobs.dashboard.source import JobSource
    from t9k_jobs.errors import NotFound
    from t9k_jobs.sdk.present import why
    from tests.helpers import job, replica, template

    raw = job(
        "GenericJob",
        "c",
        {"replicaSpecs": [replica("worker", 1, template(["true"], name="main"))]},
        namespace="team-a",
        creationTimestamp="2026-11-27T03:00:00Z",
        status={
            "phase": "Running",
            "tasks": [{"type": "worker", "replicas": [{"name": "c-worker-0", "phase": "Running", "containers": [{"name": "main", "state": "Running"}]}]}],
        },
    )
    pod = {
        "metadata": {"name": "c-worker-0", "creationTimestamp": "2026-11-27T03:00:01Z"},
        "spec": {"nodeName": "t9k-node-1"},
        "status": {
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-27T03:00:02Z"}],
            "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": "2026-11-27T03:00:05Z"}}}],
        },
    }
    event = {
        "type": "Normal",
        "reason": "Scheduled",
        "message": "Successfully assigned team-a/c-worker-0 to t9k-node-1",
        "involvedObject": {"kind": "Pod", "name": "c-worker-0"},
        "lastTimestamp": "2026-11-27T03:00:02Z",
    }
    view = raw_view(raw, [pod], None, [event], detail=True)
    source = JobSource(AsyncClient(_OneJobBackend(view)))
    data = asyncio.run(source.job(source.key("gj", "c", "team-a")))
    assert data["namespace"] == "team-a" and data["why"] == why(view)
    assert [(r["name"], r["node"]) for r in data["replicas"]] == [("c-worker-0", "t9k-node-1")]
    assert [(e["reason"], e["object"]) for e in data["events"]] == [("Scheduled", "pod/c-worker-0")]
    events = [(e["what"], e["event"]) for e in data["timeline"]]
    assert events[:4] == [
        ("job", "created"),
        ("c-worker-0", "pod created"),
        ("c-worker-0", "scheduled on t9k-node-1"),
        ("c-worker-0", "container main running"),
    ]
    assert source.describe_target() == "the cluster at https://127.0.0.1:6443, namespace team-a"
    assert [r["namespace"] for r in asyncio.run(source.jobs())["jobs"]] == ["team-a"]
    # Its scope is its namespace: another is not found, nothing asked of the backend.
    with pytest.raises(NotFound, match="this dashboard shows namespace team-a only"):
        source.key("gj", "c", "team-b")


def test_every_answer_forbids_foreign_and_inline_scripts(app_client: Any) -> None:
    for path in ("/", "/job/gj/fin", "/api/jobs", "/static/job.js", "/api/job/gj/fin/logs/download"):
        headers = app_client.get(path).headers
        assert "script-src 'self'" in headers["content-security-policy"], path
        assert headers["x-content-type-options"] == "nosniff" and headers["x-frame-options"] == "DENY"


def test_a_followed_stream_reads_ahead_a_bounded_amount_and_stops_with_its_reader() -> None:
    """An endless log read for a page that takes one batch and goes away: the reading task reads
    at most READ_AHEAD lines ahead, then is cancelled and the log closed (no thread involved)."""
    import asyncio
    import itertools

    from t9k_jobs.dashboard import sse

    read: list[int] = []
    closed = asyncio.Event()

    async def endless() -> Any:
        try:
            for i in itertools.count():
                read.append(i)
                yield f"line {i}"
                if i % 100 == 0:
                    await asyncio.sleep(0)
        finally:
            closed.set()

    async def one_batch() -> list[str]:
        stream = sse.batched(endless())
        batch = await stream.__anext__()
        await asyncio.sleep(0.2)  # let the reader fill its queue
        await stream.aclose()
        await asyncio.wait_for(closed.wait(), LIMIT)
        return batch

    batch = asyncio.run(one_batch())
    assert batch[0] == "line 0" and len(batch) <= sse.BATCH
    assert len(read) <= sse.READ_AHEAD + sse.BATCH + 2


def test_the_tensorboard_url_is_checked_and_filled_with_encoded_names() -> None:
    from t9k_jobs.dashboard.source import check_tensorboard_url, tensorboard_link

    template = check_tensorboard_url("https://console.example/t9k/{namespace}/tensorboards/{name}")
    assert tensorboard_link(template, "team-a", "a/b?c") == "https://console.example/t9k/team-a/tensorboards/a%2Fb%3Fc"
    for bad, words in [
        ("javascript:alert(1)", "not an http:// or https:// URL"),
        ("https://x/{job}", "unknown field {job}"),
        ("https://x/{", "not a URL template"),
        ("https://x/{name!s}", "{name!s} has a conversion or format spec"),
        ("https://x/{namespace:.3}", "{namespace:.3} has a conversion or format spec"),
    ]:
        with pytest.raises(ValueError, match=re.escape(words)):
            check_tensorboard_url(bad)


# ----------------------------------------------------------------------------- who may look (issue 30)


PROTECTED = [
    "/",
    "/job/gj/fin",
    "/api/jobs",
    "/api/jobs/events",
    "/api/job/gj/fin",
    "/api/job/gj/fin/events",
    "/api/job/gj/fin/logs/follow",
    "/api/job/gj/fin/logs/page",
    "/api/job/gj/fin/logs/search?q=epoch",
    "/api/job/gj/fin/logs/download",
    "/api/job/gj/fin/metrics/follow",
    "/api/actions/1",
]


def test_without_the_token_nothing_is_shown_and_nothing_done(finished: Runs) -> None:
    with _client(finished, allow=True, token=False) as client:
        for path in PROTECTED:
            answer = client.get(path, headers={"accept": "text/html"})
            assert answer.status_code == 401, path
            assert "fin" not in answer.text and "epoch" not in answer.text, path
            assert "needs its token" in answer.text, path
        refused = client.post("/api/job/gj/fin/actions/delete", headers={"x-t9k-dashboard": "1"})
        assert refused.status_code == 401 and "fin" not in refused.text
        for bad in ("Bearer nope", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"):
            assert client.get("/api/jobs", headers={"authorization": bad}).status_code == 401, bad
        client.cookies.set("t9k-dashboard-8700", TOKEN)  # the token itself is not the cookie's value
        assert client.get("/api/jobs").status_code == 401
        client.cookies.clear()
        assert client.get(f"/api/jobs?token={TOKEN}x", follow_redirects=False).status_code == 401
        # What holds nothing of any job is open: the page's own scripts and style, the health check.
        assert client.get("/static/job.js").status_code == 200
        assert client.get("/healthz").json() == {"ok": True}
    assert finished.phase("fin") == "Succeeded"


def test_the_printed_url_trades_the_token_for_a_strict_http_only_cookie(finished: Runs) -> None:
    with _client(finished, token=False) as client:
        first = client.get(f"/job/gj/fin?token={TOKEN}&namespace=", follow_redirects=False)
        assert first.status_code == 303 and first.headers["location"] == "/job/gj/fin?namespace="
        cookie = first.headers["set-cookie"]
        assert cookie.startswith("t9k-dashboard-8700=") and TOKEN not in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert client.get("/api/jobs").status_code == 200  # the cookie, kept by the client, is enough
        assert client.get("/job/gj/fin").status_code == 200
    # A path that would read as another host (//evil.example) is never sent on as one.
    import asyncio

    from t9k_jobs.dashboard.auth import TokenAuth

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "//evil.example/", "raw_path": b"//evil.example/",
             "query_string": f"token={TOKEN}".encode(), "headers": []}
    asyncio.run(TokenAuth(None, TOKEN, 8700)(scope, None, send))
    assert dict(sent[0]["headers"])[b"location"] == b"/evil.example/"


def test_a_namespace_is_outside_a_local_dashboards_scope(finished: Runs) -> None:
    """Locally the scope is the runs dir: a request naming a namespace reads nothing, acts on nothing."""
    with _client(finished, allow=True) as client:
        for path in ("/job/gj/fin", "/api/job/gj/fin", "/api/job/gj/fin/events", "/api/job/gj/fin/logs/page",
                     "/api/job/gj/fin/logs/download", "/api/job/gj/fin/metrics/follow"):
            answer = client.get(path + "?namespace=team-b")
            assert answer.status_code == 404, path
            assert "epoch" not in answer.text, path
        delete = client.post("/api/job/gj/fin/actions/delete?namespace=team-b", headers={"x-t9k-dashboard": "1"})
        assert delete.status_code == 404
    assert (finished.runs_dir).is_dir() and finished.phase("fin") == "Succeeded"


def test_a_page_past_the_end_is_the_last_page(app_client: Any) -> None:
    last = app_client.get("/api/job/gj/fin/logs/page?size=1000").json()
    past = app_client.get("/api/job/gj/fin/logs/page?size=1000&page=99999").json()
    assert past == last and past["page"] == last["pages"] - 1


def test_two_pages_plot_the_points_of_one_reading_of_the_log(finished: Runs) -> None:
    """The metric points are read from the log once per job, whatever the number of pages."""
    with _client(finished) as client:
        bodies = []
        for _ in range(2):
            with client.stream("GET", "/api/job/gj/fin/metrics/follow") as answer:
                bodies.append("".join(answer.iter_text()))
        source = client.app.state.board.source
        assert len(source.metrics.trackers) == 1
        tracker = next(iter(source.metrics.trackers.values()))
        assert tracker.done and len(tracker.points) == 12
    # Both pages got the same points (the first may also have got an empty first batch: a stream
    # says its points at once, before the tracker read any), and the same end.
    seen = [
        [(m.group(1), json.loads(m.group(2))) for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", body)]
        for body in bodies
    ]
    points = [[p for name, data in events if name == "points" for p in data["points"]] for events in seen]
    assert points[0] == points[1] == tracker.points
    assert [p["metric"] for p in points[0]].count("loss") == 6
    assert seen[0][-1] == seen[1][-1] and seen[0][-1][0] == "end"


def test_a_local_runs_events_are_its_events_log_lines() -> None:
    """A local run's events (``JobView.events``, parsed from ``events.log``) as the page gets
    them: the time of day the line has (``at``), no date (``when`` None), a line that is not an
    event (a message's second line) as a message alone; as before issue 34 made them one list."""
    import asyncio

    from t9k_jobs import AsyncClient
    from t9k_jobs.dashboard.source import JobSource
    from t9k_jobs.frameworks import parse_job
    from t9k_jobs.sdk.view import Event, JobView
    from tests.helpers import job, replica, template

    manifest = job("GenericJob", "l", {"replicaSpecs": [replica("worker", 1, template(["true"]))]})
    lines = ["12:00:01 Normal Created: created pod l-worker-0", "  a second line", "12:00:02 Warning Failed: x: y "]
    view = JobView(
        target="local", kind="GenericJob", name="l", namespace=None, phase="Running", status=None, created=None,
        replicas=1, running=0, load_job=lambda: parse_job(manifest, "<l>"), load_spec=lambda: manifest["spec"],
        load_object=lambda: manifest, events=[Event.local(line) for line in lines], detailed=True,
    )

    class Local(_OneJobBackend):
        target, namespace, server = "local", None, None

    source = JobSource(AsyncClient(Local(view)))
    data = asyncio.run(source.job(source.key("gj", "l", None)))
    assert data["events"] == [
        {"when": None, "at": "12:00:01", "type": "Normal", "reason": "Created", "object": "",
         "message": "created pod l-worker-0"},
        {"when": None, "at": "-", "type": "", "reason": "", "object": "", "message": "  a second line"},
        {"when": None, "at": "12:00:02", "type": "Warning", "reason": "Failed", "object": "", "message": "x: y"},
    ]
    assert data["describe"][-3:] == [f"  {line}" for line in lines]
