"""The one edit behind ``pause``, ``resume`` and ``scale``, and the line each prints once done: the
rules of both clients (:class:`~t9k_jobs.sdk.client.Client`,
:class:`~t9k_jobs.sdk.async_client.AsyncClient`) and the CLI's and the dashboard's words.

An edit is a field path and a value (``spec.runMode.pause.enabled``,
``spec.elastic.expectedReplicas``) that a backend sets (``Backend.set_field``), or None when the
job already is so.
"""

from __future__ import annotations

from typing import Any

from ..api import Job
from ..api.common import TERMINAL_PHASES
from ..errors import JobsError, UsageError
from ..frameworks import elastic_kinds, framework_for
from ..words import ref
from .view import JobView

#: The field ``pause`` and ``resume`` set.
PAUSE_FIELD = ["spec", "runMode", "pause", "enabled"]
#: The field ``scale`` sets.
SCALE_FIELD = ["spec", "elastic", "expectedReplicas"]


def edit_of(view: JobView, verb: str, replicas: int | None = None) -> tuple[list[str], Any] | None:
    """What ``verb`` (``pause``, ``resume``, ``scale`` to ``replicas``) changes in the job of
    ``view``: ``(field path, value)``, or None when the job already is so. The rules of both
    clients. Raises :class:`JobsError` (a finished job; a spec that does not validate),
    :class:`UsageError` (scale: not elastic, out of range; another verb)."""
    if view.phase in TERMINAL_PHASES:
        raise JobsError(f"{view.kind} {view.name} has finished ({view.phase}): there is nothing to {verb}")
    job = view.job
    if job is None:
        raise JobsError(f"{view.kind} {view.name}: its spec does not validate; cannot {verb} it")
    if verb == "pause":
        return None if job.run_mode.pause_enabled else (PAUSE_FIELD, True)
    if verb == "resume":
        return (PAUSE_FIELD, False) if job.run_mode.pause_enabled else None
    if verb == "scale":
        if replicas is None:
            raise UsageError("scale needs a number of replicas")
        problem = _scale_problem(job, replicas)
        if problem:
            raise UsageError(problem)
        if job.spec.elastic.expected_replicas == replicas:  # type: ignore[union-attr]
            return None
        return (SCALE_FIELD, replicas)
    raise UsageError(f"unknown edit {verb!r}: use pause, resume or scale")


def edited_line(kind: str, name: str, verb: str, replicas: int | None = None, namespace: str | None = None) -> str:
    """The line ``pause``, ``resume`` and ``scale`` print once done (the CLI's and the dashboard's);
    ``namespace``: a cluster job's, said after its name."""
    where = f"{ref(kind, name)}" + (f" in namespace {namespace}" if namespace else "")
    if verb == "pause":
        return f"{where} paused: spec.runMode.pause.enabled is true"
    if verb == "resume":
        return f"{where} resumed: spec.runMode.pause.enabled is false"
    return f"{where} scaled: spec.elastic.expectedReplicas is {replicas}"


def _scale_problem(job: Job, replicas: int) -> str | None:
    """Why ``job`` cannot be scaled to ``replicas``, or None: its kind has no elastic mode, its
    elastic mode is off, or ``replicas`` is outside its range (the plug-in's
    :meth:`~t9k_jobs.frameworks.base.Framework.elastic_range`)."""
    framework = framework_for(job)
    if not framework.elastic:
        return (
            f"scale: {job.kind} has no elastic mode; only {' and '.join(elastic_kinds())} scale "
            "(spec.elastic)"
        )
    span = framework.elastic_range(job)
    if span is None:
        return f"scale: {job.kind} {job.name} is not elastic (spec.elastic.enabled is not true)"
    low, high = span
    if not low <= replicas <= high:
        return (
            f"--replicas: {replicas} is outside {job.kind} {job.name}'s elastic range [{low}, {high}] "
            "(spec.elastic.minReplicas, maxReplicas)"
        )
    return None


__all__ = ["PAUSE_FIELD", "SCALE_FIELD", "edit_of", "edited_line"]
