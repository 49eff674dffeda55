"""The plug-in interface every job kind implements, and the pod-building steps they share.

A framework answers a few questions about a job: which replica groups exist and how many
replicas each wants (:meth:`Framework.groups`), how a replica's pod is decorated (env,
command; :meth:`Framework.decorate`), which extra children it needs (hostfile, ssh keys;
:meth:`Framework.extra_children`) and who decides success (:meth:`Framework.outcome`).
Everything else (names, labels, restart policy, run modes, services, PodGroup) is common.

It also holds the kind's facts that callers would otherwise switch on by kind: the fields that
take no effect (:meth:`Framework.warnings`), what a local run leaves out
(:meth:`Framework.local_notes`) and needs on the machine (:meth:`Framework.local_requirements`),
and the range ``scale`` may set (:meth:`Framework.elastic_range`); callers ask the plug-in of the
kind (:func:`t9k_jobs.frameworks.framework_for`).
"""

from __future__ import annotations

import abc
import copy
from typing import Any, Generic, Literal

from ..api.common import GROUP, ElasticConfig
from ..api.kinds import JobBase
from . import notes
from .notes import Templates
from .types import BuildContext, Final, GangMode, JobT, LocalRequirement, Outcome, ReplicaGroup

TENSORSTACK = "tensorstack.dev"
LABEL_OWNER_KIND = "tensorstack.dev/owner-kind"
LABEL_OWNER_NAME = "tensorstack.dev/owner-name"
LABEL_COMPONENT = "tensorstack.dev/component"
LABEL_COMPONENT_TYPE = "tensorstack.dev/component-type"
LABEL_ROLE = "scheduler.tensorstack.dev/role"
LABEL_GROUP_NAME = "scheduler.tensorstack.dev/group-name"
LABEL_QUEUE = "scheduler.tensorstack.dev/queue"
LABEL_REPLICA_TYPE = f"{GROUP}/replica-type"
LABEL_REPLICA_INDEX = f"{GROUP}/replica-index"
#: On every replica pod: the replica's restart count when the pod was made, its restart
#: generation. A pod of an earlier generation than the replica's count in the job status is
#: one being replaced (as JobSet's restart-attempt label).
LABEL_RESTART_GENERATION = f"{GROUP}/restart-generation"
T9K_SCHEDULER_NAME = "t9k-scheduler"
NATIVE_PODGROUP_API = "scheduling.k8s.io/v1beta1"


