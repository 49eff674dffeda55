"""Failure rules (issue 43): what a replica pod's end means, before the kind's restart policy.

A job's ``t9k-jobs.io/failure-policy`` (:mod:`t9k_jobs.api.extensions`) lists rules; when a replica
pod has ended, the first rule that matches it decides (:func:`matching`): ``Fail`` fails the job
at once (reason ``FailurePolicy``), ``Restart`` restarts the replica counted against its limits
(whatever the restart policy), ``RestartIgnoringBackoff`` restarts it without counting, ``Ignore``
takes it as completed. No rule matching: T9k's behaviour, unchanged, but for one rule of the
field (Kubernetes' ``podFailurePolicy`` with ``DisruptionTarget``, JobSet, Kubeflow Trainer's
KEP-4162): an end that is not the program's fault, a lost node or an eviction
(:func:`disrupted`), restarts without counting against ``backoffLimit`` (the per-replica
restart ``limit`` still holds). A scheduler's preemption is not an end at all
(:mod:`.preemption`).
"""

from __future__ import annotations

from ..api.extensions import FailureRule, extensions
from .context import Pass
from .node_loss import NODE_LOST
from .types import ObservedPod

#: The reason of a job failed by a ``Fail`` rule.
FAILURE_POLICY = "FailurePolicy"


def disrupted(pod: ObservedPod) -> bool:
    """Whether the pod ended by a disruption, not by its program: its node was lost, or it carries
    a ``DisruptionTarget`` condition (evicted, deleted by the taint manager or the kubelet)."""
    return pod.reason == NODE_LOST or pod.disruption_reason is not None or pod.reason == "Evicted"


def matching(p: Pass, replica_type: str, pod: ObservedPod, code: int | None) -> FailureRule | None:
    """The first rule of the job's failure policy that matches ``pod`` (of ``replica_type``), which
    ended with ``code`` (its training container's exit code, ``None`` when it has none); ``None``
    when none does. ``onExitCodes`` never matches a pod without an exit code, nor ``NotIn`` a 0."""
    for rule in extensions(p.job.metadata.annotations).failure_rules:
        if rule.replica_types and replica_type not in rule.replica_types:
            continue
        if rule.exit_codes is not None:
            operator, codes = rule.exit_codes
            if code is None or (code in codes) != (operator == "In") or (operator == "NotIn" and code == 0):
                continue
            return rule
        if "DisruptionTarget" in rule.pod_conditions and disrupted(pod):
            return rule
    return None


def describe(rule: FailureRule) -> str:
    """The rule as a message names it: ``rule 0 (onExitCodes In [42])``."""
    if rule.exit_codes is not None:
        what = f"onExitCodes {rule.exit_codes[0]} {sorted(rule.exit_codes[1])}"
    else:
        what = f"onPodConditions {list(rule.pod_conditions)}"
    return f"rule {rule.index} ({what}, action {rule.action})"
