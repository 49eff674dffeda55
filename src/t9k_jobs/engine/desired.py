"""The desired state of a job's children, and how a child that drifted from it is found.

:func:`children` and :func:`build_pod` build what the job wants to exist. Every object built
carries its desired hash, a hash of its content, in the
:data:`~t9k_jobs.api.common.ANNOTATION_DESIRED_HASH` annotation; the runtimes report the desired
hash of what exists (:attr:`Observed.desired_hashes`, :attr:`ObservedPod.desired_hash`),
so a child whose content must change (the DeepSpeed hostfile when ``expectedReplicas`` changes,
a PodGroup's ``minMember``) is found by comparing two strings, and updated (:attr:`Plan.update`).
A pod is never updated in place: a replica whose framework asks for it
(:meth:`Framework.relaunch_on_change`) is relaunched when its pod's desired hash differs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..api.common import ANNOTATION_DESIRED_HASH
from ..api.extensions import extensions
from ..api.kinds import JobBase
from ..frameworks import BuildContext, Framework, ReplicaGroup, framework_for
from ..frameworks.base import (
    LABEL_RESTART_GENERATION, add_env, base_pod, container, disruption_budget, pod_group, replica_service,
    tensorboard)
from ..frameworks.queueing import workload
from .context import Pass, Tally
from .topology import apply_to_pod, constrain_pod_group
from .types import Delete, Observed

#: Children deleted when no longer desired (a replica scaled away leaves its Service; a finished
#: or paused job gives its Workload's quota back and drops its disruption budget).
PRUNED_KINDS = frozenset({"Service", "Workload", "PodDisruptionBudget"})
#: Children a finished or paused job gives up: its queue's quota and its gang's disruption budget.
RELEASED_KINDS = ("Workload", "PodDisruptionBudget")
#: Children deleted, not updated, when their content must change: Kueue refuses most changes to
#: an admitted Workload, and a job whose shape changed queues again (engine/admission.py).
REPLACED_KINDS = frozenset({"Workload"})
#: The env var every container of a replica gets: the replica's restart attempt, 0 for its first
#: run (:func:`build_pod`).
RESTART_ATTEMPT_ENV = "T9K_JOBS_RESTART_ATTEMPT"


def compute_desired_hash(obj: dict[str, Any]) -> str:
    """16 hex digits of SHA-256 over ``obj``'s content: everything but its metadata, plus its
    labels and annotations (the hash annotation itself left out). Stable across processes."""
    meta = obj.get("metadata") or {}
    content = {k: v for k, v in obj.items() if k != "metadata"}
    content["labels"] = meta.get("labels") or {}
    content["annotations"] = {k: v for k, v in (meta.get("annotations") or {}).items() if k != ANNOTATION_DESIRED_HASH}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _with_desired_hash(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with its desired hash set in its annotation (``obj`` itself, changed)."""
    digest = compute_desired_hash(obj)
    obj.setdefault("metadata", {}).setdefault("annotations", {})[ANNOTATION_DESIRED_HASH] = digest
    return obj


def desired_hash_of(obj: dict[str, Any]) -> str:
    """The desired hash ``obj`` carries in its annotation ("" when it has none)."""
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_DESIRED_HASH, ""))


