"""GenericJob's variables as a manifest writes them (reference §2.2), checked against the job.

``$(replicas[TYPE])``, ``$(service.TYPE[RANK].host)`` and ``$(service.port[NAME])`` in a replica's
command, args and env values are expanded for each replica (``t9k_jobs.frameworks.genericjob``).
One that names nothing the job has would stay as text and fail the program far from the cause, so
:func:`check_generic_tokens` refuses it when the job is read, naming what there is.
"""

from __future__ import annotations

import re
from typing import Any

from .fields import FieldError

#: A token of GenericJob's grammar (reference §2.2) as written: ``$(replicas[...])`` or
#: ``$(service....[...]...)``; brackets are in no environment variable's name, so such a token is
#: never Kubernetes' own ``$(VAR)``. ``$$(`` is Kubernetes' escape of a literal ``$(``.
_GENERIC_TOKEN = re.compile(r"(?<!\$)\$\((?P<body>service\.[^()\s]*\[[^()\s]*|replicas\[[^()\s]*)\)")
_GENERIC_FORMS = re.compile(
    r"replicas\[(?P<rtype>[^\]]+)\]|service\.port\[(?P<port>[^\]]+)\]|service\.(?P<stype>[a-z0-9-]+)\[(?P<srank>\d+)\]\.host"
)


def check_generic_tokens(where: str, template: dict[str, Any], counts: dict[str, int], ports: list[str] | None) -> None:
    """Every GenericJob token in the template's commands, args and env values names something the
    job has (reference §2.2): a replica type of ``replicaSpecs``, a rank below its ``replicas``, a
    named port of ``spec.service.ports``, and for a ``service`` token a ``spec.service`` at all
    (``ports``: None). One that names nothing would stay as text in the replica's command and fail
    it far from the cause. Raises :class:`FieldError` at the value holding it, naming what there is."""
    spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(spec, dict):
        return
    types = ", ".join(counts)
    for key in ("initContainers", "containers"):
        for j, c in enumerate(spec.get(key) or []):
            if not isinstance(c, dict):
                continue
            values = [(f"{field}[{k}]", v) for field in ("command", "args") for k, v in enumerate(c.get(field) or [])]
            values += [(f"env[{k}].value", e.get("value")) for k, e in enumerate(c.get("env") or []) if isinstance(e, dict)]
            for at, value in values:
                if not isinstance(value, str):
                    continue
                for token in _GENERIC_TOKEN.finditer(value):
                    problem = _token_problem(token["body"], counts, ports, types)
                    if problem is not None:
                        raise FieldError(f"{where}.spec.{key}[{j}].{at}", f"$({token['body']}) {problem}")


def _token_problem(body: str, counts: dict[str, int], ports: list[str] | None, types: str) -> str | None:
    """Why the GenericJob token ``$(body)`` names nothing, or None when it names something."""
    form = _GENERIC_FORMS.fullmatch(body)
    if form is None:
        return (
            "is not a GenericJob variable: $(replicas[TYPE]), $(service.TYPE[RANK].host) and "
            "$(service.port[NAME]) are (reference: T9k's GenericJob)"
        )
    if form["rtype"] is not None:
        if form["rtype"] not in counts:
            return f"names no replica type of replicaSpecs (types: {types})"
        return None
    if ports is None:
        return (
            "needs spec.service, which the job lacks: add spec.service.ports (the replicas' Services "
            "and their ports), or give the address another way"
        )
    if form["port"] is not None:
        if form["port"] not in ports:
            have = ", ".join(ports) if ports else "none with a name"
            return f"names no port of spec.service.ports (named ports: {have})"
        return None
    stype, rank = form["stype"], int(form["srank"])
    if stype not in counts:
        return f"names no replica type of replicaSpecs (types: {types})"
    if rank >= counts[stype]:
        n = counts[stype]
        return f"names rank {rank}, but type {stype!r} has {n} replica{'s' if n != 1 else ''} (ranks from 0 to {n - 1})" if n else f"names rank {rank}, but type {stype!r} has no replica"
    return None


__all__ = ["check_generic_tokens"]
