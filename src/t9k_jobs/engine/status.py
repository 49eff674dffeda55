"""The job's status derived at the end of a pass: phase, tasks, aggregate, conditions [§1.8], TensorBoard [§1.9]."""

from __future__ import annotations

from ..api.common import TERMINAL_PHASES, Aggregate, Condition, DependentStatus, ReplicaStatus, TaskStatus
from ..frameworks import Outcome
from .context import Pass, rfc3339
from .preemption import preempted_now, preempted_row
from .replica_status import final_from_status
from .waiting import waiting_message


def active_phase(p: Pass) -> str:
    """Pending until every desired pod exists and one runs or ran; Resuming after a pause. A
    Running job whose replicas are being replaced stays Running, unless the scheduler preempted
    them (:func:`~.preemption.preempted_now`): it waits for its pods again, Pending."""
    desired = [g.pod_name(p.job.name, i) for g in p.groups for i in range(g.replicas)]
    pods = [p.observed.pods.get(n) for n in desired]
    # A pod being deleted (paused, restarted) is on its way out: it does not count as started.
    pods = [None if pod is not None and pod.deleting else pod for pod in pods]
    started = all(pod is not None for pod in pods) and any(
        pod is not None and (pod.effective_phase == "Running" or pod.terminal) for pod in pods
    )
    if started:
        return "Running"
    if p.old.phase in ("Paused", "Resuming"):
        return "Resuming"
    if preempted_now(p):
        return "Pending"  # back to waiting for its pods, as a job just created
    if p.old.phase == "Running":
        return "Running"  # replicas being replaced: the job stays Running
    return "Pending"


def finish_status(p: Pass, phase: str, outcome: Outcome | None) -> None:
    """Derive phase, tasks, aggregate and conditions, and emit phase-change events."""
    s = p.status
    old_tasks = {t.type: t.restart_count for t in s.tasks}
    s.tasks = []
    agg = Aggregate()
    for g in p.groups:
        task = TaskStatus(type=g.type, restart_count=old_tasks.get(g.type, 0))
        for i in range(g.replicas):
            rs = p.replicas.get(g.pod_name(p.job.name, i))
            if rs is None:
                continue
            task.replicas.append(rs)
            setattr(agg, rs.phase.lower(), getattr(agg, rs.phase.lower()) + 1)
        s.tasks.append(task)
    s.aggregate = agg
    if phase != p.old.phase:
        if phase == "Failed":
            pass  # the Warning event was emitted by end
        elif phase != "Succeeded":
            p.event("Normal", phase, f"{p.job.kind} {p.job.name} is {phase.lower()}")
    s.phase = phase  # type: ignore[assignment]
    s.conditions = conditions(p, phase, outcome)
    s.tensorboard = tensorboard_status(p)
    gang = s.condition("GangScheduling")
    if gang is not None and p.old.condition("GangScheduling") is None:
        p.event("Warning", "GangNotEnforced", gang.message)
    now_init, before = s.condition("Initialized"), p.old.condition("Initialized")
    if now_init is not None and now_init.reason == "ChildConflict" and (
        before is None or (before.reason, before.message) != (now_init.reason, now_init.message)
    ):
        p.event("Warning", "ChildConflict", now_init.message)


