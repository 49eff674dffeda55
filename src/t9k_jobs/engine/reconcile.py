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
   or record it as final [§1.4, §1.11]; a replica the scheduler preempted is recreated without
   counting anything (:mod:`.preemption`);
6. the framework decides success or failure from the final replicas [§2.3, §3.2, §4.4, §5.3];
7. replicas that wait for a reason (no image, no ConfigMap, no node) are reported, once;
8. phase, conditions, tasks and aggregate are derived, once, from what the steps decided
   (:func:`decide` returns the phase and the outcome; :func:`~.status.finish_status`) [§1.8].

On the first pass (no status yet) the spec's warnings (fields accepted without effect, silent
defaults: :func:`t9k_jobs.frameworks.spec_warnings`) are emitted as ``SpecWarning`` events.

Each step lives in the module named after it: :mod:`.desired` (children and pods, their
desired hashes), :mod:`.deadline`, :mod:`.run_mode`, :mod:`.replicas` (with :mod:`.replica_status`),
:mod:`.restart`, :mod:`.outcome`, :mod:`.clean_up`, :mod:`.waiting` and :mod:`.status`; a pass's
working state is :class:`.context.Pass`.

A pod has ended when the kubelet says so or when all its containers have terminated
(:attr:`ObservedPod.effective_phase`); every step reads that, never the reported phase alone.
"""

from __future__ import annotations

from ..api.common import TERMINAL_PHASES, JobStatus
from ..api.kinds import JobBase
from ..frameworks import BuildContext, Outcome, framework_for, spec_warnings
from .clean_up import clean_up
from .context import CONFLICT_RECHECK, UNFINISHED_GRACE, Pass, parse_time, rfc3339
from .deadline import deadline_passed, start_clock
from .desired import CLUSTER, build_pod, children, plan_children
from .outcome import end
from .preemption import apply_preemptions
from .replicas import refresh_replicas, walk_replicas
from .restart import apply_restarts
from .run_mode import paused
from .status import active_phase, finish_status
from ..frameworks.base import GANG_MODES, GangMode
from ..frameworks.launch import Launcher
from .types import Addressing, Observed, Plan
from .waiting import report_waiting

__all__ = ["CONFLICT_RECHECK", "UNFINISHED_GRACE", "build_pod", "children", "parse_time", "reconcile", "rfc3339"]


def reconcile(
    job: JobBase, observed: Observed, now: float, addressing: Addressing = CLUSTER, launcher: Launcher | None = None
) -> Plan:
    """Decide what to do about ``job`` given what exists (``observed``) at time ``now``.

    ``now`` is seconds since the epoch. ``addressing`` maps replicas to hosts and ports
    (Kubernetes Services by default; the local runtime passes its own); ``launcher`` starts
    launches over ssh (pods by default; the local runtime passes its own). Returns a
    :class:`Plan`; never raises for any valid job and any observed state.
    """
    fw = framework_for(job)
    old = job.status or JobStatus()
    status = old.model_copy(deep=True)
    groups = fw.groups(job)
    gang: GangMode = observed.gang if observed.gang in GANG_MODES else "t9k"  # type: ignore[assignment]
    resumed = old.condition("Paused") is not None
    ctx = BuildContext(addressing, resumed=resumed, groups=tuple(groups), gang=gang, launcher=launcher)
    p = Pass(job, fw, groups, observed, now, ctx, old, status, Plan(status=status))
    status.observed_generation = job.metadata.generation
    if job.status is None:
        # The first pass: fields accepted without effect are said once, as `validate` says them.
        for line in spec_warnings(job):
            p.event("Warning", "SpecWarning", line)

    p.owned = children(job, addressing, ctx.gang, launcher)
    p.plan.create, p.plan.update, p.plan.delete = plan_children(p.owned, observed)
    if observed.conflicts:
        # Names held by objects this job does not control: look again later, they may go away.
        p.plan.requeue_after = CONFLICT_RECHECK

    phase, outcome = decide(p)
    finish_status(p, phase, outcome)  # the status, derived once, at the end of the pass
    return p.plan


def decide(p: Pass) -> tuple[str, Outcome | None]:
    """Ask each policy in turn (steps 2 to 7 of the module docstring); returns the job's phase
    and, on the pass that ends the job, its outcome. The policies add to ``p`` (replica statuses,
    pods to create and delete, events); none writes phase or conditions."""
    job, observed = p.job, p.observed
    if p.old.phase in TERMINAL_PHASES:
        clean_up(p)
        refresh_replicas(p)
        return p.old.phase, None
    outcome = deadline_passed(p)
    if outcome is not None:
        return end(p, outcome), outcome
    if paused(p):
        return "Paused", None
    start_clock(p)

    walk_replicas(p)
    apply_preemptions(p)
    outcome = None if job.run_mode.debug_enabled else p.fw.outcome(job, p.groups, p.finals)
    if outcome is not None:
        # Replicas that were about to be (re)created never will be: report every replica as
        # the finished job's later passes will, so the status is final on this pass.
        p.replicas.clear()
        refresh_replicas(p)
        return end(p, outcome), outcome

    apply_restarts(p)
    for g, i in p.creates:
        name = g.pod_name(job.name, i)
        if ("Pod", name) not in observed.conflicts:
            attempt = p.replicas[name].restart_count if name in p.replicas else 0
            p.plan.create.append(build_pod(job, g, i, p.ctx, attempt))
    report_waiting(p)
    return active_phase(p), None
