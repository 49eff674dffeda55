"""``reconcile(job, observed, now) -> Plan``: every behavioural decision about a job.

Pure: no I/O, no clock (``now`` is seconds since the epoch), no randomness. Level-triggered:
the plan depends only on the job (spec and the counters kept in its status) and on what
exists, so running it twice on the same input gives the same plan, and a restarted runtime
converges without having seen any event.

The pass, in order (reference sections in brackets):

1. children other than pods that are missing: Services, PodGroup, TensorBoard, ConfigMaps,
   Secrets [§1.2, §1.7, §1.9];
2. a finished job only applies its clean-up policy [§1.6];
3. ``activeDeadlineSeconds`` past ``status.startTime`` (set on the first pass that acts on the
   job, cleared by a pause) fails the job [§1.4];
4. pause deletes every replica pod [§1.5];
5. each replica: create it, wait for it, or, once it ended, restart it by policy and backoff
   or record it as final [§1.4, §1.11];
6. the framework decides success or failure from the final replicas [§2.3, §3.2, §4.4, §5.3];
7. replicas that wait for a reason (no image, no ConfigMap, no node) are reported, once;
8. phase, conditions, tasks and aggregate are derived [§1.8].

A pod has ended when the kubelet says so or when all its containers have terminated
(:attr:`ObservedPod.effective_phase`); every step reads that, never the reported phase alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..api.common import (
    RETRYABLE_EXIT_CODES,
    TERMINAL_PHASES,
    Aggregate,
    Condition,
    ContainerStatus,
    DependentStatus,
    JobStatus,
    ReplicaStatus,
    TaskStatus,
)
from ..api.kinds import JobBase
from ..frameworks import BuildContext, Final, Framework, Outcome, ReplicaGroup, framework_for
from .desired import CLUSTER, build_pod, children, plan_children, relaunches
from .types import Addressing, ContainerState, Delete, Event, Observed, ObservedPod, Plan

ACTIVE = frozenset({"Creating", "Pending", "Running", "Unknown"})
CONFLICT_RECHECK = 30.0  # seconds between looks at a child name held by someone else
UNFINISHED_GRACE = 5.0  # seconds a finished job's running replicas get to end by themselves (cleanUpPolicy Unfinished)
#: Terminated reasons that say no more than the exit code (the kubelet's: 0 Completed, else Error);
#: failure messages and restart events leave them out.
PLAIN_REASONS = frozenset({"Completed", "Error"})
#: Waiting reasons of a container on its ordinary way to running: not reported as a problem.
BENIGN_WAITING = frozenset({"ContainerCreating", "PodInitializing"})
#: Waiting reasons the kubelet alternates between for one cause: one cause, one event.
_SAME_CAUSE = {"ImagePullBackOff": "ErrImagePull"}
#: Longest reason message kept in the status (a scheduler's or a start error's can be long).
MESSAGE_LIMIT = 512


def rfc3339(now: float) -> str:
    """``now`` (seconds since the epoch) as an RFC 3339 UTC timestamp with second precision."""
    return datetime.fromtimestamp(now, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> float:
    """Inverse of :func:`rfc3339`; raises ``ValueError`` on another format."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


@dataclass
class _Pass:
    """Working state of one reconcile pass."""

    job: JobBase
    fw: Framework
    groups: list[ReplicaGroup]
    observed: Observed
    now: float
    ctx: BuildContext
    old: JobStatus
    status: JobStatus
    plan: Plan
    replicas: dict[str, ReplicaStatus] = field(default_factory=dict)
    finals: dict[tuple[str, int], Final] = field(default_factory=dict)
    restarts: list[tuple[ReplicaGroup, int, str]] = field(default_factory=list)
    creates: list[tuple[ReplicaGroup, int]] = field(default_factory=list)
    owned: list[dict[str, Any]] = field(default_factory=list)

    def prior(self, name: str) -> ReplicaStatus | None:
        for task in self.old.tasks:
            for rs in task.replicas:
                if rs.name == name:
                    return rs
        return None

    def delete_pod(self, pod: ObservedPod, reason: str) -> None:
        if not pod.deleting and all((d.kind, d.name) != ("Pod", pod.name) for d in self.plan.delete):
            self.plan.delete.append(Delete("Pod", pod.name, pod.uid, reason))

    def event(self, type_: str, reason: str, message: str) -> None:
        self.plan.events.append(Event(type_, reason, message))  # type: ignore[arg-type]