def conditions(p: Pass, phase: str, outcome: Outcome | None) -> list[Condition]:
    """Conditions shaped like the captured T9k status dumps (reference §1.8)."""
    old = p.old
    terminal = phase in TERMINAL_PHASES
    if terminal and outcome is None:
        # Already finished on an earlier pass: the conditions stand.
        return [c.model_copy() for c in old.conditions]
    # Initialized: every child this runtime makes exists. A kind it does not serve (a TensorBoard
    # locally, or on a cluster without the CRD) is never made, so it is not waited for; the
    # job's status.tensorboard says so (DependentUnavailable). docs/decisions.md.
    made_all = all(
        (o["kind"], o["metadata"]["name"]) in p.observed.others or o["kind"] in p.observed.unserved for o in p.owned
    )
    pods_made = all(rs.phase != "Creating" or pod_made(p, rs) for rs in p.replicas.values())
    initialized = (old.condition("Initialized") is not None and old.condition("Initialized").status == "True") or (
        made_all and pods_made and bool(p.replicas)
    )
    failures = [f for f in p.finals.values() if not f.succeeded]
    if terminal and not failures:
        # The deadline ends a job before its replicas are judged: those whose status says they
        # failed are still the ones ReplicaFailure names.
        failures = [
            final_from_status(rs, g)
            for g in p.groups
            for i in range(g.replicas)
            if (rs := p.replicas.get(g.pod_name(p.job.name, i))) is not None and rs.phase == "Failed"
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
        waiting = waiting_message(p)
        if failures:
            msg = "; ".join([f.describe() for f in failures] + ([waiting] if waiting else []))
            rows.append(("ReplicaFailure", True, "Failed", msg))
        elif waiting:
            rows.append(("ReplicaFailure", False, "ReplicaWaiting", waiting))
        else:
            rows.append(("ReplicaFailure", False, "-", "All pods are running normally."))
    preempted = preempted_row(p, terminal)
    if preempted is not None:
        rows.append(preempted)
    gang = gang_not_enforced(p)
    if gang:
        rows.append(("GangScheduling", False, "NotEnforced", gang))
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
    says it when it first appears (:func:`finish_status`)."""
    sched = p.job.scheduler.t9k_scheduler if p.job.scheduler else None
    if sched is None or p.ctx.gang != "none":
        return ""
    return (
        f"spec.scheduler.t9kScheduler (queue {sched.queue_name}, priority {sched.priority}) is not "
        "enforced: this cluster serves neither T9k's PodGroup (scheduler.tensorstack.dev) nor "
        "scheduling.k8s.io/v1beta1 podgroups, so the pods go to the default scheduler one by one, "
        "without gang admission, queue or priority"
    )


def tensorboard_status(p: Pass) -> DependentStatus | None:
    """``status.tensorboard`` (reference §1.9): where the job's TensorBoard stands, ``None``
    without a ``tensorboardSpec``. Ready when the TensorBoard reports itself ready."""
    tb = next((o for o in p.owned if o["kind"] == "TensorBoard"), None)
    if tb is None:
        return None
    name = tb["metadata"]["name"]
    key = ("TensorBoard", name)
    dependent = {"apiVersion": tb["apiVersion"], "kind": "TensorBoard", "name": name, "namespace": p.job.namespace}

    def dep(action: str, note: str, ready: bool, reason: str, type_: str = "Normal") -> DependentStatus:
        return DependentStatus(action=action, dependent=dependent, note=note, ready=ready, reason=reason, type=type_)  # type: ignore[arg-type]

    if "TensorBoard" in p.observed.unserved:
        return dep("NOP", f"TensorBoard [{name}] is not created: TensorBoards are not served here", False,
                   "DependentUnavailable", "Warning")  # fmt: skip
    if key in p.observed.conflicts:
        return dep("NOP", f"TensorBoard [{name}] belongs to {p.observed.conflicts[key]}", False, "DependentConflict",
                   "Warning")  # fmt: skip
    if key not in p.observed.others:
        return dep("Create", f"TensorBoard [{name}] is being created", False, "DependentCreating")
    if key in p.observed.ready:
        return dep("NOP", f"TensorBoard [{name}] is ready", True, "DependentReady")
    return dep("NOP", f"TensorBoard [{name}] is not ready yet", False, "DependentNotReady")


def conflict_message(p: Pass) -> str:
    """Names the children this job cannot create because someone else holds their names ('' if none)."""
    held = sorted(p.observed.conflicts.items())
    if not held:
        return ""
    names = "; ".join(f"{kind} {name} belongs to {holder}" for (kind, name), holder in held)
    return f"cannot create what the job needs, the names are taken: {names}"


def pod_made(p: Pass, rs: ReplicaStatus) -> bool:
    """A replica reported Creating has its pod: it exists and is not the one being replaced."""
    pod = p.observed.pods.get(rs.name)
    return pod is not None and pod.uid != rs.uid and not pod.deleting
