"""The job's conditions [§1.8], derived at the end of a pass from what it decided."""

from __future__ import annotations

from collections.abc import Callable

from ..api.common import TERMINAL_PHASES, Condition, ReplicaStatus
from ..frameworks import Outcome
from ..frameworks.base import priority_class_name
from .admission import queue_row
from .context import Pass, Tally, rfc3339
from .preemption import preempted_row
from .progress import progressing_row
from .replica_status import final_from_status
from .topology import TOPOLOGY_NOT_ENFORCED, not_enforced
from .waiting import waiting_message


#: The condition a runtime writes on a job whose spec it cannot act on (reason ``InvalidSpec``;
#: :func:`~.status.invalid_spec_status`); a pass over a valid spec leaves it out.
SPEC_VALID = "SpecValid"


def conditions(p: Pass, t: Tally, phase: str, outcome: Outcome | None) -> list[Condition]:
    """Conditions shaped like the captured T9k status dumps (reference §1.8)."""
    old = p.old
    terminal = phase in TERMINAL_PHASES
    if terminal and outcome is None:
        # Already finished on an earlier pass: the conditions stand (a spec fixed since is valid).
        return [c.model_copy() for c in old.conditions if c.type != SPEC_VALID]
    # Initialized: every child this runtime makes exists. A kind it does not serve (a TensorBoard
    # locally, or on a cluster without the CRD) is never made, so it is not waited for; the
    # job's status.tensorboard says so (DependentUnavailable). docs/decisions.md.
    made_all = all(
        (o["kind"], o["metadata"]["name"]) in p.observed.others or o["kind"] in p.runtime.unserved for o in p.owned
    )
    pods_made = all(rs.phase != "Creating" or pod_made(p, t, rs) for rs in t.replicas.values())
    initialized = (old.condition("Initialized") is not None and old.condition("Initialized").status == "True") or (
        made_all and pods_made and bool(t.replicas)
    )
    failures = [f for f in t.finals.values() if not f.succeeded]
    if terminal and not failures:
        # The deadline ends a job before its replicas are judged: those whose status says they
        # failed are still the ones ReplicaFailure names.
        failures = [
            final_from_status(rs, g)
            for g, _, name in p.desired()
            if (rs := t.replicas.get(name)) is not None and rs.phase == "Failed"
        ]
    rows: list[tuple[str, bool, str, str]] = []
    conflicts = conflict_message(p)
    if conflicts and not initialized:
        rows.append(("Initialized", False, "ChildConflict", conflicts))
    else:
        rows.append(
            (
                "Initialized",
                initialized,
                "-",
                "The job has been initialized successfully." if initialized else "The job is being initialized.",
            )
        )
    if terminal:
        assert outcome is not None
        reason = "Succeeded" if outcome.succeeded else "Failed"
        rows.append(("Running", False, reason, outcome.message))
        rows.append(("Failed", not outcome.succeeded, outcome.reason or reason, outcome.message))
        rows.append(("Completed", True, reason, outcome.message))
        # ReplicaFailure says whether a replica failed, not whether the job did: a job failed by
        # its deadline or by no rule matching may have no failed replica at all.
        if failures:
            rows.append(("ReplicaFailure", True, "Failed", "; ".join(f.describe() for f in failures)))
        elif outcome.succeeded:
            rows.append(("ReplicaFailure", False, "-", "All pods are running normally."))
        else:
            rows.append(("ReplicaFailure", False, "-", "No replica has failed."))
    else:
        running = phase == "Running"
        rows.append(
            (
                "Running",
                running,
                "-" if running else phase,
                "The job is running." if running else f"The job is {phase.lower()}.",
            )
        )
        rows.append(("Failed", False, "-", "The job has not failed."))
        rows.append(("Completed", False, "-", "The job has not finished."))
        # A replica that waits (no image, no ConfigMap, no node) has not failed for good: it may
        # still start, so ReplicaFailure stays False, but its message says who waits and why.
        waiting = waiting_message(p, t.replicas)
        if failures:
            msg = "; ".join([f.describe() for f in failures] + ([waiting] if waiting else []))
            rows.append(("ReplicaFailure", True, "Failed", msg))
        elif waiting:
            rows.append(("ReplicaFailure", False, "ReplicaWaiting", waiting))
        else:
            rows.append(("ReplicaFailure", False, "-", "All pods are running normally."))
    progressing = progressing_row(p, t.stalled)
    if progressing is not None:
        rows.append(progressing)
    preempted = preempted_row(p, t, terminal)
    if preempted is not None:
        rows.append(preempted)
    for type_, reason, _warning, unserved in NOT_ENFORCED:
        message = unserved(p)
        if message:
            rows.append((type_, False, reason, message))
    queue = queue_row(p, t.queued, phase)
    if queue is not None:
        rows.append(queue)
    if phase == "Paused":
        rows.append(("Paused", True, "Paused", "The job is paused: its replicas are deleted or being deleted."))
    elif old.condition("Paused") is not None:
        rows.append(("Paused", False, "Resumed", "The job has resumed."))
    out = []
    for type_, value, reason, message in rows:
        status = "True" if value else "False"
        prev = old.condition(type_)
        when = prev.last_transition_time if prev is not None and prev.status == status else rfc3339(p.now)
        out.append(Condition(type=type_, status=status, reason=reason, message=message, last_transition_time=when))
    return out