def reconcile(job: JobBase, observed: Observed, now: float, addressing: Addressing = CLUSTER) -> Plan:
    """Decide what to do about ``job`` given what exists (``observed``) at time ``now``.

    ``now`` is seconds since the epoch. ``addressing`` maps replicas to hosts and ports
    (Kubernetes Services by default; the local runtime passes its own). Returns a
    :class:`Plan`; never raises for any valid job and any observed state.
    """
    fw = framework_for(job)
    old = job.status or JobStatus()
    status = old.model_copy(deep=True)
    ctx = BuildContext(addressing, resumed=old.condition("Paused") is not None)
    p = _Pass(job, fw, fw.groups(job), observed, now, ctx, old, status, Plan(status=status))
    status.observed_generation = job.metadata.generation

    p.owned = children(job, addressing)
    p.plan.create, p.plan.update, p.plan.delete = plan_children(p.owned, observed)
    if observed.conflicts:
        # Names held by objects this job does not control: look again later, they may go away.
        p.plan.requeue_after = CONFLICT_RECHECK

    if old.phase in TERMINAL_PHASES:
        _clean_up(p)
        _refresh_replicas(p)
        _finish_status(p, old.phase, None)
        return p.plan

    policy = getattr(job.spec, "run_policy", None)  # type: ignore[attr-defined]
    deadline = getattr(policy, "active_deadline_seconds", None)
    if deadline and status.start_time:
        ends = parse_time(status.start_time) + deadline
        if now >= ends:
            msg = f"{job.kind} {job.name} has failed: it was active longer than activeDeadlineSeconds ({deadline}s)"
            for pod in observed.pods.values():
                if not pod.terminal:
                    p.delete_pod(pod, "DeadlineExceeded")
            _refresh_replicas(p)
            _end(p, Outcome(False, msg, reason="DeadlineExceeded"))
            return p.plan
        p.plan.requeue_after = min(ends - now, p.plan.requeue_after or ends - now)

    if job.run_mode.pause_enabled:
        for pod in observed.pods.values():
            p.delete_pod(pod, "Paused")
        _refresh_replicas(p, paused=True)
        # As a suspended Kubernetes Job: the deadline's clock stops, and starts again on resume.
        status.start_time = None
        _finish_status(p, "Paused", None)
        return p.plan

    if not status.start_time:
        # The first pass that acts on the job (as Kubernetes' Job controller sets it): a job
        # whose pods never start still meets its activeDeadlineSeconds.
        status.start_time = rfc3339(now)
        if deadline:
            p.plan.requeue_after = min(float(deadline), p.plan.requeue_after or float(deadline))

    _walk_replicas(p)

    outcome = None if job.run_mode.debug_enabled else fw.outcome(job, p.groups, p.finals)
    if outcome is not None:
        # Replicas that were about to be (re)created never will be: report every replica as
        # the finished job's later passes will, so the status is final on this pass.
        p.replicas.clear()
        _refresh_replicas(p)
        _end(p, outcome)
        return p.plan

    _apply_restarts(p)
    for g, i in p.creates:
        if ("Pod", g.pod_name(job.name, i)) not in observed.conflicts:
            p.plan.create.append(build_pod(job, g, i, ctx))
    _report_waiting(p)
    _finish_status(p, _active_phase(p), None)
    return p.plan


# --------------------------------------------------------------------------- replicas


