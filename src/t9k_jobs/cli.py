"""The ``t9k-jobs`` command line: thin commands over the api, engine and runtimes."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import __version__
from .api import ManifestError, load_manifest

app = typer.Typer(
    name="t9k-jobs",
    help="Run T9k distributed-training jobs (batch.tensorstack.dev/v1beta1) here or on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_INVALID = 2


class Output(str, Enum):
    yaml = "yaml"
    json = "json"


def _fail(lines: list[str], code: int = EXIT_INVALID) -> None:
    for line in lines:
        typer.echo(f"error: {line}", err=True)
    raise typer.Exit(code)


def _load(path: Path):  # noqa: ANN202 - returns one of the Job kinds
    try:
        return load_manifest(path)
    except ManifestError as exc:
        _fail(exc.lines())


@app.command()
def render(
    file: Annotated[Path, typer.Argument(help="The job manifest (YAML or JSON), or - for standard input.")],
    output: Annotated[Output, typer.Option("--output", "-o", help="Output format.")] = Output.yaml,
) -> None:
    """Print every object the operator would create for FILE: pods, services, config maps, secrets, pod groups."""
    from .render import render as render_objects
    from .render import to_yaml

    job = _load(file)
    objects = render_objects(job)
    if output is Output.json:
        typer.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2))
    else:
        typer.echo(to_yaml(objects), nl=False)


@app.command()
def validate(file: Annotated[Path, typer.Argument(help="The job manifest (YAML or JSON), or - for standard input.")]) -> None:
    """Check FILE against the API and print the kind and name when it is valid."""
    job = _load(file)
    typer.echo(f"{job.kind}/{job.name}: valid")


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="The job manifest (YAML or JSON), or - for standard input.")],
    run_dir: Annotated[
        Optional[Path], typer.Option("--run-dir", help="Where logs and status go (default: a new folder under ./t9k-runs).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No interleaved replica logs on the terminal.")] = False,
    watch_manifest: Annotated[
        bool,
        typer.Option(
            "--watch/--no-watch", help="Apply edits of FILE while running (pause/resume, elastic expectedReplicas)."
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
) -> None:
    """Run the job in FILE on this machine; exit 0 only when it Succeeded (with -d: once it started)."""
    from .local.gpus import GpuInventory
    from .local.runner import run_job

    inventory = None
    if gpus is not None:
        try:
            inventory = GpuInventory.declared(gpus)
        except ValueError as exc:
            _fail([f"--gpus: {exc}"])
    job = _load(file)
    from_stdin = str(file) == "-"
    if detach:
        _run_detached(job, None if from_stdin else file, run_dir, watch_manifest, gpus, inventory)
    code = run_job(
        job, manifest=None if from_stdin else file, run_dir=run_dir, quiet=quiet, watch=watch_manifest, gpus=inventory
    )
    raise typer.Exit(code)


@app.command()
def operator(
    kubeconfig: Annotated[
        Optional[str], typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).")
    ] = None,
    context: Annotated[Optional[str], typer.Option("--context", help="Kubeconfig context to use.")] = None,
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
) -> None:
    """Reconcile GenericJob, PyTorchTrainingJob, DeepSpeedJob and ColossalAIJob on a cluster."""
    import os

    from .cluster.operator import OperatorConfig, run_operator

    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        _fail([f"--log-level: {log_level!r} is not accepted; use DEBUG, INFO, WARNING or ERROR"])
    if kubeconfig is not None and not Path(kubeconfig).is_file():
        _fail([f"--kubeconfig: {kubeconfig} is not a file"])
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
    context: Annotated[Optional[str], typer.Option("--context", help="Kubeconfig context to use.")] = None,
    with_operator: Annotated[
        bool, typer.Option("--with-operator", help="Also apply the operator Deployment (needs the image).")
    ] = False,
    image: Annotated[str, typer.Option("--image", help="Operator image for --with-operator.")] = "t9k-jobs:0.1.0",
    wait: Annotated[float, typer.Option("--wait", min=0, help="Seconds to wait for the CRDs to be Established.")] = 30.0,
) -> None:
    """Apply the CRDs, the t9k-jobs-system namespace and the operator's RBAC to the current context."""
    import asyncio

    from .cluster.client import KubeClient
    from .cluster.install import InstallError
    from .cluster.install import install as install_objects

    if kubeconfig is not None and not Path(kubeconfig).is_file():
        _fail([f"--kubeconfig: {kubeconfig} is not a file"])

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


