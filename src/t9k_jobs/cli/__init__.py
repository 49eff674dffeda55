"""The ``t9k-jobs`` command line: thin commands over the api, engine and runtimes.

Each verb is a function whose parameters are its arguments and options (typer), in the module of
its group:

- :mod:`.manifest`: the verbs over a job manifest on this machine: render, validate, run;
- :mod:`.admin`: the operator and its installation on a cluster: operator, install;
- :mod:`.jobs`: the day-two verbs over a job, on a cluster or this machine's runs: create, get,
  describe, logs, wait, delete, pause, resume, scale, dashboard;
- :mod:`.target`: the options that choose a day-two verb's target (``--kubeconfig`` ...
  ``--run-dir``), which ``@takes_target()`` gives a verb as its keyword parameter ``target``;
- :mod:`.exits`: how a verb ends on an error (one ``error:`` line a problem, and the exit code).

A verb imports what it needs inside its function, so that one verb loads nothing another needs
(issue 35, :mod:`t9k_jobs.startup`; tests/cli/test_startup.py). A new verb is written in its
group's module and named in :data:`VERBS`, the order ``t9k-jobs --help`` lists them in.
"""

from __future__ import annotations

import sys

import typer

from .. import __version__
from ..startup import command_for, light_rich_help
from . import admin, jobs, manifest

__all__ = ["app", "main"]

app = typer.Typer(
    name="t9k-jobs",
    help="Run T9k distributed-training jobs (batch.tensorstack.dev/v1beta1) here or on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def version() -> None:
    """Print the t9k-jobs version."""
    typer.echo(__version__)


#: Every verb, in the order ``t9k-jobs --help`` lists them.
VERBS = (
    manifest.render,
    manifest.validate,
    manifest.run,
    admin.operator,
    admin.install,
    jobs.create,
    jobs.get,
    jobs.describe,
    jobs.logs,
    jobs.wait,
    jobs.delete,
    jobs.pause,
    jobs.resume,
    jobs.scale,
    jobs.dashboard,
    version,
)
for _verb in VERBS:
    app.command()(_verb)


def main() -> None:
    """The ``t9k-jobs`` program (pyproject's ``[project.scripts]``, ``python -m t9k_jobs.cli``)."""
    light_rich_help()
    try:
        command_for(app, sys.argv[1:])()
    except KeyboardInterrupt:  # pragma: no cover - interrupt outside a run
        sys.exit(130)
