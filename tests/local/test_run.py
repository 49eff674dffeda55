"""End-to-end tests of the local runtime: real processes, real signals, real exit codes."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import job, template, wait_until

from .conftest import REPO, alive, carrying, py

pytestmark = pytest.mark.e2e


def _fail_once(marker: Path, first_exit: str) -> str:
    """Code that ends with ``first_exit`` on the first attempt and exits 0 afterwards."""
    return (
        "import os, pathlib, signal, sys\n"
        f"m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n"
        "    m.write_text('tried')\n"
        f"    {first_exit}\n"
        "print('second attempt succeeds')\n"
    )


def test_failing_replica_is_restarted_under_onfailure(start, tmp_path: Path) -> None:
    manifest = job(
        "PyTorchTrainingJob",
        "onfailure",
        {
            "runPolicy": {"backoffLimit": 2},
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": template(py(_fail_once(tmp_path / "m", "sys.exit(3)"))),
                }
            ],
        },
    )
    run = start(manifest)
    assert run.finish() == 0, run.output
    status = run.status()
    assert status["phase"] == "Succeeded"
    assert status["backoffCount"] == 1
    assert status["tasks"][0]["restartCount"] == 1
    assert "RestartingReplica" in (run.run_dir / "events.log").read_text()
    assert "second attempt succeeds" in (run.run_dir / "onfailure-worker-0.pytorch.log").read_text()


def test_exitcode_policy_retries_137(start, tmp_path: Path) -> None:
    manifest = job(
        "PyTorchTrainingJob",
        "sigkill",
        {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "restartPolicy": "ExitCode",
                    "template": template(py(_fail_once(tmp_path / "m", "os.kill(os.getpid(), signal.SIGKILL)"))),
                }
            ]
        },
    )
    run = start(manifest)
    assert run.finish() == 0, run.output
    status = run.status()
    assert status["phase"] == "Succeeded"
    assert status["backoffCount"] == 1


def test_exitcode_policy_does_not_retry_exit_1(start, tmp_path: Path) -> None:
    manifest = job(
        "PyTorchTrainingJob",
        "exit1",
        {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "restartPolicy": "ExitCode",
                    "template": template(py(_fail_once(tmp_path / "m", "sys.exit(1)"))),
                }
            ]
        },
    )
    run = start(manifest)
    assert run.finish() == 1, run.output
    status = run.status()
    assert status["phase"] == "Failed"
    assert status["backoffCount"] == 0
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["status"] == "True"
    assert "exit1-worker-0 failed with exit code 1" in failed["message"]


def test_pause_then_resume(start, tmp_path: Path) -> None:
    release = tmp_path / "release"
    pidfile = tmp_path / "pids"
    code = (
        "import os, pathlib, time\n"
        f"open({str(pidfile)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        f"r = pathlib.Path({str(release)!r})\n"
        "while not r.exists(): time.sleep(0.05)\n"
        "print('released')\n"
    )
    manifest = job(
        "GenericJob",
        "pausable",
        {
            "runMode": {
                "pause": {"enabled": False, "resumeSpecs": [{"type": "worker", "args": ["resumed-marker"]}]}
            },
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": template(["python", "-c", code])}
            ],
        },
    )
    run = start(manifest)
    run.wait_for(lambda s: s.get("phase") == "Running" and s["aggregate"]["running"] == 2)
    _wait_lines(pidfile, 2)
    first = _commands(run, b"released", 2)  # as this machine numbers them (each replica has a PID namespace)

    manifest["spec"]["runMode"]["pause"]["enabled"] = True
    run.manifest.write_text(yaml.safe_dump(manifest, sort_keys=False))
    status = run.wait_for(lambda s: s.get("phase") == "Paused" and s["aggregate"]["deleted"] == 2)
    paused = {c["type"]: c for c in status["conditions"]}["Paused"]
    assert paused["status"] == "True"
    wait_until(lambda: not any(alive(p) for p in first), "the paused replicas to have no processes", 15)

    manifest["spec"]["runMode"]["pause"]["enabled"] = False
    run.manifest.write_text(yaml.safe_dump(manifest, sort_keys=False))
    run.wait_for(lambda s: s.get("phase") == "Running" and s["aggregate"]["running"] == 2)
    status = run.status()
    assert {c["type"]: c for c in status["conditions"]}["Paused"]["status"] == "False"
    release.write_text("go")
    assert run.finish() == 0, run.output
    assert run.status()["phase"] == "Succeeded"
    assert len(pidfile.read_text().split()) == 4, "resume starts the replicas again"
    assert "Resuming" in (run.run_dir / "events.log").read_text() or "resum" in run.output.lower()


def test_debug_mode_runs_sleep_and_ctrl_c_stops_it(start) -> None:
    manifest = job(
        "PyTorchTrainingJob",
        "debugging",
        {
            "runMode": {"debug": {"enabled": True}},
            "torchrunConfig": {"enabled": True, "procPerNode": 1},
            "replicaSpecs": [
                {"type": "worker", "replicas": 2, "template": {"spec": {"containers": [
                    {"name": "pytorch", "image": "local", "command": ["python"], "args": ["missing.py"]}
                ]}}}
            ],
        },
    )
    run = start(manifest)
    run.wait_for(lambda s: s.get("phase") == "Running" and s["aggregate"]["running"] == 2)
    pids = _commands(run, b"sleep\0inf", 2)
    assert not _commands(run, b"missing.py", 0), "debug mode runs sleep inf, not the command"
    run.signal(signal.SIGINT)
    assert run.finish(30) == 130, run.output
    assert not any(alive(p) for p in pids)
    assert run.status()["phase"] == "Running", "debug mode never decides success or failure"


def test_deadline_exceeded_fails_the_job(start) -> None:
    manifest = job(
        "PyTorchTrainingJob",
        "slow",
        {
            "runPolicy": {"activeDeadlineSeconds": 2},
            "replicaSpecs": [{"type": "worker", "template": template(["sleep", "60"])}],
        },
    )
    began = time.monotonic()
    run = start(manifest)
    assert run.finish(60) == 1, run.output
    assert time.monotonic() - began < 30
    status = run.status()
    assert status["phase"] == "Failed"
    failed = {c["type"]: c for c in status["conditions"]}["Failed"]
    assert failed["reason"] == "DeadlineExceeded"


def test_sigint_and_sigterm_leave_no_process_behind(start, tmp_path: Path) -> None:
    # Each replica starts grandchildren in its own process group's subtree.
    shell = "sleep 301 & sleep 301 & wait"
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        manifest = job(
            "GenericJob",
            f"orphans-{code}",
            {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": template(["sh", "-c", shell])}]},
        )
        run = start(manifest, name=f"job-{code}.yaml")
        run.wait_for(lambda s: s.get("aggregate", {}).get("running") == 2)
        pids = _commands(run, b"sleep\x00301", 4) + _commands(run, b"sleep 301 & sleep 301", 2)
        assert all(alive(p) for p in pids)
        run.signal(sig)
        assert run.finish(30) == code, run.output
        assert [p for p in pids if alive(p)] == []


def test_deepspeedjob_whose_script_is_missing_fails_with_the_launchers_code(start) -> None:
    """DeepSpeedJob runs locally (deepspeed's no-ssh launcher per worker): a missing script makes
    worker-0's launcher fail, and the job with it."""
    manifest = job(
        "DeepSpeedJob",
        "ds",
        {
            "config": {"run": {"python": ["no_such_script.py"]}},
            "runPolicy": {"backoffLimit": 0},
            "worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "worker", "image": "x"}]}}},
        },
    )
    run = start(manifest)
    assert run.finish(300) == 1, run.output
    assert run.status()["phase"] == "Failed"
    assert "ds-worker-0 failed with exit code" in run.output
    assert "Traceback" not in run.output


def test_deepspeedjob_without_deepspeed_says_what_to_install(monkeypatch) -> None:
    from t9k_jobs.api import parse_job
    from t9k_jobs.local import checks as runner

    monkeypatch.setattr(runner, "base_environment", lambda python=None, shims=None: {"PATH": "/nonexistent"})
    ds = parse_job(
        job(
            "DeepSpeedJob",
            "ds",
            {
                "config": {"run": {"python": ["train.py"]}},
                "worker": {"replicas": 1, "template": template(name="worker", image="x")},
            },
        )
    )
    reason = runner.cannot_run_reason(ds)
    assert reason is not None and "pip install deepspeed==0.19.8" in reason


def test_checking_a_colossalai_job_creates_nothing_and_starting_it_makes_sshds_directory(monkeypatch, tmp_path) -> None:
    """cannot_run_reason is a predicate: it makes nothing on the machine (it once made /run/sshd, so
    a test of a bare sshd passed only after a ColossalAI test had run). The runtime makes sshd's
    privilege-separation directory when the job starts, before any worker's sshd does."""
    import os

    from t9k_jobs.api import load_manifest
    from t9k_jobs.local import checks as runner

    privsep = tmp_path / "run-sshd"
    monkeypatch.setattr(runner, "SSHD_PRIVSEP_DIR", str(privsep))
    monkeypatch.setattr(runner.os, "access", lambda path, mode: True)  # sshd "installed"
    monkeypatch.setattr(runner.shutil, "which", lambda name, path=None: f"/bin/{name}")  # so is colossalai
    cai = load_manifest(REPO / "examples" / "colossalai-digits" / "job.yaml")
    assert runner.cannot_run_reason(cai) is None
    assert not privsep.exists()
    runner.prepare_host(cai)
    assert privsep.is_dir() == (os.geteuid() == 0)


def test_generic_exchange_example(start) -> None:
    run = start(REPO / "examples" / "generic-exchange" / "job.yaml")
    assert run.finish(120) == 0, run.output
    assert "exchange ok: sum of all values = 8" in run.output
    assert run.status()["phase"] == "Succeeded"
    log = (run.run_dir / "job.log").read_text()
    assert re.search(r"^\[worker-2\] rank 2 received from \[0, 1\]", log, re.M)


def test_pytorch_ddp_example_reaches_accuracy(start) -> None:
    """The README's main job: DDP with torchrun over 2 replicas on the digits data set."""
    run = start(REPO / "examples" / "pytorch-ddp" / "job.yaml", "--quiet")
    assert run.finish(300) == 0, run.output
    status = run.status()
    assert status["phase"] == "Succeeded"
    log = (run.run_dir / "digits-ddp-worker-0.pytorch.log").read_text()
    epochs = re.findall(r"epoch (\d+)/\d+ loss [\d.]+ test_accuracy ([\d.]+)", log)
    assert len(epochs) == 15
    final = float(re.search(r"final test_accuracy ([\d.]+)", log).group(1))
    assert final >= 0.90, log
    objects = list(yaml.safe_load_all((run.run_dir / "objects.yaml").read_text()))
    assert {o["kind"] for o in objects} == {"Service"}
    assert json.dumps(status)  # the status file is plain data


def _wait_lines(path: Path, n: int, timeout: float = 20) -> list[int]:
    """The pids written to ``path`` once there are ``n`` of them."""

    def pids() -> list[int]:
        found = [int(x) for x in path.read_text().split()] if path.exists() else []
        return found if len(found) >= n else []

    return wait_until(pids, f"{path} to hold {n} pids", timeout, interval=0.05)


def _commands(run, pattern: bytes, n: int, timeout: float = 20) -> list[int]:
    """The pids (as this machine numbers them: each replica has a PID namespace of its own) of the
    run's processes whose command line (NUL-separated) holds ``pattern`` and starts with neither
    the namespaces' monitor nor their init, once there are ``n`` of them (0: now, without waiting)."""
    marker = f"T9K_JOBS_RUN_DIR={run.run_dir.resolve()}".encode()

    def found() -> list[int]:
        out = []
        for pid in carrying(marker, pattern):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if not argv[0].endswith((b"bwrap", b"unshare")) and not any(b"socket.sethostname" in a for a in argv):
                out.append(pid)
        return out

    if n == 0:
        return found()
    return wait_until(lambda: (lambda p: p if len(p) >= n else [])(found()), f"{n} processes with {pattern!r}", timeout)
