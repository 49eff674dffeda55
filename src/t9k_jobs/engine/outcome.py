"""Success and failure: ending the job with the framework's (or the deadline's) outcome [§2.3, §3.2, §4.4, §5.3]."""

from __future__ import annotations

from ..frameworks import Outcome
from .clean_up import clean_up
from .context import Pass, rfc3339


def end(p: Pass, outcome: Outcome) -> str:
    """End the job with ``outcome`` (the framework's, or the deadline's): set ``completionTime``,
    drop the pods still to be made, apply the clean-up policy and say how it ended (one event).
    Returns the terminal phase, ``Succeeded`` or ``Failed``; the status is derived from it at the
    end of the pass (:func:`~.status.finish_status`)."""
    phase = "Succeeded" if outcome.succeeded else "Failed"
    p.status.completion_time = rfc3339(p.now)
    p.plan.requeue_after = None  # a deadline's wake-up is moot; the clean-up may ask for its own
    p.creates.clear()
    p.plan.create = [o for o in p.plan.create if o["kind"] != "Pod"]
    clean_up(p)
    if outcome.succeeded:
        p.event("Normal", "Succeeded", outcome.message)
    else:
        p.event("Warning", outcome.reason or "Failed", outcome.message)
    return phase
