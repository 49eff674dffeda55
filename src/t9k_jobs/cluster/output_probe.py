"""When each running replica of a cluster job last wrote to its log: the operator's input to the
progress deadline (issue 42; :mod:`t9k_jobs.engine.progress`).

Only jobs that carry ``t9k-jobs.io/progress-deadline-seconds`` and are Running are looked at.
For each of their pods that runs, the operator asks the log API for the last line of each running
container, with its timestamp: ``GET /api/v1/namespaces/NS/pods/NAME/log?container=C&tailLines=1
&timestamps=true&limitBytes=4096`` (the kubelet reads the end of the container's log file; at
most 4 KiB come back). The line's timestamp, written by the container runtime as it received the
line, is :attr:`~t9k_jobs.engine.ObservedPod.last_output`.

A pod is asked again only once :data:`MIN_INTERVAL` seconds have passed since it was last asked.
The engine asks to look again when the deadline would pass counted from the newest line, so a
job that prints costs about one request per running container per deadline period (its
replicas' containers / N requests a second), and a silent one is asked once more just before it
is judged (docs/benchmarks.md, "Progress deadline on a cluster").
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import replace
from datetime import datetime, timezone

from ..api import Job
from ..api.extensions import extensions
from ..engine import Observed, ObservedPod
from . import metrics
from .client import ApiError, KubeClient

log = logging.getLogger("t9k_jobs.controller")

#: Seconds before the same pod's log is asked again.
MIN_INTERVAL = 1.0
#: At most this many bytes of a container's last line come back.
LIMIT_BYTES = 4096
#: How long a log answer may take before the pod is left as it was last seen.
ANSWER_TIMEOUT = 10.0
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z ")


def line_time(line: str) -> float | None:
    """The seconds since the epoch of a log line the API gave with ``timestamps=true``
    (``2026-12-05T04:06:37.123456789Z text``: RFC 3339 with up to nanoseconds); ``None`` when it
    has none."""
    m = _STAMP.match(line)
    if m is None:
        return None
    whole = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    return whole + (float(f"0.{m.group(2)}") if m.group(2) else 0.0)


class OutputProbe:
    """The last log line of the running pods of jobs with a progress deadline, asked of the API
    server at most every :data:`MIN_INTERVAL` seconds per pod, remembered per job (by its key) and
    pod (by uid); :meth:`forget` drops a job's."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        #: job key -> pod uid -> (the newest line's time or None, when asked: time.monotonic()).
        self.seen: dict[object, dict[str, tuple[float | None, float]]] = {}

    def forget(self, key: object) -> None:
        self.seen.pop(key, None)

    async def fill(self, key: object, job: Job, observed: Observed) -> Observed:
        """``observed`` with :attr:`~t9k_jobs.engine.ObservedPod.last_output` set on the running
        pods of ``job`` when it has a progress deadline and is Running; as it is otherwise."""
        if extensions(job.metadata.annotations).progress_deadline is None or (
            job.status is None or job.status.phase != "Running"
        ):
            self.forget(key)
            return observed
        before = self.seen.get(key, {})
        now: dict[str, tuple[float | None, float]] = {}
        pods = dict(observed.pods)
        for name, pod in observed.pods.items():
            if pod.terminal or pod.deleting or pod.effective_phase != "Running":
                continue
            last, asked = before.get(pod.uid, (None, -MIN_INTERVAL - 1.0))
            if time.monotonic() - asked >= MIN_INTERVAL:
                newest = await self._last_line(job.namespace, pod)
                last, asked = (max(last or 0.0, newest) if newest is not None else last), time.monotonic()
            now[pod.uid] = (last, asked)
            pods[name] = replace(pod, last_output=last)
        self.seen[key] = now
        return replace(observed, pods=pods)

    async def _last_line(self, namespace: str, pod: ObservedPod) -> float | None:
        """The time of the newest last line among ``pod``'s running containers; ``None`` when none
        wrote one yet, or the API could not say (the pod just went: the next pass sees it gone)."""
        newest = None
        for c in pod.containers:
            if c.state != "Running":
                continue
            params = {"container": c.name, "tailLines": 1, "timestamps": "true", "limitBytes": LIMIT_BYTES}
            path = f"/api/v1/namespaces/{namespace}/pods/{pod.name}/log"
            try:
                async for line in self.client.stream_lines(path, params, idle_timeout=ANSWER_TIMEOUT):
                    when = line_time(line)
                    if when is not None:
                        newest = max(newest or 0.0, when)
            except (ApiError, OSError, TimeoutError) as exc:
                metrics.LOG_PROBES.labels(outcome="failed").inc()
                log.warning("cannot read the last line of %s/%s (%s): %s", pod.name, c.name, namespace, exc)
                continue
            metrics.LOG_PROBES.labels(outcome="read").inc()
        return newest