class Framework(abc.ABC, Generic[JobT]):
    """Base class of the per-kind plug-ins; subclasses override the hooks they need.

    ``restart_scope``: ``replica`` restarts the failed replica alone; ``all`` restarts every
    replica of the job together (DeepSpeedJob: a pdsh launch cannot take back one worker).
    ``elastic``: the kind has an elastic mode (``spec.elastic``), whose expected count ``scale``
    sets (:meth:`elastic_range`).
    """

    kind: str = ""
    restart_scope: Literal["replica", "all"] = "replica"
    elastic: bool = False

    @abc.abstractmethod
    def groups(self, job: JobT) -> list[ReplicaGroup]:
        """The replica groups in spec order, with the replica count wanted now."""

    def groups_in(self, job: JobT, ctx: BuildContext) -> list[ReplicaGroup]:
        """The pass's replica groups (computed once per pass), else :meth:`groups`."""
        return list(ctx.groups) if ctx.groups else self.groups(job)

    @abc.abstractmethod
    def clean_up(self, job: JobT) -> tuple[str, frozenset[str]]:
        """``(policy, exempt types)``: All/Unfinished/None and the types clean-up never deletes."""

    @abc.abstractmethod
    def decorate(
        self, job: JobT, group: ReplicaGroup, index: int, pod: dict[str, Any], ctx: BuildContext
    ) -> None:
        """Add kind-specific env and command to ``pod`` (mutated in place)."""

    def extra_children(self, job: JobT, groups: list[ReplicaGroup], ctx: BuildContext) -> list[dict[str, Any]]:
        """ConfigMaps and Secrets the kind needs besides Services, PodGroup and TensorBoard."""
        return []

    def master(self, job: JobT, groups: list[ReplicaGroup]) -> tuple[str, int] | None:
        """The replica whose end decides the job, or ``None`` when rules decide (GenericJob)."""
        return None

    def outcome(
        self, job: JobT, groups: list[ReplicaGroup], finals: dict[tuple[str, int], Final]
    ) -> Outcome | None:
        """Succeeded or Failed once the master replica is final; ``None`` while undecided."""
        master = self.master(job, groups)
        if master is None:
            return None
        final = finals.get(master)
        if final is None:
            return None
        if final.succeeded:
            return Outcome(True, "The job has finished successfully.")
        return Outcome(False, f"{job.kind} {job.name} has failed: {final.describe()}")

    def pod_group_min_member(self, job: JobT, groups: list[ReplicaGroup]) -> int:
        """PodGroup ``minMember``: all replicas in the group (T9k docs), or ``elastic.minReplicas``."""
        return sum(g.replicas for g in groups if g.in_pod_group)

    def tensorboard_spec(self, job: JobT) -> dict[str, Any] | None:
        return None

    def active_deadline_seconds(self, job: JobT) -> int | None:
        """``spec.runPolicy.activeDeadlineSeconds`` where the kind has one [§1.4], else ``None``."""
        return None

    def relaunch_on_change(self, job: JobT, group: ReplicaGroup, index: int, ctx: BuildContext) -> bool:
        """Whether this replica's running pod is replaced (without counting a restart) when the
        pod wanted now differs from the one it runs: a launcher whose host list changed."""
        return False

    # ------------------------------------------------------------------- the kind's facts

    @abc.abstractmethod
    def templates(self, job: JobT) -> Templates:
        """Every pod template the manifest holds, with its field path (``spec.replicaSpecs[0].template``)."""

    def warnings(self, job: JobT) -> list[str]:
        """One line per accepted field of ``job`` that has no effect or a silent default, each
        ``<field path>: <what happens instead>``; empty for most jobs. Never raises.

        Here the ones every kind has, in this order: an unset queue, a template's name or
        namespace, the scheduling fields ``t9kScheduler`` overrides, run-mode entries for a type the
        job lacks, a block's two spellings disagreeing; a plug-in adds its own after them
        (``super().warnings(job) + ...``). ``validate``, ``render`` and ``run`` print them on stderr;
        the engine reports them as ``SpecWarning`` events (:func:`t9k_jobs.frameworks.spec_warnings`)."""
        spec: Any = job.spec
        templates = self.templates(job)
        return [
            *notes.queue(spec),
            *notes.template_identity(templates),
            *scheduler_field_warnings(job, templates),
            *notes.run_mode_types(spec.run_mode, [g.type for g in self.groups(job)]),
            *notes.both_spellings(spec),
        ]

    def local_notes(self, job: JobT) -> list[str]:
        """What a local run (``t9k-jobs run``) does not do for ``job`` that a cluster would, one line
        each ``<field path>: <what a local run does instead>``; ``validate`` and ``run`` print them.
        Empty for most jobs. Never raises.

        Here what every kind shares: ``t9kScheduler``'s queue and priority, which a local run ignores."""
        spec: Any = job.spec
        scheduler = spec.scheduler.t9k_scheduler if spec.scheduler is not None else None
        if scheduler is None:
            return []
        return [
            f"spec.scheduler.t9kScheduler: a local run ignores queue {scheduler.queue_name!r} and priority "
            f"{scheduler.priority}; its replicas start at once on this machine, not as a gang"
        ]

    def local_requirements(self, job: JobT) -> list[LocalRequirement]:
        """What a local run of ``job`` needs on the machine beside what every kind needs (GPUs,
        volumes: :func:`t9k_jobs.local.checks.cannot_run_reason` checks those), in the order they are
        checked: the first one missing is the run's refusal. Empty here: a kind whose replicas run
        their own command (GenericJob; PyTorchTrainingJob, whose ``torchrun`` is the run's python
        with ``-m torch.distributed.run``) needs nothing more."""
        return []

    def elastic_range(self, job: JobT) -> tuple[int, int] | None:
        """``(minReplicas, maxReplicas)``, the replica counts ``scale`` may set, while ``job``'s
        elastic mode is on; ``None`` when it is off or the kind has none (:attr:`elastic`)."""
        return None


