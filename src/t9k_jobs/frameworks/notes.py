"""Warnings about a valid job: fields that are accepted but take no effect, or take a default
the user may not expect.

Every field of the API is honoured, refused at validation, or named here (docs/api-coverage.md
lists which). ``t9k-jobs validate``, ``render`` and ``run`` print these lines on stderr and still
exit 0; the engine reports them once as ``SpecWarning`` events on a job's first pass.
"""

from __future__ import annotations

from typing import Any

from ..api.common import DEFAULT_QUEUE, EnabledFlag, RunMode
from ..api.kinds import ColossalAIJob, DeepSpeedJob, GenericJob, Job, PyTorchTrainingJob
from .base import container_gpus, training_container
from .pytorch import is_python


def spec_warnings(job: Job) -> list[str]:
    """One line per accepted field of ``job`` that has no effect or a silent default, each
    ``<field path>: <what happens instead>``; empty for most jobs. Never raises."""
    out: list[str] = []
    spec: Any = job.spec
    out += _queue(spec)
    out += _run_mode_types(spec.run_mode, _types(job))
    out += _both_spellings(spec)
    if isinstance(job, PyTorchTrainingJob):
        out += _pytorch(job)
    elif isinstance(job, DeepSpeedJob):
        out += _deepspeed(job)
    elif isinstance(job, ColossalAIJob):
        out += _colossalai(job)
    return out


def local_run_notes(job: Job) -> list[str]:
    """What a local run (``t9k-jobs run``) does not do for ``job`` that a cluster would, one line
    each ``<field path>: <what a local run does instead>``; ``validate`` and ``run`` print them.
    Empty for most jobs. Never raises."""
    spec: Any = job.spec
    scheduler = spec.scheduler.t9k_scheduler if spec.scheduler is not None else None
    if scheduler is None:
        return []
    return [
        f"spec.scheduler.t9kScheduler: a local run ignores queue {scheduler.queue_name!r} and priority "
        f"{scheduler.priority}; its replicas start at once on this machine, not as a gang"
    ]


def _types(job: Job) -> list[str]:
    if isinstance(job, (GenericJob, PyTorchTrainingJob)):
        return [r.type for r in job.spec.replica_specs]
    if isinstance(job, DeepSpeedJob):
        return ["worker"]
    return ["launcher", "worker"]


def _queue(spec: Any) -> list[str]:
    scheduler = spec.scheduler.t9k_scheduler if spec.scheduler is not None else None
    if scheduler is None or scheduler.queue:
        return []
    return [f"spec.scheduler.t9kScheduler.queue: not set; the job's pods use the queue {DEFAULT_QUEUE!r}"]


def _run_mode_types(run_mode: RunMode | None, types: list[str]) -> list[str]:
    """Debug and resume entries for a type the job lacks apply to no replica (T9k's own debug
    example names ``worker`` in a job of ``node`` replicas, so they are not refused)."""
    out = []
    known = ", ".join(types)
    entries = [
        ("debug.replicaSpecs", (run_mode.debug.replica_specs if run_mode and run_mode.debug else None) or []),
        ("pause.resumeSpecs", (run_mode.pause.resume_specs if run_mode and run_mode.pause else None) or []),
    ]
    for where, specs in entries:
        for i, entry in enumerate(specs):
            if entry.type not in types:
                out.append(
                    f"spec.runMode.{where}[{i}].type: {entry.type!r} is not a replica type of this job ({known}); "
                    "the entry applies to no replica"
                )
    return out


def _flag_spellings(flag: EnabledFlag | None, where: str) -> list[str]:
    if flag is None or flag.enabled is None or flag.enable is None or flag.enabled == flag.enable:
        return []
    return [f"{where}.enable: ignored; enabled ({str(flag.enabled).lower()}) is given too and wins"]


def _both_spellings(spec: Any) -> list[str]:
    out = []
    run_mode = spec.run_mode
    if run_mode is not None:
        out += _flag_spellings(run_mode.debug, "spec.runMode.debug")
        out += _flag_spellings(run_mode.pause, "spec.runMode.pause")
    out += _flag_spellings(getattr(spec, "torchrun_config", None), "spec.torchrunConfig")
    out += _flag_spellings(getattr(spec, "elastic", None), "spec.elastic")
    return out


def _unused_block(flag: EnabledFlag | None, where: str, what: str) -> list[str]:
    """A block given with settings but not switched on: its settings do nothing."""
    if flag is None or flag.is_enabled:
        return []
    settings = sorted(
        (type(flag).model_fields[f].alias or f) for f in flag.model_fields_set if f not in ("enabled", "enable")
    )
    if not settings:
        return []
    return [f"{where}: {', '.join(settings)} {'has' if len(settings) == 1 else 'have'} no effect without enabled: true ({what})"]


def _pytorch(job: PyTorchTrainingJob) -> list[str]:
    spec = job.spec
    out = _unused_block(spec.torchrun_config, "spec.torchrunConfig", "torchrun is not used")
    out += _unused_block(spec.elastic, "spec.elastic", "the replica counts are fixed")
    if spec.elastic_enabled and spec.torchrun_config is not None and spec.torchrun_config.min_nodes is not None:
        out.append(
            "spec.torchrunConfig.minNodes: no effect with elastic; torchrun's --nnodes is "
            "elastic.minReplicas:elastic.maxReplicas"
        )
    for i, r in enumerate(spec.replica_specs):
        if r.scaling_weight is not None and not spec.elastic_enabled:
            out.append(f"spec.replicaSpecs[{i}].scalingWeight: no effect without elastic; the replicas are {r.replicas}")
        if not spec.torchrun_enabled:
            continue
        containers = r.template["spec"]["containers"]
        name = training_container(r.template, ("pytorch", "python"))
        k = next(k for k, c in enumerate(containers) if c.get("name") == name)
        command = [str(a) for a in containers[k].get("command") or []]
        where = f"spec.replicaSpecs[{i}].template.spec.containers[{k}].command"
        if command and not is_python(command[0]) and containers[k].get("args"):
            out.append(
                f"{where}: replaced by torchrun (T9k: with torchrunConfig the command no longer takes effect); "
                "the script and its arguments come from args"
            )
        elif command and is_python(command[0]) and len(command) > 1 and command[1].startswith("-") and command[1] != "-m":
            out.append(
                f"{where}: torchrun starts the script with python itself; python's option {command[1]!r} "
                "is not passed on (set PYTHONUNBUFFERED and the like in env)"
            )
    return out


def _worker_command(template: dict[str, Any], name: str, where: str, runs: str) -> list[str]:
    containers = template["spec"]["containers"]
    for k, c in enumerate(containers):
        if c.get("name") == name:
            given = [f for f in ("command", "args") if c.get(f)]
            if given:
                return [f"{where}.spec.containers[{k}].{given[0]}: replaced; {runs}"]
    return []


def _deepspeed(job: DeepSpeedJob) -> list[str]:
    spec = job.spec
    config = spec.config
    out = _unused_block(spec.elastic, "spec.elastic", "the worker count is fixed")
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
    out += _worker_command(
        template, name, "spec.worker.template",
        "worker-0 runs the deepspeed launcher and the other workers sshd; config.run says what each rank runs",
    )  # fmt: skip
    return out


def _colossalai(job: ColossalAIJob) -> list[str]:
    spec = job.spec
    out = []
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
    out += _worker_command(
        worker.template, "worker", where,
        "a ColossalAIJob worker runs sshd (T9k docs); the launcher runs the training command on it",
    )  # fmt: skip
    return out
