"""Where a queued job stands in its Kueue queue (issue 43): "position 3 of 7 in LocalQueue team-a
(ClusterQueue team-a-cq)", from Kueue's visibility API, for ``describe`` and ``get -o wide``.

Kueue v0.17 serves, through an aggregated API of its manager, the pending workloads of a
LocalQueue in the order its scheduler will try them (``GET /apis/visibility.kueue.x-k8s.io/v1beta2/
namespaces/NS/localqueues/Q/pendingworkloads``: ``items[].metadata.name``,
``positionInLocalQueue``, ``positionInClusterQueue``, from 0; Kueue's
``apis/visibility/v1beta2/types.go``). A job's Workload is named like the job
(:func:`t9k_jobs.frameworks.queueing.workload`). Where the API is not served (the APIService not
installed, its server not reachable), not allowed (a user needs Kueue's
``kueue-batch-user-role`` or a rule for ``pendingworkloads``) or the Workload is not listed (just
admitted, not yet seen by Kueue), there is no position: the verbs say the queue only.
"""

from __future__ import annotations

from typing import Any

from ..cluster.client import LOCALQUEUES, ApiError, Resource

#: Kueue's LocalQueues' visibility subresource.
VISIBLE_LOCALQUEUES = Resource("visibility.kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")


def place(pending: dict[str, Any], workload: str) -> tuple[int, int] | None:
    """``(N, M)``: ``workload`` is N-th (from 1) of the M pending workloads of a
    ``PendingWorkloadsSummary`` (``pending``); ``None`` when it is not listed."""
    items = [i for i in pending.get("items") or [] if isinstance(i, dict)]
    mine = next((i for i in items if (i.get("metadata") or {}).get("name") == workload), None)
    if mine is None:
        return None
    try:
        return int(mine.get("positionInLocalQueue", 0)) + 1, len(items)
    except (TypeError, ValueError):
        return None


def position_line(pending: dict[str, Any], workload: str, queue: str, cluster_queue: str | None) -> str | None:
    """``position N of M in LocalQueue Q (ClusterQueue C)`` for ``workload`` in a
    ``PendingWorkloadsSummary`` (``pending``), ``None`` when it is not listed."""
    where = place(pending, workload)
    if where is None:
        return None
    line = f"position {where[0]} of {where[1]} in LocalQueue {queue}"
    return line + (f" (ClusterQueue {cluster_queue})" if cluster_queue else "")


async def queue_position(kube: Any, namespace: str, workload: str, queue: str) -> str | None:
    """Where ``workload`` stands in LocalQueue ``queue`` of ``namespace`` (:func:`position_line`),
    ``None`` when it cannot be told (module docstring). ``kube``: a
    :class:`~t9k_jobs.cluster.client.KubeClient`. Network errors raise (the caller's verb says
    the cluster is unreachable)."""
    try:
        pending = await kube.request("GET", VISIBLE_LOCALQUEUES.path(namespace, queue, "pendingworkloads"))
    except (ApiError, ValueError):
        return None
    try:
        lq = await kube.get(LOCALQUEUES, namespace, queue)
        cluster_queue = (lq.get("spec") or {}).get("clusterQueue")
    except ApiError:
        cluster_queue = None
    return position_line(pending, workload, queue, cluster_queue if isinstance(cluster_queue, str) else None)


def _queued(raw: dict[str, Any]) -> str | None:
    """The LocalQueue a job waits in (its ``Queued`` condition True), else ``None``."""
    status = raw.get("status") or {}
    if not any(isinstance(c, dict) and c.get("type") == "Queued" and c.get("status") == "True"
               for c in status.get("conditions") or []):  # fmt: skip
        return None
    sched = (((raw.get("spec") or {}).get("scheduler") or {}).get("t9kScheduler")) or {}
    queue = sched.get("queue") if isinstance(sched, dict) else None
    return queue if isinstance(queue, str) and queue else "default"


async def positions(kube: Any, raws: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """``(namespace, name)`` -> where each queued job of ``raws`` stands in its LocalQueue, ``N/M``
    (:func:`place`; the QUEUE column names the queue), one visibility request per LocalQueue, not
    per job: ``get -o wide``. Jobs that are not queued, or whose place Kueue does not say, are
    left out."""
    wanted: dict[tuple[str, str], list[str]] = {}
    for raw in raws:
        meta = raw.get("metadata") or {}
        queue = _queued(raw)
        if queue is not None and meta.get("namespace") and meta.get("name"):
            wanted.setdefault((meta["namespace"], queue), []).append(meta["name"])
    out: dict[tuple[str, str], str] = {}
    for (namespace, queue), names in wanted.items():
        try:
            pending = await kube.request("GET", VISIBLE_LOCALQUEUES.path(namespace, queue, "pendingworkloads"))
        except (ApiError, ValueError):
            continue
        for name in names:
            where = place(pending, name)
            if where is not None:
                out[(namespace, name)] = f"{where[0]}/{where[1]}"
    return out
