"""The clean-up policy of a finished job [§1.6]."""

from __future__ import annotations

from .context import UNFINISHED_GRACE, Pass, parse_time
from .decisions import CleanUp
from .replicas import reported


def clean_up(p: Pass, completion_time: str | None) -> CleanUp:
    """Pods of a finished job to delete by ``cleanUpPolicy`` [§1.6]; other children stay. Every
    replica is reported as the finished job's passes report it (:func:`~.replicas.reported`).

    ``Unfinished`` spares replicas still running for :data:`UNFINISHED_GRACE` seconds after
    ``completionTime`` and asks to look again then: ranks that end together (a DDP job's) reach
    the runtime a moment apart (a real kubelet notices an exit within its 1 s relist and reports
    the pod's end about 1.2 s later), so a replica that exits 0 a moment after the deciding one
    keeps its result and its logs instead of being deleted as unfinished.
    """
    policy, exempt = p.fw.clean_up(p.job)
    ends = parse_time(completion_time) + UNFINISHED_GRACE if completion_time else p.now
    pods, wake = [], None
    for pod in p.observed.pods.values():
        if pod.replica_type in exempt:
            continue
        if policy == "All":
            pods.append(pod)
        elif policy == "Unfinished" and not pod.terminal:
            if p.now >= ends:
                pods.append(pod)
            elif not pod.deleting:
                wake = ends - p.now
    return CleanUp(tuple(pods), wake, tuple(reported(p).values()))