# --------------------------------------------------------------------------- shared helpers


def kind_label(job: JobBase) -> str:
    return job.kind.lower()


def owner_labels(job: JobBase) -> dict[str, str]:
    """Labels on every child of ``job`` (reference §1.3): owner kind/name and component."""
    return {
        LABEL_OWNER_KIND: job.kind,
        LABEL_OWNER_NAME: job.name,
        LABEL_COMPONENT: kind_label(job),
        LABEL_COMPONENT_TYPE: "user",
        kind_label(job): job.name,
    }


def owner_reference(job: JobBase) -> list[dict[str, Any]]:
    """A controller owner reference to ``job``; empty when the job has no UID yet (render)."""
    if not job.metadata.uid:
        return []
    return [
        {
            "apiVersion": job.api_version,
            "kind": job.kind,
            "name": job.name,
            "uid": job.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def child_meta(job: JobBase, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": job.namespace,
        "labels": {**owner_labels(job), **(labels or {})},
    }
    refs = owner_reference(job)
    if refs:
        meta["ownerReferences"] = refs
    return meta




def container_gpus(c: dict[str, Any]) -> int:
    """The ``nvidia.com/gpu`` of container ``c``: its limit, else its request (Kubernetes sets an
    extended resource's request from its limit), else 0; 0 too for a quantity that is not a
    whole number (the API server, or a local run, refuses that one with its field path)."""
    resources = c.get("resources") or {}
    for key in ("limits", "requests"):
        value = (resources.get(key) or {}).get("nvidia.com/gpu")
        if value is not None:
            try:
                return max(0, int(str(value)))
            except ValueError:
                return 0
    return 0


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    for c in pod["spec"]["containers"]:
        if c.get("name") == name:
            return c
    raise KeyError(name)


def add_env(c: dict[str, Any], values: dict[str, str], *, first: bool = True) -> None:
    """Add env vars to container ``c`` unless it already sets them (the user's value wins).

    With ``first`` they go before the user's env so the user's values may refer to them
    with ``$(NAME)``.
    """
    env = list(c.get("env") or [])
    present = {e.get("name") for e in env}
    new = [{"name": k, "value": str(v)} for k, v in values.items() if k not in present]
    c["env"] = new + env if first else env + new


def base_pod(
    job: JobBase,
    group: ReplicaGroup,
    index: int,
    gang: GangMode = "t9k",
    priority_classes: frozenset[str] | None = None,
) -> dict[str, Any]:
    """The pod of replica ``index`` of ``group`` before any kind-specific decoration.

    Copies the template, names the pod ``<job>-<type>-<index>``, adds the labels of
    reference §1.3 and the owner reference, and forces ``restartPolicy: Never`` (T9k docs:
    the controller, not the kubelet, restarts replicas). With ``spec.scheduler.t9kScheduler``,
    ``gang`` decides the scheduling fields: ``t9k``: ``schedulerName: t9k-scheduler`` and T9k's
    queue and group-name labels (reference §1.7); ``native``: ``spec.schedulingGroup.podGroupName``
    naming the job's native PodGroup (every pod, a launcher too), the default scheduler, and
    ``priorityClassName`` :func:`priority_class_name` of the job's priority unless the template
    names a class or a priority, or the class is not among ``priority_classes`` (the cluster's;
    ``None``: all taken to exist): the cluster admin makes the classes, the operator never does
    (docs/scheduling.md), and without one the pod runs at the default priority; ``none``: the
    default scheduler and nothing else.
    """
    template = copy.deepcopy(group.template)
    name = group.pod_name(job.name, index)
    meta = template.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    labels.update(owner_labels(job))
    labels.update(
        {
            f"{kind_label(job)}-replica": name,
            LABEL_ROLE: group.type,
            LABEL_REPLICA_TYPE: group.type,
            LABEL_REPLICA_INDEX: str(index),
        }
    )
    pod_meta: dict[str, Any] = {"name": name, "namespace": job.namespace, "labels": labels}
    if meta.get("annotations"):
        pod_meta["annotations"] = dict(meta["annotations"])
    refs = owner_reference(job)
    if refs:
        pod_meta["ownerReferences"] = refs
    spec = template["spec"]
    spec["restartPolicy"] = "Never"
    scheduler = job.scheduler.t9k_scheduler if job.scheduler else None
    if scheduler is not None and gang == "t9k":
        spec["schedulerName"] = T9K_SCHEDULER_NAME
        labels[LABEL_QUEUE] = scheduler.queue_name
        if group.in_pod_group:
            labels[LABEL_GROUP_NAME] = job.name
    elif scheduler is not None and gang == "native":
        # Every pod of a native group must use one schedulerName (the default scheduler's). A
        # launcher joins the gang too: started alone it would hold a node while its workers wait.
        spec.pop("schedulerName", None)
        spec["schedulingGroup"] = {"podGroupName": job.name}
        if not spec.get("priorityClassName") and spec.get("priority") is None:
            name = priority_class_name(scheduler.priority)
            if priority_classes is None or name in priority_classes:
                spec["priorityClassName"] = name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def replica_service(job: JobBase, group: ReplicaGroup, index: int) -> dict[str, Any]:
    """Headless Service named like the replica's pod, selecting only that pod (reference §1.2)."""
    name = group.pod_name(job.name, index)
    spec: dict[str, Any] = {
        "clusterIP": "None",
        "publishNotReadyAddresses": True,
        "selector": {f"{kind_label(job)}-replica": name},
    }
    if group.service_ports:
        spec["ports"] = [dict(p) for p in group.service_ports]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_meta(job, name, {LABEL_REPLICA_TYPE: group.type, LABEL_REPLICA_INDEX: str(index)}),
        "spec": spec,
    }


def range_of(elastic: ElasticConfig | None) -> tuple[int, int] | None:
    """``(minReplicas, maxReplicas)`` of an elastic block that is on, else ``None``: the
    :meth:`Framework.elastic_range` of the kinds that have one (validation requires both bounds
    once it is on)."""
    if elastic is None or not elastic.is_enabled:
        return None
    assert elastic.min_replicas is not None and elastic.max_replicas is not None
    return (elastic.min_replicas, elastic.max_replicas)


#: Prefix of the PriorityClasses that carry ``t9kScheduler.priority`` on a native cluster.
PRIORITY_CLASS_PREFIX = "t9k-priority-"


def priority_class_name(priority: int) -> str:
    """The PriorityClass of T9k priority ``priority`` (0-100): ``t9k-priority-<priority>``, of value
    ``priority``, made by the cluster admin for the priorities they allow (the chart's
    ``jobPriorities.allowed``: :func:`t9k_jobs.deploy.rbac.priority_class`)."""
    return f"{PRIORITY_CLASS_PREFIX}{priority}"


def pod_group(
    job: JobBase,
    min_member: int,
    gang: GangMode = "t9k",
    priority_class: str | None = None,
    priority_classes: frozenset[str] | None = None,
) -> dict[str, Any] | None:
    """The job's PodGroup when ``spec.scheduler.t9kScheduler`` is set, named like the job; ``None``
    without it or with ``gang`` ``none``.

    ``t9k``: T9k's PodGroup of reference §1.7 (``minMember``, ``priority``, ``queue``).
    ``native``: a standalone ``scheduling.k8s.io/v1beta1`` PodGroup (Kubernetes 1.37
    ``staging/src/k8s.io/api/scheduling/v1beta1/types.go``): ``schedulingPolicy.gang.minCount`` =
    ``min_member`` and ``disruptionMode: {all: {}}``, so the scheduler binds and preempts the
    job's pods as one unit, and ``priorityClassName``: ``priority_class`` (the one the replica
    templates name) or :func:`priority_class_name` of the job's priority when that class is among
    ``priority_classes`` (``None``: all taken to exist), else none (the default priority, as its
    pods). The queue has no field there (queues are Kueue's, issue 24).
    """
    scheduler = job.scheduler.t9k_scheduler if job.scheduler else None
    if scheduler is None or gang == "none":
        return None
    if gang == "native":
        spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_member}}, "disruptionMode": {"all": {}}}
        name = priority_class or priority_class_name(scheduler.priority)
        if priority_class or priority_classes is None or name in priority_classes:
            spec["priorityClassName"] = name
        return {"apiVersion": NATIVE_PODGROUP_API, "kind": "PodGroup", "metadata": child_meta(job, job.name), "spec": spec}
    return {
        "apiVersion": "scheduler.tensorstack.dev/v1beta1",
        "kind": "PodGroup",
        "metadata": child_meta(job, job.name),
        "spec": {
            "minMember": min_member,
            "priority": scheduler.priority,
            "queue": scheduler.queue_name,
        },
    }


