"""The words of the warnings about a valid job that several kinds share: fields that are accepted
but take no effect, or take a default the user may not expect.

Every field of the API is honoured, refused at validation, or named by a plug-in's
:meth:`~.base.Framework.warnings` (docs/api-coverage.md lists which): the base class gives the
warnings every kind has (:func:`queue`, :func:`template_identity`, :func:`run_mode_types`,
:func:`both_spellings`, and the scheduling fields of :func:`~.base.scheduler_field_warnings`), each
plug-in adds its own, some with the helpers here that two kinds share (:func:`unused_block`,
:func:`restarts`, :func:`elastic_counts`, :func:`worker_command`). ``t9k-jobs validate``,
``render`` and ``run`` print these lines on stderr and still exit 0; the engine reports them once
as ``SpecWarning`` events on a job's first pass. This module reads the API's models only.
"""

from __future__ import annotations

from typing import Any

from ..api.common import DEFAULT_QUEUE, EnabledFlag, ElasticConfig, RunMode

#: A job's pod templates, each with its field path (``spec.replicaSpecs[0].template``): what
#: :meth:`~.base.Framework.templates` gives.
Templates = list[tuple[str, dict[str, Any]]]


def template_identity(templates: Templates) -> list[str]:
    """A template's ``metadata.name`` or ``namespace``: every pod is named ``<job>-<type>-<index>``
    in the job's namespace (reference §1.2), so they are replaced (:func:`~.base.base_pod`)."""
    out = []
    for where, template in templates:
        meta = template.get("metadata") or {}
        for field in ("name", "generateName", "namespace"):
            if meta.get(field):
                what = "the job's namespace" if field == "namespace" else "<job>-<type>-<index>"
                out.append(f"{where}.metadata.{field}: no effect; the replica pods are {'in' if field == 'namespace' else 'named'} {what}")
    return out


def queue(spec: Any) -> list[str]:
    """``t9kScheduler`` without a queue: the pods use the default queue."""
    scheduler = spec.scheduler.t9k_scheduler if spec.scheduler is not None else None
    if scheduler is None or scheduler.queue:
        return []
    return [f"spec.scheduler.t9kScheduler.queue: not set; the job's pods use the queue {DEFAULT_QUEUE!r}"]


def run_mode_types(run_mode: RunMode | None, types: list[str]) -> list[str]:
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


def flag_spellings(flag: EnabledFlag | None, where: str) -> list[str]:
    """A block given as both ``enabled`` and ``enable`` (the older spelling) that disagree."""
    if flag is None or flag.enabled is None or flag.enable is None or flag.enabled == flag.enable:
        return []
    return [f"{where}.enable: ignored; enabled ({str(flag.enabled).lower()}) is given too and wins"]


def both_spellings(spec: Any) -> list[str]:
    """:func:`flag_spellings` of every block that has two spellings (runMode's, torchrunConfig, elastic)."""
    out = []
    run_mode = spec.run_mode
    if run_mode is not None:
        out += flag_spellings(run_mode.debug, "spec.runMode.debug")
        out += flag_spellings(run_mode.pause, "spec.runMode.pause")
    out += flag_spellings(getattr(spec, "torchrun_config", None), "spec.torchrunConfig")
    out += flag_spellings(getattr(spec, "elastic", None), "spec.elastic")
    return out


def unused_block(flag: EnabledFlag | None, where: str, what: str) -> list[str]:
    """A block given with settings but not switched on: its settings do nothing."""
    if flag is None or flag.is_enabled:
        return []
    settings = sorted(
        (type(flag).model_fields[f].alias or f) for f in flag.model_fields_set if f not in ("enabled", "enable")
    )
    if not settings:
        return []
    return [f"{where}: {', '.join(settings)} {'has' if len(settings) == 1 else 'have'} no effect without enabled: true ({what})"]


def restarts(policies: list[tuple[str, str, bool]], run_policy: Any) -> list[str]:
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


def elastic_counts(elastic: ElasticConfig | None, given: list[tuple[str, int]], split: str) -> list[str]:
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


def worker_command(template: dict[str, Any], name: str, where: str, runs: str) -> list[str]:
    """The command (else the args) given to container ``name`` of a worker ``template`` (at field
    path ``where``) that the kind replaces; ``runs`` says what runs instead."""
    containers = template["spec"]["containers"]
    for k, c in enumerate(containers):
        if c.get("name") == name:
            given = [f for f in ("command", "args") if c.get(f)]
            if given:
                return [f"{where}.spec.containers[{k}].{given[0]}: replaced; {runs}"]
    return []


__all__ = [
    "Templates",
    "both_spellings",
    "elastic_counts",
    "flag_spellings",
    "queue",
    "restarts",
    "run_mode_types",
    "template_identity",
    "unused_block",
    "worker_command",
]
