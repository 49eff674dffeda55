"""The dashboard in a real browser (Debian's headless chromium through Selenium) over real local
runs: replicas going Running -> Succeeded with their logs arriving live, a job that cannot start
saying why in describe's words, the loss plot of the main example, a ``<script>`` in a log line and
in a job name shown as text, and actions refused without ``--allow-actions`` and done with it
(pause, resume, delete, and scale of an elastic job with its refusal in the CLI's words).

Every wait is for a condition in the page (no reload, no fixed sleep).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.dashboard.conftest import LIMIT, generic, gated
from tests.helpers import job, replica, template, wait_until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def js(browser: Any, script: str, *args: Any) -> Any:
    return browser.execute_script(script, *args)


def page_state(browser: Any) -> dict[str, Any]:
    """What the job page shows now: phase, why, each replica's phase, the log lines."""
    return js(
        browser,
        """
        const q = (s) => document.querySelector(s);
        if (!q('#phase')) return {phase: null, why: null, replicas: {}, nodes: [], log: [], marker: null,
                                  problem: document.body ? document.body.innerText : null};
        return {
          phase: q('#phase').textContent,
          why: q('#why').hidden ? null : q('#why-text').textContent,
          replicas: Object.fromEntries([...document.querySelectorAll('#replicas tbody tr')].map(
              (tr) => [tr.children[0].textContent, tr.children[1].textContent])),
          nodes: [...document.querySelectorAll('#replicas tbody tr')].map((tr) => tr.children[5].textContent),
          log: [...document.querySelectorAll('#log .line')].map((d) => d.dataset.text),
          marker: window.__t9kTestMarker || null,
        };
        """,
    )


def until(browser: Any, check: Any, what: str, timeout: float = LIMIT) -> dict[str, Any]:
    """Wait until ``check(page_state)`` holds; the state then. On a timeout the error shows the
    page as last seen (phase, why, replicas, the action's result, a problem line)."""
    seen: dict[str, Any] = {}

    def look() -> dict[str, Any] | None:
        state = seen["last"] = page_state(browser)
        return state if check(state) else None

    try:
        return wait_until(look, what, timeout, interval=0.2)
    except AssertionError as exc:
        extra = js(browser, "const r = document.getElementById('action-result'); "
                            "const p = document.getElementById('problem'); "
                            "return [r && r.textContent, p && p.textContent]")  # fmt: skip
        last = {k: v for k, v in (seen.get("last") or {}).items() if k != "log"}
        raise AssertionError(f"{exc}; the page: {last}; action result, problem: {extra}") from None


def open_job(browser: Any, board: Any, kind: str, name: str) -> None:
    """Open a job's page, logged in with the token the dashboard printed."""
    board.open_in(browser, f"/job/{kind}/{name}")
    js(browser, "window.__t9kTestMarker = 'same page';")  # gone if the page reloads


