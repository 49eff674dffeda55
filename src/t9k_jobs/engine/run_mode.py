"""Run modes [§1.5]: a paused job has no replica pods, and its deadline's clock stops.

Debug mode is applied where pods are built (:func:`~t9k_jobs.engine.desired.build_pod`: the
debug command) and where replicas end (no restarts, no outcome); resume where pods are built
(``resumeSpecs``) and in the phase (``Resuming``).
"""

from __future__ import annotations

from .context import Pass
from .replicas import refresh_replicas


def paused(p: Pass) -> bool:
    """If the job is paused: delete every replica pod, report them Deleted, clear ``startTime``
    (as a suspended Kubernetes Job; resuming starts the clock again) and return True (the pass
    then derives the status with phase ``Paused``)."""
    if not p.job.run_mode.pause_enabled:
        return False
    for pod in p.observed.pods.values():
        p.delete_pod(pod, "Paused")
    refresh_replicas(p, paused=True)
    p.status.start_time = None
    return True
