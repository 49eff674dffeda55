"""The ``t9k-jobs`` command line: thin commands over the api, engine and runtimes."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer

from . import __version__

app = typer.Typer(
    name="t9k-jobs",
    help="Run T9k distributed-training jobs (batch.tensorstack.dev/v1beta1) here or on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_INVALID = 2
_F = TypeVar("_F", bound=Callable[..., Any])


class Output(str, Enum):
    yaml = "yaml"
    json = "json"


class Gang(str, Enum):
    """``render --gang``: :data:`t9k_jobs.frameworks.base.GangMode`."""

    t9k = "t9k"
    native = "native"
    none = "none"


#: FILE of render, validate and run.
_File = Annotated[Path, typer.Argument(help="The job manifest (YAML or JSON), or - for standard input.")]


def _fail(lines: list[str], code: int = EXIT_INVALID) -> None:
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code)


def _load(path: Path, created: bool = False):  # noqa: ANN202 - returns one of the Job kinds
    """The job in ``path``, or exit 2 with its errors; its warnings go to stderr. ``created``: read
    as the API server reads a create (a saved job's status and server-set metadata dropped, with
    one note on stderr: :mod:`t9k_jobs.api.created`)."""
    from .api import ManifestError
    from .frameworks import load_manifest, spec_warnings

    try:
        job = load_manifest(path)
    except ManifestError as exc:
        _fail(exc.lines())
    source = "<stdin>" if str(path) == "-" else str(path)
    if created:
        from .api.created import as_created, dropped_note
        from .frameworks import parse_job

        doc, dropped = as_created(job.dump())
        if dropped:
            typer.echo(f"note: {source}: {dropped_note(dropped)}", err=True)
            job = parse_job(doc, source)
    for line in spec_warnings(job):
        typer.echo(f"warning: {source}: {line}", err=True)
    return job


@app.command()
def render(
    file: _File,
    output: Annotated[Output, typer.Option("--output", "-o", help="Output format.")] = Output.yaml,
    gang: Annotated[
        Gang,
        typer.Option(
            "--gang",
            help="The gang scheduling the cluster is assumed to serve, for spec.scheduler.t9kScheduler: "
            "t9k (T9k's PodGroup and t9k-scheduler), native (a scheduling.k8s.io/v1beta1 PodGroup, "
            "Kubernetes 1.37+ with GenericWorkload) or none (the default scheduler, no gang). The operator "
            "picks it from discovery.",
        ),
    ] = Gang.t9k,
) -> None:
    """Print every object the operator would create for FILE: pods, services, config maps, secrets, pod groups."""
    from .render import render as render_objects
    from .render import to_yaml

    job = _load(file, created=True)
    objects = render_objects(job, gang=gang.value)
    if output is Output.json:
        typer.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2))
    else:
        typer.echo(to_yaml(objects), nl=False)


@app.command()
def validate(file: _File) -> None:
    """Check FILE against the API and print the kind and name when it is valid (exit 0; fields
    without effect and silent defaults are printed as warnings on stderr, and what a local run
    leaves out, such as queue and priority, as notes), else exit 2."""
    from .frameworks.notes import local_run_notes

    job = _load(file)
    source = "<stdin>" if str(file) == "-" else str(file)
    for line in local_run_notes(job):
        typer.echo(f"note: {source}: {line}", err=True)
    typer.echo(f"{job.kind}/{job.name}: valid")


@app.command()
def run(
    file: _File,
    run_dir: Annotated[
        Optional[Path], typer.Option("--run-dir", help="Where logs and status go (default: a new folder under ./t9k-runs).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No interleaved replica logs on the terminal.")] = False,
    watch_manifest: Annotated[
        bool,
        typer.Option(
            "--watch/--no-watch",
            help="Apply your edits of FILE while running (merged into the run's own copy, which pause, resume "
            "and scale edit).",
        ),
    ] = True,
    gpus: Annotated[
        Optional[str],
        typer.Option(
            "--gpus",
            help="The GPUs replicas may get, by index or UUID (0,1,2,3 or GPU-<uuid>,...), or none "
            "(default: this machine's, found with NVML or nvidia-smi).",
        ),
    ] = None,
    detach: Annotated[
        bool,
        typer.Option(
            "--detach",
            "-d",
            help="Run in the background (its own session: closing the terminal does not stop it); print the "
            "run dir and exit 0 at once. Then: get, logs -f, wait, describe, delete.",
        ),
    ] = False,
    allow_duplicate: Annotated[
        bool,
        typer.Option(
            "--allow-duplicate",
            help="Start it even though a run of the same job is running in the same runs dir (refused by "
            "default, as kubectl create refuses a name that is taken).",
        ),
    ] = False,
    volume: Annotated[
        Optional[list[str]],
        typer.Option(
            "--volume",
            help="NAME=DIR (repeatable): the folder of this machine that a persistentVolumeClaim named NAME "
            "(or a configMap or secret that is not the job's own) stands for; every replica mounting it sees "
            "DIR at its mountPath, shared.",
        ),
    ] = None,
    python: Annotated[
        Optional[str],
        typer.Option(
            "--python",
            help="The interpreter that python, python3 and torchrun mean in the replicas (an environment "
            "with the job's dependencies; default: the one t9k-jobs runs in).",
        ),
    ] = None,
) -> None:
    """Run the job in FILE on this machine; exit 0 only when it Succeeded (with -d: once it started)."""
    from .local.gpus import GpuInventory
    from .local.processes import check_python
    from .local.runtime import run_job
    from .local.volumes import VolumeError, parse_volume_flags

    inventory = None
    if gpus is not None:
        try:
            inventory = GpuInventory.declared(gpus)
        except ValueError as exc:
            _fail([f"--gpus: {exc}"])
    try:
        volumes = parse_volume_flags(volume or [])
    except VolumeError as exc:
        _fail([str(exc)])
    if python is not None:
        try:
            python = check_python(python)
        except ValueError as exc:
            _fail([f"--python: {exc}"])
    if detach:
        from .sdk.client import Client

        with _verb():
            started = Client.local().run(
                file,
                run_dir=run_dir,
                gpus=gpus,
                watch=watch_manifest,
                allow_duplicate=allow_duplicate,
                volumes=volumes,
                python=python,
            )
        _print_detached(started)
        raise typer.Exit(0)
    job = _load(file, created=True)
    from_stdin = str(file) == "-"
    code = run_job(
        job,
        manifest=None if from_stdin else file,
        run_dir=run_dir,
        quiet=quiet,
        watch=watch_manifest,
        gpus=inventory,
        allow_duplicate=allow_duplicate,
        volumes=volumes,
        python=python,
    )
    raise typer.Exit(code)


#: --context of operator and install.
_OperatorContext = Annotated[Optional[str], typer.Option("--context", help="Kubeconfig context to use.")]


def _check_kubeconfig(kubeconfig: Optional[str]) -> None:
    """Exit 2 when ``--kubeconfig`` names no file (operator, install)."""
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        _fail([f"--kubeconfig: {kubeconfig} is not a file"])


@app.command()
def operator(
    kubeconfig: Annotated[
        Optional[str], typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).")
    ] = None,
    context: _OperatorContext = None,
    namespace: Annotated[
        Optional[list[str]], typer.Option("--namespace", "-n", help="Watch only this namespace (repeatable; default: all).")
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, max=256, help="Jobs reconciled at once.")] = 8,
    leader_elect: Annotated[
        bool, typer.Option("--leader-elect/--no-leader-elect", help="Work only while holding the Lease.")
    ] = True,
    lease_name: Annotated[str, typer.Option("--lease-name", help="Name of the leader-election Lease.")] = "t9k-jobs-operator",
    lease_namespace: Annotated[
        str, typer.Option("--lease-namespace", help="Namespace of the Lease (default: $POD_NAMESPACE or 'default').")
    ] = "",
    identity: Annotated[
        str, typer.Option("--identity", help="This candidate's name in the Lease (default: $POD_NAME or host-pid).")
    ] = "",
    bind: Annotated[
        str, typer.Option("--metrics-bind-address", help="HOST:PORT serving /healthz, /readyz and /metrics.")
    ] = ":8080",
    qps: Annotated[float, typer.Option("--kube-api-qps", help="Client requests per second (0: no limit).")] = 50.0,
    burst: Annotated[int, typer.Option("--kube-api-burst", min=1, help="Client request burst.")] = 100,
    log_level: Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
    discovery_interval: Annotated[
        float,
        typer.Option(
            "--discovery-interval",
            min=0,
            help="Seconds between checks of the APIs served (PodGroups); a change restarts the operator (exit 3). 0: at start only.",
        ),
    ] = 300.0,
    node_lost_after: Annotated[
        float,
        typer.Option(
            "--node-lost-after",
            min=1,
            help="Seconds a node may be NotReady/Unknown before the replicas on it fail with reason NodeLost and their pods are deleted, then force-deleted after their grace period.",
        ),
    ] = 60.0,
) -> None:
    """Reconcile GenericJob, PyTorchTrainingJob, DeepSpeedJob and ColossalAIJob on a cluster."""
    import os

    from .cluster.operator import OperatorConfig, run_operator

    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        _fail([f"--log-level: {log_level!r} is not accepted; use DEBUG, INFO, WARNING or ERROR"])
    _check_kubeconfig(kubeconfig)
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit():
        _fail([f"--metrics-bind-address: {bind!r} is not HOST:PORT (for example :8080 or 127.0.0.1:0)"])
    config = OperatorConfig(
        kubeconfig=kubeconfig,
        context=context,
        namespaces=list(namespace or []),
        workers=workers,
        leader_elect=leader_elect,
        lease_name=lease_name,
        lease_namespace=lease_namespace or os.environ.get("POD_NAMESPACE") or "default",
        identity=identity,
        bind=bind,
        qps=qps,
        burst=burst,
        discovery_interval=discovery_interval,
        node_lost_after=node_lost_after,
    )
    try:
        code = run_operator(config, log_level)
    except Exception as exc:  # noqa: BLE001 - start-up errors (kubeconfig, unreachable server) as one line
        _fail([f"operator: {type(exc).__name__}: {exc}"], 1)
    raise typer.Exit(code)


@app.command()
def install(
    kubeconfig: Annotated[
        Optional[str], typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
    ] = None,
    context: _OperatorContext = None,
    with_operator: Annotated[
        bool, typer.Option("--with-operator", help="Also apply the operator Deployment (needs the image).")
    ] = False,
    image: Annotated[str, typer.Option("--image", help="Operator image for --with-operator.")] = "t9k-jobs:0.1.0",
    wait: Annotated[float, typer.Option("--wait", min=0, help="Seconds to wait for the CRDs to be Established.")] = 30.0,
) -> None:
    """Apply the CRDs, the t9k-jobs-system namespace and the operator's RBAC to the current context."""
    import asyncio

    from .cluster.client import KubeClient
    from .deploy.install import InstallError
    from .deploy.install import install as install_objects

    _check_kubeconfig(kubeconfig)

    async def go() -> list[str]:
        client = await KubeClient.from_config(kubeconfig, context)
        try:
            return await install_objects(client, with_operator=with_operator, image=image, wait=wait)
        finally:
            await client.close()

    try:
        lines = asyncio.run(go())
    except InstallError as exc:
        _fail([f"install: {exc}"], 1)
    except Exception as exc:  # noqa: BLE001 - unreachable server, bad kubeconfig: one line, no traceback
        _fail([f"install: {type(exc).__name__}: {exc}"], 1)
    for line in lines:
        typer.echo(line)


