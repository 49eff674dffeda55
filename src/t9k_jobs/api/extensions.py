"""Our extensions to T9k's API: annotations ``t9k-jobs.io/NAME`` on the job (T9k's schema stays
T9k's), validated like fields: a value outside what is accepted is refused with the annotation's
name, never ignored.

- ``t9k-jobs.io/progress-deadline-seconds``: a positive integer N. While the job is Running, if
  none of its replicas wrote a line to its log for N seconds, the job made no progress
  (:mod:`t9k_jobs.engine.progress`). As a Deployment's ``progressDeadlineSeconds``, but measured
  by the replicas' output, the one sign of life every training program gives.
- ``t9k-jobs.io/on-no-progress``: what then: ``Restart`` (the default; the whole job restarts as
  after a retryable failure, counted against its backoff limit), ``Fail`` or ``Warn``.
- ``t9k-jobs.io/ttl-seconds-after-finished``: a non-negative integer N. N seconds after the job
  Succeeded or Failed (its ``completionTime``) the operator deletes it, its children with it; a
  local run's directory is pruned by ``get`` and ``run`` (:mod:`t9k_jobs.engine.ttl`). As a
  Kubernetes Job's ``ttlSecondsAfterFinished``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .fields import INT32_MAX, FieldError

#: The prefix of every annotation of ours.
PREFIX = "t9k-jobs.io/"
PROGRESS_DEADLINE = f"{PREFIX}progress-deadline-seconds"
ON_NO_PROGRESS = f"{PREFIX}on-no-progress"
TTL_AFTER_FINISHED = f"{PREFIX}ttl-seconds-after-finished"
#: What ``on-no-progress`` accepts, the default first.
NO_PROGRESS_ACTIONS = ("Restart", "Fail", "Warn")
#: Every annotation of ours, for the message that refuses an unknown one.
KNOWN = (PROGRESS_DEADLINE, ON_NO_PROGRESS, TTL_AFTER_FINISHED)

NoProgressAction = Literal["Restart", "Fail", "Warn"]


@dataclass(frozen=True)
class Extensions:
    """The job's extensions as its annotations give them. ``progress_deadline``: seconds, ``None``
    without the annotation; ``on_no_progress``: the action when the deadline passes;
    ``ttl_after_finished``: seconds a finished job is kept, ``None`` without the annotation."""

    progress_deadline: int | None = None
    on_no_progress: NoProgressAction = "Restart"
    ttl_after_finished: int | None = None


def _where(key: str) -> str:
    return f"[{key}]"


def extensions(annotations: dict[str, str] | None) -> Extensions:
    """The extensions ``annotations`` (a job's ``metadata.annotations``) carry.

    Raises :class:`~.fields.FieldError` (path ``[t9k-jobs.io/NAME]``, relative to
    ``metadata.annotations``) for a value that is not accepted, or an unknown ``t9k-jobs.io/``
    annotation (a misspelt one would otherwise be ignored)."""
    annotations = annotations or {}
    for key in annotations:
        if key.startswith(PREFIX) and key not in KNOWN:
            raise FieldError(_where(key), f"unknown annotation; accepted: {', '.join(KNOWN)}")
    deadline = None
    raw = annotations.get(PROGRESS_DEADLINE)
    if raw is not None:
        text = str(raw).strip()
        if not text.isdigit() or not 0 < int(text) <= INT32_MAX:
            raise FieldError(_where(PROGRESS_DEADLINE), f"{raw!r} is not accepted; expected a positive integer (seconds)")
        deadline = int(text)
    action = annotations.get(ON_NO_PROGRESS, NO_PROGRESS_ACTIONS[0])
    if action not in NO_PROGRESS_ACTIONS:
        raise FieldError(_where(ON_NO_PROGRESS), f"{action!r} is not accepted; expected one of {', '.join(NO_PROGRESS_ACTIONS)}")
    if ON_NO_PROGRESS in annotations and deadline is None:
        raise FieldError(_where(ON_NO_PROGRESS), f"says what to do when {PROGRESS_DEADLINE} passes, which the job does not set")
    ttl = None
    raw = annotations.get(TTL_AFTER_FINISHED)
    if raw is not None:
        text = str(raw).strip()
        if not text.isdigit() or int(text) > INT32_MAX:
            raise FieldError(_where(TTL_AFTER_FINISHED), f"{raw!r} is not accepted; expected a non-negative integer (seconds)")
        ttl = int(text)
    return Extensions(deadline, action, ttl)  # type: ignore[arg-type]
