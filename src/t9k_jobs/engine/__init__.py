"""The reconcile engine: pure functions from (job, observed children, now) to a :class:`Plan`."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ..api.common import ANNOTATION_GENERATE
from ..sshkeys import generate_ssh_keypair
from .desired import build_pod, children, desired_hash, stamp_of
from .reconcile import parse_time, reconcile, rfc3339
from .types import (
    Addressing,
    ClusterAddressing,
    ContainerState,
    Delete,
    Event,
    Observed,
    ObservedPod,
    Plan,
    generation_label,
    replica_name,
)

__all__ = [
    "Addressing",
    "ClusterAddressing",
    "ContainerState",
    "Delete",
    "Event",
    "Observed",
    "ObservedPod",
    "Plan",
    "build_pod",
    "children",
    "desired_hash",
    "generation_label",
    "materialize",
    "parse_time",
    "reconcile",
    "replica_name",
    "rfc3339",
    "stamp_of",
]


def materialize(obj: dict[str, Any], keygen: Callable[[], dict[str, str]] = generate_ssh_keypair) -> dict[str, Any]:
    """Fill in what the engine leaves to creation time: an ssh Secret's key pair.

    Returns a copy of ``obj``; a Secret annotated ``batch.tensorstack.dev/generate:
    ssh-keypair`` gets ``stringData`` from ``keygen()``. Other objects are returned as copies.
    """
    out = copy.deepcopy(obj)
    annotations = out.get("metadata", {}).get("annotations") or {}
    if out.get("kind") == "Secret" and annotations.get(ANNOTATION_GENERATE) == "ssh-keypair":
        out.pop("data", None)
        out["stringData"] = keygen()
    return out
