"""``reconcile(job, observed, now, runtime) -> Plan``: every behavioural decision about a job.

Pure: no I/O, no clock (``now`` is seconds since the epoch), no randomness. Level-triggered:
the plan depends only on the job (spec and the counters kept in its status), on what exists
(:class:`~.types.Observed`) and on what the runtime can carry out (:class:`~.runtime.Runtime`,
fixed for the runtime's life), so running it twice on the same input gives the same plan, and a
restarted runtime converges without having seen any event.

The pass, in order (reference sections in brackets):

1. children other than pods that are missing: Services, PodGroup, TensorBoard, ConfigMaps,
   Secrets [§1.2, §1.7, §1.9];
2. a finished job only applies its clean-up policy [§1.6];
3. ``activeDeadlineSeconds`` past ``status.startTime`` (set on the first pass that acts on the
   job, cleared by a pause) fails the job [§1.4];
4. pause deletes every replica pod [§1.5]; a queued job waits, with no pod, until its queue
   admits it (:mod:`.admission`);
5. each replica: create it, wait for it, or, once it ended, restart it by policy and backoff
   or record it as final [§1.4, §1.11]; a replica the scheduler preempted is recreated without
   counting anything (:mod:`.preemption`); a replica whose node is lost has ended, failed
   (reason ``NodeLost``), and its pod is deleted, then force-deleted once its grace period has
   passed (:mod:`.node_loss`, whatever the job's phase);
6. the framework decides success or failure from the final replicas [§2.3, §3.2, §4.4, §5.3];
   a Running job whose replicas all fell silent past its progress deadline (an annotation of
   ours) is restarted whole, failed, or warned about (:mod:`.progress`);
7. replicas that wait for a reason (no image, no ConfigMap, no node) are reported, once;
   the attempts that ended without finishing are said with why and what they ran (:mod:`.cost`);
8. phase, conditions, tasks, aggregate and counters are derived, once, from what the steps
   decided (:func:`decide` returns the phase and the outcome; :func:`~.status.finish_status`)
   [§1.8]; and when a finished job is to be deleted (:mod:`.ttl`).

The pass's inputs (the framework, the replica groups, the :class:`~t9k_jobs.frameworks.BuildContext`,
whether the job goes through a queue) are computed once, by :func:`begin`, and kept on the
:class:`.context.Pass`. Each policy reads the pass and the replicas as classified
(:class:`.decisions.Walk`) and returns a decision, a small frozen value (:mod:`.decisions`);
:func:`decide` only asks and applies it (:mod:`.apply`) to the pass's one accumulator
(:class:`.context.Tally`), from which the status is derived, as JobSet's
``executeFailurePolicy``/``executeSuccessPolicy`` read the classified child Jobs and make one
status update.

On the first pass (no status yet) the spec's warnings (fields accepted without effect, silent
defaults: :func:`t9k_jobs.frameworks.spec_warnings`) are emitted as ``SpecWarning`` events.

Each step lives in the module named after it: :mod:`.desired` (children and pods, their
desired hashes), :mod:`.deadline`, :mod:`.run_mode`, :mod:`.replicas` (with :mod:`.replica_status`),
:mod:`.preemption`, :mod:`.restart`, :mod:`.outcome`, :mod:`.clean_up`, :mod:`.waiting`, :mod:`.status`
and :mod:`.conditions`.

A pod has ended when the kubelet says so or when all its containers have terminated
(:attr:`ObservedPod.effective_phase`); every step reads that, never the reported phase alone.
"""

from __future__ import annotations

from ..api.common import TERMINAL_PHASES, JobStatus
from ..api.kinds import JobBase
from ..frameworks import BuildContext, Outcome, framework_for, spec_warnings
from .admission import admission, in_queue
from .apply import (
    apply_clean_up,
    apply_clock,
    apply_creates,
    apply_deadline,
    apply_force_deletes,
    apply_node_losses,
    apply_pause,
    apply_no_progress,
    apply_preemption,
    apply_queue,
    apply_restarts,
    apply_walk,
    end,
)
from .clean_up import clean_up
from .context import CONFLICT_RECHECK, UNFINISHED_GRACE, Pass, Tally, parse_time, rfc3339
from .cost import lost
from .deadline import deadline, start_clock
from .desired import RELEASED_KINDS, build_pod, children, plan_children, replica_pods
from .failure_policy import FAILURE_POLICY
from .node_loss import force_deletes, losses, project
from .outcome import ending
from .preemption import preemption
from .progress import failure, progress, restart_all, warned
from .replicas import classify
from .restart import restarts
from .run_mode import paused
from .runtime import Runtime
from .status import active_phase, finish_status
from .ttl import expire_after
from .types import Observed, Plan
from .waiting import waiting_events

__all__ = [
    "CONFLICT_RECHECK",
    "UNFINISHED_GRACE",
    "begin",
    "build_pod",
    "children",
    "decide",
    "parse_time",
    "reconcile",
    "rfc3339",
]