def children(
    job: JobBase, fw: Framework, groups: list[ReplicaGroup], ctx: BuildContext, queueing: bool
) -> list[dict[str, Any]]:
    """Every object other than pods that ``job`` owns, in creation order, each with its desired hash.

    ``fw``, ``groups`` and ``ctx`` are the pass's (:class:`~.context.Pass`, made once per pass):
    ``ctx.gang`` picks which PodGroup, if any (:func:`~t9k_jobs.frameworks.base.pod_group`), which
    may name one of ``ctx.priority_classes`` (the cluster's; ``None``: all taken to exist);
    ``queueing``: the job goes through a queue (:func:`~.admission.in_queue`), so it owns a Workload
    (:func:`~t9k_jobs.frameworks.queueing.workload`), made first: nothing else waits for it. A
    ``t9kScheduler`` job owns a PodDisruptionBudget over its gang
    (:func:`~t9k_jobs.frameworks.base.disruption_budget`)."""
    gang = ctx.gang
    wl = workload(job, groups, ctx.queue_topology) if queueing else None
    out: list[dict[str, Any]] = [wl] if wl is not None else []
    out += fw.extra_children(job, groups, ctx)
    for g in groups:
        if g.service_ports is None:
            continue
        out += [replica_service(job, g, i) for i in range(g.replicas)]
    min_member = fw.pod_group_min_member(job, groups)
    launchers = sum(g.replicas for g in groups if not g.in_pod_group)
    if gang == "native":
        # Every pod joins a native gang, a launcher too (base_pod): it is counted.
        min_member += launchers
    group_obj = pod_group(job, min_member, gang, _user_priority_class(groups), ctx.priority_classes)
    if group_obj is not None:
        if not ctx.queue_topology:
            constrain_pod_group(job, group_obj)  # a Required topology (engine/topology.py)
        out.append(group_obj)
    if job.scheduler is not None and job.scheduler.t9k_scheduler is not None:
        # A gang job: a drain waits for it instead of evicting one rank (issue 43). Every pod of
        # the job is selected, a launcher too.
        out.append(disruption_budget(job, min_member + (0 if gang == "native" else launchers)))
    tb = tensorboard(job, fw.tensorboard_spec(job))
    if tb is not None:
        out.append(tb)
    return [_with_desired_hash(o) for o in out]


def _user_priority_class(groups: list[ReplicaGroup]) -> str | None:
    """The ``priorityClassName`` the first replica template names, if any: a native PodGroup
    then names it too (the scheduler preempts a group at its own priority)."""
    for g in groups:
        name = (g.template.get("spec") or {}).get("priorityClassName")
        if name:
            return str(name)
    return None


def build_pod(job: JobBase, group: ReplicaGroup, index: int, ctx: BuildContext, restart_attempt: int = 0) -> dict[str, Any]:
    """The pod of replica ``index`` of ``group``, with run-mode overrides applied [§1.5] and its desired hash.

    ``restart_attempt`` is the replica's restart count, set as the pod's
    :data:`~t9k_jobs.frameworks.base.LABEL_RESTART_GENERATION` label and, in every container, as
    :data:`RESTART_ATTEMPT_ENV` (a value the user's container sets itself wins), so a program
    knows it runs again and can resume from its checkpoint (docs/hangs.md). Every counted restart
    raises it (by restart policy, a node lost, a pod deleted by someone, no progress); a
    relaunch the job asked for (an elastic launcher's host list) or a preemption by the scheduler
    does not, as neither counts as a restart.

    Debug mode replaces the training container's command with the debug command (per type,
    else the kind's default) and clears its args; resumed jobs apply ``resumeSpecs``.
    ``skipInitContainer`` drops the init containers.
    """
    fw = framework_for(job)
    pod = base_pod(job, group, index, ctx.gang, ctx.priority_classes)
    pod["metadata"]["labels"][LABEL_RESTART_GENERATION] = str(restart_attempt)
    attempt = {RESTART_ATTEMPT_ENV: str(restart_attempt)}
    if extensions(job.metadata.annotations).progress_deadline is not None:
        # A Python replica that cannot be read by py-spy dumps its own threads' stacks to its log
        # when the runtime ends it with SIGABRT (:mod:`.progress`; faulthandler, Python's docs).
        attempt["PYTHONFAULTHANDLER"] = "1"
    for c in [*(pod["spec"].get("initContainers") or []), *pod["spec"]["containers"]]:
        add_env(c, attempt)
    fw.decorate(job, group, index, pod, ctx)
    if not ctx.queue_topology:
        apply_to_pod(job, pod)  # the job's topology, as pod affinity (engine/topology.py)
    # Admitted by Kueue to a flavor: its pods go to that flavor's nodes (engine/admission.py), and
    # with its Topology Aware Scheduling each to the domain the admission gave it.
    placed = ctx.placements.get(group.type) or ()
    labels = {**ctx.node_selectors.get(group.type, {}), **(placed[index] if index < len(placed) else {})}
    if labels:
        pod["spec"]["nodeSelector"] = {**(pod["spec"].get("nodeSelector") or {}), **labels}
    mode = job.run_mode
    c = container(pod, group.training_container)
    if mode.debug_enabled and mode.debug is not None:
        spec = mode.debug.for_type(group.type)
        c["command"] = list(spec.command) if spec and spec.command else list(group.debug_command)
        c["args"] = []
        if spec and spec.skip_init_container:
            pod["spec"].pop("initContainers", None)
    elif ctx.resumed and mode.pause is not None:
        resume = mode.pause.for_type(group.type)
        if resume is not None:
            if resume.command is not None:
                c["command"] = list(resume.command)
            if resume.args is not None:
                c["args"] = list(resume.args)
            if resume.skip_init_container:
                pod["spec"].pop("initContainers", None)
    return _with_desired_hash(pod)


