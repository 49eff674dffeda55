"""What the dashboard shows, read through the SDK's async client (:class:`t9k_jobs.AsyncClient`)
in watching mode, and its one job view (:class:`t9k_jobs.sdk.view.JobView`).

Every word about a job comes from :mod:`t9k_jobs.sdk.present`: the ``get`` row (:func:`~t9k_jobs.sdk.present.row`),
why it is not Running (:func:`~t9k_jobs.sdk.present.why`), ``describe``'s lines, the spec summary, each
replica's exit codes and reason. This module turns them into JSON-ready mappings, and adds what a
page needs besides: the log sources to pick from, a timeline, the metric points, the actions.

Costs grow with changes, not with pages (issue 30): the client keeps the target's jobs in a cache
kept true by watching (inotify locally, informers on a cluster) and says when it changed; the job
list and each job's page are computed once per change and shared by every page showing them
(:meth:`JobSource.jobs`, :meth:`JobSource.job`); a job's metric points are read from its log once,
by one task, whatever the number of pages plotting them (:class:`MetricsHub`). Nothing here holds
a lock across a request to the API server or a wait for a process: one slow look or action never
holds up another (:class:`Actions` runs each action as a task of its own).

The dashboard answers for its scope only (:meth:`JobSource.key`): the namespace it was started
with (every namespace with ``-A``), or this machine's runs under its runs dir; a job named outside
it is not found, and nothing is read for it.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, TypedDict

from .. import words
from ..api.common import TERMINAL_PHASES
from ..changes import Changes
from ..errors import ClusterError, JobsError, NotFound, UsageError
from ..frameworks import framework_for
from ..sdk import present
from ..sdk.arguments import resolve_kind
from ..sdk.async_client import AsyncClient
from ..sdk.view import Deleted, Edited, JobView
from ..words import STOPPED
from .metrics import Series, as_json
from .sse import batched

#: Most transitions remembered per job for its timeline (the oldest go first).
TIMELINE_LIMIT = 200
#: Most jobs whose transitions are remembered (the least recently seen go first).
TRACKED_JOBS = 500
#: Seconds after which a job page's data is computed again though nothing changed (the ages in
#: ``describe``'s text).
REFRESH = 10.0
#: The actions a page may ask for; the most running at once; how many finished ones are kept.
ACTIONS = ("pause", "resume", "scale", "delete")
MAX_ACTIONS = 8
KEPT_ACTIONS = 200
#: Most jobs whose metric points are kept; seconds a running job's tracker reads on with no page.
TRACKED_METRICS = 64
METRICS_IDLE = 60.0


@dataclass(frozen=True)
class JobKey:
    """A job: its kind (resolved: ``GenericJob``), name and namespace (None locally)."""

    kind: str
    name: str
    namespace: str | None = None

    @classmethod
    def parse(cls, kind: str, name: str, namespace: str | None) -> JobKey:
        """Raises :class:`UsageError` for an unknown kind, an empty or overlong name."""
        if not name or len(name) > 253:
            raise UsageError("a job name has 1 to 253 characters")
        if namespace is not None and (not namespace or len(namespace) > 63):
            raise UsageError("a namespace has 1 to 63 characters")
        return cls(resolve_kind(kind), name, namespace or None)


class Timeline:
    """What the dashboard saw happen to jobs and their replicas, with when it saw it: phase
    changes and restarts (the status keeps counts, not times). Bounded: :data:`TIMELINE_LIMIT`
    entries per job, :data:`TRACKED_JOBS` jobs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[JobKey, dict[str, tuple[str, int]]] = {}
        self._entries: dict[JobKey, list[dict[str, Any]]] = {}

    def observe(self, key: JobKey, view: JobView, now: float) -> list[dict[str, Any]]:
        """Note what changed since the last look at ``view``; the job's entries, oldest first."""
        seen = {"job": (view.phase, 0)}
        status = view.status
        for task in status.tasks if status is not None else []:
            for rs in task.replicas:
                seen[rs.name] = (rs.phase, rs.restart_count)
        with self._lock:
            before = self._last.pop(key, None)
            self._last[key] = seen
            entries = self._entries.pop(key, [])
            self._entries[key] = entries
            for what, (phase, restarts) in seen.items():
                old = before.get(what) if before is not None else None
                if old is None and before is not None and what != "job":
                    entries.append({"when": now, "what": what, "event": f"appeared ({phase})"})
                elif old is not None and old[1] < restarts:
                    entries.append({"when": now, "what": what, "event": f"restarted (restart {restarts})"})
                if old is not None and old[0] != phase:
                    entries.append({"when": now, "what": what, "event": f"{old[0]} -> {phase}"})
            del entries[:-TIMELINE_LIMIT]
            while len(self._last) > TRACKED_JOBS:
                oldest = next(iter(self._last))
                self._last.pop(oldest)
                self._entries.pop(oldest, None)
            return list(entries)


