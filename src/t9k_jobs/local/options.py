"""``run``'s options, parsed and checked once (issue 44): the command line's ``run`` and the SDK's
``Client.run`` both hand what they were given to :func:`run_options`, which returns the
:class:`~t9k_jobs.local.rundir.RunOptions` the runtime runs with, or raises :class:`OptionError`
with the one line that names the option and what it accepts. Whether the job can run here at all
(GPUs, replicas, an sshd) is :func:`t9k_jobs.local.checks.cannot_run_reason`, asked by whoever
starts the run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..api import Job
from .gpus import GpuInventory
from .inject import InjectError
from .inject import parse as parse_injections
from .podman import engine_problem
from .processes import check_python
from .prune import ttl_problem
from .rundir import RunOptions
from .volumes import VolumeError, parse_volume_flags


class OptionError(ValueError):
    """An option of ``run`` that is not accepted: one line naming it (``--gpus: ...``)."""


def run_options(
    job: Job,
    manifest: Path | None,
    *,
    run_dir_given: bool = False,
    gpus: str | None = None,
    watch: bool = True,
    allow_duplicate: bool = False,
    volumes: Iterable[str] = (),
    python: str | os.PathLike[str] | None = None,
    inject: Iterable[str] = (),
    ttl: int | None = None,
    container_engine: str | None = None,
) -> RunOptions:
    """``run``'s options for ``job`` (from the file ``manifest``, None: standard input or a dump),
    checked: ``gpus`` (``--gpus``: ``"0,1"``, ``"none"``; None: this machine's, discovered when
    first asked), ``volumes`` (``--volume`` values, ``NAME=DIR``), ``python`` (``--python``: made
    absolute), ``inject`` (``--inject`` values, on ``job``'s replicas), ``ttl`` (``--ttl``, not with
    a run dir the user named: ``run_dir_given``), ``container_engine`` (``--container-engine``:
    ``podman``, installed here; not with ``--python``, the image holds the interpreter). Raises
    :class:`OptionError` (one line)."""
    if container_engine is not None:
        problem = engine_problem(container_engine)
        if problem is not None:
            raise OptionError(problem)
        if python is not None:
            raise OptionError("--python: not with --container-engine (each replica runs the python of its image)")
    inventory = None
    if gpus is not None:
        try:
            inventory = GpuInventory.declared(gpus)
        except ValueError as exc:
            raise OptionError(f"--gpus: {exc}") from None
    try:
        mapping = parse_volume_flags(volumes)
    except VolumeError as exc:
        raise OptionError(str(exc)) from None
    interpreter = None
    if python is not None:
        try:
            interpreter = check_python(os.fspath(python))
        except ValueError as exc:
            raise OptionError(f"--python: {exc}") from None
    problem = ttl_problem(ttl, run_dir_given)
    if problem is not None:
        raise OptionError(problem)
    try:
        injections = parse_injections(list(inject), job)
    except InjectError as exc:
        raise OptionError(str(exc)) from None
    return RunOptions(manifest, watch, inventory, allow_duplicate, mapping, interpreter, injections, ttl, container_engine)


__all__ = ["OptionError", "run_options"]
