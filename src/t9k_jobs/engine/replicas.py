"""Every desired replica, classified: to create, waiting, being replaced, preempted, to restart, or
final [§1.4, §1.11]. :func:`classify` reads what exists and returns a :class:`~.decisions.Walk`.

A pod being replaced is known by the pod alone: its restart-attempt label is older than the
replica's restart count (a counted restart), or it is on its way out (deleting, or taken by the
scheduler's preemption) while the replica waits for its new pod (``Creating``: an uncounted
relaunch). Statuses written before this rule kept the old pod's uid as a marker; it is still
read, so such a pod is not judged twice (docs/decisions.md, "Restart marker").
"""

from __future__ import annotations

from ..api.common import RETRYABLE_EXIT_CODES, ReplicaStatus
from ..api.extensions import FAILURE_POLICY as FAILURE_POLICY_ANNOTATION
from ..frameworks import Final, ReplicaGroup
from .context import Pass
from .decisions import Replica, Walk
from .desired import relaunches
from .failure_policy import describe, disrupted, matching
from .preemption import preempted_again, taken, was_preempted
from .replica_status import end_reason, final_from_status, from_pod, on_its_way_out
from .restart import may_restart
from .types import Event, ObservedPod


def classify(p: Pass, backoff_count: int) -> Walk:
    """Classify every desired replica; ``backoff_count`` is the job's before this pass (a restart
    planned earlier in the walk counts against the shared backoff limit)."""
    debug = p.job.run_mode.debug_enabled
    resuming = p.old.phase in ("Paused", "Resuming")
    relaunch = relaunches(p.job, p.fw, p.groups, p.observed, p.ctx)
    out: list[Replica] = []
    planned = 0
    for g, i, name in p.desired():
        prev = p.prior(name)
        rc = prev.restart_count if prev else 0
        pod = p.observed.pods.get(name)
        if pod is None:
            r = missing(p, g, i, name, prev, rc, resuming, debug, backoff_count, planned)
        else:
            r = present(p, g, i, pod, prev, rc, name in relaunch, resuming, debug, backoff_count, planned)
        planned += r.restart is not None and r.counted
        out.append(r)
    desired = {r.name for r in out}
    return Walk(tuple(out), tuple(pod for pod in p.observed.pods.values() if pod.name not in desired))


def replaced(pod: ObservedPod, prev: ReplicaStatus | None, rc: int) -> bool:
    """Whether ``pod`` is the one being replaced: of an earlier restart attempt than the replica's
    restart count, or named by an older version's marker (``Creating`` with its uid)."""
    if pod.restart_attempt is not None and pod.restart_attempt < rc:
        return True
    return prev is not None and prev.phase == "Creating" and bool(prev.uid) and prev.uid == pod.uid


def on_its_way(pod: ObservedPod, prev: ReplicaStatus | None) -> bool:
    """Whether the replica waits for a new pod (``Creating``) while ``pod`` goes: being deleted, or
    taken by the preemption an earlier pass reported: an uncounted replacement under way."""
    return prev is not None and prev.phase == "Creating" and (pod.deleting or preempted_again(pod, prev))


def present(
    p: Pass, g: ReplicaGroup, i: int, pod: ObservedPod, prev: ReplicaStatus | None, rc: int,
    relaunched: bool, resuming: bool, debug: bool, backoff_count: int, planned: int,
) -> Replica:  # fmt: skip
    """A replica whose pod exists."""
    kept = prev.model_copy(update={"uid": ""}) if prev is not None and prev.phase == "Creating" else None
    if replaced(pod, prev, rc):
        # Make sure its deletion is under way; the replica waits for the new one, its status as
        # the pass that decided the replacement wrote it.
        return Replica(g, i, kept or on_its_way_out(pod, rc), pod, delete="Restart", replacing=True)
    if taken(pod) and not (prev is not None and preempted_again(pod, prev)):
        # The scheduler's preemption takes it (DisruptionTarget, PreemptionByScheduler):
        # replaced once gone, whatever its exit code, without counting a restart.
        return Replica(g, i, on_its_way_out(pod, rc), pod, delete="Preempted", preempted=True)
    if kept is not None and on_its_way(pod, prev):
        # An uncounted replacement under way (a relaunch, a preemption, ranks relaunched with a
        # preempted one): its pod is going; the replica waits for it, its status kept.
        return Replica(g, i, kept, pod, delete="Restart", replacing=True)
    if relaunched:
        # Its launch changed (the host list of an elastic launcher): replaced like a restart,
        # but the job asked for it, so no restart or backoff is counted.
        why = f"relaunching {pod.name}: the replicas it launches changed"
        note = Event("Normal", "RelaunchingReplica", why)
        return Replica(g, i, on_its_way_out(pod, rc), pod, delete="Relaunch", replacing=True, event=note)
    if prev is None and pod.deleting:
        # Scaled away earlier and wanted again before its pod is gone: recreate it once the pod
        # is gone, like a restart but without counting one.
        return Replica(g, i, on_its_way_out(pod, rc), pod, replacing=True)
    rs = from_pod(pod, rc)
    # A pod someone else is deleting that has already ended is judged like any other ended pod
    # [§1.11]; only pods deleted by the pause are left alone.
    if pod.terminal and not debug and not (pod.deleting and resuming):
        return ended(p, g, i, pod, rs, rc, backoff_count, planned)
    return Replica(g, i, rs, pod)


