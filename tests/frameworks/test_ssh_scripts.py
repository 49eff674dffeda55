"""The shell the DeepSpeedJob and ColossalAIJob pods run (frameworks/ssh.py, deepspeed.py and
colossalai.py), run for real with /bin/sh: a stop reaches the launcher at once, its exit code is
the container's, a stop while waiting for the workers ends the wait, and a custom command cannot
run after a failed step."""

from __future__ import annotations

import signal
import subprocess
import time

from t9k_jobs.frameworks.ssh import RUN_FUNCTION, WAIT_BANNER_FUNCTION, launcher_script
from tests.helpers import wait_until


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


def test_deepspeed_env_file_carries_values_the_remote_shell_gets_back(tmp_path) -> None:
    """worker-0 writes DeepSpeed's env file from its own environment. deepspeed 0.19 exports each
    line on the remote command line as ``NAME=VALUE``, wrapping VALUE in double quotes when it has
    a character outside ``[\\w@%+=:,./-]`` (docs/launchers.md); what the remote shell gets must be
    the value itself. A value with a newline cannot be carried and is left out, with a warning."""
    import os
    import re

    from t9k_jobs.frameworks.deepspeed import ENV_FILE_COMMAND

    values = {"PLAIN": "abc", "SPACE": "a b", "DOLLAR": "$HOME/x", "TICK": "`id`", "QUOTE": 'say "hi"',
              "BACKSLASH": "c:\\dir", "EMPTY": ""}
    path = tmp_path / "deepspeed_env"
    argv = ["python3", *ENV_FILE_COMMAND[1:3], str(path), *values, "MULTI", "UNSET"]
    out = subprocess.run(argv, env={**os.environ, **values, "MULTI": "a\nb"}, capture_output=True, text=True)
    assert out.returncode == 0 and "MULTI holds a newline" in out.stderr, out.stderr
    exports = []
    for line in path.read_text().splitlines():
        name, value = line.split("=", 1)
        quoted = value if re.fullmatch(r"[\w@%+=:,./-]*", value) else f'"{value}"'
        exports.append(f"export {name}={quoted}")
    printed = subprocess.run(
        ["/bin/sh", "-c", "; ".join(exports) + "; " + "; ".join(f'printf "%s\\0" "${n}"' for n in values)],
        capture_output=True, text=True, env={"HOME": "/nowhere"},
    ).stdout.split("\0")[:-1]
    assert dict(zip(values, printed)) == values
    assert "MULTI" not in path.read_text() and "UNSET" not in path.read_text()


SERVER = """import socket, sys, time
s = socket.create_server(("127.0.0.1", 0)); print(s.getsockname()[1], flush=True)
conns = []
while True:
    c, _ = s.accept(); conns.append(c)
"""


def test_a_worker_ends_once_its_launcher_has_closed_its_sessions() -> None:
    """Sessions open for `busy` seconds, then none for `idle` seconds: the worker is done (exit 0).
    A probe that comes and goes at once does not count as the launcher's use."""
    import os
    import socket

    from t9k_jobs.frameworks.ssh import worker_watch

    server = subprocess.Popen(["python3", "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        watch = subprocess.Popen(
            ["/bin/sh", "-c", f"t9k_sshd={server.pid}; {worker_watch(port, busy=2, idle=3)}"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ},
        )
        socket.create_connection(("127.0.0.1", port)).close()  # a probe
        time.sleep(4)
        assert watch.poll() is None, "a probe alone must not end the worker"
        session = socket.create_connection(("127.0.0.1", port))
        time.sleep(6)  # the session spans several of the watch's one-second looks, even on a loaded machine
        assert watch.poll() is None, "a worker in use must not end"
        session.close()
        assert watch.wait(timeout=60) == 0
        assert "this worker is done" in watch.stderr.read()
        assert server.wait(timeout=10) is not None  # the server (sshd) was stopped
    finally:
        server.kill()


def test_a_refused_key_fails_the_wait_at_once_with_sshs_words(tmp_path) -> None:
    """A real sshd that does not know the client's key: the launcher's wait ends at once with ssh's
    own "Permission denied", instead of reading "sshd not reachable" after 10 minutes (the old loop
    sent ssh's errors to /dev/null and retried everything)."""
    import os
    import socket

    from t9k_jobs.frameworks.ssh import WAIT_SSH_FUNCTION
    from t9k_jobs.local.checks import ensure_sshd_privsep_dir
    from t9k_jobs.sshkeys import generate_ssh_keypair

    if not os.access("/usr/sbin/sshd", os.X_OK):
        raise AssertionError("this test needs OpenSSH's server (/usr/sbin/sshd): scripts/test.sh installs it as root")
    ensure_sshd_privsep_dir()  # as a local run does before its workers' sshds start
    server_keys, other_keys = generate_ssh_keypair(), generate_ssh_keypair()
    files = {"host": server_keys["id_ed25519"], "auth": server_keys["authorized_keys"], "client": other_keys["id_ed25519"]}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sshd = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null", "-p", str(port), "-o", "ListenAddress=127.0.0.1",
         "-h", str(tmp_path / "host"), "-o", f"AuthorizedKeysFile={tmp_path / 'auth'}", "-o", "StrictModes=no",
         "-o", "PidFile=none"],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        # ssh reads ~/.ssh/config of the passwd home, not $HOME: a wrapper first on PATH gives it ours.
        (tmp_path / "config").write_text(
            f"Host worker\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {tmp_path / 'client'}\n"
            "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
        )
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "ssh").write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {tmp_path / "config"} "$@"\n')
        (tmp_path / "bin" / "ssh").chmod(0o755)

        def listening() -> bool:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()  # OSError until it listens
            return True

        wait_until(listening, "sshd to listen", 30, ignore=(OSError,))
        started = time.monotonic()
        out = subprocess.run(
            ["/bin/sh", "-c", f"{WAIT_SSH_FUNCTION}; t9k_wait_sshd worker"],
            env={**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"},
            capture_output=True, text=True, timeout=120,
        )
        assert out.returncode == 1, out
        assert "refused the job's key" in out.stderr and "Permission denied" in out.stderr, out.stderr
        assert time.monotonic() - started < 30  # ssh's own timeouts, not the 10-minute retry
    finally:
        sshd.kill()
        sshd.wait()
