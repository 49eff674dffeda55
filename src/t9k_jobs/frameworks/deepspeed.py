"""DeepSpeedJob: sshd workers, worker-0 launches ``deepspeed`` over pdsh with a hostfile.

Reference §4. The ssh key Secret, the sshd workers and the launcher's shell are shared with
ColossalAIJob (:mod:`.ssh`); this module says what DeepSpeed launches.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ..api.common import training_container
from ..api.kinds import DeepSpeedJob
from .base import Framework, container_gpus, range_of
from .launch import SshLaunch, Where
from .pod_launch import launcher_of, ssh_children
from .ssh import HOSTFILE_PATH, SSH_SERVICE_PORTS, WAIT_SSH_FUNCTION, sshd_worker_command
from .notes import Templates, elastic_counts, restarts, unused_block, worker_command
from .types import BuildContext, LocalRequirement, ReplicaGroup

DEEPSPEED_SSHD = "/usr/sbin/sshd"
DEEPSPEED_ENV_PATH = "/root/.deepspeed_env"
DEEPSPEED_SSH_PATH = "/root/.ssh"
#: deepspeed's default torch.distributed port (a local run gives worker-0 a free one instead).
DEEPSPEED_MASTER_PORT = 29500
#: The script a local run gives ``deepspeed`` in place of the training script: it reads the slots
#: deepspeed gives each rank against its worker's devices, then starts the rank
#: (:mod:`t9k_jobs.frameworks.rank_gpus`).
RANK_GPUS_SCRIPT = str(Path(__file__).resolve().parent / "rank_gpus.py")

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


class DeepSpeedFramework(Framework[DeepSpeedJob]):
    kind = "DeepSpeedJob"
    restart_scope = "all"
    elastic = True

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

    def templates(self, job: DeepSpeedJob) -> Templates:
        return [("spec.worker.template", job.spec.worker.template)]

    def warnings(self, job: DeepSpeedJob) -> list[str]:
        """Besides every kind's: an elastic block not switched on, counts elastic overrides,
        ``backoffLimit`` beside a restart policy that makes it moot, config fields ``customCommand``
        makes moot, slots that disagree (two spellings, or with the worker's GPUs), and a worker
        command the launch replaces."""
        spec = job.spec
        config = spec.config
        out = super().warnings(job)
        out += unused_block(spec.elastic, "spec.elastic", "the worker count is fixed")
        given = [("spec.worker.replicas", spec.worker.replicas)] if "replicas" in spec.worker.model_fields_set else []
        out += elastic_counts(spec.elastic, given, "worker count")
        out += restarts(
            [("spec.worker.restartPolicy", spec.worker.restart_policy, "restart_policy" in spec.worker.model_fields_set)],
            spec.run_policy,
        )
        if config.custom_command:
            fixed = {"run": "run", "local_rank": "localRank", "autotune": "autotune", "other_args": "otherArgs"}
            for attr, wire in fixed.items():
                if attr in config.model_fields_set:
                    out.append(f"spec.config.{wire}: no effect with customCommand (T9k: only slotsPerWorker still applies)")
        if config.slots_per_worker is not None and config.slot_per_worker is not None and (
            config.slots_per_worker != config.slot_per_worker
        ):
            out.append(f"spec.config.slotPerWorker: ignored; slotsPerWorker ({config.slots_per_worker}) is given too and wins")
        template = spec.worker.template
        name = training_container(template, ("worker",))
        c = next(c for c in template["spec"]["containers"] if c.get("name") == name)
        gpus = container_gpus(c)
        if config.slots is not None and gpus and config.slots != gpus:
            field = "slotsPerWorker" if config.slots_per_worker is not None else "slotPerWorker"
            out.append(
                f"spec.config.{field}: {config.slots} ranks per worker, but the worker's container {name!r} has "
                f"{gpus} GPUs (leave it out to run one rank per GPU)"
            )
        out += worker_command(
            template, name, "spec.worker.template",
            "worker-0 runs the deepspeed launcher and the other workers sshd; config.run says what each rank runs",
        )  # fmt: skip
        return out

    def local_requirements(self, job: DeepSpeedJob) -> list[LocalRequirement]:
        """A local run starts deepspeed's launcher in its no-ssh mode, one per worker: it needs the
        ``deepspeed`` package in the run's environment. Its ``customCommand`` and debug mode assume
        the cluster's sshd in every worker and are not run here."""
        if job.spec.config.custom_command:
            return [
                LocalRequirement(
                    "refused", "",
                    "DeepSpeedJob spec.config.customCommand is not run locally: it assumes sshd in every worker, "
                    "which a local run does not start; use spec.config.run, or run the job on a cluster",
                )
            ]  # fmt: skip
        if job.run_mode.debug_enabled:
            return [
                LocalRequirement(
                    "refused", "", "DeepSpeedJob debug mode runs sshd in the workers for you to log in: use a cluster for it"
                )
            ]
        return [
            LocalRequirement(
                "program", "deepspeed",
                "DeepSpeedJob runs its workers with deepspeed's launcher, which is not installed here: "
                "pip install deepspeed==0.19.8 into {where} "
                "(bash scripts/bootstrap.sh examples,test,launchers does)",
            )
        ]  # fmt: skip

    def elastic_range(self, job: DeepSpeedJob) -> tuple[int, int] | None:
        return range_of(job.spec.elastic)

    def relaunch_on_change(self, job: DeepSpeedJob, group: ReplicaGroup, index: int, ctx: BuildContext) -> bool:
        """Elastic: a change of ``expectedReplicas`` rewrites the hostfile and relaunches whoever
        runs ``deepspeed`` (reference §4.7): worker-0 in pods, every worker locally."""
        return job.spec.elastic_enabled and launcher_of(ctx).runs_tool(self.ssh_launch(job, ctx), group.type, index)

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

    def ssh_launch(self, job: DeepSpeedJob, ctx: BuildContext) -> SshLaunch:
        """What DeepSpeed launches: worker-0 runs ``deepspeed`` over pdsh (reference §4.3) with
        the env file of :meth:`env_names`, or, where the runtime launches per node (a local run),
        ``deepspeed --no_ssh`` on every worker (:meth:`per_node_command`)."""
        return SshLaunch(
            launcher_type="worker",
            workers=self.groups_in(job, ctx)[0].replicas,
            sshd=DEEPSPEED_SSHD,
            auth=DEEPSPEED_SSH_PATH,
            slots=self.slots(job),
            master_port=DEEPSPEED_MASTER_PORT,
            command=lambda where: self.launch_command(job, where.hostfile),
            per_node=lambda where: self.per_node_command(job, where, self.groups_in(job, ctx)[0].replicas),
            wait=WAIT_SSH_FUNCTION,
            prelude=(shlex.join([*ENV_FILE_COMMAND, *self.env_names(job)]),),
        )

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
        return ssh_children(job, self.ssh_launch(job, ctx), ctx)

    def launch_command(self, job: DeepSpeedJob, hostfile: str = HOSTFILE_PATH) -> list[str]:
        """The ``deepspeed`` command worker-0 runs over pdsh (reference §4.3); ``customCommand``
        (``sh -c``) in its place when set."""
        custom = job.spec.config.custom_command
        if custom:
            return ["/bin/sh", "-c", custom]
        return self._launch(job, [f"--hostfile={hostfile}", "--launcher=pdsh"])

    def per_node_command(self, job: DeepSpeedJob, where: Where, workers: int) -> list[str]:
        """What worker ``where.node_rank`` runs where the runtime launches per node: deepspeed's own
        launcher in its no-ssh mode, once per worker (``--no_ssh --node_rank=<index>``), all with
        the run's hostfile and worker-0 as the master: no sshd, no root, and each worker's ranks
        stay in its process group. The launcher reads no env file in this mode; each worker has
        the container's env itself.

        GPUs: deepspeed's launch.py sets every rank's ``CUDA_VISIBLE_DEVICES`` to its node's slots
        (``0,1,...``), indices that in a pod count the container's own devices. The training
        script is therefore :data:`RANK_GPUS_SCRIPT`, which reads them against the worker's
        devices where a local run gives them (worker-1 given GPUs 2,3 has ranks that see ``2,3``;
        a worker given none, ranks that see none) and then starts the rank as deepspeed would
        have (script, ``-m`` module or ``--no_python`` program, with ``--local_rank``)."""
        return self._launch(
            job,
            [
                f"--hostfile={where.hostfile}",
                f"--num_nodes={workers}",
                "--no_ssh",
                f"--node_rank={where.node_rank}",
                f"--master_addr={where.master_addr}",
                f"--master_port={where.master_port}",
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
        """The runtime's launcher starts the launch (:class:`~.launch.PodLauncher`: worker-0 with
        keys, sshd in the background, the env file, a wait for every worker's sshd, then
        ``deepspeed`` as a child whose exit code is the container's; the others run sshd)."""
        launcher_of(ctx).decorate(job, self.ssh_launch(job, ctx), group, index, pod, ctx)
