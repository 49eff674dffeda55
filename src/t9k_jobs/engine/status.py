"""The job's status, derived once at the end of a pass from what the pass decided
(:class:`~.context.Tally`): phase, tasks, aggregate, conditions [§1.8], TensorBoard [§1.9]."""

from __future__ import annotations

from ..api.common import Aggregate, Condition, DependentStatus, JobStatus, TaskStatus
from ..frameworks import Outcome
from .admission import queue_events
from .conditions import NOT_ENFORCED, SPEC_VALID, conditions
from .context import Pass, Tally, rfc3339
from .preemption import preempted_now


def active_phase(p: Pass, t: Tally) -> str:
    """Pending until every desired pod exists and one runs or ran; Resuming after a pause. A
    Running job whose replicas are being replaced stays Running, unless the scheduler preempted
    them (:func:`~.preemption.preempted_now`): it waits for its pods again, Pending."""
    pods = [p.observed.pods.get(n) for _, _, n in p.desired()]
    # A pod being deleted (paused, restarted) is on its way out: it does not count as started.
    pods = [None if pod is not None and pod.deleting else pod for pod in pods]
    started = all(pod is not None for pod in pods) and any(
        pod is not None and (pod.effective_phase == "Running" or pod.terminal) for pod in pods
    )
    if started:
        return "Running"
    if p.old.phase in ("Paused", "Resuming"):
        return "Resuming"
    if preempted_now(p, t):
        return "Pending"  # back to waiting for its pods, as a job just created
    if p.old.phase == "Running":
        return "Running"  # replicas being replaced: the job stays Running
    return "Pending"


def finish_status(p: Pass, t: Tally, phase: str, outcome: Outcome | None) -> JobStatus:
    """The job's status, derived once from the pass's tally: counters and times, tasks, aggregate,
    phase, conditions and TensorBoard; emits the phase-change events. The one status update."""
    s = p.old.model_copy(deep=True)
    s.observed_generation = p.job.metadata.generation
    s.start_time, s.completion_time, s.backoff_count = t.start_time, t.completion_time, t.backoff_count
    s.tasks = []
    agg = Aggregate()
    for g in p.groups:
        task = TaskStatus(type=g.type, restart_count=t.task_restarts.get(g.type, 0))
        for i in range(g.replicas):
            rs = t.replicas.get(g.pod_name(p.job.name, i))
            if rs is None:
                continue
            task.replicas.append(rs)
            setattr(agg, rs.phase.lower(), getattr(agg, rs.phase.lower()) + 1)
        s.tasks.append(task)
    s.aggregate = agg
    if phase != p.old.phase:
        if phase == "Failed":
            pass  # the Warning event was emitted by the ending
        elif phase != "Succeeded":
            t.event("Normal", phase, f"{p.job.kind} {p.job.name} is {phase.lower()}")
    s.phase = phase  # type: ignore[assignment]
    s.conditions = conditions(p, t, phase, outcome)
    s.tensorboard = tensorboard_status(p)
    if (s.tensorboard is not None and s.tensorboard.reason == "DependentUnavailable"
            and (p.old.tensorboard is None or p.old.tensorboard.reason != "DependentUnavailable")):  # fmt: skip
        t.event("Warning", "TensorBoardUnavailable", f"spec.tensorboardSpec is not served: {p.runtime.unserved_hint}")
    queued, before_queued = s.condition("Queued"), p.old.condition("Queued")
    if queued is not None and outcome is None and phase not in ("Succeeded", "Failed"):
        row = (queued.type, queued.status == "True", queued.reason or "", queued.message or "")
        old_status, old_reason = (before_queued.status, before_queued.reason) if before_queued else (None, None)
        for type_, reason, message in queue_events(old_reason, old_status, row):
            t.event(type_, reason, message)
    for type_, _reason, warning, _unserved in NOT_ENFORCED:
        now = s.condition(type_)
        if now is not None and p.old.condition(type_) is None:
            t.event("Warning", warning, now.message)
    now_init, before = s.condition("Initialized"), p.old.condition("Initialized")
    if now_init is not None and now_init.reason == "ChildConflict" and (
        before is None or (before.reason, before.message) != (now_init.reason, now_init.message)
    ):
        t.event("Warning", "ChildConflict", now_init.message)
    return s


def tensorboard_status(p: Pass) -> DependentStatus | None:
    """``status.tensorboard`` (reference §1.9): where the job's TensorBoard stands, ``None``
    without a ``tensorboardSpec``. Ready when the TensorBoard reports itself ready; the note
    says where it serves when the runtime knows (``Observed.served_at``)."""
    tb = next((o for o in p.owned if o["kind"] == "TensorBoard"), None)
    if tb is None:
        return None
    name = tb["metadata"]["name"]
    key = ("TensorBoard", name)
    dependent = {"apiVersion": tb["apiVersion"], "kind": "TensorBoard", "name": name, "namespace": p.job.namespace}

    def dep(action: str, note: str, ready: bool, reason: str, type_: str = "Normal") -> DependentStatus:
        return DependentStatus(action=action, dependent=dependent, note=note, ready=ready, reason=reason, type=type_)  # type: ignore[arg-type]

    if "TensorBoard" in p.runtime.unserved:
        return dep("NOP", f"TensorBoard [{name}] is not created: TensorBoards are not served here", False,
                   "DependentUnavailable", "Warning")  # fmt: skip
    if key in p.observed.conflicts:
        return dep("NOP", f"TensorBoard [{name}] belongs to {p.observed.conflicts[key]}", False, "DependentConflict",
                   "Warning")  # fmt: skip
    if key not in p.observed.others:
        return dep("Create", f"TensorBoard [{name}] is being created", False, "DependentCreating")
    if key in p.observed.ready:
        url = p.observed.served_at.get(key)
        return dep("NOP", f"TensorBoard [{name}] is ready" + (f" at {url}" if url else ""), True, "DependentReady")
    return dep("NOP", f"TensorBoard [{name}] is not ready yet", False, "DependentNotReady")


def invalid_spec_status(old: JobStatus | None, message: str, now: float) -> JobStatus:
    """The status of a job the runtime leaves alone because it cannot act on its spec (it does
    not validate, or the engine cannot handle it): the status it had (``Pending`` with none),
    and the condition ``SpecValid`` False, reason ``InvalidSpec``, with ``message`` (the
    validation's lines). ``now``: epoch seconds, the condition's transition time unless it was
    already False. A pass over a valid spec derives its conditions afresh, without it."""
    s = (old or JobStatus()).model_copy(deep=True)
    prev = s.condition(SPEC_VALID)
    when = prev.last_transition_time if prev is not None and prev.status == "False" else rfc3339(now)
    cond = Condition(type=SPEC_VALID, status="False", reason="InvalidSpec", message=message, last_transition_time=when)
    s.conditions = [c for c in s.conditions if c.type != SPEC_VALID] + [cond]
    return s