def disruption_budget(job: JobBase, min_available: int) -> dict[str, Any]:
    """A ``policy/v1`` PodDisruptionBudget over every pod of ``job`` (its owner labels), named like
    the job, with ``minAvailable`` = ``min_available`` (the gang's size, a launcher included): while
    the gang runs, the Eviction API (``kubectl drain``, a cluster autoscaler's scale-down) refuses
    to evict one of its ranks, where it would stop the whole gang, and the drain waits for the job
    to end instead. ``unhealthyPodEvictionPolicy: AlwaysAllow``: a pod that is not Ready (pending,
    crashing) is evicted as usual: the gang is not running anyway (Kubernetes 1.31+)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": child_meta(job, job.name),
        "spec": {
            "minAvailable": min_available,
            "selector": {"matchLabels": {LABEL_OWNER_KIND: job.kind, LABEL_OWNER_NAME: job.name}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def scheduler_field_warnings(job: JobBase, templates: Templates) -> list[str]:
    """Pod-template scheduling fields (of ``templates``, :meth:`Framework.templates`) that
    ``t9kScheduler`` overrides: ``schedulerName`` (the pods use t9k-scheduler, or the default
    scheduler with a native gang) and, where the cluster gang-schedules with ``scheduling.k8s.io``
    PodGroups, a ``priorityClassName`` or ``priority`` that wins over ``t9kScheduler.priority``
    (:func:`base_pod`, :func:`pod_group`)."""
    spec: Any = job.spec
    sched = spec.scheduler.t9k_scheduler if spec.scheduler is not None else None
    if sched is None:
        return []
    out = []
    for where, template in templates:
        pod = template["spec"]
        name = pod.get("schedulerName")
        if name and name != T9K_SCHEDULER_NAME:
            out.append(
                f"{where}.spec.schedulerName: {name!r} is replaced; with spec.scheduler.t9kScheduler the pods use "
                f"{T9K_SCHEDULER_NAME}, or the default scheduler where the cluster gang-schedules with "
                "scheduling.k8s.io PodGroups (it is kept only on a cluster that serves neither)"
            )
    if "priority" in sched.model_fields_set:
        for where, template in templates:
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


def tensorboard(job: JobBase, spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The TensorBoard of reference §1.9: the job's ``tensorboardSpec`` verbatim, named like the job."""
    if spec is None:
        return None
    return {
        "apiVersion": "tensorstack.dev/v1beta1",
        "kind": "TensorBoard",
        "metadata": child_meta(job, job.name),
        "spec": copy.deepcopy(spec),
    }


def split_by_weight(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` replicas in proportion to ``weights`` (reference §3.5), by largest remainders.

    Each entry gets the floor of its exact share; the replicas left go one each to the entries
    with the largest fractional parts (ties in list order), never to a zero weight. All-zero
    weights count as equal. Examples: ``split_by_weight(4, [1, 2]) == [1, 3]`` (exact shares
    1.33 and 2.67), ``split_by_weight(5, [1, 1]) == [3, 2]``.
    """
    if not weights:
        return []
    if sum(weights) <= 0:
        weights = [1] * len(weights)
    whole = sum(weights)
    shares = [total * w // whole for w in weights]
    left = total - sum(shares)
    # The fractional part of entry i is (total * w_i mod whole) / whole: compare the integers.
    order = sorted((i for i, w in enumerate(weights) if w > 0), key=lambda i: -(total * weights[i] % whole))
    for i in order[:left]:
        shares[i] += 1
    return shares
