"""The clean-up policy of a finished job [§1.6]."""

from __future__ import annotations

from .context import UNFINISHED_GRACE, Pass, parse_time


def clean_up(p: Pass) -> None:
    """Delete pods of a finished job by ``cleanUpPolicy`` [§1.6]; other children stay.

    ``Unfinished`` spares replicas still running for :data:`UNFINISHED_GRACE` seconds after
    ``completionTime`` and asks to look again then: ranks that end together (a DDP job's) reach
    the runtime a moment apart (a real kubelet notices an exit within its 1 s relist and reports
    the pod's end about 1.2 s later), so a replica that exits 0 a moment after the deciding one
    keeps its result and its logs instead of being deleted as unfinished.
    """
    policy, exempt = p.fw.clean_up(p.job)
    ends = parse_time(p.status.completion_time) + UNFINISHED_GRACE if p.status.completion_time else p.now
    for pod in p.observed.pods.values():
        if pod.replica_type in exempt:
            continue
        if policy == "All":
            p.delete_pod(pod, "CleanUp")
        elif policy == "Unfinished" and not pod.terminal:
            if p.now >= ends:
                p.delete_pod(pod, "CleanUp")
            elif not pod.deleting:
                p.plan.requeue_after = min(p.plan.requeue_after or ends - p.now, ends - p.now)
