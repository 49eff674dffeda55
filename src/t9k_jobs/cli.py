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
    file: Annotated[Path, typer.Argument(help="The job manifest (YAML or JSON).")],
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
def validate(file: Annotated[Path, typer.Argument(help="The job manifest.")]) -> None:
    """Check FILE against the API and print the kind and name when it is valid."""
    job = _load(file)
    typer.echo(f"{job.kind}/{job.name}: valid")


@app.command()
def run(
    file: Annotated[Path, typer.Argument(help="The job manifest (YAML or JSON).")],
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
) -> None:
    """Run the job in FILE on this machine; exit 0 only when it Succeeded."""
    from .local.runner import run_job

    job = _load(file)
    code = run_job(job, manifest=file, run_dir=run_dir, quiet=quiet, watch=watch_manifest)
    raise typer.Exit(code)


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
