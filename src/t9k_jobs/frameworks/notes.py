"""Warnings about a valid job: fields that are accepted but take no effect, or take a default
the user may not expect.

Every field of the API is honoured, refused at validation, or named here (docs/api-coverage.md
lists which). ``t9k-jobs validate``, ``render`` and ``run`` print these lines on stderr and still
exit 0; the engine reports them once as ``SpecWarning`` events on a job's first pass.
"""

from __future__ import annotations

from typing import Any

from ..api.common import DEFAULT_QUEUE, EnabledFlag, ElasticConfig, RunMode, training_container
from ..api.kinds import ColossalAIJob, DeepSpeedJob, GenericJob, Job, PyTorchTrainingJob
from ..api.torchrun import is_python
from .base import T9K_SCHEDULER_NAME, container_gpus, priority_class_name


def spec_warnings(job: Job) -> list[str]:
    """One line per accepted field of ``job`` that has no effect or a silent default, each
    ``<field path>: <what happens instead>``; empty for most jobs. Never raises."""
    out: list[str] = []
    spec: Any = job.spec
    out += _queue(spec)
    out += _template_identity(job)
    out += _scheduler_fields(job)
    out += _run_mode_types(spec.run_mode, _types(job))
    out += _both_spellings(spec)
    if isinstance(job, GenericJob):
        out += _generic(job)
    elif isinstance(job, PyTorchTrainingJob):
        out += _pytorch(job)
    elif isinstance(job, DeepSpeedJob):
        out += _deepspeed(job)
    elif isinstance(job, ColossalAIJob):
        out += _colossalai(job)
    return out


def templates(job: Job) -> list[tuple[str, dict[str, Any]]]:
    """Every pod template of ``job`` with its field path (``spec.replicaSpecs[0].template``)."""
    spec: Any = job.spec
    if isinstance(job, (GenericJob, PyTorchTrainingJob)):
        return [(f"spec.replicaSpecs[{i}].template", r.template) for i, r in enumerate(job.spec.replica_specs)]
    if isinstance(job, DeepSpeedJob):
        return [("spec.worker.template", job.spec.worker.template)]
    if spec.older_form:
        return [(f"spec.replicaSpecs[{i}].template", r.template) for i, r in enumerate(spec.replica_specs or [])]
    return [("spec.worker.template", spec.worker.template)]


def _template_identity(job: Job) -> list[str]:
    """A template's ``metadata.name`` or ``namespace``: every pod is named ``<job>-<type>-<index>``
    in the job's namespace (reference §1.2), so they are replaced (:func:`~.base.base_pod`)."""
    out = []
    for where, template in templates(job):
        meta = template.get("metadata") or {}
        for field in ("name", "generateName", "namespace"):
            if meta.get(field):
                what = "the job's namespace" if field == "namespace" else "<job>-<type>-<index>"
                out.append(f"{where}.metadata.{field}: no effect; the replica pods are {'in' if field == 'namespace' else 'named'} {what}")
    return out


def _scheduler_fields(job: Job) -> list[str]:
    """Pod-template scheduling fields that ``t9kScheduler`` overrides: ``schedulerName`` (the
    pods use t9k-scheduler, or the default scheduler with a native gang) and, where the cluster
    gang-schedules with ``scheduling.k8s.io`` PodGroups, a ``priorityClassName`` or ``priority``
    that wins over ``t9kScheduler.priority`` (:func:`~.base.base_pod`, :func:`~.base.pod_group`)."""
    spec: Any = job.spec
    sched = spec.scheduler.t9k_scheduler if spec.scheduler is not None else None
    if sched is None:
        return []
    out = []
    for where, template in templates(job):
        pod = template["spec"]
        name = pod.get("schedulerName")
        if name and name != T9K_SCHEDULER_NAME:
            out.append(
                f"{where}.spec.schedulerName: {name!r} is replaced; with spec.scheduler.t9kScheduler the pods use "
                f"{T9K_SCHEDULER_NAME}, or the default scheduler where the cluster gang-schedules with "
                "scheduling.k8s.io PodGroups (it is kept only on a cluster that serves neither)"
            )
    if "priority" in sched.model_fields_set:
        for where, template in templates(job):
            pod = template["spec"]
            own = (
                f"priorityClassName {pod['priorityClassName']!r}" if pod.get("priorityClassName")
                else f"priority {pod['priority']}" if pod.get("priority") is not None else None
            )  # fmt: skip
            if own and pod.get("priorityClassName") != priority_class_name(sched.priority):
                out.append(
                    f"spec.scheduler.t9kScheduler.priority: where the cluster gang-schedules with scheduling.k8s.io "
                    f"PodGroups, {where}.spec's {own} sets the pods' and the PodGroup's priority instead of "
                    f"{sched.priority} (T9k's PodGroup and Kueue take {sched.priority})"
                )
                break
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