def _run_detached(
    job, manifest: Optional[Path], run_dir: Optional[Path], watch: bool, gpus: Optional[str], inventory
) -> None:  # noqa: ANN001
    """``run -d``: check the job can run here, make its run dir, start the runtime in the background."""
    from .local.gpus import GpuInventory
    from .local.runner import RunDirError, cannot_run_reason, make_run_dir, new_default_run_dir
    from .local.runs import RunsError, start_detached
    from .render import to_yaml

    reason = cannot_run_reason(job, inventory if inventory is not None else GpuInventory.discovered())
    if reason is not None:
        _fail([reason])
    try:
        target = make_run_dir(run_dir) if run_dir is not None else new_default_run_dir(job)
    except RunDirError as exc:
        _fail([str(exc)])
    extra = ([] if watch else ["--no-watch"]) + ([] if gpus is None else ["--gpus", gpus])
    try:
        run = start_detached(
            manifest.resolve() if manifest is not None else None,
            to_yaml([job.dump()]) if manifest is None else None,
            target,
            extra,
        )
    except RunsError as exc:
        _fail([str(exc)], exc.exit_code)
    short = _SHORT_KIND.get(job.kind, job.kind.lower())
    typer.echo(
        f"{job.kind}/{job.name}: running in the background (runtime pid {run.pid()}); run dir {run.run_dir}"
    )
    typer.echo(
        f"  t9k-jobs get {short} {job.name}   t9k-jobs logs {short} {job.name} -f   "
        f"t9k-jobs delete {short} {job.name}"
    )
    raise typer.Exit(0)


# ------------------------------------------------------------------ day-two verbs over local runs

_SHORT_KIND = {"GenericJob": "gj", "PyTorchTrainingJob": "pj", "DeepSpeedJob": "dj", "ColossalAIJob": "caij"}
_KIND_HELP = (
    "The kind: GenericJob (gj), PyTorchTrainingJob (pj), DeepSpeedJob (dj), ColossalAIJob (caij), "
    "any case, plural too."
)
_RunsDir = Annotated[
    Optional[Path], typer.Option("--runs-dir", help="Where to look for local runs (default: ./t9k-runs).")
]
_RunDir = Annotated[
    Optional[Path],
    typer.Option("--run-dir", help="Act on the run in this directory (default: the newest run of NAME)."),
]


class GetOutput(str, Enum):
    wide = "wide"
    yaml = "yaml"
    json = "json"
    name = "name"


@contextlib.contextmanager
def _verb() -> Iterator[None]:
    """Turn the local verbs' errors into one line and their exit code (2 usage, 1 not found)."""
    from .local.runs import RunsError

    try:
        yield
    except RunsError as exc:
        _fail([str(exc)], exc.exit_code)


def _find(kind: str, name: str, runs_dir: Optional[Path], run_dir: Optional[Path]):  # noqa: ANN202 - LocalRun
    from .local.runs import find_run, resolve_kind

    with _verb():
        return find_run(resolve_kind(kind), name, runs_dir, run_dir)


@app.command()
def get(
    kind: Annotated[Optional[str], typer.Argument(help=_KIND_HELP + " Default: every kind.")] = None,
    name: Annotated[Optional[str], typer.Argument(help="The job's name (default: every job).")] = None,
    output: Annotated[
        Optional[GetOutput], typer.Option("--output", "-o", help="wide, yaml, json or name.")
    ] = None,
    runs_dir: _RunsDir = None,
    run_dir: _RunDir = None,
) -> None:
    """List local runs (the newest of each name): NAME, PHASE, READY (running/total), RESTARTS, AGE.

    PHASE is Stopped for a run whose runtime is gone before the job finished (delete, Ctrl-C, a kill)."""
    from .local.runs import find_run, list_runs, resolve_kind

    with _verb():
        kind_name = resolve_kind(kind) if kind is not None else None
        if name is not None or run_dir is not None:
            runs = [find_run(kind_name, name, runs_dir, run_dir)]
        else:
            runs = list_runs(runs_dir, kind_name)
    if output in (GetOutput.yaml, GetOutput.json):
        objects = [r.to_object() for r in runs]
        doc = (
            objects[0]
            if name is not None or run_dir is not None
            else {"apiVersion": "v1", "kind": "List", "items": objects}
        )
        if output is GetOutput.json:
            typer.echo(json.dumps(doc, indent=2))
        else:
            import yaml

            typer.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
        return
    if output is GetOutput.name:
        for r in runs:
            typer.echo(r.ref())
        return
    if not runs:
        from .local.runs import runs_dir_default

        typer.echo(
            f"No local runs{f' of {kind_name}' if kind_name else ''} found in "
            f"{runs_dir or runs_dir_default()}.",
            err=True,
        )
        return
    from .local.runs import format_table

    rows = [r.summary() for r in runs]
    cols = ["name", "phase", "ready", "restarts", "age"]
    if kind is None:
        cols.insert(0, "kind")
    if output is GetOutput.wide:
        cols += ["backoff", "pid", "run_dir"]
    for line in format_table(
        [c.upper().replace("_", " ") for c in cols],
        [[row[c] if row[c] is not None else "-" for c in cols] for row in rows],
    ):
        typer.echo(line)


