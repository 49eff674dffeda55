"""The Python SDK: :class:`Client`, one set of methods for jobs on a cluster and on this machine.

A client is made for one target and does not change it::

    from t9k_jobs import Client

    local = Client.local()                                # runs under ./t9k-runs
    job = local.run("examples/generic-exchange/job.yaml")  # detached: returns once it started
    local.wait("gj", job.name, phase="Succeeded", timeout="5m")
    for line in local.logs("gj", job.name):
        print(line)                                       # [worker-0] rank 0 received from [1, 2]...

    with Client.cluster(namespace="team-a") as cluster:   # $KUBECONFIG or ~/.kube/config
        cluster.create("examples/pytorch-ddp/job.yaml")
        with cluster.logs("pj", "digits-ddp", follow=True) as lines:
            for line in lines:                            # every replica, until the job ends
                print(line)
        cluster.wait("pj", "digits-ddp")                   # raises JobEndedOtherwise if it failed

Methods return the API models of :mod:`t9k_jobs.api` (``GenericJob``, ``PyTorchTrainingJob``,
``DeepSpeedJob``, ``ColossalAIJob``, with ``.status``) and raise the errors of
:mod:`t9k_jobs.errors`, whose ``str()`` is the line ``t9k-jobs`` prints and whose
``exit_code`` is its exit status; the CLI's verbs are thin over these methods.

A ``kind`` is a kind's name (``PyTorchTrainingJob``), plural, short name (``pj``), in any case,
or a model class (``PyTorchTrainingJob``). Durations are seconds or strings like ``30s``,
``5m``, ``1h30m``.

The cluster client is synchronous for its callers; underneath, it runs the async REST client
(:mod:`t9k_jobs.cluster.verbs`) on an event loop in a thread of its own, which :meth:`close`
(or leaving a ``with`` block) stops. It is not meant to be shared by several threads at once.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union

from .api import Job, JobBase, ManifestError
from .frameworks import parse_job
from .api.common import TERMINAL_PHASES
from .errors import (
    InvalidJob,
    JobEndedOtherwise,
    JobsError,
    NotFound,
    NotSupported,
    UsageError,
    WaitTimeout,
)

T = TypeVar("T")
#: What names a kind: ``"pj"``, ``"PyTorchTrainingJob"``, ``"pytorchtrainingjobs"``, or the class.
KindLike = Union[str, type[JobBase]]
#: A manifest: a path (``-`` for standard input), a mapping, or a job model.
JobLike = Union[str, os.PathLike, dict, JobBase]
#: Seconds, or a duration string (``30s``, ``5m``, ``1h30m``).
Duration = Union[float, int, str, None]

#: Seconds one request to the API server may take by default (a silent server costs this long):
#: kubectl's TLS handshake limit, since kubectl itself sets no request timeout by default.
DEFAULT_REQUEST_TIMEOUT = 10.0
LOCAL_RUN_DIR = "t9k-jobs.local/run-dir"
LOCAL_PID = "t9k-jobs.local/runtime-pid"
LOCAL_PHASE = "t9k-jobs.local/phase"
ELASTIC_KINDS = ("PyTorchTrainingJob", "DeepSpeedJob")


def resolve_kind(kind: KindLike) -> str:
    """The kind ``kind`` names (``"pj"`` -> ``"PyTorchTrainingJob"``); raises :class:`UsageError`."""
    if isinstance(kind, type) and issubclass(kind, JobBase):
        return kind.KIND
    from .local.runs import resolve_kind as by_name

    return by_name(str(kind))


def seconds(value: Duration) -> float | None:
    """``value`` in seconds (None stays None); raises :class:`UsageError` for a bad duration."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < 0:
            raise UsageError(f"bad duration {value!r}: it must be zero or more")
        return float(value)
    from .local.runs import parse_duration

    return parse_duration(str(value))


def job_phase(job: JobBase) -> str:
    """The phase of a job returned by a client: ``Stopped`` for a local run whose runtime is gone
    before it finished (annotation ``t9k-jobs.local/phase``), else ``status.phase`` (``Pending``
    before the first status)."""
    notes = job.metadata.annotations or {}
    if LOCAL_PHASE in notes:
        return notes[LOCAL_PHASE]
    return job.status.phase if job.status is not None else "Pending"