def _walk_replicas(p: _Pass) -> None:
    """Classify every desired replica: to create, waiting, to restart, or final."""
    desired: set[str] = set()
    debug = p.job.run_mode.debug_enabled
    resuming = p.old.phase in ("Paused", "Resuming")
    relaunch = relaunches(p.job, p.fw, p.groups, p.observed, p.ctx)
    for g in p.groups:
        for i in range(g.replicas):
            name = g.pod_name(p.job.name, i)
            desired.add(name)
            prev = p.prior(name)
            rc = prev.restart_count if prev else 0
            pod = p.observed.pods.get(name)
            if pod is None:
                _missing(p, g, i, name, prev, rc, resuming, debug)
            elif prev is not None and prev.phase == "Creating" and prev.uid and pod.uid == prev.uid:
                # The pod we are replacing (the restart marker names its uid): make sure its
                # deletion is under way. A new pod waiting to be scheduled is reported as
                # Creating without a uid, so it is never mistaken for one being replaced.
                p.delete_pod(pod, "Restart")
                p.replicas[name] = prev.model_copy()
            elif name in relaunch:
                # Its launch changed (the host list of an elastic launcher): replaced like a
                # restart, but the job asked for it, so no restart or backoff is counted.
                p.delete_pod(pod, "Relaunch")
                p.replicas[name] = _from_pod(pod, rc).model_copy(update={"phase": "Creating", "uid": pod.uid})
                p.event("Normal", "RelaunchingReplica", f"relaunching {name}: the replicas it launches changed")
            elif prev is None and pod.deleting:
                # Scaled away earlier and wanted again before its pod is gone: recreate it once
                # the pod is gone, like a restart but without counting one.
                p.replicas[name] = _from_pod(pod, rc).model_copy(update={"phase": "Creating"})
            else:
                p.replicas[name] = _from_pod(pod, rc)
                # A pod someone else is deleting that has already ended is judged like any
                # other ended pod [§1.11]; only pods deleted by the pause are left alone.
                if pod.terminal and not debug and not (pod.deleting and resuming):
                    _ended(p, g, i, pod, rc)
    for pod in p.observed.pods.values():
        if pod.name not in desired:
            p.delete_pod(pod, "ScaledDown")


def _missing(
    p: _Pass, g: ReplicaGroup, i: int, name: str, prev: ReplicaStatus | None, rc: int, resuming: bool, debug: bool
) -> None:
    if prev is None or prev.phase == "Creating" or resuming:
        p.creates.append((g, i))
        p.replicas[name] = ReplicaStatus(name=name, phase="Creating", restart_count=rc)
        return
    if prev.phase in ("Succeeded", "Failed") or prev.phase == "Deleted":
        # Ended before it disappeared: its result stands.
        p.replicas[name] = prev.model_copy()
        if not debug:
            p.finals[(g.type, i)] = _final_from_status(prev, g)
        return
    # It was active and someone else deleted it [§1.11]: an environmental failure.
    p.event("Warning", "ReplicaDeleted", f"pod {name} was deleted while the job was running")
    if debug:
        p.creates.append((g, i))
        p.replicas[name] = ReplicaStatus(name=name, phase="Creating", restart_count=rc)
        return
    if _may_restart(p, g, rc, retryable=g.restart_policy != "Never"):
        p.restarts.append((g, i, "deleted"))
        p.replicas[name] = ReplicaStatus(name=name, uid=prev.uid, phase="Deleted", restart_count=rc)
    else:
        gone = ReplicaStatus(name=name, uid=prev.uid, phase="Deleted", restart_count=rc)
        p.replicas[name] = gone
        p.finals[(g.type, i)] = Final(name, False, None, "deleted")


