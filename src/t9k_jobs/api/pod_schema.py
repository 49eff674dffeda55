"""A replica's pod template checked as the API server checks a Pod, before any plug-in reads it.

T9k passes a replica's ``template`` through to its pods, so the template is refused here for what
the API server would refuse in the pods made from it, with the field path, instead of after the
job was accepted (a plug-in reading ``volumes: 5``, a pod the API server will not create):

- **types** of every field Kubernetes defines in a PodTemplateSpec (``volumes``, ``volumeMounts``,
  ``resources``, ``env``, ``envFrom``, ``ports``, probes, ``securityContext``...): the shapes
  of the Kubernetes OpenAPI (``k8s.io/api/core/v1``), as the ``kubernetes_asyncio`` client's
  models give them, held in ``pod_types.json`` beside this module (generated: ``python -m
  t9k_jobs.api.pod_schema --write``). Fields Kubernetes requires (a volume's ``name``, a mount's ``mountPath``, a port's
  ``containerPort``) are required. Fields it does not define are kept, unchecked: T9k passes the
  template through, and a newer cluster knows fields this client does not;
- **values** the API server checks in ``ValidatePodSpec`` (``pkg/apis/core/validation``) for what
  plug-ins and runtimes read: resource quantities (syntax, not negative, whole extended
  resources such as ``nvidia.com/gpu``, requests not above limits), volumes (DNS-label names,
  unique, one volume source), volume mounts (a volume of the pod, a ``mountPath``, unique per
  container, a relative ``subPath`` without ``..``), env sources (one of ``value`` and
  ``valueFrom``; one source in ``valueFrom``, ``envFrom``), container ports (1-65535, protocol,
  IANA service names, unique) and the template's labels and annotations (Kubernetes' syntax).

A ``null`` value is taken as the field left out, as the API server reads it into a Pod: the
template returned has no ``null`` mapping values, so nothing downstream sees one.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from .fields import INT64_MAX, FieldError

#: The model of a PodTemplateSpec in :data:`MODELS`.
POD_TEMPLATE = "V1PodTemplateSpec"
GENERATE_COMMAND = "python -m t9k_jobs.api.pod_schema --write"
#: The generated table of the Kubernetes models a PodTemplateSpec holds (:func:`generate_types`).
TYPES_FILE = Path(__file__).with_name("pod_types.json")


def _load_models() -> dict[str, tuple[dict[str, str], tuple[str, ...]]]:
    table = json.loads(TYPES_FILE.read_text(encoding="utf-8"))["models"]
    return {name: (m["fields"], tuple(m["required"])) for name, m in table.items()}


#: ``{model: ({wire name: OpenAPI type}, required wire names)}``, read from :data:`TYPES_FILE`.
MODELS = _load_models()

#: Fields whose values are Kubernetes quantities (``resource.Quantity``): a string such as ``500m``
#: or ``4Gi``, or a number. The client's models type them as strings.
_QUANTITY_MAPS = {("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"), ("V1PodSpec", "overhead")}
_QUANTITY_FIELDS = {("V1EmptyDirVolumeSource", "sizeLimit"), ("V1ResourceFieldSelector", "divisor")}
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_SUFFIX = {
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60, "n": Decimal("1e-9"), "u": Decimal("1e-6"),
    "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"),
    "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
}  # fmt: skip
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_TYPE_WORDS = {"str": "a string", "int": "an integer", "bool": "true or false", "float": "a number",
               "datetime": "an RFC 3339 time (a string)", "date": "a date (a string)"}  # fmt: skip
_PROTOCOLS = ("TCP", "UDP", "SCTP")
#: The API server's limit on a pod's annotations, keys and values together (bytes).
_ANNOTATIONS_MAX = 256 * 1024


def check_pod_template(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` (a PodTemplateSpec mapping) without its ``null`` values, checked as the API
    server checks a Pod made from it (see the module docstring).

    Raises :class:`~.common.FieldError` whose ``path`` is relative to the template
    (``spec.volumes[0].name``, ``spec.containers[0].resources.limits['nvidia.com/gpu']``) and
    whose message says what is accepted there.
    """
    clean = _check(template, POD_TEMPLATE, "", MODELS)
    spec = clean.get("spec")
    if isinstance(spec, dict):
        _check_values(spec)
    meta = clean.get("metadata")
    if isinstance(meta, dict):
        _check_meta(meta, "metadata")
    return clean


