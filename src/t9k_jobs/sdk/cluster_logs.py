"""``logs`` against a cluster: a job's log lines from its pods' ``log`` subresource (issue 34 split
it out of :mod:`t9k_jobs.sdk.cluster_api`, whose connection, job reads and pod listing it uses).

Logs are always asked with timestamps (so that several replicas merge in time order and a broken
stream resumes where it stopped), which are cut off unless asked for. Every failure is one of
:mod:`t9k_jobs.errors` with the one line the CLI prints.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..addressing import replica_name, replica_prefix
from ..api.common import TERMINAL_PHASES
from ..cluster import last_words
from ..cluster.client import CONFIGMAPS, JOB_RESOURCES, PODS, ApiError
from ..errors import ClusterError, JobsError, NotFound, UsageError
from ..frameworks.base import LABEL_REPLICA_TYPE
from ..loglines import last_state
from ..words import short
from .cluster_api import (
    UNREACHABLE_LIMIT,
    Cluster,
    Patience,
    _network_errors,
    controlled_by,
    get_job,
    job_pods,
    parse,
    phase_of,
)
from .view import LogOptions

#: Seconds between two looks at a job and its pods while following logs.
POLL = 1.0
#: Seconds the log streams of pods still running get once their job has finished.
DRAIN = 5.0



def _ts_key(stamp: str) -> tuple[str, int]:
    """A sortable key of an RFC 3339 timestamp with up to nanoseconds (``...:05.12Z``)."""
    base, _, frac = stamp.rstrip("Z").partition(".")
    digits = "".join(ch for ch in frac if ch.isdigit())[:9]
    return base, int(digits.ljust(9, "0") or 0)


def _split(line: str) -> tuple[str, str]:
    """``(timestamp, text)`` of a log line read with ``timestamps=true``; of a line that rewrites
    itself with carriage returns (a progress bar), the text is its last state, as ``job.log``
    shows a local one (:func:`t9k_jobs.loglines.last_state`)."""
    stamp, _, text = line.partition(" ")
    return stamp, last_state(text)


def _started(pod: dict[str, Any], container: str) -> bool:
    """Whether ``container`` of ``pod`` has run (running or terminated): its log can be read."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed") and any(
        cs.get("name") == container for cs in status.get("containerStatuses") or []
    ):
        return True
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") == container:
            state = cs.get("state") or {}
            return "running" in state or "terminated" in state or bool((cs.get("lastState") or {}).get("terminated"))
    return False


#: What a followed log looks at once a second: ``(the job as the server has it, None when it is
#: gone; the job's pods)``. By default two requests; a watching backend answers from its caches.
Look = Callable[[], Awaitable[tuple[dict[str, Any] | None, list[dict[str, Any]]]]]


async def open_logs(
    cl: Cluster,
    kind: str,
    name: str,
    options: LogOptions,
    namespace: str | None = None,
    look: Look | None = None,
    pause: Callable[[float], Awaitable[Any]] | None = None,
    require_pods: bool = False,
) -> AsyncIterator[str]:
    """Check what is asked for and return an async iterator of the job's log lines (no newline):
    every replica merged, each line prefixed ``[worker-1] `` like the local ``job.log``, or one
    type's replicas, or one replica's container (no prefix).

    ``look`` (default: a GET of the job and a list of its pods) is how a followed log learns of
    new pods and the job's end; ``pause(seconds)`` how it waits between two looks (default a
    sleep; a watching backend wakes it at the next change instead). ``require_pods``: a log that is
    not followed raises :class:`NotFound` when the job has no pod (of the type asked for), as
    ``kubectl logs`` fails for a workload without pods, instead of printing nothing.

    Raises :class:`NotFound` (no such job, replica type or container), :class:`UsageError`
    (``index`` without ``replica_type``, ``previous`` with ``follow``); the iterator raises
    :class:`NotFound` (one replica whose pod is not there), :class:`ClusterError`."""
    ns = namespace or cl.namespace
    o = options
    o.check()  # the options alone, before a request
    if o.previous and o.follow:
        raise UsageError("--previous cannot be combined with -f: a previous container's log is complete")
    if look is not None:
        raw, _ = await look()
        if raw is None:
            raise NotFound(f"{JOB_RESOURCES[kind].kind} {name!r} not found in namespace {ns!r}")
    else:
        raw = await get_job(cl, kind, name, ns)
    o.check(parse(raw))  # over the job's replica types and containers
    pod_name = None  # one replica's log
    if o.replica_type is not None and o.index is not None:
        pod_name = replica_name(name, o.replica_type, o.index)
    logs = _Logs(cl, kind, name, ns, o, pod_name, look, pause, require_pods)
    if o.follow:
        queue: asyncio.Queue[str | BaseException | None] = asyncio.Queue(maxsize=10000)
        return _follow(logs, queue)
    return _read(logs)


