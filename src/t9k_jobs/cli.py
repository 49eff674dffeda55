"""The ``t9k-jobs`` command line: thin commands over the api, engine and runtimes."""

from __future__ import annotations

import json
import sys
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
) -> None:
    """Run the job in FILE on this machine; exit 0 only when it Succeeded."""
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
