"""The Kueue adaptor's cluster half: what the operator reads of Kueue's objects.

The job half, and the contract between a job and Kueue, is :mod:`t9k_jobs.frameworks.queueing`
(the Workload a queued job writes, when it may make pods); the engine's part is
:mod:`t9k_jobs.engine.admission`. Here, as Kueue keeps one package per integration:

* :func:`serves_queueing`: whether ``t9kScheduler`` jobs are queued on this cluster at all;
* :func:`project_workload`: a Workload's status as the engine reads it, and the flavors of its
  admission (the child informer's projection of a Workload);
* :func:`flavor_informer` / :func:`flavor_labels`: the cluster's ResourceFlavors, kept as their
  node labels;
* :func:`with_node_labels`: an admitted Workload with, per pod set, the node labels of its
  flavors (the engine puts them on the pods it makes).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..engine import WorkloadState
from .client import RESOURCEFLAVORS, KubeClient
from .informer import Informer

#: A Workload's admission: per pod set, the ResourceFlavors it was given (names).
Flavors = tuple[tuple[str, tuple[str, ...]], ...]


def serves_queueing(optional_kinds: set[str]) -> bool:
    """Whether ``t9kScheduler`` jobs are queued through Kueue here: its Workload API is served
    (``kueue.x-k8s.io/v1beta2`` ``workloads``, among ``optional_kinds``; issue 24,
    docs/scheduling.md)."""
    return "Workload" in optional_kinds


def project_workload(status: dict[str, Any]) -> tuple[WorkloadState, Flavors]:
    """A Kueue Workload's status as the engine reads it (:class:`~t9k_jobs.engine.WorkloadState`)
    and, per pod set, the flavors of its admission (Kueue v0.17.0 ``workload_types.go``:
    conditions ``QuotaReserved``, ``Admitted``, ``Evicted``; ``status.admission``)."""
    conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}

    def true(type_: str) -> dict[str, Any] | None:
        c = conds.get(type_)
        return c if c is not None and c.get("status") == "True" else None

    evicted, admitted = true("Evicted"), true("Admitted")
    said = evicted or (conds.get("QuotaReserved") if not admitted else admitted) or {}
    admission = status.get("admission") or {}
    flavors = tuple(
        (str(a.get("name", "")), tuple(sorted({str(f) for f in (a.get("flavors") or {}).values()})))
        for a in admission.get("podSetAssignments") or []
        if isinstance(a, dict)
    )
    state = WorkloadState(
        admitted=admitted is not None and evicted is None,
        evicted=(evicted.get("reason") or "Evicted") if evicted is not None else None,
        reason=said.get("reason") or None,
        message=said.get("message") or None,
        cluster_queue=admission.get("clusterQueue") or None,
    )
    return state, flavors


def flavor_informer(client: KubeClient) -> Informer[dict[str, str]]:
    """An informer of the cluster's ResourceFlavors (cluster-scoped), each kept as its node
    labels (:func:`flavor_labels`): put on the pods of an admitted job."""
    return Informer(client, RESOURCEFLAVORS, transform=flavor_labels)


def flavor_labels(obj: dict[str, Any]) -> dict[str, str]:
    """A ResourceFlavor as the controller keeps it: its ``spec.nodeLabels``."""
    labels = (obj.get("spec") or {}).get("nodeLabels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def with_node_labels(
    workload: WorkloadState, flavors: Flavors, known: Informer[dict[str, str]] | None
) -> WorkloadState:
    """``workload`` with, per pod set, the node labels of the ``flavors`` it was admitted to
    (merged; a flavor not in ``known``, the ResourceFlavor informer's cache, adds none)."""
    if not flavors or known is None:
        return workload
    selectors: dict[str, dict[str, str]] = {}
    for pod_set, names in flavors:
        labels: dict[str, str] = {}
        for name in names:
            labels.update(known.get("", name) or {})
        if labels:
            selectors[pod_set] = labels
    return replace(workload, node_selectors=selectors)