def check_resources(resources: Any, path: str = "") -> dict[str, Any]:
    """A container's ``resources`` (Kubernetes ResourceRequirements) checked as in a pod
    (:func:`check_pod_template`), without ``null`` values; raises :class:`~.common.FieldError`
    with ``path`` relative to ``resources`` (``limits.cpu``)."""
    clean = _check(resources, "V1ResourceRequirements", path, MODELS)
    _check_quantities(clean, path)
    return clean


# --------------------------------------------------------------------------- types


def _join(path: str, key: str) -> str:
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _short(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _kind_word(model: str) -> str:
    """``V1VolumeMount`` -> ``VolumeMount``: the Kubernetes type's name in a message."""
    return re.sub(r"^(?:Core)?V\d+(?:alpha\d+|beta\d+)?", "", model)


def _check(value: Any, type_: str, path: str, models: dict[str, Any], owner: tuple[str, str] | None = None) -> Any:
    """``value`` checked against the OpenAPI type ``type_`` (``str``, ``list[V1Volume]``,
    ``dict(str, str)``, a model name), returned without ``null`` mapping values."""
    m = re.fullmatch(r"list\[(.+)\]", type_)
    if m:
        if not isinstance(value, list):
            raise FieldError(path, f"must be a list, not {_short(value)}")
        return [_check(v, m[1], f"{path}[{i}]", models, owner) for i, v in enumerate(value)]
    m = re.fullmatch(r"dict\(str, (.+)\)", type_)
    if m:
        if not isinstance(value, dict):
            raise FieldError(path, f"must be a mapping of names to values, not {_short(value)}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise FieldError(path, f"key {k!r} must be a string")
            if v is None:
                continue
            if owner in _QUANTITY_MAPS:
                _check_quantity(v, _join(path, k))
                out[k] = v
            else:
                out[k] = _check(v, m[1], _join(path, k), models)
        return out
    if type_ in models:
        fields, required = models[type_]
        if not isinstance(value, dict):
            raise FieldError(path, f"must be a mapping (a Kubernetes {_kind_word(type_)}), not {_short(value)}")
        out = {}
        for k, v in value.items():
            if v is None:
                continue
            if k in fields and (type_, k) in _QUANTITY_FIELDS:
                _check_quantity(v, _join(path, k))
                out[k] = v
            elif k in fields:
                out[k] = _check(v, fields[k], _join(path, k), models, (type_, k))
            else:
                out[k] = v  # a field this client does not know: passed through, as T9k does
        for k in required:
            if k not in out:
                raise FieldError(_join(path, k), f"required in a Kubernetes {_kind_word(type_)}")
        return out
    if type_ == "object":  # an IntOrString (a port by number or name)
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise FieldError(path, f"must be a number or a name (a string), not {_short(value)}")
        return value
    if type_ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldError(path, f"must be an integer, not {_short(value)}")
        if abs(value) > INT64_MAX:
            raise FieldError(path, f"must be at most {INT64_MAX} (an int64)")
        return value
    if type_ == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FieldError(path, f"must be a number, not {_short(value)}")
        return value
    if type_ == "bool":
        if not isinstance(value, bool):
            raise FieldError(path, f"must be true or false, not {_short(value)}")
        return value
    if not isinstance(value, str):
        raise FieldError(path, f"must be {_TYPE_WORDS.get(type_, 'a string')}, not {_short(value)}")
    if "\0" in value:
        raise FieldError(path, "must not contain a NUL character")
    return value


# --------------------------------------------------------------------------- quantities


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (``500m``, ``4Gi``, ``1e3``, ``2``) as a number; raises ``ValueError``
    for anything else (``big``, ``1.5.2``, ``.inf``, ``true``) and for one whose size is past
    what Kubernetes holds (2**63, its int64)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("not a quantity")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("not a finite number")
    m = _QUANTITY.match(value if isinstance(value, str) else str(value))
    if not isinstance(value, str):
        amount = Decimal(str(value))
    elif not m:
        raise ValueError("not a quantity")
    else:
        number, suffix = m[1], m[2] or ""
        exponent = int(suffix[1:]) if suffix[:1] in ("e", "E") and len(suffix) > 1 else None
        if exponent is not None and abs(exponent) > 30:
            raise ValueError("exponent out of range")
        amount = Decimal(number) * (Decimal(10) ** exponent if exponent is not None else _SUFFIX[suffix])
    if abs(amount) >= 2**63:
        raise ValueError("out of range")
    return amount


def _check_quantity(value: Any, path: str) -> Decimal:
    try:
        return parse_quantity(value)
    except ValueError:
        raise FieldError(
            path, f"{_short(value)} is not a quantity: a number with an optional suffix, e.g. 2, 500m, 4Gi, 1e3"
        ) from None


def _extended(name: str) -> bool:
    """Whether ``name`` is an extended resource (``nvidia.com/gpu``): outside ``kubernetes.io``
    and not a native one (cpu, memory, ephemeral-storage, hugepages-*)."""
    if "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def _check_quantities(resources: dict[str, Any], path: str) -> None:
    """As ``ValidateResourceRequirements``: quantities not negative, extended resources whole
    numbers with requests equal to limits when both are given, requests not above limits."""
    values: dict[str, dict[str, Decimal]] = {}
    for part in ("limits", "requests"):
        for name, raw in (resources.get(part) or {}).items():
            where = _join(_join(path, part), name)
            amount = _check_quantity(raw, where)
            if amount < 0:
                raise FieldError(where, f"{raw!r} must not be negative")
            if _extended(name) and amount != amount.to_integral_value():
                raise FieldError(where, f"{raw!r} must be a whole number ({name} is an extended resource)")
            values.setdefault(part, {})[name] = amount
    limits, requests = values.get("limits", {}), values.get("requests", {})
    for name, amount in requests.items():
        if name not in limits:
            continue
        where = _join(_join(path, "requests"), name)
        if _extended(name) and amount != limits[name]:
            raise FieldError(where, f"must equal limits[{json.dumps(name)}] ({name} is an extended resource)")
        if amount > limits[name]:
            raise FieldError(where, f"{resources['requests'][name]!r} must not be above limits[{json.dumps(name)}]")


# --------------------------------------------------------------------------- values


#: The fields of a Volume that are its source (all but ``name``).
_VOLUME_SOURCES = frozenset(MODELS["V1Volume"][0]) - {"name"}


def _check_values(spec: dict[str, Any]) -> None:
    """The value checks of ``ValidatePodSpec`` for what plug-ins and runtimes read."""
    volumes: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or []):
        where = f"spec.volumes[{i}]"
        name = volume["name"]
        if len(name) > 63 or not _DNS_LABEL.match(name):
            raise FieldError(f"{where}.name", f"{name!r} must be a DNS label (lower-case letters, digits, '-'; at most 63)")
        if name in volumes:
            raise FieldError(f"{where}.name", f"{name!r} is the name of another volume of the pod")
        volumes.add(name)
        sources = [k for k in volume if k in _VOLUME_SOURCES]
        if len(sources) > 1:
            raise FieldError(where, f"one volume source per volume, not {len(sources)} ({', '.join(sources)})")
        if not sources and set(volume) == {"name"}:
            raise FieldError(where, "a volume source is required (emptyDir, configMap, secret, persistentVolumeClaim...)")
    seen_ports: dict[str, str] = {}
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            where = f"spec.{key}[{i}]"
            _check_mounts(c, where, volumes)
            _check_env(c, where)
            _check_ports(c, where, seen_ports)
            if "resources" in c:
                _check_quantities(c["resources"], f"{where}.resources")
    if "resources" in spec:
        _check_quantities(spec["resources"], "spec.resources")


def _check_mounts(c: dict[str, Any], where: str, volumes: set[str]) -> None:
    paths: dict[str, int] = {}
    for j, mount in enumerate(c.get("volumeMounts") or []):
        at = f"{where}.volumeMounts[{j}]"
        if mount["name"] not in volumes:
            known = ", ".join(sorted(volumes)) or "none"
            raise FieldError(f"{at}.name", f"{mount['name']!r} is not a volume of the pod (volumes: {known})")
        path = mount["mountPath"]
        if not path:
            raise FieldError(f"{at}.mountPath", "must not be empty")
        if path in paths:
            raise FieldError(f"{at}.mountPath", f"{path!r} is also volumeMounts[{paths[path]}]; each path once")
        paths[path] = j
        sub = mount.get("subPath") or ""
        if sub.startswith("/") or ".." in sub.split("/"):
            raise FieldError(f"{at}.subPath", f"{sub!r} must be a relative path without '..'")


def check_env_vars(env: Any, path: str = "") -> list[dict[str, Any]]:
    """A container's ``env`` (Kubernetes EnvVars) checked as in a pod (:func:`check_pod_template`),
    without ``null`` values; raises :class:`~.common.FieldError` with ``path`` relative to
    ``env`` (``[0].valueFrom``)."""
    clean: list[dict[str, Any]] = _check(env, "list[V1EnvVar]", path, MODELS)
    _check_env_list(clean, path)
    return clean


def _check_env(c: dict[str, Any], where: str) -> None:
    _check_env_list(c.get("env") or [], f"{where}.env")
    for j, entry in enumerate(c.get("envFrom") or []):
        given = [k for k in ("configMapRef", "secretRef") if k in entry]
        if len(given) != 1:
            raise FieldError(f"{where}.envFrom[{j}]", "exactly one of configMapRef and secretRef is required")


def _check_env_list(env: list[dict[str, Any]], where: str) -> None:
    for j, entry in enumerate(env):
        at = f"{where}[{j}]"
        source = entry.get("valueFrom")
        if source is None:
            continue
        if entry.get("value"):
            raise FieldError(at, "value and valueFrom: give one of the two")
        given = [k for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef") if k in source]
        if len(given) != 1:
            raise FieldError(
                f"{at}.valueFrom",
                "exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef is required"
                + (f" (found: {', '.join(given)})" if given else ""),
            )


def _check_ports(c: dict[str, Any], where: str, seen: dict[str, str]) -> None:
    names: set[str] = set()
    for j, port in enumerate(c.get("ports") or []):
        at = f"{where}.ports[{j}]"
        number = port["containerPort"]
        if not 1 <= number <= 65535:
            raise FieldError(f"{at}.containerPort", f"{number} must be between 1 and 65535")
        host = port.get("hostPort")
        if host is not None and not 0 <= host <= 65535:
            raise FieldError(f"{at}.hostPort", f"{host} must be between 1 and 65535 (or 0: none)")
        protocol = port.get("protocol", "TCP")
        if protocol not in _PROTOCOLS:
            raise FieldError(f"{at}.protocol", f"{protocol!r} is not accepted; expected one of TCP, UDP, SCTP")
        name = port.get("name")
        if name is not None:
            if len(name) > 15 or not _IANA_SVC_NAME.match(name) or "--" in name or not re.search("[a-z]", name):
                raise FieldError(
                    f"{at}.name",
                    f"{name!r} must be an IANA service name: at most 15 lower-case letters, digits and '-', "
                    "with a letter, no '--', starting and ending with a letter or digit",
                )
            if name in names:
                raise FieldError(f"{at}.name", f"{name!r} names another port of the container")
            names.add(name)


def _check_meta(meta: dict[str, Any], where: str) -> None:
    for key, value in (meta.get("labels") or {}).items():
        _check_key(key, f"{where}.labels")
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            raise FieldError(
                _join(f"{where}.labels", key),
                f"{value!r} is not a label value: at most 63 letters, digits, '-', '_' and '.', starting and "
                "ending with a letter or digit (or empty)",
            )
    size = 0
    for key, value in (meta.get("annotations") or {}).items():
        _check_key(key, f"{where}.annotations")
        size += len(key.encode()) + len(value.encode())
    if size > _ANNOTATIONS_MAX:
        raise FieldError(f"{where}.annotations", f"{size} bytes, more than the {_ANNOTATIONS_MAX} the API server accepts")


def _check_key(key: str, where: str) -> None:
    """A label or annotation key: an optional DNS-subdomain prefix and ``/``, then a name of at
    most 63 letters, digits, ``-``, ``_``, ``.`` (Kubernetes' qualified names)."""
    prefix, _, name = key.rpartition("/")
    ok = 0 < len(name) <= 63 and _QUALIFIED.match(name) and (
        not prefix and "/" not in key or len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)
    )
    if not ok:
        raise FieldError(
            _join(where, key),
            "not a valid key: an optional DNS-subdomain prefix and '/', then a name of at most 63 letters, "
            "digits, '-', '_' and '.', starting and ending with a letter or digit",
        )


# --------------------------------------------------------------------------- generating pod_types.json


def generate_types() -> str:
    """The text of :data:`TYPES_FILE` (JSON): every model reachable from ``V1PodTemplateSpec`` in the
    ``kubernetes_asyncio`` client, as ``{wire name: OpenAPI type}`` and the names it requires."""
    import importlib
    import inspect

    import kubernetes_asyncio

    models = importlib.import_module("kubernetes_asyncio.client.models")
    found: dict[str, tuple[dict[str, str], list[str]]] = {}
    todo = [POD_TEMPLATE]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        cls = getattr(models, name)
        fields: dict[str, str] = {}
        required: list[str] = []
        for attr, type_ in cls.openapi_types.items():
            wire = cls.attribute_map[attr]
            fields[wire] = type_
            if "must not be `None`" in inspect.getsource(getattr(cls, attr).fset):
                required.append(wire)
            inner = type_
            while True:
                m = re.fullmatch(r"list\[(.+)\]|dict\(str, (.+)\)", inner)
                if not m:
                    break
                inner = m[1] or m[2]
            if inner[:1].isupper():
                todo.append(inner)
        found[name] = (fields, required)
    table = {
        "generated": f"from kubernetes_asyncio {kubernetes_asyncio.__version__} by: {GENERATE_COMMAND}; do not edit",
        "models": {
            name: {"fields": dict(sorted(fields.items())), "required": sorted(required)}
            for name, (fields, required) in sorted(found.items())
        },
    }
    return json.dumps(table, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m t9k_jobs.api.pod_schema [--write | --check]``: print, write or check
    :data:`TYPES_FILE` (``--check`` returns 1 when it is out of date)."""
    parser = argparse.ArgumentParser(prog="python -m t9k_jobs.api.pod_schema", description=generate_types.__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"write {TYPES_FILE.name}")
    group.add_argument("--check", action="store_true", help=f"exit 1 if {TYPES_FILE.name} is out of date")
    args = parser.parse_args(argv)
    text = generate_types()
    if args.write:
        TYPES_FILE.write_text(text, encoding="utf-8")
    elif args.check:
        if TYPES_FILE.read_text(encoding="utf-8") != text:
            print(f"{TYPES_FILE} is out of date; regenerate with: {GENERATE_COMMAND}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
