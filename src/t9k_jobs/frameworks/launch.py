"""Launches over ssh: what a kind runs (:class:`SshLaunch`) apart from how a runtime starts it.

DeepSpeedJob and ColossalAIJob both have one replica that runs a launcher tool (``deepspeed``,
``colossalai run``) over a hostfile of workers that serve ssh (reference §4, §5). Their plug-ins
say *what* runs: the tool's command for a given hostfile and master, the hostfile's slots, the
sshd and key directory, which replica launches. A :class:`Launcher` handed in with the
:class:`~t9k_jobs.frameworks.base.BuildContext` (as :class:`~t9k_jobs.addressing.Addressing`
is) says *how*: :class:`PodLauncher` here, for pods on a cluster (sshd in every worker, the key
Secret and hostfile mounted), and :class:`t9k_jobs.local.launch.LocalLauncher` for processes on
this machine. A new kind writes its :class:`SshLaunch`, not a launch path per runtime.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..addressing import Addressing
from ..api.kinds import JobBase
from .base import add_env, container
from .ssh import (
    HOSTFILE_PATH,
    SSHD_PRELUDE,
    config_map_name,
    install_keys,
    launch_children,
    launcher_script,
    mount_hostfile,
    mount_ssh,
    sshd_argv,
    sshd_worker_command,
)

if TYPE_CHECKING:
    from .base import BuildContext, ReplicaGroup


@dataclass(frozen=True)
class Where:
    """Where a launch finds its workers, as the runtime places them.

    ``hostfile``: path of the hostfile as the launching replica reads it. ``master_addr``,
    ``master_port``: worker-0's address and the torch.distributed port. ``ssh_port``: the port
    the workers' sshd listen on when it is not 22 (a local run), else ``None``. ``node_rank``:
    for a per-node launch (:attr:`SshLaunch.per_node`), the worker this command runs on.
    """

    hostfile: str
    master_addr: str
    master_port: int
    ssh_port: int | None = None
    node_rank: int | None = None


@dataclass(frozen=True)
class SshLaunch:
    """What a launcher-over-ssh kind runs, independent of the runtime.

    ``launcher_type``: the replica type that runs the tool; its first replica (index 0, or the
    one unindexed replica) launches. When it is ``worker`` (DeepSpeedJob's worker-0) that replica
    also serves ssh. ``workers``: how many ``worker`` replicas serve ssh. ``sshd``: the sshd
    program; ``auth``: the ssh directory the keys go to. ``slots``: ranks per worker written as
    ``slots=N`` in the hostfile, or ``None`` for one host a line. ``master_port``: the declared
    torch.distributed port (a local run picks a free one). ``command(where)``: the tool's argv.
    ``per_node(where)``: the tool run once on every worker without ssh (``where.node_rank`` set),
    when the tool has such a mode (``deepspeed --no_ssh``), else ``None``. ``wait``: the shell
    function ``t9k_wait_sshd`` (:data:`~.ssh.WAIT_SSH_FUNCTION` with an ssh client,
    :data:`~.ssh.WAIT_BANNER_FUNCTION` without). ``prelude``: shell the launching pod runs
    after its keys are installed (DeepSpeed's env file). ``master_env``: the launching pod
    gets ``MASTER_ADDR``/``MASTER_PORT`` (ColossalAI).
    """

    launcher_type: str
    workers: int
    sshd: str
    auth: str
    slots: int | None
    master_port: int
    command: Callable[[Where], list[str]]
    wait: str
    per_node: Callable[[Where], list[str]] | None = None
    prelude: tuple[str, ...] = ()
    master_env: bool = False

    def launches(self, replica_type: str, index: int | None) -> bool:
        """Whether this replica is the one that runs the tool over ssh."""
        return replica_type == self.launcher_type and index in (0, None)


class Launcher(Protocol):
    """How a runtime starts an :class:`SshLaunch`'s replicas."""

    def hostfile(self, launch: SshLaunch, job_name: str, addressing: Addressing) -> str:
        """The hostfile's text: one worker a line, with ``slots=N`` when the launch has slots."""
        ...

    def runs_tool(self, launch: SshLaunch, replica_type: str, index: int | None) -> bool:
        """Whether this replica runs the launcher tool (it is relaunched when its hosts change)."""
        ...

    def decorate(
        self, job: JobBase, launch: SshLaunch, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """Set the command (and mounts, env) of ``group``'s replica ``index`` in ``pod``, in place."""
        ...


def hostfile_lines(hosts: list[str], slots: int | None) -> str:
    """``<host> slots=<n>`` (or ``<host>``) a line."""
    suffix = f" slots={slots}" if slots is not None else ""
    return "".join(f"{h}{suffix}\n" for h in hosts)


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


__all__ = ["PODS", "Launcher", "PodLauncher", "SshLaunch", "Where", "config_map_name", "hostfile_lines", "launcher_of", "ssh_children"]
