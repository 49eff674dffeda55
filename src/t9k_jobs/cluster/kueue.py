"""The Kueue adaptor's cluster half: what the operator reads of Kueue's objects.

The job half, and the contract between a job and Kueue, is :mod:`t9k_jobs.frameworks.queueing`
(the Workload a queued job writes, when it may make pods); the engine's part is
:mod:`t9k_jobs.engine.admission`. Here, as Kueue keeps one package per integration:

* :func:`serves_queueing`: whether ``t9kScheduler`` jobs are queued on this cluster at all;
* :func:`project_workload`: a Workload's status as the engine reads it, and the flavors of its
  admission (the child informer's projection of a Workload);
* :func:`flavor_informer` / :func:`project_flavor`: the cluster's ResourceFlavors, kept as their
  node labels and Topology;
* :func:`with_node_labels`: an admitted Workload with, per pod set, the node labels of its
  flavors (the engine puts them on the pods it makes);
* :func:`placements`: an admission's ``topologyAssignment`` of a pod set, one node selector per pod
  (Kueue's Topology Aware Scheduling, TAS);
* :class:`QueueTopology`: whether TAS places the jobs of a LocalQueue (its ClusterQueue has a
  flavor with a Topology), read from informers of the LocalQueues, ClusterQueues and flavors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..engine import WorkloadState
from .client import CLUSTERQUEUES, LOCALQUEUES, RESOURCEFLAVORS, KubeClient
from .informer import Informer

#: A Workload's admission: per pod set, the ResourceFlavors it was given (names).
Flavors = tuple[tuple[str, tuple[str, ...]], ...]
#: Most pods one pod set's assignment is expanded to (Kueue caps a slice's domains at 100000; a
#: pod set's count is an int32): a hand-made Workload cannot make the operator allocate more.
MAX_PLACEMENTS = 100_000


@dataclass(frozen=True)
class Flavor:
    """A ResourceFlavor as the controller keeps it: its ``spec.nodeLabels`` and
    ``spec.topologyName`` (``None``: Kueue places its pods by quota only)."""

    node_labels: dict[str, str]
    topology: str | None = None


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
    placed = {
        str(a.get("name", "")): placements(a.get("topologyAssignment"), a.get("count"))
        for a in admission.get("podSetAssignments") or []
        if isinstance(a, dict) and a.get("topologyAssignment")
    }
    state = WorkloadState(
        admitted=admitted is not None and evicted is None,
        evicted=(evicted.get("reason") or "Evicted") if evicted is not None else None,
        reason=said.get("reason") or None,
        message=said.get("message") or None,
        cluster_queue=admission.get("clusterQueue") or None,
        placements={k: v for k, v in placed.items() if v},
    )
    return state, flavors


def placements(assignment: Any, count: Any = None) -> tuple[dict[str, str], ...]:
    """A pod set's ``topologyAssignment`` (Kueue v0.17.0 ``v1beta2`` ``TopologyAssignment``:
    ``levels``, node label keys from the highest level to the lowest, and ``slices``, each of
    ``domainCount`` domains with ``valuesPerLevel`` (``universal``, or ``individual``: ``prefix``
    + ``roots[i]`` + ``suffix``) and ``podCounts`` (``universal`` or ``individual[i]``)), expanded
    to one node selector per pod, the domains in the order Kueue lists them: the pod set's pods
    in rank order take them so, and neighbouring ranks share a domain. At most ``count`` (the
    assignment's pod count, else :data:`MAX_PLACEMENTS`) selectors; ``()`` for an assignment
    that does not parse (never raises: it is another program's object)."""
    if not isinstance(assignment, dict):
        return ()
    levels = assignment.get("levels")
    if not isinstance(levels, list) or not levels or not all(isinstance(x, str) for x in levels):
        return ()
    limit = count if isinstance(count, int) and 0 <= count <= MAX_PLACEMENTS else MAX_PLACEMENTS
    out: list[dict[str, str]] = []
    for sl in assignment.get("slices") or []:
        domains = _domains(sl, levels)
        if domains is None:
            return ()
        for selector, pods in domains:
            out += [selector] * min(pods, limit - len(out))
            if len(out) >= limit:
                return tuple(out)
    return tuple(out)


def _domains(sl: Any, levels: list[str]) -> list[tuple[dict[str, str], int]] | None:
    """The ``(node selector, pod count)`` of each domain of one slice; ``None`` when it does not
    parse (:func:`placements`)."""
    if not isinstance(sl, dict):
        return None
    n = sl.get("domainCount")
    per_level = sl.get("valuesPerLevel")
    counts = sl.get("podCounts") or {}
    if not isinstance(n, int) or not 1 <= n <= MAX_PLACEMENTS or not isinstance(per_level, list) \
            or len(per_level) != len(levels) or not isinstance(counts, dict):  # fmt: skip
        return None
    values: list[list[str]] = []
    for level in per_level:
        if not isinstance(level, dict):
            return None
        if isinstance(level.get("universal"), str):
            values.append([level["universal"]] * n)
            continue
        ind = level.get("individual")
        roots = ind.get("roots") if isinstance(ind, dict) else None
        if not isinstance(ind, dict) or not isinstance(roots, list) or len(roots) != n:
            return None
        prefix, suffix = str(ind.get("prefix") or ""), str(ind.get("suffix") or "")
        values.append([f"{prefix}{r}{suffix}" for r in roots])
    universal = counts.get("universal")
    pods = [universal] * n if isinstance(universal, int) else counts.get("individual")
    if not isinstance(pods, list) or len(pods) != n or not all(isinstance(c, int) and c >= 0 for c in pods):
        return None
    return [({key: values[j][i] for j, key in enumerate(levels)}, pods[i]) for i in range(n)]


def flavor_informer(client: KubeClient) -> Informer[Flavor]:
    """An informer of the cluster's ResourceFlavors (cluster-scoped), each kept as its node
    labels and Topology (:func:`project_flavor`): the labels are put on the pods of an admitted
    job."""
    return Informer(client, RESOURCEFLAVORS, transform=project_flavor)


def project_flavor(obj: dict[str, Any]) -> Flavor:
    """A ResourceFlavor as the controller keeps it (:class:`Flavor`)."""
    spec = obj.get("spec") or {}
    labels = spec.get("nodeLabels") or {}
    topology = spec.get("topologyName")
    return Flavor({str(k): str(v) for k, v in labels.items()}, str(topology) if topology else None)


def with_node_labels(workload: WorkloadState, flavors: Flavors, known: Informer[Flavor] | None) -> WorkloadState:
    """``workload`` with, per pod set, the node labels of the ``flavors`` it was admitted to
    (merged; a flavor not in ``known``, the ResourceFlavor informer's cache, adds none)."""
    if not flavors or known is None:
        return workload
    selectors: dict[str, dict[str, str]] = {}
    for pod_set, names in flavors:
        labels: dict[str, str] = {}
        for name in names:
            flavor = known.get("", name)
            labels.update(flavor.node_labels if flavor is not None else {})
        if labels:
            selectors[pod_set] = labels
    return replace(workload, node_selectors=selectors)


def cluster_queue_flavors(obj: dict[str, Any]) -> tuple[str, ...]:
    """A ClusterQueue as the controller keeps it: the flavors of its ``spec.resourceGroups``."""
    names = {
        str(f.get("name"))
        for group in (obj.get("spec") or {}).get("resourceGroups") or [] if isinstance(group, dict)
        for f in group.get("flavors") or [] if isinstance(f, dict) and f.get("name")
    }  # fmt: skip
    return tuple(sorted(names))


class QueueTopology:
    """Whether Kueue's Topology Aware Scheduling places the jobs of a LocalQueue: its
    ClusterQueue has a flavor with ``spec.topologyName`` (Kueue v0.17.0: a pod set that asks for
    a topology in a ClusterQueue with no such flavor is never admitted, "Flavor X does not
    support TopologyAwareScheduling"; ``docs/lifecycle.md``). Informers of the LocalQueues (of
    ``namespaces``; ``None``: all), the ClusterQueues and the flavors (shared with
    :func:`with_node_labels`)."""

    def __init__(self, client: KubeClient, namespaces: list[str | None], flavors: Informer[Flavor]) -> None:
        self.local_queues = [
            Informer(client, LOCALQUEUES, namespace=ns, transform=lambda o: str((o.get("spec") or {}).get("clusterQueue") or ""))
            for ns in namespaces
        ]  # fmt: skip
        self.cluster_queues: Informer[tuple[str, ...]] = Informer(client, CLUSTERQUEUES, transform=cluster_queue_flavors)
        self.flavors = flavors

    def informers(self) -> list[Informer[Any]]:
        """Its own informers (not the flavors'): to run beside the controller's."""
        return [*self.local_queues, self.cluster_queues]

    def serves(self, namespace: str, queue: str) -> bool:
        """Whether LocalQueue ``namespace``/``queue`` leads to a ClusterQueue with a flavor that
        has a Topology (a queue, ClusterQueue or flavor not known: ``False``)."""
        cq = next((c for inf in self.local_queues if (c := inf.get(namespace, queue))), None)
        flavors = self.cluster_queues.get("", cq) if cq else None
        for name in flavors or ():
            flavor = self.flavors.get("", name)
            if flavor is not None and flavor.topology:
                return True
        return False
