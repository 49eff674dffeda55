"""CustomResourceDefinitions (``apiextensions.k8s.io/v1``) generated from the API models.

The schema of each kind is pydantic's JSON schema of the model (``by_alias=True``,
validation mode) rewritten into the *structural* OpenAPI v3 subset that Kubernetes
accepts: references inlined, ``Optional`` unions collapsed, ``title``/``default``/``const``
removed, numeric bounds in the OpenAPI 3.0 form, pod templates and the marked unions kept as
``x-kubernetes-preserve-unknown-fields`` / ``x-kubernetes-int-or-string`` nodes. Defaults are
left out on purpose: the controller applies them, the API server does not persist them.
A few cross-field checks of the models are added as CEL rules (``x-kubernetes-validations``).

Regenerate the committed files with::

    python -m t9k_jobs.deploy.crd --write deploy/crds

and check them with ``--check deploy/crds`` (exit status 1 when they are out of date).
"""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path
from typing import Any

import yaml

from ..api.common import GROUP, VERSION, JobStatus
from . import generator_parser, report_check, stale_files, write_files
from ..api.kinds import KINDS, JobBase

__all__ = [
    "CATEGORIES",
    "GENERATE_COMMAND",
    "check_crds",
    "crd_filename",
    "crd_for",
    "generate_crds",
    "main",
    "structural_schema",
]

GENERATE_COMMAND = "python -m t9k_jobs.deploy.crd --write deploy/crds"
HEADER = f"# Generated from the API models by: {GENERATE_COMMAND}. Do not edit.\n"
CATEGORIES = ["all", "t9k", "t9k-jobs"]

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"

# Keys copied as they are (after the rewrites below); any other JSON-schema keyword is an error,
# so a model change that pydantic renders in a new way is noticed instead of leaking into a CRD.
_SCALAR_KEYS = (
    "description",
    "type",
    "format",
    "enum",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)
# The order keys are written in, so the generated files are stable and easy to read.
_KEY_ORDER = (
    *_SCALAR_KEYS,
    "items",
    "properties",
    "additionalProperties",
    "required",
    PRESERVE,
    INT_OR_STRING,
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-validations",
)
_DROPPED = ("title", "default", "examples", "readOnly", "writeOnly", "deprecated")
_X_KEYS = tuple(k for k in _KEY_ORDER if k.startswith("x-kubernetes-"))

_NULL = {"type": "null"}


# --------------------------------------------------------------------------- schema rewriting