@app.command()
def describe(
    kind: Annotated[str, typer.Argument(help=_KIND_HELP)],
    name: Annotated[str, typer.Argument(help="The job's name.")],
    runs_dir: _RunsDir = None,
    run_dir: _RunDir = None,
) -> None:
    """Show a local run: spec summary, why it is not Running, conditions, replicas, recent events."""
    from .local.runs import describe as describe_lines

    for line in describe_lines(_find(kind, name, runs_dir, run_dir)):
        typer.echo(line)


@app.command()
def logs(
    kind: Annotated[str, typer.Argument(help=_KIND_HELP)],
    name: Annotated[str, typer.Argument(help="The job's name.")],
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
        bool, typer.Option("--follow", "-f", help="Go on until the run ends, restarted replicas included.")
    ] = False,
    tail: Annotated[
        Optional[int], typer.Option("--tail", min=0, help="Only the last N lines written so far.")
    ] = None,
    runs_dir: _RunsDir = None,
    run_dir: _RunDir = None,
) -> None:
    """Print a local run's logs: every replica merged, each line prefixed with its replica, or one replica's.

    Local logs carry no timestamps (lines are kept as printed): there is no --timestamps here.
    """
    from .local.runs import UsageError, follow_logs

    run = _find(kind, name, runs_dir, run_dir)
    with _verb():
        if all_replicas and (replica_type is not None or index is not None):
            raise UsageError("--all cannot be combined with --type or --index")
        lines = follow_logs(run, replica_type, index, container, follow=follow, tail=tail)
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


@app.command()
def wait(
    kind: Annotated[str, typer.Argument(help=_KIND_HELP)],
    name: Annotated[str, typer.Argument(help="The job's name.")],
    for_: Annotated[
        str, typer.Option("--for", help="Succeeded, Failed or Running (condition=X is accepted too).")
    ],
    timeout: Annotated[
        Optional[str],
        typer.Option(
            "--timeout", help="Give up after this long: 30s, 5m, 1h or seconds (default: no limit)."
        ),
    ] = None,
    runs_dir: _RunsDir = None,
    run_dir: _RunDir = None,
) -> None:
    """Wait until a local run's job is in a phase: exit 0 when it is, 1 when it ends otherwise or times out."""
    from .local.runs import parse_duration, wait_for, wait_phase

    target = for_.split("=", 1)[1] if for_.lower().startswith("condition=") else for_
    with _verb():
        target = wait_phase(target)
        seconds = parse_duration(timeout) if timeout is not None else None
        run = _find(kind, name, runs_dir, run_dir)
        result = wait_for(run, target, seconds)
    if not result.reached:
        _fail([result.message], 1)
    typer.echo(result.message)


@app.command()
def delete(
    kind: Annotated[str, typer.Argument(help=_KIND_HELP)],
    name: Annotated[str, typer.Argument(help="The job's name.")],
    purge: Annotated[
        bool, typer.Option("--purge", help="Also remove the run dir (its logs and status).")
    ] = False,
    timeout: Annotated[
        Optional[str],
        typer.Option(
            "--timeout",
            help="Wait this long for the runtime to stop before killing it (default: grace period + 15s).",
        ),
    ] = None,
    runs_dir: _RunsDir = None,
    run_dir: _RunDir = None,
) -> None:
    """Stop a local run (SIGTERM to its runtime, which stops every replica gracefully) and keep its run dir.

    A run that is not running is left as it is (exit 0); --purge removes its run dir either way."""
    from .local.runs import parse_duration, stop_run
    from .local.runs import purge as purge_run

    with _verb():
        seconds = parse_duration(timeout) if timeout is not None else None
    run = _find(kind, name, runs_dir, run_dir)
    pid = run.pid()
    if pid is not None:
        typer.echo(f"stopping {run.kind} {run.name} (runtime pid {pid})...")
    with _verb():
        result = stop_run(run, seconds)
        if not result.was_running:
            typer.echo(f"{run.kind} {run.name} is not running ({run.phase()}); nothing to stop")
        elif result.exited:
            typer.echo(f"{run.ref()} stopped in {result.seconds:.1f}s")
        else:
            typer.echo(f"{run.ref()} did not stop in time: killed after {result.seconds:.1f}s")
        if result.swept:
            typer.echo(f"killed {result.swept} leftover process(es) of the run")
        if purge:
            purge_run(run)
            typer.echo(f"removed {run.run_dir}")
        else:
            typer.echo(f"logs and status kept in {run.run_dir}")


@app.command()
def version() -> None:
    """Print the t9k-jobs version."""
    typer.echo(__version__)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover - interrupt outside a run
        sys.exit(130)


if __name__ == "__main__":
    main()
