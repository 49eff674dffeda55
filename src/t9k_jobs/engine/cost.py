"""What a job's unfinished attempts cost (issue 42): replica-seconds and GPU-seconds spent on pods
that ended without finishing, by why they ended.

An *attempt* is one replica pod (one restart attempt of one replica). It is *lost* when it ends
without its replica finishing: it failed, it was stopped for a restart of its peers, its node was
lost, the scheduler preempted it, its queue evicted it, the job was paused, or the job failed or
passed its deadline while it still ran. :func:`lost` says so on the pass that sees it end, with a
reason (:data:`REASONS`); the runtimes add it to the job's totals (:func:`add`), each pod once by
its UID, and the operator also to its counters ``t9k_jobs_lost_replica_seconds_total{reason}`` and
``t9k_jobs_lost_gpu_seconds_total{reason}``.

Not lost: a replica that succeeded, a pod scaled away or relaunched on purpose (an elastic job's
``ScaledDown``/``Relaunch``, a changed template), and anything of a job that succeeded (a clean-up
that stops ranks still running after the job's success is the job's own rule, not a loss).

Seconds: from the first container's start to the last container's end
(:attr:`~.types.ObservedPod.ran_from` / :attr:`~.types.ObservedPod.ran_until`), or to ``now`` for
a pod still running when it is deleted; 0 for a pod that never ran. GPUs: what the replica's
template asks for (:func:`gpus`). The figures are what the job held, not what it used: a pod that
waited for its image held no GPU-seconds by this count, which starts at its first container.
"""

from __future__ import annotations

from typing import Any

from .context import Pass
from .node_loss import NODE_LOST
from .progress import NO_PROGRESS
from .types import Delete, Lost, ObservedPod

#: Why an attempt was lost, from the delete that ended it: the reasons :func:`lost` gives.
#: ``Failed``: it failed on its own (its program's exit, OOM, an image that never ran);
#: ``Restart``: it was stopped to restart with its peers; ``JobFailed``: it still ran when the job
#: failed on another replica.
REASONS = ("Failed", "Restart", NO_PROGRESS, NODE_LOST, "Preempted", "Evicted", "NotAdmitted",
           "DeadlineExceeded", "Paused", "JobFailed", "Deleted")  # fmt: skip
#: Deletes that are asked for and cost nothing the user did not want.
_NOT_LOST = frozenset({"ScaledDown", "Relaunch", "Changed"})
#: How many counted pods' UIDs the totals remember (a repeated pass repeats the same pods).
REMEMBERED = 512


def gpus(template: dict[str, Any]) -> float:
    """The GPUs a pod template asks for: the sum over its containers of every resource whose name
    has ``gpu`` in it (``nvidia.com/gpu``, ``amd.com/gpu``) or is a MIG slice (``nvidia.com/mig-*``),
    each from ``limits`` (where Kubernetes requires extended resources), else ``requests``; its init
    containers' largest ask when that is more (they run before the others, as the scheduler counts
    them). A value that is not a number counts 0."""
    spec = template.get("spec") or {}

    def one(container: Any) -> float:
        resources = (container.get("resources") or {}) if isinstance(container, dict) else {}
        asked: dict[str, Any] = {}
        for part in ("requests", "limits"):  # a limit wins over a request of the same resource
            if isinstance(resources.get(part), dict):
                asked.update(resources[part])
        total = 0.0
        for name, value in asked.items():
            if "gpu" in name or name.startswith("nvidia.com/mig-"):
                try:
                    total += float(value)
                except (TypeError, ValueError):
                    continue
        return total

    main = sum(one(c) for c in spec.get("containers") or [])
    init = max((one(c) for c in spec.get("initContainers") or []), default=0.0)
    return max(main, init)