def structural_schema(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Rewrite a pydantic JSON schema node into Kubernetes' structural OpenAPI v3 subset.

    ``schema`` is a node of ``model_json_schema(by_alias=True, mode="validation")``; ``defs``
    is that schema's ``$defs`` (defaults to ``schema["$defs"]``). Returns a new dict, every
    node of which has a ``type`` unless it carries ``x-kubernetes-preserve-unknown-fields`` or
    ``x-kubernetes-int-or-string``. The input is not changed.

    Raises ``ValueError`` naming the node's path for what the structural subset cannot say:
    an unknown ``$ref``, a recursive model, an ``allOf`` of several schemas, a union of several
    non-null types not marked with one of the two extensions, a node whose type cannot be
    told, or a JSON-schema keyword this rewriter does not know.
    """
    if defs is None:
        defs = schema.get("$defs", {})
    return _convert(schema, defs, "<root>", ())


def _convert(node: dict[str, Any], defs: dict[str, Any], path: str, refs: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise ValueError(f"{path}: a schema node must be a mapping, not {type(node).__name__}")
    node = {k: v for k, v in node.items() if k not in _DROPPED and k != "$defs"}

    if "$ref" in node:
        ref = node.pop("$ref")
        prefix = "#/$defs/"
        if not isinstance(ref, str) or not ref.startswith(prefix) or ref[len(prefix) :] not in defs:
            raise ValueError(f"{path}: cannot resolve $ref {ref!r}")
        name = ref[len(prefix) :]
        if name in refs:
            raise ValueError(f"{path}: recursive model {name!r} cannot be written as a structural schema")
        merged = copy.deepcopy(defs[name])
        merged.update(node)  # keywords next to a $ref (a field's description) win
        return _convert(merged, defs, path, (*refs, name))

    if "allOf" in node:
        parts = node.pop("allOf")
        if not isinstance(parts, list) or len(parts) != 1:
            raise ValueError(f"{path}: allOf with {len(parts)} schemas is not supported")
        merged = dict(parts[0])
        merged.update(node)
        return _convert(merged, defs, path, refs)

    if "anyOf" in node or "oneOf" in node:
        key = "anyOf" if "anyOf" in node else "oneOf"
        members = [m for m in node.pop(key) if m != _NULL]
        if node.get(PRESERVE) is True or node.get(INT_OR_STRING) is True:
            # A marked union: Kubernetes checks nothing below it (or int-or-string itself).
            pass
        elif len(members) == 1:
            # Optional[X]: null is never stored, so the node is just X.
            merged = dict(members[0])
            merged.update(node)
            return _convert(merged, defs, path, refs)
        else:
            kinds = ", ".join(str(m.get("type", m.get("$ref", "?"))) for m in members)
            raise ValueError(
                f"{path}: a union of several types ({kinds}) needs x-kubernetes-preserve-unknown-fields "
                "or x-kubernetes-int-or-string on the field"
            )

    if "not" in node:
        raise ValueError(f"{path}: 'not' is not supported")
    out: dict[str, Any] = {}

    if "const" in node:
        const = node.pop("const")
        node.setdefault("enum", [const])
        node.setdefault("type", _json_type(const, path))
    if "enum" in node and "type" not in node:
        types = {_json_type(v, path) for v in node["enum"]}
        if len(types) != 1:
            raise ValueError(f"{path}: an enum of mixed types {sorted(types)} is not supported")
        node["type"] = types.pop()

    # JSON Schema 2020-12 bounds (numbers) -> OpenAPI 3.0 bounds (a number and a boolean).
    for bound, exclusive, step in (("minimum", "exclusiveMinimum", 1), ("maximum", "exclusiveMaximum", -1)):
        value = node.get(exclusive)
        if value is None or isinstance(value, bool):
            continue
        del node[exclusive]
        if node.get("type") == "integer":
            # gt=n on an integer is minimum n+1 (lt=n is maximum n-1).
            edge = math.floor(value) + 1 if step > 0 else math.ceil(value) - 1
            if bound in node:
                edge = max(edge, node[bound]) if step > 0 else min(edge, node[bound])
            node[bound] = edge
        else:
            node[bound] = value
            node[exclusive] = True

    for key in _SCALAR_KEYS:
        if key in node:
            out[key] = node.pop(key)

    if "items" in node:
        items = node.pop("items")
        if isinstance(items, list):
            raise ValueError(f"{path}: tuple-style items are not supported")
        out["items"] = _convert(items, defs, f"{path}[]", refs)
    if "prefixItems" in node:
        raise ValueError(f"{path}: tuple types (prefixItems) are not supported")

    if "properties" in node:
        props = node.pop("properties")
        out["properties"] = {
            name: _convert(sub, defs, _join(path, name), refs) for name, sub in props.items()
        }

    if "additionalProperties" in node:
        extra = node.pop("additionalProperties")
        if extra is True:
            # dict[str, Any] or extra="allow": keep what the user wrote, unchecked.
            out[PRESERVE] = True
        elif extra is False:
            # Structural schemas may not say false; unknown fields are pruned by the server.
            pass
        else:
            if "properties" in out:
                raise ValueError(f"{path}: properties and an additionalProperties schema cannot be combined")
            out["additionalProperties"] = _convert(extra, defs, f"{path}.*", refs)

    if "required" in node:
        out["required"] = list(node.pop("required"))

    for key in _X_KEYS:
        if key in node:
            out[key] = node.pop(key)

    if node:
        raise ValueError(f"{path}: unsupported JSON-schema keyword(s): {', '.join(sorted(node))}")

    if out.get(INT_OR_STRING) is True:
        # int-or-string carries no type and no other type-specific keywords.
        for key in ("type", "enum", "items", "properties", "additionalProperties"):
            out.pop(key, None)
    elif "type" not in out:
        if "properties" in out or "additionalProperties" in out:
            out["type"] = "object"
        elif "items" in out:
            out["type"] = "array"
        elif out.get(PRESERVE) is not True:
            raise ValueError(
                f"{path}: the type cannot be told; give the field a type or mark it with "
                "x-kubernetes-preserve-unknown-fields"
            )
    if "properties" in out and out.get("type") != "object":
        raise ValueError(f"{path}: properties on a node of type {out.get('type')!r}")
    return _ordered(out)


def _json_type(value: Any, path: str) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    raise ValueError(f"{path}: cannot tell the type of enum value {value!r}")


def _join(path: str, name: str) -> str:
    return name if path == "<root>" else f"{path}.{name}"


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    return {key: node[key] for key in _KEY_ORDER if key in node}


# --------------------------------------------------------------------------- CEL rules


def _enabled(obj: str) -> str:
    """CEL for EnabledFlag.is_enabled: ``enabled`` wins, else ``enable``, else false."""
    return f"(has({obj}.enabled) ? {obj}.enabled : (has({obj}.enable) && {obj}.enable))"


_ELASTIC_RULES = [
    {
        "rule": "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
        "message": "minReplicas must not be greater than maxReplicas",
    },
    {
        "rule": f"!{_enabled('self')} || (has(self.minReplicas) && has(self.maxReplicas))",
        "message": "minReplicas and maxReplicas are required when elastic is enabled",
    },
]


def _unchanged(field: str) -> dict[str, str]:
    """A transition rule (on ``spec``, always present): ``elastic.<field>`` keeps its first value."""
    def value(obj: str) -> str:
        return f"(has({obj}.elastic) && has({obj}.elastic.{field}) ? {obj}.elastic.{field} : 0)"

    return {
        "rule": f"{value('self')} == {value('oldSelf')}",
        "message": f"elastic.{field} cannot be changed once the job is created",
    }


#: The elastic range is fixed at creation (T9k: "cannot be changed once the job is created"):
#: replicas started with --nnodes=min:max would disagree with those started after an edit.
_ELASTIC_RANGE_FIXED = [_unchanged("minReplicas"), _unchanged("maxReplicas")]

# kind -> {dotted path of an object node under the root schema -> CEL rules}.
_RULES: dict[str, dict[str, list[dict[str, str]]]] = {
    "PyTorchTrainingJob": {
        "spec": [
            {
                "rule": f"!has(self.elastic) || !{_enabled('self.elastic')} || "
                f"(has(self.torchrunConfig) && {_enabled('self.torchrunConfig')})",
                "message": "elastic training needs torchrunConfig.enabled: true",
            },
            *_ELASTIC_RANGE_FIXED,
        ],
        "spec.elastic": _ELASTIC_RULES,
    },
    "DeepSpeedJob": {
        "spec": list(_ELASTIC_RANGE_FIXED),
        # CEL cannot see run.python/module/exec (they are string-or-list, so untyped in the
        # schema: the API server refuses rules that name them). "Exactly one" is
        # minProperties/maxProperties on run (see _PROPERTY_BOUNDS); this rule asks for run
        # or customCommand.
        "spec.config": [
            {
                "rule": "has(self.run) || (has(self.customCommand) && size(self.customCommand) > 0)",
                "message": "run (with exactly one of python, module, exec) or customCommand is required",
            }
        ],
        "spec.elastic": _ELASTIC_RULES,
    },
    "ColossalAIJob": {
        "spec": [
            {
                "rule": "has(self.worker) || has(self.replicaSpecs)",
                "message": "worker is required (or the older form: torchConfig with replicaSpecs "
                "of type worker)",
            }
        ],
    },
}

# kind -> {dotted path of an object node -> (minProperties, maxProperties)}.
_PROPERTY_BOUNDS: dict[str, dict[str, tuple[int, int]]] = {
    # exactly one of run.python, run.module, run.exec (T9k docs)
    "DeepSpeedJob": {"spec.config.run": (1, 1)},
}

# kind -> dotted paths of replicaSpecs lists whose entries are unique by ``type`` (the models
# reject duplicates): declared as list-type map so the API server rejects them too.
_MAP_LISTS: dict[str, list[str]] = {
    "GenericJob": ["spec.replicaSpecs"],
    "PyTorchTrainingJob": ["spec.replicaSpecs"],
    "ColossalAIJob": ["spec.replicaSpecs"],
}


def _extend(node: dict[str, Any], keys: dict[str, Any]) -> None:
    """Add ``keys`` to ``node`` in place, keeping the canonical key order."""
    ordered = _ordered({**node, **keys})
    node.clear()
    node.update(ordered)


def _node_at(root: dict[str, Any], dotted: str) -> dict[str, Any]:
    node = root
    for part in dotted.split("."):
        props = node.get("properties")
        if not isinstance(props, dict) or part not in props:
            raise ValueError(f"{dotted}: no field {part!r} in the generated schema")
        node = props[part]
    return node


# --------------------------------------------------------------------------- CRDs


def crd_filename(cls: type[JobBase]) -> str:
    """``<group>_<plural>.yaml``, e.g. ``batch.tensorstack.dev_pytorchtrainingjobs.yaml``."""
    return f"{GROUP}_{cls.PLURAL}.yaml"


def crd_for(cls: type[JobBase]) -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition of one job kind.

    ``cls`` is one of the classes in :data:`t9k_jobs.api.KINDS`. The result is a plain mapping
    ``{apiVersion, kind, metadata: {name}, spec: {group, names, scope, versions: [...]}}`` with
    one served and stored version whose ``openAPIV3Schema`` has ``apiVersion``, ``kind``,
    ``metadata``, ``spec`` (from the model's ``spec`` field, required) and ``status`` (from
    :class:`~t9k_jobs.api.common.JobStatus`), the status subresource and printer columns.

    Raises ``TypeError`` when ``cls`` is not a job kind, ``ValueError`` (naming the schema
    path) when the model uses something the structural subset cannot express.
    """
    if not (isinstance(cls, type) and issubclass(cls, JobBase)) or not (cls.KIND and cls.PLURAL):
        raise TypeError(f"{cls!r} is not a job kind (one of {', '.join(KINDS)})")
    if "spec" not in cls.model_fields:
        raise TypeError(f"{cls.__name__} has no spec field")
    full = cls.model_json_schema(by_alias=True, mode="validation")
    defs = full.get("$defs", {})
    spec = structural_schema(full["properties"]["spec"], defs)
    status = structural_schema(JobStatus.model_json_schema(by_alias=True, mode="validation"))

    root: dict[str, Any] = {
        "description": f"{cls.KIND} is a T9k batch job ({GROUP}/{VERSION}).",
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object.",
                "type": "string",
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents.",
                "type": "string",
            },
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "required": ["spec"],
    }
    for dotted in _MAP_LISTS.get(cls.KIND, []):
        node = _node_at(root, dotted)
        items = node.get("items", {})
        if node.get("type") != "array" or "type" not in items.get("required", []):
            raise ValueError(f"{dotted}: a list-type map needs items with a required 'type' field")
        _extend(node, {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})
    for dotted, (low, high) in _PROPERTY_BOUNDS.get(cls.KIND, {}).items():
        node = _node_at(root, dotted)
        if node.get("type") != "object":
            raise ValueError(f"{dotted}: property bounds are only set on object nodes")
        _extend(node, {"minProperties": low, "maxProperties": high})
    for dotted, rules in _RULES.get(cls.KIND, {}).items():
        node = _node_at(root, dotted)
        if node.get("type") != "object":
            raise ValueError(f"{dotted}: CEL rules are only attached to object nodes")
        _extend(node, {"x-kubernetes-validations": copy.deepcopy(rules)})

    singular = cls.KIND.lower()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{cls.PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": cls.KIND,
                "listKind": f"{cls.KIND}List",
                "plural": cls.PLURAL,
                "singular": singular,
                "shortNames": [cls.SHORT_NAME],
                "categories": list(CATEGORIES),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                        {"name": "Running", "type": "integer", "jsonPath": ".status.aggregate.running"},
                        {
                            "name": "Succeeded",
                            "type": "integer",
                            "jsonPath": ".status.aggregate.succeeded",
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }
            ],
        },
    }


