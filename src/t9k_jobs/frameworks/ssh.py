"""What DeepSpeedJob and ColossalAIJob share: the ssh key Secret, sshd workers and launcher scripts.

Both kinds run sshd on their workers and one launcher that reaches them over ssh with a hostfile
(reference §4 and §5); :mod:`.deepspeed` and :mod:`.colossalai` say what each launches. The key
pair is made when the Secret is created (:func:`t9k_jobs.sshkeys.materialize`); the engine only
asks for it, so it stays pure.
"""

from __future__ import annotations

import shlex
from typing import Any

from ..api.common import ANNOTATION_GENERATE
from ..api.kinds import JobBase
from .base import child_meta

SSH_PORT = 22
SSH_SERVICE_PORTS = ({"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT},)
HOSTFILE_PATH = "/t9k/hostfile"
#: Where the key Secret is mounted, read-only. A Secret volume's directory is world-writable and its
#: files are symlinks, which OpenSSH's default ``StrictModes yes`` refuses; the pod copies the files
#: into the ssh directory (``/root/.ssh``, or ColossalAIJob's ``authMountPath``) with 0700/0600.
SSH_SECRET_PATH = "/t9k/ssh"
#: How long a launcher waits for the workers' sshd (seconds) before it fails.
SSHD_WAIT_SECONDS = 600


def ssh_secret_name(job: JobBase) -> str:
    return f"{job.name}-ssh"


def config_map_name(job: JobBase) -> str:
    return f"{job.name}-launch"


def ssh_secret(job: JobBase) -> dict[str, Any]:
    """The Secret holding the job's ssh key pair; its data is generated on creation."""
    meta = child_meta(job, ssh_secret_name(job))
    meta["annotations"] = {ANNOTATION_GENERATE: "ssh-keypair"}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": {}}


def launch_children(job: JobBase, files: dict[str, str]) -> list[dict[str, Any]]:
    """The ConfigMap ``<job>-launch`` holding ``files`` (hostfile, env file) and the ssh Secret."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": child_meta(job, config_map_name(job)), "data": files}
    return [cm, ssh_secret(job)]


def mount_volume(pod: dict[str, Any], c: dict[str, Any], volume: dict[str, Any], mounts: list[dict[str, Any]]) -> None:
    volumes = pod["spec"].setdefault("volumes", [])
    if all(v.get("name") != volume["name"] for v in volumes):
        volumes.append(volume)
    c.setdefault("volumeMounts", []).extend(mounts)


def mount_ssh(job: JobBase, pod: dict[str, Any], c: dict[str, Any]) -> None:
    """Mount the ssh Secret (private key, public key, authorized_keys, client config) read-only at
    :data:`SSH_SECRET_PATH`; :func:`install_keys` copies it where ssh and sshd look."""
    mount_volume(
        pod,
        c,
        {"name": "t9k-ssh", "secret": {"secretName": ssh_secret_name(job), "defaultMode": 0o600}},
        [{"name": "t9k-ssh", "mountPath": SSH_SECRET_PATH, "readOnly": True}],
    )


def mount_hostfile(job: JobBase, pod: dict[str, Any], c: dict[str, Any]) -> None:
    """Mount the hostfile of the ConfigMap ``<job>-launch`` read-only at :data:`HOSTFILE_PATH`."""
    mount_volume(
        pod,
        c,
        {"name": "t9k-launch", "configMap": {"name": config_map_name(job)}},
        [{"name": "t9k-launch", "mountPath": HOSTFILE_PATH, "subPath": "hostfile", "readOnly": True}],
    )


def install_keys(auth: str) -> str:
    """Shell that copies the key Secret into the ssh directory ``auth`` with the modes OpenSSH's
    ``StrictModes`` wants (directory 0700, files 0600, owned by the user). Fails with the reason."""
    a = shlex.quote(auth)
    return f'install -d -m 700 {a} && for f in {SSH_SECRET_PATH}/*; do install -m 600 "$f" {a}/ || exit 1; done'


def sshd_argv(sshd: str, auth: str, foreground: bool = True) -> list[str]:
    """sshd in the foreground (``-D``) logging to stderr (``-e``, so ``kubectl logs`` shows who
    connected and why a key was refused), with the job's ``authorized_keys`` wherever ``auth`` is."""
    return [sshd, *(["-D"] if foreground else []), "-e", "-o", f"AuthorizedKeysFile={auth}/authorized_keys"]


#: Shell that readies a stock image for sshd: the privilege-separation directory (Debian's sshd
#: exits 255 without ``/run/sshd``) and host keys when the image has none.
SSHD_PRELUDE = "mkdir -p -m 755 /run/sshd && { ls /etc/ssh/ssh_host_*_key >/dev/null 2>&1 || ssh-keygen -A >&2; }"


#: Seconds of ssh sessions that mark a worker as used by its launcher, and seconds without any
#: session after which such a worker has served its launcher and ends (exit 0).
WORKER_BUSY_SECONDS, WORKER_IDLE_SECONDS = 10, 20


def sshd_worker_command(sshd: str, auth: str, port: int = SSH_PORT, watch: bool = True) -> list[str]:
    """A worker that only serves ssh to its launcher: keys installed, sshd logging to the pod's
    log, and a watch that ends the worker (exit 0) once the launcher is done with it: after
    ssh sessions for :data:`WORKER_BUSY_SECONDS` (the launcher's ranks run in them; its sshd
    probes last a moment), :data:`WORKER_IDLE_SECONDS` without any. So a finished job's workers
    free their GPUs by themselves and keep their pods and logs, whatever the clean-up policy
    (docs/decisions.md). SIGTERM stops sshd and the worker; if sshd itself fails, the worker
    fails with its exit code. Sessions are counted from ``/proc/net/tcp{,6}`` (state 01 on the
    local port): POSIX sh only, nothing the image might lack. Without ``watch`` (debug mode:
    a user logs in and out at will) sshd is the container's main process and nothing ends it."""
    prepare = f"{install_keys(auth)} && {SSHD_PRELUDE}"
    if not watch:
        return ["/bin/sh", "-c", f"{prepare} && exec {shlex.join(sshd_argv(sshd, auth))}"]
    script = "; ".join([f"{prepare} || exit 1", f"{shlex.join(sshd_argv(sshd, auth))} & t9k_sshd=$!", worker_watch(port)])
    return ["/bin/sh", "-c", script]


def worker_watch(port: int, busy: int = WORKER_BUSY_SECONDS, idle: int = WORKER_IDLE_SECONDS) -> str:
    """Shell that watches the server ``$t9k_sshd`` listening on ``port`` (see
    :func:`sshd_worker_command`): exits 0 once sessions were open ``busy`` seconds and then none
    for ``idle`` seconds, 143 on SIGTERM (after stopping the server), else the server's code."""
    return "; ".join(
        [
            "trap 'kill -TERM $t9k_sshd 2>/dev/null; wait $t9k_sshd; exit 143' TERM INT",
            "t9k_sessions() { n=0; for f in /proc/net/tcp /proc/net/tcp6; do [ -r $f ] || continue; "
            f'while read -r _ l _ st _; do case "$l $st" in *:{port:04X}\\ 01) n=$((n+1));; esac; done < $f; '
            "done; echo $n; }",
            "busy=0; quiet=0",
            "while kill -0 $t9k_sshd 2>/dev/null; do "
            'if [ "$(t9k_sessions)" -gt 0 ]; then busy=$((busy+1)); quiet=0; else quiet=$((quiet+1)); fi; '
            f"if [ $busy -ge {busy} ] && [ $quiet -ge {idle} ]; then "
            'echo "t9k-jobs: the launcher has closed its sessions; this worker is done" >&2; '
            "kill -TERM $t9k_sshd; wait $t9k_sshd; exit 0; fi; sleep 1; done",
            "wait $t9k_sshd",
        ]
    )


#: Shell functions ``t9k_bg CMD...`` (run CMD as a child, pass SIGTERM/SIGINT on to it, return its
#: exit code) and ``t9k_run CMD...`` (the same, then exit with that code). A shell that is PID 1 of a
#: container ignores SIGTERM and runs its traps only after the foreground command ends, so every
#: stop used to wait out the grace period; a child in the background gets the signal at once.
RUN_FUNCTION = (
    "t9k_bg() { t9k_child=; t9k_stop=; "
    'trap \'t9k_stop=1; [ -n "$t9k_child" ] && kill -TERM "$t9k_child" 2>/dev/null\' TERM INT; '
    '"$@" & t9k_child=$!; [ -n "$t9k_stop" ] && kill -TERM "$t9k_child" 2>/dev/null; '
    'wait "$t9k_child"; t9k_code=$?; '
    'while kill -0 "$t9k_child" 2>/dev/null; do wait "$t9k_child"; t9k_code=$?; done; '
    "trap 'exit 143' TERM INT; return \"$t9k_code\"; }; "
    't9k_run() { t9k_bg "$@"; exit $?; }'
)

#: Shell function ``t9k_wait_sshd HOST...`` for launchers that have an ssh client (DeepSpeed's pdsh
#: needs one): until ``ssh HOST true`` works. A refused key fails at once with ssh's own words;
#: an unreachable sshd (not started yet, its name not in DNS yet) is retried for
#: :data:`SSHD_WAIT_SECONDS`, then fails with the last error.
WAIT_SSH_FUNCTION = (
    "t9k_wait_sshd() { for h in \"$@\"; do n=0; "
    'until out=$(ssh -o BatchMode=yes -o ConnectTimeout=2 "$h" true 2>&1); do '
    'case "$out" in *"Permission denied"*|*"Host key verification failed"*|*"Too many authentication failures"*) '
    'echo "t9k-jobs: sshd on $h refused the job\'s key: $out" >&2; exit 1;; esac; '
    f'n=$((n+1)); if [ "$n" -ge {SSHD_WAIT_SECONDS // 2} ]; then '
    f'echo "t9k-jobs: sshd on $h not reachable after {SSHD_WAIT_SECONDS} s: $out" >&2; exit 1; fi; '
    "sleep 2; done; done; }"
)

_WAIT_BANNER_PY = f"""import socket, sys, time
for host in sys.argv[1:]:
    host, _, port = host.partition(":")
    end, last = time.monotonic() + {SSHD_WAIT_SECONDS}, ""
    while True:
        try:
            with socket.create_connection((host, int(port or {SSH_PORT})), timeout=2) as s:
                s.settimeout(5)
                if s.recv(64).startswith(b"SSH-"):
                    break
                last = "it did not answer as sshd"
        except OSError as exc:
            last = str(exc)
        if time.monotonic() > end:
            sys.exit(f"t9k-jobs: sshd on {{host}} not reachable after {SSHD_WAIT_SECONDS} s: {{last}}")
        time.sleep(2)
"""

#: Shell function ``t9k_wait_sshd HOST...`` for launchers without an ssh client (``colossalai run``
#: speaks ssh itself): until each host's sshd answers with its banner, with Python, which the
#: launcher image has. A refused key then shows in the launcher's own error.
WAIT_BANNER_FUNCTION = (
    't9k_wait_sshd() { "$(command -v python3 || command -v python)" -c '
    + shlex.quote(_WAIT_BANNER_PY)
    + ' "$@"; }'
)


def launcher_script(prelude: str, wait_function: str, hosts: list[str], launch: list[str]) -> list[str]:
    """The launcher's command: ``prelude`` (keys, sshd), then wait for every host's sshd, then
    ``launch``, both as children (:data:`RUN_FUNCTION`): a stop while waiting ends the wait at
    once (exit 143), a stop while training reaches the launcher."""
    script = "; ".join(
        [
            f"{prelude} || exit 1",
            "trap 'exit 143' TERM INT",
            wait_function,
            RUN_FUNCTION,
            "t9k_bg t9k_wait_sshd " + " ".join(shlex.quote(h) for h in hosts) + " || exit $?",
            "t9k_run " + shlex.join(launch),
        ]
    )
    return ["/bin/sh", "-c", script]
