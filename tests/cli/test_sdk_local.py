"""The SDK on this machine, and pause/resume/scale of local runs (an edit of the run's own manifest copy).

The done-when of the SDK: ``python -c`` with ``t9k_jobs.Client`` runs the GenericJob example in
the background, waits for it and reads its logs. Every wait is on a condition with a generous
limit; replicas that must keep running wait for a file the test writes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.cli.test_local_verbs import LIMIT, _gated, _generic, cli, detached  # noqa: F401
from tests.helpers import job, template, wait_until
from tests.local.conftest import REPO, kill_run

pytestmark = pytest.mark.e2e

SDK_SCRIPT = """
from t9k_jobs import Client
from t9k_jobs.errors import JobsError
client = Client.local()
job = client.run({manifest!r})
print("started", job.kind, job.name)
done = client.wait("gj", job.name, phase="Succeeded", timeout="3m")
print("phase", done.status.phase)
for line in client.logs("gj", job.name):
    print(line)
try:
    client.get("gj", "no-such-job")
except JobsError as exc:
    print("error", exc.exit_code, exc)
"""


def test_python_c_runs_waits_for_and_reads_the_generic_example(tmp_path: Path) -> None:
    manifest = str(REPO / "examples" / "generic-exchange" / "job.yaml")
    done = subprocess.run(
        [sys.executable, "-c", SDK_SCRIPT.format(manifest=manifest)],
        capture_output=True,
        text=True,
        timeout=LIMIT * 3,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "started GenericJob exchange" and lines[1] == "phase Succeeded", done.stdout
    for rank in range(3):
        others = sorted(set(range(3)) - {rank})
        assert f"\n[worker-{rank}] rank {rank} received from {others}" in done.stdout, done.stdout
    assert "\n[worker-0] exchange ok" in done.stdout
    error = lines[-1]
    assert error.startswith("error 1 no local run of genericjob 'no-such-job' in "), error
    assert (tmp_path / "t9k-runs").is_dir()


COMMENTED = """\
# A job to pause: this comment stays.
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: {name}
spec:
  replicaSpecs:
    - type: worker   # two workers
      replicas: 2
      template:
        spec:
          containers:
            - name: main
              image: local
              command: {command}