def test_a_local_runs_page_follows_its_replicas_to_succeeded_and_its_logs_live(runs, dashboard, browser, tmp_path) -> None:
    gate = tmp_path / "go"
    runs.start(generic("live", gated(gate, "hello from a replica", "bye from a replica")))
    board = dashboard()
    open_job(browser, board, "GenericJob", "live")

    state = until(
        browser,
        lambda s: list(s["replicas"].values()) == ["Running", "Running"] and len([x for x in s["log"] if "hello" in x]) == 2,
        "both replicas Running and both hellos in the log",
    )
    assert state["phase"] == "Running"
    assert sorted(x for x in state["log"] if "hello" in x) == [
        "[worker-0] hello from a replica",
        "[worker-1] hello from a replica",
    ]
    assert not any("bye" in x for x in state["log"])

    gate.touch()
    state = until(
        browser,
        lambda s: s["phase"] == "Succeeded"
        and set(s["replicas"].values()) == {"Succeeded"}
        and len([x for x in s["log"] if "bye" in x]) == 2,
        "Succeeded with both byes, live",
    )
    assert state["marker"] == "same page", "the page was reloaded"
    assert state["why"] is None
    assert set(state["replicas"]) == {"live-worker-0", "live-worker-1"}
    timeline = js(browser, "return document.getElementById('timeline').textContent")
    assert "Running -> Succeeded" in timeline
    # The list's numbers fit its margin up to three digits (issue 41: items 10 and 11 showed "0." and "1.").
    room, needed = js(browser, "const ol = document.getElementById('timeline'); const s = document.createElement('span'); "
                               "s.textContent = '100. '; s.style.font = getComputedStyle(ol).font; document.body.append(s); "
                               "const w = s.getBoundingClientRect().width; s.remove(); "
                               "return [parseFloat(getComputedStyle(ol).paddingLeft), w]")  # fmt: skip
    assert room >= needed, (room, needed)

    # One replica's log: its own lines, without prefix, as `logs --type worker --index 1` prints them.
    js(
        browser,
        """const s = document.getElementById('log-source');
           s.selectedIndex = [...s.options].findIndex((o) => o.textContent === 'worker-1');
           s.dispatchEvent(new Event('change'));""",
    )
    until(browser, lambda s: s["log"] == ["hello from a replica", "bye from a replica"], "worker-1's own log")

    # The search box filters the lines shown; the whole-log search finds them with their numbers.
    js(
        browser,
        """const s = document.getElementById('log-source'); s.selectedIndex = 0; s.dispatchEvent(new Event('change'));""",
    )
    until(browser, lambda s: len(s["log"]) == 4, "the merged log again")
    js(
        browser,
        """const f = document.getElementById('log-search'); f.value = 'BYE'; f.dispatchEvent(new Event('input'));""",
    )
    shown = js(browser, "return [...document.querySelectorAll('#log .line')].filter((d) => !d.hidden).map((d) => d.dataset.text)")
    assert sorted(shown) == ["[worker-0] bye from a replica", "[worker-1] bye from a replica"]
    js(browser, "document.getElementById('log-search-all').click()")
    wait_until(
        lambda: "2 line(s) of 4 match" in js(browser, "return document.getElementById('log-status').textContent"),
        "the whole-log search to answer",
        LIMIT,
    )

    # The download is the whole merged log.
    href = js(browser, "return document.getElementById('log-download').href")
    with board.get(href[len(board.url):]) as answer:
        body = answer.read().decode()
        assert "attachment" in answer.headers["Content-Disposition"]
    assert sorted(body.splitlines()) == sorted(
        f"[worker-{i}] {word} from a replica" for i in (0, 1) for word in ("hello", "bye")
    )

    # The job list links to it and shows it Succeeded.
    board.open_in(browser)
    wait_until(
        lambda: js(browser, "const r = document.querySelector('#jobs tbody tr[data-name=\"live\"]'); return r && r.dataset.phase")
        == "Succeeded",
        "the list to show live Succeeded",
        LIMIT,
    )
    # Its "Why not Running" cell is empty, and so not tinted as a reason is (issue 41).
    cell = js(browser, "const c = document.querySelector('#jobs tbody tr[data-name=\"live\"]').children[9]; "
                       "return [c.textContent, c.className]")  # fmt: skip
    assert cell == ["", ""], cell


def test_a_job_that_cannot_start_shows_why_in_describes_words(runs, dashboard, browser) -> None:
    manifest = generic("held", "print('never')")
    manifest["spec"]["runMode"] = {"pause": {"enabled": True}}
    runs.start(manifest)
    wait_until(lambda: runs.phase("held") == "Paused", "the run to be Paused", LIMIT)
    described = runs.client.describe("gj", "held")
    why = next(line.split(":", 1)[1].strip() for line in described.splitlines() if line.startswith("Why:"))
    assert "t9k-jobs resume gj held" in why

    board = dashboard()
    open_job(browser, board, "GenericJob", "held")
    state = until(browser, lambda s: s["why"] is not None, "the page to say why")
    assert state["phase"] == "Paused" and state["why"] == why
    describe_text = js(browser, "return document.getElementById('describe').textContent")
    assert f"Why:         {why}" in describe_text

    board.open_in(browser)
    row_why = wait_until(
        lambda: js(browser, "const r = document.querySelector('#jobs tbody tr[data-name=\"held\"]'); return r && r.querySelector('.why').textContent"),
        "the list to show why",
        LIMIT,
    )
    assert row_why == why