def _ended(p: _Pass, g: ReplicaGroup, i: int, pod: ObservedPod, rc: int) -> None:
    """A replica pod has terminated: restart it by policy, or record it as final [§1.4]."""
    failed = pod.effective_phase == "Failed"
    code = pod.exit_code(g.training_container)
    reason = _end_reason(pod, g.training_container)
    if g.restart_policy == "Always":
        retryable = True
    elif g.restart_policy == "OnFailure":
        retryable = failed
    elif g.restart_policy == "ExitCode":
        # No exit code at all (eviction, node loss) counts as environmental: retried.
        retryable = failed and (code is None or code in RETRYABLE_EXIT_CODES)
    else:
        retryable = False
    if _may_restart(p, g, rc, retryable):
        why = ", ".join(([f"exit code {code}"] if code is not None else []) + ([reason] if reason else []))
        p.restarts.append((g, i, why or pod.effective_phase.lower()))
    else:
        p.finals[(g.type, i)] = Final(pod.name, not failed, code, reason)


def _informative(*reasons: str | None) -> str | None:
    """The reasons that add to an exit code, without repeats, joined by ``, ``; ``None`` if none."""
    out: list[str] = []
    for r in reasons:
        if r and r not in PLAIN_REASONS and r not in out:
            out.append(r)
    return ", ".join(out) or None


def _end_reason(pod: ObservedPod, container: str) -> str | None:
    """Why the pod ended, beyond its exit code: the pod's reason (``Evicted``) and the container's
    terminated reason (``OOMKilled``), or the init container that failed when no container ran."""
    c = pod.ended_container(container)
    reason = _informative(pod.reason, c.reason if c is not None and c.state == "Terminated" else None)
    if reason is None and (c is None or c.exit_code is None):
        for ic in pod.init_containers:
            if ic.state == "Terminated" and ic.exit_code not in (None, 0):
                return f"init container {ic.name} exited with code {ic.exit_code}"
    return reason


def _may_restart(p: _Pass, g: ReplicaGroup, rc: int, retryable: bool) -> bool:
    """Whether a retryable end may restart: the per-replica ``limit`` and the shared backoff."""
    if not retryable:
        return False
    if g.limit is not None and rc >= g.limit:
        return False
    if g.backoff_limit is not None:
        planned = len(p.restarts) if p.fw.restart_scope == "replica" else min(1, len(p.restarts))
        if p.status.backoff_count + planned >= g.backoff_limit:
            return False
    return True


def _apply_restarts(p: _Pass) -> None:
    """Delete the pods to restart and count the restarts; the next pass creates them again.

    With restart scope ``all`` (DeepSpeedJob) one failure restarts every replica and counts
    one backoff.
    """
    if not p.restarts:
        return
    todo = p.restarts
    if p.fw.restart_scope == "all":
        why = todo[0][2]
        todo = [(g, i, why) for g in p.groups for i in range(g.replicas)]
        p.status.backoff_count += 1
    for g, i, why in todo:
        name = g.pod_name(p.job.name, i)
        pod = p.observed.pods.get(name)
        if p.fw.restart_scope == "replica":
            p.status.backoff_count += 1
        task = _task(p.status, g.type)
        task.restart_count += 1
        prev = p.replicas.get(name)
        rc = (prev.restart_count if prev else 0) + 1
        # Keep what the pod showed so a later pass reporting the same pod writes the same status.
        marker = (
            _from_pod(pod, rc).model_copy(update={"uid": pod.uid})
            if pod is not None
            else ReplicaStatus(name=name, phase="Creating", restart_count=rc)
        )
        p.replicas[name] = marker.model_copy(update={"phase": "Creating"})
        p.creates = [(cg, ci) for cg, ci in p.creates if (cg.type, ci) != (g.type, i)]
        if pod is not None:
            p.delete_pod(pod, "Restart")
        else:
            p.creates.append((g, i))
        p.event("Normal", "RestartingReplica", f"restarting {name} ({why}); backoff count {p.status.backoff_count}")


