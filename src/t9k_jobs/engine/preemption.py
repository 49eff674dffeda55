"""Preemption is not failure (issue 22): replicas the scheduler evicts for higher priority.

The default scheduler preempts a pod (default preemption) or a whole native gang
(``scheduling.k8s.io/v1beta1`` PodGroup with ``disruptionMode: {all: {}}``, Kubernetes 1.37 with
``GenericWorkload``) for pods or gangs of higher priority. Each victim pod first gets the
condition ``DisruptionTarget=True`` with reason ``PreemptionByScheduler``, then is deleted with its
grace period (``k8s.io/kubernetes`` v1.37.2 ``pkg/scheduler/framework/preemption/executor.go``;
the reason is k8s.io/api v0.37.2 core/v1 ``PodReasonPreemptionByScheduler``). The operator may
see such a pod running with the condition, deleting, ended (exit 143 or 137 after SIGTERM), or
not at all.

What the engine does with a replica whose pod is preempted
(:attr:`~t9k_jobs.engine.types.ObservedPod.preempted`):

- once the pod is being deleted or has ended, the replica is reported ``Creating`` (reason
  ``PreemptionByScheduler``) and recreated when that pod is gone, as a relaunch: no task or
  replica ``restartCount``, no ``backoffCount``, whatever the restart policy (even ``Never``): the
  program did not fail. Its pod says it is on its way out (being deleted, or ended with the
  scheduler's notice) on every later pass, so no marker in the status is needed;
- while the pod still runs with the condition (the scheduler's delete is on its way), nothing
  is done but the replica's status remembers it (reason ``PreemptionByScheduler``), so a pod that
  vanishes before the next pass is recreated the same way (:func:`preempted_gone`);
- with restart scope ``all`` (DeepSpeedJob: ranks cannot rejoin) the other replicas are
  relaunched too, uncounted, and their ends on this pass are not judged;
- the job goes back to ``Pending`` (T9k: "just created; waiting for replicas to start"), gets the
  condition ``Preempted`` (True, reason ``PreemptionByScheduler``) and one Normal event
  ``Preempted``; the condition turns False (reason ``Rescheduled``) once every replica runs again
  or has ended.

Other ``DisruptionTarget`` reasons (``EvictionByEvictionAPI``, ``DeletionByTaintManager``,
``DeletionByPodGC``, ``TerminationByKubelet``) are environmental failures, judged by the
restart policy as before [§1.11].

Limit: a preempted pod that appears and disappears between two passes without the operator ever
seeing its condition (deleted with a zero grace period, or while the operator was down) cannot
be told from a pod someone deleted: it counts as an external deletion [§1.11].
"""

from __future__ import annotations

from ..api.common import ReplicaStatus
from .context import Pass, Tally, rfc3339
from .decisions import Preemption, Replica, Walk
from .replica_status import on_its_way_out
from .types import PREEMPTION_BY_SCHEDULER, Event, ObservedPod

#: The job condition type (our addition to T9k's condition types, §1.8).
PREEMPTED = "Preempted"
#: Replica phases that say a replica is back after a preemption (or has ended since).
BACK = frozenset({"Running", "Succeeded", "Failed"})


def taken(pod: ObservedPod) -> bool:
    """Whether ``pod`` is being taken by the scheduler's preemption: preempted and already being
    deleted or ended. A preempted pod that still runs undeleted is left alone (the scheduler
    deletes it next; if it never does, kube-controller-manager clears the stale condition)."""
    return pod.preempted and (pod.deleting or pod.terminal)


def preempted_again(pod: ObservedPod, prev: ReplicaStatus) -> bool:
    """Whether ``pod``, taken by preemption, is one an earlier pass already reported preempted
    (its replica ``Creating`` with reason ``PreemptionByScheduler``): not a new preemption."""
    return taken(pod) and prev.phase == "Creating" and prev.reason == PREEMPTION_BY_SCHEDULER


def was_preempted(prev: ReplicaStatus | None) -> bool:
    """Whether a replica's stored status says its pod was last seen preempted while active."""
    if prev is None or prev.phase in ("Succeeded", "Failed"):
        return False
    return prev.reason == PREEMPTION_BY_SCHEDULER