def lost(p: Pass, deletes: list[Delete], phase: str) -> tuple[Lost, ...]:
    """The attempts this pass sees lost (module docstring): the pods it deletes for a loss, pods
    that failed on their own, pods the scheduler preempts and pods someone else deletes, unless
    the job succeeded (``phase``: the job's phase after this pass). A pod may be said on several
    passes (a failed one waiting out its back-off); :func:`add` counts each UID once."""
    if phase == "Succeeded" or p.old.phase == "Succeeded":
        return ()
    why = {d.name: d.reason for d in deletes if d.kind == "Pod"}
    templates = {g.type: g.template for g in p.groups}
    out = []
    for pod in p.observed.pods.values():
        reason = _reason(pod, why.get(pod.name), phase)
        if reason is None:
            continue
        end = pod.ran_until if pod.ran_until is not None else p.now
        seconds = max(0.0, end - pod.ran_from) if pod.ran_from is not None else 0.0
        out.append(Lost(pod.name, pod.uid, pod.restart_attempt or 0, reason, seconds,
                        gpus(templates.get(pod.replica_type) or {})))  # fmt: skip
    return tuple(out)


def _reason(pod: ObservedPod, deleted: str | None, phase: str) -> str | None:
    if pod.effective_phase == "Succeeded" or deleted in _NOT_LOST:
        return None
    if pod.reason == NODE_LOST or deleted == NODE_LOST:
        return NODE_LOST
    if pod.preempted or deleted == "Preempted":
        return "Preempted"
    if pod.effective_phase == "Failed":
        return "Failed"  # its own failure, whatever then deletes it
    if deleted == "CleanUp":
        return "JobFailed" if phase == "Failed" else None
    if deleted in REASONS:
        return deleted
    if pod.deleting and deleted is None:
        # Deleted by someone else: a drain's eviction, a user's kubectl delete, the taint manager.
        return "Evicted" if pod.disruption_reason == "EvictionByEvictionAPI" else "Deleted"
    return None


def add(totals: dict[str, Any] | None, lost: tuple[Lost, ...] | list[Lost]) -> tuple[dict[str, Any], list[Lost]]:
    """``totals`` (as :func:`add` made them, or ``None``) with ``lost`` added, each pod once by UID;
    returns the new totals and the attempts that were new. Shape::

        {"reasons": {REASON: {"attempts": int, "replicaSeconds": float, "gpuSeconds": float}},
         "counted": [UID, ...]}   # the last REMEMBERED UIDs counted
    """
    reasons = {k: dict(v) for k, v in _field(totals, "reasons", dict).items() if isinstance(v, dict)}
    counted = [u for u in _field(totals, "counted", list) if isinstance(u, str)]
    seen, new = set(counted), []
    for one in lost:
        if one.uid in seen:
            continue
        seen.add(one.uid)
        counted.append(one.uid)
        new.append(one)
        row = reasons.setdefault(one.reason, {"attempts": 0, "replicaSeconds": 0.0, "gpuSeconds": 0.0})
        row["attempts"] = int(row.get("attempts", 0)) + 1
        row["replicaSeconds"] = round(float(row.get("replicaSeconds", 0.0)) + one.seconds, 3)
        row["gpuSeconds"] = round(float(row.get("gpuSeconds", 0.0)) + one.seconds * one.gpus, 3)
    return {"reasons": reasons, "counted": counted[-REMEMBERED:]}, new


def rows(totals: dict[str, Any] | None) -> list[tuple[str, int, float, float]]:
    """``(reason, attempts, replica-seconds, GPU-seconds)`` per reason of ``totals``, most
    replica-seconds first; none for ``None`` or totals without losses."""
    out = []
    for reason, row in _field(totals, "reasons", dict).items():
        try:
            out.append((str(reason), int(row.get("attempts", 0)), float(row.get("replicaSeconds", 0.0)),
                        float(row.get("gpuSeconds", 0.0))))  # fmt: skip
        except (AttributeError, TypeError, ValueError):
            continue  # a row that is not one (a file edited by hand): left out
    return sorted(out, key=lambda r: (-r[2], r[0]))


def _field(totals: Any, name: str, kind: type) -> Any:
    """``totals[name]`` when ``totals`` is a dict and the value a ``kind``, else an empty ``kind``."""
    value = totals.get(name) if isinstance(totals, dict) else None
    return value if isinstance(value, kind) else kind()
