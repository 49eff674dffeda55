"""DeepSpeedJob and ColossalAIJob: sshd workers, a launcher, a hostfile and an ssh key Secret.

Reference §4 (DeepSpeedJob) and §5 (ColossalAIJob). The key pair is made when the Secret is
created (:func:`t9k_jobs.sshkeys.materialize`); the engine only asks for it, so it stays pure.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

from ..api.kinds import ColossalAIJob, DeepSpeedJob, JobBase, extra_launch_args
from ..local.rank_gpus import DEVICES_ENV
from .base import (
    ANNOTATION_GENERATE,
    BuildContext,
    Final,
    Framework,
    Outcome,
    ReplicaGroup,
    add_env,
    child_meta,
    container,
    container_gpus,
    training_container,
)

SSH_PORT = 22
SSH_SERVICE_PORTS = ({"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT},)
DEEPSPEED_SSHD = "/usr/sbin/sshd"
HOSTFILE_PATH = "/t9k/hostfile"
DEEPSPEED_ENV_PATH = "/root/.deepspeed_env"
DEEPSPEED_SSH_PATH = "/root/.ssh"
#: Where the key Secret is mounted, read-only. A Secret volume's directory is world-writable and its
#: files are symlinks, which OpenSSH's default ``StrictModes yes`` refuses; the pod copies the files
#: into the ssh directory (``/root/.ssh``, or ColossalAIJob's ``authMountPath``) with 0700/0600.
SSH_SECRET_PATH = "/t9k/ssh"
#: Port of the torch.distributed master that ``colossalai run`` starts on worker-0.
COLOSSALAI_MASTER_PORT = 29500
#: deepspeed's default torch.distributed port (a local run gives worker-0 a free one instead).
DEEPSPEED_MASTER_PORT = 29500
#: How long a launcher waits for the workers' sshd (seconds) before it fails.
SSHD_WAIT_SECONDS = 600
#: The script a local run gives ``deepspeed`` in place of the training script: it reads the slots
#: deepspeed gives each rank against its worker's devices, then starts the rank
#: (:mod:`t9k_jobs.local.rank_gpus`).
RANK_GPUS_SCRIPT = str(Path(__file__).resolve().parent.parent / "local" / "rank_gpus.py")
#: What a local ColossalAIJob worker's sshd sets in every session (sshd's ``SetEnv``): the worker's
#: devices, which the run puts in the worker's ``T9K_JOBS_GPUS`` (``$(...)`` is expanded when the
#: worker starts, as Kubernetes expands a container's command).
LOCAL_SESSION_GPU_ENV = (
    f"CUDA_VISIBLE_DEVICES=$({DEVICES_ENV})",
    "CUDA_DEVICE_ORDER=PCI_BUS_ID",
    f"{DEVICES_ENV}=$({DEVICES_ENV})",
)
#: What a local ColossalAIJob launcher does not hand ``colossalai run``, which exports the
#: launcher's environment into every rank's session: the launcher's own devices.
LAUNCHER_OWN_GPU_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", DEVICES_ENV)


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


def _mount(pod: dict[str, Any], c: dict[str, Any], volume: dict[str, Any], mounts: list[dict[str, Any]]) -> None:
    volumes = pod["spec"].setdefault("volumes", [])
    if all(v.get("name") != volume["name"] for v in volumes):
        volumes.append(volume)
    c.setdefault("volumeMounts", []).extend(mounts)


def mount_ssh(job: JobBase, pod: dict[str, Any], c: dict[str, Any]) -> None:
    """Mount the ssh Secret (private key, public key, authorized_keys, client config) read-only at
    :data:`SSH_SECRET_PATH`; :func:`install_keys` copies it where ssh and sshd look."""
    _mount(
        pod,
        c,
        {"name": "t9k-ssh", "secret": {"secretName": ssh_secret_name(job), "defaultMode": 0o600}},
        [{"name": "t9k-ssh", "mountPath": SSH_SECRET_PATH, "readOnly": True}],
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


_WRITE_ENV_FILE_PY = """import os, sys
lines = []
for name in sys.argv[2:]:
    value = os.environ.get(name)
    if value is None:
        continue
    if "\\n" in value:
        print(f"t9k-jobs: {name} holds a newline; DeepSpeed's env file has one NAME=VALUE a line,"
              " so the other workers do not get it", file=sys.stderr)
        continue
    lines.append(name + "=" + "".join("\\\\" + c if c in '\\\\$`"' else c for c in value) + "\\n")