def reconcile(job: JobBase, observed: Observed, now: float, runtime: Runtime) -> Plan:
    """Decide what to do about ``job`` given what exists (``observed``) at time ``now``, for
    ``runtime`` (its addressing, launcher, gang mode, queueing, unserved kinds, node-lost limit).

    ``now`` is seconds since the epoch. Returns a :class:`Plan`; never raises for any valid job
    and any observed state.
    """
    p, t = begin(job, observed, now, runtime)
    phase, outcome = decide(p, t)
    # Pods on a lost node past their grace period, whoever deleted them (issue 25), whatever the
    # job's phase.
    apply_force_deletes(t, force_deletes(p.observed, now, runtime.node_lost_after))
    t.plan.lost = lost(p, t.plan.delete, phase)  # what the attempts that ended unfinished cost
    t.plan.expire_after = expire_after(job, runtime, phase, t.completion_time, now)
    t.plan.status = finish_status(p, t, phase, outcome)  # the status, derived once, at the end
    return t.plan


def begin(job: JobBase, observed: Observed, now: float, runtime: Runtime) -> tuple[Pass, Tally]:
    """A pass over ``job`` (what it reads, computed once: groups, build context, queueing) and its
    tally, holding step 1: the children other than pods to create, update or delete, and the
    spec's warnings on the first pass."""
    fw = framework_for(job)
    # Replicas on lost nodes read as failed (:mod:`.node_loss`).
    observed = project(observed, now, runtime.node_lost_after)
    old = job.status or JobStatus()
    groups = fw.groups(job)
    wl = observed.workload
    queues = in_queue(job, observed, old, runtime)
    ctx = BuildContext(
        runtime.addressing, resumed=old.condition("Paused") is not None, groups=tuple(groups),
        gang=runtime.gang, launcher=runtime.launcher,
        node_selectors=wl.node_selectors if wl is not None and wl.admitted else {},
        placements=wl.placements if wl is not None and wl.admitted else {},
        queue_topology=queues and observed.queue_topology,
        priority_classes=observed.priority_classes,
    )  # fmt: skip
    owned = children(job, fw, groups, ctx, queues)
    if old.phase in TERMINAL_PHASES or job.run_mode.pause_enabled:
        # A finished or paused job holds no quota and has no gang to protect: its Workload and its
        # disruption budget are deleted (plan_children prunes them).
        owned = [o for o in owned if o["kind"] not in RELEASED_KINDS]
    p = Pass(job, fw, groups, observed, now, ctx, old, runtime, queues, owned)
    t = Tally.of(old)
    if old.condition("Initialized") is None:
        # The first pass (no status yet, or only the one of a spec that did not validate): fields
        # accepted without effect are said once, as `validate` says them.
        for line in spec_warnings(job):
            t.event("Warning", "SpecWarning", line)
    t.plan.create, t.plan.update, t.plan.delete = plan_children(p.owned, observed, runtime.unserved)
    if observed.conflicts:
        # Names held by objects this job does not control: look again later, they may go away.
        t.plan.requeue_after = CONFLICT_RECHECK
    return p, t


def decide(p: Pass, t: Tally) -> tuple[str, Outcome | None]:
    """Ask each policy in turn (steps 2 to 7 of the module docstring) and apply its decision to
    ``t``; returns the job's phase and, on the pass that ends the job, its outcome. No policy
    writes phase, conditions or counters: they are derived from ``t`` afterwards."""
    job = p.job
    if p.old.phase in TERMINAL_PHASES:
        apply_clean_up(t, clean_up(p, t.completion_time))
        return p.old.phase, None
    passed = deadline(p, t.start_time)
    apply_deadline(t, passed)
    if passed.outcome is not None:
        return end(t, ending(p, passed.outcome)), passed.outcome
    pause = paused(p)
    if pause is not None:
        apply_pause(t, pause)
        return "Paused", None
    waits = admission(p)
    if waits is not None:
        apply_queue(t, waits)
        return "Pending", None
    clock = start_clock(p, t.start_time)
    if clock is not None:
        apply_clock(t, clock)

    apply_node_losses(t, losses(p.observed, p.now, p.runtime.node_lost_after))
    walk = classify(p, t.backoff_count)
    taken = preemption(p, walk)
    apply_walk(t, walk, taken.unjudged if taken is not None else ())
    if taken is not None:
        apply_preemption(t, taken)
    if t.fails_job is not None and not job.run_mode.debug_enabled:
        outcome = Outcome(False, f"{job.kind} {job.name} has failed: {t.fails_job}", reason=FAILURE_POLICY)
    else:
        outcome = None if job.run_mode.debug_enabled else p.fw.outcome(job, p.groups, t.finals)
    if outcome is not None:
        # The replicas that were about to be (re)created never will be: the ending reports every
        # replica as the finished job's later passes will, so the status is final on this pass.
        return end(t, ending(p, outcome)), outcome

    restarted = restarts(p, t)
    watched = progress(p)
    t.wake(watched.wake)
    if watched.stall is not None:
        stall = watched.stall
        again = restart_all(p, t.backoff_count) if stall.action == "Restart" else None
        if stall.action == "Fail" or (stall.action == "Restart" and again is None):
            outcome = failure(p, stall)
            apply_no_progress(t, stall, stop=tuple(pod for pod in p.observed.pods.values() if not pod.terminal))
            return end(t, ending(p, outcome)), outcome
        if stall.action == "Restart" or not warned(p):
            apply_no_progress(t, stall)
        restarted = again or restarted
    if restarted is not None:
        apply_restarts(t, restarted)
    apply_creates(t, replica_pods(p, t))
    t.plan.events.extend(waiting_events(p, t.replicas))
    return active_phase(p, t), None
