"""Admission by a queue: a queued job has no replica pod until Kueue admits its Workload.

Where the runtime queues (:attr:`~.runtime.Runtime.queueing`: Kueue's Workload API is served) and
the job sets ``spec.scheduler.t9kScheduler``, the job owns one Workload
(:func:`~t9k_jobs.frameworks.queueing.workload`) while it is active, neither paused nor finished.
Admission is one more input of the pass, as a pause is:

- not admitted yet (no Workload, or Kueue has not reserved quota for it): no pod is created, any
  pod left is deleted, every replica waits (``Creating``, its restart count kept), the deadline's
  clock stands still (``startTime`` cleared, as a paused job's), and the job is ``Pending``;
- admitted: the pass goes on as without a queue; the pods carry the node labels of the flavors
  they were admitted to;
- evicted (preempted by higher-priority work, its queue stopped...): not a failure. Its pods are
  deleted, no restart is counted; once none is left, the Workload is deleted, which gives its quota
  back, and the next pass makes a new one: the job waits in its queue again and starts from
  scratch when admitted (checkpoints are the program's). Kueue's own integrations clear the
  admission of the same Workload instead (``pkg/controller/jobframework/reconciler.go``); a new
  Workload is one create and needs no write to Kueue's status.

docs/decisions.md, "Queues through Kueue".
"""

from __future__ import annotations

from ..api.common import DEFAULT_QUEUE, JobStatus, ReplicaStatus
from ..api.kinds import JobBase
from ..frameworks.queueing import queued
from .context import Pass
from .decisions import Queue
from .runtime import Runtime
from .types import Delete, Observed


def in_queue(job: JobBase, observed: Observed, old: JobStatus, runtime: Runtime) -> bool:
    """Whether ``job`` goes through a queue: the runtime queues, the job sets t9kScheduler, and it
    is not a job that was running before queueing began (Kueue installed later: pods of its own
    and no ``Queued`` condition ever written). Such a job is left to run; it is queued from its
    next start with no pod (a restart of every replica, a pause). Asked once per pass
    (:attr:`~.context.Pass.queues`)."""
    if not (runtime.queueing and queued(job)):
        return False
    return old.condition("Queued") is not None or not any(not pod.deleting for pod in observed.pods.values())


def admission(p: Pass) -> Queue | None:
    """``None`` when the job may have pods (not queued, or admitted); else what waiting asks:
    every pod to delete, every replica's status (``Creating``), and the Workload to delete (an
    evicted one whose pods are all gone)."""
    if not p.queues:
        return None
    wl = p.observed.workload
    present = ("Workload", p.job.name) in p.observed.others
    if present and wl is not None and wl.admitted:
        return None
    replicas = []
    for _, _, name in p.desired():
        prev = p.prior(name)
        replicas.append(ReplicaStatus(name=name, phase="Creating", restart_count=prev.restart_count if prev else 0))
    pods = tuple(p.observed.pods.values())
    requeue = None
    if present and wl is not None and wl.evicted is not None and not pods:
        requeue = Delete("Workload", p.job.name, None, "Requeue")
    return Queue(pods, tuple(replicas), requeue, evicted=bool(pods) and wl is not None and wl.evicted is not None)


def queue_row(p: Pass, queued_now: bool, phase: str) -> tuple[str, bool, str, str] | None:
    """The ``Queued`` condition of a job that goes through a queue (``None`` for another): True
    while it waits for admission, with Kueue's reason and words (``Inadmissible``: "LocalQueue q
    doesn't exist"), or while paused (its Workload deleted); False, reason ``Admitted``, once
    admitted."""
    if not p.queues:
        return None
    sched = p.job.scheduler.t9k_scheduler  # type: ignore[union-attr]
    queue = sched.queue_name if sched is not None else DEFAULT_QUEUE
    wl = p.observed.workload
    if phase == "Paused":
        return ("Queued", True, "Paused", f"paused: its Kueue Workload is deleted, its quota given back; it "
                f"queues in LocalQueue {queue} again when resumed")  # fmt: skip
    if not queued_now:
        where = f" by ClusterQueue {wl.cluster_queue}" if wl is not None and wl.cluster_queue else ""
        return ("Queued", False, "Admitted", f"admitted{where} from LocalQueue {queue}")
    if ("Workload", p.job.name) not in p.observed.others or wl is None:
        return ("Queued", True, "Creating", f"waiting in LocalQueue {queue}: its Kueue Workload is being created")
    if wl.evicted is not None:
        words = f": {wl.message}" if wl.message else ""
        return ("Queued", True, wl.evicted, f"evicted{words}; waiting in LocalQueue {queue} again")
    if wl.reason is None:  # Kueue has written no condition yet
        return ("Queued", True, "Submitted", f"waiting in LocalQueue {queue}: Kueue has not looked at its Workload yet")
    words = wl.message or "waiting for Kueue to reserve quota"
    return ("Queued", True, wl.reason, f"waiting in LocalQueue {queue}: {words}")


def queue_events(old_reason: str | None, old_status: str | None, row: tuple[str, bool, str, str]) -> list[tuple[str, str, str]]:
    """Events for a change of the ``Queued`` condition, as ``(type, reason, message)``: Normal
    ``Admitted`` when it turns False, Normal ``Evicted`` when an eviction is first seen, Warning
    ``Inadmissible`` when Kueue says the Workload cannot be admitted as it stands (a missing
    LocalQueue or ClusterQueue), once per reason."""
    _, waiting, reason, message = row
    status = "True" if waiting else "False"
    if (status, reason) == (old_status, old_reason):
        return []
    if not waiting:
        return [("Normal", "Admitted", message)]
    if reason == "Inadmissible":
        return [("Warning", "Inadmissible", message)]
    if reason not in ("Creating", "Submitted", "Pending", "Paused") and old_status == "False":
        return [("Normal", "Evicted", message)]
    return []
