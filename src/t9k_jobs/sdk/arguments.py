"""The one check of what the verbs are given, before any of them acts.

Every method of :class:`t9k_jobs.Client` (so every CLI verb, which goes through it) has its
arguments checked here first: :func:`check_arguments` is wrapped around the methods of each
target once, when the target's class is defined, so no path reaches a runtime unchecked.

What is refused, each with :class:`~t9k_jobs.errors.UsageError` (exit code 2) and one line naming
the argument and what it accepts:

* a verb on one job (get, describe, wait, logs, delete, pause, resume, scale, edit) without a name:
  ``None``, ``""``, only whitespace (kubectl: "resource name may not be empty"). Without this,
  ``delete gj ""`` became a DELETE of the collection URL on a cluster (every job of the kind in
  the namespace) and acted on the newest run of any name locally;
* a name or namespace that cannot be one path segment of a URL: ``.``, ``..``, or holding ``/``,
  ``%`` (client-go's ``IsValidPathSegmentName``);
* a name no job can have: not an RFC 1123 subdomain (lower-case letters, digits, ``-`` and ``.``,
  at most 253), as the API server validates a custom resource's name; a namespace that is not an
  RFC 1123 label (at most 63, no ``.``), as it validates a Namespace's. Refused here, before any
  connection or credential plugin, instead of as a ``NotFound`` after a round trip (issue 33);
* an argument of the wrong type: ``name=5``, ``replicas="3"``, ``tail=1.5``, ``follow="no"``.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar, Union

from ..api import GROUP, KINDS, JobBase
from ..errors import UsageError
from ..words import check_name, check_segment, type_name

F = TypeVar("F", bound=Callable[..., Any])

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

#: The verbs that act on one job: their ``name`` is required.
ONE_JOB_VERBS = frozenset(
    {"get", "wait", "logs", "delete", "pause", "resume", "scale", "edit", "view", "open_logs", "open_raw_log"}
)


def _kind(value: Any, what: str) -> None:
    if isinstance(value, type) and issubclass(value, JobBase):
        return
    if not isinstance(value, str):
        raise UsageError(
            f"{what}: expected a kind (a string such as 'gj' or 'PyTorchTrainingJob', or a job class), "
            f"got {type_name(value)} {value!r}"
        )
    if not value.strip():
        raise UsageError(f"{what}: a kind is required (gj, pj, dj, caij or their full names); got {value!r}")


def _optional_str(value: Any, what: str) -> None:
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{what}: expected a string or None, got {type_name(value)} {value!r}")


#: The container engines a local client may run replicas with (:data:`t9k_jobs.local.podman.ENGINES`,
#: not imported here: a cluster client loads no local runtime).
CONTAINER_ENGINES = ("podman",)


def _engine(value: Any, what: str) -> None:
    if value is not None and value not in CONTAINER_ENGINES:
        raise UsageError(f"{what}: expected one of {', '.join(map(repr, CONTAINER_ENGINES))} or None, got {value!r}")


def _bool(value: Any, what: str) -> None:
    if not isinstance(value, bool):
        raise UsageError(f"{what}: expected True or False, got {type_name(value)} {value!r}")


def _count(value: Any, what: str, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        accepted = "an integer of 0 or more" + (" or None" if optional else "")
        raise UsageError(f"{what}: expected {accepted}, got {type_name(value)} {value!r}")
    if value < 0:
        raise UsageError(f"{what}: expected an integer of 0 or more, got {value}")


def _duration(value: Any, what: str) -> None:
    if value is None:
        return
    if isinstance(value, str):
        parse_duration(value)  # its message quotes the duration: "bad duration 'soon': ..."
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(
            f"{what}: expected seconds (a number) or a duration such as '30s', '5m', got {type_name(value)} {value!r}"
        )
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{what}: expected a finite number of seconds, zero or more, got {value!r}")


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go-like duration (``30s``, ``5m``, ``1h30m``, ``500ms``) or a plain number of
    seconds (``90``, ``2.5``). Raises :class:`UsageError` for anything else or a negative value."""
    value = text.strip()
    try:
        result = float(value)
    except ValueError:
        pos, result = 0, 0.0
        for match in _DURATION.finditer(value):
            if match.start() != pos:
                break
            result += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
            pos = match.end()
        if pos != len(value) or not value:
            raise UsageError(
                f"bad duration {text!r}: use seconds or a Go duration such as 30s, 5m, 1h30m"
            ) from None
    if not math.isfinite(result):
        raise UsageError(f"bad duration {text!r}: it must be a finite number of seconds")
    if result < 0:
        raise UsageError(f"bad duration {text!r}: it must be zero or more")
    return result


def _path(value: Any, what: str) -> None:
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise UsageError(f"{what}: expected a path (str or os.PathLike) or None, got {type_name(value)} {value!r}")


def _job(value: Any, what: str) -> None:
    if isinstance(value, (str, os.PathLike, dict, JobBase)):
        return
    raise UsageError(
        f"{what}: expected a manifest path ('-' for standard input), a mapping or a job model, "
        f"got {type_name(value)} {value!r}"
    )


