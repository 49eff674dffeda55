"""A job in one topology domain (issue 43): ``t9k-jobs.io/topology-key`` (a node label: a rack, a
block) and ``t9k-jobs.io/topology-mode`` (:mod:`t9k_jobs.api.extensions`).

A 16-node NCCL job spread over racks trains at a fraction of its speed; the field places a gang in
one domain. Here, by what the cluster serves:

- every pod of the job carries a pod affinity to the job's other pods on ``topologyKey`` = the
  label: ``requiredDuringScheduling...`` for ``Required``, ``preferredDuringScheduling...`` (weight
  100) for ``Preferred``. Any scheduler that honours pod affinity keeps the pods in one domain: the
  first pod may go anywhere, the others follow it (:func:`affinity_term`);
- with native gang scheduling (``scheduling.k8s.io/v1beta1`` PodGroups, Kubernetes 1.37), a
  ``Required`` job's PodGroup also carries ``spec.schedulingConstraints.topology: [{key}]``, so the
  scheduler places the whole gang in one domain that holds it, or none (gate
  ``TopologyAwareWorkloadScheduling``, alpha in 1.37.2, off by default: the API server then drops
  the field, and the live PodGroup says so);
- where the gang is not placed as a unit (no native gang, or the API server dropped the
  constraint) a ``Required`` job gets a ``Topology`` condition (False, ``TopologyNotEnforced``)
  and one Warning: its pods are kept together, but the first pod's domain may not hold the rest,
  who then wait (:func:`not_enforced`). A local run is one machine: one domain, always held.

- through Kueue, where the job's LocalQueue leads to a ClusterQueue with a flavor that has a
  Topology (``Observed.queue_topology``), Kueue's Topology Aware Scheduling places the job: its
  Workload's pod sets ask for the key (``topologyRequest``:
  :func:`t9k_jobs.frameworks.queueing.topology_requests`), and each pod gets, as node selector,
  the domain the admission's ``topologyAssignment`` gave it, neighbouring ranks together
  (:func:`t9k_jobs.cluster.kueue.placements`). Kueue decided the placement: the pods carry no pod
  affinity and the PodGroup no constraint, which could only disagree with it. Kueue places two
  pod sets as one only where one has a single pod (a master with its workers); a ``Required``
  job of more gets the condition. A queue without a Topology is not asked: Kueue would never
  admit the Workload ("Flavor X does not support TopologyAwareScheduling").
"""

from __future__ import annotations

from typing import Any

from ..api.extensions import TOPOLOGY_KEY, extensions
from ..api.kinds import JobBase
from ..frameworks.base import LABEL_OWNER_KIND, LABEL_OWNER_NAME
from ..frameworks.queueing import groups_as_one
from .context import Pass

#: The reason of the ``Topology`` condition and of its Warning.
TOPOLOGY_NOT_ENFORCED = "TopologyNotEnforced"


def affinity_term(job: JobBase) -> dict[str, Any]:
    """The pod affinity term to the job's own pods on its topology key."""
    key = extensions(job.metadata.annotations).topology_key
    return {"labelSelector": {"matchLabels": {LABEL_OWNER_KIND: job.kind, LABEL_OWNER_NAME: job.name}}, "topologyKey": key}


def apply_to_pod(job: JobBase, pod: dict[str, Any]) -> None:
    """Add the job's topology (when it has one) to ``pod`` (changed), beside the template's own
    affinity: a required term, or a preferred one of weight 100."""
    ext = extensions(job.metadata.annotations)
    if ext.topology_key is None:
        return
    affinity = pod["spec"].setdefault("affinity", {}).setdefault("podAffinity", {})
    if ext.topology_mode == "Required":
        affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(affinity_term(job))
    else:
        term = {"weight": 100, "podAffinityTerm": affinity_term(job)}
        affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(term)


def constrain_pod_group(job: JobBase, group: dict[str, Any]) -> None:
    """A ``Required`` job's native PodGroup (``scheduling.k8s.io/v1beta1``, changed): its
    ``schedulingConstraints.topology``."""
    ext = extensions(job.metadata.annotations)
    if ext.topology_key is not None and ext.topology_mode == "Required" and group["apiVersion"].startswith("scheduling.k8s.io/"):
        group["spec"]["schedulingConstraints"] = {"topology": [{"key": ext.topology_key}]}


def not_enforced(p: Pass) -> str:
    """The ``Topology`` condition's message when a ``Required`` topology holds the pods together but
    no gang places them as a unit (module docstring); '' otherwise, and while it cannot be told
    yet (the PodGroup not seen)."""
    ext = extensions(p.job.metadata.annotations)
    if ext.topology_key is None or ext.topology_mode != "Required" or p.runtime.one_node:
        return ""
    key = ext.topology_key
    if p.ctx.queue_topology:
        counts = [g.replicas for g in p.groups if g.replicas > 0]
        if groups_as_one(counts):
            return ""
        return (f"{TOPOLOGY_KEY} ({key}) is not placed as a unit: Kueue's Topology Aware Scheduling places each "
                f"of the job's {len(counts)} pod sets (replica types) in one domain, maybe not the same one "
                "(it places two pod sets as one only where one of them has a single pod)")  # fmt: skip
    kept = (f"its pods are kept in one domain of {key} by pod affinity, but the first pod's domain may not "
            "hold the others, who then wait")  # fmt: skip
    sched = p.job.scheduler.t9k_scheduler if p.job.scheduler else None
    if sched is None or p.ctx.gang != "native":
        why = "no t9kScheduler gang" if sched is None else f"gang scheduling here is {p.ctx.gang!r}, not native PodGroups"
        return f"{TOPOLOGY_KEY} ({key}) is not placed as a unit ({why}): {kept}"
    group = ("PodGroup", p.job.name)
    if group not in p.observed.others:
        return ""
    if group in p.observed.unconstrained:
        return (f"{TOPOLOGY_KEY} ({key}) is not placed as a unit: the API server dropped the PodGroup's "
                "schedulingConstraints (feature gate TopologyAwareWorkloadScheduling is off): " + kept)  # fmt: skip
    return ""