def load_job(source: JobLike) -> tuple[Job, dict[str, Any], Path | None]:
    """``(job, manifest, path)`` of a manifest given as a path (YAML or JSON; ``-``: standard
    input), a mapping or a model; ``path`` is the file (None otherwise). Raises :class:`InvalidJob`
    with the lines ``t9k-jobs validate`` prints."""
    if isinstance(source, JobBase):
        manifest = source.dump()
        manifest.pop("status", None)
        return parse_job(manifest, "<job>"), manifest, None  # type: ignore[return-value]
    if isinstance(source, dict):
        try:
            return parse_job(source, "<dict>"), dict(source), None
        except ManifestError as exc:
            raise InvalidJob(exc.lines()) from None
    from .api.reading import ReadError, decode, parse_documents, read_source

    path = str(source)
    name = "<stdin>" if path == "-" else path
    try:
        docs = parse_documents(decode(read_source(path)))
        if len(docs) != 1:
            raise ManifestError([f"expected exactly one YAML document with a job, found {len(docs)}"], name)
        job = parse_job(docs[0], name)
    except ReadError as exc:
        raise InvalidJob([f"{name}: {exc}"]) from None
    except ManifestError as exc:
        raise InvalidJob(exc.lines()) from None
    return job, docs[0], None if path == "-" else Path(path)