# ------------------------------------------------------------------ day-two verbs: a cluster or local runs

_KIND_HELP = (
    "The kind: GenericJob (gj), PyTorchTrainingJob (pj), DeepSpeedJob (dj), ColossalAIJob (caij), "
    "any case, plural too."
)
_Kind = Annotated[str, typer.Argument(help=_KIND_HELP)]
_Name = Annotated[str, typer.Argument(help="The job's name.")]
_RunsDir = Annotated[
    Optional[Path],
    typer.Option("--runs-dir", help="Local: where to look for runs (default: ./t9k-runs).", rich_help_panel="Local runs"),
]
_RunDir = Annotated[
    Optional[Path],
    typer.Option(
        "--run-dir",
        help="Local: act on the run in this directory (default: the newest run of NAME).",
        rich_help_panel="Local runs",
    ),
]
_Kubeconfig = Annotated[
    Optional[str],
    typer.Option(
        "--kubeconfig",
        help="Cluster: the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).",
        rich_help_panel="Cluster",
    ),
]
_Context = Annotated[
    Optional[str], typer.Option("--context", help="Cluster: the kubeconfig context.", rich_help_panel="Cluster")
]
_Namespace = Annotated[
    Optional[str],
    typer.Option(
        "--namespace", "-n", help="Cluster: the namespace (default: the context's, else default).", rich_help_panel="Cluster"
    ),
]
_RequestTimeout = Annotated[
    Optional[str],
    typer.Option(
        "--request-timeout",
        help="Cluster: the longest one request to the API server may take: 30s, 1m or seconds; 0 for no "
        "limit (default: 10s).",
        rich_help_panel="Cluster",
    ),
]
_AllNamespaces = Annotated[
    bool,
    typer.Option("--all-namespaces", "-A", help="Cluster: jobs of every namespace.", rich_help_panel="Cluster"),
]
_Local = Annotated[
    bool,
    typer.Option("--local", help="Act on this machine's runs, even with $KUBECONFIG set.", rich_help_panel="Target"),
]
_Cluster = Annotated[
    bool,
    typer.Option(
        "--cluster",
        help="Act on the cluster ($KUBECONFIG or ~/.kube/config) without other cluster options.",
        rich_help_panel="Target",
    ),
]


