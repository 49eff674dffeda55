"""Launches over ssh: what a kind runs (:class:`SshLaunch`) apart from how a runtime starts it.

DeepSpeedJob and ColossalAIJob both have one replica that runs a launcher tool (``deepspeed``,
``colossalai run``) over a hostfile of workers that serve ssh (reference §4, §5). Their plug-ins
say *what* runs: the tool's command for a given hostfile and master, the hostfile's slots, the
sshd and key directory, which replica launches. A :class:`~.types.Launcher` handed in with the
:class:`~.types.BuildContext` (as :class:`~t9k_jobs.addressing.Addressing` is) says *how*:
:class:`~.pod_launch.PodLauncher` for pods on a cluster (sshd in every worker, the key Secret
and hostfile mounted), and :class:`t9k_jobs.local.launch.LocalLauncher` for processes on
this machine. A new kind writes its :class:`SshLaunch`, not a launch path per runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


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


def hostfile_lines(hosts: list[str], slots: int | None) -> str:
    """``<host> slots=<n>`` (or ``<host>``) a line."""
    suffix = f" slots={slots}" if slots is not None else ""
    return "".join(f"{h}{suffix}\n" for h in hosts)