def gang_not_enforced(p: Pass) -> str:
    """The ``GangScheduling`` condition's message when the job asks for ``t9kScheduler`` and the
    runtime serves no PodGroup API (gang mode ``none``); '' otherwise. The condition (False,
    reason ``NotEnforced``) stays while the job lives; one Warning ``GangNotEnforced`` event
    says it when it first appears (:func:`~.status.finish_status`)."""
    sched = p.job.scheduler.t9k_scheduler if p.job.scheduler else None
    if sched is None or p.ctx.gang != "none":
        return ""
    if p.runtime.queueing:
        return (
            f"spec.scheduler.t9kScheduler (queue {sched.queue_name}, priority {sched.priority}) is "
            "enforced in part: Kueue admits the job by its queue and priority, but this cluster serves "
            "neither T9k's PodGroup (scheduler.tensorstack.dev) nor scheduling.k8s.io/v1beta1 "
            "podgroups, so the admitted pods go to the default scheduler one by one, without gang admission"
        )
    return (
        f"spec.scheduler.t9kScheduler (queue {sched.queue_name}, priority {sched.priority}) is not "
        "enforced: this cluster serves neither T9k's PodGroup (scheduler.tensorstack.dev) nor "
        "scheduling.k8s.io/v1beta1 podgroups, so the pods go to the default scheduler one by one, "
        "without gang admission, queue or priority"
    )


def queue_not_enforced(p: Pass) -> str:
    """The ``Queueing`` condition's message when the job names a queue that nothing enforces:
    the runtime gang-schedules with ``scheduling.k8s.io/v1beta1`` PodGroups (gang mode
    ``native``), which have no queue, and serves no Kueue to queue the job; '' otherwise. The
    condition (False, reason ``NotEnforced``) stays while the job lives; one Warning
    ``QueueNotEnforced`` event says it when it first appears (:func:`~.status.finish_status`).
    Where T9k's PodGroup is served its scheduler takes the queue; with gang mode ``none`` the
    ``GangScheduling`` condition says it."""
    sched = p.job.scheduler.t9k_scheduler if p.job.scheduler else None
    if sched is None or not sched.queue or p.ctx.gang != "native" or p.runtime.queueing:
        return ""
    return (
        f"spec.scheduler.t9kScheduler.queue ({sched.queue}) is not enforced: this cluster gang-schedules with "
        "scheduling.k8s.io/v1beta1 PodGroups, which have no queue, and serves no Kueue (kueue.x-k8s.io) to queue "
        "the job; its pods are bound as one gang as soon as they fit, at its PodGroup's priority"
    )


#: Reason of the ``Priority`` condition (False) of a job whose priority has no PriorityClass.
NO_PRIORITY_CLASS = "NoPriorityClass"


def priority_not_enforced(p: Pass) -> str:
    """The ``Priority`` condition's message when a native gang's priority has no PriorityClass on
    this cluster ('' otherwise): the pods and the PodGroup then name none and run at the default
    priority, preempting nothing. Only the cluster admin makes the ``t9k-priority-<N>`` classes,
    for the priorities they allow (the chart's ``jobPriorities.allowed``; docs/scheduling.md), so
    a job creator cannot gain preemption over other namespaces' pods. Not said where Kueue queues
    the job (its Workload carries the priority, which Kueue orders and preempts by, within the
    admin's quotas), nor for replica templates that name their own class or priority (the
    Priority admission plugin judges those), nor where the classes are not known (``render``).
    The condition (False, reason :data:`NO_PRIORITY_CLASS`) stays while it holds; one Warning
    ``PriorityNotEnforced`` event says it when it first appears (:func:`~.status.finish_status`)."""
    sched = p.job.scheduler.t9k_scheduler if p.job.scheduler else None
    known = p.observed.priority_classes
    if sched is None or p.ctx.gang != "native" or p.runtime.queueing or known is None:
        return ""
    name = priority_class_name(sched.priority)
    if name in known:
        return ""
    own = [g for g in p.groups if (g.template.get("spec") or {}).get("priorityClassName")
           or (g.template.get("spec") or {}).get("priority") is not None]  # fmt: skip
    if own and len(own) == len(p.groups):
        return ""
    return (
        f"spec.scheduler.t9kScheduler.priority ({sched.priority}) is not enforced: this cluster has no "
        f"PriorityClass {name}, so the job's pods and PodGroup run at the default priority and preempt "
        "nothing; the cluster admin allows a priority by making its class (the chart's value "
        "jobPriorities.allowed)"
    )


def conflict_message(p: Pass) -> str:
    """Names the children this job cannot create because someone else holds their names ('' if none)."""
    held = sorted(p.observed.conflicts.items())
    if not held:
        return ""
    names = "; ".join(f"{kind} {name} belongs to {holder}" for (kind, name), holder in held)
    return f"cannot create what the job needs, the names are taken: {names}"


def pod_made(p: Pass, t: Tally, rs: ReplicaStatus) -> bool:
    """A replica reported Creating has its pod: it exists and is not the one being replaced (on
    its way out, deleted by this pass, or of an earlier restart attempt than the replica's)."""
    pod = p.observed.pods.get(rs.name)
    if pod is None or pod.deleting or t.deletes_pod(rs.name):
        return False
    return pod.restart_attempt is None or pod.restart_attempt >= rs.restart_count


#: What a job asked for and this runtime does not enforce: the condition (type, reason; status
#: False, kept while the job lives), the Warning event said once when it first appears
#: (:func:`~.status.finish_status`), and the function whose message says why (empty: enforced).
NOT_ENFORCED: tuple[tuple[str, str, str, Callable[[Pass], str | None]], ...] = (
    ("GangScheduling", "NotEnforced", "GangNotEnforced", gang_not_enforced),
    ("Topology", TOPOLOGY_NOT_ENFORCED, TOPOLOGY_NOT_ENFORCED, not_enforced),
    ("Queueing", "NotEnforced", "QueueNotEnforced", queue_not_enforced),
    ("Priority", NO_PRIORITY_CLASS, "PriorityNotEnforced", priority_not_enforced),
)