class GetOutput(str, Enum):
    wide = "wide"
    yaml = "yaml"
    json = "json"
    name = "name"


class CreateOutput(str, Enum):
    name = "name"
    yaml = "yaml"
    json = "json"


@contextlib.contextmanager
def _verb() -> Iterator[None]:
    """Turn the verbs' errors (:mod:`t9k_jobs.errors`) into their one line and exit code."""
    from .errors import JobsError

    try:
        yield
    except JobsError as exc:
        _fail(exc.lines(), exc.exit_code)


@dataclass(frozen=True)
class _Target:
    """The target options of a day-two verb, as given (:func:`_takes_target` adds them to a verb)."""

    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    namespace: Optional[str] = None
    request_timeout: Optional[str] = None
    all_namespaces: bool = False
    local: bool = False
    cluster: bool = False
    runs_dir: Optional[Path] = None
    run_dir: Optional[Path] = None

    def client(self):  # noqa: ANN201 - a t9k_jobs.Client
        """The client the options choose (:meth:`is_cluster`)."""
        from .sdk.client import DEFAULT_REQUEST_TIMEOUT, Client

        if self.is_cluster():
            limit = self.request_timeout if self.request_timeout is not None else DEFAULT_REQUEST_TIMEOUT
            return Client.cluster(self.kubeconfig, self.context, self.namespace, limit)
        return Client.local(self.runs_dir, self.run_dir)

    def is_cluster(self) -> bool:
        """Whether the options choose a cluster (docs/decisions.md, "Day-two verbs: which target"):
        a cluster option given, or --cluster, or $KUBECONFIG set and no local option; else this
        machine's runs. Options of both kinds together are a usage error."""
        from .sdk.client import default_target
        from .errors import UsageError

        cluster_opts = [
            flag
            for flag, value in (
                ("--kubeconfig", self.kubeconfig),
                ("--context", self.context),
                ("-n/--namespace", self.namespace),
                ("-A/--all-namespaces", self.all_namespaces or None),
                ("--request-timeout", self.request_timeout),
            )
            if value is not None
        ]
        local_opts = [
            flag
            for flag, value in (("--runs-dir", self.runs_dir), ("--run-dir", self.run_dir))
            if value is not None
        ]
        if self.local and self.cluster:
            raise UsageError("--local and --cluster cannot be combined")
        if self.local and cluster_opts:
            raise UsageError(f"--local: {cluster_opts[0]} is a cluster option; drop one of them")
        if self.cluster and local_opts:
            raise UsageError(f"--cluster: {local_opts[0]} is for local runs; drop one of them")
        if cluster_opts and local_opts:
            raise UsageError(f"{cluster_opts[0]} (a cluster) and {local_opts[0]} (local runs) cannot be combined")
        return bool(self.cluster or cluster_opts or (not self.local and not local_opts and default_target() == "cluster"))

    async def async_client(self, watch: bool = True):  # noqa: ANN201 - a t9k_jobs.AsyncClient
        """The async client (:class:`t9k_jobs.AsyncClient`) of the same target as :meth:`client`,
        watching (the dashboard's)."""
        from .sdk.async_client import AsyncClient
        from .sdk.client import DEFAULT_REQUEST_TIMEOUT

        if self.is_cluster():
            limit = self.request_timeout if self.request_timeout is not None else DEFAULT_REQUEST_TIMEOUT
            return await AsyncClient.cluster(
                self.kubeconfig, self.context, self.namespace, limit, watch=watch, all_namespaces=self.all_namespaces
            )
        return AsyncClient.local(self.runs_dir, self.run_dir, watch=watch)