def _from_pod(pod: ObservedPod, restart_count: int) -> ReplicaStatus:
    """A replica's status from its pod. A pod not yet scheduled is ``Creating`` with no uid:
    ``Creating`` with a uid is the restart marker, naming the pod being replaced.

    The phase is the pod's :attr:`~ObservedPod.effective_phase`. ``reason``/``message``: the
    pod's own, else those of ``PodScheduled=False`` while unscheduled, else those of an init
    container that waits for a reason other than the benign ones.
    """
    phase: str = pod.effective_phase
    uid = pod.uid
    reason, message = pod.reason, pod.message
    if phase == "Pending" and not pod.scheduled:
        phase, uid = "Creating", ""
        if reason is None:
            reason, message = pod.scheduling_reason, pod.scheduling_message
    if reason is None and phase in ACTIVE:
        for ic in pod.init_containers:
            if ic.state == "Waiting" and ic.reason and ic.reason not in BENIGN_WAITING:
                reason = ic.reason
                message = f"init container {ic.name}" + (f": {ic.message}" if ic.message else "")
                break
    return ReplicaStatus(
        name=pod.name,
        uid=uid,
        phase=phase,  # type: ignore[arg-type]
        reason=reason,
        message=_cut(message),
        restart_count=restart_count,
        containers=[_container_status(c) for c in pod.containers],
    )


def _container_status(c: ContainerState) -> ContainerStatus:
    """A container's status for ``status.tasks[].replicas[].containers`` (see :class:`ContainerStatus`)."""
    terminated = c.state == "Terminated"
    keep_message = not terminated or c.reason not in PLAIN_REASONS
    return ContainerStatus(
        name=c.name,
        state=c.state,
        exit_code=c.exit_code if terminated else None,
        reason=c.reason,
        message=_cut(c.message) if keep_message else None,
    )


def _cut(text: str | None) -> str | None:
    if not text:
        return None
    return text if len(text) <= MESSAGE_LIMIT else text[: MESSAGE_LIMIT - 3] + "..."


def _final_from_status(rs: ReplicaStatus, g: ReplicaGroup) -> Final:
    """The end of a replica whose pod is gone, as its last status recorded it."""
    code, creason = None, None
    for c in rs.containers:
        if c.name == g.training_container:
            code, creason = c.exit_code, c.reason
    if rs.phase == "Deleted":
        return Final(rs.name, False, code, "deleted")
    return Final(rs.name, rs.phase == "Succeeded", code, _informative(rs.reason, creason))


def _refresh_replicas(p: _Pass, paused: bool = False) -> None:
    """Replica status from what exists, for passes that create nothing (finished, paused)."""
    for g in p.groups:
        for i in range(g.replicas):
            name = g.pod_name(p.job.name, i)
            if name in p.replicas:
                continue
            prev = p.prior(name)
            rc = prev.restart_count if prev else 0
            pod = p.observed.pods.get(name)
            if paused:
                p.replicas[name] = ReplicaStatus(name=name, uid=pod.uid if pod else "", phase="Deleted", restart_count=rc)
            elif pod is not None:
                rs = _from_pod(pod, rc)
                if pod.deleting and (prev is None or prev.phase not in ("Succeeded", "Failed")):
                    # Stopped by clean-up or the deadline: its end is our doing, not a failure.
                    rs.phase = "Deleted"
                p.replicas[name] = rs
            elif prev is not None:
                keep = prev.phase in ("Succeeded", "Failed")
                p.replicas[name] = prev if keep else prev.model_copy(update={"phase": "Deleted"})
            else:
                p.replicas[name] = ReplicaStatus(name=name, phase="Deleted", restart_count=rc)


# --------------------------------------------------------------------------- replicas that wait


