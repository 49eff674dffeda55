"""How pods on a cluster carry out a launch over ssh (:class:`~.launch.SshLaunch`): the
:class:`~.types.Launcher` of a pass that names none.

Every worker runs sshd with the key Secret mounted; the launching replica mounts the hostfile,
installs the keys, waits for every worker's sshd, then runs the tool (reference §4, §5). A local
run hands in :class:`t9k_jobs.local.launch.LocalLauncher` instead.
"""

from __future__ import annotations

import shlex
from typing import Any

from ..addressing import Addressing
from ..api.kinds import JobBase
from .base import add_env, container
from .launch import SshLaunch, Where, hostfile_lines
from .ssh import (
    HOSTFILE_PATH,
    SSHD_PRELUDE,
    install_keys,
    launch_children,
    launcher_script,
    mount_hostfile,
    mount_ssh,
    sshd_argv,
    sshd_worker_command,
)
from .types import BuildContext, Launcher, ReplicaGroup


def ssh_children(job: JobBase, launch: SshLaunch, ctx: BuildContext) -> list[dict[str, Any]]:
    """The ConfigMap with the hostfile the runtime's launcher writes, and the ssh key Secret."""
    return launch_children(job, {"hostfile": launcher_of(ctx).hostfile(launch, job.name, ctx.addressing)})


class PodLauncher:
    """Pods on a cluster: every worker runs sshd (:func:`~.ssh.sshd_worker_command`) with the key
    Secret mounted; the launching replica mounts the hostfile at :data:`~.ssh.HOSTFILE_PATH`,
    installs the keys, waits for every worker's sshd, then runs the tool as a child
    (:func:`~.ssh.launcher_script`). Hosts are the workers' Service names."""

    def hostfile(self, launch: SshLaunch, job_name: str, addressing: Addressing) -> str:
        return hostfile_lines([addressing.host(job_name, "worker", i) for i in range(launch.workers)], launch.slots)

    def runs_tool(self, launch: SshLaunch, replica_type: str, index: int | None) -> bool:
        return launch.launches(replica_type, index)

    def decorate(
        self, job: JobBase, launch: SshLaunch, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        c = container(pod, group.training_container)
        mount_ssh(job, pod, c)
        if group.type == launch.launcher_type:
            mount_hostfile(job, pod, c)
        c["args"] = []
        if not launch.launches(group.type, index if group.indexed else None):
            c["command"] = sshd_worker_command(launch.sshd, launch.auth)
            return
        hosts = [ctx.addressing.host(job.name, "worker", i) for i in range(launch.workers)]
        prelude = [install_keys(launch.auth)]
        if launch.launcher_type == "worker":  # the launcher serves ssh too
            prelude += [SSHD_PRELUDE, f"{{ {shlex.join(sshd_argv(launch.sshd, launch.auth))} & }}"]
        if launch.master_env:
            add_env(c, {"MASTER_ADDR": hosts[0] if hosts else "", "MASTER_PORT": str(launch.master_port)})
        where = Where(HOSTFILE_PATH, ctx.addressing.host(job.name, "worker", 0), launch.master_port)
        c["command"] = launcher_script(" && ".join([*prelude, *launch.prelude]), launch.wait, hosts, launch.command(where))


#: The launcher of a pass that names none: pods, as on a cluster.
PODS = PodLauncher()


def launcher_of(ctx: BuildContext) -> Launcher:
    """The pass's launcher: the one handed in, else :data:`PODS`."""
    return ctx.launcher if ctx.launcher is not None else PODS