#: Each target option once: its :class:`_Target` field, its typer annotation and its default, in the
#: order ``--help`` lists them.
_TARGET_OPTIONS = (
    ("kubeconfig", _Kubeconfig, None),
    ("context", _Context, None),
    ("namespace", _Namespace, None),
    ("request_timeout", _RequestTimeout, None),
    ("all_namespaces", _AllNamespaces, False),
    ("local", _Local, False),
    ("cluster", _Cluster, False),
    ("runs_dir", _RunsDir, None),
    ("run_dir", _RunDir, None),
)
#: The options of create, which acts on a cluster only.
_CLUSTER_OPTIONS = ("kubeconfig", "context", "namespace", "request_timeout")


def _takes_target(*, all_namespaces: bool = False, cluster_only: bool = False) -> Callable[[_F], _F]:
    """Give a day-two verb the target options after its own (``all_namespaces``: -A too;
    ``cluster_only``: the cluster's four, and the target is a cluster) and hand them to it as its
    keyword parameter ``target`` (a :class:`_Target`), so that each verb states only its own."""

    def wanted(field: str) -> bool:
        if cluster_only:
            return field in _CLUSTER_OPTIONS
        return all_namespaces or field != "all_namespaces"

    fixed = {"cluster": True} if cluster_only else {}
    options = [
        inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for field, annotation, default in _TARGET_OPTIONS
        if wanted(field)
    ]

    def decorate(verb: _F) -> _F:
        own = [p for p in inspect.signature(verb, eval_str=True).parameters.values() if p.name != "target"]

        @functools.wraps(verb)
        def command(**kwargs: Any) -> Any:
            target = _Target(**{p.name: kwargs.pop(p.name) for p in options}, **fixed)
            return verb(**kwargs, target=target)

        params = own + options
        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command  # type: ignore[return-value]

    return decorate


