"""Last words (issue 42): what a replica printed last, kept when the operator deletes its pod.

On a cluster a restart, the clean-up policy, a lost node or a job that made no progress deletes
the replica's pod, and the kubelet deletes its log with it: "why did it fail at 3 a.m." has no
answer in the morning. Before the operator deletes a replica pod, it reads the last
:data:`KEEP_BYTES` of each of its containers' logs (``GET .../log?tailLines=...&timestamps=true``,
what the container printed and nothing else) and keeps them, with how each container ended, in one
ConfigMap per job, ``<job>-last-words`` (:func:`name_of`), owned by the job (deleted with it):

- ``attempts.json``: one entry per pod, container and attempt: ``replica`` (the pod's name),
  ``attempt`` (its restart attempt), ``container``, ``exitCode``, ``reason`` (``Error``,
  ``OOMKilled``, ``NodeLost``...), ``why`` (why the operator deleted it: ``Restart``,
  ``CleanUp``, ``NodeLost``, ``NoProgress``...), ``deleted`` (RFC 3339), ``key`` (the data key of
  its lines, absent when none could be read) and ``note`` (why not: a lost node's kubelet does
  not answer);
- ``<pod>.attempt-<N>.<container>.log``: its last lines, each with the timestamp the log API gave;
- ``lost.json``: what the attempts that ended without finishing cost, by why
  (:func:`t9k_jobs.engine.cost.add`'s totals, each pod counted once by UID); the operator's
  counters ``t9k_jobs_lost_replica_seconds_total`` and ``t9k_jobs_lost_gpu_seconds_total`` grow
  by what is new to it.

At most :data:`BUDGET` bytes per job (the API server refuses an object over 1 MiB): the oldest
attempts are dropped first (never ``lost.json``, bounded by the UIDs it remembers). The ConfigMap
carries no child label, so the operator's child informer does not see it; ``t9k-jobs logs`` and
``describe`` read it once the pods are gone (:mod:`t9k_jobs.sdk.cluster_logs`).
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from typing import Any

from ..api import Job
from ..engine import Delete, Lost, ObservedPod, rfc3339
from ..engine.cost import REMEMBERED, add
from . import metrics
from .client import CONFIGMAPS, ApiError, KubeClient

log = logging.getLogger("t9k_jobs.controller")

#: The last bytes of one container's log that are kept.
KEEP_BYTES = 64 * 1024
#: What one job's ConfigMap may hold, its data together (under the API server's 1 MiB).
BUDGET = 960 * 1024
#: Lines asked for (the kept bytes are the end of them) and the bound of the answer read.
TAIL_LINES, READ_LIMIT = 5000, 1024 * 1024
#: Seconds a log answer may take (a lost node's kubelet never answers).
ANSWER_TIMEOUT = 5.0
INDEX = "attempts.json"
LOST = "lost.json"
#: The label that tells whose last words a ConfigMap holds.
LABEL = "t9k-jobs.io/last-words-of"


def name_of(job: str) -> str:
    """The ConfigMap of job ``job``'s last words."""
    return f"{job}-last-words"


