"""One plug-in per job kind; :func:`framework_for` picks it.

A kind's facts are asked of its plug-in (:class:`~.base.Framework`): :func:`spec_warnings` is its
:meth:`~.base.Framework.warnings`, and :func:`elastic_kinds` names the kinds that have an
elastic mode.

:func:`parse_job` and :func:`load_manifest` validate a manifest as :mod:`t9k_jobs.api` does and
then check what the job's plug-in makes (:func:`child_name_problem`); t9k-jobs' commands, SDK and
operator read manifests with these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO

from .. import api
from ..addressing import replica_name
from ..api import Job, ManifestError
from ..api.extensions import FAILURE_POLICY, extensions
from ..api.kinds import JobBase
from .base import Framework
from .colossalai import ColossalAIFramework
from .deepspeed import DeepSpeedFramework
from .genericjob import GenericJobFramework
from .pytorch import PyTorchFramework
from .types import BuildContext, Final, LocalRequirement, Outcome, ReplicaGroup

_FRAMEWORKS: dict[str, Framework] = {
    f.kind: f for f in (GenericJobFramework(), PyTorchFramework(), DeepSpeedFramework(), ColossalAIFramework())
}


def framework_for(job: JobBase) -> Framework:
    """The plug-in of ``job.kind``; raises ``KeyError`` for a kind t9k-jobs does not implement."""
    return _FRAMEWORKS[job.kind]


def spec_warnings(job: JobBase) -> list[str]:
    """The warnings of ``job``'s plug-in (:meth:`~.base.Framework.warnings`): one
    ``<field path>: <what happens instead>`` line per accepted field without effect or with a
    silent default. Never raises."""
    return framework_for(job).warnings(job)


def elastic_kinds() -> list[str]:
    """The kinds that have an elastic mode (``spec.elastic``, :attr:`~.base.Framework.elastic`),
    in the order t9k-jobs lists its kinds."""
    return [kind for kind, f in _FRAMEWORKS.items() if f.elastic]


def load_manifest(path: str | Path, stdin: BinaryIO | None = None) -> Job:
    """Read a YAML or JSON manifest holding one job and validate it: :func:`t9k_jobs.api.load_manifest`
    and the names of what the job makes (:func:`parse_job`).

    ``path`` is a file, or ``-`` for standard input (``stdin`` when given). Raises
    :class:`~t9k_jobs.api.ManifestError` for an unreadable file, bad YAML or JSON, several
    documents, or an invalid job.
    """
    return parse_job(*api.read_manifest(path, stdin))


def parse_job(data: Any, source: str = "<input>") -> Job:
    """Validate a manifest mapping (:func:`t9k_jobs.api.parse_job`), then that every pod and Service
    the job makes has a name Kubernetes accepts (:func:`child_name_problem`); return the typed job
    or raise :class:`~t9k_jobs.api.ManifestError`."""
    job = api.parse_job(data, source)
    problem = child_name_problem(job) or failure_rule_problem(job)
    if problem:
        raise ManifestError([problem], source)
    return job


def failure_rule_problem(job: Job) -> str | None:
    """A ``t9k-jobs.io/failure-policy`` rule naming a replica type the job does not have (a rule
    that could never match), as one line; ``None`` when there is none."""
    types = {g.type for g in framework_for(job).groups(job)}
    for rule in extensions(job.metadata.annotations).failure_rules:
        for i, name in enumerate(rule.replica_types):
            if name not in types:
                return (f"metadata.annotations[{FAILURE_POLICY}][{rule.index}].replicaTypes[{i}]: {name!r} is not a "
                        f"replica type of this job; its types: {', '.join(sorted(types))}")  # fmt: skip
    return None


def child_name_problem(job: Job) -> str | None:
    """Whether every pod and Service the job makes has a name Kubernetes accepts.

    A replica's pod and headless Service are named ``<job>-<type>-<index>`` (its host name, so a
    DNS label of at most 63 characters); a Service name must also start with a letter (RFC 1035).
    Elastic jobs are checked at ``maxReplicas``. Returns the problem as one line, or ``None``.
    """
    widest = job.model_copy(deep=True)
    spec = widest.spec
    elastic = getattr(spec, "elastic", None)
    if elastic is not None and elastic.max_replicas is not None:
        elastic.expected_replicas = elastic.max_replicas
    for group in framework_for(widest).groups(widest):
        if group.replicas == 0 and group.indexed:
            continue
        name = replica_name(job.name, group.type, group.replicas - 1 if group.indexed else None)
        if len(name) > 63:
            room = 63 - (len(name) - len(job.name))
            return (
                f"metadata.name: {job.name!r} makes the replica name {name!r} ({len(name)} characters), "
                f"longer than the 63 Kubernetes accepts; use a job name of at most {room} characters"
            )
        if group.service_ports is not None and not job.name[0].isalpha():
            return (
                f"metadata.name: {job.name!r} names the replicas' Services, which must start with a letter "
                "(RFC 1035 labels); start the job name with a letter"
            )
    return None


__all__ = [
    "BuildContext",
    "Final",
    "Framework",
    "LocalRequirement",
    "Outcome",
    "ReplicaGroup",
    "child_name_problem",
    "elastic_kinds",
    "framework_for",
    "load_manifest",
    "parse_job",
    "spec_warnings",
]
