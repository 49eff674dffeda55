"""When a finished job is deleted: its time to live after it finished (issue 43).

A job's ``t9k-jobs.io/ttl-seconds-after-finished`` annotation (:mod:`t9k_jobs.api.extensions`),
else the runtime's default (:attr:`~.runtime.Runtime.ttl_after_finished`, the operator's
``--ttl-after-finished``; none by default: finished jobs are kept), counted from the job's
``completionTime``. As the TTL-after-finished controller of Kubernetes Jobs
(``pkg/controller/ttlafterfinished``): the job object goes, its children with it (they are owned).
Only a Succeeded or Failed job expires; a running, paused or queued one never does.
"""

from __future__ import annotations

from ..api.common import TERMINAL_PHASES
from ..api.extensions import extensions
from ..api.kinds import JobBase
from .context import parse_time
from .runtime import Runtime


def ttl_of(job: JobBase, runtime: Runtime) -> int | None:
    """The job's time to live after it finished, in seconds: its annotation, else the runtime's
    default; ``None``: kept. A bad annotation never reaches here (the job did not validate)."""
    own = extensions(job.metadata.annotations).ttl_after_finished
    return own if own is not None else runtime.ttl_after_finished


def expire_after(job: JobBase, runtime: Runtime, phase: str, completion_time: str | None, now: float) -> float | None:
    """Seconds until the job is to be deleted (0: now), or ``None`` when it is kept: not finished
    (``phase``, the job's phase after this pass), no ``completionTime`` (``completion_time``), or
    no TTL. ``now``: seconds since the epoch."""
    ttl = ttl_of(job, runtime)
    if ttl is None or phase not in TERMINAL_PHASES or not completion_time:
        return None
    try:
        finished = parse_time(completion_time)
    except ValueError:
        return None
    return max(0.0, finished + ttl - now)
