"""What the dashboard shows, read through the SDK's client (:class:`t9k_jobs.Client`), the same
one the CLI's verbs use, and its one job view (:class:`t9k_jobs.view.JobView`).

Every word about a job comes from :mod:`t9k_jobs.show`: the ``get`` row (:func:`~t9k_jobs.show.row`),
why it is not Running (:func:`~t9k_jobs.show.why`), ``describe``'s lines, the spec summary, each
replica's exit codes and reason. This module only turns them into JSON-ready mappings, and adds
what a page needs besides: the log sources to pick from, a timeline, the actions.

The client is synchronous (a cluster client is not meant for several threads at once): short
reads and the actions go through one shared client under a lock; each followed log opens a
client of its own (:meth:`JobSource.new_client`), so a long stream never holds the lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .. import show
from ..api.common import TERMINAL_PHASES
from ..client import ELASTIC_KINDS, Client, resolve_kind
from ..errors import UsageError
from ..view import STOPPED, JobView

#: Most transitions remembered per job for its timeline (the oldest go first).
TIMELINE_LIMIT = 200
#: Most jobs whose transitions are remembered (the least recently seen go first).
TRACKED_JOBS = 500


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
    """The jobs of one target, for the dashboard: ``new_client`` makes a client as the CLI's target
    options chose (a cluster, or this machine's runs); ``all_namespaces``: list every namespace's
    jobs (``-A``); ``allow_actions``: pause, resume, scale and delete are offered."""

    def __init__(
        self,
        new_client: Callable[[], Client],
        all_namespaces: bool = False,
        allow_actions: bool = False,
        tensorboard_url: str | None = None,
    ) -> None:
        self.new_client = new_client
        self.client = new_client()
        self.all_namespaces = all_namespaces
        self.allow_actions = allow_actions
        # ``--tensorboard-url``: where a job's TensorBoard is opened (checked by tensorboard_link).
        self.tensorboard_url = tensorboard_url
        self.timeline = Timeline()
        self._lock = threading.Lock()

    @property
    def target(self) -> str:
        return self.client.target

    def describe_target(self) -> str:
        """``this machine's runs under DIR`` or ``the cluster at URL, namespace N`` (all namespaces)."""
        if self.client.target == "local":
            from ..local.rundirs import runs_dir_default

            backend = self.client.backend
            if getattr(backend, "run_dir", None) is not None:
                return f"the local run in {backend.run_dir}"
            return f"this machine's runs under {getattr(backend, 'runs_dir', None) or runs_dir_default()}"
        where = "all namespaces" if self.all_namespaces else f"namespace {self.client.namespace}"
        return f"the cluster at {self.client.server}, {where}"

    def close(self) -> None:
        with self._lock:
            self.client.close()

    # -- reading

    def jobs(self) -> list[dict[str, Any]]:
        """The rows of the job list: what ``get -o wide`` shows, plus each job's page address."""
        with self._lock:
            views = self.client.backend.list(None, None, None, self.all_namespaces)
        now = time.time()
        rows = []
        for view in views:
            cells = show.row(view, now)
            rows.append(
                {
                    "kind": view.kind,
                    "short": show.short_name(view.kind),
                    "name": view.name,
                    "namespace": view.namespace,
                    "phase": cells["phase"],
                    "ready": cells["ready"],
                    "restarts": cells["restarts"],
                    "age": cells["age"],
                    "created": view.created,
                    "queue": cells["wide"].get("queue"),
                    "priority": cells["wide"].get("priority"),
                    "why": _why_shown(view),
                }
            )
        rows.sort(key=lambda r: (-(r["created"] or 0), r["kind"], r["name"]))
        return rows

    def view(self, key: JobKey) -> JobView:
        """The detailed view ``describe`` shows. Raises NotFound and the client's other errors."""
        with self._lock:
            return self.client.backend.get(key.kind, key.name, key.namespace, detail=True)

    def job(self, key: JobKey) -> dict[str, Any]:
        """Everything the job page shows, JSON-ready."""
        view = self.view(key)
        now = time.time()
        status = view.status
        cells = show.row(view, now)
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
        if view.events:
            events = [
                {
                    "when": show.rfc3339(ev.when) if ev.when else "-",
                    "age": show.human_age(now - ev.when) if ev.when else "-",
                    "type": ev.type,
                    "reason": ev.reason,
                    "object": ev.object,
                    "message": ev.message,
                }
                for ev in view.events
            ]
        else:
            events = [_local_event(line) for line in view.event_lines]
        job = view.job
        terminal = view.phase in TERMINAL_PHASES or view.phase == STOPPED
        return {
            "kind": view.kind,
            "short": show.short_name(view.kind),
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
            "created": show.rfc3339(view.created),
            "run_mode": show.run_mode(job),
            "queue": cells["wide"].get("queue"),
            "priority": cells["wide"].get("priority"),
            "run_dir": str(view.run_dir) if view.run_dir is not None else None,
            "pod_group": view.pod_group,
            "spec": [line.strip() for line in show.spec_lines(job, view.spec)],
            "conditions": conditions,
            "replicas": replicas,
            "events": events,
            "describe": show.describe(view, now),
            "timeline": self._timeline(key, view, nodes, now),
            "logs": _log_sources(view),
            "tensorboard": _tensorboard(view, self.tensorboard_url),
            "actions": self._actions(view),
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
                when = show.parse_time(value)
                if when is not None:
                    out.append({"when": when, "what": "job", "event": label})
            for c in status.conditions:
                when = show.parse_time(c.last_transition_time)
                if when is not None:
                    out.append({"when": when, "what": "job", "event": f"condition {c.type}={c.status} ({c.reason})"})
        for pod in view.pods:
            name = (pod.get("metadata") or {}).get("name", "?")
            when = show.parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
            if when is not None:
                out.append({"when": when, "what": name, "event": "pod created"})
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
                    when = show.parse_time(cond.get("lastTransitionTime"))
                    if when is not None:
                        node = nodes.get(name) or "-"
                        out.append({"when": when, "what": name, "event": f"scheduled on {node}"})
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                state = cs.get("state") or {}
                running = show.parse_time((state.get("running") or {}).get("startedAt"))
                if running is not None:
                    out.append({"when": running, "what": name, "event": f"container {cs.get('name')} running"})
                ended = state.get("terminated") or {}
                when = show.parse_time(ended.get("finishedAt"))
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
            entry["at"] = show.rfc3339(entry["when"])
        return out[-TIMELINE_LIMIT:]

    def _actions(self, view: JobView) -> dict[str, Any]:
        """Which actions the page offers: none unless ``--allow-actions``; pause/resume/scale only
        while the job has not finished; scale for elastic kinds, with their range."""
        if not self.allow_actions:
            return {"allowed": False}
        job = view.job
        live = view.phase not in TERMINAL_PHASES and view.phase != STOPPED
        paused = bool(job is not None and job.run_mode.pause_enabled)
        elastic = getattr(job.spec, "elastic", None) if job is not None else None
        scalable = bool(view.kind in ELASTIC_KINDS and elastic is not None and elastic.is_enabled)
        return {
            "allowed": True,
            "pause": live and not paused,
            "resume": live and paused,
            "scale": live and scalable,
            "min_replicas": elastic.min_replicas if scalable else None,
            "max_replicas": elastic.max_replicas if scalable else None,
            "expected_replicas": elastic.expected_replicas if scalable else None,
            "delete": True,
        }

    # -- logs

    def log_lines(
        self, key: JobKey, replica_type: str | None, index: int | None, container: str | None, follow: bool,
        tail: int | None,
    ) -> Iterator[str]:
        """The job's log lines through a client of its own (closed at the end): every replica merged
        with the ``[worker-1]`` prefix, one type's, or one replica's container; ``follow``: until the
        job has finished. Raises the client's errors (NotFound, UsageError) before the first line."""
        client = self.new_client()
        try:
            stream = client.logs(
                key.kind, key.name, replica_type, index, container, follow=follow, tail=tail,
                namespace=key.namespace,
            )
        except BaseException:
            client.close()
            raise
        return Lines(stream, client)

    # -- actions

    def act(self, key: JobKey, verb: str, replicas: int | None = None) -> str:
        """Pause, resume, scale or delete the job through the client's verbs, as the CLI does; the
        line to show. Raises UsageError for another verb and the client's errors."""
        if not self.allow_actions:
            raise UsageError("actions are off: start the dashboard with --allow-actions")
        ref = show.ref(key.kind, key.name)
        with self._lock:
            if verb == "pause":
                self.client.pause(key.kind, key.name, key.namespace)
                return f"{ref} paused: spec.runMode.pause.enabled is true"
            if verb == "resume":
                self.client.resume(key.kind, key.name, key.namespace)
                return f"{ref} resumed: spec.runMode.pause.enabled is false"
            if verb == "scale":
                if replicas is None:
                    raise UsageError("scale needs a number of replicas")
                self.client.scale(key.kind, key.name, replicas, key.namespace)
                return f"{ref} scaled: spec.elastic.expectedReplicas is {replicas}"
            if verb == "delete":
                return "; ".join(self.client.delete(key.kind, key.name, key.namespace).lines)
        raise UsageError(f"unknown action {verb!r}: use pause, resume, scale or delete")


class Lines(Iterator[str]):
    """A job's log lines read through a client of their own. :meth:`close` (from the thread that
    reads) ends the stream and closes the client; :meth:`interrupt` (from any thread) asks a
    followed stream to end: a cluster stream ends within half a second, a local one at its next
    line or when the job ends (the local reader cannot be woken from another thread)."""

    def __init__(self, stream: Any, client: Client) -> None:
        self.stream = stream
        self.client = client
        self._closed = False

    def __next__(self) -> str:
        return next(self.stream)

    def interrupt(self) -> None:
        try:
            self.stream.close()
        except (ValueError, RuntimeError):  # being read in another thread right now
            pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.interrupt()
        finally:
            self.client.close()


def _why_shown(view: JobView) -> str | None:
    """:func:`t9k_jobs.show.why`, where ``describe`` prints it (not for a Succeeded job)."""
    return show.why(view) if view.phase != "Succeeded" else None


def _replica(rs: Any, replica_type: str | None, nodes: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": rs.name,
        "type": replica_type,
        "phase": rs.phase,
        "restarts": rs.restart_count,
        "exit_code": show.exit_codes(rs),
        "reason": show.replica_reason(rs),
        "node": nodes.get(rs.name),
        "containers": [
            {"name": c.name, "state": c.state, "exit_code": c.exit_code, "reason": c.reason} for c in rs.containers
        ],
    }


def _local_event(line: str) -> dict[str, Any]:
    """A line of a local run's ``events.log`` (``HH:MM:SS Type Reason: message``) as an event."""
    parts = line.split(" ", 2)
    if len(parts) == 3 and parts[0].count(":") == 2 and ":" in parts[2]:
        reason, message = parts[2].split(":", 1)
        return {"when": parts[0], "age": parts[0], "type": parts[1], "reason": reason, "object": "", "message": message.strip()}
    return {"when": "-", "age": "-", "type": "", "reason": "", "object": "", "message": line}


def _log_sources(view: JobView) -> list[dict[str, Any]]:
    """What the log box can show: every replica merged, each replica type, each replica (each of
    its containers when it has several), from the job's replica groups."""
    out: list[dict[str, Any]] = [{"label": "all replicas", "type": None, "index": None, "container": None}]
    for group in show.groups(view.job):
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
    and ``url``, its link from ``--tensorboard-url`` (:func:`tensorboard_link`), ``None`` without
    the option; a local run has none (docs/decisions.md)."""
    spec = view.spec.get("tensorboardSpec") if isinstance(view.spec, dict) else None
    if not spec:
        return None
    status = view.status.tensorboard if view.status is not None else None
    note = (status.note or status.action) if status is not None else None
    where = f" in namespace {view.namespace}" if view.namespace else ""
    url = tensorboard_link(url_template, view.namespace or "", view.name) if url_template else None
    return {"object": f"TensorBoard {view.name}{where}", "note": note, "url": url}


#: The placeholders ``--tensorboard-url`` may hold.
TENSORBOARD_FIELDS = ("namespace", "name")


def check_tensorboard_url(template: str) -> str:
    """``--tensorboard-url`` as given, once checked: an ``http://`` or ``https://`` URL whose only
    ``{...}`` fields are ``{namespace}`` and ``{name}``. T9k documents no address for a TensorBoard
    (its console opens it), so the dashboard links where the user says. Raises ``ValueError`` with
    one line naming what is wrong."""
    import string
    from urllib.parse import urlsplit

    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise ValueError(f"--tensorboard-url: {template!r} is not a URL template ({exc})") from None
    unknown = sorted({f for f in fields if f not in TENSORBOARD_FIELDS})
    if unknown:
        raise ValueError(
            f"--tensorboard-url: unknown field {{{unknown[0]}}}; accepted: {{namespace}} and {{name}}"
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


__all__ = ["JobKey", "JobSource", "Lines", "Timeline"]
