"""ColossalAIJob: sshd workers and a launcher pod that runs ``colossalai run`` over them.

Reference §5. The ssh key Secret, the sshd workers and the launcher's shell are shared with
DeepSpeedJob (:mod:`.ssh`); this module says what ColossalAI launches.
"""

from __future__ import annotations

import copy
from typing import Any

from ..api.common import training_container
from ..api.kinds import ColossalAIJob, extra_launch_args
from .base import Framework
from .launch import SshLaunch, Where
from .pod_launch import launcher_of, ssh_children
from .ssh import SSH_SERVICE_PORTS, WAIT_BANNER_FUNCTION
from .types import BuildContext, Final, Outcome, ReplicaGroup

#: Port of the torch.distributed master that ``colossalai run`` starts on worker-0.
COLOSSALAI_MASTER_PORT = 29500
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

    def ssh_launch(self, job: ColossalAIJob, ctx: BuildContext) -> SshLaunch:
        """What ColossalAI launches: the launcher runs ``colossalai run`` over the workers' sshd
        (``ssh.sshdPath``, keys in ``ssh.authMountPath``), with ``MASTER_ADDR``/``MASTER_PORT``
        in its environment (reference §5.2)."""
        worker = job.spec.worker
        assert worker is not None  # the model fills it in from the older form too
        return SshLaunch(
            launcher_type="launcher",
            workers=worker.replicas,
            sshd=job.spec.ssh.sshd_path,
            auth=job.spec.ssh.mount_path,
            slots=None,
            master_port=COLOSSALAI_MASTER_PORT,
            command=lambda where: self.launch_command(job, where),
            wait=WAIT_BANNER_FUNCTION,
            master_env=True,
        )

    def extra_children(self, job: ColossalAIJob, groups: list[ReplicaGroup], ctx: BuildContext) -> list[dict[str, Any]]:
        return ssh_children(job, self.ssh_launch(job, ctx), ctx)

    def launch_command(self, job: ColossalAIJob, where: Where) -> list[str]:
        """``colossalai run`` over the workers' hostfile (reference §5.2); ``--ssh-port`` when the
        workers' sshd do not listen on 22 (a local run)."""
        worker = job.spec.worker
        assert worker is not None
        port = [f"--ssh-port={where.ssh_port}"] if where.ssh_port is not None else []
        cmd = [
            "colossalai", "run", f"--nproc_per_node={worker.proc_per_worker}",
            f"--hostfile={where.hostfile}", *port,
            f"--master_addr={where.master_addr}", f"--master_port={where.master_port}",
        ]  # fmt: skip
        if worker.torch_args:
            cmd.append("--extra_launch_args=" + extra_launch_args(worker.torch_args))
        return cmd + list(worker.command)

    def decorate(
        self, job: ColossalAIJob, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """The runtime's launcher starts the launch (:class:`~.launch.PodLauncher`: workers serve
        ssh, the launcher installs the client key, waits for every worker's sshd and runs
        ``colossalai run`` as a child)."""
        launcher_of(ctx).decorate(job, self.ssh_launch(job, ctx), group, index, pod, ctx)
