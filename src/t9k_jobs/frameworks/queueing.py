"""A job's Kueue ``Workload``: how ``spec.scheduler.t9kScheduler`` asks a shared cluster for quota.

Where Kueue's API is served (``kueue.x-k8s.io/v1beta2`` ``workloads``), a job that sets
``t9kScheduler`` is queued: the operator writes one ``Workload`` for it, owned by the job, and
creates no pod until Kueue admits it (docs/decisions.md, "Queues through Kueue"; docs/scheduling.md).
Kueue's generic job integration (``pkg/controller/jobframework``) is Go only, so the Workload is
written here, as Kueue's own integrations write theirs (Kueue v0.17.0
``apis/kueue/v1beta2/workload_types.go``):

- ``spec.queueName``: ``t9kScheduler.queue`` (absent, null or empty: ``default``), a LocalQueue
  of the job's namespace;
- ``spec.priority``: ``t9kScheduler.priority`` (0-100). Kueue does not resolve a priority for a
  Workload it did not make (its scheduler reads ``spec.priority``, 0 when absent), so the number
  is written, and no WorkloadPriorityClass is needed;
- ``spec.podSets``: one per replica type (Kueue accepts at most 8), named like the type, ``count``
  its replicas, ``template`` the replica template's pod spec, from which Kueue sums the requests.

The pods themselves never carry ``kueue.x-k8s.io/queue-name``: Kueue's pod integration would
gate and admit them a second time.

The contract, stated as Kueue states its own for the jobs its reconciler manages (Kueue's
``pkg/controller/jobframework/interface.go``, ``GenericJob``), with where each part is kept here:

- **Pod sets** (``PodSets``: the groups of alike pods the job asks quota for): one per replica
  type with replicas, its count and pod spec (:func:`workload`, above). A job whose replica
  counts or templates change gets a new Workload: the engine replaces it (its desired hash
  differs) and the job queues again.
- **Suspended** (``IsSuspended``, ``Suspend``; and ``RunWithPodSetsInfo``, which starts it with
  the admission's node labels): a T9k job has no ``suspend`` field; "suspended" is a job that
  goes through a queue (:func:`queued`, and the runtime queues:
  :attr:`t9k_jobs.engine.Runtime.queueing`) whose Workload is not admitted, or is evicted. It
  then has no replica pod: none is created, any left is deleted,
  its replicas wait as ``Creating`` and its deadline's clock stands still
  (:mod:`t9k_jobs.engine.admission`). Admitted, the pass goes on as without a queue, and the
  pods carry, per pod set, the node labels of the ResourceFlavors it was admitted to
  (:func:`t9k_jobs.cluster.kueue.with_node_labels`). Nothing is to restore on eviction
  (``RestorePodSetsInfo``): the pods are deleted and made anew from the job's own templates.
- **Finished** (``Finished``: the job completed or failed, and so the Workload's quota is
  free): a job that ended, and a paused one, owns no Workload; the engine deletes it, which gives
  the quota back (:data:`t9k_jobs.engine.desired.PRUNED_KINDS`). Kueue's own integrations mark
  the Workload finished instead; deleting it needs no write to Kueue's status.
- **Active** (``IsActive``: some pod still runs): an evicted job's Workload is deleted, and a
  new one made, only once none of its pods is left, so quota is not given to another job while
  this one's pods still hold the nodes. A job that was running before Kueue was installed is
  left to run and is queued from its next start with no pod.
- **Priority** (``JobWithPriorityClass``; Kueue's ``WorkloadPriorityClass`` label): Kueue
  resolves no priority for a Workload it did not make, so ``t9kScheduler.priority`` is written
  as the number ``spec.priority`` (above); no class is needed.
- Not taken: ``PodsReady`` (Kueue's wait-for-pods-ready timeout), reclaimable pods, custom
  stops, composable jobs and MultiKueue.

What the operator reads of Kueue's objects (a Workload's admission, the ResourceFlavors'
node labels, whether Kueue is served at all) is :mod:`t9k_jobs.cluster.kueue`.
"""

