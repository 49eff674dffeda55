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
- ``<pod>.attempt-<N>.<container>.log``: its last lines, each with the timestamp the log API gave.

At most :data:`BUDGET` bytes per job (the API server refuses an object over 1 MiB): the oldest
attempts are dropped first. The ConfigMap carries no child label, so the operator's child
informer does not see it; ``t9k-jobs logs`` and ``describe`` read it once the pods are gone
(:mod:`t9k_jobs.sdk.cluster_logs`).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from ..api import Job
from ..engine import Delete, ObservedPod, rfc3339
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

    async def keep(self, job: Job, deletes: list[Delete], pods: dict[str, ObservedPod]) -> None:
        """Read and keep the last lines of the pods ``deletes`` removes (not forced deletes: they
        were read when first deleted). Failures are logged, never raised: the deletes go on."""
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
        if not entries:
            return
        for _ in range(3):  # a conflict: another pass wrote first; read it again
            try:
                await self._store(job, entries)
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

    async def _store(self, job: Job, entries: list[tuple[dict[str, Any], str | None]]) -> None:
        name = name_of(job.name)
        try:
            cm: dict[str, Any] | None = await self.client.get(CONFIGMAPS, job.namespace, name)
        except ApiError as exc:
            if exc.status != 404:
                raise
            cm = None
        index = attempts(cm)
        data = {k: v for k, v in ((cm or {}).get("data") or {}).items() if k != INDEX}
        for entry, text in entries:
            if text is not None:
                key = f"{entry['replica']}.attempt-{entry['attempt']}.{entry['container']}.log"
                entry["key"] = key
                data[key] = text
            index = [e for e in index if e.get("key") is None or e.get("key") != entry.get("key")] + [entry]
        while index and sum(len(v.encode()) for v in data.values()) + len(json.dumps(index)) > BUDGET:
            dropped = index.pop(0)  # the oldest attempt goes first
            data.pop(dropped.get("key") or "", None)
        data[INDEX] = json.dumps(index, separators=(",", ":"))
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
        else:
            # A merge patch (RBAC gives the operator patch, not update, on ConfigMaps): keys dropped
            # are set to null; the resourceVersion makes it fail (409) if another pass wrote first.
            before = (cm.get("data") or {}).keys()
            patch = {
                "metadata": {"resourceVersion": cm["metadata"].get("resourceVersion")},
                "data": {**{k: None for k in before if k not in data}, **data},
            }
            await self.client.patch(CONFIGMAPS, job.namespace, name, patch)