def preemption(p: Pass, walk: Walk) -> Preemption | None:
    """What a preemption on this pass asks of the other replicas; ``None`` when none was taken.

    With restart scope ``all`` a preemption relaunches every other replica too (uncounted), and
    their ends on this pass are not judged (their ranks lost a peer); with scope ``replica``
    nothing more is done. One Normal ``Preempted`` event when the job's ``Preempted`` condition is
    about to turn True."""
    taken_now = [r.name for r in walk.replicas if r.preempted]
    if not taken_now:
        return None
    unjudged: list[tuple[str, int]] = []
    relaunched: list[Replica] = []
    if p.fw.restart_scope == "all":
        for r in walk.replicas:
            if r.preempted:
                continue
            unjudged.append((r.group.type, r.index))
            prev = p.prior(r.name)
            rc = prev.restart_count if prev else 0
            if r.pod is not None and not r.replacing:
                status = on_its_way_out(r.pod, rc)
                peer = Replica(r.group, r.index, status, r.pod, delete="Preempted", replacing=True)
                relaunched.append(peer)
            elif r.pod is None and not r.create:
                # Its pod is gone already (deleted by someone on this very pass): its end is not
                # judged either, so it is created again with the others, uncounted.
                creating = ReplicaStatus(name=r.name, phase="Creating", restart_count=rc)
                relaunched.append(Replica(r.group, r.index, creating, create=True))
    event = None
    old = p.old.condition(PREEMPTED)
    if old is None or old.status != "True":
        event = Event(
            "Normal",
            "Preempted",
            f"{_names(taken_now)} preempted by the scheduler for higher priority; "
            f"{'they are' if len(taken_now) > 1 else 'it is'} recreated "
            "without counting a restart or a backoff",
        )
    return Preemption(tuple(unjudged), tuple(relaunched), event)


def preempted_now(p: Pass, t: Tally) -> bool:
    """Whether the job waits after a preemption: a replica was taken on this pass, or the
    ``Preempted`` condition is True and some desired replica is not back (Running, or ended)."""
    if t.preempted:
        return True
    old = p.old.condition(PREEMPTED)
    if old is None or old.status != "True":
        return False
    for _, _, name in p.desired():
        rs = t.replicas.get(name)
        pod = p.observed.pods.get(name)
        if rs is None or rs.phase not in BACK or (pod is not None and pod.deleting):
            return True
    return False


def preempted_row(p: Pass, t: Tally, terminal: bool) -> tuple[str, bool, str, str] | None:
    """The job's ``Preempted`` condition as ``(type, true?, reason, message)``, None when the job
    was never preempted.

    True, reason ``PreemptionByScheduler``, message ``preempted by higher priority at <time>
    (<pods>): its pods are recreated and wait for the gang again`` (``to be scheduled again``
    without a gang), the time being when this pass first saw it (RFC 3339 UTC); kept as is while
    the job waits. False, reason ``Rescheduled``, once every replica is back; False, reason
    ``Finished``, when the job ends while still waiting. A False condition is kept as it was."""
    old = p.old.condition(PREEMPTED)
    if not terminal and preempted_now(p, t):
        if old is not None and old.status == "True":
            return (PREEMPTED, True, old.reason, old.message)
        sched = p.job.scheduler.t9k_scheduler if p.job.scheduler else None
        gang = sched is not None and p.ctx.gang != "none"
        wait = "wait for the gang again" if gang else "wait to be scheduled again"
        message = (
            f"preempted by higher priority at {rfc3339(p.now)} ({_names(t.preempted)}): "
            f"its pods are recreated and {wait}"
        )
        return (PREEMPTED, True, PREEMPTION_BY_SCHEDULER, message)
    if old is None:
        return None
    if old.status == "True":
        since = old.last_transition_time or "an earlier pass"
        if terminal:
            ended = f"preempted at {since}; the job ended before every replica ran again"
            return (PREEMPTED, False, "Finished", ended)
        return (PREEMPTED, False, "Rescheduled", f"preempted at {since}; every replica runs again")
    return (PREEMPTED, False, old.reason, old.message)


def _names(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
