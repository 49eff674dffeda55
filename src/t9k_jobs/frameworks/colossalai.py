"""ColossalAIJob: sshd workers and a launcher pod that runs ``colossalai run`` over them.

Reference §5. The ssh key Secret, the sshd workers and the launcher's shell are shared with
DeepSpeedJob (:mod:`.ssh`); this module says what ColossalAI launches.
"""

from __future__ import annotations

import copy
from typing import Any

from ..api.common import training_container
from ..api.kinds import ColossalAIJob, extra_launch_args
from .base import Framework, container_gpus
from .launch import SshLaunch, Where
from .notes import Templates, worker_command
from .pod_launch import launcher_of, ssh_children
from .ssh import SSH_SERVICE_PORTS, WAIT_BANNER_FUNCTION
from .types import BuildContext, Final, LocalRequirement, Outcome, ReplicaGroup

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

    def templates(self, job: ColossalAIJob) -> Templates:
        spec = job.spec
        if spec.older_form:
            return [(f"spec.replicaSpecs[{i}].template", r.template) for i, r in enumerate(spec.replica_specs or [])]
        assert spec.worker is not None
        return [("spec.worker.template", spec.worker.template)]

    def warnings(self, job: ColossalAIJob) -> list[str]:
        """Besides every kind's: ssh's two spellings disagreeing, an older-form restart policy that
        would restart (a ColossalAIJob never restarts), processes per worker that differ from its
        GPUs, and a worker command that sshd replaces."""
        spec = job.spec
        out = super().warnings(job)
        ssh = spec.ssh
        if ssh.auth_mount_path and ssh.ssh_auth_mount_path and ssh.auth_mount_path != ssh.ssh_auth_mount_path:
            out.append(f"spec.ssh.sshAuthMountPath: ignored; authMountPath ({ssh.auth_mount_path}) is given too and wins")
        for i, r in enumerate(spec.replica_specs or []):
            if r.would_restart:
                out.append(
                    f"spec.replicaSpecs[{i}].restartPolicy: no effect; a ColossalAIJob never restarts a replica "
                    "(T9k: a restarted pod would not rejoin the training)"
                )
        worker = spec.worker
        assert worker is not None
        if spec.older_form:
            index = next(i for i, r in enumerate(spec.replica_specs or []) if r.type == "worker")
            where, procs = f"spec.replicaSpecs[{index}].template", "spec.torchConfig.procPerWorker"
        else:
            where, procs = "spec.worker.template", "spec.worker.procPerWorker"
        c = next(c for c in worker.template["spec"]["containers"] if c.get("name") == "worker")
        gpus = container_gpus(c)
        if gpus and worker.proc_per_worker != gpus:
            out.append(
                f"{procs}: {worker.proc_per_worker} processes per worker, but the worker's container has {gpus} GPUs"
            )
        out += worker_command(
            worker.template, "worker", where,
            "a ColossalAIJob worker runs sshd (T9k docs); the launcher runs the training command on it",
        )  # fmt: skip
        return out

    def local_requirements(self, job: ColossalAIJob) -> list[LocalRequirement]:
        """ColossalAI's launcher reaches workers only over ssh: locally each worker is a real sshd
        (OpenSSH's server, at ``spec.ssh.sshdPath``) and the launcher needs the ``colossalai``
        package in the run's environment. In debug mode the workers run sshd for a person and no
        launcher starts: nothing is needed."""
        if job.run_mode.debug_enabled:
            return []
        sshd = job.spec.ssh.sshd_path
        return [
            LocalRequirement(
                "sshd", sshd,
                f"ColossalAIJob runs each worker as a real sshd (colossalai run reaches workers only over ssh), "
                f"and {sshd} (spec.ssh.sshdPath) is not here: install OpenSSH's server (Debian: apt-get install "
                "openssh-server), or run the job on a cluster",
            ),
            LocalRequirement(
                "program", "colossalai",
                "ColossalAIJob's launcher, colossalai, is not installed here: pip install colossalai==0.5.0 into "
                "{where} (bash scripts/bootstrap.sh examples,test,launchers installs "
                "the locked set; docs/launchers.md)",
            ),
        ]  # fmt: skip

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