from __future__ import annotations

import copy
from typing import Any

from ..api.extensions import extensions
from ..api.kinds import JobBase
from .base import child_meta
from .types import ReplicaGroup

KUEUE_GROUP = "kueue.x-k8s.io"
WORKLOAD_API = f"{KUEUE_GROUP}/v1beta2"
#: The ``podSetGroupName`` of a job's two pod sets placed as one (:func:`topology_requests`).
POD_SET_GROUP = "job"
#: Kueue refuses a Workload with more pod sets (``workload_types.go``, ``MaxItems=8``).
MAX_POD_SETS = 8


def queued(job: JobBase) -> bool:
    """Whether ``job`` asks to be queued: it sets ``spec.scheduler.t9kScheduler``."""
    return bool(job.scheduler and job.scheduler.t9k_scheduler)


def workload(job: JobBase, groups: list[ReplicaGroup], topology: bool = False) -> dict[str, Any] | None:
    """The ``kueue.x-k8s.io/v1beta2`` ``Workload`` of ``job``, named like the job, or ``None`` when
    the job does not set ``t9kScheduler``. Replica types with no replicas make no pod set. A job
    with more than :data:`MAX_POD_SETS` replica types gets a Workload that Kueue's webhook refuses:
    the create fails and the job's ``FailedCreateWorkload`` Warning event says why.

    ``topology``: Kueue's Topology Aware Scheduling serves the job's queue; a job with
    ``t9k-jobs.io/topology-key`` then asks for it on every pod set (:func:`topology_requests`)."""
    sched = job.scheduler.t9k_scheduler if job.scheduler else None
    if sched is None:
        return None
    pod_sets = []
    for g in groups:
        if g.replicas < 1:
            continue
        spec = copy.deepcopy(g.template.get("spec") or {})
        pod_sets.append({"name": g.type, "count": g.replicas, "template": {"spec": spec}})
    if topology:
        counts = [g.replicas for g in groups if g.replicas >= 1]
        for pod_set, request in zip(pod_sets, topology_requests(job, counts)):
            if request:
                pod_set["topologyRequest"] = request
    return {
        "apiVersion": WORKLOAD_API,
        "kind": "Workload",
        "metadata": child_meta(job, job.name),
        "spec": {"queueName": sched.queue_name, "priority": sched.priority, "podSets": pod_sets},
    }


def topology_requests(job: JobBase, counts: list[int]) -> list[dict[str, Any]]:
    """The ``topologyRequest`` of each pod set (of ``counts`` pods) of ``job``: ``{required: KEY}``
    or ``{preferred: KEY}`` (``t9k-jobs.io/topology-key``/``-mode``), ``{}`` for a job without a
    key. Kueue places each pod set in one domain, and two pod sets of one ``podSetGroupName`` in
    the same one, where one of the two has a single pod (Kueue v0.17.0
    ``jobframework/tas_validation.go``: groups of exactly 2, one of 1 replica): a master or
    launcher with its workers, in group ``job`` (Kueue keys ungrouped pod sets by their index, so
    the name is no number). Other jobs of several pod sets get each pod set
    in one domain, maybe not the same (the ``Topology`` condition says so:
    :func:`t9k_jobs.engine.topology.not_enforced`)."""
    ext = extensions(job.metadata.annotations)
    if ext.topology_key is None:
        return [{} for _ in counts]
    request: dict[str, Any] = {ext.topology_mode.lower(): ext.topology_key}
    grouped = groups_as_one(counts)
    return [{**request, "podSetGroupName": POD_SET_GROUP} if grouped and len(counts) == 2 else dict(request) for _ in counts]


def groups_as_one(counts: list[int]) -> bool:
    """Whether Kueue places pod sets of ``counts`` pods as one: one pod set, or two of which one
    has a single pod (:func:`topology_requests`)."""
    return len(counts) == 1 or (len(counts) == 2 and 1 in counts)