def missing(
    p: Pass, g: ReplicaGroup, i: int, name: str, prev: ReplicaStatus | None, rc: int,
    resuming: bool, debug: bool, backoff_count: int, planned: int,
) -> Replica:  # fmt: skip
    """A replica whose pod does not exist."""
    creating = ReplicaStatus(name=name, phase="Creating", restart_count=rc)
    if prev is None or prev.phase == "Creating" or resuming:
        return Replica(g, i, creating, create=True)
    if prev.phase in ("Succeeded", "Failed", "Deleted"):
        # Ended before it disappeared: its result stands.
        return Replica(g, i, prev.model_copy(), final=None if debug else final_from_status(prev, g))
    if was_preempted(prev):
        # Last seen with the scheduler's preemption notice: it went as preempted, not failed.
        return Replica(g, i, creating, create=True, preempted=True)
    # It was active and someone else deleted it [§1.11]: an environmental failure.
    note = Event("Warning", "ReplicaDeleted", f"pod {name} was deleted while the job was running")
    if debug:
        return Replica(g, i, creating, create=True, event=note)
    gone = ReplicaStatus(name=name, uid=prev.uid, phase="Deleted", restart_count=rc)
    if may_restart(p, g, rc, g.restart_policy != "Never", backoff_count, planned):
        return Replica(g, i, gone, restart="deleted", event=note)
    return Replica(g, i, gone, final=Final(name, False, None, "deleted"), event=note)


def ended(
    p: Pass, g: ReplicaGroup, i: int, pod: ObservedPod, rs: ReplicaStatus, rc: int,
    backoff_count: int, planned: int,
) -> Replica:  # fmt: skip
    """A replica pod has terminated: restart it by the job's failure rules (:mod:`.failure_policy`)
    or its policy, or record it as final [§1.4]."""
    failed = pod.effective_phase == "Failed"
    code = pod.exit_code(g.training_container)
    reason = end_reason(pod, g.training_container)
    why = ", ".join(([f"exit code {code}"] if code is not None else []) + ([reason] if reason else []))
    rule = matching(p, g.type, pod, code) if failed else None
    counted = rule is None and not disrupted(pod) or rule is not None and rule.action == "Restart"
    if rule is not None and rule.action == "Fail":
        message = f"{pod.name} ended ({why or 'failed'}) and the job's {FAILURE_POLICY_ANNOTATION} {describe(rule)} fails it"
        return Replica(g, i, rs, pod, final=Final(pod.name, False, code, reason), fails_job=message)
    if rule is not None and rule.action == "Ignore":
        return Replica(g, i, rs, pod, final=Final(pod.name, True, code, reason))
    if rule is not None and rule.action == "RestartIgnoringBackoff":
        return Replica(g, i, rs, pod, restart=f"{why or 'failed'}; {describe(rule)}", counted=False)
    if rule is not None:  # Restart: retried whatever the restart policy, counted
        retryable = True
    elif g.restart_policy == "Always":
        retryable = True
    elif g.restart_policy == "OnFailure":
        retryable = failed
    elif g.restart_policy == "ExitCode":
        # No exit code at all (eviction, node loss) counts as environmental: retried.
        retryable = failed and (code is None or code in RETRYABLE_EXIT_CODES)
    else:
        retryable = False
    if may_restart(p, g, rc, retryable, backoff_count, planned, counted):
        return Replica(g, i, rs, pod, restart=why or pod.effective_phase.lower(), counted=counted)
    return Replica(g, i, rs, pod, final=Final(pod.name, not failed, code, reason))


def reported(p: Pass, paused: bool = False) -> dict[str, ReplicaStatus]:
    """Every replica's status from what exists, for passes that create nothing (finished, ended by
    the deadline, paused)."""
    out: dict[str, ReplicaStatus] = {}
    for _, _, name in p.desired():
        prev = p.prior(name)
        rc = prev.restart_count if prev else 0
        pod = p.observed.pods.get(name)
        if paused:
            uid = pod.uid if pod else ""
            out[name] = ReplicaStatus(name=name, uid=uid, phase="Deleted", restart_count=rc)
        elif pod is not None:
            rs = from_pod(pod, rc)
            if pod.deleting and (prev is None or prev.phase not in ("Succeeded", "Failed")):
                # Stopped by clean-up or the deadline: its end is our doing, not a failure.
                rs.phase = "Deleted"
            out[name] = rs
        elif prev is not None:
            keep = prev.phase in ("Succeeded", "Failed")
            out[name] = prev if keep else prev.model_copy(update={"phase": "Deleted"})
        else:
            out[name] = ReplicaStatus(name=name, phase="Deleted", restart_count=rc)
    return out