def _generic(job: GenericJob) -> list[str]:
    out = []
    for i, r in enumerate(job.spec.replica_specs):
        policy = r.restart_policy
        where = f"spec.replicaSpecs[{i}].restartPolicy"
        if policy.policy == "Never" and policy.limit > 0:
            out.append(f"{where}.limit: no effect with policy Never (the replica is never restarted)")
        elif policy.policy != "Never" and "policy" in policy.model_fields_set and "limit" not in policy.model_fields_set:
            out.append(
                f"{where}: policy {policy.policy} restarts nothing while limit is 0 (the default); limit is the "
                "number of restarts each replica may have"
            )
    return out


def _restarts(policies: list[tuple[str, str, bool]], run_policy: Any) -> list[str]:
    """``backoffLimit`` next to restart policies (``(path, policy, given)`` each) that make it
    moot: set while no replica restarts, or 0 while some policy asks for restarts."""
    if "backoff_limit" not in run_policy.model_fields_set:
        return []
    if all(p == "Never" for _, p, _ in policies):
        return ["spec.runPolicy.backoffLimit: no effect; every replica's restartPolicy is Never"]
    if run_policy.backoff_limit == 0:
        return [
            f"{where}: {policy} restarts nothing with spec.runPolicy.backoffLimit 0"
            for where, policy, given in policies
            if policy != "Never" and given
        ]
    return []


def _elastic_counts(elastic: ElasticConfig | None, given: list[tuple[str, int]], split: str) -> list[str]:
    """Replica counts that elastic overrides: ``replicas`` next to ``expectedReplicas`` (which
    sets the count), and an expected count outside [minReplicas, maxReplicas] (clamped)."""
    if elastic is None or not elastic.is_enabled:
        return []
    out = []
    total = sum(n for _, n in given)
    expected = elastic.expected_replicas
    if expected is not None and given and total != expected:
        out += [f"{where}: {n} has no effect; spec.elastic.expectedReplicas ({expected}) is the {split}" for where, n in given]
    wanted = expected if expected is not None else total
    runs = elastic.effective_replicas(total)
    if wanted != runs:
        field = "spec.elastic.expectedReplicas" if expected is not None else given[0][0] if given else "spec.elastic"
        bound = "maxReplicas" if wanted > runs else "minReplicas"
        out.append(f"{field}: {wanted} replicas is outside elastic's range; {runs} run (spec.elastic.{bound})")
    return out


def _pytorch(job: PyTorchTrainingJob) -> list[str]:
    spec = job.spec
    out = _unused_block(spec.torchrun_config, "spec.torchrunConfig", "torchrun is not used")
    out += _unused_block(spec.elastic, "spec.elastic", "the replica counts are fixed")
    if spec.elastic_enabled and spec.torchrun_config is not None and spec.torchrun_config.min_nodes is not None:
        out.append(
            "spec.torchrunConfig.minNodes: no effect with elastic; torchrun's --nnodes is "
            "elastic.minReplicas:elastic.maxReplicas"
        )
    given = [(f"spec.replicaSpecs[{i}].replicas", r.replicas) for i, r in enumerate(spec.replica_specs) if "replicas" in r.model_fields_set]
    out += _elastic_counts(spec.elastic, given, "replica count, split between the types by scalingWeight")
    weights = [r.scaling_weight for r in spec.replica_specs]
    if spec.elastic_enabled and len(weights) > 1 and all(w == 0 for w in weights):
        out.append("spec.replicaSpecs[0].scalingWeight: every scalingWeight is 0; the replicas are split as if each were 1")
    out += _restarts(
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
    given = [("spec.worker.replicas", spec.worker.replicas)] if "replicas" in spec.worker.model_fields_set else []
    out += _elastic_counts(spec.elastic, given, "worker count")
    out += _restarts(
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