def _out(lines: Iterator[str] | list[str], follow: bool = False) -> None:
    """Print ``lines`` as they come; a reader that went away (``| head``) ends the command quietly."""
    try:
        for line in lines:
            sys.stdout.write(line + "\n")
            if follow:
                sys.stdout.flush()
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise typer.Exit(0) from None


def _dump(doc: object, output: str) -> None:
    if output == "json":
        typer.echo(json.dumps(doc, indent=2))
    else:
        import yaml

        typer.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)


def _print_detached(job) -> None:  # noqa: ANN001 - a job model returned by Client.run
    from .local.rundir import LOCAL_PID, LOCAL_RUN_DIR

    notes = job.metadata.annotations or {}
    from .words import short_name

    short = short_name(job.kind)
    typer.echo(
        f"{job.kind}/{job.name}: running in the background (runtime pid {notes.get(LOCAL_PID, '-')}); "
        f"run dir {notes.get(LOCAL_RUN_DIR, '-')}"
    )
    typer.echo(
        f"  t9k-jobs get {short} {job.name}   t9k-jobs logs {short} {job.name} -f   "
        f"t9k-jobs delete {short} {job.name}"
    )


@app.command()
@_takes_target(cluster_only=True)
def create(
    file: Annotated[
        Path, typer.Option("--filename", "-f", help="The job manifest (YAML or JSON), or - for standard input.")
    ],
    output: Annotated[Optional[CreateOutput], typer.Option("--output", "-o", help="name, yaml or json.")] = None,
    *,
    target: _Target,
) -> None:
    """Create the job in FILE on the cluster (validated here first). `t9k-jobs run` runs one on this machine."""
    from .words import ref

    with _verb():
        job = _load_for_create(file)
        with target.client() as client:
            created = client.create(job, target.namespace)
    if output is CreateOutput.name:
        typer.echo(ref(created.kind, created.name))
    elif output is not None:
        _dump(created.dump(), output.value)
    else:
        typer.echo(f"{ref(created.kind, created.name)} created")


