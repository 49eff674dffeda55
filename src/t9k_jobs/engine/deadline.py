"""``activeDeadlineSeconds`` [§1.4]: counted from ``status.startTime``, which the first pass that
acts on the job sets (as Kubernetes' Job controller does) and a pause clears (as a suspended
Job's); past it, every running replica is stopped and the job fails with DeadlineExceeded."""

from __future__ import annotations

from ..frameworks import Outcome
from .context import Pass, parse_time, rfc3339
from .replicas import refresh_replicas


def _deadline(p: Pass) -> int | None:
    return p.fw.active_deadline_seconds(p.job)


def deadline_passed(p: Pass) -> Outcome | None:
    """The job's ``DeadlineExceeded`` outcome if its deadline has passed (its running replicas
    are then being stopped, and the pass ends the job with it: :func:`~.outcome.end`); else
    ``None``, asking to look again when it will pass."""
    deadline = _deadline(p)
    if not deadline or not p.status.start_time:
        return None
    ends = parse_time(p.status.start_time) + deadline
    if p.now < ends:
        p.plan.requeue_after = min(ends - p.now, p.plan.requeue_after or ends - p.now)
        return None
    message = f"{p.job.kind} {p.job.name} has failed: it was active longer than activeDeadlineSeconds ({deadline}s)"
    for pod in p.observed.pods.values():
        if not pod.terminal:
            p.delete_pod(pod, "DeadlineExceeded")
    refresh_replicas(p)
    return Outcome(False, message, reason="DeadlineExceeded")


def start_clock(p: Pass) -> None:
    """Set ``startTime`` on the first pass that acts on the job, and wake up at its deadline."""
    if p.status.start_time:
        return
    p.status.start_time = rfc3339(p.now)
    deadline = _deadline(p)
    if deadline:
        p.plan.requeue_after = min(float(deadline), p.plan.requeue_after or float(deadline))