@pytest.mark.timeout(900)
def test_the_loss_plot_has_the_examples_points(runs, dashboard, browser, tmp_path) -> None:
    """The main example (examples/pytorch-ddp, 2 replicas with torchrun), for 3 epochs: the plot
    holds each epoch's loss and test accuracy exactly as rank 0 printed them."""
    manifest = yaml.safe_load((REPO / "examples/pytorch-ddp/job.yaml").read_text())
    container = manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    container["args"] = ["train.py", "--epochs", "3"]
    container["workingDir"] = str(REPO / "examples/pytorch-ddp")
    run_dir = runs.start(manifest)
    board = dashboard()
    open_job(browser, board, "PyTorchTrainingJob", "digits-ddp")
    # The run itself first (torch under a loaded machine can be slow), then what the page says of it.
    ended = wait_until(lambda: runs.phase("digits-ddp", "pj") in ("Succeeded", "Failed") and runs.phase("digits-ddp", "pj"),
                       "the example to end", 600, interval=1.0)
    assert ended == "Succeeded", (run_dir / "job.log").read_text()[-2000:]
    until(browser, lambda s: s["phase"] == "Succeeded", "the page to say Succeeded")

    printed = re.findall(
        r"^\[worker-0\] epoch (\d+)/3 loss ([0-9.]+) test_accuracy ([0-9.]+)$",
        (run_dir / "job.log").read_text(),
        re.MULTILINE,
    )
    assert [int(e) for e, _, _ in printed] == [1, 2, 3]

    def plotted() -> Any:
        data = js(
            browser,
            """const p = window.t9kDashboard && window.t9kDashboard.plot;
               return p ? {series: p.series.map((s) => s.label), data: p.data} : null;""",
        )
        return data if data and data["data"] and len(data["data"][0]) == 3 else None

    plot = wait_until(plotted, "the plot to have three epochs", LIMIT, interval=0.2)
    assert plot["series"] == ["epoch", "loss", "test_accuracy"]
    assert plot["data"][0] == [1, 2, 3]
    assert plot["data"][1] == [float(loss) for _, loss, _ in printed]
    assert plot["data"][2] == [float(acc) for _, _, acc in printed]
    assert js(browser, "return document.querySelector('#plot canvas') !== null")


def test_a_script_in_a_log_line_and_in_a_job_name_shows_as_text(runs, dashboard, browser) -> None:
    payload = "<script>window.__t9kInjected = 1</script><b id='t9k-bold'>bold</b>"
    runs.start(generic("inject", f"print({payload!r}, flush=True)", replicas=1))
    wait_until(lambda: runs.phase("inject") == "Succeeded", "the run to succeed", LIMIT)
    # Run dirs whose jobs are named with markup (as an older or edited run dir may say): listed as
    # text; opened, each page says (as text) that this is no name ('/', RFC 1123) and shows nothing.
    names = [
        "<script>window.__t9kInjected = 2</script>",
        "<script>window.__t9kInjected = 3<img src=x onerror='window.__t9kInjected = 4'>",
    ]
    for i, name in enumerate(names):
        odd = runs.runs_dir / f"odd-{i}"
        odd.mkdir(parents=True)
        manifest = job("GenericJob", name, {"replicaSpecs": [replica("worker", 1, template(["true"]))]})
        (odd / "job.yaml").write_text(yaml.safe_dump(manifest))
        (odd / "job.log").write_text(f"[worker-0] {payload}\n")

    board = dashboard()
    open_job(browser, board, "GenericJob", "inject")
    state = until(browser, lambda s: any("script" in x for x in s["log"]), "the line with markup")
    assert f"[worker-0] {payload}" in state["log"]
    assert js(browser, "return document.querySelector('#log').textContent").count(payload) == 1
    spec = js(browser, "return document.getElementById('spec').textContent")
    assert "<script>window.__t9kInjected = 1</script>" in spec
    assert js(browser, "return document.getElementById('t9k-bold')") is None

    def link(name: str) -> Any:
        return js(
            browser,
            "return [...document.querySelectorAll('#jobs tbody a')].some((a) => a.textContent === arguments[0])",
            name,
        )

    for name in names:
        board.open_in(browser)
        wait_until(lambda: link(name), f"{name!r} in the list, as text", LIMIT)
        # Found and clicked in one script: the list redraws its rows as ages change.
        js(
            browser,
            "[...document.querySelectorAll('#jobs tbody a')].find((a) => a.textContent === arguments[0]).click()",
            name,
        )
        wait_until(lambda: js(browser, "return location.pathname.startsWith('/job/')"), "its page", LIMIT)
        shown = wait_until(
            lambda: js(browser, "const n = document.getElementById('job-name') || document.getElementById('problem'); return n && n.textContent"),
            "its name or why it cannot be shown",
            LIMIT,
        )
        assert name in shown and "is not a" in shown, shown
        assert js(browser, "return window.__t9kInjected === undefined && document.querySelectorAll('main img, main script:not(#initial)').length === 0")