def _load_for_create(file: Path) -> dict:
    """The manifest of ``create -f``, validated (InvalidJob: the lines validate prints)."""
    from .sdk.client import load_job

    _job, manifest, _path = load_job(file)
    return manifest


@app.command()
@_takes_target(all_namespaces=True)
def get(
    kind: Annotated[Optional[str], typer.Argument(help=_KIND_HELP + " Default: every kind.")] = None,
    name: Annotated[Optional[str], typer.Argument(help="The job's name (default: every job).")] = None,
    output: Annotated[
        Optional[GetOutput], typer.Option("--output", "-o", help="wide, yaml, json or name.")
    ] = None,
    *,
    target: _Target,
) -> None:
    """List jobs: NAME, PHASE, READY (running/replicas), RESTARTS, AGE. On this machine, the newest run
    of each name; PHASE is Stopped for a run whose runtime is gone before the job finished.

    Target: a cluster when --kubeconfig, --context, -n or -A is given or $KUBECONFIG is set, else this
    machine's runs; --cluster and --local choose."""
    from .sdk.arguments import resolve_kind
    from .words import format_table

    with _verb():
        with target.client() as client:
            rows = client.summaries(kind, name, all_namespaces=target.all_namespaces)
    kind_name = resolve_kind(kind) if kind is not None else None  # valid: summaries took it
    single = (name is not None or (client.target == "local" and target.run_dir is not None)) and len(rows) == 1
    if output in (GetOutput.yaml, GetOutput.json):
        objects = [r.object for r in rows]
        doc = objects[0] if single and objects else {"apiVersion": "v1", "kind": "List", "items": objects}
        _dump(doc, output.value)
        return
    if output is GetOutput.name:
        for r in rows:
            typer.echo(r.ref)
        return
    if not rows:
        what = f" of {kind_name}" if kind_name else ""
        if client.target == "local":
            from .local.rundir import runs_dir_default

            typer.echo(f"No local runs{what} found in {target.runs_dir or runs_dir_default()}.", err=True)
        elif target.all_namespaces:
            typer.echo(f"No jobs{what} found in any namespace.", err=True)
        else:
            typer.echo(f"No jobs{what} found in namespace {client.namespace}.", err=True)
        return
    cols = ["name", "phase", "ready", "restarts", "age"]
    if kind is None:
        cols.insert(0, "kind")
    if client.target == "cluster" and target.all_namespaces:
        cols.insert(0, "namespace")
    wide = ["backoff", "pid", "run_dir"] if client.target == "local" else ["backoff", "mode", "queue", "priority"]
    if output is GetOutput.wide:
        cols += wide

    def cell(row, col: str) -> object:  # noqa: ANN001
        value = row.wide.get(col) if col in row.wide else getattr(row, col)
        return "-" if value is None else value

    for line in format_table([c.upper().replace("_", " ") for c in cols], [[cell(r, c) for c in cols] for r in rows]):
        typer.echo(line)


@app.command()
@_takes_target()
def describe(
    kind: _Kind,
    name: Annotated[Optional[str], typer.Argument(help="The job's name (default: every job of KIND).")] = None,
    *,
    target: _Target,
) -> None:
    """Show a job: spec summary, why it is not Running, conditions, replicas (phase, restarts, exit
    codes; node on a cluster), recent events (of its pods too, on a cluster). Without NAME, every
    job of KIND, as kubectl describe does."""
    with _verb():
        with target.client() as client:
            text = client.describe(kind, name)
    if text:
        typer.echo(text)
    else:
        typer.echo(f"No jobs of kind {kind} found.", err=True)


