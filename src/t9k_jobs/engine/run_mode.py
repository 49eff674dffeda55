"""Run modes [§1.5]: a paused job has no replica pods, and its deadline's clock stops.

Debug mode is applied where pods are built (:func:`~t9k_jobs.engine.desired.build_pod`: the
debug command) and where replicas end (no restarts, no outcome); resume where pods are built
(``resumeSpecs``) and in the phase (``Resuming``).
"""

from __future__ import annotations

from .context import Pass
from .decisions import Pause
from .replicas import reported


def paused(p: Pass) -> Pause | None:
    """If the job is paused: every replica pod to delete, every replica reported Deleted, and
    ``startTime`` cleared (as a suspended Kubernetes Job; resuming starts the clock again); the
    pass then derives the status with phase ``Paused``. ``None`` when the job is not paused."""
    if not p.job.run_mode.pause_enabled:
        return None
    return Pause(tuple(p.observed.pods.values()), tuple(reported(p, paused=True).values()))
