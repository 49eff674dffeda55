"""The one job view both backends return, the other shapes they share (issue 23), and what the
Client returns besides views: :class:`JobSummary` (a ``get`` row), :class:`Deleted`, :class:`Edited`.

A backend (:mod:`t9k_jobs.sdk.local` for this machine's runs, :mod:`t9k_jobs.sdk.cluster`
for a cluster) reads a job and returns a :class:`JobView`: what every verb shows about it, with
nothing said yet. The presenting (the ``get`` row, ``why``, ``describe``, the wait messages) is
written once over this view, in :mod:`t9k_jobs.sdk.present`. Facts only one target has are fields the
other leaves empty: a local run's directory and runtime, a cluster job's pods, PodGroup and Events.

No I/O here beyond what a backend hands in as a loader (a local run's manifest is parsed only
when its spec is first read, so ``get`` over many runs parses none).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .. import words
from ..addressing import replica_name
from ..api import Job, JobStatus
from ..api.common import ReplicaStatus
from ..errors import NotFound, UsageError
from ..frameworks import framework_for


@dataclass
class Event:
    """One event of a job, on either target: ``when`` (epoch seconds, None when unknown),
    ``type`` (Normal, Warning), ``reason``, ``object`` (``pod/NAME``; ``""`` locally) and
    ``message``.

    A cluster's are the Events of the job and its pods. A local run's are the lines of its
    ``events.log`` (:meth:`local`): ``at`` is the time of day the runtime wrote
    (``HH:MM:SS``, the file keeps no date, so ``when`` is None) and ``line`` the line as written,
    which ``describe`` shows; a line that is not an event (a message's second line) is an event
    with only that ``message``, ``at`` None."""

    when: float | None
    type: str
    reason: str
    object: str
    message: str
    at: str | None = None
    line: str | None = None

    @classmethod
    def local(cls, line: str) -> Event:
        """The event of a line of a local run's ``events.log``: ``HH:MM:SS Type Reason: message``
        (as :meth:`t9k_jobs.local.runtime.LocalRunner._event` writes it)."""
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0].count(":") == 2 and ":" in parts[2]:
            reason, message = parts[2].split(":", 1)
            return cls(None, parts[1], reason, "", message.strip(), at=parts[0], line=line)
        return cls(None, "", "", "", line, line=line)


@dataclass(eq=False)
class JobView:
    """A job as one backend sees it now.

    Both targets: ``target`` (``"local"`` or ``"cluster"``), ``kind``, ``name``, ``namespace``
    (None for a local run), ``phase`` (the phase shown: a local run adds :data:`~t9k_jobs.words.STOPPED` and
    :data:`~t9k_jobs.words.UNKNOWN`; ``Pending`` before the first status), ``status`` (None before the first, or
    unreadable), ``created`` (epoch seconds, None when unknown), ``replicas`` (how many the job
    has), ``running`` (how many run now), the typed ``job`` and its raw ``spec`` (read through
    ``load_job`` and ``load_spec`` when first asked for; ``job`` is None when the spec does not
    validate) and ``object`` (the job as ``-o yaml`` prints it, through ``load_object``).

    A local run: ``run_dir``, ``pid`` (its runtime's while it provably runs), ``runtime_reason``
    (why its runtime's state cannot be told), ``unknown_reason`` (why its phase is
    :data:`~t9k_jobs.words.UNKNOWN`), ``tensorboard_url`` (where its TensorBoard is served while
    the run runs: :mod:`t9k_jobs.local.tensorboard`).

    A cluster job: ``pods`` (its pods as the API server returns them, being deleted included),
    ``live_replicas`` (the pods not being deleted, as replica statuses), what its native gang's
    ``scheduling.k8s.io/v1beta1`` PodGroup and pods say (``pod_group``: the PodGroup's line,
    ``gang``: why the gang waits, ``preempted``: ``preempted by higher priority at <time>``; each
    None when there is nothing to say: :mod:`t9k_jobs.sdk.gang_why`). These are read only for
    ``describe`` (``detailed``); the preemption also without.

    ``events``: the job's events (:class:`Event`), oldest first, read only for ``describe``
    (``detailed``): a cluster job's and its pods' Events, the last lines of a local run's
    ``events.log``.

    ``source``: what the backend needs to act on this job again (a local run, a server object).
    """

    target: str
    kind: str
    name: str
    namespace: str | None
    phase: str
    status: JobStatus | None
    created: float | None
    replicas: int
    running: int
    load_job: Callable[[], Job | None] = field(repr=False)
    load_spec: Callable[[], dict[str, Any]] = field(repr=False)
    load_object: Callable[[], dict[str, Any]] = field(repr=False)
    source: Any = field(default=None, repr=False)
    run_dir: Path | None = None
    pid: int | None = None
    runtime_reason: str | None = None
    unknown_reason: str | None = None
    detailed: bool = False
    tensorboard_url: str | None = None
    #: A local run whose runtime stopped before the job finished: why, as the runtime said it
    #: (a full disk, a signal), None when it could not (SIGKILL).
    stop_reason: str | None = None
    pods: list[dict[str, Any]] = field(default_factory=list, repr=False)
    live_replicas: list[ReplicaStatus] = field(default_factory=list, repr=False)
    pod_group: str | None = None
    gang: str | None = None
    preempted: str | None = None
    events: list[Event] = field(default_factory=list, repr=False)
    #: Where the replicas were when the job made no progress (issue 42), read only for
    #: ``describe``: ``(what, top frames)`` per dump, ``what`` like ``train-worker-1 attempt 0
    #: (stacks/train-worker-1.attempt-0.txt)``, the newest dumps last.
    stacks: list[tuple[str, list[str]]] = field(default_factory=list, repr=False)
    #: A cluster job's replica pods the operator deleted, each container's end as it kept it
    #: (:mod:`t9k_jobs.cluster.last_words`: replica, attempt, container, exitCode, reason, why,
    #: deleted), oldest first; read only for ``describe``.
    ended: list[dict[str, Any]] = field(default_factory=list, repr=False)
    #: What the job's attempts that ended without finishing cost, by why
    #: (:func:`t9k_jobs.engine.cost.add`'s totals: local ``lost.json``, a cluster job's
    #: last-words ConfigMap), ``None`` when none was lost or not read; read only for ``describe``.
    lost: dict[str, Any] | None = field(default=None, repr=False)
    #: A queued cluster job's place in its Kueue queue ("position 3 of 7 in LocalQueue team-a
    #: (ClusterQueue c)": :mod:`t9k_jobs.sdk.queue_position`), ``None`` when not queued or not told.
    queue_position: str | None = None

    @cached_property
    def job(self) -> Job | None:
        return self.load_job()

    @cached_property
    def spec(self) -> dict[str, Any]:
        return self.load_spec()

    @cached_property
    def object(self) -> dict[str, Any]:
        return self.load_object()


@dataclass
class LogOptions:
    """What ``logs`` reads. ``replica_type``/``index``: one type, or one replica (then lines carry
    no prefix); ``container``: with ``index``, that container (default: the first); ``follow``:
    go on until the job has finished and every stream is drained, following new and replaced
    replicas; ``tail``: the last N lines (of the merged log; on a cluster when following, of each
    replica); ``timestamps``: keep each line's RFC 3339 timestamp (cluster only); ``previous``:
    the previous container of each pod (cluster only)."""

    replica_type: str | None = None
    index: int | None = None
    container: str | None = None
    follow: bool = False
    tail: int | None = None
    timestamps: bool = False
    previous: bool = False

    def check(self, job: Job | None = None) -> None:
        """Check these options: the one rule of both backends' ``logs`` (the Client's and the
        dashboard's), before any line is read.

        First the options alone: :class:`UsageError` for ``index`` without ``replica_type``
        (``--index needs --type``) and ``container`` without ``index``. Then, given ``job`` (None:
        not read yet, or a spec that does not validate, when only the files or pods can say),
        over its replica groups (elastic counts applied): :class:`NotFound` for a replica type it
        does not have, or a container that type's pods do not have, naming what it has. A
        replica's index is not checked here: a local run keeps the log of a replica scaled away,
        a cluster says whether the pod is there when it reads it."""
        if self.index is not None and self.replica_type is None:
            raise UsageError("--index needs --type")
        if self.container is not None and self.index is None:
            raise UsageError("--container needs --type and --index")
        if job is None or self.replica_type is None:
            return

        groups = list(framework_for(job).groups(job))
        types = [g.type for g in groups]
        if self.replica_type not in types:
            raise NotFound(
                f"{job.kind} {job.name} has no replica type {self.replica_type!r}; it has {', '.join(types)}"
            )
        if self.container is not None and self.index is not None:
            group = next(g for g in groups if g.type == self.replica_type)
            containers = (group.template.get("spec") or {}).get("containers") or []
            names = [str(c.get("name", "")) for c in containers]
            if self.container not in names:
                pod = replica_name(job.name, self.replica_type, self.index)
                raise NotFound(f"{pod} has no container {self.container!r}; it has {', '.join(names)}")


class LogStream(Iterator[str]):
    """Log lines (str, without the newline) as they come; iterate over it. :meth:`close` stops a
    followed stream early (so does leaving a ``with`` block); it ends by itself when the job has
    finished and every replica's log is read."""

    def __init__(self, lines: Iterator[str], close: Callable[[], None] | None = None) -> None:
        self._lines = lines
        self._close = close

    def __iter__(self) -> LogStream:
        return self

    def __next__(self) -> str:
        return next(self._lines)

    def close(self) -> None:
        """Stop reading: followed streams are closed, no more lines come."""
        if self._close is not None:
            self._close()
            self._close = None
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> LogStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ----------------------------------------------------------------------------- what the Client returns besides views


@dataclass
class JobSummary:
    """One row of ``t9k-jobs get``: ``kind``, ``name``, ``namespace`` (None for a local run),
    ``phase`` (``Stopped`` for a local run whose runtime is gone before it finished), ``ready``
    (``"running/replicas"``), ``restarts``, ``age`` (``3m20s``), ``backoff``; ``wide``: the
    columns of ``-o wide`` (local: ``pid``, ``run_dir``; cluster: ``mode``, ``queue``,
    ``priority``); ``queue``/``priority``: the job's ``spec.scheduler.t9kScheduler`` on a cluster
    (the LocalQueue it waits in where Kueue is installed; ``None`` without one, and for a local run);
    ``object``: the job as a dict, as ``-o yaml`` prints it; ``ref``: ``kind.group/name`` (``-o name``)."""

    kind: str
    name: str
    namespace: str | None
    phase: str
    ready: str
    restarts: int
    age: str
    backoff: int
    wide: dict[str, Any] = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    #: Makes ``object`` when it is first read (a local run's manifest is parsed only then: ``get``
    #: prints the rows of many runs without parsing any).
    loader: Callable[[], dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    _object: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def object(self) -> dict[str, Any]:
        """The job as a dict, as ``-o yaml`` prints it (made by ``loader`` when first read)."""
        if not self._object and self.loader is not None:
            self._object = self.loader()
        return self._object if self._object is not None else {}

    @object.setter
    def object(self, value: dict[str, Any]) -> None:
        self._object = value

    @property
    def ref(self) -> str:
        return words.ref(self.kind, self.name)


@dataclass
class Deleted:
    """What :meth:`Client.delete` did, as the lines ``t9k-jobs delete`` prints."""

    lines: list[str]

    def __str__(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Edited:
    """What :meth:`AsyncClient.pause`, :meth:`~AsyncClient.resume` and :meth:`~AsyncClient.scale`
    did: ``lines`` (what the CLI prints) and the job's ``view`` afterwards."""

    lines: list[str]
    view: JobView

    def __str__(self) -> str:
        return "\n".join(self.lines)


#: About how many bytes a log download (``open_raw_log``) hands over at a time.
DOWNLOAD_BLOCK = 1 << 20


async def log_chunks(lines: AsyncIterator[str], block: int = DOWNLOAD_BLOCK) -> AsyncIterator[bytes]:
    """``lines`` as bytes, newline-ended, in chunks of about ``block`` bytes (a log download, both
    backends'); ``lines`` is closed once read, or when the download stops early."""
    held: list[bytes] = []
    size = 0
    try:
        async for line in lines:
            data = line.encode("utf-8", "replace") + b"\n"
            held.append(data)
            size += len(data)
            if size >= block:
                yield b"".join(held)
                held, size = [], 0
        if held:
            yield b"".join(held)
    finally:
        close = getattr(lines, "aclose", None)
        if close is not None:
            await close()


#: What a backend's ``watch`` asks of each view of the job (None: it was deleted): whether waiting is over.
Done = Callable[[JobView | None], bool]
#: What a backend's ``watch`` returns: the last view of the job (None: deleted) and whether ``done`` said yes.
Watched = tuple[JobView | None, bool]

__all__ = [
    "DOWNLOAD_BLOCK", "Deleted", "Done", "Edited", "Event", "JobSummary", "JobView", "LogOptions", "LogStream",
    "Watched", "log_chunks",
]