def _post(browser: Any, url: str) -> dict[str, Any]:
    """POST from the page, as its own script does: ``{status, body}``."""
    return browser.execute_async_script(
        """const done = arguments[arguments.length - 1];
           fetch(arguments[0], {method: 'POST', headers: {'X-T9k-Dashboard': '1'}, body: '{}'})
             .then((r) => r.json().then((b) => done({status: r.status, body: b})));""",
        url,
    )


def test_actions_are_refused_without_allow_actions(runs, dashboard, browser, tmp_path) -> None:
    gate = tmp_path / "go"
    runs.start(generic("calm", gated(gate, "up", "down"), replicas=1))
    board = dashboard()
    open_job(browser, board, "GenericJob", "calm")
    until(browser, lambda s: s["phase"] == "Running", "Running")
    assert not browser.find_element("id", "actions").is_displayed()
    assert not browser.find_element("id", "act-pause").is_displayed()
    assert "read-only" in js(browser, "return document.querySelector('header .mode').textContent")
    for verb in ("pause", "delete"):
        answer = _post(browser, f"{board.url}/api/job/GenericJob/calm/actions/{verb}")
        assert answer["status"] == 403 and "--allow-actions" in answer["body"]["error"]
    assert runs.phase("calm") == "Running"
    gate.touch()


def _confirm(browser: Any, button: str, expect: str) -> None:
    js(browser, f"document.getElementById({button!r}).click()")
    text = wait_until(
        lambda: js(browser, "const d = document.getElementById('confirm'); return d.open && document.getElementById('confirm-text').textContent"),
        "the confirmation",
        LIMIT,
    )
    assert expect in text
    js(browser, "document.getElementById('confirm-ok').click()")


