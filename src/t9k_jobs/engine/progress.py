"""Progress deadline (issue 42): a job whose replicas all fell silent is hung, not running.

One rank stuck in a collective (a dead peer, a deadlock in a data loader) keeps every rank's pod
Running for hours: Kubernetes, the Job controller, JobSet, Kubeflow's Trainer, Volcano and Kueue
see healthy pods. A rank that crash-loops beside a hung peer (torchrun: the peer's agent hung with
the c10d rendezvous it hosts closed, the restarted rank failing with RendezvousClosedError at every
try) keeps the job "restarting" for as long as its restarts last. The one sign of life every training program gives is its output, so with
``t9k-jobs.io/progress-deadline-seconds: N`` on the job (:mod:`t9k_jobs.api.extensions`):

- while the job is ``Running``, the job's last sign of life is the latest of its running
  replicas' last log lines (:attr:`~.types.ObservedPod.last_output`), or of their starts when
  they wrote none (:attr:`~.types.ObservedPod.started_at`); a replica that ended is not waited
  for, and the lines of a replica's attempts that ended do not count;
- while a replica that has not ended does not run (being created, backing off, replaced or
  deleted), the others may be waiting for it: the deadline is then twice N
  (:data:`WAITING_FACTOR`), so a replica that comes back within N is waited for, and one that
  never does (a crash loop: a peer's rendezvous closed, an image that cannot start) does not hold
  the job for ever; when none runs, nothing is judged;
- once the sign of life is that long ago or more, the job made no progress: one Warning event ``NoProgress``
  says which replicas were silent and for how long, the job's ``Progressing`` condition turns
  False (reason ``NoProgress``), the runtime dumps the stacks of the replicas' processes before
  it acts (:attr:`~.types.Plan.dump_stacks`), and ``t9k-jobs.io/on-no-progress`` says what then:

  - ``Restart`` (the default): every replica restarts, as after a retryable failure of the whole
    job: each restart counted, the job's backoff count raised once, the reason ``NoProgress``;
    with no restart left (``backoffLimit`` or a replica's restart ``limit`` reached) the job fails;
  - ``Fail``: the job fails, reason ``NoProgress``, its running replicas stopped;
  - ``Warn``: nothing more; the condition turns True again (``ProgressResumed``) once a replica
    writes a line;

- before the deadline, the engine asks to look again when it would pass (:func:`progress`).

A job with the annotation that was never stalled has no ``Progressing`` condition; the condition
stays once it appeared. Deployments have the same deadline (``progressDeadlineSeconds``, condition
``Progressing``, reason ``ProgressDeadlineExceeded``), measured by rollout rather than output.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api.common import ReplicaStatus
from ..api.extensions import PROGRESS_DEADLINE, extensions
from ..frameworks import Outcome
from .context import Pass, parse_time
from .decisions import Restart, Restarts
from .replica_status import on_its_way_out
from .restart import may_restart
from .types import Event, ObservedPod

#: The event, condition and replica reason of a job that made no progress.
NO_PROGRESS = "NoProgress"
#: The condition's type (as a Deployment's) and its reason once a line came again.
PROGRESSING = "Progressing"
RESUMED = "ProgressResumed"


@dataclass(frozen=True)
class Stall:
    """The job made no progress on this pass: the silent replicas as ``(pod, seconds since its
    last line, whether it wrote one)``, the deadline, the action, and the event that says so."""

    silent: tuple[tuple[ObservedPod, float, bool], ...]
    deadline: int
    action: str
    event: Event


@dataclass(frozen=True)
class Progress:
    """Where the job stands with its progress deadline on this pass: a :class:`Stall`, or when the
    deadline would pass (``wake``, seconds); both ``None`` without the annotation or while the
    job does not run as a whole."""

    stall: Stall | None = None
    wake: float | None = None


#: How many deadlines the running replicas' silence may last while another replica does not run.
WAITING_FACTOR = 2


def _running(p: Pass) -> tuple[list[ObservedPod], list[str]] | None:
    """The replicas' pods the deadline judges (every current attempt that runs) and the names of
    the replicas that have not succeeded but do not run (to be created, waiting to start, backing
    off, failed, being deleted or replaced, an older attempt on its way out); ``None`` unless the
    job is Running and one of them runs."""
    if p.old.phase != "Running":
        return None
    runs: list[ObservedPod] = []
    waits: list[str] = [name for _, _, name in p.desired() if name not in p.observed.pods]  # to be created
    for pod in p.observed.pods.values():
        if pod.terminal:
            if pod.effective_phase == "Failed":
                waits.append(pod.name)  # to be replaced (or the job fails)
            continue
        prev = p.prior(pod.name)
        rc = prev.restart_count if prev else 0
        older = pod.restart_attempt is not None and pod.restart_attempt < rc
        if pod.deleting or pod.effective_phase != "Running" or pod.started_at is None or older:
            waits.append(pod.name)
        else:
            runs.append(pod)
    return (runs, waits) if runs else None


def silent_for(pod: ObservedPod, now: float) -> tuple[float, bool]:
    """Seconds since ``pod``'s last log line, or since its start when it wrote none, and whether it
    wrote one."""
    assert pod.started_at is not None
    last = max(pod.started_at, pod.last_output or 0.0)
    return now - last, pod.last_output is not None and pod.last_output >= pod.started_at


def progress(p: Pass) -> Progress:
    """The job's progress deadline on this pass (module docstring)."""
    ext = extensions(p.job.metadata.annotations)
    if ext.progress_deadline is None:
        return Progress()
    judged = _running(p)
    if judged is None:
        # Not judged now (starting, every replica being replaced): look again within the
        # deadline, so a job whose status turns Running on this pass is judged without another event.
        return Progress(wake=None if p.old.phase in ("Succeeded", "Failed") else float(ext.progress_deadline))
    live, waiting = judged
    silent = [(pod, *silent_for(pod, p.now)) for pod in sorted(live, key=lambda x: x.name)]
    quietest = min(seconds for _, seconds, _ in silent)
    deadline = ext.progress_deadline
    limit = deadline * WAITING_FACTOR if waiting else deadline
    if quietest < limit:
        return Progress(wake=limit - quietest)
    parts = [
        f"{pod.name} {seconds:.0f} s since its last line" if wrote else f"{pod.name} no line in {seconds:.0f} s since its start"
        for pod, seconds, wrote in silent
    ]
    message = f"no replica wrote a log line for {limit} s ({PROGRESS_DEADLINE}): {'; '.join(parts)}"
    if waiting:
        names = ", ".join(sorted(set(waiting)))
        message += f"; {names} not running meanwhile ({WAITING_FACTOR} deadlines waited for it)"
    return Progress(Stall(tuple(silent), deadline, ext.on_no_progress, Event("Warning", NO_PROGRESS, message)))


