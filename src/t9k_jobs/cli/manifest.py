"""The verbs over a job manifest, on this machine: ``render``, ``validate`` and ``run``."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from .exits import fail, verb_errors


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


def _load(path: Path, created: bool = False):  # noqa: ANN202 - returns one of the Job kinds
    """The job in ``path``, or exit 2 with its errors; its warnings go to stderr. ``created``: read
    as the API server reads a create (a saved job's status and server-set metadata dropped, with
    one note on stderr: :mod:`t9k_jobs.api.created`)."""
    from ..api import ManifestError  # lazy: keeps pydantic out of --help and version
    from ..frameworks import load_manifest, spec_warnings  # lazy: keeps pydantic out of --help and version

    try:
        job = load_manifest(path)
    except ManifestError as exc:
        fail(exc.lines())
    source = "<stdin>" if str(path) == "-" else str(path)
    if created:
        from ..api.created import as_created, dropped_note  # lazy: keeps pydantic out of --help and version
        from ..frameworks import parse_job  # lazy: keeps pydantic out of --help and version

        doc, dropped = as_created(job.dump())
        if dropped:
            typer.echo(f"note: {source}: {dropped_note(dropped)}", err=True)
            job = parse_job(doc, source)
    for line in spec_warnings(job):
        typer.echo(f"warning: {source}: {line}", err=True)
    return job


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
    from ..render import render as render_objects  # lazy: keeps the engine out of --help and validate
    from ..render import to_yaml  # lazy: keeps the engine out of --help and validate

    job = _load(file, created=True)
    objects = render_objects(job, gang=gang.value)
    if output is Output.json:
        typer.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2))
    else:
        typer.echo(to_yaml(objects), nl=False)


def validate(file: _File) -> None:
    """Check FILE against the API and print the kind and name when it is valid (exit 0; fields
    without effect and silent defaults are printed as warnings on stderr, and what a local run
    leaves out, such as queue and priority, as notes), else exit 2."""
    from ..frameworks import framework_for  # lazy: keeps pydantic out of --help and version

    job = _load(file)
    source = "<stdin>" if str(file) == "-" else str(file)
    for line in framework_for(job).local_notes(job):
        typer.echo(f"note: {source}: {line}", err=True)
    typer.echo(f"{job.kind}/{job.name}: valid")


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
    inject: Annotated[
        Optional[list[str]],
        typer.Option(
            "--inject",
            help="ACTION:REPLICA@SECONDS (repeatable): make a failure happen on purpose, SECONDS after the job is "
            "Running, to rehearse resume code: kill (SIGKILL), hang (SIGSTOP), node-lost, preempt; REPLICA like "
            "worker-1 (docs/hangs.md).",
        ),
    ] = None,
    ttl: Annotated[
        Optional[int],
        typer.Option(
            "--ttl",
            help="Seconds the finished run is kept: then get or run removes its run dir (default: the job's "
            "t9k-jobs.io/ttl-seconds-after-finished, else kept). Runs under ./t9k-runs only: not with --run-dir.",
        ),
    ] = None,
    container_engine: Annotated[
        Optional[str],
        typer.Option(
            "--container-engine",
            help="podman: run each replica in the image its manifest names, from the engine's local store "
            "(never pulled), on the host network; default: as processes of this machine (README, Replicas in their images).",
        ),
    ] = None,
) -> None:
    """Run the job in FILE on this machine; exit 0 only when it Succeeded (with -d: once it started)."""
    from ..local.options import OptionError, run_options  # lazy: keeps the local runtime out of other verbs
    from ..local.prune import prune  # lazy: keeps the local runtime out of other verbs
    from ..local.runtime import run_job  # lazy: keeps the local runtime out of other verbs

    job = _load(file, created=True)
    try:
        options = run_options(
            job, None if str(file) == "-" else file, run_dir_given=run_dir is not None, gpus=gpus,
            watch=watch_manifest, allow_duplicate=allow_duplicate, volumes=volume or [], python=python,
            inject=inject or [], ttl=ttl, container_engine=container_engine,
        )  # fmt: skip
    except OptionError as exc:
        fail([str(exc)])
    if detach:
        # Said before the start (the run may make a missing folder); then the SDK's local backend
        # starts it with the options checked here (its Runner.run: no second parse).
        from ..local.checks import start_notes  # lazy: keeps the local runtime out of other verbs
        from ..sdk.client import Client  # lazy: keeps pydantic out of --help and version

        for line in start_notes(job, options.volumes):
            typer.echo(f"note: {line}", err=True)
        with verb_errors():
            started = Client.local().backend.run(job, options, run_dir)
        _print_detached(started)
        raise typer.Exit(0)
    if run_dir is None:
        for pruned in prune(None):  # the finished runs of ./t9k-runs past their time to live
            typer.echo(f"note: {pruned.line()}", err=True)
    code = run_job(job, options, run_dir=run_dir, quiet=quiet)
    raise typer.Exit(code)


def _print_detached(view) -> None:  # noqa: ANN001 - the JobView the local backend returned
    from ..words import short_name  # lazy: keeps pydantic out of --help and version

    short = short_name(view.kind)
    typer.echo(
        f"{view.kind}/{view.name}: running in the background (runtime pid {view.pid or '-'}); "
        f"run dir {view.run_dir or '-'}"
    )
    typer.echo(
        f"  t9k-jobs get {short} {view.name}   t9k-jobs logs {short} {view.name} -f   "
        f"t9k-jobs delete {short} {view.name}"
    )