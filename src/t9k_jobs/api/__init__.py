"""Typed models of the T9k batch job API and the manifest loader.

``load_manifest(path)`` and ``parse_job(mapping)`` turn a manifest into one of
:class:`GenericJob`, :class:`PyTorchTrainingJob`, :class:`DeepSpeedJob` or
:class:`ColossalAIJob`, or raise :class:`ManifestError` whose messages each name a field
path and what is accepted there.

This package is the bottom of t9k-jobs and imports nothing above it, so it checks what the models
alone can say. What a job makes is the plug-ins' to know: :func:`t9k_jobs.frameworks.parse_job`
and :func:`t9k_jobs.frameworks.load_manifest` (the ones t9k-jobs' commands, SDK and operator use)
also check the names of the pods and Services the job's plug-in makes.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ValidationError

from .common import API_VERSION, GROUP, VERSION, FieldError, JobStatus
from .kinds import (
    KINDS,
    ColossalAIJob,
    DeepSpeedJob,
    GenericJob,
    Job,
    JobBase,
    PyTorchTrainingJob,
)
from .reading import ReadError, decode, parse_documents, read_source

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "KINDS",
    "ColossalAIJob",
    "DeepSpeedJob",
    "GenericJob",
    "Job",
    "JobBase",
    "JobStatus",
    "ManifestError",
    "PyTorchTrainingJob",
    "fixed_field_changes",
    "load_manifest",
    "parse_job",
    "read_manifest",
]

_KIND_HINTS = {"DeepspeedJob": "DeepSpeedJob", "TensorFlowJob": "TensorFlowTrainingJob"}


class ManifestError(ValueError):
    """A manifest that is not a valid T9k job.

    ``errors`` holds one message per problem, each ``<field path>: <what is wrong and what is
    accepted>``; ``source`` names the file (or ``<input>``).
    """

    def __init__(self, errors: list[str], source: str = "<input>") -> None:
        self.errors = errors
        self.source = source
        super().__init__("; ".join(errors))

    def lines(self) -> list[str]:
        return [f"{self.source}: {e}" for e in self.errors]


def load_manifest(path: str | Path, stdin: BinaryIO | None = None) -> Job:
    """Read a YAML or JSON manifest holding one job and validate it (:func:`read_manifest`, then
    :func:`parse_job`).

    ``path`` is a file, or ``-`` for standard input (``stdin`` when given). Reading is bounded
    (see :mod:`t9k_jobs.api.reading`: 3 MiB, UTF-8, nesting and alias limits, no duplicate keys).
    Raises :class:`ManifestError` for an unreadable file, bad YAML or JSON, several documents, or
    an invalid job.
    """
    return parse_job(*read_manifest(path, stdin))


def read_manifest(path: str | Path, stdin: BinaryIO | None = None) -> tuple[Any, str]:
    """The one document of a YAML or JSON manifest, not yet validated, and the name of its source
    (the file, or ``<stdin>``) as :class:`ManifestError` gives it. Raises :class:`ManifestError` for
    an unreadable file, bad YAML or JSON, or other than one document."""
    source = "<stdin>" if str(path) == "-" else str(path)
    try:
        docs = parse_documents(decode(read_source(path, stdin)))
    except ReadError as exc:
        raise ManifestError([str(exc)], source) from None
    if len(docs) != 1:
        raise ManifestError([f"expected exactly one YAML document with a job, found {len(docs)}"], source)
    return docs[0], source


def parse_job(data: Any, source: str = "<input>") -> Job:
    """Validate a manifest mapping against the models and return the typed job; raise
    :class:`ManifestError`. The names of what the job makes are checked one layer up
    (:func:`t9k_jobs.frameworks.parse_job`)."""
    if not isinstance(data, dict):
        raise ManifestError([f"a job manifest must be a mapping, not {type(data).__name__}"], source)
    errors: list[str] = []
    api_version = data.get("apiVersion")
    if api_version != API_VERSION:
        errors.append(f"apiVersion: {api_version!r} is not accepted; use {API_VERSION!r}")
    kind = data.get("kind")
    cls = KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        accepted = ", ".join(KINDS)
        hint = _KIND_HINTS.get(kind) if isinstance(kind, str) else None
        hint = hint if hint in KINDS else None
        extra = f" (did you mean {hint!r}?)" if hint else ""
        errors.append(f"kind: {kind!r} is not one of {accepted}{extra}")
    if errors:
        raise ManifestError(errors, source)
    assert cls is not None
    try:
        job: Job = cls.model_validate(data)  # type: ignore[assignment]
    except ValidationError as exc:
        raise ManifestError(_format_errors(cls, exc), source) from None
    return job


def fixed_field_changes(old: Job, new: Job) -> list[str]:
    """What an edit from ``old`` to ``new`` changes that cannot change after creation, one line each.

    ``elastic.minReplicas`` and ``maxReplicas`` (reference §3.5: they "cannot be changed once the
    job is created"; the CRDs hold the same rule). Empty when the edit may be applied.
    """
    out = []
    for field, attr in (("minReplicas", "min_replicas"), ("maxReplicas", "max_replicas")):
        before = getattr(getattr(old.spec, "elastic", None), attr, None)
        after = getattr(getattr(new.spec, "elastic", None), attr, None)
        if before != after:
            out.append(f"spec.elastic.{field}: cannot be changed once the job is created ({before} -> {after})")
    return out


def _format_errors(cls: type[BaseModel], exc: ValidationError) -> list[str]:
    out: list[str] = []
    for err in exc.errors(include_url=False):
        loc = [p for p in err["loc"] if not _is_union_tag(p)]
        path = _path(loc)
        kind = err["type"]
        msg = err["msg"]
        if kind == "extra_forbidden":
            field = loc[-1] if loc else "?"
            known = _known_fields(cls, loc[:-1])
            near = difflib.get_close_matches(str(field), known, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            accepted = f"; accepted: {', '.join(known)}" if known else ""
            out.append(f"{path}: unknown field{hint}{accepted}")
            continue
        if kind == "missing":
            out.append(f"{path}: required field is missing")
            continue
        if kind == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            out.append(f"{path}: {_short(err.get('input'))} is not accepted; expected {expected}")
            continue
        error = (err.get("ctx") or {}).get("error")
        if isinstance(error, FieldError):
            # A check about a field below the validated one: its path is joined to this one's.
            sub = error.path
            if sub:
                path = f"{path}{sub}" if sub.startswith("[") or not path else f"{path}.{sub}"
            out.append(f"{path}: {error.message}")
            continue
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
            head, sep, rest = msg.partition(": ")
            if sep and path.endswith("template") and head.startswith("spec"):
                # A pod-template check names its own sub-path: join it to the field path.
                path, msg = f"{path}.{head}", rest
        if kind.endswith("_type") or kind.endswith("_parsing"):
            got = err.get("input")
            msg = f"{msg} (got {type(got).__name__} {_short(got)})"
        out.append(f"{path}: {msg}" if path else msg)
    # A union of list-or-string reports one error per member; keep each message once.
    return list(dict.fromkeys(out))


def _is_union_tag(part: Any) -> bool:
    return isinstance(part, str) and ("[" in part or part in {"str", "int", "bool", "function-after"})


def _path(loc: list[Any]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _known_fields(cls: type[BaseModel], loc: list[Any]) -> list[str]:
    """The wire names of the model found by walking ``loc`` from ``cls`` (empty if not a model)."""
    current: Any = cls
    for part in loc:
        current = _unwrap(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            nxt = None
            for name, field in current.model_fields.items():
                if part in (field.alias, name):
                    nxt = field.annotation
                    break
            current = nxt
        else:
            return []
    current = _unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or n for n, f in current.model_fields.items()]
    return []


def _unwrap(tp: Any) -> Any:
    """Strip Optional/Annotated/list wrappers down to a model class when there is one."""
    for _ in range(6):
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            models = [a for a in members if isinstance(a, type) and issubclass(a, BaseModel)]
            tp = models[0] if models else (members[0] if members else tp)
        else:
            break
    return tp