def replica_pods(p: Pass, t: Tally) -> tuple[dict[str, Any], ...]:
    """The pods of the replicas this pass creates (``t.creates``), in order, each labelled with its
    replica's restart count as the tally holds it; not one whose name another object holds (the
    job says so: :attr:`Observed.conflicts`)."""
    out = []
    for g, i in t.creates:
        name = g.pod_name(p.job.name, i)
        if ("Pod", name) not in p.observed.conflicts:
            attempt = t.replicas[name].restart_count if name in t.replicas else 0
            out.append(build_pod(p.job, g, i, p.ctx, attempt))
    return tuple(out)


def plan_children(
    owned: list[dict[str, Any]], observed: Observed, unserved: frozenset[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[Delete]]:
    """``(create, update, delete)`` that bring the children other than pods to ``owned``.

    Missing children are created (not those whose name another object holds, nor kinds the
    runtime does not serve: ``unserved``); children whose reported desired hash differs are updated (a Workload
    is deleted instead, and made again on a later pass); Services no longer desired (replicas
    scaled away) and a Workload no longer desired (the job finished or paused) are deleted.
    """
    create: list[dict[str, Any]] = []
    update: list[dict[str, Any]] = []
    replaced: list[Delete] = []
    wanted: set[tuple[str, str]] = set()
    for obj in owned:
        key = (obj["kind"], obj["metadata"]["name"])
        wanted.add(key)
        if key in observed.conflicts or obj["kind"] in unserved:
            continue
        if key not in observed.others:
            create.append(obj)
        elif key in observed.desired_hashes and observed.desired_hashes[key] != desired_hash_of(obj):
            if obj["kind"] in REPLACED_KINDS:
                replaced.append(Delete(obj["kind"], key[1], None, "Changed"))
            else:
                update.append(obj)
    delete = replaced + [
        Delete(kind, name, None, "Released" if kind in RELEASED_KINDS else "ScaledDown")
        for kind, name in sorted(observed.others - wanted)
        if kind in PRUNED_KINDS
    ]
    return create, update, delete


def relaunches(
    job: JobBase, fw: Framework, groups: list[ReplicaGroup], observed: Observed, ctx: BuildContext
) -> dict[str, str]:
    """Replicas whose running pod was built from another launch than the one wanted now, by pod
    name, with the new desired hash; only replicas the framework relaunches on change are looked at."""
    out: dict[str, str] = {}
    for g in groups:
        for i in range(g.replicas):
            if not fw.relaunch_on_change(job, g, i, ctx):
                continue
            pod = observed.pods.get(g.pod_name(job.name, i))
            if pod is None or pod.deleting or pod.terminal or pod.desired_hash is None:
                continue
            wanted = desired_hash_of(build_pod(job, g, i, ctx, pod.restart_attempt or 0))
            if pod.desired_hash != wanted:
                out[pod.name] = wanted
    return out
