"""ColossalAIJob: sshd workers and a launcher pod that runs ``colossalai run`` over them.

Reference §5. The ssh key Secret, the sshd workers and the launcher's shell are shared with
DeepSpeedJob (:mod:`.ssh`); this module says what ColossalAI launches.
"""

from __future__ import annotations

import copy
import shlex
from pathlib import Path
from typing import Any

from ..api.kinds import ColossalAIJob, extra_launch_args
from .base import BuildContext, Final, Framework, Outcome, ReplicaGroup, add_env, container, training_container
from .rank_gpus import DEVICES_ENV
from .ssh import (
    HOSTFILE_PATH,
    SSH_PORT,
    SSH_SERVICE_PORTS,
    WAIT_BANNER_FUNCTION,
    config_map_name,
    install_keys,
    launch_children,
    launcher_script,
    mount_hostfile,
    mount_ssh,
    ssh_secret_name,
    sshd_worker_command,
)

#: Port of the torch.distributed master that ``colossalai run`` starts on worker-0.
COLOSSALAI_MASTER_PORT = 29500
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
        mount_hostfile(job, pod, c)
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
