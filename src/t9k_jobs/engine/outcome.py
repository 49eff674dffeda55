"""Success and failure: ending the job with the framework's (or the deadline's) outcome [§2.3, §3.2, §4.4, §5.3]."""

from __future__ import annotations

from ..frameworks import Outcome
from .clean_up import clean_up
from .context import Pass, rfc3339
from .desired import RELEASED_KINDS
from .decisions import Ending
from .types import Delete, Event


def ending(p: Pass, outcome: Outcome) -> Ending:
    """The job ends on this pass with ``outcome`` (the framework's, or the deadline's): its terminal
    phase, ``Succeeded`` or ``Failed``, its ``completionTime``, the clean-up policy applied from
    then (with every replica reported as the finished job's later passes will, so the status is
    final on this pass), one event saying how it ended, and its queue's Workload and its gang's
    disruption budget to delete at once.
    Applying it also drops the wake-ups asked for so far (:func:`~.apply.end`); the status is
    derived from it at the end of the pass (:func:`~.status.finish_status`)."""
    completion = rfc3339(p.now)
    if outcome.succeeded:
        event = Event("Normal", "Succeeded", outcome.message)
    else:
        event = Event("Warning", outcome.reason or "Failed", outcome.message)
    phase = "Succeeded" if outcome.succeeded else "Failed"
    release = tuple(Delete(kind, p.job.name, None, "Released") for kind in RELEASED_KINDS
                    if (kind, p.job.name) in p.observed.others)  # fmt: skip
    return Ending(outcome, phase, completion, clean_up(p, completion), event, release)