@dataclass
class _Logs:
    """What ``logs`` reads, checked: the job, its namespace, the options and, with an index, the
    one replica's pod (``pod_name``); :func:`_read` and :func:`_follow` read it."""

    cl: Cluster
    kind: str
    name: str
    ns: str
    o: LogOptions
    pod_name: str | None
    look_hook: Look | None = None
    pause_hook: Callable[[float], Awaitable[Any]] | None = None
    require_pods: bool = False

    async def look(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """``(the job, None when gone; its wanted pods)``, through ``look_hook`` when given."""
        if self.look_hook is not None:
            raw, pods = await self.look_hook()
            return raw, [p for p in pods if self.wanted(p)]
        try:
            raw = await get_job(self.cl, self.kind, self.name, self.ns)
        except NotFound:
            return None, []
        return raw, await self.pods()

    async def pause(self, seconds: float) -> None:
        if self.pause_hook is not None:
            await self.pause_hook(seconds)
        else:
            await asyncio.sleep(seconds)

    @property
    def single(self) -> bool:
        """One replica's log: its lines carry no ``[replica]`` prefix."""
        return self.pod_name is not None

    async def pods(self) -> list[dict[str, Any]]:
        """The job's pods whose logs are wanted."""
        return [p for p in await job_pods(self.cl, self.kind, self.name, self.ns) if self.wanted(p)]

    def wanted(self, pod: dict[str, Any]) -> bool:
        if not controlled_by(pod, self.kind, self.name):  # a bare pod with the job's labels
            return False
        labels = pod["metadata"].get("labels") or {}
        if self.o.replica_type is not None and labels.get(LABEL_REPLICA_TYPE) != self.o.replica_type:
            return False
        return self.pod_name is None or pod["metadata"]["name"] == self.pod_name

    def containers(self, pod: dict[str, Any]) -> list[str]:
        names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
        if self.single:
            return [self.o.container] if self.o.container is not None else names[:1]
        return names

    def show(self, pod: dict[str, Any], container: str, stamp: str, text: str) -> str:
        body = f"{stamp} {text}" if self.o.timestamps else text
        if self.single:
            return body
        several = len((pod.get("spec") or {}).get("containers") or []) > 1
        tag = replica_prefix(self.name, pod["metadata"]["name"], container if several else None)
        return f"[{tag}] {body}"

    def path(self, pod: dict[str, Any]) -> str:
        return PODS.path(self.ns, pod["metadata"]["name"], "log")


async def _read(logs: _Logs) -> AsyncIterator[str]:
    """The logs as they are now, merged in time order (the last ``o.tail`` lines of that)."""
    cl, o, show, single = logs.cl, logs.o, logs.show, logs.single
    pods = (await logs.look())[1] if logs.look_hook is not None else await logs.pods()
    if not pods:
        kept = await _kept(logs)
        if kept:
            for line in kept:
                yield line
            return
    if single and not pods:
        raise NotFound(f"{logs.kind} {logs.name} has no pod {logs.pod_name} (not created yet, or deleted)")
    if not pods and logs.require_pods:
        of = f" of type {o.replica_type}" if o.replica_type is not None else ""
        raise NotFound(
            f"{logs.kind} {logs.name} has no pods{of}, so no log to show: they are not created yet, or "
            "were deleted (a finished job's clean-up, a pause)"
        )
    entries: list[tuple[tuple[str, int], int, str]] = []
    seq = 0
    for pod in pods:
        for container in logs.containers(pod):
            params: dict[str, Any] = {"container": container, "timestamps": True}
            if o.tail is not None:
                params["tailLines"] = o.tail
            if o.previous:
                params["previous"] = True
            try:
                async for line in cl.kube.stream_lines(logs.path(pod), params, idle_timeout=60):
                    stamp, text = _split(line)
                    entries.append((_ts_key(stamp), seq, show(pod, container, stamp, text)))
                    seq += 1
            except ApiError as exc:
                if single:
                    raise ClusterError(f"{pod['metadata']['name']}: {short(exc.message, 300)}") from None
                continue  # a replica that has not started yet: nothing to show
            except _network_errors() as exc:
                raise cl.unreachable(exc) from None
    entries.sort(key=lambda e: (e[0], e[1]))
    lines = [e[2] for e in entries]
    if o.tail is not None:
        lines = lines[-o.tail :] if o.tail > 0 else []
    for line in lines:
        yield line


async def _kept(logs: _Logs) -> list[str]:
    """The lines the operator kept of the job's deleted pods (:mod:`t9k_jobs.cluster.last_words`)
    that the options select, merged in time order, after one line that says so; none when it kept
    none (or the ConfigMap cannot be read)."""
    o = logs.o
    try:
        cm = await logs.cl.kube.get(CONFIGMAPS, logs.ns, last_words.name_of(logs.name))
    except ApiError:
        return []
    except _network_errors() as exc:
        raise logs.cl.unreachable(exc) from None
    data = cm.get("data") or {}
    chosen = []
    for e in last_words.attempts(cm):
        pod = str(e.get("replica", ""))
        if logs.pod_name is not None and pod != logs.pod_name:
            continue
        if o.replica_type is not None and not pod.startswith(f"{logs.name}-{o.replica_type}-"):
            continue
        if o.container is not None and e.get("container") != o.container:
            continue
        chosen.append(e)
    if not chosen:
        return []
    containers: dict[str, set[str]] = {}
    for e in chosen:
        containers.setdefault(str(e["replica"]), set()).add(str(e.get("container")))
    entries: list[tuple[tuple[str, int], int, str]] = []
    for e in chosen:
        pod, container = str(e["replica"]), str(e.get("container"))
        for line in str(data.get(str(e.get("key")), "")).splitlines():
            stamp, text = _split(line)
            body = f"{stamp} {text}" if o.timestamps else text
            if not logs.single:
                tag = replica_prefix(logs.name, pod, container if len(containers[pod]) > 1 else None)
                body = f"[{tag}] {body}"
            entries.append((_ts_key(stamp), len(entries), body))
    entries.sort(key=lambda x: (x[0], x[1]))
    lines = [x[2] for x in entries]
    if o.tail is not None:
        lines = lines[-o.tail :] if o.tail > 0 else []
    ends = "; ".join(
        f"{e['replica']} attempt {e.get('attempt', 0)}"
        + (f" exit code {e['exitCode']}" if e.get("exitCode") is not None else "")
        + (f" ({e['reason']})" if e.get("reason") else "")
        + f", deleted {e.get('deleted', '?')} ({e.get('why', '?')})"
        + (f": {e['note']}" if e.get("note") else "")
        for e in chosen
    )
    note = (f"[t9k-jobs] the pods are gone: the last lines the operator kept of each as it deleted it "
            f"(ConfigMap {last_words.name_of(logs.name)}): {ends}")  # fmt: skip
    return [note, *lines]


@dataclass
class _Stream:
    """One container's followed log: its task, the timestamp of the last line read (a restarted
    request skips what it already gave), how often it was started, and whether it is done."""

    pod: dict[str, Any]
    container: str
    task: asyncio.Task[str] | None = None
    last: tuple[str, int] | None = None
    starts: int = 0
    done: bool = False


#: How often one container's log request is started again after it broke or ended early.
MAX_STARTS = 30


def _terminated(pod: dict[str, Any], container: str) -> bool:
    """Whether ``pod``'s status shows ``container`` ended (its log is complete)."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    return any(
        cs.get("name") == container and "terminated" in (cs.get("state") or {})
        for cs in status.get("containerStatuses") or []
    )


async def _follow(logs: _Logs, queue: asyncio.Queue[str | BaseException | None]) -> AsyncIterator[str]:
    """Follow every wanted pod's containers as they start, until the job has finished (or is
    deleted) and the streams are drained (those of pods still running get :data:`DRAIN` s).

    A request that breaks, or ends while the pod's status still shows its container running, is
    started again from the second of its last line (lines already given are skipped)."""
    cl, o = logs.cl, logs.o
    streams: dict[tuple[str, str], _Stream] = {}
    loop = asyncio.get_running_loop()

    async def read(st: _Stream, tail: int | None) -> str:
        """One log request; ``"ended"`` (the server closed it), ``"gone"`` (no such pod any more)
        or ``"broken"`` (an error: worth another try)."""
        params: dict[str, Any] = {"container": st.container, "timestamps": True, "follow": True}
        given = st.last  # lines up to this one were given by an earlier request
        if given is not None:
            params["sinceTime"] = f"{given[0]}Z"  # whole seconds: the lines of that second come again
        elif tail is not None:
            params["tailLines"] = tail
        try:
            async for line in cl.kube.stream_lines(logs.path(st.pod), params):
                stamp, text = _split(line)
                key = _ts_key(stamp)
                if given is not None and key <= given:
                    continue
                st.last = key
                await queue.put(logs.show(st.pod, st.container, stamp, text))
            return "ended"
        except ApiError as exc:
            return "gone" if exc.status == 404 else "broken"
        except _network_errors():
            return "broken"

    def start(st: _Stream, tail: int | None) -> None:
        st.starts += 1
        st.task = loop.create_task(read(st, tail))

    async def watch() -> None:
        first = True
        ended_at: float | None = None
        patience = Patience(UNREACHABLE_LIMIT)
        try:
            while True:
                try:
                    raw, pods = await logs.look()
                    gone = raw is None
                    patience.ok()
                except JobsError as exc:
                    # The server restarts (refused, 503), is overloaded (429) or fails for a while
                    # (5xx): the streams wait, so do we, for a minute without an answer.
                    await patience.failed(exc)
                    continue
                live = {p["metadata"].get("uid", ""): p for p in pods}
                if first and not pods and raw is not None and phase_of(raw) in TERMINAL_PHASES:
                    for line in await _kept(logs):  # finished, its pods deleted: what was kept
                        await queue.put(line)
                    break
                for pod in pods:
                    for container in logs.containers(pod):
                        key = (pod["metadata"].get("uid", ""), container)
                        if key not in streams and _started(pod, container):
                            streams[key] = _Stream(pod, container)
                            start(streams[key], o.tail if first else None)
                first = False
                for (uid, container), st in streams.items():
                    if st.done or st.task is None or not st.task.done():
                        continue
                    result = st.task.result()
                    pod = live.get(uid)
                    if result == "gone" or pod is None or st.starts >= MAX_STARTS:
                        st.done = True
                    elif result == "ended" and _terminated(pod, container):
                        st.done = True
                    else:  # broken, or ended while its container runs: read on (once per look)
                        st.pod = pod
                        start(st, None)
                active = [st for st in streams.values() if not st.done]
                finished = gone or (raw is not None and phase_of(raw) in TERMINAL_PHASES)
                if finished:
                    ended_at = ended_at if ended_at is not None else loop.time()
                    if not active:
                        break
                    if loop.time() - ended_at >= DRAIN:
                        break
                await logs.pause(POLL if not finished else 0.2)
            for st in streams.values():
                if st.task is not None and not st.task.done():
                    st.task.cancel()
            await asyncio.gather(*(st.task for st in streams.values() if st.task), return_exceptions=True)
            await queue.put(None)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the reader
            await queue.put(exc)

    watcher = loop.create_task(watch())
    try:
        while True:
            item = await queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        watcher.cancel()
        tasks = [st.task for st in streams.values() if st.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(watcher, *tasks, return_exceptions=True)


__all__ = ["DRAIN", "POLL", "Look", "open_logs"]
