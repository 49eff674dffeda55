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
- ``t9k-jobs.io/failure-policy``: a YAML or JSON list of at most :data:`MAX_RULES` rules, read
  when a replica pod ended, before the kind's restart policy; the first that matches decides
  (:mod:`t9k_jobs.engine.failure_policy`). A rule: ``onExitCodes: {operator: In|NotIn, values:
  [...]}`` (the training container's exit code) or ``onPodConditions: [DisruptionTarget]`` (the pod
  was evicted, preempted or its node lost), optionally ``replicaTypes: [...]``, and ``action``:
  ``Fail`` (the job fails now), ``Restart`` (restart, counted against the limits, whatever the
  restart policy), ``RestartIgnoringBackoff`` (restart, not counted) or ``Ignore`` (the replica is
  taken as completed). As Kubernetes' ``podFailurePolicy`` and JobSet's ``failurePolicy.rules``.
- ``t9k-jobs.io/topology-key``: a node label key (a rack, a block: ``topology.kubernetes.io/rack``)
  and ``t9k-jobs.io/topology-mode``: ``Required`` (the default) or ``Preferred``: every pod of the
  job in one domain of that label (:mod:`t9k_jobs.engine.topology`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from .fields import INT32_MAX, FieldError

#: The prefix of every annotation of ours.
PREFIX = "t9k-jobs.io/"
PROGRESS_DEADLINE = f"{PREFIX}progress-deadline-seconds"
ON_NO_PROGRESS = f"{PREFIX}on-no-progress"
TTL_AFTER_FINISHED = f"{PREFIX}ttl-seconds-after-finished"
FAILURE_POLICY = f"{PREFIX}failure-policy"
TOPOLOGY_KEY = f"{PREFIX}topology-key"
TOPOLOGY_MODE = f"{PREFIX}topology-mode"
#: What ``topology-mode`` accepts, the default first.
TOPOLOGY_MODES = ("Required", "Preferred")
#: What a failure rule's ``action`` accepts; its ``onExitCodes.operator``; its ``onPodConditions``.
FAILURE_ACTIONS = ("Fail", "Restart", "RestartIgnoringBackoff", "Ignore")
EXIT_CODE_OPERATORS = ("In", "NotIn")
POD_CONDITIONS = ("DisruptionTarget",)
#: At most this many rules, and this many exit codes in one rule (Kubernetes' own bounds).
MAX_RULES, MAX_CODES = 20, 255
#: What ``on-no-progress`` accepts, the default first.
NO_PROGRESS_ACTIONS = ("Restart", "Fail", "Warn")
#: Every annotation of ours, for the message that refuses an unknown one.
KNOWN = (PROGRESS_DEADLINE, ON_NO_PROGRESS, TTL_AFTER_FINISHED, FAILURE_POLICY, TOPOLOGY_KEY, TOPOLOGY_MODE)

NoProgressAction = Literal["Restart", "Fail", "Warn"]
FailureAction = Literal["Fail", "Restart", "RestartIgnoringBackoff", "Ignore"]


@dataclass(frozen=True)
class FailureRule:
    """One rule of ``t9k-jobs.io/failure-policy`` (module docstring): ``exit_codes``
    (``(operator, codes)``) or ``pod_conditions``; ``replica_types`` (empty: every type);
    ``action``; ``index``: its place in the list, from 0 (messages name it)."""

    index: int
    action: FailureAction
    exit_codes: tuple[str, frozenset[int]] | None = None
    pod_conditions: tuple[str, ...] = ()
    replica_types: tuple[str, ...] = ()


@dataclass(frozen=True)
class Extensions:
    """The job's extensions as its annotations give them. ``progress_deadline``: seconds, ``None``
    without the annotation; ``on_no_progress``: the action when the deadline passes;
    ``ttl_after_finished``: seconds a finished job is kept, ``None`` without the annotation."""

    progress_deadline: int | None = None
    on_no_progress: NoProgressAction = "Restart"
    ttl_after_finished: int | None = None
    failure_rules: tuple[FailureRule, ...] = ()
    #: The node label whose domains hold the whole job, and whether that is required or preferred.
    topology_key: str | None = None
    topology_mode: Literal["Required", "Preferred"] = "Required"


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
    rules = failure_rules(annotations[FAILURE_POLICY]) if FAILURE_POLICY in annotations else ()
    key, mode = _topology(annotations)
    return Extensions(deadline, action, ttl, rules, key, mode)  # type: ignore[arg-type]


_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _topology(annotations: dict[str, str]) -> tuple[str | None, str]:
    """``(topology key, mode)``; raises :class:`~.fields.FieldError` for a key that is not a label
    key, a mode not in :data:`TOPOLOGY_MODES`, or a mode without a key."""
    key = annotations.get(TOPOLOGY_KEY)
    mode = annotations.get(TOPOLOGY_MODE, TOPOLOGY_MODES[0])
    if key is not None:
        prefix, _, name = str(key).rpartition("/")
        ok = 0 < len(name) <= 63 and _NAME.match(name) and (
            not prefix and "/" not in key or len(prefix) <= 253 and _SUBDOMAIN.match(prefix))  # fmt: skip
        if not ok:
            raise FieldError(_where(TOPOLOGY_KEY), f"{key!r} is not a node label key (an optional DNS-subdomain "
                             "prefix and '/', then a name of at most 63 letters, digits, '-', '_', '.')")  # fmt: skip
    if mode not in TOPOLOGY_MODES:
        raise FieldError(_where(TOPOLOGY_MODE), f"{mode!r} is not accepted; expected Required or Preferred")
    if TOPOLOGY_MODE in annotations and key is None:
        raise FieldError(_where(TOPOLOGY_MODE), f"says how to hold the job in one domain of {TOPOLOGY_KEY}, which the job does not set")
    return key, mode


def failure_rules(text: str) -> tuple[FailureRule, ...]:
    """The rules of a ``t9k-jobs.io/failure-policy`` value (YAML or JSON). Raises
    :class:`~.fields.FieldError` naming the annotation, the rule's index and its field."""
    import yaml  # JSON is YAML: one parser for both

    where = _where(FAILURE_POLICY)
    try:
        data = yaml.safe_load(str(text))
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FieldError(where, f"is not a YAML or JSON list of rules: {first}") from None
    if not isinstance(data, list) or not data:
        raise FieldError(where, "expected a non-empty list of rules ({onExitCodes|onPodConditions, replicaTypes, action})")
    if len(data) > MAX_RULES:
        raise FieldError(where, f"{len(data)} rules; at most {MAX_RULES} are accepted")
    return tuple(_rule(i, raw, f"{where}[{i}]") for i, raw in enumerate(data))


def _rule(i: int, raw: Any, where: str) -> FailureRule:
    if not isinstance(raw, dict):
        raise FieldError(where, "expected a mapping with action and onExitCodes or onPodConditions")
    unknown = sorted(set(raw) - {"action", "onExitCodes", "onPodConditions", "replicaTypes"})
    if unknown:
        raise FieldError(f"{where}.{unknown[0]}", "unknown field; accepted: action, onExitCodes, onPodConditions, replicaTypes")
    action = raw.get("action")
    if action not in FAILURE_ACTIONS:
        raise FieldError(f"{where}.action", f"{action!r} is not accepted; expected one of {', '.join(FAILURE_ACTIONS)}")
    if ("onExitCodes" in raw) == ("onPodConditions" in raw):
        raise FieldError(where, "expected exactly one of onExitCodes and onPodConditions")
    types = raw.get("replicaTypes", [])
    if not isinstance(types, list) or not all(isinstance(t, str) and t for t in types):
        raise FieldError(f"{where}.replicaTypes", "expected a list of replica types (worker, master...)")
    if "onPodConditions" in raw:
        conditions = raw["onPodConditions"]
        if not isinstance(conditions, list) or not conditions or any(c not in POD_CONDITIONS for c in conditions):
            raise FieldError(f"{where}.onPodConditions", f"{conditions!r} is not accepted; expected a list of {', '.join(POD_CONDITIONS)}")
        return FailureRule(i, action, pod_conditions=tuple(conditions), replica_types=tuple(types))
    codes = raw["onExitCodes"]
    if not isinstance(codes, dict) or set(codes) - {"operator", "values"}:
        raise FieldError(f"{where}.onExitCodes", "expected {operator: In|NotIn, values: [exit codes]}")
    operator, values = codes.get("operator"), codes.get("values")
    if operator not in EXIT_CODE_OPERATORS:
        raise FieldError(f"{where}.onExitCodes.operator", f"{operator!r} is not accepted; expected In or NotIn")
    if (not isinstance(values, list) or not values or len(values) > MAX_CODES
            or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 255 for v in values)):  # fmt: skip
        raise FieldError(f"{where}.onExitCodes.values", f"expected 1 to {MAX_CODES} exit codes, integers 0 to 255")
    if operator == "In" and 0 in values:
        raise FieldError(f"{where}.onExitCodes.values", "0 is a success, never a failure: not accepted with In")
    return FailureRule(i, action, exit_codes=(operator, frozenset(values)), replica_types=tuple(types))