class JobSource:
    """The jobs of one target, for the dashboard: ``client`` an :class:`~t9k_jobs.AsyncClient` made
    with ``watch=True`` (a cluster's namespace, or this machine's runs); ``all_namespaces``: the
    client watches every namespace (``-A``); ``allow_actions``: pause, resume, scale and delete are
    offered; ``tensorboard_url``: where a job's TensorBoard is opened (``--tensorboard-url``)."""

    def __init__(
        self,
        client: AsyncClient,
        all_namespaces: bool = False,
        allow_actions: bool = False,
        tensorboard_url: str | None = None,
    ) -> None:
        self.client = client
        self.all_namespaces = all_namespaces
        self.allow_actions = allow_actions
        self.tensorboard_url = tensorboard_url
        self.timeline = Timeline()
        self.metrics = MetricsHub(self)
        self.actions = Actions(self)
        self._list: tuple[Any, dict[str, Any]] | None = None
        self._list_lock = asyncio.Lock()
        self._rows: dict[tuple[str, str | None, str, str], tuple[JobView, dict[str, Any]]] = {}
        self._jobs: OrderedDict[JobKey, tuple[Any, JobPage]] = OrderedDict()
        self._job_locks: dict[JobKey, asyncio.Lock] = {}

    @property
    def target(self) -> str:
        return self.client.target

    def describe_target(self) -> str:
        """``this machine's runs under DIR`` or ``the cluster at URL, namespace N`` (all namespaces)."""
        if self.client.target == "local":
            if self.client.run_dir is not None:
                return f"the local run in {self.client.run_dir}"
            return f"this machine's runs under {self.client.runs_dir}"
        where = "all namespaces" if self.all_namespaces else f"namespace {self.client.namespace}"
        return f"the cluster at {self.client.server}, {where}"

    async def close(self) -> None:
        await self.metrics.close()
        await self.actions.close()
        await self.client.close()

    # -- scope

    def key(self, kind: str, name: str, namespace: str | None) -> JobKey:
        """The job a request names, inside this dashboard's scope. Raises :class:`UsageError` (an
        unknown kind, a bad name) and :class:`NotFound` for a job outside the scope: a namespace
        on a local dashboard, another namespace than its own without ``-A``."""
        key = JobKey.parse(kind, name, namespace)
        if self.client.target == "local":
            if key.namespace is not None:
                raise NotFound(f"{key.kind} {key.name!r} not found: this dashboard shows this machine's runs, which have no namespaces")
            return key
        own = self.client.namespace
        if self.all_namespaces:
            return JobKey(key.kind, key.name, key.namespace or own)
        if key.namespace not in (None, own):
            raise NotFound(f"{key.kind} {key.name!r} not found: this dashboard shows namespace {own} only")
        return JobKey(key.kind, key.name, own)

    # -- the job list

    async def version(self) -> int:
        return await self.client.version()

    async def wait(self, after: int, timeout: float | None) -> int:
        """The client's version once something changed after ``after`` (or ``timeout`` s passed)."""
        return await self.client.changes(after, timeout)

    async def jobs(self) -> dict[str, Any]:
        """``{"jobs": rows, "problem": ...}``: the rows of the job list, what ``get -o wide``
        shows (the age as ``created``, epoch seconds, which the page counts on), newest first, and
        what keeps the list from being complete (an informer refused, no inotify), or None.
        Computed once per change of the client's version and shared."""
        version = await self.client.version()
        problem = self.client.problem()
        cached = self._list
        if cached is not None and cached[0] == (version, problem):
            return cached[1]
        async with self._list_lock:
            version = await self.client.version()
            problem = self.client.problem()
            cached = self._list
            if cached is not None and cached[0] == (version, problem):
                return cached[1]
            views = await self.client.views(all_namespaces=self.all_namespaces)
            now = time.time()
            rows, kept = [], {}
            for view in views:
                ident = (view.kind, view.namespace, view.name, str(view.run_dir or ""))
                old = self._rows.get(ident)
                row = old[1] if old is not None and old[0] is view else self._row(view, now)
                kept[ident] = (view, row)
                rows.append({**row, "age": words.human_age(now - view.created) if view.created is not None else "-"})
            self._rows = kept
            rows.sort(key=lambda r: (-(r["created"] or 0), r["kind"], r["name"]))
            payload = {"jobs": rows, "problem": problem}
            self._list = ((version, problem), payload)
            return payload

    @staticmethod
    def _row(view: JobView, now: float) -> dict[str, Any]:
        cells = present.row(view, now)
        return {
            "kind": view.kind,
            "short": words.short_name(view.kind),
            "name": view.name,
            "namespace": view.namespace,
            "phase": cells["phase"],
            "ready": cells["ready"],
            "restarts": cells["restarts"],
            "created": view.created,
            "queue": cells["wide"].get("queue"),
            "priority": cells["wide"].get("priority"),
            "why": _why_shown(view),
        }

    # -- one job

    async def view(self, key: JobKey) -> JobView:
        """The detailed view ``describe`` shows. Raises NotFound and the client's other errors."""
        return await self.client.view(key.kind, key.name, key.namespace, detail=True)

    async def job(self, key: JobKey) -> JobPage:
        """Everything the job page shows, JSON-ready; computed once per change of the client's
        version (and every :data:`REFRESH` s, for the ages ``describe`` writes) and shared by the
        pages showing it."""
        stamp = (await self.client.version(), int(time.time() // REFRESH))
        cached = self._jobs.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        lock = self._job_locks.setdefault(key, asyncio.Lock())
        async with lock:
            cached = self._jobs.get(key)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            data = self._job_data(key, await self.view(key))
            self._jobs[key] = (stamp, data)
            self._jobs.move_to_end(key)
            while len(self._jobs) > TRACKED_JOBS:
                old, _ = self._jobs.popitem(last=False)
                self._job_locks.pop(old, None)
            return data

    def _job_data(self, key: JobKey, view: JobView) -> JobPage:
        now = time.time()
        status = view.status
        cells = present.row(view, now)
        nodes = {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in view.pods}
        replicas = []
        named = set()
        for task in status.tasks if status is not None else []:
            for rs in task.replicas:
                named.add(rs.name)
                replicas.append(_replica(rs, task.type, nodes))
        for rs in view.live_replicas:  # pods the status does not name yet (as describe lists them)
            if rs.name not in named:
                replicas.append(_replica(rs, None, nodes))
        conditions = [
            {
                "type": c.type,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "time": c.last_transition_time,
            }
            for c in (status.conditions if status is not None else [])
        ]
        events = [
            {
                "when": ev.when,
                "at": ev.at or (words.rfc3339(ev.when) if ev.when else "-"),
                "type": ev.type,
                "reason": ev.reason,
                "object": ev.object,
                "message": ev.message,
            }
            for ev in view.events
        ]
        job = view.job
        terminal = view.phase in TERMINAL_PHASES or view.phase == STOPPED
        return {
            "kind": view.kind,
            "short": words.short_name(view.kind),
            "name": view.name,
            "namespace": view.namespace,
            "target": view.target,
            "phase": view.phase,
            "terminal": terminal,
            "why": _why_shown(view),
            "ready": cells["ready"],
            "restarts": cells["restarts"],
            "backoff": cells["backoff"],
            "age": cells["age"],
            "created": words.rfc3339(view.created),
            "created_at": view.created,
            "run_mode": present.run_mode(job),
            "queue": cells["wide"].get("queue"),
            "priority": cells["wide"].get("priority"),
            "run_dir": str(view.run_dir) if view.run_dir is not None else None,
            "pod_group": view.pod_group,
            "spec": [line.strip() for line in present.spec_lines(job, view.spec)],
            "conditions": conditions,
            "replicas": replicas,
            "events": events,
            "describe": present.describe(view, now),
            "timeline": self._timeline(key, view, nodes, now),
            "logs": _log_sources(view),
            "tensorboard": _tensorboard(view, self.tensorboard_url),
            "actions": self._actions(view),
            "problem": self.client.problem(),
        }

    def _timeline(self, key: JobKey, view: JobView, nodes: dict[str, Any], now: float) -> list[dict[str, Any]]:
        """Created, started and completed (the status), each condition's change, the pods' own
        times on a cluster (created, scheduled, started, ended), and what the dashboard saw
        change; newest last."""
        out: list[dict[str, Any]] = []
        if view.created is not None:
            out.append({"when": view.created, "what": "job", "event": "created"})
        status = view.status
        if status is not None:
            for label, value in (("started", status.start_time), ("completed", status.completion_time)):
                when = words.parse_time(value)
                if when is not None:
                    out.append({"when": when, "what": "job", "event": label})
            for c in status.conditions:
                when = words.parse_time(c.last_transition_time)
                if when is not None:
                    out.append({"when": when, "what": "job", "event": f"condition {c.type}={c.status} ({c.reason})"})
        for pod in view.pods:
            name = (pod.get("metadata") or {}).get("name", "?")
            when = words.parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
            if when is not None:
                out.append({"when": when, "what": name, "event": "pod created"})
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
                    when = words.parse_time(cond.get("lastTransitionTime"))
                    if when is not None:
                        node = nodes.get(name) or "-"
                        out.append({"when": when, "what": name, "event": f"scheduled on {node}"})
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                state = cs.get("state") or {}
                running = words.parse_time((state.get("running") or {}).get("startedAt"))
                if running is not None:
                    out.append({"when": running, "what": name, "event": f"container {cs.get('name')} running"})
                ended = state.get("terminated") or {}
                when = words.parse_time(ended.get("finishedAt"))
                if when is not None:
                    out.append(
                        {
                            "when": when,
                            "what": name,
                            "event": f"container {cs.get('name')} ended: {ended.get('reason', '-')}, "
                            f"exit code {ended.get('exitCode', '-')}",
                        }
                    )
        out += self.timeline.observe(key, view, now)
        # By the second (status times have no fraction), then as listed: created before started.
        out.sort(key=lambda e: int(e["when"]))
        for entry in out:
            entry["at"] = words.rfc3339(entry["when"])
        return out[-TIMELINE_LIMIT:]

    def _actions(self, view: JobView) -> dict[str, Any]:
        """Which actions the page offers: none unless ``--allow-actions``; pause/resume/scale only
        while the job has not finished; scale while its elastic mode is on, with its range (the
        plug-in's :meth:`~t9k_jobs.frameworks.base.Framework.elastic_range`)."""
        if not self.allow_actions:
            return {"allowed": False}
        job = view.job
        live = view.phase not in TERMINAL_PHASES and view.phase != STOPPED
        paused = bool(job is not None and job.run_mode.pause_enabled)
        span = framework_for(job).elastic_range(job) if job is not None else None
        elastic = getattr(job.spec, "elastic", None) if job is not None and span is not None else None
        return {
            "allowed": True,
            "pause": live and not paused,
            "resume": live and paused,
            "scale": live and span is not None,
            "min_replicas": span[0] if span is not None else None,
            "max_replicas": span[1] if span is not None else None,
            "expected_replicas": elastic.expected_replicas if elastic is not None else None,
            "delete": True,
        }


class Actions:
    """Pause, resume, scale and delete, each a task of its own (one slow action never holds up a
    look or another action): :meth:`start` returns at once with the :class:`Action`, whose
    outcome :meth:`get` tells later. At most :data:`MAX_ACTIONS` run at once, one per job."""

    def __init__(self, source: JobSource) -> None:
        self.source = source
        self._ids = itertools.count(1)
        self.actions: OrderedDict[str, Action] = OrderedDict()

    def running(self) -> list[Action]:
        return [a for a in self.actions.values() if a.state == "running"]

    def start(self, key: JobKey, verb: str, replicas: int | None = None) -> Action:
        """Start ``verb`` on the job (a running action of that job is returned instead of a second
        one). Raises UsageError (actions off, an unknown verb, scale without replicas),
        :class:`JobsError` when :data:`MAX_ACTIONS` already run."""
        if not self.source.allow_actions:
            raise UsageError("actions are off: start the dashboard with --allow-actions")
        if verb not in ACTIONS:
            raise UsageError(f"unknown action {verb!r}: use pause, resume, scale or delete")
        if verb == "scale" and replicas is None:
            raise UsageError("scale needs a number of replicas")
        for action in self.running():
            if action.key == key:
                return action
        if len(self.running()) >= MAX_ACTIONS:
            raise JobsError(f"{MAX_ACTIONS} actions are running already: wait for one to finish")
        action = Action(str(next(self._ids)), key, verb, replicas, time.time())
        action.task = asyncio.get_running_loop().create_task(self._run(action))
        self.actions[action.id] = action
        while len(self.actions) > KEPT_ACTIONS:
            oldest = next(iter(self.actions))
            if self.actions[oldest].state == "running":
                break
            self.actions.popitem(last=False)
        return action

    def get(self, action_id: str) -> Action:
        action = self.actions.get(action_id)
        if action is None:
            raise NotFound(f"no action {action_id!r} (it finished long ago, or never started)")
        return action

    async def _run(self, action: Action) -> None:
        client, key = self.source.client, action.key
        try:
            if action.verb == "delete":
                done: Deleted | Edited = await client.delete(key.kind, key.name, key.namespace)
            else:
                done = await client.edit(key.kind, key.name, action.verb, action.replicas, key.namespace)
            action.message = "; ".join(done.lines)
            action.state = "done"
        except JobsError as exc:
            action.state, action.error, action.status = "failed", str(exc), http_status(exc)
        except Exception as exc:  # noqa: BLE001 - said on the page, the dashboard goes on
            action.state, action.error, action.status = "failed", f"{type(exc).__name__}: {exc}", 500
        finally:
            action.ended = time.time()
            action.done.set()

    async def close(self) -> None:
        tasks = [a.task for a in self.actions.values() if a.task is not None and not a.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(eq=False)
class Action:
    """One action: ``verb`` on the job ``key``; ``state`` running, done or failed, with the line
    the CLI prints (``message``) or the error and its HTTP status."""

    id: str
    key: JobKey
    verb: str
    replicas: int | None
    started: float
    state: str = "running"
    message: str | None = None
    error: str | None = None
    status: int = 200
    ended: float | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    done: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    def as_json(self) -> dict[str, Any]:
        return {
            "action": self.id, "verb": self.verb, "state": self.state, "message": self.message,
            "error": self.error, "job": {"kind": self.key.kind, "name": self.key.name, "namespace": self.key.namespace},
        }


def http_status(exc: JobsError) -> int:
    """The HTTP status of a verb's error: 404 not found, 400 a bad request, 502 the cluster did not
    answer as it should, 409 anything else (a finished job cannot be paused...)."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, UsageError):
        return 400
    return 502 if isinstance(exc, ClusterError) else 409


class MetricsTracker:
    """A job's metric points, read from its merged log once, by one task, as it grows; shared by
    every page that plots them. ``points`` (JSON-ready), ``dropped``, ``done`` (the log is
    complete), ``problem`` (why it could not be read)."""

    def __init__(self, source: JobSource, key: JobKey) -> None:
        self.source = source
        self.key = key
        self.series = Series()
        self.points: list[dict[str, Any]] = []
        self.done = False
        self.problem: str | None = None
        self.changes = Changes()
        self.readers = 0
        self.task: asyncio.Task[None] | None = None
        self.idle_since: float | None = None

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        key = self.key
        try:
            lines = await self.source.client.logs(key.kind, key.name, follow=True, namespace=key.namespace)
            async for batch in batched(lines):
                found = [p for line in batch for p in self.series.add_line(line)]
                if found:
                    self.points += as_json(found)
                    self.changes.bump()
        except asyncio.CancelledError:
            raise
        except JobsError as exc:
            self.problem = str(exc)
        except Exception as exc:  # noqa: BLE001 - said on the page
            self.problem = f"{type(exc).__name__}: {exc}"
        self.done = True
        self.changes.bump()

    async def follow(self) -> AsyncIterator[tuple[str, Any]]:
        """``("points", {...})`` with every point so far (at once, even none: the page knows its
        stream is open and shows "no metrics yet" without waiting for a keepalive), then each new
        batch; ``("end", {...})`` once the log is complete."""
        self.readers += 1
        self.idle_since = None
        self.start()
        sent, first = 0, True
        seen = -1
        try:
            while True:
                if first or len(self.points) > sent:
                    first = False
                    yield "points", {"points": self.points[sent:], "dropped": self.series.dropped}
                    sent = len(self.points)
                if self.done:
                    yield "end", {"dropped": self.series.dropped, "problem": self.problem}
                    return
                seen = await self.changes.wait(max(seen, self.changes.version), None)
        finally:
            self.readers -= 1
            if self.readers == 0:
                self.idle_since = time.monotonic()


class MetricsHub:
    """One :class:`MetricsTracker` per job shown, the least recently used dropped beyond
    :data:`TRACKED_METRICS`; a tracker of a job still running that no page reads for
    :data:`METRICS_IDLE` s stops reading its log (it starts again from the log's start when a page
    comes back)."""

    def __init__(self, source: JobSource) -> None:
        self.source = source
        self.trackers: OrderedDict[JobKey, MetricsTracker] = OrderedDict()

    def follow(self, key: JobKey) -> AsyncIterator[tuple[str, Any]]:
        self._reap()
        tracker = self.trackers.get(key)
        if tracker is None:
            tracker = self.trackers[key] = MetricsTracker(self.source, key)
        self.trackers.move_to_end(key)
        while len(self.trackers) > TRACKED_METRICS:
            old_key = next(iter(self.trackers))
            if self.trackers[old_key].readers:
                break
            old = self.trackers.pop(old_key)
            if old.task is not None:
                old.task.cancel()
        return tracker.follow()

    def _reap(self) -> None:
        now = time.monotonic()
        for key, tracker in list(self.trackers.items()):
            if not tracker.done and tracker.readers == 0 and tracker.idle_since is not None and now - tracker.idle_since > METRICS_IDLE:
                if tracker.task is not None:
                    tracker.task.cancel()
                del self.trackers[key]

    async def close(self) -> None:
        tasks = [t.task for t in self.trackers.values() if t.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class JobPage(TypedDict):
    """What the job page (``/api/job/KIND/NAME``, and its server-sent updates) says of one job:
    its identity and ``get``'s cells, the spec summary, conditions, replicas, events, ``describe``'s
    lines, the timeline, log sources, TensorBoard, the actions offered and the source's problem."""

    kind: str
    short: str
    name: str
    namespace: str | None
    target: str
    phase: str
    terminal: bool
    why: str | None
    ready: str
    restarts: int
    backoff: int
    age: str
    created: str
    created_at: float | None
    run_mode: str
    queue: str | None
    priority: str | None
    run_dir: str | None
    pod_group: str | None
    spec: list[str]
    conditions: list[dict[str, Any]]
    replicas: list[dict[str, Any]]
    events: list[dict[str, Any]]
    describe: list[str]
    timeline: list[dict[str, Any]]
    logs: list[dict[str, Any]]
    tensorboard: dict[str, Any] | None
    actions: dict[str, Any]
    problem: str | None


def _why_shown(view: JobView) -> str | None:
    """:func:`t9k_jobs.sdk.present.why`, where ``describe`` prints it (not for a Succeeded job)."""
    return present.why(view) if view.phase != "Succeeded" else None


def _replica(rs: Any, replica_type: str | None, nodes: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": rs.name,
        "type": replica_type,
        "phase": rs.phase,
        "restarts": rs.restart_count,
        "exit_code": present.exit_codes(rs),
        "reason": present.replica_reason(rs),
        "node": nodes.get(rs.name),
        "containers": [
            {"name": c.name, "state": c.state, "exit_code": c.exit_code, "reason": c.reason} for c in rs.containers
        ],
    }


def _log_sources(view: JobView) -> list[dict[str, Any]]:
    """What the log box can show: every replica merged, each replica type, each replica (each of
    its containers when it has several), from the job's replica groups."""
    out: list[dict[str, Any]] = [{"label": "all replicas", "type": None, "index": None, "container": None}]
    for group in present.groups(view.job):
        out.append({"label": f"{group.type} (all)", "type": group.type, "index": None, "container": None})
        containers = [c.get("name") for c in (group.template.get("spec") or {}).get("containers") or []]
        for index in range(min(group.replicas, 256)):
            if len(containers) > 1:
                for name in containers:
                    label = f"{group.type}-{index} / {name}"
                    out.append({"label": label, "type": group.type, "index": index, "container": name})
            else:
                out.append({"label": f"{group.type}-{index}", "type": group.type, "index": index, "container": None})
    return out


def _tensorboard(view: JobView, url_template: str | None = None) -> dict[str, Any] | None:
    """The job's TensorBoard when ``spec.tensorboardSpec`` is set: the ``tensorstack.dev/v1beta1``
    TensorBoard named like the job (frameworks/base.py), what ``status.tensorboard`` says of it,
    and ``url``, its link: from ``--tensorboard-url`` (:func:`tensorboard_link`), else the one a
    local run serves while it runs (``t9k-jobs run`` starts TensorBoard on a loopback port), else
    ``None``."""
    spec = view.spec.get("tensorboardSpec") if isinstance(view.spec, dict) else None
    if not spec:
        return None
    status = view.status.tensorboard if view.status is not None else None
    note = (status.note or status.action) if status is not None else None
    where = f" in namespace {view.namespace}" if view.namespace else ""
    if url_template:
        url = tensorboard_link(url_template, view.namespace or "", view.name)
    else:  # a local run serves its own while it runs (on this machine's loopback)
        url = view.tensorboard_url
    return {"object": f"TensorBoard {view.name}{where}", "note": note, "url": url}


#: The placeholders ``--tensorboard-url`` may hold.
TENSORBOARD_FIELDS = ("namespace", "name")


def check_tensorboard_url(template: str) -> str:
    """``--tensorboard-url`` as given, once checked: an ``http://`` or ``https://`` URL whose only
    ``{...}`` fields are ``{namespace}`` and ``{name}``, with no conversion or format spec
    (``{name!r}``, ``{name:>99}``). T9k documents no address for a TensorBoard
    (its console opens it), so the dashboard links where the user says. Raises ``ValueError`` with
    one line naming what is wrong."""
    import string
    from urllib.parse import urlsplit

    try:
        fields = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"--tensorboard-url: {template!r} is not a URL template ({exc})") from None
    unknown = sorted({f for f, _, _ in fields if f not in TENSORBOARD_FIELDS})
    if unknown:
        raise ValueError(
            f"--tensorboard-url: unknown field {{{unknown[0]}}}; accepted: {{namespace}} and {{name}}"
        )
    for name, spec, conv in fields:
        if spec or conv:
            written = "{" + name + (f"!{conv}" if conv else "") + (f":{spec}" if spec else "") + "}"
            raise ValueError(
                f"--tensorboard-url: {written} has a conversion or format spec; write {{{name}}} alone"
            )
    parts = urlsplit(template)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--tensorboard-url: {template!r} is not an http:// or https:// URL")
    return template


def tensorboard_link(template: str, namespace: str, name: str) -> str:
    """``template`` (checked by :func:`check_tensorboard_url`) with ``{namespace}`` and ``{name}``
    filled in, each percent-encoded so that a name cannot change the URL's shape."""
    from urllib.parse import quote

    return template.format(namespace=quote(namespace, safe=""), name=quote(name, safe=""))


__all__ = ["Action", "Actions", "JobKey", "JobPage", "JobSource", "MetricsHub", "MetricsTracker", "Timeline", "http_status"]