def attempts(cm: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The entries of a last-words ConfigMap (oldest first); none for ``None`` or an unreadable one."""
    try:
        found = json.loads(((cm or {}).get("data") or {}).get(INDEX) or "[]")
    except ValueError:
        return []
    return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []


def lost_totals(cm: dict[str, Any] | None) -> dict[str, Any] | None:
    """The lost attempts' totals a last-words ConfigMap holds, ``None`` when none or unreadable."""
    try:
        found = json.loads(((cm or {}).get("data") or {}).get(LOST) or "null")
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _tail(text: str, size: int) -> str:
    """The end of ``text``, at most ``size`` bytes of it, starting at a line."""
    data = text.encode()
    if len(data) <= size:
        return text
    cut = data[-size:]
    newline = cut.find(b"\n")
    return cut[newline + 1 :].decode(errors="replace") if newline >= 0 else cut.decode(errors="replace")


class LastWords:
    """Keeps the last lines of replica pods the operator deletes (module docstring)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        # The lost attempts this operator counted (pod UIDs), so that a pass repeating one does
        # not read the ConfigMap again; the ConfigMap's own list counts each once across operators.
        self.counted: OrderedDict[str, None] = OrderedDict()

    async def keep(
        self, job: Job, deletes: list[Delete], pods: dict[str, ObservedPod], lost: tuple[Lost, ...] = ()
    ) -> None:
        """Read and keep the last lines of the pods ``deletes`` removes (not forced deletes: they
        were read when first deleted), and count the ``lost`` attempts not counted yet. Failures
        are logged, never raised: the deletes go on."""
        new_lost = [one for one in lost if one.uid not in self.counted]
        entries: list[tuple[dict[str, Any], str | None]] = []
        now = rfc3339(time.time())
        for d in deletes:
            pod = pods.get(d.name)
            if d.kind != "Pod" or d.force or pod is None:
                continue
            for c in pod.containers:
                text, note = await self._read(job.namespace, pod.name, c.name)
                entry = {
                    "replica": pod.name, "attempt": pod.restart_attempt or 0, "container": c.name,
                    "exitCode": c.exit_code, "reason": c.reason or pod.reason, "why": d.reason, "deleted": now,
                }  # fmt: skip
                if note:
                    entry["note"] = note
                entries.append((entry, text))
        if not entries and not new_lost:
            return
        for _ in range(3):  # a conflict: another pass wrote first; read it again
            try:
                counted = await self._store(job, entries, new_lost)
                self._count(new_lost, counted)
                return
            except ApiError as exc:
                if exc.status != 409:
                    log.warning("%s/%s: cannot keep its replicas' last lines: %s", job.namespace, job.name, exc)
                    return
            except (OSError, TimeoutError) as exc:
                log.warning("%s/%s: cannot keep its replicas' last lines: %s", job.namespace, job.name, exc)
                return

    async def _read(self, namespace: str, pod: str, container: str) -> tuple[str | None, str | None]:
        """``(the container's last lines or None, why not)``."""
        params = {"container": container, "tailLines": TAIL_LINES, "timestamps": "true", "limitBytes": READ_LIMIT}
        lines: list[str] = []
        try:
            async for line in self.client.stream_lines(
                f"/api/v1/namespaces/{namespace}/pods/{pod}/log", params, idle_timeout=ANSWER_TIMEOUT
            ):
                lines.append(line)
        except ApiError as exc:
            return None, f"its log could not be read: {exc.message}"
        except (OSError, TimeoutError) as exc:
            return None, f"its log could not be read: {exc or type(exc).__name__}"
        return _tail("\n".join(lines) + ("\n" if lines else ""), KEEP_BYTES), None

    def _count(self, lost: list[Lost], new: list[Lost]) -> None:
        """Remember ``lost`` as counted; the counters grow by ``new`` (those the ConfigMap lacked)."""
        for one in lost:
            self.counted[one.uid] = None
        while len(self.counted) > 8 * REMEMBERED:
            self.counted.popitem(last=False)
        for one in new:
            metrics.LOST_REPLICA_SECONDS.labels(reason=one.reason).inc(one.seconds)
            metrics.LOST_GPU_SECONDS.labels(reason=one.reason).inc(one.seconds * one.gpus)

    async def _store(self, job: Job, entries: list[tuple[dict[str, Any], str | None]],
                     lost: list[Lost] | None = None) -> list[Lost]:  # fmt: skip
        """Merge ``entries`` and ``lost`` into the job's ConfigMap; returns the lost attempts it
        did not hold yet. Raises :class:`ApiError` (409: another pass wrote first)."""
        name = name_of(job.name)
        try:
            cm: dict[str, Any] | None = await self.client.get(CONFIGMAPS, job.namespace, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
            cm = None
        index = attempts(cm)
        data = {k: v for k, v in ((cm or {}).get("data") or {}).items() if k not in (INDEX, LOST)}
        totals, new = add(lost_totals(cm), lost or [])
        for entry, text in entries:
            if text is not None:
                key = f"{entry['replica']}.attempt-{entry['attempt']}.{entry['container']}.log"
                entry["key"] = key
                data[key] = text
            index = [e for e in index if e.get("key") is None or e.get("key") != entry.get("key")] + [entry]
        kept_totals = json.dumps(totals, separators=(",", ":")) if totals["reasons"] else None
        fixed = len(kept_totals or "")
        while index and sum(len(v.encode()) for v in data.values()) + len(json.dumps(index)) + fixed > BUDGET:
            dropped = index.pop(0)  # the oldest attempt goes first
            data.pop(dropped.get("key") or "", None)
        data[INDEX] = json.dumps(index, separators=(",", ":"))
        if kept_totals is not None:
            data[LOST] = kept_totals
        if not entries and not new:
            return new  # nothing to add: every lost attempt was counted before
        if cm is None:
            body = {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {
                    "name": name, "namespace": job.namespace,
                    "labels": {LABEL: job.name, "app.kubernetes.io/managed-by": "t9k-jobs"},
                    "ownerReferences": [{
                        "apiVersion": job.api_version, "kind": job.kind, "name": job.name,
                        "uid": job.metadata.uid or "", "controller": False,
                    }],
                },
                "data": data,
            }  # fmt: skip
            await self.client.create(CONFIGMAPS, job.namespace, body)
            return new
        # A merge patch (RBAC gives the operator patch, not update, on ConfigMaps): keys dropped
        # are set to null; the resourceVersion makes it fail (409) if another pass wrote first.
        before = (cm.get("data") or {}).keys()
        patch = {
            "metadata": {"resourceVersion": cm["metadata"].get("resourceVersion")},
            "data": {**{k: None for k in before if k not in data}, **data},
        }
        await self.client.patch(CONFIGMAPS, job.namespace, name, patch)
        return new