def condition_message(deadline: int) -> str:
    """The ``Progressing=False`` condition's message (stable while stalled, so the status is not
    rewritten on every pass)."""
    return f"No replica wrote a log line for {deadline} s or more ({PROGRESS_DEADLINE})."


def progressing_row(p: Pass, stalled: bool) -> tuple[str, bool, str, str] | None:
    """The ``Progressing`` condition row: False from the pass that found the job stalled until a
    replica writes a line after it (then True, ``ProgressResumed``; a restart alone does not
    count); it stays once it appeared; absent for a job never stalled."""
    ext = extensions(p.job.metadata.annotations)
    old = p.old.condition(PROGRESSING)
    if stalled and ext.progress_deadline is not None:
        return (PROGRESSING, False, NO_PROGRESS, condition_message(ext.progress_deadline))
    if old is None:
        return None
    if old.status == "False":
        since = parse_time(old.last_transition_time) if old.last_transition_time else p.now
        if not any(pod.last_output is not None and pod.last_output > since and not pod.terminal
                   for pod in p.observed.pods.values()):  # fmt: skip
            return (PROGRESSING, False, old.reason or NO_PROGRESS, old.message or "")
    return (PROGRESSING, True, RESUMED, "A replica wrote a log line after the job made no progress.")


def warned(p: Pass) -> bool:
    """Whether the stall was said already (``Warn`` says it once, until progress resumes)."""
    old = p.old.condition(PROGRESSING)
    return old is not None and old.status == "False"


def failure(p: Pass, stall: Stall) -> Outcome:
    """The job's outcome when it fails for making no progress."""
    return Outcome(
        False,
        f"{p.job.kind} {p.job.name} has failed: {stall.event.message}",
        reason=NO_PROGRESS,
    )


def restart_all(p: Pass, backoff_count: int) -> Restarts | None:
    """Every replica restarts, the backoff count raised once; ``None`` when a replica may not
    restart any more (its restart ``limit``, or the job's ``backoffLimit``, reached)."""
    out: list[Restart] = []
    backoff = backoff_count + 1
    for g, i, name in p.desired():
        prev = p.prior(name)
        rc = prev.restart_count if prev else 0
        if not may_restart(p, g, rc, True, backoff_count, 0):
            return None
        pod = p.observed.pods.get(name)
        if pod is not None:
            status = on_its_way_out(pod, rc + 1)
        else:
            status = ReplicaStatus(name=name, phase="Creating", restart_count=rc + 1)
        out.append(Restart(g, i, status, pod, NO_PROGRESS, backoff))
    return Restarts(tuple(out), backoff, every=True)
