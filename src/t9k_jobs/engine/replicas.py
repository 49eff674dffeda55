"""Every desired replica, classified: to create, waiting, relaunched, preempted, to restart, or final [§1.4, §1.11]."""

from __future__ import annotations

from ..api.common import RETRYABLE_EXIT_CODES, ReplicaStatus
from ..frameworks import Final, ReplicaGroup
from .context import Pass
from .desired import relaunches
from .preemption import preempted_gone, preempted_pod, taken, was_preempted
from .replica_status import end_reason, final_from_status, from_pod
from .restart import may_restart
from .types import ObservedPod


def walk_replicas(p: Pass) -> None:
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
                missing(p, g, i, name, prev, rc, resuming, debug)
            elif pod.restart_attempt is not None and pod.restart_attempt < rc:
                # A pod of an earlier restart attempt (its label says which): the one being
                # replaced. Make sure its deletion is under way; the replica waits for the new one.
                p.delete_pod(pod, "Restart")
                if prev is not None and prev.phase == "Creating" and prev.uid == pod.uid:
                    p.replicas[name] = prev.model_copy()  # as the restart recorded it
                else:
                    p.replicas[name] = from_pod(pod, rc).model_copy(update={"phase": "Creating", "uid": pod.uid})
            elif prev is not None and prev.phase == "Creating" and prev.uid and pod.uid == prev.uid:
                # The pod we are replacing (the restart marker names its uid): make sure its
                # deletion is under way. A new pod waiting to be scheduled is reported as
                # Creating without a uid, so it is never mistaken for one being replaced.
                p.delete_pod(pod, "Restart")
                p.replicas[name] = prev.model_copy()
            elif taken(pod):
                # The scheduler's preemption takes it (DisruptionTarget, PreemptionByScheduler):
                # replaced once gone, whatever its exit code, without counting a restart.
                preempted_pod(p, name, pod, rc)
            elif name in relaunch:
                # Its launch changed (the host list of an elastic launcher): replaced like a
                # restart, but the job asked for it, so no restart or backoff is counted.
                p.delete_pod(pod, "Relaunch")
                p.replicas[name] = from_pod(pod, rc).model_copy(update={"phase": "Creating", "uid": pod.uid})
                p.event("Normal", "RelaunchingReplica", f"relaunching {name}: the replicas it launches changed")
            elif prev is None and pod.deleting:
                # Scaled away earlier and wanted again before its pod is gone: recreate it once
                # the pod is gone, like a restart but without counting one.
                p.replicas[name] = from_pod(pod, rc).model_copy(update={"phase": "Creating"})
            else:
                p.replicas[name] = from_pod(pod, rc)
                # A pod someone else is deleting that has already ended is judged like any
                # other ended pod [§1.11]; only pods deleted by the pause are left alone.
                if pod.terminal and not debug and not (pod.deleting and resuming):
                    ended(p, g, i, pod, rc)
    for pod in p.observed.pods.values():
        if pod.name not in desired:
            p.delete_pod(pod, "ScaledDown")


def missing(
    p: Pass, g: ReplicaGroup, i: int, name: str, prev: ReplicaStatus | None, rc: int, resuming: bool, debug: bool
) -> None:
    if prev is None or prev.phase == "Creating" or resuming:
        p.creates.append((g, i))
        p.replicas[name] = ReplicaStatus(name=name, phase="Creating", restart_count=rc)
        return
    if prev.phase in ("Succeeded", "Failed") or prev.phase == "Deleted":
        # Ended before it disappeared: its result stands.
        p.replicas[name] = prev.model_copy()
        if not debug:
            p.finals[(g.type, i)] = final_from_status(prev, g)
        return
    if was_preempted(prev):
        # Last seen with the scheduler's preemption notice: it went as preempted, not failed.
        preempted_gone(p, g, i, name, rc)
        return
    # It was active and someone else deleted it [§1.11]: an environmental failure.
    p.event("Warning", "ReplicaDeleted", f"pod {name} was deleted while the job was running")
    if debug:
        p.creates.append((g, i))
        p.replicas[name] = ReplicaStatus(name=name, phase="Creating", restart_count=rc)
        return
    if may_restart(p, g, rc, retryable=g.restart_policy != "Never"):
        p.restarts.append((g, i, "deleted"))
        p.replicas[name] = ReplicaStatus(name=name, uid=prev.uid, phase="Deleted", restart_count=rc)
    else:
        gone = ReplicaStatus(name=name, uid=prev.uid, phase="Deleted", restart_count=rc)
        p.replicas[name] = gone
        p.finals[(g.type, i)] = Final(name, False, None, "deleted")


def ended(p: Pass, g: ReplicaGroup, i: int, pod: ObservedPod, rc: int) -> None:
    """A replica pod has terminated: restart it by policy, or record it as final [§1.4]."""
    failed = pod.effective_phase == "Failed"
    code = pod.exit_code(g.training_container)
    reason = end_reason(pod, g.training_container)
    if g.restart_policy == "Always":
        retryable = True
    elif g.restart_policy == "OnFailure":
        retryable = failed
    elif g.restart_policy == "ExitCode":
        # No exit code at all (eviction, node loss) counts as environmental: retried.
        retryable = failed and (code is None or code in RETRYABLE_EXIT_CODES)
    else:
        retryable = False
    if may_restart(p, g, rc, retryable):
        why = ", ".join(([f"exit code {code}"] if code is not None else []) + ([reason] if reason else []))
        p.restarts.append((g, i, why or pod.effective_phase.lower()))
    else:
        p.finals[(g.type, i)] = Final(pod.name, not failed, code, reason)


def refresh_replicas(p: Pass, paused: bool = False) -> None:
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
                rs = from_pod(pod, rc)
                if pod.deleting and (prev is None or prev.phase not in ("Succeeded", "Failed")):
                    # Stopped by clean-up or the deadline: its end is our doing, not a failure.
                    rs.phase = "Deleted"
                p.replicas[name] = rs
            elif prev is not None:
                keep = prev.phase in ("Succeeded", "Failed")
                p.replicas[name] = prev if keep else prev.model_copy(update={"phase": "Deleted"})
            else:
                p.replicas[name] = ReplicaStatus(name=name, phase="Deleted", restart_count=rc)
