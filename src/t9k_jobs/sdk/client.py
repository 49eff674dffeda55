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
(:mod:`t9k_jobs.sdk.cluster_api`) on an event loop in a thread of its own, which :meth:`close`
(or leaving a ``with`` block) stops. It is not meant to be shared by several threads at once.
"""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from ..api import Job, JobBase, ManifestError, read_manifest
from ..api.common import TERMINAL_PHASES
from ..errors import InvalidJob, JobEndedOtherwise, JobsError, NotSupported, UsageError, WaitTimeout
from ..frameworks import parse_job
from ..words import STOPPED, UNKNOWN
from . import present as show
from .arguments import Duration, KindLike, check_arguments, checked, resolve_kind, seconds, wait_phase
from .backend import Backend, OverBackend, Runner
from .edits import edit_of, edited_line
from .view import Deleted, Edited, JobSummary, JobView, LogOptions, LogStream

if TYPE_CHECKING:
    from ..local.rundir import RunOptions

#: A manifest: a path (``-`` for standard input), a mapping, or a job model.
JobLike = Union[str, os.PathLike, dict, JobBase]

#: Seconds one request to the API server may take by default (a silent server costs this long):
#: kubectl's TLS handshake limit, since kubectl itself sets no request timeout by default.
DEFAULT_REQUEST_TIMEOUT = 10.0


# ----------------------------------------------------------------------------- arguments


def default_target(environ: Any = None) -> str:
    """The target a client or a verb with no target option acts on: ``"cluster"`` when a
    kubeconfig is set (``$KUBECONFIG``), ``"local"`` (this machine's runs) otherwise; the CLI's
    rule (docs/decisions.md, "Day-two verbs: which target")."""
    env = os.environ if environ is None else environ
    return "cluster" if env.get("KUBECONFIG") else "local"


def job_phase(job: JobBase) -> str:
    """The phase of a job returned by a client: ``Stopped`` for a local run whose runtime is gone
    before it finished (annotation ``t9k-jobs.local/phase``), else ``status.phase`` (``Pending``
    before the first status)."""
    from ..local.rundir import LOCAL_PHASE  # lazy: keeps the local run dirs out of a cluster client

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
    path = str(source)
    try:
        manifest, name = read_manifest(path)
        job = parse_job(manifest, name)
    except ManifestError as exc:
        raise InvalidJob(exc.lines()) from None
    return job, manifest, None if path == "-" else Path(path)


class Client(OverBackend):
    """Jobs on one target: a cluster (:meth:`cluster`) or this machine's runs (:meth:`local`).

    Both have the same methods; :meth:`run` is local only, and local runs have no namespaces.
    ``target`` is ``"local"`` or ``"cluster"``; a cluster client's ``namespace`` is the one used
    when a method is given none.

    ``Client()`` chooses its target as the CLI does with no target option
    (:func:`default_target`): the cluster of ``$KUBECONFIG`` when it is set, this machine's runs
    otherwise. ``Client(backend)`` uses any :class:`~t9k_jobs.sdk.backend.Backend`
    (:class:`TypeError` for anything else).

    Every verb is ``@checked``: its arguments are checked
    (:func:`t9k_jobs.sdk.arguments.check_arguments`) before the backend acts, so a one-job verb
    without a name, or an argument of the wrong type, is a :class:`UsageError` here, whatever the
    target.
    """

    def __init__(self, backend: Backend | None = None) -> None:
        if backend is None:
            backend = (Client.cluster() if default_target() == "cluster" else Client.local()).backend
        if not isinstance(backend, Backend):
            raise TypeError(f"Client(backend): {type(backend).__name__} is not a t9k_jobs.sdk.backend.Backend")
        self.backend = backend

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def local(
        cls, runs_dir: str | os.PathLike | None = None, run_dir: str | os.PathLike | None = None,
        container_engine: str | None = None,
    ) -> Client:  # fmt: skip
        """A client for this machine's runs, found under ``runs_dir`` (default ``./t9k-runs``);
        with ``run_dir``, every method acts on the run in that directory. ``container_engine``:
        ``"podman"``: the runs it starts (:meth:`run`, :meth:`create`) run each replica in its
        image (``run --container-engine``); default: as processes.

        >>> Client.local().list()                            # doctest: +SKIP
        [GenericJob(...), PyTorchTrainingJob(...)]
        """
        check_arguments("local", {"runs_dir": runs_dir, "run_dir": run_dir, "container_engine": container_engine})
        from .local import LocalBackend  # lazy: keeps the local runtime out of a cluster client

        runs, one = Path(runs_dir) if runs_dir else None, Path(run_dir) if run_dir else None
        return cls(LocalBackend(runs, one, container_engine))

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
        contacted, and a kubeconfig credential plugin (``users[].user.exec``) first run, by a
        method, once its arguments are checked, as client-go runs it: within ``request_timeout``
        (and a ``wait``'s ``timeout``), then killed.

        Raises :class:`UsageError` (not a file, no such context, a kubeconfig that is empty, not
        a mapping, without clusters, contexts or users that its context names; an argument of the
        wrong type), :class:`ClusterError` (no kubeconfig, unusable credentials). Close it with
        :meth:`close`, or use it in a ``with`` block.

        >>> with Client.cluster(namespace="team-a") as c:   # doctest: +SKIP
        ...     [j.name for j in c.list("pj")]
        ['digits-ddp']
        """
        check_arguments(
            "cluster",
            {"kubeconfig": kubeconfig, "context": context, "namespace": namespace, "request_timeout": request_timeout},
        )
        limit = seconds(request_timeout)
        from .cluster import ClusterBackend  # lazy: keeps the cluster backend out of local verbs

        return cls(ClusterBackend(kubeconfig, context, namespace, limit or None))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection (a cluster client); the client cannot be used afterwards."""
        self.backend.close()

    # -- the verbs --------------------------------------------------------------------------------

    @checked
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
        model, manifest, path = load_job(job)
        return job_of(self.backend.create(model, manifest, path, namespace))

    @checked
    def run(
        self, job: JobLike, run_dir: str | os.PathLike | None = None, gpus: str | None = None, watch: bool = True,
        allow_duplicate: bool = False, volumes: dict[str, str | os.PathLike] | builtins.list[str] | None = None,
        python: str | os.PathLike | None = None, inject: builtins.list[str] | None = None, ttl: int | None = None,
    ) -> Job:  # fmt: skip
        """Local only: start ``job`` on this machine in the background (its own session: it
        survives the caller) and return it once its runtime has started, with annotations
        ``t9k-jobs.local/run-dir`` and ``t9k-jobs.local/runtime-pid``. ``run_dir``: where its
        logs and status go (default ``./t9k-runs/<name>-<time>``); ``gpus``: the GPUs replicas may
        get (``"0,1"``, ``"none"``; default: this machine's); ``watch``: apply the user's edits of
        the manifest file while it runs (the run keeps its own copy, which :meth:`pause`,
        :meth:`resume` and :meth:`scale` edit); ``allow_duplicate``: start it even though a run
        of the same job runs in the same runs dir; ``volumes``: ``{CLAIM: DIR}``, the folder each
        persistentVolumeClaim (or foreign configMap or secret) stands for, or ``--volume``'s values
        (``["CLAIM=DIR"]``); ``python``:
        the interpreter ``python``, ``python3`` and ``torchrun`` mean in the replicas (``--python``);
        ``inject``: failures to make happen on purpose, ``["kill:worker-1@10"]`` (``--inject``,
        :mod:`t9k_jobs.local.inject`); ``ttl``: seconds the finished run is kept before ``get`` or
        ``run`` removes its run dir (``--ttl``; default: the job's
        ``t9k-jobs.io/ttl-seconds-after-finished``, else kept; not with ``run_dir``).

        Raises :class:`InvalidJob`, :class:`UsageError` (cannot run here: more GPUs or replicas
        than this machine has, a claim without a folder, a run dir in use), :class:`AlreadyExists`
        (a run of this job runs in the same runs dir), :class:`NotSupported` on a cluster,
        :class:`JobsError` when the runtime did not start.

        >>> Client.local().run("examples/generic-exchange/job.yaml").name   # doctest: +SKIP
        'exchange'
        """
        if not isinstance(self.backend, Runner):
            raise NotSupported(RUN_IS_LOCAL)
        model, _manifest, path = load_job(job)
        engine = getattr(self.backend, "container_engine", None)
        options = checked_run_options(model, path, run_dir, gpus, watch, allow_duplicate, volumes, python, inject, ttl, engine)
        return job_of(self.backend.run(model, options, run_dir))

    @checked
    def get(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """The job with its status. Raises :class:`NotFound`, :class:`InvalidJob` (a stored job
        whose spec does not validate), :class:`ClusterError`.

        >>> Client.local().get("gj", "exchange").status.phase   # doctest: +SKIP
        'Succeeded'
        """
        return job_of(self.backend.get(resolve_kind(kind), name, namespace))

    def list(
        self, kind: KindLike | None = None, namespace: str | None = None, all_namespaces: bool = False
    ) -> builtins.list[Job]:
        """Every job of ``kind`` (default: all four kinds) in ``namespace`` (default: the
        client's) or in all namespaces; locally, the newest run of each name. Jobs whose spec
        does not validate are left out (:meth:`summaries` shows them)."""
        return [s_job for s in self.summaries(kind, None, namespace, all_namespaces) if (s_job := job_or_none(s))]

    @checked
    def summaries(
        self, kind: KindLike | None = None, name: str | None = None, namespace: str | None = None,
        all_namespaces: bool = False, positions: bool = False,
    ) -> builtins.list[JobSummary]:  # fmt: skip
        """The rows ``t9k-jobs get`` prints (:class:`JobSummary`): one job when ``name`` is given
        (raises :class:`NotFound`), else every job of ``kind`` (default: all kinds). ``positions``:
        on a cluster with Kueue, each queued job's place in its LocalQueue in ``wide["position"]``
        (``3/7``; one request per LocalQueue)."""
        views = self.backend.list(summaries_kind(kind, name, all_namespaces), name, namespace, all_namespaces)
        where = self.backend.queue_positions(views) if positions and hasattr(self.backend, "queue_positions") else None
        return summary_rows(views, where)

    @checked
    def describe(self, kind: KindLike, name: str | None = None, namespace: str | None = None) -> str:
        """What ``t9k-jobs describe`` prints (lines joined by newlines): identity, created (RFC
        3339, UTC), phase, why it is not Running, spec summary, conditions, replicas, recent
        events. Without ``name``, every job of ``kind`` (locally, the newest run of each name and
        every live one), one after another with a blank line between, as ``kubectl describe
        KIND`` does; ``""`` when there is none. Raises :class:`NotFound`."""
        kind_name = resolve_kind(kind)
        if name is None:
            return described(self.backend.list(kind_name, None, namespace, detail=True))
        return described([self.backend.get(kind_name, name, namespace, detail=True)])

    @checked
    def wait(
        self, kind: KindLike, name: str, phase: str = "Succeeded", timeout: Duration = None, namespace: str | None = None
    ) -> Job:
        """Wait until the job's phase is ``phase`` (``Succeeded``, ``Failed`` or ``Running``, any
        case) and return it. ``timeout``: seconds or a duration (None: no limit).

        Raises :class:`JobEndedOtherwise` when it ends in another phase, is deleted or (locally)
        stopped, with the reason; :class:`WaitTimeout` when time runs out (on a cluster, every
        request of the wait is inside ``timeout``, an API server that restarts is waited for
        within it); :class:`NotFound`; :class:`UsageError` for another phase or a bad duration
        (NaN, infinite, negative); :class:`JobsError` when waiting would never end: locally, the
        run's state cannot be told (``Unknown``); on a cluster, the operator marked the spec
        invalid (condition ``SpecValid`` False, reason ``InvalidSpec``) and leaves the job alone.

        >>> Client.local().wait("gj", "exchange", timeout="5m").status.phase   # doctest: +SKIP
        'Succeeded'
        """
        wait = Wait(resolve_kind(kind), name, wait_phase(phase), seconds(timeout), self.server)
        return job_of(wait.outcome(*self.backend.watch(wait.kind, name, namespace, wait.done, wait.limit)))

    @checked
    def logs(
        self, kind: KindLike, name: str, replica_type: str | None = None, index: int | None = None,
        container: str | None = None, follow: bool = False, tail: int | None = None, timestamps: bool = False,
        previous: bool = False, namespace: str | None = None,
    ) -> LogStream:  # fmt: skip
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
        options = LogOptions(replica_type, index, container, follow, tail, timestamps, previous)
        return self.backend.logs(resolve_kind(kind), name, options, namespace)

    @checked
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
        return Deleted(self.backend.delete(resolve_kind(kind), name, namespace, purge, seconds(timeout)))

    @checked
    def edit(
        self, kind: KindLike, name: str, verb: str, replicas: int | None = None, namespace: str | None = None
    ) -> Edited:
        """The one edit behind :meth:`pause`, :meth:`resume` and :meth:`scale` (``verb``; ``replicas``
        for ``scale``), as they do it (:func:`~t9k_jobs.sdk.edits.edit_of`), with what was done:
        an :class:`Edited`, whose ``lines`` ``t9k-jobs pause``, ``resume`` and ``scale`` print and
        whose ``view`` is the job afterwards. Raises as they do, and :class:`UsageError` for
        another verb, or ``replicas`` with another verb than ``scale``."""
        check_edit(verb, replicas)
        view = self.backend.get(resolve_kind(kind), name, namespace)
        if (edit := edit_of(view, verb, replicas)) is not None:
            view = self.backend.set_field(view, edit[0], edit[1], verb)
        return edited(view, verb, replicas)

    @checked
    def pause(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """Pause the job (``spec.runMode.pause.enabled: true``): its replicas are stopped and not
        started again until :meth:`resume`. On a cluster, a patch of the job; locally, an edit of
        the manifest the run watches (kept as written but for that field), applied by the run
        within a second. A paused job stays so (no change). Raises :class:`NotFound`,
        :class:`JobsError` (a finished job; a local run not running), :class:`NotSupported` (a
        local run that watches no manifest)."""
        return job_of(self.edit(kind, name, "pause", namespace=namespace).view)

    @checked
    def resume(self, kind: KindLike, name: str, namespace: str | None = None) -> Job:
        """Resume a paused job (``spec.runMode.pause.enabled: false``); a job not paused is left
        as it is. As :meth:`pause` otherwise."""
        return job_of(self.edit(kind, name, "resume", namespace=namespace).view)

    @checked
    def scale(self, kind: KindLike, name: str, replicas: int, namespace: str | None = None) -> Job:
        """Set an elastic PyTorchTrainingJob's or DeepSpeedJob's ``spec.elastic.expectedReplicas``
        to ``replicas``. Raises :class:`UsageError` when the job is not elastic or ``replicas`` is
        outside ``[minReplicas, maxReplicas]``; otherwise as :meth:`pause`."""
        return job_of(self.edit(kind, name, "scale", replicas, namespace).view)



# ----------------------------------------------------------------------------- what both clients do

#: What ``run`` says on a cluster.
RUN_IS_LOCAL = "run starts a job on this machine; on a cluster use create"


def job_of(view: JobView) -> Job:
    """The typed job of a view (its status included). Raises :class:`InvalidJob`."""
    where = f"{view.kind}/{view.name}"
    if view.run_dir is not None:  # a local run's job.yaml
        from ..local.rundir import RunDir  # lazy: keeps the local run dirs out of a cluster client

        where = str(RunDir(view.run_dir).job)
    try:
        return parse_job(view.object, where)  # type: ignore[return-value]
    except ManifestError as exc:
        raise InvalidJob(exc.lines()) from None


def checked_run_options(
    job: Job,
    path: Path | None,
    run_dir: str | os.PathLike | None,
    gpus: str | None,
    watch: bool,
    allow_duplicate: bool,
    volumes: dict[str, str | os.PathLike] | list[str] | None,
    python: str | os.PathLike | None,
    inject: list[str] | None,
    ttl: int | None,
    container_engine: str | None = None,
) -> RunOptions:
    """The options of ``run`` as both clients take them (``volumes`` a ``{CLAIM: DIR}`` mapping or
    ``--volume``'s ``CLAIM=DIR`` values) and the client's ``container_engine``, checked once
    (:func:`t9k_jobs.local.options.run_options`).
    Raises :class:`UsageError` with its line."""
    from ..local.options import OptionError, run_options  # lazy: keeps the local runtime out of a cluster client

    flags = ([f"{claim}={os.fspath(folder)}" for claim, folder in volumes.items()] if isinstance(volumes, dict)
             else [volumes] if isinstance(volumes, str) else list(volumes or []))  # fmt: skip
    try:
        return run_options(
            job, path.resolve() if path is not None else None, run_dir_given=run_dir is not None, gpus=gpus,
            watch=watch, allow_duplicate=allow_duplicate, volumes=flags, python=python, inject=inject or [], ttl=ttl,
            container_engine=container_engine,
        )  # fmt: skip
    except OptionError as exc:
        raise UsageError(str(exc)) from None


def summaries_kind(kind: KindLike | None, name: str | None, all_namespaces: bool) -> str | None:
    """The kind ``summaries`` lists (None: all), once its arguments agree: a ``name`` needs a kind
    and no ``all_namespaces`` (:class:`UsageError`)."""
    kind_name = resolve_kind(kind) if kind is not None else None
    if name is not None:
        if kind_name is None:
            raise UsageError("a NAME needs a KIND: get KIND NAME")
        if all_namespaces:
            raise UsageError("-A/--all-namespaces lists jobs; it cannot be combined with a NAME")
    return kind_name


def summary_rows(views: list[JobView], positions: dict[tuple[str, str], str] | None = None) -> list[JobSummary]:
    """The rows ``get`` prints of ``views`` now; ``positions``: each queued job's place in its
    Kueue LocalQueue, ``(namespace, name)`` -> ``N/M``, put in ``wide["position"]``."""
    import time

    now = time.time()
    rows = [_summary(v, show.row(v, now)) for v in views]
    if positions is not None:
        for r in rows:
            r.wide["position"] = positions.get((r.namespace or "", r.name))
    return rows


def described(views: list[JobView]) -> str:
    """What ``describe`` prints of ``views`` (each job's lines, a blank line between jobs)."""
    import time

    now = time.time()
    return "\n\n".join("\n".join(show.describe(v, now)) for v in views)


@dataclass(frozen=True)
class Wait:
    """One ``wait``: for job ``kind``/``name`` to reach phase ``wanted`` within ``limit`` seconds
    (None: no limit); ``server`` is named when it times out. The backend watches with :meth:`done`;
    :meth:`outcome` says what came of it."""

    kind: str
    name: str
    wanted: str
    limit: float | None
    server: str | None

    def done(self, view: JobView | None) -> bool:
        """Whether waiting is over: the job is gone, in the phase wanted, in one it cannot leave,
        or left alone by the operator."""
        return view is None or view.phase in (self.wanted, UNKNOWN, STOPPED, *TERMINAL_PHASES) or _left_alone(view)

    def outcome(self, view: JobView | None, reached: bool) -> JobView:
        """The job in the phase wanted, from the backend's ``(last view, reached)``. Raises
        :class:`WaitTimeout`, :class:`JobEndedOtherwise`, :class:`JobsError` (as ``Client.wait``)."""
        if not reached:
            where = view.phase if view is not None else None
            raise WaitTimeout(show.wait_timed_out(self.kind, self.name, self.wanted, self.limit, view, self.server), where)
        if view is None:
            raise JobEndedOtherwise(show.wait_deleted(self.kind, self.name, self.wanted), None)
        if view.phase == self.wanted:
            return view
        if (view.phase == UNKNOWN and view.unknown_reason is not None) or _left_alone(view):
            # A state that cannot be told, or a spec the operator leaves alone (SpecValid False,
            # InvalidSpec) until it changes: waiting would last the whole timeout for nothing.
            raise JobsError(show.wait_unknown(view, self.wanted))
        raise JobEndedOtherwise(show.wait_ended(view, self.wanted), view.phase)


#: The verbs of :meth:`Client.edit` (and :class:`~t9k_jobs.sdk.async_client.AsyncClient`'s edits).
EDIT_VERBS = ("pause", "resume", "scale")


def check_edit(verb: str, replicas: int | None) -> None:
    """Refuse an edit that is none of :data:`EDIT_VERBS`, or ``replicas`` without ``scale``."""
    if verb not in EDIT_VERBS:
        raise UsageError(f"unknown edit {verb!r}: use pause, resume or scale")
    if replicas is not None and verb != "scale":
        raise UsageError(f"replicas: only scale sets a number of replicas, not {verb}")


def edited(view: JobView, verb: str, replicas: int | None = None) -> Edited:
    """What an edit (``verb``, ``replicas`` for ``scale``) of the job did, once ``view`` is the job
    afterwards: the one :class:`Edited` of both clients, its line said by
    :func:`~t9k_jobs.sdk.edits.edited_line` (a cluster job's namespace after its name)."""
    return Edited([edited_line(view.kind, view.name, verb, replicas, view.namespace)], view)


def _left_alone(view: JobView) -> bool:
    """Whether the operator marked the job's spec invalid (``SpecValid`` False) and leaves it alone."""
    from ..engine.conditions import SPEC_VALID  # lazy: keeps the engine out of local logs, wait and edits

    cond = view.status.condition(SPEC_VALID) if view.status is not None else None
    return cond is not None and cond.status == "False"


def _summary(view: JobView, cells: dict[str, Any]) -> JobSummary:
    return JobSummary(
        kind=view.kind,
        name=view.name,
        namespace=view.namespace,
        phase=cells["phase"],
        ready=cells["ready"],
        restarts=cells["restarts"],
        age=cells["age"],
        backoff=cells["backoff"],
        wide=cells["wide"],
        queue=cells["wide"].get("queue"),
        priority=cells["wide"].get("priority"),
        loader=view.load_object,
    )


def job_or_none(summary: JobSummary) -> Job | None:
    """The typed job of a row of ``get``, or None when its spec does not validate (``list`` leaves it out)."""
    try:
        return parse_job(summary.object, f"{summary.kind}/{summary.name}")  # type: ignore[return-value]
    except (ManifestError, ValueError):
        return None


__all__ = [
    "EDIT_VERBS", "RUN_IS_LOCAL", "Client", "Wait", "checked_run_options", "default_target", "described", "edited",
    "check_edit", "job_of", "job_or_none", "job_phase", "load_job", "summaries_kind", "summary_rows",
]
