"""The reconcile engine: pure functions from (job, observed children, now, :class:`Runtime`) to a :class:`Plan`.

Nothing here does I/O or draws randomness: what only creation can fill in (an ssh Secret's key
pair) is left to the runtimes (:func:`t9k_jobs.sshkeys.materialize`)."""

from __future__ import annotations

from ..addressing import Addressing, ClusterAddressing, replica_name
from .desired import build_pod, children, compute_desired_hash, desired_hash_of
from .conditions import SPEC_VALID
from .reconcile import parse_time, reconcile, rfc3339
from .runtime import Runtime
from .status import invalid_spec_status
from .types import (
    ContainerState,
    Delete,
    Event,
    Lost,
    Observed,
    ObservedPod,
    Plan,
    WorkloadState,
    restart_attempt_label,
)

__all__ = [
    "Addressing",
    "ClusterAddressing",
    "ContainerState",
    "Delete",
    "Event",
    "Observed",
    "ObservedPod",
    "Lost",
    "Plan",
    "Runtime",
    "SPEC_VALID",
    "WorkloadState",
    "build_pod",
    "children",
    "compute_desired_hash",
    "desired_hash_of",
    "invalid_spec_status",
    "parse_time",
    "reconcile",
    "replica_name",
    "restart_attempt_label",
    "rfc3339",
]
