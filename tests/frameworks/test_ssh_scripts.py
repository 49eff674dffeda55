"""The shell the DeepSpeedJob and ColossalAIJob pods run (frameworks/ssh.py), run for real with
/bin/sh: a stop reaches the launcher at once, its exit code is the container's, a stop while
waiting for the workers ends the wait, and a custom command cannot run after a failed step."""

from __future__ import annotations

import signal
import subprocess
import time

from t9k_jobs.frameworks.ssh import RUN_FUNCTION, WAIT_BANNER_FUNCTION, launcher_script


def start(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(["/bin/sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc: subprocess.Popen[str], text: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if text in line:
            return
    raise AssertionError(f"no {text!r} within {timeout} s")


def test_t9k_run_passes_sigterm_on_and_keeps_the_exit_code() -> None:
    child = "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done"
    proc = start(f"{RUN_FUNCTION}; t9k_run /bin/sh -c {subprocess.list2cmdline([child])}")
    wait_for_line(proc, "ready")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 7
    assert "got-term" in proc.stdout.read()


def test_t9k_run_exits_with_the_commands_code() -> None:
    assert subprocess.run(["/bin/sh", "-c", f"{RUN_FUNCTION}; t9k_run /bin/sh -c 'exit 42'"]).returncode == 42


def test_a_stop_while_waiting_for_sshd_ends_the_wait_at_once() -> None:
    # Nothing listens on port 22 of 127.0.0.2: the launcher would wait up to 10 minutes.
    argv = launcher_script("echo ready", WAIT_BANNER_FUNCTION, ["127.0.0.2"], ["true"])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_line(proc, "ready")
    time.sleep(0.5)  # into the wait loop
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 143
    assert time.monotonic() - started < 5


def test_a_failed_prelude_runs_nothing_after_it() -> None:
    """The old worker-0 script pasted `customCommand` after `&&` unquoted: with `a; b` in it, `b`
    ran even when sshd had failed. Now the launch is one quoted argument of `t9k_run`."""
    argv = launcher_script("false", WAIT_BANNER_FUNCTION, [], ["/bin/sh", "-c", "echo custom; echo after-semicolon"])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "custom" not in out.stdout and "after-semicolon" not in out.stdout
    argv = launcher_script("true", WAIT_BANNER_FUNCTION, [], ["/bin/sh", "-c", "echo custom; exit 3"])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 3 and "custom" in out.stdout
