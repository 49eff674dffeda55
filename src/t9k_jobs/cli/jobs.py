"""The day-two verbs, over a job on a cluster or this machine's runs (the target options of
:mod:`.target`): ``create``, ``get``, ``describe``, ``logs``, ``wait``, ``delete``, ``pause``,
``resume``, ``scale`` and ``dashboard``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..dashboard import missing
from ..errors import UsageError
from .exits import fail, verb_errors
from .target import Target, takes_target

_KIND_HELP = (
    "The kind: GenericJob (gj), PyTorchTrainingJob (pj), DeepSpeedJob (dj), ColossalAIJob (caij), "
    "any case, plural too."
)
_Kind = Annotated[str, typer.Argument(help=_KIND_HELP)]
_Name = Annotated[str, typer.Argument(help="The job's name.")]


class GetOutput(str, Enum):
    wide = "wide"
    yaml = "yaml"
    json = "json"
    name = "name"


class CreateOutput(str, Enum):
    name = "name"
    yaml = "yaml"
    json = "json"


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


@takes_target(cluster_only=True)
def create(
    given: Annotated[
        Optional[Path], typer.Argument(metavar="FILE", help="The job manifest, as -f gives it (as run and validate take it).")
    ] = None,
    file: Annotated[
        Optional[Path], typer.Option("--filename", "-f", help="The job manifest (YAML or JSON), or - for standard input.")
    ] = None,
    output: Annotated[Optional[CreateOutput], typer.Option("--output", "-o", help="name, yaml or json.")] = None,
    *,
    target: Target,
) -> None:
    """Create the job in FILE (-f FILE, as kubectl, or FILE alone) on the cluster (validated here first).
    `t9k-jobs run` runs one on this machine."""
    from ..words import ref  # lazy: keeps pydantic out of --help and version

    if (given is None) == (file is None):
        fail(["give the manifest once: -f FILE (as kubectl create -f) or FILE" if given else
              "no manifest given: t9k-jobs create -f FILE (or - for standard input)"])  # fmt: skip
    with verb_errors():
        job = _load_for_create(given if given is not None else file)  # type: ignore[arg-type]
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
    from ..sdk.client import load_job  # lazy: keeps pydantic out of --help and version

    _job, manifest, _path = load_job(file)
    return manifest


@takes_target(all_namespaces=True)
def get(
    kind: Annotated[Optional[str], typer.Argument(help=_KIND_HELP + " Default: every kind.")] = None,
    name: Annotated[Optional[str], typer.Argument(help="The job's name (default: every job).")] = None,
    output: Annotated[
        Optional[GetOutput], typer.Option("--output", "-o", help="wide, yaml, json or name.")
    ] = None,
    ttl: Annotated[
        Optional[int],
        typer.Option(
            "--ttl",
            min=0,
            help="Local: first remove the run dirs of runs finished more than this many seconds ago (a run's own "
            "time to live, its job's t9k-jobs.io/ttl-seconds-after-finished or run --ttl, wins; those are "
            "removed even without --ttl). Never a running or Stopped run.",
            rich_help_panel="Local runs",
        ),
    ] = None,
    *,
    target: Target,
) -> None:
    """List jobs: NAME, PHASE, READY (running/replicas), RESTARTS, AGE. On this machine, the newest run
    of each name; PHASE is Stopped for a run whose runtime is gone before the job finished.

    Target: a cluster when --kubeconfig, --context, -n or -A is given or $KUBECONFIG is set, else this
    machine's runs; --cluster and --local choose."""
    from ..sdk.arguments import resolve_kind  # lazy: keeps pydantic out of --help and version
    from ..words import format_table  # lazy: keeps pydantic out of --help and version

    with verb_errors():
        with target.client() as client:
            if client.target != "local" and ttl is not None:
                fail(["--ttl: removes local runs; on a cluster the operator deletes finished jobs (their "
                      "t9k-jobs.io/ttl-seconds-after-finished, its --ttl-after-finished)"])  # fmt: skip
            if client.target == "local" and target.run_dir is None:
                from ..local.prune import prune  # lazy: keeps the engine out of --help and a cluster get

                for pruned in prune(target.runs_dir, ttl):  # finished runs past their time to live
                    typer.echo(f"note: {pruned.line()}", err=True)
            rows = client.summaries(kind, name, all_namespaces=target.all_namespaces,
                                    positions=output is GetOutput.wide)  # fmt: skip
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
            from ..local.rundir import runs_dir_default  # lazy: keeps pydantic out of --help and version

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
    local_wide, cluster_wide = ["backoff", "pid", "run_dir"], ["backoff", "mode", "queue", "priority", "position"]
    wide = local_wide if client.target == "local" else cluster_wide
    if output is GetOutput.wide:
        cols += wide

    def cell(row, col: str) -> object:  # noqa: ANN001
        value = row.wide.get(col) if col in row.wide else getattr(row, col)
        return "-" if value is None else value

    for line in format_table([c.upper().replace("_", " ") for c in cols], [[cell(r, c) for c in cols] for r in rows]):
        typer.echo(line)