@app.command()
@_takes_target()
def logs(
    kind: _Kind,
    name: _Name,
    replica_type: Annotated[
        Optional[str], typer.Option("--type", "-t", help="Only replicas of this type (worker, master...).")
    ] = None,
    index: Annotated[
        Optional[int], typer.Option("--index", "-i", min=0, help="With --type: one replica's container log.")
    ] = None,
    container: Annotated[
        Optional[str],
        typer.Option("--container", "-c", help="With --index: this container (default: the first)."),
    ] = None,
    all_replicas: Annotated[
        bool,
        typer.Option(
            "--all", help="Every replica merged, each line prefixed with its replica (the default)."
        ),
    ] = False,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="Go on until the job has finished, new and restarted replicas included."
        ),
    ] = False,
    tail: Annotated[
        Optional[int],
        typer.Option("--tail", min=0, help="Only the last N lines written so far (per replica when following a cluster job)."),
    ] = None,
    timestamps: Annotated[
        bool, typer.Option("--timestamps", help="Cluster: each line's RFC 3339 time (local logs have none).")
    ] = False,
    previous: Annotated[
        bool,
        typer.Option("--previous", "-p", help="Cluster: the previous container of each pod, where the kubelet restarted one."),
    ] = False,
    *,
    target: _Target,
) -> None:
    """Print a job's logs: every replica merged, each line prefixed with its replica (\\[worker-1] ...),
    or one replica's (--type T --index I). With -f, until the job has finished and every log is read."""
    from .errors import UsageError

    with _verb():
        if all_replicas and (replica_type is not None or index is not None):
            raise UsageError("--all cannot be combined with --type or --index")
        with target.client() as client:
            with client.logs(
                kind, name, replica_type, index, container, follow=follow, tail=tail,
                timestamps=timestamps, previous=previous,
            ) as lines:
                _out(lines, follow)


@app.command()
@_takes_target()
def wait(
    kind: _Kind,
    name: _Name,
    for_: Annotated[
        str, typer.Option("--for", help="Succeeded, Failed or Running (condition=X is accepted too).")
    ],
    timeout: Annotated[
        Optional[str],
        typer.Option(
            "--timeout", help="Give up after this long: 30s, 5m, 1h or seconds (default: no limit)."
        ),
    ] = None,
    *,
    target: _Target,
) -> None:
    """Wait until a job is in a phase: exit 0 when it is, 1 when it ends otherwise (with why) or time runs out."""
    from .sdk.arguments import seconds, wait_phase

    phase = for_.split("=", 1)[1] if for_.lower().startswith("condition=") else for_
    with _verb():
        wanted = wait_phase(phase)
        limit = seconds(timeout)
        with target.client() as client:
            job = client.wait(kind, name, wanted, limit)
    typer.echo(f"{job.kind} {job.name} is {wanted}")


@app.command()
@_takes_target()
def delete(
    kind: _Kind,
    name: _Name,
    purge: Annotated[
        bool, typer.Option("--purge", help="Local: also remove the run dir (its logs and status).")
    ] = False,
    timeout: Annotated[
        Optional[str],
        typer.Option(
            "--timeout",
            help="Local: wait this long for the runtime to stop before killing it (default: grace period + 15s).",
        ),
    ] = None,
    *,
    target: _Target,
) -> None:
    """Delete a job. On a cluster its pods, Services, ConfigMaps and Secrets go with it. Locally, stop
    the run (SIGTERM to its runtime, which stops every replica gracefully) and keep its run dir;
    a run that is not running is left as it is (exit 0); --purge removes its run dir either way."""
    from .sdk.arguments import seconds

    with _verb():
        seconds(timeout)  # a bad duration is refused before anything is stopped
        with target.client() as client:
            done = client.delete(kind, name, purge=purge, timeout=timeout)
    for line in done.lines:
        typer.echo(line)


def _spec_verb(
    verb: str,
    kind: str,
    name: str,
    target: _Target,
    replicas: Optional[int] = None,
) -> None:
    from .sdk.edits import edited_line

    with _verb():
        with target.client() as client:
            if verb == "pause":
                job = client.pause(kind, name)
            elif verb == "resume":
                job = client.resume(kind, name)
            else:
                job = client.scale(kind, name, replicas)  # type: ignore[arg-type]
    namespace = None if client.target == "local" else job.namespace
    typer.echo(edited_line(job.kind, job.name, verb, replicas, namespace))


