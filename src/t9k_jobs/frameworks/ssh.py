"""DeepSpeedJob and ColossalAIJob: sshd workers, a launcher, a hostfile and an ssh key Secret.

Reference §4 (DeepSpeedJob) and §5 (ColossalAIJob). The key pair is made when the Secret is
created (:func:`t9k_jobs.engine.materialize`); the engine only asks for it, so it stays pure.
"""

from __future__ import annotations

import copy
import shlex
from typing import Any

from ..api.kinds import ColossalAIJob, DeepSpeedJob, JobBase
from .base import (
    ANNOTATION_GENERATE,
    BuildContext,
    Framework,
    ReplicaGroup,
    add_env,
    child_meta,
    container,
    training_container,
)

SSH_PORT = 22
SSH_SERVICE_PORTS = ({"name": "ssh", "port": SSH_PORT, "targetPort": SSH_PORT},)
DEEPSPEED_SSHD = "/usr/sbin/sshd"
HOSTFILE_PATH = "/t9k/hostfile"
DEEPSPEED_ENV_PATH = "/root/.deepspeed_env"
DEEPSPEED_SSH_PATH = "/root/.ssh"
#: Port of the torch.distributed master that ``colossalai run`` starts on worker-0.
COLOSSALAI_MASTER_PORT = 29500


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


def mount_ssh(job: JobBase, pod: dict[str, Any], c: dict[str, Any], path: str) -> None:
    """Mount the ssh Secret at ``path`` (private key, public key, authorized_keys, ssh config)."""
    _mount(
        pod,
        c,
        {"name": "t9k-ssh", "secret": {"secretName": ssh_secret_name(job), "defaultMode": 0o600}},
        [{"name": "t9k-ssh", "mountPath": path, "readOnly": True}],
    )


def _wait_for_sshd(hosts: list[str], port: int = SSH_PORT) -> str:
    """Shell that waits until sshd answers on every host (up to 10 minutes each)."""
    quoted = " ".join(shlex.quote(h) for h in hosts)
    return (
        f"for h in {quoted}; do n=0; until ssh -o BatchMode=yes -o ConnectTimeout=2 -p {port} \"$h\" true"
        " 2>/dev/null; do n=$((n+1)); [ $n -ge 300 ] && echo \"sshd on $h not reachable\" >&2 && exit 1;"
        " sleep 2; done; done"
    )