@takes_target()
def describe(
    kind: _Kind,
    name: Annotated[Optional[str], typer.Argument(help="The job's name (default: every job of KIND).")] = None,
    *,
    target: Target,
) -> None:
    """Show a job: spec summary, why it is not Running, conditions, replicas (phase, restarts, exit
    codes; node on a cluster), recent events (of its pods too, on a cluster). Without NAME, every
    job of KIND, as kubectl describe does."""
    with verb_errors():
        with target.client() as client:
            text = client.describe(kind, name)
    if text:
        typer.echo(text)
    else:
        typer.echo(f"No jobs of kind {kind} found.", err=True)


@takes_target()
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
    target: Target,
) -> None:
    """Print a job's logs: every replica merged, each line prefixed with its replica (\\[worker-1] ...),
    or one replica's (--type T --index I). With -f, until the job has finished and every log is read."""
    with verb_errors():
        if all_replicas and (replica_type is not None or index is not None):
            raise UsageError("--all cannot be combined with --type or --index")
        with target.client() as client:
            with client.logs(
                kind, name, replica_type, index, container, follow=follow, tail=tail,
                timestamps=timestamps, previous=previous,
            ) as lines:
                _out(lines, follow)


@takes_target()
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
    target: Target,
) -> None:
    """Wait until a job is in a phase: exit 0 when it is, 1 when it ends otherwise (with why) or time runs out."""
    from ..sdk.arguments import seconds, wait_phase  # lazy: keeps pydantic out of --help and version

    phase = for_.split("=", 1)[1] if for_.lower().startswith("condition=") else for_
    with verb_errors():
        wanted = wait_phase(phase)
        limit = seconds(timeout)
        with target.client() as client:
            job = client.wait(kind, name, wanted, limit)
    typer.echo(f"{job.kind} {job.name} is {wanted}")


@takes_target()
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
    target: Target,
) -> None:
    """Delete a job. On a cluster its pods, Services, ConfigMaps and Secrets go with it. Locally, stop
    the run (SIGTERM to its runtime, which stops every replica gracefully) and keep its run dir;
    a run that is not running is left as it is (exit 0); --purge removes its run dir either way."""
    from ..sdk.arguments import seconds  # lazy: keeps pydantic out of --help and version

    with verb_errors():
        seconds(timeout)  # a bad duration is refused before anything is stopped
        with target.client() as client:
            done = client.delete(kind, name, purge=purge, timeout=timeout)
    for line in done.lines:
        typer.echo(line)


def _spec_verb(
    verb: str,
    kind: str,
    name: str,
    target: Target,
    replicas: Optional[int] = None,
) -> None:
    with verb_errors():
        with target.client() as client:
            done = client.edit(kind, name, verb, replicas)
    for line in done.lines:
        typer.echo(line)


@takes_target()
def pause(
    kind: _Kind,
    name: _Name,
    *,
    target: Target,
) -> None:
    """Pause a job (spec.runMode.pause.enabled: true): its replicas stop until resume. A local run's
    manifest file is edited (that field only) and the run applies it."""
    _spec_verb("pause", kind, name, target)


@takes_target()
def resume(
    kind: _Kind,
    name: _Name,
    *,
    target: Target,
) -> None:
    """Resume a paused job (spec.runMode.pause.enabled: false)."""
    _spec_verb("resume", kind, name, target)


@takes_target()
def scale(
    kind: Annotated[str, typer.Argument(help="PyTorchTrainingJob (pj) or DeepSpeedJob (dj), elastic.")],
    name: _Name,
    replicas: Annotated[
        int, typer.Option("--replicas", min=0, help="spec.elastic.expectedReplicas, within [minReplicas, maxReplicas].")
    ],
    *,
    target: Target,
) -> None:
    """Set an elastic job's expectedReplicas (PyTorchTrainingJob, DeepSpeedJob with spec.elastic.enabled)."""
    _spec_verb("scale", kind, name, target, replicas)


@takes_target(all_namespaces=True)
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
    target: Target,
) -> None:
    """Serve a web dashboard of the jobs (this machine's runs, or a cluster's) on 127.0.0.1 and print
    its URL with its token: live job list, job pages (why not Running, replicas, events, timeline),
    logs, loss plots. Only who holds the token sees anything; -n NS shows that namespace only.
    Read-only unless --allow-actions. Needs the dashboard extra (docs/dashboard.md)."""
    if missing():
        fail([f"dashboard: {', '.join(missing())} not installed: bash scripts/bootstrap.sh examples,dashboard"], 1)
    from ..dashboard.auth import TOKEN_ENV  # lazy: keeps hmac and secrets out of the other verbs
    from ..dashboard.server import serve  # lazy: keeps starlette and jinja2 out of the other verbs

    given = token if token is not None else os.environ.get(TOKEN_ENV) or None
    with verb_errors():
        code = serve(
            target.async_client, port, address, allow_actions, target.all_namespaces, echo=lambda s: typer.echo(s),
            tensorboard_url=tensorboard_url, token=given, token_option=token is not None,
            allow_hosts=tuple(allow_host or ()),
        )
    raise typer.Exit(code)
