"""``activeDeadlineSeconds`` [§1.4]: counted from ``status.startTime``, which the first pass that
acts on the job sets (as Kubernetes' Job controller does) and a pause clears (as a suspended
Job's); past it, every running replica is stopped and the job fails with DeadlineExceeded."""

from __future__ import annotations

from ..frameworks import Outcome
from .context import Pass, parse_time, rfc3339
from .decisions import Clock, Deadline


def _deadline(p: Pass) -> int | None:
    return p.fw.active_deadline_seconds(p.job)


def deadline(p: Pass, start_time: str | None) -> Deadline:
    """Where the job stands with its deadline, counted from ``start_time``: once it passed, the
    ``DeadlineExceeded`` outcome and the running pods to stop (the pass then ends the job with it:
    :func:`~.outcome.ending`); before, when it will pass."""
    seconds = _deadline(p)
    if not seconds or not start_time:
        return Deadline()
    ends = parse_time(start_time) + seconds
    if p.now < ends:
        return Deadline(wake=ends - p.now)
    message = (
        f"{p.job.kind} {p.job.name} has failed: it was active longer than activeDeadlineSeconds ({seconds}s)"
    )
    stop = tuple(pod for pod in p.observed.pods.values() if not pod.terminal)
    return Deadline(Outcome(False, message, reason="DeadlineExceeded"), stop)


def start_clock(p: Pass, start_time: str | None) -> Clock | None:
    """``startTime`` on the first pass that acts on the job (``None`` once set), waking up at its deadline."""
    if start_time:
        return None
    seconds = _deadline(p)
    return Clock(rfc3339(p.now), float(seconds) if seconds else None)