def _waiting(rs: ReplicaStatus) -> list[tuple[str, str]]:
    """Why an active replica's pod cannot go on, as ``(reason, text)`` pairs; empty when none.

    From its status (so a later pass compares with the stored one): the pod-level reason
    (``Unschedulable`` with the scheduler's message, an init container's waiting reason) and each
    container's waiting reason other than the benign ``ContainerCreating``/``PodInitializing``
    (``ErrImageNeverPull``, ``ErrImagePull``/``ImagePullBackOff``, ``CreateContainerConfigError``,
    ``CrashLoopBackOff``...). ``text`` is ``<reason>[ (container <name>)][: <message>]``. The
    restart marker (``Creating`` with a uid) names a pod on its way out: nothing waits there.
    """
    if rs.phase not in ACTIVE or (rs.phase == "Creating" and rs.uid):
        return []
    out: list[tuple[str, str]] = []
    if rs.reason and rs.reason not in BENIGN_WAITING:
        out.append((rs.reason, rs.reason + (f": {rs.message}" if rs.message else "")))
    several = len(rs.containers) > 1
    for c in rs.containers:
        if c.state == "Waiting" and c.reason and c.reason not in BENIGN_WAITING:
            where = f" (container {c.name})" if several else ""
            out.append((c.reason, c.reason + where + (f": {c.message}" if c.message else "")))
    return out


def _report_waiting(p: _Pass) -> None:
    """One Warning ``ReplicaWaiting`` event per replica when a reason to wait first appears.

    Compared with the replica's status stored by the previous pass, so a reason that stays is
    not reported again on every pass; ``ErrImagePull`` and ``ImagePullBackOff``, which the
    kubelet alternates between for one missing image, count as one reason.
    """
    for name, rs in p.replicas.items():
        now = _waiting(rs)
        if not now:
            continue
        prev = p.prior(name)
        before = {_SAME_CAUSE.get(r, r) for r, _ in (_waiting(prev) if prev is not None else [])}
        new = [text for r, text in now if _SAME_CAUSE.get(r, r) not in before]
        if new:
            p.event("Warning", "ReplicaWaiting", f"{name} is waiting: {'; '.join(new)}")


def _waiting_message(p: _Pass) -> str:
    """``<pod>[, <pod>...] is/are waiting: <reason>: <message>`` for every replica that waits, in
    replica order; replicas waiting for the same reason and message share one entry (three
    names, then ``and N more``); at most five entries. Empty when no replica waits."""
    by_text: dict[str, list[str]] = {}
    for g in p.groups:
        for i in range(g.replicas):
            name = g.pod_name(p.job.name, i)
            rs = p.replicas.get(name)
            for _, text in _waiting(rs) if rs is not None else []:
                by_text.setdefault(text, []).append(name)
    parts = []
    for text, names in list(by_text.items())[:5]:
        who = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{who} {'is' if len(names) == 1 else 'are'} waiting: {text}")
    if len(by_text) > 5:
        parts.append(f"and {len(by_text) - 5} more reasons")
    return "; ".join(parts)


# --------------------------------------------------------------------------- the end


def _end(p: _Pass, outcome: Outcome) -> None:
    phase = "Succeeded" if outcome.succeeded else "Failed"
    p.status.completion_time = rfc3339(p.now)
    p.plan.requeue_after = None  # a deadline's wake-up is moot; the clean-up may ask for its own
    p.creates.clear()
    p.plan.create = [o for o in p.plan.create if o["kind"] != "Pod"]
    _clean_up(p)
    if outcome.succeeded:
        p.event("Normal", "Succeeded", outcome.message)
    else:
        p.event("Warning", outcome.reason or "Failed", outcome.message)
    _finish_status(p, phase, outcome)


def _clean_up(p: _Pass) -> None:
    """Delete pods of a finished job by ``cleanUpPolicy`` [§1.6]; other children stay.

    ``Unfinished`` spares replicas still running for :data:`UNFINISHED_GRACE` seconds after
    ``completionTime`` and asks to look again then: ranks that end together (a DDP job's) reach
    the runtime a moment apart (a real kubelet notices an exit within its 1 s relist and reports
    the pod's end about 1.2 s later), so a replica that exits 0 a moment after the deciding one
    keeps its result and its logs instead of being deleted as unfinished.
    """
    policy, exempt = p.fw.clean_up(p.job)
    ends = parse_time(p.status.completion_time) + UNFINISHED_GRACE if p.status.completion_time else p.now
    for pod in p.observed.pods.values():
        if pod.replica_type in exempt:
            continue
        if policy == "All":
            p.delete_pod(pod, "CleanUp")
        elif policy == "Unfinished" and not pod.terminal:
            if p.now >= ends:
                p.delete_pod(pod, "CleanUp")
            elif not pod.deleting:
                p.plan.requeue_after = min(p.plan.requeue_after or ends - p.now, ends - p.now)