def test_actions_pause_resume_and_delete_with_allow_actions_after_a_confirmation(runs, dashboard, browser, tmp_path) -> None:
    gate = tmp_path / "never"
    runs.start(generic("steered", gated(gate, "up", "down"), replicas=1))
    board = dashboard("--allow-actions")
    open_job(browser, board, "GenericJob", "steered")
    until(browser, lambda s: s["phase"] == "Running", "Running")
    assert browser.find_element("id", "act-pause").is_displayed()
    assert not browser.find_element("id", "scale-box").is_displayed()  # a GenericJob has no elastic mode

    # Cancelling the confirmation does nothing.
    js(browser, "document.getElementById('act-pause').click()")
    wait_until(lambda: js(browser, "return document.getElementById('confirm').open"), "the confirmation", LIMIT)
    js(browser, "document.getElementById('confirm-cancel').click()")
    wait_until(lambda: not js(browser, "return document.getElementById('confirm').open"), "the dialog to close", LIMIT)
    assert runs.phase("steered") == "Running"

    _confirm(browser, "act-pause", "Pause GenericJob steered?")
    state = until(browser, lambda s: s["phase"] == "Paused", "Paused")
    assert state["why"] == "paused (spec.runMode.pause): t9k-jobs resume gj steered"
    assert "paused" in js(browser, "return document.getElementById('action-result').textContent")
    assert runs.phase("steered") == "Paused"

    _confirm(browser, "act-resume", "Resume GenericJob steered?")
    until(browser, lambda s: s["phase"] == "Running", "Running again")

    _confirm(browser, "act-delete", "Delete GenericJob steered?")
    until(browser, lambda s: s["phase"] in ("Stopped", "Failed"), "stopped by delete")
    assert runs.phase("steered") in ("Stopped", "Failed")
    result = js(browser, "return document.getElementById('action-result').textContent")
    assert "stopped" in result or "logs and status kept" in result


def test_scale_an_elastic_job_with_allow_actions_and_its_refusal(runs, dashboard, browser, tmp_path) -> None:
    gate = tmp_path / "go"
    spec = {
        "torchrunConfig": {"enabled": True, "procPerNode": "1"},
        "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3, "expectedReplicas": 1},
        "replicaSpecs": [replica("worker", 1, template(["python", "-c", gated(gate, "up", "down")]))],
    }
    runs.start(job("PyTorchTrainingJob", "grow", spec))
    board = dashboard("--allow-actions")
    open_job(browser, board, "PyTorchTrainingJob", "grow")
    until(browser, lambda s: s["phase"] == "Running", "Running")
    assert browser.find_element("id", "scale-box").is_displayed()

    def scale_to(replicas: int) -> str:
        js(browser, "document.getElementById('action-result').textContent = '';")
        js(browser, "document.getElementById('scale-replicas').value = arguments[0];", str(replicas))
        _confirm(browser, "act-scale", f"Scale PyTorchTrainingJob grow to {replicas} replicas")
        return wait_until(
            lambda: (lambda t: t if t and not t.endswith("…") else None)(
                js(browser, "return document.getElementById('action-result').textContent")
            ),
            "the action's answer",
            LIMIT,
        )

    refused = scale_to(5)
    assert refused == "refused: --replicas: 5 is outside PyTorchTrainingJob grow's elastic range [1, 3] (spec.elastic.minReplicas, maxReplicas)"
    assert scale_to(2) == "pytorchtrainingjob.batch.tensorstack.dev/grow scaled: spec.elastic.expectedReplicas is 2"
    until(browser, lambda s: "grow-worker-1" in s["replicas"], "a second replica on the page")
    gate.touch()


def test_a_jobs_tensorboard_links_where_tensorboard_url_says(runs, dashboard, browser, tmp_path) -> None:
    """``--tensorboard-url`` with ``{name}``: a job with ``tensorboardSpec`` gets a link to it (T9k
    documents no address of its own for a TensorBoard); the name is percent-encoded into it."""
    from tests.dashboard.conftest import py

    spec = {
        "tensorboardSpec": {"image": "tensorboard:1", "trainingLogFilesets": ["t9k://pvc/logs/run"]},
        "runMode": {"pause": {"enabled": True}},
        "replicaSpecs": [replica("worker", 1, template(py("print('never')"), name="pytorch"))],
    }
    (tmp_path / "logs" / "run").mkdir(parents=True)
    runs.start(job("PyTorchTrainingJob", "tb-job", spec), volumes={"logs": str(tmp_path / "logs")})
    wait_until(lambda: runs.phase("tb-job", "pj") == "Paused", "the run to be Paused", LIMIT)
    board = dashboard("--tensorboard-url", "https://console.example/t9k/tensorboards/{name}/")
    open_job(browser, board, "PyTorchTrainingJob", "tb-job")
    link = wait_until(
        lambda: js(browser, "const a = document.getElementById('tensorboard-link'); return a && [a.href, a.textContent]"),
        "the TensorBoard link",
        LIMIT,
    )
    assert link == ["https://console.example/t9k/tensorboards/tb-job/", "open TensorBoard"]
    summary = js(browser, "return document.getElementById('summary').textContent")
    assert "TensorBoard tb-job" in summary