@dataclass
class JobSummary:
    """One row of ``t9k-jobs get``: ``kind``, ``name``, ``namespace`` (None for a local run),
    ``phase`` (``Stopped`` for a local run whose runtime is gone before it finished), ``ready``
    (``"running/replicas"``), ``restarts``, ``age`` (``3m20s``), ``backoff``; ``wide``: the
    columns of ``-o wide`` (local: ``pid``, ``run_dir``; cluster: ``mode``); ``object``: the job
    as a dict, as ``-o yaml`` prints it; ``ref``: ``kind.group/name`` (``-o name``)."""

    kind: str
    name: str
    namespace: str | None
    phase: str
    ready: str
    restarts: int
    age: str
    backoff: int
    wide: dict[str, Any] = field(default_factory=dict)
    object: dict[str, Any] = field(default_factory=dict, repr=False)
    #: Makes ``object`` when it is first read (a local run's manifest is parsed only then: ``get``
    #: prints the rows of many runs without parsing any).
    loader: Callable[[], dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    @property
    def ref(self) -> str:
        from .show import ref

        return ref(self.kind, self.name)


def _summary_object(self: JobSummary) -> dict[str, Any]:
    value = self.__dict__.get("_object")
    if not value and self.__dict__.get("loader") is not None:
        value = self.__dict__["_object"] = self.loader()  # type: ignore[misc]
    return value if value is not None else {}


def _set_summary_object(self: JobSummary, value: dict[str, Any]) -> None:
    self.__dict__["_object"] = value


JobSummary.object = property(_summary_object, _set_summary_object)  # type: ignore[assignment,method-assign]


@dataclass
class Deleted:
    """What :meth:`Client.delete` did, as the lines ``t9k-jobs delete`` prints."""

    lines: list[str]

    def __str__(self) -> str:
        return "\n".join(self.lines)


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


class Client:
    """Jobs on one target: a cluster (:meth:`cluster`) or this machine's runs (:meth:`local`).

    Both have the same methods; :meth:`run` is local only, and local runs have no namespaces.
    ``target`` is ``"local"`` or ``"cluster"``; a cluster client's ``namespace`` is the one used
    when a method is given none.
    """

    target: str = ""
    namespace: str | None = None

    #: The methods whose arguments are checked (:func:`t9k_jobs.arguments.check_arguments`) before
    #: either target acts: a one-job verb without a name, or an argument of the wrong type, is a
    #: :class:`UsageError` here, whatever the target.
    CHECKED = ("create", "run", "get", "summaries", "describe", "wait", "logs", "delete", "pause", "resume", "scale")

    def __init__(self) -> None:
        raise TypeError("make a Client with Client.local(...) or Client.cluster(...)")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The one place every verb goes through, on every target: each target's own methods are
        # wrapped when its class is made, so no path reaches a runtime with an unchecked name.
        from .arguments import checked

        super().__init_subclass__(**kwargs)
        for verb in cls.CHECKED:
            method = cls.__dict__.get(verb)
            if method is not None and not getattr(method, "__t9k_checked__", False):
                setattr(cls, verb, checked(method))

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def local(cls, runs_dir: str | os.PathLike | None = None, run_dir: str | os.PathLike | None = None) -> Client:
        """A client for this machine's runs, found under ``runs_dir`` (default ``./t9k-runs``);
        with ``run_dir``, every method acts on the run in that directory.

        >>> Client.local().list()                            # doctest: +SKIP
        [GenericJob(...), PyTorchTrainingJob(...)]
        """
        from .arguments import check_arguments

        check_arguments("local", {"runs_dir": runs_dir, "run_dir": run_dir})
        return _LocalClient(Path(runs_dir) if runs_dir else None, Path(run_dir) if run_dir else None)

    @classmethod
    def cluster(
        cls,
        kubeconfig: str | os.PathLike | None = None,
        context: str | None = None,
        namespace: str | None = None,
        request_timeout: Duration = DEFAULT_REQUEST_TIMEOUT,
    ) -> Client:
        """A client for the cluster of ``kubeconfig`` (default ``$KUBECONFIG``, then
        ``~/.kube/config``; in a pod, its ServiceAccount) and ``context`` (default: the current
        one). ``namespace``: the default of every method (default: the context's, else
        ``default``). ``request_timeout``: the longest one request to the API server may take
        (seconds or a duration, kubectl's ``--request-timeout``; default
        :data:`DEFAULT_REQUEST_TIMEOUT`; ``0`` or None: no limit), so a server that accepts
        connections and never answers costs that long, not more; followed logs and watches are
        bounded by their silence instead. The kubeconfig is read now; the server is first
        contacted by a method.

        Raises :class:`UsageError` (not a file, no such context, a kubeconfig that is empty, not
        a mapping, without clusters, contexts or users that its context names; an argument of the
        wrong type), :class:`ClusterError` (no kubeconfig, unusable credentials). Close it with
        :meth:`close`, or use it in a ``with`` block.

        >>> with Client.cluster(namespace="team-a") as c:   # doctest: +SKIP
        ...     [j.name for j in c.list("pj")]
        ['digits-ddp']
        """
        from .arguments import check_arguments

        check_arguments(
            "cluster",
            {"kubeconfig": kubeconfig, "context": context, "namespace": namespace, "request_timeout": request_timeout},
        )
        limit = seconds(request_timeout)
        return _ClusterClient(kubeconfig, context, namespace, limit or None)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection (a cluster client); the client cannot be used afterwards."""

    # -- the verbs (documented here, done by the two targets) ----------------------------------

    def create(self, job: JobLike, namespace: str | None = None) -> Job:
        """Submit ``job`` (a path, ``-``, a mapping or a model), validated first: on a cluster,
        create it in ``namespace`` (default: its own ``metadata.namespace``, else the client's);
        locally, the same as :meth:`run`. Returns the job as created.

        Raises :class:`InvalidJob`, :class:`AlreadyExists`, :class:`NotFound` (no such
        namespace), :class:`UsageError` (``namespace`` differs from the manifest's),
        :class:`ClusterError`.

        >>> Client.cluster().create("examples/pytorch-ddp/job.yaml").name   # doctest: +SKIP
        'digits-ddp'
        """
        raise NotImplementedError

    def run(
        self,
        job: JobLike,
        run_dir: str | os.PathLike | None = None,
        gpus: str | None = None,
        watch: bool = True,
        allow_duplicate: bool = False,
    ) -> Job:
        """Local only: start ``job`` on this machine in the background (its own session: it
        survives the caller) and return it once its runtime has started, with annotations
        ``t9k-jobs.local/run-dir`` and ``t9k-jobs.local/runtime-pid``. ``run_dir``: where its
        logs and status go (default ``./t9k-runs/<name>-<time>``); ``gpus``: the GPUs replicas may
        get (``"0,1"``, ``"none"``; default: this machine's); ``watch``: apply the user's edits of
        the manifest file while it runs (the run keeps its own copy, which :meth:`pause`,
        :meth:`resume` and :meth:`scale` edit); ``allow_duplicate``: start it even though a run
        of the same job runs in the same runs dir.

        Raises :class:`InvalidJob`, :class:`UsageError` (cannot run here: more GPUs or replicas
        than this machine has, a run dir in use), :class:`AlreadyExists` (a run of this job runs
        in the same runs dir), :class:`NotSupported` on a cluster, :class:`JobsError` when the
        runtime did not start.

        >>> Client.local().run("examples/generic-exchange/job.yaml").name   # doctest: +SKIP
        'exchange'
        """
        raise NotSupported("run starts a job on this machine; on a cluster use create")

    def get(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """The job with its status. Raises :class:`NotFound`, :class:`InvalidJob` (a stored job
        whose spec does not validate), :class:`ClusterError`.

        >>> Client.local().get("gj", "exchange").status.phase   # doctest: +SKIP
        'Succeeded'
        """
        raise NotImplementedError

    def list(
        self, kind: KindLike | None = None, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[Job]:
        """Every job of ``kind`` (default: all four kinds) in ``namespace`` (default: the
        client's) or in all namespaces; locally, the newest run of each name. Jobs whose spec
        does not validate are left out (:meth:`summaries` shows them)."""
        return [s_job for s in self.summaries(kind, None, namespace, all_namespaces) if (s_job := _job_of(s))]

    def summaries(
        self,
        kind: KindLike | None = None,
        name: str | None = None,
        namespace: str | None = None,
        all_namespaces: bool = False,
    ) -> list[JobSummary]:
        """The rows ``t9k-jobs get`` prints (:class:`JobSummary`): one job when ``name`` is given
        (raises :class:`NotFound`), else every job of ``kind`` (default: all kinds)."""
        raise NotImplementedError

    def describe(self, kind: KindLike, name: str, namespace: str | None = None) -> str:
        """What ``t9k-jobs describe`` prints (lines joined by newlines): spec summary, why it is
        not Running, conditions, replicas, recent events. Raises :class:`NotFound`."""
        raise NotImplementedError

    def wait(
        self,
        kind: KindLike,
        name: str,
        phase: str = "Succeeded",
        timeout: Duration = None,
        namespace: str | None = None,
    ) -> Job:
        """Wait until the job's phase is ``phase`` (``Succeeded``, ``Failed`` or ``Running``, any
        case) and return it. ``timeout``: seconds or a duration (None: no limit).

        Raises :class:`JobEndedOtherwise` when it ends in another phase, is deleted or (locally)
        stopped, with the reason; :class:`WaitTimeout` when time runs out (on a cluster, every
        request of the wait is inside ``timeout``); :class:`NotFound`; :class:`UsageError` for
        another phase or a bad duration; :class:`JobsError` locally when the run's state cannot
        be told (``Unknown``: waiting would never end).

        >>> Client.local().wait("gj", "exchange", timeout="5m").status.phase   # doctest: +SKIP
        'Succeeded'
        """
        raise NotImplementedError

    def logs(
        self,
        kind: KindLike,
        name: str,
        replica_type: str | None = None,
        index: int | None = None,
        container: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        timestamps: bool = False,
        previous: bool = False,
        namespace: str | None = None,
    ) -> LogStream:
        """The job's log lines: every replica merged, each line prefixed with its replica
        (``[worker-1] ...``), or every replica of ``replica_type``, or one replica's
        (``replica_type`` and ``index``; its first container unless ``container``), without
        prefix. ``follow``: go on until the job has finished and every log is read, new and
        replaced replicas included; ``tail``: the last N lines (on a cluster, when following,
        per replica). Cluster only: ``timestamps`` (RFC 3339 before each line), ``previous``
        (the previous container of each pod).

        Raises :class:`NotFound` (job, replica type or container), :class:`UsageError`,
        :class:`NotSupported` (``timestamps``/``previous`` locally). A :class:`LogStream`:
        iterate over it; close it to stop following.

        >>> for line in Client.local().logs("gj", "exchange"):   # doctest: +SKIP
        ...     print(line)
        [worker-0] rank 0 received from [1, 2]
        """
        raise NotImplementedError

    def delete(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        purge: bool = False,
        timeout: Duration = None,
    ) -> Deleted:
        """Delete the job: on a cluster the object (its pods, Services, ConfigMaps and Secrets
        follow); locally, stop the run (SIGTERM to its runtime, which stops every replica
        gracefully; killed after ``timeout``, default the longest grace period + 15 s) and keep
        its run dir unless ``purge``. Only a runtime proven to be the run's is signalled
        (:mod:`t9k_jobs.local.ownership`). Raises :class:`NotFound`, :class:`NotSupported`
        (``purge``/``timeout`` on a cluster), :class:`JobsError` when a local run's runtime cannot
        be told (nothing is signalled or removed)."""
        raise NotImplementedError

    def pause(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """Pause the job (``spec.runMode.pause.enabled: true``): its replicas are stopped and not
        started again until :meth:`resume`. On a cluster, a patch of the job; locally, an edit of
        the manifest the run watches (kept as written but for that field), applied by the run
        within a second. A paused job stays so (no change). Raises :class:`NotFound`,
        :class:`JobsError` (a finished job; a local run not running), :class:`NotSupported` (a
        local run that watches no manifest)."""
        raise NotImplementedError

    def resume(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """Resume a paused job (``spec.runMode.pause.enabled: false``); a job not paused is left
        as it is. As :meth:`pause` otherwise."""
        raise NotImplementedError

    def scale(self, kind: KindLike, name: str, replicas: int, namespace: str | None = None) -> Job:
        """Set an elastic PyTorchTrainingJob's or DeepSpeedJob's ``spec.elastic.expectedReplicas``
        to ``replicas``. Raises :class:`UsageError` when the job is not elastic or ``replicas`` is
        outside ``[minReplicas, maxReplicas]``; otherwise as :meth:`pause`."""
        raise NotImplementedError


def _job_of(summary: JobSummary) -> Job | None:
    try:
        return parse_job(summary.object, f"{summary.kind}/{summary.name}")
    except (ManifestError, ValueError):
        return None


def _elastic_problem(job: Job, replicas: int) -> str | None:
    """Why ``job`` cannot be scaled to ``replicas``, or None."""
    if job.kind not in ELASTIC_KINDS:
        return (
            f"scale: {job.kind} has no elastic mode; only PyTorchTrainingJob and DeepSpeedJob scale "
            "(spec.elastic)"
        )
    elastic = getattr(job.spec, "elastic", None)
    if elastic is None or not elastic.is_enabled:
        return f"scale: {job.kind} {job.name} is not elastic (spec.elastic.enabled is not true)"
    low, high = elastic.min_replicas, elastic.max_replicas
    if replicas < (low or 0) or (high is not None and replicas > high):
        return (
            f"--replicas: {replicas} is outside {job.kind} {job.name}'s elastic range [{low}, {high}] "
            "(spec.elastic.minReplicas, maxReplicas)"
        )
    return None


def _wanted_phase(phase: str) -> str:
    from .local.runs import wait_phase

    return wait_phase(phase)


# ================================================================================ this machine


class _LocalClient(Client):
    """The local target: run dirs read and written by :mod:`t9k_jobs.local.runs`."""

    target = "local"

    def __init__(self, runs_dir: Path | None, run_dir: Path | None) -> None:  # noqa: D107
        self.runs_dir = runs_dir
        self.run_dir = run_dir

    def _find(self, kind: KindLike | None, name: str | None) -> Any:
        from .local.runs import find_run

        return find_run(resolve_kind(kind) if kind is not None else None, name, self.runs_dir, self.run_dir)

    def _no_namespace(self, namespace: str | None) -> None:
        if namespace is not None:
            raise NotSupported("-n/--namespace: local runs have no namespaces")

    @staticmethod
    def _job(run: Any) -> Job:
        try:
            return parse_job(run.to_object(), str(run.run_dir / "job.yaml"))
        except ManifestError as exc:
            raise InvalidJob(exc.lines()) from None

    @staticmethod
    def _summary(run: Any) -> JobSummary:
        row = run.summary()
        return JobSummary(
            kind=run.kind,
            name=run.name,
            namespace=None,
            phase=row["phase"],
            ready=row["ready"],
            restarts=row["restarts"],
            age=row["age"],
            backoff=row["backoff"],
            wide={"pid": row["pid"], "run_dir": row["run_dir"]},
            loader=run.to_object,
        )

    def create(self, job: JobLike, namespace: str | None = None) -> Job:
        self._no_namespace(namespace)
        return self.run(job)

    def run(
        self,
        job: JobLike,
        run_dir: str | os.PathLike | None = None,
        gpus: str | None = None,
        watch: bool = True,
        allow_duplicate: bool = False,
    ) -> Job:
        from .local.gpus import GpuInventory
        from .local.runner import RunDirError, cannot_run_reason, make_run_dir, new_default_run_dir
        from .local.runs import start_detached
        from .render import to_yaml

        inventory = None
        if gpus is not None:
            try:
                inventory = GpuInventory.declared(gpus)
            except ValueError as exc:
                raise UsageError(f"--gpus: {exc}") from None
        model, _manifest, path = load_job(job)
        reason = cannot_run_reason(model, inventory if inventory is not None else GpuInventory.discovered())
        if reason is not None:
            raise UsageError(reason)
        try:
            target = make_run_dir(Path(run_dir)) if run_dir is not None else new_default_run_dir(model)
        except RunDirError as exc:
            raise UsageError(str(exc)) from None
        extra = ([] if watch else ["--no-watch"]) + ([] if gpus is None else ["--gpus", gpus])
        extra += ["--allow-duplicate"] if allow_duplicate else []
        started = start_detached(
            path.resolve() if path is not None else None,
            to_yaml([model.dump()]) if path is None else None,
            target,
            extra,
        )
        return self._job(started)

    def get(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        self._no_namespace(namespace)
        return self._job(self._find(kind, name))

    def summaries(
        self,
        kind: KindLike | None = None,
        name: str | None = None,
        namespace: str | None = None,
        all_namespaces: bool = False,
    ) -> list[JobSummary]:
        from .local.runs import list_runs

        self._no_namespace(namespace)
        if all_namespaces:
            raise NotSupported("-A/--all-namespaces: local runs have no namespaces")
        kind_name = resolve_kind(kind) if kind is not None else None
        if self.run_dir is not None:
            runs = [self._find(kind_name, name)]
        elif name is not None:
            if kind_name is None:
                raise UsageError("a NAME needs a KIND: get KIND NAME")
            runs = list_runs(self.runs_dir, kind_name, name)  # the newest and every live one
            if not runs:
                runs = [self._find(kind_name, name)]  # raises NotFound
        else:
            runs = list_runs(self.runs_dir, kind_name)
        return [self._summary(r) for r in runs]

    def describe(self, kind: KindLike, name: str, namespace: str | None = None) -> str:
        from .local.runs import describe

        self._no_namespace(namespace)
        return "\n".join(describe(self._find(kind, name)))

    def wait(
        self,
        kind: KindLike,
        name: str,
        phase: str = "Succeeded",
        timeout: Duration = None,
        namespace: str | None = None,
    ) -> Job:
        from .local.runs import STOPPED, UNKNOWN, wait_for

        self._no_namespace(namespace)
        wanted = _wanted_phase(phase)
        limit = seconds(timeout)
        run = self._find(kind, name)
        result = wait_for(run, wanted, limit)
        if result.reached:
            return self._job(run)
        if result.phase == UNKNOWN:
            raise JobsError(result.message)
        if result.phase in TERMINAL_PHASES or result.phase == STOPPED:
            raise JobEndedOtherwise(result.message, result.phase)
        raise WaitTimeout(result.message, result.phase)

    def logs(
        self,
        kind: KindLike,
        name: str,
        replica_type: str | None = None,
        index: int | None = None,
        container: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        timestamps: bool = False,
        previous: bool = False,
        namespace: str | None = None,
    ) -> LogStream:
        from .local.runs import follow_logs, log_source

        self._no_namespace(namespace)
        if timestamps:
            raise NotSupported("--timestamps: local logs carry no timestamps (lines are kept as printed)")
        if previous:
            raise NotSupported(
                "--previous: a restarted local replica writes on in the same log, which logs shows whole"
            )
        run = self._find(kind, name)
        log_source(run, replica_type, index, container)  # raises for a replica type or container not in the job
        lines = follow_logs(run, replica_type, index, container, follow=follow, tail=tail)
        return LogStream(lines, lines.close)

    def delete(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        purge: bool = False,
        timeout: Duration = None,
    ) -> Deleted:
        from .local.runs import purge as purge_run
        from .local.runs import stop_run

        self._no_namespace(namespace)
        limit = seconds(timeout)
        run = self._find(kind, name)
        state = run.runtime()
        out = []
        if state.pid is not None:
            out.append(f"stopping {run.kind} {run.name} (runtime pid {state.pid})...")
        result = stop_run(run, limit)  # raises, signalling nothing, when the runtime cannot be told
        if not result.was_running:
            out.append(f"{run.kind} {run.name} is not running ({run.phase()}); nothing to stop")
        elif result.exited:
            out.append(f"{run.ref()} stopped in {result.seconds:.1f}s")
        else:
            out.append(f"{run.ref()} did not stop in time: killed after {result.seconds:.1f}s")
        if result.swept:
            out.append(f"killed {result.swept} leftover process(es) of the run")
        if purge:
            purge_run(run)
            out.append(f"removed {run.run_dir}")
        else:
            out.append(f"logs and status kept in {run.run_dir}")
        return Deleted(out)

    def _edit(self, kind: KindLike, name: str, namespace: str | None, verb: str, change: Callable[[Job], Any]) -> Job:
        from .local.runs import edit_spec

        self._no_namespace(namespace)
        run = self._find(kind, name)
        job = run.job
        if job is None:
            raise JobsError(f"{run.kind} {run.name}: its job.yaml does not validate; cannot {verb} it")
        phase = run.phase()
        if phase in TERMINAL_PHASES:
            raise JobsError(f"{run.kind} {run.name} has finished ({phase}): there is nothing to {verb}")
        edit = change(job)
        if edit is None:
            return self._job(run)
        path, value = edit
        return self._job(edit_spec(run, path, value, verb))

    def pause(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        return self._edit(kind, name, namespace, "pause", lambda j: None if j.run_mode.pause_enabled else (_PAUSE, True))

    def resume(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        return self._edit(
            kind, name, namespace, "resume", lambda j: (_PAUSE, False) if j.run_mode.pause_enabled else None
        )

    def scale(self, kind: KindLike, name: str, replicas: int, namespace: str | None = None) -> Job:
        def change(job: Job) -> Any:
            problem = _elastic_problem(job, replicas)
            if problem:
                raise UsageError(problem)
            if job.spec.elastic.expected_replicas == replicas:  # type: ignore[union-attr]
                return None
            return (["spec", "elastic", "expectedReplicas"], replicas)

        return self._edit(kind, name, namespace, "scale", change)


_PAUSE = ["spec", "runMode", "pause", "enabled"]


# ================================================================================ a cluster


class _Loop:
    """An event loop in a daemon thread; :meth:`call` runs a coroutine there and waits for it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="t9k-jobs-client", daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # interrupted (Ctrl-C): stop the request too
            raise

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


def _shutdown(loop: _Loop, holder: dict[str, Any]) -> None:
    """Close the connection and stop the loop (at :meth:`Client.close`, collection or exit)."""
    cluster = holder.pop("cluster", None)
    if cluster is not None and loop.thread.is_alive():
        try:
            asyncio.run_coroutine_threadsafe(cluster.close(), loop.loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
    loop.stop()


_END = object()


class _ClusterClient(Client):
    """The cluster target: :mod:`t9k_jobs.cluster.verbs` on a private event loop."""

    target = "cluster"

    def __init__(  # noqa: D107
        self, kubeconfig: Any, context: str | None, namespace: str | None, request_timeout: float | None
    ) -> None:
        from .cluster.verbs import connect

        self._loop = _Loop()
        self._holder: dict[str, Any] = {}
        self._finalizer = weakref.finalize(self, _shutdown, self._loop, self._holder)
        try:
            self._holder["cluster"] = self._loop.call(connect(kubeconfig, context, namespace, request_timeout))
        except BaseException:
            self._finalizer()
            raise
        self.namespace = self._holder["cluster"].namespace
        self.server = self._holder["cluster"].server

    @property
    def _cl(self) -> Any:
        cluster = self._holder.get("cluster")
        if cluster is None:
            raise JobsError("this client is closed")
        return cluster

    def close(self) -> None:
        self._finalizer()

    def _job(self, raw: dict[str, Any]) -> Job:
        try:
            return parse_job(raw, f"{raw.get('kind')}/{raw['metadata'].get('name')}")
        except ManifestError as exc:
            raise InvalidJob(exc.lines()) from None

    def create(self, job: JobLike, namespace: str | None = None) -> Job:
        from .cluster.verbs import create_job

        _model, manifest, _path = load_job(job)
        manifest = {k: v for k, v in manifest.items() if k != "status"}
        return self._job(self._loop.call(create_job(self._cl, manifest, namespace)))

    def get(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        from .cluster.verbs import get_job

        return self._job(self._loop.call(get_job(self._cl, resolve_kind(kind), name, namespace)))

    def summaries(
        self,
        kind: KindLike | None = None,
        name: str | None = None,
        namespace: str | None = None,
        all_namespaces: bool = False,
    ) -> list[JobSummary]:
        from .api import KINDS
        from .cluster.verbs import get_job, list_jobs, summary

        kind_name = resolve_kind(kind) if kind is not None else None
        if name is not None:
            if kind_name is None:
                raise UsageError("a NAME needs a KIND: get KIND NAME")
            if all_namespaces:
                raise UsageError("-A/--all-namespaces lists jobs; it cannot be combined with a NAME")
            raws = [self._loop.call(get_job(self._cl, kind_name, name, namespace))]
        else:
            kinds = [kind_name] if kind_name else list(KINDS)
            raws = self._loop.call(list_jobs(self._cl, kinds, namespace, all_namespaces))
        out = []
        for raw in raws:
            row = summary(raw)
            out.append(
                JobSummary(
                    kind=row["kind"],
                    name=row["name"],
                    namespace=row["namespace"],
                    phase=row["phase"],
                    ready=row["ready"],
                    restarts=row["restarts"],
                    age=row["age"],
                    backoff=row["backoff"],
                    wide={"mode": row["mode"]},
                    object=raw,
                )
            )
        return out

    def describe(self, kind: KindLike, name: str, namespace: str | None = None) -> str:
        from .cluster.verbs import describe_job

        return "\n".join(self._loop.call(describe_job(self._cl, resolve_kind(kind), name, namespace)))

    def wait(
        self,
        kind: KindLike,
        name: str,
        phase: str = "Succeeded",
        timeout: Duration = None,
        namespace: str | None = None,
    ) -> Job:
        from .cluster.verbs import wait_job

        wanted = _wanted_phase(phase)
        limit = seconds(timeout)
        return self._job(self._loop.call(wait_job(self._cl, resolve_kind(kind), name, wanted, limit, namespace)))

    def logs(
        self,
        kind: KindLike,
        name: str,
        replica_type: str | None = None,
        index: int | None = None,
        container: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        timestamps: bool = False,
        previous: bool = False,
        namespace: str | None = None,
    ) -> LogStream:
        from .cluster.verbs import LogOptions, open_logs

        options = LogOptions(replica_type, index, container, follow, tail, timestamps, previous)
        agen = self._loop.call(open_logs(self._cl, resolve_kind(kind), name, options, namespace))
        lines: queue.Queue[Any] = queue.Queue(maxsize=1000)

        async def pump() -> None:
            item: Any = _END
            try:
                async for line in agen:
                    while True:
                        try:
                            lines.put_nowait(line)
                            break
                        except queue.Full:
                            await asyncio.sleep(0.02)
            except BaseException as exc:  # noqa: BLE001 - handed to the reader (cancel included)
                item = exc
            finally:
                await agen.aclose()
            while True:
                try:
                    lines.put_nowait(item)
                    return
                except queue.Full:
                    if isinstance(item, asyncio.CancelledError):
                        return  # closed by the reader, who reads no more
                    await asyncio.sleep(0.02)

        future = asyncio.run_coroutine_threadsafe(pump(), self._loop.loop)

        def read() -> Iterator[str]:
            try:
                while True:
                    try:
                        item = lines.get(timeout=0.5)
                    except queue.Empty:
                        if future.done() and lines.empty():
                            return
                        continue
                    if item is _END or isinstance(item, asyncio.CancelledError):
                        return
                    if isinstance(item, BaseException):
                        raise item
                    yield item
            finally:
                future.cancel()

        return LogStream(read(), future.cancel)

    def delete(
        self,
        kind: KindLike,
        name: str,
        namespace: str | None = None,
        purge: bool = False,
        timeout: Duration = None,
    ) -> Deleted:
        from .cluster.verbs import delete_job
        from .show import ref

        if purge:
            raise NotSupported("--purge is for local runs; a cluster job's logs go with its pods")
        if timeout is not None:
            raise NotSupported("--timeout is for local runs; on a cluster, wait for the pods to go with kubectl wait")
        kind_name = resolve_kind(kind)
        self._loop.call(delete_job(self._cl, kind_name, name, namespace))
        return Deleted([f"{ref(kind_name, name)} deleted"])

    def _patch(
        self, kind: KindLike, name: str, namespace: str | None, verb: str, change: Callable[[Job], Any]
    ) -> Job:
        from .cluster.verbs import get_job, patch_job

        kind_name = resolve_kind(kind)
        job = self._job(self._loop.call(get_job(self._cl, kind_name, name, namespace)))
        phase = job.status.phase if job.status is not None else "Pending"
        if phase in TERMINAL_PHASES:
            raise JobsError(f"{kind_name} {name} has finished ({phase}): there is nothing to {verb}")
        body = change(job)
        if body is None:
            return job
        return self._job(self._loop.call(patch_job(self._cl, kind_name, name, body, namespace)))

    def pause(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        return self._patch(
            kind,
            name,
            namespace,
            "pause",
            lambda j: None if j.run_mode.pause_enabled else {"spec": {"runMode": {"pause": {"enabled": True}}}},
        )

    def resume(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        return self._patch(
            kind,
            name,
            namespace,
            "resume",
            lambda j: {"spec": {"runMode": {"pause": {"enabled": False}}}} if j.run_mode.pause_enabled else None,
        )

    def scale(self, kind: KindLike, name: str, replicas: int, namespace: str | None = None) -> Job:
        def change(job: Job) -> Any:
            problem = _elastic_problem(job, replicas)
            if problem:
                raise UsageError(problem)
            if job.spec.elastic.expected_replicas == replicas:  # type: ignore[union-attr]
                return None
            return {"spec": {"elastic": {"expectedReplicas": replicas}}}

        return self._patch(kind, name, namespace, "scale", change)


__all__ = ["Client", "Deleted", "JobSummary", "LogStream", "job_phase", "load_job", "resolve_kind"]