def _active_phase(p: _Pass) -> str:
    """Pending until every desired pod exists and one runs or ran; Resuming after a pause."""
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
    if p.old.phase == "Running":
        return "Running"  # replicas being replaced: the job stays Running
    return "Pending"


def _task(status: JobStatus, replica_type: str) -> TaskStatus:
    task = status.task(replica_type)
    if task is None:
        task = TaskStatus(type=replica_type)
        status.tasks.append(task)
    return task


def _finish_status(p: _Pass, phase: str, outcome: Outcome | None) -> None:
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
            pass  # the Warning event was emitted by _end
        elif phase != "Succeeded":
            p.event("Normal", phase, f"{p.job.kind} {p.job.name} is {phase.lower()}")
    s.phase = phase  # type: ignore[assignment]
    s.conditions = _conditions(p, phase, outcome)
    s.tensorboard = _tensorboard_status(p)
    now_init, before = s.condition("Initialized"), p.old.condition("Initialized")
    if now_init is not None and now_init.reason == "ChildConflict" and (
        before is None or (before.reason, before.message) != (now_init.reason, now_init.message)
    ):
        p.event("Warning", "ChildConflict", now_init.message)


def _tensorboard_status(p: _Pass) -> DependentStatus | None:
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


def _pod_made(p: _Pass, rs: ReplicaStatus) -> bool:
    """A replica reported Creating has its pod: it exists and is not the one being replaced."""
    pod = p.observed.pods.get(rs.name)
    return pod is not None and pod.uid != rs.uid and not pod.deleting


def _conflict_message(p: _Pass) -> str:
    """Names the children this job cannot create because someone else holds their names ('' if none)."""
    held = sorted(p.observed.conflicts.items())
    if not held:
        return ""
    names = "; ".join(f"{kind} {name} belongs to {holder}" for (kind, name), holder in held)
    return f"cannot create what the job needs, the names are taken: {names}"


def _conditions(p: _Pass, phase: str, outcome: Outcome | None) -> list[Condition]:
    """Conditions shaped like the captured T9k status dumps (reference §1.8)."""
    old = p.old
    terminal = phase in TERMINAL_PHASES
    if terminal and outcome is None:
        # Already finished on an earlier pass: the conditions stand.
        return [c.model_copy() for c in old.conditions]
    made_all = all((o["kind"], o["metadata"]["name"]) in p.observed.others for o in p.owned)
    pods_made = all(rs.phase != "Creating" or _pod_made(p, rs) for rs in p.replicas.values())
    initialized = (old.condition("Initialized") is not None and old.condition("Initialized").status == "True") or (
        made_all and pods_made and bool(p.replicas)
    )
    failures = [f for f in p.finals.values() if not f.succeeded]
    rows: list[tuple[str, bool, str, str]] = []
    conflicts = _conflict_message(p)
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
        if failures or not outcome.succeeded:
            msg = "; ".join(f.describe() for f in failures) or outcome.message
            rows.append(("ReplicaFailure", True, "Failed", msg if failures else outcome.message))
        else:
            rows.append(("ReplicaFailure", False, "-", "All pods are running normally."))
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
        waiting = _waiting_message(p)
        if failures:
            msg = "; ".join([f.describe() for f in failures] + ([waiting] if waiting else []))
            rows.append(("ReplicaFailure", True, "Failed", msg))
        elif waiting:
            rows.append(("ReplicaFailure", False, "ReplicaWaiting", waiting))
        else:
            rows.append(("ReplicaFailure", False, "-", "All pods are running normally."))
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