class DeepSpeedFramework(Framework):
    kind = "DeepSpeedJob"
    restart_scope = "all"

    def groups(self, job: JobBase) -> list[ReplicaGroup]:
        assert isinstance(job, DeepSpeedJob)
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
                debug_command=(DEEPSPEED_SSHD, "-D"),
                service_ports=SSH_SERVICE_PORTS,
            )
        ]

    def clean_up(self, job: JobBase) -> tuple[str, frozenset[str]]:
        assert isinstance(job, DeepSpeedJob)
        return job.spec.run_policy.clean_up_policy, frozenset()

    def master(self, job: JobBase, groups: list[ReplicaGroup]) -> tuple[str, int] | None:
        return ("worker", 0)

    def pod_group_min_member(self, job: JobBase, groups: list[ReplicaGroup]) -> int:
        assert isinstance(job, DeepSpeedJob)
        if job.spec.elastic_enabled and job.spec.elastic is not None and job.spec.elastic.min_replicas:
            return job.spec.elastic.min_replicas
        return super().pod_group_min_member(job, groups)

    def hostfile(self, job: DeepSpeedJob, ctx: BuildContext) -> str:
        """DeepSpeed hostfile: ``<worker host> slots=<slotsPerWorker>`` per worker."""
        count = self.groups(job)[0].replicas
        slots = job.spec.config.slots
        return "".join(f"{ctx.addressing.host(job.name, 'worker', i)} slots={slots}\n" for i in range(count))

    def env_file(self, job: DeepSpeedJob) -> str:
        """``/root/.deepspeed_env``: ``NAME=VALUE`` per literal env var of the training container."""
        if job.spec.disable_custom_env:
            return ""
        template = job.spec.worker.template
        name = training_container(template, ("worker",))
        c = next(c for c in template["spec"]["containers"] if c.get("name") == name)
        lines = [f"{e['name']}={e['value']}\n" for e in c.get("env") or [] if isinstance(e.get("value"), str)]
        return "".join(lines)

    def extra_children(self, job: JobBase, groups: list[ReplicaGroup], ctx: BuildContext) -> list[dict[str, Any]]:
        assert isinstance(job, DeepSpeedJob)
        return launch_children(job, {"hostfile": self.hostfile(job, ctx), "deepspeed_env": self.env_file(job)})

    def launch_command(self, job: DeepSpeedJob) -> list[str]:
        """The ``deepspeed`` command worker-0 runs (reference §4.3)."""
        config = job.spec.config
        cmd = ["deepspeed", f"--hostfile={HOSTFILE_PATH}", "--launcher=pdsh"]
        if not config.local_rank:
            cmd.append("--no_local_rank")
        if config.autotune != "none":
            cmd.append(f"--autotuning={config.autotune}")
        cmd += list(config.other_args)
        run = config.run
        assert run is not None
        if run.python is not None:
            cmd += list(run.python)  # type: ignore[arg-type]
        elif run.module is not None:
            cmd += ["--module", *run.module]  # type: ignore[list-item]
        elif run.exec is not None:
            cmd += ["--no_python", *run.exec]  # type: ignore[list-item]
        return cmd

    def decorate(
        self, job: JobBase, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """Mount keys, hostfile and env file; worker-0 launches ``deepspeed``, the others run sshd."""
        assert isinstance(job, DeepSpeedJob)
        c = container(pod, group.training_container)
        mount_ssh(job, pod, c, DEEPSPEED_SSH_PATH)
        _mount(
            pod,
            c,
            {"name": "t9k-launch", "configMap": {"name": config_map_name(job)}},
            [
                {"name": "t9k-launch", "mountPath": HOSTFILE_PATH, "subPath": "hostfile", "readOnly": True},
                {"name": "t9k-launch", "mountPath": DEEPSPEED_ENV_PATH, "subPath": "deepspeed_env", "readOnly": True},
            ],
        )
        if index != 0:
            c["command"] = [DEEPSPEED_SSHD, "-D"]
            c["args"] = []
            return
        hosts = [ctx.addressing.host(job.name, "worker", i) for i in range(group.replicas)]
        if job.spec.config.custom_command:
            launch = job.spec.config.custom_command
        else:
            launch = "exec " + shlex.join(self.launch_command(job))
        script = f"{DEEPSPEED_SSHD} && {_wait_for_sshd(hosts)} && {launch}"
        c["command"] = ["/bin/sh", "-c", script]
        c["args"] = []


class ColossalAIFramework(Framework):
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

    def groups(self, job: JobBase) -> list[ReplicaGroup]:
        assert isinstance(job, ColossalAIJob) and job.spec.worker is not None
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

    def clean_up(self, job: JobBase) -> tuple[str, frozenset[str]]:
        """``cleanUpWorkers`` deletes every worker; the launcher is never cleaned up (T9k docs)."""
        assert isinstance(job, ColossalAIJob)
        return ("All" if job.spec.run_policy.clean_up else "None"), frozenset({"launcher"})

    def master(self, job: JobBase, groups: list[ReplicaGroup]) -> tuple[str, int] | None:
        return ("launcher", 0)

    def hostfile(self, job: ColossalAIJob, ctx: BuildContext) -> str:
        count = job.spec.worker.replicas  # type: ignore[union-attr]
        return "".join(f"{ctx.addressing.host(job.name, 'worker', i)}\n" for i in range(count))

    def extra_children(self, job: JobBase, groups: list[ReplicaGroup], ctx: BuildContext) -> list[dict[str, Any]]:
        assert isinstance(job, ColossalAIJob)
        return launch_children(job, {"hostfile": self.hostfile(job, ctx)})

    def launch_command(self, job: ColossalAIJob, ctx: BuildContext) -> list[str]:
        """``colossalai run`` over the workers' hostfile (reference §5.2)."""
        worker = job.spec.worker
        assert worker is not None
        cmd = [
            "colossalai",
            "run",
            f"--nproc_per_node={worker.proc_per_worker}",
            f"--hostfile={HOSTFILE_PATH}",
            f"--master_addr={ctx.addressing.host(job.name, 'worker', 0)}",
            f"--master_port={COLOSSALAI_MASTER_PORT}",
        ]
        if worker.torch_args:
            cmd.append("--extra_launch_args=" + ",".join(_launch_args(worker.torch_args)))
        return cmd + list(worker.command)

    def decorate(
        self, job: JobBase, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """Workers run ``<sshdPath> -D``; the launcher waits for them and runs ``colossalai run``."""
        assert isinstance(job, ColossalAIJob) and job.spec.worker is not None
        c = container(pod, group.training_container)
        mount_ssh(job, pod, c, job.spec.ssh.mount_path)
        if group.type == "worker":
            c["command"] = [job.spec.ssh.sshd_path, "-D"]
            c["args"] = []
            return
        _mount(
            pod,
            c,
            {"name": "t9k-launch", "configMap": {"name": config_map_name(job)}},
            [{"name": "t9k-launch", "mountPath": HOSTFILE_PATH, "subPath": "hostfile", "readOnly": True}],
        )
        hosts = [ctx.addressing.host(job.name, "worker", i) for i in range(job.spec.worker.replicas)]
        add_env(c, {"MASTER_ADDR": hosts[0] if hosts else "", "MASTER_PORT": str(COLOSSALAI_MASTER_PORT)})
        script = f"{_wait_for_sshd(hosts)} && exec {shlex.join(self.launch_command(job, ctx))}"
        c["command"] = ["/bin/sh", "-c", script]
        c["args"] = []


def _launch_args(torch_args: list[str]) -> list[str]:
    """torchrun flags as ``colossalai run --extra_launch_args`` wants them: ``name=value`` items.

    ``["--max_restarts", "3", "--standalone", "--rdzv_backend=c10d"]`` gives
    ``["max_restarts=3", "standalone", "rdzv_backend=c10d"]``.
    """
    out: list[str] = []
    i = 0
    while i < len(torch_args):
        item = torch_args[i].strip()
        name = item.lstrip("-")
        if "=" not in name and i + 1 < len(torch_args) and not torch_args[i + 1].startswith("-"):
            out.append(f"{name}={torch_args[i + 1].strip()}")
            i += 2
            continue
        out.append(name)
        i += 1
    return out