with open(sys.argv[1], "w") as f:
    f.write("".join(lines))
"""

#: argv prefix (the names follow) that writes DeepSpeed's env file, ``/root/.deepspeed_env``, on
#: worker-0 from the container's own environment, so ``valueFrom`` variables arrive resolved. The
#: launcher puts a value with characters outside ``[\w@%+=:,./-]`` in double quotes on the remote
#: command line (deepspeed 0.19), so backslash, ``$``, backquote and ``"`` are escaped with a
#: backslash; a value with a newline cannot be written in that file (one ``NAME=VALUE`` a line)
#: and is left out, with a line on stderr.
ENV_FILE_COMMAND = ("python3", "-c", _WRITE_ENV_FILE_PY, DEEPSPEED_ENV_PATH)


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


class DeepSpeedFramework(Framework[DeepSpeedJob]):
    kind = "DeepSpeedJob"
    restart_scope = "all"

    def groups(self, job: DeepSpeedJob) -> list[ReplicaGroup]:
        worker = job.spec.worker
        replicas = worker.replicas
        if job.spec.elastic_enabled and job.spec.elastic is not None:
            replicas = job.spec.elastic.effective_replicas(replicas)
        return [
            ReplicaGroup(
                type="worker",
                replicas=replicas,
                template=worker.template,
                restart_policy=worker.restart_policy,
                backoff_limit=job.spec.run_policy.backoff_limit,
                training_container=training_container(worker.template, ("worker",)),
                # T9k's debug default, `/usr/sbin/sshd -D`, made to work in a stock image (keys, /run/sshd).
                debug_command=tuple(sshd_worker_command(DEEPSPEED_SSHD, DEEPSPEED_SSH_PATH, watch=False)),
                service_ports=SSH_SERVICE_PORTS,
            )
        ]

    def clean_up(self, job: DeepSpeedJob) -> tuple[str, frozenset[str]]:
        return job.spec.run_policy.clean_up_policy, frozenset()

    def active_deadline_seconds(self, job: DeepSpeedJob) -> int | None:
        return job.spec.run_policy.active_deadline_seconds

    def master(self, job: DeepSpeedJob, groups: list[ReplicaGroup]) -> tuple[str, int] | None:
        return ("worker", 0)

    def pod_group_min_member(self, job: DeepSpeedJob, groups: list[ReplicaGroup]) -> int:
        if job.spec.elastic_enabled and job.spec.elastic is not None and job.spec.elastic.min_replicas:
            return job.spec.elastic.min_replicas
        return super().pod_group_min_member(job, groups)

    def relaunch_on_change(self, job: DeepSpeedJob, group: ReplicaGroup, index: int, ctx: BuildContext) -> bool:
        """Elastic: a change of ``expectedReplicas`` rewrites the hostfile and relaunches the
        launcher, worker-0 (reference §4.7); locally every worker runs a launcher of its own."""
        return job.spec.elastic_enabled and (index == 0 or ctx.addressing.local)

    def slots(self, job: DeepSpeedJob) -> int:
        """Slots (ranks) per worker: ``slotsPerWorker`` (or ``slotPerWorker``) when given, else the
        training container's ``nvidia.com/gpu`` limit (its request without one), else 1. T9k:
        slots are "normally the number of GPUs" of a worker; ``procPerNode: gpu`` counts alike."""
        explicit = job.spec.config.slots
        if explicit is not None:
            return explicit
        template = job.spec.worker.template
        name = training_container(template, ("worker",))
        c = next(c for c in template["spec"]["containers"] if c.get("name") == name)
        return max(1, container_gpus(c))

    def hostfile(self, job: DeepSpeedJob, ctx: BuildContext) -> str:
        """DeepSpeed hostfile: ``<worker host> slots=<slots>`` per worker (:meth:`slots`). Locally
        every host is this machine, so the lines name the workers (``worker-<i>``): with
        ``--no_ssh`` the names are only the nodes' keys, and deepspeed refuses a host twice."""
        count = self.groups_in(job, ctx)[0].replicas
        slots = self.slots(job)
        if ctx.addressing.local:
            return "".join(f"worker-{i} slots={slots}\n" for i in range(count))
        return "".join(f"{ctx.addressing.host(job.name, 'worker', i)} slots={slots}\n" for i in range(count))

    def env_names(self, job: DeepSpeedJob) -> list[str]:
        """Names of the training container's env vars (literal and ``valueFrom``) that the
        launcher passes to every worker's ranks; none with ``disableCustomEnv`` (reference §4.1)."""
        if job.spec.disable_custom_env:
            return []
        template = job.spec.worker.template
        name = training_container(template, ("worker",))
        c = next(c for c in template["spec"]["containers"] if c.get("name") == name)
        return [e["name"] for e in c.get("env") or [] if isinstance(e, dict) and e.get("name")]

    def extra_children(self, job: DeepSpeedJob, groups: list[ReplicaGroup], ctx: BuildContext) -> list[dict[str, Any]]:
        return launch_children(job, {"hostfile": self.hostfile(job, ctx)})

    def launch_command(self, job: DeepSpeedJob) -> list[str]:
        """The ``deepspeed`` command worker-0 runs (reference §4.3)."""
        return self._launch(job, [f"--hostfile={HOSTFILE_PATH}", "--launcher=pdsh"])

    def local_launch_command(self, job: DeepSpeedJob, index: int, ctx: BuildContext) -> list[str]:
        """What worker ``index`` runs in a local run: deepspeed's own launcher in its no-ssh mode,
        once per worker (``--no_ssh --node_rank=<index>``), all with the run's hostfile and worker-0
        as the master: no sshd, no root, and each worker's ranks stay in its process group. The
        launcher reads no env file in this mode; each worker has the container's env itself.

        GPUs: deepspeed's launch.py sets every rank's ``CUDA_VISIBLE_DEVICES`` to its node's slots
        (``0,1,...``), indices that in a pod count the container's own devices. Locally the
        training script is therefore :data:`RANK_GPUS_SCRIPT`, which reads them against the
        worker's devices (worker-1 given GPUs 2,3 has ranks that see ``2,3``; a worker given none,
        ranks that see none) and then starts the rank as deepspeed would have (script, ``-m``
        module or ``--no_python`` program, with ``--local_rank``)."""
        hostfile = ctx.addressing.child_file("ConfigMap", config_map_name(job), "hostfile")
        master_port = ctx.addressing.port(job.name, "worker", 0, "deepspeed", DEEPSPEED_MASTER_PORT)
        return self._launch(
            job,
            [
                f"--hostfile={hostfile}",
                f"--num_nodes={self.groups_in(job, ctx)[0].replicas}",
                "--no_ssh",
                f"--node_rank={index}",
                f"--master_addr={ctx.addressing.host(job.name, 'worker', 0)}",
                f"--master_port={master_port}",
            ],
            rank_script=RANK_GPUS_SCRIPT,
        )

    def _launch(self, job: DeepSpeedJob, transport: list[str], rank_script: str | None = None) -> list[str]:
        """``deepspeed`` with ``transport``, the job's flags and what to run. ``rank_script``: a
        script deepspeed runs instead, given ``python|module|exec`` and the job's ``run`` (the
        local run's :data:`RANK_GPUS_SCRIPT`)."""
        config = job.spec.config
        cmd = ["deepspeed", *transport]
        if not config.local_rank:
            cmd.append("--no_local_rank")
        if config.autotune != "none":
            cmd.append(f"--autotuning={config.autotune}")
        cmd += list(config.other_args)
        run = config.run
        assert run is not None
        if rank_script is not None:
            modes = (("python", run.python), ("module", run.module), ("exec", run.exec))
            mode, target = next((m, t) for m, t in modes if t is not None)
            return cmd + [rank_script, mode, *target]  # type: ignore[list-item]
        if run.python is not None:
            cmd += list(run.python)  # type: ignore[arg-type]
        elif run.module is not None:
            cmd += ["--module", *run.module]  # type: ignore[list-item]
        elif run.exec is not None:
            cmd += ["--no_python", *run.exec]  # type: ignore[list-item]
        return cmd

    def decorate(
        self, job: DeepSpeedJob, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """Mount keys, hostfile and env file; worker-0 launches ``deepspeed``, the others run sshd.

        worker-0: keys installed, sshd in the background (its log on the container's stderr),
        wait for every worker's sshd, then ``deepspeed`` (or ``sh -c customCommand``) as a child
        whose exit code is the container's and which gets the container's SIGTERM.
        """
        c = container(pod, group.training_container)
        if ctx.addressing.local:
            c["command"], c["args"] = self.local_launch_command(job, index, ctx), []
            return
        mount_ssh(job, pod, c)
        _mount(
            pod,
            c,
            {"name": "t9k-launch", "configMap": {"name": config_map_name(job)}},
            [{"name": "t9k-launch", "mountPath": HOSTFILE_PATH, "subPath": "hostfile", "readOnly": True}],
        )
        c["args"] = []
        if index != 0:
            c["command"] = sshd_worker_command(DEEPSPEED_SSHD, DEEPSPEED_SSH_PATH)
            return
        hosts = [ctx.addressing.host(job.name, "worker", i) for i in range(group.replicas)]
        custom = job.spec.config.custom_command
        launch = ["/bin/sh", "-c", custom] if custom else self.launch_command(job)
        prelude = (
            f"{install_keys(DEEPSPEED_SSH_PATH)} && {SSHD_PRELUDE} && "
            f"{{ {shlex.join(sshd_argv(DEEPSPEED_SSHD, DEEPSPEED_SSH_PATH))} & }} && "
            + shlex.join([*ENV_FILE_COMMAND, *self.env_names(job)])
        )
        c["command"] = launcher_script(prelude, WAIT_SSH_FUNCTION, hosts, launch)


class ColossalAIFramework(Framework[ColossalAIJob]):
    kind = "ColossalAIJob"

    def launcher_template(self, job: ColossalAIJob) -> dict[str, Any]:
        """The launcher pod template: from ``spec.launcher`` (one container named ``launcher``)
        or, in the older form, the ``launcher`` replica's template."""
        legacy = job.spec.legacy_launcher_template
        if legacy is not None:
            return copy.deepcopy(legacy)
        launcher = job.spec.launcher
        assert launcher is not None
        worker = next(
            c for c in job.spec.worker.template["spec"]["containers"] if c.get("name") == "worker"  # type: ignore[union-attr]
        )
        c: dict[str, Any] = {"name": "launcher", "image": launcher.image or worker.get("image")}
        if launcher.working_dir:
            c["workingDir"] = launcher.working_dir
        if launcher.env:
            c["env"] = copy.deepcopy(launcher.env)
        if launcher.resources:
            c["resources"] = copy.deepcopy(launcher.resources)
        return {"spec": {"containers": [c]}}

    def groups(self, job: ColossalAIJob) -> list[ReplicaGroup]:
        assert job.spec.worker is not None  # the model fills it in from the older form too
        launcher = self.launcher_template(job)
        return [
            ReplicaGroup(
                type="launcher",
                replicas=1,
                template=launcher,
                restart_policy="Never",
                training_container=training_container(launcher, ("launcher",)),
                indexed=False,
                in_pod_group=False,
                service_ports=None,
            ),
            ReplicaGroup(
                type="worker",
                replicas=job.spec.worker.replicas,
                template=job.spec.worker.template,
                restart_policy="Never",
                training_container="worker",
                service_ports=SSH_SERVICE_PORTS,
            ),
        ]

    def clean_up(self, job: ColossalAIJob) -> tuple[str, frozenset[str]]:
        """``cleanUpWorkers`` deletes every worker; the launcher is never cleaned up (T9k docs)."""
        return ("All" if job.spec.run_policy.clean_up else "None"), frozenset({"launcher"})

    def master(self, job: ColossalAIJob, groups: list[ReplicaGroup]) -> tuple[str, int] | None:
        return ("launcher", 0)

    def outcome(
        self, job: ColossalAIJob, groups: list[ReplicaGroup], finals: dict[tuple[str, int], Final]
    ) -> Outcome | None:
        """The launcher decides (T9k docs, reference §5.3), but when every worker has ended while
        the launcher still runs, nothing can train any more (workers are never restarted, §5.4):
        the job fails at once instead of showing Running while the launcher waits on dead sshds."""
        decided = super().outcome(job, groups, finals)
        if decided is not None:
            return decided
        workers = next(g for g in groups if g.type == "worker")
        ended = [finals.get(("worker", i)) for i in range(workers.replicas)]
        if workers.replicas and all(f is not None for f in ended):
            why = "; ".join(f.describe() for f in ended if f is not None)
            return Outcome(False, f"{job.kind} {job.name} has failed: every worker ended before the launcher ({why})")
        return None

    def hostfile(self, job: ColossalAIJob, ctx: BuildContext) -> str:
        """One worker host a line. Locally each worker's sshd has a loopback address of its own:
        colossalai runs a host that resolves to this machine's own address locally, without ssh."""
        count = job.spec.worker.replicas  # type: ignore[union-attr]
        host = ctx.addressing.own_address if ctx.addressing.local else ctx.addressing.host
        return "".join(f"{host(job.name, 'worker', i)}\n" for i in range(count))

    def extra_children(self, job: ColossalAIJob, groups: list[ReplicaGroup], ctx: BuildContext) -> list[dict[str, Any]]:
        return launch_children(job, {"hostfile": self.hostfile(job, ctx)})

    def launch_command(self, job: ColossalAIJob, ctx: BuildContext) -> list[str]:
        """``colossalai run`` over the workers' hostfile (reference §5.2). Locally the hostfile is
        a file of the run, the workers' sshd listen on their own loopback addresses on one port
        (``--ssh-port``), and the master port is a free one."""
        worker = job.spec.worker
        assert worker is not None
        if ctx.addressing.local:
            where = [
                f"--hostfile={ctx.addressing.child_file('ConfigMap', config_map_name(job), 'hostfile')}",
                f"--ssh-port={self.local_ssh_port(job, ctx)}",
                f"--master_addr={ctx.addressing.own_address(job.name, 'worker', 0)}",
                f"--master_port={ctx.addressing.port(job.name, 'worker', 0, 'colossalai', COLOSSALAI_MASTER_PORT)}",
            ]
        else:
            where = [
                f"--hostfile={HOSTFILE_PATH}",
                f"--master_addr={ctx.addressing.host(job.name, 'worker', 0)}",
                f"--master_port={COLOSSALAI_MASTER_PORT}",
            ]
        cmd = ["colossalai", "run", f"--nproc_per_node={worker.proc_per_worker}", *where]
        if worker.torch_args:
            cmd.append("--extra_launch_args=" + extra_launch_args(worker.torch_args))
        return cmd + list(worker.command)

    def decorate(
        self, job: ColossalAIJob, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """Workers serve ssh (:func:`sshd_worker_command`); the launcher installs the client key,
        waits for every worker's sshd and runs ``colossalai run`` as a child."""
        assert job.spec.worker is not None  # the model fills it in from the older form too
        c = container(pod, group.training_container)
        if ctx.addressing.local:
            self._decorate_local(job, group, index, c, ctx)
            return
        mount_ssh(job, pod, c)
        auth = job.spec.ssh.mount_path
        c["args"] = []
        if group.type == "worker":
            c["command"] = sshd_worker_command(job.spec.ssh.sshd_path, auth)
            return
        _mount(
            pod,
            c,
            {"name": "t9k-launch", "configMap": {"name": config_map_name(job)}},
            [{"name": "t9k-launch", "mountPath": HOSTFILE_PATH, "subPath": "hostfile", "readOnly": True}],
        )
        hosts = [ctx.addressing.host(job.name, "worker", i) for i in range(job.spec.worker.replicas)]
        add_env(c, {"MASTER_ADDR": hosts[0] if hosts else "", "MASTER_PORT": str(COLOSSALAI_MASTER_PORT)})
        c["command"] = launcher_script(install_keys(auth), WAIT_BANNER_FUNCTION, hosts, self.launch_command(job, ctx))


    def local_ssh_port(self, job: ColossalAIJob, ctx: BuildContext) -> int:
        """The one port every worker's sshd listens on in a local run (``colossalai run --ssh-port``)."""
        return ctx.addressing.port(job.name, "worker", 0, "ssh", SSH_PORT)

    def _decorate_local(
        self, job: ColossalAIJob, group: ReplicaGroup, index: int, c: dict[str, Any], ctx: BuildContext
    ) -> None:
        """A local run: each worker is a real sshd of its own (the sshd of ``ssh.sshdPath``) on its
        own loopback address, with the job's key pair as its host key and ``authorized_keys``
        from the run directory and no system configuration (``-f /dev/null``); the launcher runs
        ``colossalai run`` with ``HOME`` in the run directory, where paramiko finds the key.

        GPUs: the ranks run in the workers' ssh sessions, which in a pod see the worker
        container's devices. A session gets sshd's login environment, not the worker's, so each
        worker's sshd sets its devices in every session (``SetEnv``, sshd_config(5):
        :data:`LOCAL_SESSION_GPU_ENV`). ``colossalai run`` exports the launcher's whole
        environment into the sessions after that (colossalai 0.5, ``cli/launcher``: every
        non-empty variable), so the launcher leaves out its own devices
        (:data:`LAUNCHER_OWN_GPU_ENV`), as a pod's devices stay in the pod."""
        key = ctx.addressing.child_file("Secret", ssh_secret_name(job), "id_ed25519")
        keys = str(Path(key or "").parent)
        c["args"] = []
        if group.type == "worker":
            c["command"] = [
                job.spec.ssh.sshd_path, "-D", "-e", "-f", "/dev/null",
                "-p", str(self.local_ssh_port(job, ctx)),
                "-o", f"ListenAddress={ctx.addressing.own_address(job.name, 'worker', index)}",
                "-h", f"{keys}/id_ed25519",
                "-o", f"AuthorizedKeysFile={keys}/authorized_keys",
                "-o", "StrictModes=no",  # the run directory's modes are the user's
                "-o", "PidFile=none",
                "-o", "SetEnv=" + " ".join(LOCAL_SESSION_GPU_ENV),
            ]  # fmt: skip
            return
        port = self.local_ssh_port(job, ctx)
        workers = [f"{ctx.addressing.own_address(job.name, 'worker', i)}:{port}" for i in range(job.spec.worker.replicas)]
        prelude = (
            f"unset {' '.join(LAUNCHER_OWN_GPU_ENV)} && "
            f'mkdir -p -m 700 "$HOME/.ssh" && for f in {shlex.quote(keys)}/*; do install -m 600 "$f" "$HOME/.ssh/" || exit 1; done'
        )
        add_env(c, {"HOME": str(Path(keys).parents[2] / "home")})  # <run dir>/home
        c["command"] = launcher_script(prelude, WAIT_BANNER_FUNCTION, workers, self.launch_command(job, ctx))

