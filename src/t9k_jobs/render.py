"""``render``: every object the operator would create for a manifest, with no cluster."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import yaml

from .api import Job
from .engine import Observed, Runtime, reconcile
from .frameworks.types import GangMode
from .sshkeys import generate_ssh_keypair, materialize

_ORDER = {"ConfigMap": 0, "Secret": 1, "Service": 2, "PodGroup": 3, "TensorBoard": 4, "PodDisruptionBudget": 5, "Pod": 6}


def render(
    job: Job,
    keygen: Callable[[], dict[str, str]] = generate_ssh_keypair,
    gang: GangMode = "t9k",
    priority_classes: frozenset[str] | None = None,
) -> list[dict[str, Any]]:
    """The objects the first reconcile of ``job`` creates on an empty cluster, in apply order.

    ConfigMaps, Secrets (key pairs from ``keygen``), Services, PodGroup, TensorBoard, then
    Pods. A job created paused has no pods. ``gang`` is the cluster's gang scheduling assumed
    for ``spec.scheduler.t9kScheduler`` (:data:`~t9k_jobs.frameworks.types.GangMode`): ``t9k``
    (T9k's PodGroup, the default), ``native`` (a ``scheduling.k8s.io/v1beta1`` PodGroup,
    Kubernetes 1.37+) or ``none`` (no PodGroup, the default scheduler); the operator picks it
    from discovery (its :class:`~t9k_jobs.engine.Runtime`). Every optional kind (PodGroup,
    TensorBoard) is assumed served;
    ``priority_classes``: the cluster's PriorityClasses (None: the job's ``t9k-priority-<N>`` is
    assumed made by the admin; :attr:`~t9k_jobs.engine.Observed.priority_classes`).
    """
    plan = reconcile(job, Observed(priority_classes=priority_classes), 0.0, Runtime(gang=gang))
    objects = [materialize(o, keygen) for o in plan.create]
    return sorted(objects, key=lambda o: _ORDER.get(o["kind"], 9))


class _Dumper(yaml.SafeDumper):
    """YAML with multi-line strings as literal blocks, keys in insertion order."""


# Plain scalars that other YAML parsers (go-yaml, YAML 1.1) read as numbers or booleans.
_AMBIGUOUS = re.compile(
    r"^(?:[-+]?(?:\d[\d_]*)?\.?\d+(?:[eE][-+]?\d+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|0[xXoObB][0-9a-fA-F_]+|y|Y|n|N|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF"
    r"|true|True|TRUE|false|False|FALSE|null|Null|NULL|~)$"
)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value:
        style: str | None = "|"
    elif _AMBIGUOUS.match(value):
        style = "'"
    else:
        style = None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """Objects as a multi-document YAML stream (``---`` between documents)."""
    return yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1000)