class _Dumper(yaml.SafeDumper):
    """Block style, multi-line strings as literal blocks, no aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str_representer)


def to_yaml(crd: dict[str, Any]) -> str:
    """One CRD as YAML text with the generated-file header."""
    body = yaml.dump(
        crd, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True
    )
    return HEADER + body


def generate_crds() -> dict[str, str]:
    """``{filename: YAML text}`` for the four kinds, e.g. ``batch.tensorstack.dev_genericjobs.yaml``.

    The text is deterministic (same models, same bytes). Raises what :func:`crd_for` raises.
    """
    return {crd_filename(cls): to_yaml(crd_for(cls)) for cls in KINDS.values()}


def check_crds(directory: str | Path) -> list[str]:
    """Compare ``directory`` with :func:`generate_crds`; return one message per stale file.

    A missing or different file, and a ``<group>_*.yaml`` file no kind generates, is reported
    (a different file with a short unified diff). An empty list means up to date.
    """
    directory = Path(directory)
    wanted = generate_crds()
    problems = stale_files(directory, wanted)
    if directory.is_dir():
        for path in sorted(directory.glob(f"{GROUP}_*.yaml")):
            if path.name not in wanted:
                problems.append(f"{path}: not generated by any kind (remove it)")
    return problems


def main(argv: list[str] | None = None) -> int:
    """``python -m t9k_jobs.deploy.crd [--write DIR | --check DIR]``; returns the exit status.

    With neither option the CRDs are printed to stdout as one multi-document YAML stream.
    ``--check`` prints what is out of date and returns 1; otherwise 0.
    """
    args = generator_parser(
        "python -m t9k_jobs.deploy.crd",
        __doc__.splitlines()[0],
        "write one <group>_<plural>.yaml file per kind to DIR",
        "exit 1 if the files in DIR are not up to date",
        required=False,
    ).parse_args(argv)
    if args.check:
        return report_check(
            check_crds(args.check),
            f"CRDs are out of date; regenerate them with: {GENERATE_COMMAND}",
            f"{args.check}: CRDs are up to date",
        )
    crds = generate_crds()
    if args.write:
        write_files(Path(args.write), crds)
        return 0
    sys.stdout.write("---\n".join(crds.values()))
    return 0

if __name__ == "__main__":
    sys.exit(main())