@app.command()
@_takes_target()
def pause(
    kind: _Kind,
    name: _Name,
    *,
    target: _Target,
) -> None:
    """Pause a job (spec.runMode.pause.enabled: true): its replicas stop until resume. A local run's
    manifest file is edited (that field only) and the run applies it."""
    _spec_verb("pause", kind, name, target)


@app.command()
@_takes_target()
def resume(
    kind: _Kind,
    name: _Name,
    *,
    target: _Target,
) -> None:
    """Resume a paused job (spec.runMode.pause.enabled: false)."""
    _spec_verb("resume", kind, name, target)


@app.command()
@_takes_target()
def scale(
    kind: Annotated[str, typer.Argument(help="PyTorchTrainingJob (pj) or DeepSpeedJob (dj), elastic.")],
    name: _Name,
    replicas: Annotated[
        int, typer.Option("--replicas", min=0, help="spec.elastic.expectedReplicas, within [minReplicas, maxReplicas].")
    ],
    *,
    target: _Target,
) -> None:
    """Set an elastic job's expectedReplicas (PyTorchTrainingJob, DeepSpeedJob with spec.elastic.enabled)."""
    _spec_verb("scale", kind, name, target, replicas)


@app.command()
@_takes_target(all_namespaces=True)
def dashboard(
    port: Annotated[
        str, typer.Option("--port", help="The port (0: any free one); HOST:PORT only for a loopback HOST.")
    ] = "8700",
    address: Annotated[
        Optional[str],
        typer.Option("--address", help="Bind here instead of 127.0.0.1 (0.0.0.0: every interface; no login)."),
    ] = None,
    allow_actions: Annotated[
        bool, typer.Option("--allow-actions", help="Offer pause, resume, scale and delete (each confirmed).")
    ] = False,
    tensorboard_url: Annotated[
        Optional[str],
        typer.Option(
            "--tensorboard-url",
            help="Link a job's TensorBoard (spec.tensorboardSpec) to this http(s) URL; {namespace} and {name} are filled in (your T9k console's TensorBoard page).",
        ),
    ] = None,
    token: Annotated[
        Optional[str],
        typer.Option(
            "--token",
            help="The token a browser or script must hold (default: $T9K_JOBS_DASHBOARD_TOKEN, else a random one; "
            "the printed URL carries it). Other users see --token in the process list; the variable they do not.",
        ),
    ] = None,
    allow_host: Annotated[
        Optional[list[str]],
        typer.Option("--allow-host", help="Also answer requests for this Host name (with --address; repeatable)."),
    ] = None,
    *,
    target: _Target,
) -> None:
    """Serve a web dashboard of the jobs (this machine's runs, or a cluster's) on 127.0.0.1 and print
    its URL with its token: live job list, job pages (why not Running, replicas, events, timeline),
    logs, loss plots. Only who holds the token sees anything; -n NS shows that namespace only.
    Read-only unless --allow-actions. Needs the dashboard extra (docs/dashboard.md)."""
    from .dashboard import missing

    if missing():
        _fail([f"dashboard: {', '.join(missing())} not installed: bash scripts/bootstrap.sh examples,dashboard"], 1)
    from .dashboard.auth import TOKEN_ENV
    from .dashboard.server import serve

    given = token if token is not None else os.environ.get(TOKEN_ENV) or None
    with _verb():
        code = serve(
            target.async_client, port, address, allow_actions, target.all_namespaces, echo=lambda s: typer.echo(s),
            tensorboard_url=tensorboard_url, token=given, token_option=token is not None,
            allow_hosts=tuple(allow_host or ()),
        )
    raise typer.Exit(code)


@app.command()
def version() -> None:
    """Print the t9k-jobs version."""
    typer.echo(__version__)


def main() -> None:
    from .startup import command_for, light_rich_help

    light_rich_help()
    try:
        command_for(app, sys.argv[1:])()
    except KeyboardInterrupt:  # pragma: no cover - interrupt outside a run
        sys.exit(130)


if __name__ == "__main__":
    main()