def _phase(value: Any, what: str) -> None:
    if not isinstance(value, str):
        raise UsageError(f"{what}: expected Succeeded, Failed or Running, got {type_name(value)} {value!r}")


def _namespace(value: Any, what: str) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise UsageError(f"{what}: expected a namespace (a string) or None, got {type_name(value)} {value!r}")
    if not value.strip():
        raise UsageError(f"{what}: {value!r} is empty; give a namespace or leave it out")
    check_segment(value, what)
    if len(value) > 63 or not _LABEL.fullmatch(value):
        raise UsageError(
            f"{what}: {value!r} is not a namespace: lower-case letters, digits and '-', starting and ending "
            "with a letter or digit, at most 63 characters (RFC 1123 label)"
        )


#: How each parameter of the Client's methods is checked: (check, the name used in messages).
_CHECKS: dict[str, Callable[[Any, str], None]] = {
    "kind": _kind,
    "namespace": _namespace,
    "replica_type": _optional_str,
    "container": _optional_str,
    "context": _optional_str,
    "gpus": _optional_str,
    "container_engine": _engine,
    "phase": _phase,
    "index": lambda v, w: _count(v, w, optional=True),
    "tail": lambda v, w: _count(v, w, optional=True),
    "replicas": lambda v, w: _count(v, w, optional=False),
    "follow": _bool,
    "timestamps": _bool,
    "previous": _bool,
    "purge": _bool,
    "watch": _bool,
    "all_namespaces": _bool,
    "allow_duplicate": _bool,
    "timeout": _duration,
    "request_timeout": _duration,
    "run_dir": _path,
    "runs_dir": _path,
    "kubeconfig": _path,
    "job": _job,
}


def check_arguments(verb: str, arguments: dict[str, Any]) -> None:
    """Check the bound ``arguments`` of the Client method ``verb`` (see the module docstring).
    Raises :class:`UsageError`."""
    for param, value in arguments.items():
        if param == "name":
            if verb in ONE_JOB_VERBS or value is not None:
                check_name(value)
            continue
        if param == "kind" and value is None and verb in ("summaries", "views"):
            continue
        if param == "replicas" and value is None and verb == "edit":  # only scale needs them
            continue
        check = _CHECKS.get(param)
        if check is not None:
            check(value, param)


def checked(fn: F) -> F:
    """``fn`` (a Client method) with its arguments checked by :func:`check_arguments` first."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError as exc:
            raise UsageError(f"{fn.__name__}: {exc}") from None
        bound.apply_defaults()
        check_arguments(fn.__name__, {k: v for k, v in bound.arguments.items() if k != "self"})
        return fn(self, *args, **kwargs)

    wrapper.__t9k_checked__ = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


# ----------------------------------------------------------------------------- kinds, durations, phases

#: What names a kind: ``"pj"``, ``"PyTorchTrainingJob"``, ``"pytorchtrainingjobs"``, or the class.
KindLike = Union[str, type[JobBase]]
#: Seconds, or a duration string (``30s``, ``5m``, ``1h30m``).
Duration = Union[float, int, str, None]
#: The phases ``wait`` waits for.
WAIT_PHASES = ("Succeeded", "Failed", "Running")


def resolve_kind(kind: KindLike) -> str:
    """The kind ``kind`` names: a model class, a kind (``GenericJob``), its plural, in any case, a
    ``kind.group`` form (``genericjobs.batch.tensorstack.dev``) or a short name (``gj pj dj caij``,
    from :mod:`t9k_jobs.api.kinds`). Raises :class:`UsageError` naming the accepted forms."""
    if isinstance(kind, type) and issubclass(kind, JobBase):
        return kind.KIND
    text = str(kind)
    word = text.strip().lower()
    if word.endswith("." + GROUP):
        word = word[: -len(GROUP) - 1]
    for name, cls in KINDS.items():
        if word in (name.lower(), name.lower() + "s", cls.PLURAL.lower(), cls.SHORT_NAME):
            return name
    accepted = ", ".join(f"{name} ({cls.SHORT_NAME})" for name, cls in KINDS.items())
    raise UsageError(f"unknown kind {text!r}: use one of {accepted}, or their plurals")


def seconds(value: Duration) -> float | None:
    """``value`` in seconds (None stays None); raises :class:`UsageError` for a bad duration (a
    string that is not one, a negative number, NaN or infinity)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):  # NaN compares false with everything: a wait would never end
            raise UsageError(f"bad duration {value!r}: it must be a finite number of seconds")
        if value < 0:
            raise UsageError(f"bad duration {value!r}: it must be zero or more")
        return float(value)
    return parse_duration(str(value))


def wait_phase(target: str) -> str:
    """The phase ``target`` names (any case), one of :data:`WAIT_PHASES`; raises
    :class:`UsageError` for anything else."""
    wanted = next((p for p in WAIT_PHASES if p.lower() == target.strip().lower()), None)
    if wanted is None:
        raise UsageError(f"--for={target!r} is not accepted: use Succeeded, Failed or Running")
    return wanted


__all__ = [
    "ONE_JOB_VERBS",
    "WAIT_PHASES",
    "Duration",
    "KindLike",
    "check_arguments",
    "checked",
    "parse_duration",
    "resolve_kind",
    "seconds",
    "wait_phase",
]
