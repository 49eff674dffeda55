"""How a local run starts a launch over ssh (:class:`t9k_jobs.frameworks.launch.SshLaunch`).

Replicas are processes on this machine: no pods, no Services, no mounted Secrets. Where a tool
can run once per node without ssh (``deepspeed --no_ssh``) every worker runs it with its node
rank; otherwise each worker is a real sshd of its own on its own loopback address and the
launching replica reaches them on one free port (``colossalai run --ssh-port``). The key pair
and hostfile are files in the run directory (:meth:`LocalAddressing.child_file
<t9k_jobs.local.addressing.LocalAddressing.child_file>`).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..addressing import Addressing
from ..api.kinds import JobBase
from ..frameworks.base import add_env, container
from ..frameworks.launch import SshLaunch, Where, hostfile_lines
from ..frameworks.rank_gpus import DEVICES_ENV
from ..frameworks.ssh import SSH_PORT, config_map_name, launcher_script, ssh_secret_name

if TYPE_CHECKING:
    from ..frameworks.types import BuildContext, ReplicaGroup

#: What each local worker's sshd sets in every session (sshd's ``SetEnv``): the worker's devices,
#: which the run puts in the worker's ``T9K_JOBS_GPUS`` (``$(...)`` is expanded when the worker
#: starts, as Kubernetes expands a container's command).
SESSION_GPU_ENV = (
    f"CUDA_VISIBLE_DEVICES=$({DEVICES_ENV})",
    "CUDA_DEVICE_ORDER=PCI_BUS_ID",
    f"{DEVICES_ENV}=$({DEVICES_ENV})",
)
#: What a local launching replica does not hand its tool, which (``colossalai run``) exports the
#: launcher's environment into every rank's session: the launcher's own devices.
LAUNCHER_OWN_GPU_ENV = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", DEVICES_ENV)


class LocalLauncher:
    """Launches over ssh as processes on this machine (see the module)."""

    def hostfile(self, launch: SshLaunch, job_name: str, addressing: Addressing) -> str:
        """Per node: the workers by name (``worker-<i>``): with ``--no_ssh`` the names are only the
        nodes' keys, and deepspeed refuses a host twice. Over ssh: each worker's own address."""
        if launch.per_node is not None:
            return hostfile_lines([f"worker-{i}" for i in range(launch.workers)], launch.slots)
        return hostfile_lines([addressing.own_address(job_name, 'worker', i) for i in range(launch.workers)], launch.slots)

    def runs_tool(self, launch: SshLaunch, replica_type: str, index: int | None) -> bool:
        if launch.per_node is not None:
            return replica_type == "worker"
        return launch.launches(replica_type, index)

    def decorate(
        self, job: JobBase, launch: SshLaunch, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        a = ctx.addressing
        c = container(pod, group.training_container)
        c["args"] = []
        hostfile = a.child_file("ConfigMap", config_map_name(job), "hostfile") or ""
        master = a.port(job.name, "worker", 0, "master", launch.master_port)
        if launch.per_node is not None:
            where = Where(hostfile, a.host(job.name, "worker", 0), master, node_rank=index)
            c["command"] = launch.per_node(where)
            return
        keys = str(Path(a.child_file("Secret", ssh_secret_name(job), "id_ed25519") or "").parent)
        port = a.port(job.name, "worker", 0, "ssh", SSH_PORT)
        if not launch.launches(group.type, index if group.indexed else None):
            c["command"] = self.sshd_command(launch, keys, port, a.own_address(job.name, "worker", index))
            return
        workers = [f"{a.own_address(job.name, 'worker', i)}:{port}" for i in range(launch.workers)]
        prelude = [
            f"unset {' '.join(LAUNCHER_OWN_GPU_ENV)}",
            f'mkdir -p -m 700 "$HOME/.ssh" && for f in {shlex.quote(keys)}/*; do install -m 600 "$f" "$HOME/.ssh/" || exit 1; done',
        ]
        if group.type == "worker":  # the launcher serves ssh too
            serve = self.sshd_command(launch, keys, port, a.own_address(job.name, "worker", index))
            prelude.append(f"{{ {shlex.join(serve)} & }}")
        add_env(c, {"HOME": str(Path(keys).parents[2] / "home")})  # <run dir>/home
        where = Where(hostfile, a.own_address(job.name, "worker", 0), master, ssh_port=port)
        c["command"] = launcher_script(" && ".join(prelude), launch.wait, workers, launch.command(where))

    @staticmethod
    def sshd_command(launch: SshLaunch, keys: str, port: int, address: str) -> list[str]:
        """A worker's own sshd (the launch's ``sshd``): on its own loopback ``address``, with the
        job's key pair as its host key and ``authorized_keys`` from the run directory and no
        system configuration (``-f /dev/null``).

        GPUs: the ranks run in the workers' ssh sessions, which in a pod see the worker
        container's devices. A session gets sshd's login environment, not the worker's, so each
        worker's sshd sets its devices in every session (``SetEnv``, sshd_config(5):
        :data:`SESSION_GPU_ENV`). ``colossalai run`` exports the launcher's whole environment
        into the sessions after that (colossalai 0.5, ``cli/launcher``: every non-empty
        variable), so the launcher leaves out its own devices (:data:`LAUNCHER_OWN_GPU_ENV`),
        as a pod's devices stay in the pod."""
        return [
            launch.sshd, "-D", "-e", "-f", "/dev/null",
            "-p", str(port),
            "-o", f"ListenAddress={address}",
            "-h", f"{keys}/id_ed25519",
            "-o", f"AuthorizedKeysFile={keys}/authorized_keys",
            "-o", "StrictModes=no",  # the run directory's modes are the user's
            "-o", "PidFile=none",
            "-o", "SetEnv=" + " ".join(SESSION_GPU_ENV),
        ]  # fmt: skip


__all__ = ["LAUNCHER_OWN_GPU_ENV", "SESSION_GPU_ENV", "LocalLauncher"]