def test_a_browser_without_the_token_sees_only_how_to_get_in(runs, dashboard, browser) -> None:
    runs.start(generic("private", "print('private line', flush=True)", replicas=1))
    board = dashboard()
    browser.delete_all_cookies()
    for path in ("/", "/job/GenericJob/private"):
        browser.get(board.url + path)
        text = js(browser, "return document.body.textContent")
        assert "needs its token" in text and "private" not in text, text
    board.open_in(browser)  # the printed URL: in, and the token gone from the address bar
    assert "token=" not in browser.current_url
    wait_until(lambda: js(browser, "return document.querySelector('#jobs tbody tr[data-name=\"private\"]') !== null"),
               "the list to show the job", LIMIT)


def test_enter_in_the_name_filter_keeps_the_filter(runs, dashboard, browser) -> None:
    from selenium.webdriver.common.keys import Keys

    for name in ("alpha", "beta"):
        runs.start(generic(name, "print('x', flush=True)", replicas=1))
    board = dashboard()
    board.open_in(browser)
    wait_until(lambda: js(browser, "return document.querySelectorAll('#jobs tbody tr').length") == 2, "both jobs", LIMIT)
    js(browser, "window.__t9kTestMarker = 'same page';")
    box = browser.find_element("id", "filter-name")
    box.send_keys("alp")
    box.send_keys(Keys.ENTER)
    wait_until(lambda: js(browser, "return [...document.querySelectorAll('#jobs tbody tr')].map((r) => r.dataset.name)") == ["alpha"],
               "the list filtered to alpha", LIMIT)
    assert js(browser, "return window.__t9kTestMarker") == "same page", "Enter reloaded the page"
    assert browser.find_element("id", "filter-name").get_attribute("value") == "alp"


def test_the_page_counts_ages_in_describes_words(runs, dashboard, browser) -> None:
    """The server sends times; the page counts the ages on with words.human_age's words."""
    from t9k_jobs.words import human_age

    board = dashboard()
    board.open_in(browser)
    samples = [0, 1, 59, 119, 120, 121, 599, 600, 601, 3599, 10799, 10800, 86399, 172799, 172800, 10**7, -5]
    shown = js(browser, f"return {json.dumps(samples)}.map((s) => window.t9k.humanAge(s))")
    assert shown == [human_age(s) for s in samples]


def test_a_local_runs_own_tensorboard_is_linked(runs, dashboard, browser, tmp_path) -> None:
    """Without --tensorboard-url, a local run's page links the TensorBoard the run serves (issue 31:
    ``t9k-jobs run`` starts one on a loopback port over the claim's folders)."""
    from tests.dashboard.conftest import py

    (tmp_path / "logs" / "run").mkdir(parents=True)
    spec = {
        "tensorboardSpec": {"image": "tensorboard:1", "trainingLogFilesets": ["t9k://pvc/logs/run"]},
        "runMode": {"pause": {"enabled": True}},
        "replicaSpecs": [replica("worker", 1, template(py("print('never')"), name="pytorch"))],
    }
    runs.start(job("PyTorchTrainingJob", "tb-local", spec), volumes={"logs": str(tmp_path / "logs")})
    board = dashboard()
    open_job(browser, board, "PyTorchTrainingJob", "tb-local")
    href = wait_until(
        lambda: js(browser, "const a = document.getElementById('tensorboard-link'); return a && a.href"),
        "the local TensorBoard's link", LIMIT,
    )
    assert href.startswith("http://127.0.0.1:"), href
    import urllib.request

    with urllib.request.urlopen(href, timeout=LIMIT) as answer:  # it is TensorBoard that answers
        assert answer.status == 200 and "TensorBoard" in answer.read().decode("utf-8", "replace")
