"""A local run holds like a kubelet under faults: however the runtime ends (SIGKILL, a closed
terminal, Ctrl-\\), nothing of its replicas is left; when a container's main process ends,
everything it started ends with it; a second Ctrl-C does not wait out a long grace period."""

from __future__ import annotations

import signal
import time

import pytest

from tests.helpers import job, replica, template, wait_until

from .conftest import carrying, py

pytestmark = pytest.mark.e2e

# A replica that starts a daemon in a session of its own and a background child, then waits.
FORKER = (
    "import os, subprocess, time\n"
    "subprocess.Popen(['setsid', 'sleep', '600'])\n"
    "subprocess.Popen(['sleep', '601'])\n"
    "print('started', flush=True)\n"
    "time.sleep(600)\n"
)


def generic(name: str, command: list[str], replicas: int = 2, **container) -> dict:
    worker = replica("worker", replicas, template(command, **container), restartPolicy={"policy": "Never"})
    return job("GenericJob", name, {"replicaSpecs": [worker]})


def replica_log(run, name: str) -> str:
    """What worker 0 of job ``name`` has printed so far (its container log in the run dir)."""
    try:
        return (run.run_dir / f"{name}-worker-0.pytorch.log").read_text()
    except OSError:
        return ""


def marker_of(run) -> bytes:
    return f"T9K_JOBS_RUN_DIR={run.run_dir.resolve()}".encode()


@pytest.mark.parametrize("sig, code", [(signal.SIGKILL, -9), (signal.SIGHUP, 129), (signal.SIGQUIT, 131)])
def test_nothing_outlives_the_runtime(start, sig: int, code: int) -> None:
    """SIGKILL (a watchdog of its own session kills the run's processes within a second), SIGHUP
    (a closed terminal, a dropped ssh session) and SIGQUIT (Ctrl-\\) leave no replica, no daemon a
    replica started with setsid, no background child."""
    run = start(generic("orphans", py(FORKER)))
    marker = marker_of(run)
    wait_until(lambda: len(carrying(marker, b"sleep\x0060")) >= 4, "2 replicas with a daemon and a child each", 60)
    run.signal(sig)
    assert run.finish(60) == code, run.output
    wait_until(lambda: not carrying(marker), "every process of the run to be gone within 5 s", 5)


def test_when_the_main_process_ends_everything_it_started_ends(start) -> None:
    """As when a container's PID 1 exits: the daemon (setsid) and the background child holding
    stdout are killed, and the replica ends at once (it used to stay Running while the child held
    its output open)."""
    code = "import subprocess\nsubprocess.Popen(['setsid', 'sleep', '600'])\nsubprocess.Popen(['sleep', '601'])\nprint('done', flush=True)\n"
    run = start(generic("leaves", py(code), replicas=1))
    assert run.finish(60) == 0, run.output
    assert run.status()["phase"] == "Succeeded"
    assert not carrying(marker_of(run))


def test_a_second_ctrl_c_does_not_wait_for_the_grace_period(start) -> None:
    """A replica that ignores SIGTERM with terminationGracePeriodSeconds 600: the first Ctrl-C
    waits (and says so), the second kills it at once."""
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(600)\n"
    manifest = generic("stubborn", py(stubborn), replicas=1)
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["terminationGracePeriodSeconds"] = 600
    run = start(manifest)
    run.wait_for(lambda s: s.get("aggregate", {}).get("running") == 1, timeout=60)
    wait_until(lambda: "ready" in replica_log(run, "stubborn"), "the replica to ignore SIGTERM", 30)
    run.signal(signal.SIGINT)
    run.wait_output("again to kill them at once", 30)  # the graceful stop is under way (the replica ignores it)
    assert run.proc.poll() is None and carrying(marker_of(run))
    started = time.monotonic()
    run.signal(signal.SIGINT)
    assert run.finish(30) == 130, run.output
    assert time.monotonic() - started < 15
    assert "again to kill them at once" in run.output
    assert not carrying(marker_of(run))


def test_a_closed_pipe_does_not_end_or_fail_the_run(tmp_path) -> None:
    """`t9k-jobs run job.yaml | head -n 2`: once head has gone, the run goes on quietly (its logs
    are in the run dir) and exits with the job's result, 0 here, without a traceback."""
    import subprocess
    import sys

    import yaml

    chatty = "import time\nfor i in range(3000):\n    print('line', i, flush=True)\n"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(generic("chatty", py(chatty), replicas=1)))
    script = (
        f"{sys.executable} -m t9k_jobs.cli run {path} --run-dir {tmp_path / 'run'} 2>{tmp_path / 'err'} | head -n 2; "
        'echo "run exit ${PIPESTATUS[0]}"'
    )
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert "run exit 0" in out.stdout, (out.stdout, (tmp_path / "err").read_text())
    assert "Traceback" not in (tmp_path / "err").read_text()
    assert "line 2999" in (tmp_path / "run" / "chatty-worker-0.pytorch.log").read_text()


def test_the_grace_period_is_counted_down(start) -> None:
    """A replica that ignores SIGTERM with terminationGracePeriodSeconds 3: one Ctrl-C says when
    SIGKILL comes and counts down; the replica is killed when the grace period is over."""
    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(600)\n"
    manifest = generic("slow-stop", py(stubborn), replicas=1)
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["terminationGracePeriodSeconds"] = 3
    run = start(manifest)
    run.wait_for(lambda s: s.get("aggregate", {}).get("running") == 1, timeout=60)
    wait_until(lambda: "ready" in replica_log(run, "slow-stop"), "the replica to ignore SIGTERM", 30)
    run.signal(signal.SIGINT)
    assert run.finish(60) == 130, run.output
    assert "SIGTERM sent, SIGKILL in 3s if they have not ended" in run.output, run.output
    assert "still stopping: SIGKILL in" in run.output, run.output
    assert not carrying(marker_of(run))
