"""PyTorchTrainingJob: the master replica decides, env for torch.distributed, torchrun (reference §3)."""

from __future__ import annotations

from typing import Any

from ..api.common import training_container
from ..api.kinds import PyTorchTrainingJob
from ..api.torchrun import PYTORCH_CONTAINERS, TorchrunScript
from .base import Framework, add_env, container, container_gpus, range_of, split_by_weight
from .notes import Templates, elastic_counts, restarts, unused_block
from .types import BuildContext, ReplicaGroup

#: The rendezvous / process-group port on the master's Service (T9k does not document one;
#: 23456 is Kubeflow's, chosen so it never meets torchrun's own default 29500).
MASTER_PORT = 23456
PORT_NAME = "pytorch"


class PyTorchFramework(Framework[PyTorchTrainingJob]):
    kind = "PyTorchTrainingJob"
    elastic = True

    def groups(self, job: PyTorchTrainingJob) -> list[ReplicaGroup]:
        spec = job.spec
        counts = [r.replicas for r in spec.replica_specs]
        if spec.elastic_enabled and spec.elastic is not None:
            total = spec.elastic.effective_replicas(sum(counts))
            weights = [1 if r.scaling_weight is None else r.scaling_weight for r in spec.replica_specs]
            counts = split_by_weight(total, weights)
            # The master is never scaled away: it takes one replica from the last other type.
            types = [r.type for r in spec.replica_specs]
            m = types.index(self._master_type(job))
            if counts[m] == 0:
                donor = next((i for i in reversed(range(len(counts))) if i != m and counts[i] > 0), None)
                if donor is not None:
                    counts[donor] -= 1
                counts[m] = 1
        return [
            ReplicaGroup(
                type=r.type,
                replicas=counts[i],
                template=r.template,
                restart_policy=r.restart_policy,
                backoff_limit=spec.run_policy.backoff_limit,
                training_container=training_container(r.template, PYTORCH_CONTAINERS),
                service_ports=({"name": PORT_NAME, "port": MASTER_PORT, "targetPort": MASTER_PORT},),
            )
            for i, r in enumerate(spec.replica_specs)
        ]

    def clean_up(self, job: PyTorchTrainingJob) -> tuple[str, frozenset[str]]:
        return job.spec.run_policy.clean_up_policy, frozenset()

    def active_deadline_seconds(self, job: PyTorchTrainingJob) -> int | None:
        return job.spec.run_policy.active_deadline_seconds

    @staticmethod
    def _master_type(job: PyTorchTrainingJob) -> str:
        """A type named ``master`` if there is one, else the first type (reference §3.2)."""
        types = [r.type for r in job.spec.replica_specs]
        return "master" if "master" in types else types[0]

    def master(self, job: PyTorchTrainingJob, groups: list[ReplicaGroup]) -> tuple[str, int] | None:
        return (self._master_type(job), 0)

    def pod_group_min_member(self, job: PyTorchTrainingJob, groups: list[ReplicaGroup]) -> int:
        if job.spec.elastic_enabled and job.spec.elastic is not None and job.spec.elastic.min_replicas:
            return job.spec.elastic.min_replicas
        return super().pod_group_min_member(job, groups)

    def templates(self, job: PyTorchTrainingJob) -> Templates:
        return [(f"spec.replicaSpecs[{i}].template", r.template) for i, r in enumerate(job.spec.replica_specs)]

    def warnings(self, job: PyTorchTrainingJob) -> list[str]:
        """Besides every kind's: torchrunConfig and elastic blocks not switched on, ``minNodes`` under
        elastic, counts elastic overrides, scaling weights without effect, ``backoffLimit`` beside
        restart policies that make it moot, and a command torchrun replaces or may not run."""
        spec = job.spec
        out = super().warnings(job)
        out += unused_block(spec.torchrun_config, "spec.torchrunConfig", "torchrun is not used")
        out += unused_block(spec.elastic, "spec.elastic", "the replica counts are fixed")
        if spec.elastic_enabled and spec.torchrun_config is not None and spec.torchrun_config.min_nodes is not None:
            out.append(
                "spec.torchrunConfig.minNodes: no effect with elastic; torchrun's --nnodes is "
                "elastic.minReplicas:elastic.maxReplicas"
            )
        given = [(f"spec.replicaSpecs[{i}].replicas", r.replicas) for i, r in enumerate(spec.replica_specs) if "replicas" in r.model_fields_set]
        out += elastic_counts(spec.elastic, given, "replica count, split between the types by scalingWeight")
        weights = [r.scaling_weight for r in spec.replica_specs]
        if spec.elastic_enabled and len(weights) > 1 and all(w == 0 for w in weights):
            out.append("spec.replicaSpecs[0].scalingWeight: every scalingWeight is 0; the replicas are split as if each were 1")
        out += restarts(
            [(f"spec.replicaSpecs[{i}].restartPolicy", r.restart_policy, "restart_policy" in r.model_fields_set)
             for i, r in enumerate(spec.replica_specs)],
            spec.run_policy,
        )  # fmt: skip
        for i, r in enumerate(spec.replica_specs):
            if r.scaling_weight is not None and not spec.elastic_enabled:
                out.append(f"spec.replicaSpecs[{i}].scalingWeight: no effect without elastic; the replicas are {r.replicas}")
            if not spec.torchrun_enabled:
                continue
            k, c = spec.training_container(i)
            where = f"spec.replicaSpecs[{i}].template.spec.containers[{k}].command"
            script = spec.torchrun_script(i)
            if script.replaced:
                out.append(
                    f"{where}: replaced by torchrun (T9k: with torchrunConfig the command no longer takes effect); "
                    "the script and its arguments come from args"
                )
            first = script.argv[0]
            if not script.no_python and first != "-m" and not first.endswith(".py"):
                field = where if script.source == "command" else where.replace(".command", ".args")
                out.append(
                    f"{field}: torchrun runs {first!r} with python as the training script; if it is not a python "
                    "script, give one (or add --no-python to torchrunConfig.extraOptions to run a program)"
                )
        return out

    def elastic_range(self, job: PyTorchTrainingJob) -> tuple[int, int] | None:
        return range_of(job.spec.elastic)

    def tensorboard_spec(self, job: PyTorchTrainingJob) -> dict[str, Any] | None:
        return job.spec.tensorboard_spec

    def decorate(
        self, job: PyTorchTrainingJob, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """Inject the torch.distributed env (reference §3.3) and, with torchrun, the command (§3.4).

        Without torchrun: MASTER_ADDR, MASTER_PORT, RANK (global index in spec order),
        WORLD_SIZE (all replicas) and LOCAL_RANK=0. With torchrun: MASTER_ADDR and MASTER_PORT
        only, and the command becomes ``torchrun <flags> <args>``.
        """
        master_type = self._master_type(job)
        env = {
            "MASTER_ADDR": ctx.addressing.host(job.name, master_type, 0),
            "MASTER_PORT": str(ctx.addressing.port(job.name, master_type, 0, PORT_NAME, MASTER_PORT)),
        }
        c = container(pod, group.training_container)
        if not job.spec.torchrun_enabled:
            # Ranks follow spec order with the master's type first, so RANK 0 is the pod
            # MASTER_ADDR names (env:// rendezvous needs rank 0 at MASTER_ADDR).
            groups = sorted(self.groups_in(job, ctx), key=lambda g: g.type != master_type)
            offset = 0
            for g in groups:
                if g.type == group.type:
                    break
                offset += g.replicas
            env.update(
                {
                    "RANK": str(offset + index),
                    "WORLD_SIZE": str(sum(g.replicas for g in groups)),
                    "LOCAL_RANK": "0",
                }
            )
            add_env(c, env)
            return
        script = self.script(job, group)
        # The python options torchrun cannot pass travel as their variables (api.torchrun).
        add_env(c, {**env, **script.env})
        args = self.torchrun_args(job, c, ctx, script)
        c["command"] = ["torchrun"]
        c["args"] = args

    @staticmethod
    def script(job: PyTorchTrainingJob, group: ReplicaGroup) -> TorchrunScript:
        """What torchrun runs for ``group`` (:func:`t9k_jobs.api.torchrun.torchrun_script`, checked
        when the job was validated)."""
        i = next(i for i, r in enumerate(job.spec.replica_specs) if r.type == group.type)
        return job.spec.torchrun_script(i)

    def torchrun_args(
        self, job: PyTorchTrainingJob, c: dict[str, Any], ctx: BuildContext, script: TorchrunScript
    ) -> list[str]:
        """``torchrun`` flags for ``torchrunConfig`` followed by the script and its arguments."""
        config = job.spec.torchrun_config
        assert config is not None
        total = sum(g.replicas for g in self.groups_in(job, ctx))
        if job.spec.elastic_enabled and job.spec.elastic is not None:
            nnodes = f"{job.spec.elastic.min_replicas}:{job.spec.elastic.max_replicas}"
        elif config.min_nodes is not None:
            nnodes = f"{config.min_nodes}:{total}"
        else:
            nnodes = str(total)
        proc = str(config.proc_per_node).strip()
        if proc == "gpu":  # T9k sizes it from the container's GPUs (reference §3.4)
            proc = str(max(1, container_gpus(c)))
        flags = [
            f"--nnodes={nnodes}",
            f"--nproc_per_node={proc}",
            f"--rdzv_backend={config.rdzv_backend}",
            "--rdzv_endpoint=$(MASTER_ADDR):$(MASTER_PORT)",
            f"--rdzv_id={job.metadata.uid or job.name}",
            f"--max_restarts={config.max_restarts}",
        ]
        return flags + list(config.extra_options) + script.torchrun_args(config.extra_options)