"""


@pytest.fixture
def start_text(tmp_path: Path) -> Iterator[Callable[[str, str], Path]]:
    """Write ``text`` to ``tmp_path/<name>.yaml`` and ``run -d`` it; return the manifest's path.
    Runs still going at the end are killed with their processes."""
    started: list[Path] = []

    def _start(name: str, text: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        done = cli(tmp_path, "run", "-d", str(path))
        assert done.returncode == 0, done.stdout + done.stderr
        match = re.search(r"run dir (\S+)", done.stdout)
        assert match, done.stdout
        started.append(Path(match.group(1)))
        return path

    yield _start
    for run_dir in started:
        kill_run(run_dir)


def _phase(tmp_path: Path, kind: str, name: str, *extra: str) -> str:
    out = cli(tmp_path, "get", kind, name, *extra).stdout.splitlines()
    return out[1].split()[1] if len(out) > 1 else ""


def test_pause_and_resume_edit_the_runs_own_copy_not_the_users_file(start_text, tmp_path: Path) -> None:
    # Issue 20: pause used to edit the user's manifest, so two runs of one file were linked.
    gate = tmp_path / "go"
    command = ["python", "-c", _gated(gate, "up", "done")]
    path = start_text("held", COMMENTED.format(name="held", command=json.dumps(command)))
    written = path.read_bytes()
    other_dir = tmp_path / "other-runs" / "held-2"
    second = cli(tmp_path, "run", "-d", str(path), "--run-dir", str(other_dir))
    assert second.returncode == 0, second.stdout + second.stderr
    other = ["--runs-dir", str(tmp_path / "other-runs")]
    try:
        wait_until(lambda: _phase(tmp_path, "gj", "held") == "Running", "Running", LIMIT)
        wait_until(lambda: _phase(tmp_path, "gj", "held", *other) == "Running", "the second run Running", LIMIT)

        done = cli(tmp_path, "pause", "gj", "held")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip() == "genericjob.batch.tensorstack.dev/held paused: spec.runMode.pause.enabled is true"
        assert path.read_bytes() == written, "the user's manifest is never edited by a verb"
        run_dir = Path(json.loads(cli(tmp_path, "get", "gj", "held", "-o", "json").stdout)["metadata"]["annotations"][
            "t9k-jobs.local/run-dir"
        ])
        assert yaml.safe_load((run_dir / "manifest.yaml").read_text())["spec"]["runMode"]["pause"]["enabled"] is True
        wait_until(lambda: _phase(tmp_path, "gj", "held") == "Paused", "Paused", LIMIT)
        described = cli(tmp_path, "describe", "gj", "held").stdout
        assert "Why:         paused (spec.runMode.pause): t9k-jobs resume gj held" in described
        assert cli(tmp_path, "pause", "gj", "held").returncode == 0, "pausing a paused run changes nothing"
        assert _phase(tmp_path, "gj", "held", *other) == "Running", "the other run of the same file is not paused"

        # The user's own edit of their file still applies to every run that follows it.
        path.write_text(path.read_text().replace("spec:\n  replicaSpecs:", "spec:\n  runMode:\n    pause:\n      enabled: true\n  replicaSpecs:", 1))
        wait_until(lambda: _phase(tmp_path, "gj", "held", *other) == "Paused", "the user's edit pausing the second run", LIMIT)
        done = cli(tmp_path, "resume", "gj", "held")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "enabled: true" in path.read_text(), "resume left the user's file alone"
        wait_until(lambda: _phase(tmp_path, "gj", "held") == "Running", "Running again", LIMIT)
        assert _phase(tmp_path, "gj", "held", *other) == "Paused"
        assert cli(tmp_path, "resume", "gj", "held", *other).returncode == 0
        gate.write_text("go")
        assert cli(tmp_path, "wait", "gj", "held", "--for=Succeeded", "--timeout", "90s").returncode == 0
        assert cli(tmp_path, "wait", "gj", "held", "--for=Succeeded", "--timeout", "90s", *other).returncode == 0
        message = cli(tmp_path, "pause", "gj", "held")
        assert message.returncode == 1
        assert message.stderr.strip() == "error: GenericJob held has finished (Succeeded): there is nothing to pause"
    finally:
        kill_run(other_dir)


def test_a_run_from_standard_input_pauses_too(tmp_path: Path, detached) -> None:
    # Its own copy of the manifest is what pause edits: a run from standard input has one too.
    manifest = _generic("piped", _gated(tmp_path / "never", "up", "down"), replicas=1)
    done = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "run", "-d", "-"],
        input=yaml.safe_dump(manifest), capture_output=True, text=True, timeout=LIMIT, cwd=tmp_path, check=False,
    )
    assert done.returncode == 0, done.stderr
    run_dir = Path(re.search(r"run dir (\S+)", done.stdout).group(1))  # type: ignore[union-attr]
    try:
        wait_until(lambda: _phase(tmp_path, "gj", "piped") == "Running", "Running", LIMIT)
        paused = cli(tmp_path, "pause", "gj", "piped")
        assert paused.returncode == 0, paused.stderr
        wait_until(lambda: _phase(tmp_path, "gj", "piped") == "Paused", "Paused", LIMIT)
    finally:
        assert cli(tmp_path, "delete", "gj", "piped").returncode == 0
        kill_run(run_dir)


def test_scale_a_local_elastic_job_and_refusals(detached, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    detached(_generic("plain", _gated(gate, "up", "down"), replicas=1))
    refused = cli(tmp_path, "scale", "gj", "plain", "--replicas", "2")
    assert refused.returncode == 2 and "scale: GenericJob has no elastic mode" in refused.stderr

    spec = {
        "torchrunConfig": {"enabled": True, "procPerNode": "1"},
        "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 3, "expectedReplicas": 1},
        "replicaSpecs": [{"type": "worker", "replicas": 1, "template": template(["python", "-c", _gated(gate, "up", "down")])}],
    }
    run_dir = detached(job("PyTorchTrainingJob", "grow", spec))
    wait_until(lambda: _phase(tmp_path, "pj", "grow") == "Running", "Running", LIMIT)
    out_of_range = cli(tmp_path, "scale", "pj", "grow", "--replicas", "5")
    assert out_of_range.returncode == 2
    assert "--replicas: 5 is outside PyTorchTrainingJob grow's elastic range [1, 3]" in out_of_range.stderr
    done = cli(tmp_path, "scale", "pj", "grow", "--replicas", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert yaml.safe_load((tmp_path / "grow.yaml").read_text())["spec"]["elastic"]["expectedReplicas"] == 1
    assert yaml.safe_load((run_dir / "manifest.yaml").read_text())["spec"]["elastic"]["expectedReplicas"] == 2
    assert yaml.safe_load((run_dir / "job.yaml").read_text())["spec"]["elastic"]["expectedReplicas"] == 2

    def two_replicas() -> bool:
        status = yaml.safe_load((run_dir / "status.yaml").read_text()) or {}
        names = {r["name"] for t in status.get("tasks", []) for r in t.get("replicas", [])}
        return "grow-worker-1" in names

    wait_until(two_replicas, "a second replica", LIMIT)
    row = cli(tmp_path, "get", "pj", "grow").stdout.splitlines()[1].split()
    assert row[2].endswith("/2"), row
    gate.write_text("go")


def test_local_only_and_cluster_only_options_are_refused(tmp_path: Path, detached) -> None:
    detached(_generic("one", "print('hi', flush=True)", replicas=1))
    assert cli(tmp_path, "wait", "gj", "one", "--for=Succeeded", "--timeout", "90s").returncode == 0
    stamped = cli(tmp_path, "logs", "gj", "one", "--timestamps")
    assert stamped.returncode == 2 and "--timestamps: local logs carry no timestamps" in stamped.stderr
    previous = cli(tmp_path, "logs", "gj", "one", "--previous")
    assert previous.returncode == 2 and "--previous" in previous.stderr
    create = cli(tmp_path, "create", "-f", str(tmp_path / "one.yaml"), "--kubeconfig", "/nonexistent")
    assert create.returncode == 2 and "--kubeconfig: /nonexistent is not a file" in create.stderr

    from t9k_jobs import Client
    from t9k_jobs.errors import NotFound, NotSupported

    client = Client.local(tmp_path / "t9k-runs")
    assert [j.name for j in client.list()] == ["one"]
    assert client.get("genericjob", "one").status.phase == "Succeeded"
    with pytest.raises(NotSupported):
        client.get("gj", "one", namespace="default")
    with pytest.raises(NotFound) as missing:
        client.describe("gj", "two")
    assert missing.value.exit_code == 1 and str(missing.value).startswith("no local run of genericjob 'two' in ")
    assert list(client.logs("gj", "one")) == ["[worker-0] hi"]


def test_the_async_client_runs_waits_reads_and_deletes_as_the_client_does(tmp_path: Path) -> None:
    """Issue 44: AsyncClient has Client's verbs (tests/api/test_client_parity.py compares the
    signatures); here they act on a real local run: run, wait, logs, summaries, describe, get,
    list, delete, and create (a second run), with Client's errors."""
    import asyncio

    from t9k_jobs import AsyncClient
    from t9k_jobs.errors import NotFound, NotSupported

    manifest = str(REPO / "examples" / "generic-exchange" / "job.yaml")

    async def scenario() -> None:
        async with AsyncClient.local(tmp_path / "runs") as client:
            started = await client.run(manifest, gpus="none")
            assert (started.kind, started.name) == ("GenericJob", "exchange")
            done = await client.wait("gj", "exchange", timeout=LIMIT * 2)
            assert done.status is not None and done.status.phase == "Succeeded"
            lines = [line async for line in await client.logs("gj", "exchange", replica_type="worker", index=0)]
            assert "exchange ok: sum of all values = 8" in lines, lines
            rows = await client.summaries("gj")
            assert [(r.name, r.phase) for r in rows] == [("exchange", "Succeeded")]
            assert [j.name for j in await client.list()] == ["exchange"]
            assert (await client.get("genericjobs", "exchange")).status.phase == "Succeeded"  # type: ignore[union-attr]
            text = await client.describe("gj", "exchange")
            assert text.startswith("Name:") and "Succeeded" in text, text
            deleted = await client.delete("gj", "exchange")
            assert any("is not running" in line for line in deleted.lines), deleted.lines
            with pytest.raises(NotFound):
                await client.get("gj", "no-such-job")
            with pytest.raises(NotSupported, match="local runs have no namespaces"):
                await client.summaries("gj", namespace="team-a")
            again = await client.create(manifest)
            assert again.name == "exchange"
            await client.wait("gj", "exchange", timeout=LIMIT * 2)

    asyncio.run(scenario())
    assert len(list((tmp_path / "runs").iterdir())) == 2
