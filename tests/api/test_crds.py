"""The generated CustomResourceDefinitions in deploy/crds: up to date, structural, complete.

``deploy/crds`` is regenerated with ``python -m t9k_jobs.deploy.crd --write deploy/crds``.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal

import pytest
import yaml
from pydantic import BaseModel, Field

from t9k_jobs.api import KINDS, ManifestError, parse_job
from t9k_jobs.deploy.crd import (
    GENERATE_COMMAND,
    check_crds,
    crd_filename,
    crd_for,
    generate_crds,
    main,
    structural_schema,
)
from tests.helpers import job, replica, template

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "deploy" / "crds"
MANIFESTS = ROOT / "tests" / "render" / "manifests"

PRESERVE = "x-kubernetes-preserve-unknown-fields"
INT_OR_STRING = "x-kubernetes-int-or-string"
TYPES = {"object", "array", "string", "integer", "number", "boolean"}
FORBIDDEN = ("$ref", "$defs", "allOf", "anyOf", "oneOf", "not", "title", "default", "const", "nullable")
SHORT_NAMES = {
    "GenericJob": "gj",
    "PyTorchTrainingJob": "pj",
    "DeepSpeedJob": "dj",
    "ColossalAIJob": "caij",
}


def committed() -> dict[str, dict[str, Any]]:
    """kind -> the CRD as committed in deploy/crds."""
    out = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        out[crd["spec"]["names"]["kind"]] = crd
    return out


CRDS = committed()


def schema_of(kind: str) -> dict[str, Any]:
    return CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def at(node: dict[str, Any], dotted: str) -> dict[str, Any]:
    """The schema node for a dotted field path; ``[]`` steps into array items."""
    for part in dotted.split("."):
        if part == "[]":
            assert node.get("type") == "array", f"{dotted}: {part} on a non-array"
            node = node["items"]
        else:
            props = node.get("properties", {})
            assert part in props, f"{dotted}: no field {part!r} (have: {', '.join(props)})"
            node = props[part]
    return node


def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node below (and including) ``node`` with its path."""
    yield path or "<root>", node
    for name, sub in (node.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}.*")


def all_nodes() -> list[tuple[str, str, dict[str, Any]]]:
    return [(kind, path, node) for kind in CRDS for path, node in walk(schema_of(kind))]


# --------------------------------------------------------------------------- (a) up to date


def test_committed_crds_are_up_to_date() -> None:
    problems = check_crds(CRD_DIR)
    assert not problems, (
        "deploy/crds is out of date with the API models; regenerate with:\n    "
        + GENERATE_COMMAND
        + "\n\n"
        + "\n".join(problems)
    )


def test_one_file_per_kind_with_header() -> None:
    generated = generate_crds()
    assert set(generated) == {crd_filename(cls) for cls in KINDS.values()}
    assert set(generated) == {
        "batch.tensorstack.dev_genericjobs.yaml",
        "batch.tensorstack.dev_pytorchtrainingjobs.yaml",
        "batch.tensorstack.dev_deepspeedjobs.yaml",
        "batch.tensorstack.dev_colossalaijobs.yaml",
    }
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(generated)
    for text in generated.values():
        assert text.startswith(
            "# Generated from the API models by: python -m t9k_jobs.deploy.crd --write deploy/crds. Do not edit.\n"
        )
    assert generate_crds() == generated, "generation is not deterministic"


def test_check_reports_stale_missing_and_extra_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--write", str(tmp_path)]) == 0
    assert main(["--check", str(tmp_path)]) == 0
    assert check_crds(tmp_path) == []

    stale = tmp_path / "batch.tensorstack.dev_deepspeedjobs.yaml"
    stale.write_text(stale.read_text().replace("minimum: 1", "minimum: 2", 1))
    (tmp_path / "batch.tensorstack.dev_genericjobs.yaml").unlink()
    (tmp_path / "batch.tensorstack.dev_tensorflowtrainingjobs.yaml").write_text("{}\n")
    problems = check_crds(tmp_path)
    assert len(problems) == 3
    assert any("deepspeedjobs.yaml: out of date" in p and "-" in p and "minimum: 2" in p for p in problems)
    assert any("genericjobs.yaml: missing" in p for p in problems)
    assert any("tensorflowtrainingjobs.yaml: not generated" in p for p in problems)

    capsys.readouterr()
    assert main(["--check", str(tmp_path)]) == 1
    assert GENERATE_COMMAND in capsys.readouterr().err


# --------------------------------------------------------------------------- (b) structural


@pytest.mark.parametrize("kind", list(SHORT_NAMES))
def test_schema_is_structural(kind: str) -> None:
    problems: list[str] = []
    for path, node in walk(schema_of(kind)):
        where = f"{kind} {path}"
        for key in FORBIDDEN:
            if key in node:
                problems.append(f"{where}: has {key!r}")
        extra = node.get("additionalProperties")
        if extra is not None and not isinstance(extra, dict):
            problems.append(f"{where}: additionalProperties must be a schema, not {extra!r}")
        if extra is not None and "properties" in node:
            problems.append(f"{where}: both properties and additionalProperties")
        marked = node.get(PRESERVE) is True or node.get(INT_OR_STRING) is True
        if "type" not in node and not marked:
            problems.append(f"{where}: no type")
        if "type" in node and node["type"] not in TYPES:
            problems.append(f"{where}: unknown type {node['type']!r}")
        if node.get(INT_OR_STRING) is True and "type" in node:
            problems.append(f"{where}: int-or-string with a type")
        if "properties" in node and node.get("type") != "object":
            problems.append(f"{where}: properties on type {node.get('type')!r}")
        if "additionalProperties" in node and node.get("type") != "object":
            problems.append(f"{where}: additionalProperties on type {node.get('type')!r}")
        if node.get("type") == "array" and not isinstance(node.get("items"), dict):
            problems.append(f"{where}: array without an items schema")
        if "items" in node and node.get("type") != "array":
            problems.append(f"{where}: items on type {node.get('type')!r}")
        for key in ("exclusiveMinimum", "exclusiveMaximum"):
            if key in node and not isinstance(node[key], bool):
                problems.append(f"{where}: {key} must be the OpenAPI 3.0 boolean form")
        for req in node.get("required", []):
            if req not in node.get("properties", {}):
                problems.append(f"{where}: required field {req!r} is not declared")
        if "enum" in node:
            py = {"string": str, "integer": int, "boolean": bool, "number": (int, float)}[node["type"]]
            if not node["enum"] or not all(isinstance(v, py) for v in node["enum"]):
                problems.append(f"{where}: enum {node['enum']!r} does not match type {node['type']}")
        if "x-kubernetes-validations" in node and node.get("type") != "object":
            problems.append(f"{where}: CEL rules on a non-object node")
    root = schema_of(kind)
    if root.get("type") != "object":
        problems.append(f"{kind}: root is not an object")
    if root["properties"].get("metadata") != {"type": "object"}:
        problems.append(f"{kind}: metadata may only be {{type: object}} in a structural schema")
    assert not problems, "\n".join(problems)


def test_no_forbidden_keyword_anywhere_in_the_files() -> None:
    """A raw scan of every key in the files, schema nodes or not (catches a skipped branch)."""

    def keys(value: Any, path: str) -> Iterator[tuple[str, str]]:
        if isinstance(value, dict):
            for key, sub in value.items():
                yield path, key
                yield from keys(sub, f"{path}.{key}")
        elif isinstance(value, list):
            for i, sub in enumerate(value):
                yield from keys(sub, f"{path}[{i}]")

    bad = [
        f"{kind}: {path}.{key}"
        for kind, crd in CRDS.items()
        for path, key in keys(crd, "")
        if key in FORBIDDEN and not path.endswith(".properties")
    ]
    assert not bad, "\n".join(bad)


def test_top_level_properties_and_required_spec() -> None:
    for kind in SHORT_NAMES:
        root = schema_of(kind)
        assert list(root["properties"]) == ["apiVersion", "kind", "metadata", "spec", "status"]
        assert root["properties"]["apiVersion"]["type"] == "string"
        assert root["properties"]["kind"]["type"] == "string"
        assert root["required"] == ["spec"]
        assert root["properties"]["spec"]["type"] == "object"
        status = root["properties"]["status"]
        assert PRESERVE not in status, "status must be typed from JobStatus, not left open"
        assert status["type"] == "object"
        assert status["properties"]["phase"]["enum"] == [
            "Pending", "Running", "Paused", "Resuming", "Succeeded", "Failed", "Unknown",
        ]
        assert at(status, "aggregate.running") == {"type": "integer"}
        assert at(status, "tasks.[].replicas.[].restartCount") == {"type": "integer"}


def test_pydantic_constructs_are_rewritten() -> None:
    """Defaults, Optional, gt bounds, one-value Literals and dict maps, on the real kinds."""
    assert at(schema_of("PyTorchTrainingJob"), "spec.runPolicy.activeDeadlineSeconds") == {
        "type": "integer",
        "format": "int64",  # as Kubernetes' own deadlines; a maximum of 2**63-1 would be read as a float
        "minimum": 1,
    }
    assert at(schema_of("PyTorchTrainingJob"), "spec.runPolicy.backoffLimit") == {
        "type": "integer",
        "minimum": 0,
        "maximum": 2**31 - 1,  # int32, as Kubernetes' own counts
    }
    assert at(schema_of("PyTorchTrainingJob"), "spec.torchrunConfig.procPerNode") == {INT_OR_STRING: True}
    for field in ("successRules", "failureRules"):
        assert at(schema_of("GenericJob"), f"spec.{field}") == {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {INT_OR_STRING: True}},
            },
        }
    assert at(schema_of("GenericJob"), "spec.service.ports.[].targetPort") == {INT_OR_STRING: True}
    port = at(schema_of("GenericJob"), "spec.service.ports.[].port")
    assert (port["minimum"], port["maximum"]) == (1, 65535)
    assert at(schema_of("GenericJob"), "spec.scheduler.t9kScheduler.priority") == {
        "type": "integer",
        "minimum": 0,
        "maximum": 100,
    }
    for field in ("python", "module", "exec"):
        assert at(schema_of("DeepSpeedJob"), f"spec.config.run.{field}") == {PRESERVE: True}
    assert at(schema_of("ColossalAIJob"), "spec.runPolicy.cleanUpWorkers") == {PRESERVE: True}
    assert at(schema_of("ColossalAIJob"), "spec.launcher.env.[]") == {"type": "object", PRESERVE: True}
    assert at(schema_of("GenericJob"), "status.tensorboard.dependent") == {
        "type": "object",
        "additionalProperties": {"type": "string"},
    }


class _Inner(BaseModel):
    """Inner doc."""

    n: Annotated[int, Field(gt=2, lt=10)] = 5


class _Sample(BaseModel):
    kind: Literal["Sample"] = "Sample"
    inner: _Inner | None = None
    many: list[_Inner] = Field(default_factory=list, min_length=1)
    ratio: Annotated[float, Field(gt=0)] = 1.0
    mapping: dict[str, int] = Field(default_factory=dict)
    anything: dict[str, Any] | None = None


def test_structural_schema_on_a_sample_model() -> None:
    out = structural_schema(_Sample.model_json_schema(by_alias=True, mode="validation"))
    assert out["type"] == "object"
    props = out["properties"]
    assert props["kind"] == {"type": "string", "enum": ["Sample"]}
    inner = {"description": "Inner doc.", "type": "object", "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 9}}}
    assert props["inner"] == inner
    assert props["many"] == {"type": "array", "minItems": 1, "items": inner}
    assert props["ratio"] == {"type": "number", "minimum": 0, "exclusiveMinimum": True}
    assert props["mapping"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert props["anything"] == {"type": "object", PRESERVE: True}


def test_unmarked_union_is_an_error() -> None:
    class Bad(BaseModel):
        value: int | list[str]

    with pytest.raises(ValueError, match=r"value: a union of several types"):
        structural_schema(Bad.model_json_schema(by_alias=True, mode="validation"))


def test_crd_for_rejects_a_non_kind() -> None:
    with pytest.raises(TypeError):
        crd_for(_Sample)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- (c) names, subresource, columns


@pytest.mark.parametrize("kind", list(SHORT_NAMES))
def test_names_scope_version_and_columns(kind: str) -> None:
    crd = CRDS[kind]
    cls = KINDS[kind]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{cls.PLURAL}.batch.tensorstack.dev"
    spec = crd["spec"]
    assert spec["group"] == "batch.tensorstack.dev"
    assert spec["scope"] == "Namespaced"
    names = spec["names"]
    assert names["kind"] == kind
    assert names["plural"] == cls.PLURAL
    assert names["singular"] == kind.lower()
    assert names["shortNames"] == [SHORT_NAMES[kind]]
    assert names["categories"] == ["all", "t9k", "t9k-jobs"]
    assert len(spec["versions"]) == 1
    version = spec["versions"][0]
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert columns["Phase"] == {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}
    assert columns["Age"] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    assert version["additionalPrinterColumns"][-1]["name"] == "Age"
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"].lstrip(".").split(".")
        if path[0] == "status":  # every status column points at a declared field
            at(schema_of(kind), ".".join(path))


# --------------------------------------------------------------------------- (d) both spellings


@pytest.mark.parametrize(
    ("kind", "dotted", "fields"),
    [
        ("PyTorchTrainingJob", "spec.torchrunConfig", ("enabled", "enable")),
        ("PyTorchTrainingJob", "spec.elastic", ("enabled", "enable")),
        ("PyTorchTrainingJob", "spec.runMode.debug", ("enabled", "enable")),
        ("PyTorchTrainingJob", "spec.runMode.pause", ("enabled", "enable")),
        ("DeepSpeedJob", "spec.elastic", ("enabled", "enable")),
        ("DeepSpeedJob", "spec.config", ("slotPerWorker", "slotsPerWorker")),
        ("ColossalAIJob", "spec.ssh", ("authMountPath", "sshAuthMountPath")),
        ("GenericJob", "spec.runMode.debug", ("enabled", "enable")),
        ("GenericJob", "spec.runMode.pause", ("enabled", "enable")),
    ],
)
def test_both_spellings_are_declared(kind: str, dotted: str, fields: tuple[str, ...]) -> None:
    node = at(schema_of(kind), dotted)
    for field in fields:
        assert field in node["properties"], f"{kind} {dotted}.{field} is not declared (it would be pruned)"
    kinds = {node["properties"][f].get("type") for f in fields}
    assert len(kinds) == 1, f"{kind} {dotted}: {fields} have different types {kinds}"


# --------------------------------------------------------------------------- (e) pod templates


@pytest.mark.parametrize(
    ("kind", "dotted"),
    [
        ("GenericJob", "spec.replicaSpecs.[].template"),
        ("PyTorchTrainingJob", "spec.replicaSpecs.[].template"),
        ("DeepSpeedJob", "spec.worker.template"),
        ("ColossalAIJob", "spec.worker.template"),
        ("ColossalAIJob", "spec.replicaSpecs.[].template"),
        ("PyTorchTrainingJob", "spec.tensorboardSpec"),
        ("ColossalAIJob", "spec.launcher.resources"),
    ],
)
def test_open_mappings_preserve_unknown_fields(kind: str, dotted: str) -> None:
    assert at(schema_of(kind), dotted) == {"type": "object", PRESERVE: True}


def test_preserve_unknown_fields_only_where_the_models_say_so() -> None:
    """Anything else left open would let typos through the API server unnoticed."""
    open_paths = {(kind, path) for kind, path, node in all_nodes() if node.get(PRESERVE)}
    expected = {
        ("GenericJob", "spec.replicaSpecs[].template"),
        ("PyTorchTrainingJob", "spec.replicaSpecs[].template"),
        ("PyTorchTrainingJob", "spec.tensorboardSpec"),
        ("DeepSpeedJob", "spec.worker.template"),
        ("DeepSpeedJob", "spec.config.run.python"),
        ("DeepSpeedJob", "spec.config.run.module"),
        ("DeepSpeedJob", "spec.config.run.exec"),
        ("ColossalAIJob", "spec.worker.template"),
        ("ColossalAIJob", "spec.replicaSpecs[].template"),
        ("ColossalAIJob", "spec.launcher.env[]"),
        ("ColossalAIJob", "spec.launcher.resources"),
        ("ColossalAIJob", "spec.runPolicy.cleanUpWorkers"),
        ("ColossalAIJob", "spec.replicaSpecs[].restartPolicy"),  # a name or {policy, limit}: the older form
    }
    assert open_paths == expected


# --------------------------------------------------------------------------- CEL rules and list maps


def rules(kind: str, dotted: str) -> list[dict[str, str]]:
    return at(schema_of(kind), dotted).get("x-kubernetes-validations", [])


def test_deepspeed_run_rule() -> None:
    """Exactly one of run.python/module/exec: CEL cannot name untyped fields, so property bounds."""
    (rule,) = rules("DeepSpeedJob", "spec.config")
    assert "has(self.run)" in rule["rule"] and "customCommand" in rule["rule"]
    assert "customCommand" in rule["message"]
    run = at(schema_of("DeepSpeedJob"), "spec.config.run")
    assert (run["minProperties"], run["maxProperties"]) == (1, 1)
    assert set(run["properties"]) == {"python", "module", "exec"}


@pytest.mark.parametrize("kind", ["PyTorchTrainingJob", "DeepSpeedJob"])
def test_elastic_rules(kind: str) -> None:
    found = rules(kind, "spec.elastic")
    assert any("self.minReplicas <= self.maxReplicas" in r["rule"] for r in found)
    assert any("required when elastic is enabled" in r["message"] for r in found)


def test_pytorch_elastic_needs_torchrun_and_colossalai_needs_a_worker() -> None:
    assert any("torchrunConfig" in r["rule"] for r in rules("PyTorchTrainingJob", "spec"))
    assert any("has(self.worker)" in r["rule"] for r in rules("ColossalAIJob", "spec"))


def test_cel_rules_name_declared_fields_only() -> None:
    """Every ``self.a.b`` in a rule is a field declared under the node the rule sits on."""
    checked = 0
    for kind, path, node in all_nodes():
        for rule in node.get("x-kubernetes-validations", []):
            assert rule["rule"].strip() and rule["message"].strip()
            assert rule["rule"].count("(") == rule["rule"].count(")"), rule["rule"]
            for ref in re.findall(r"\bself((?:\.[A-Za-z_]\w*)+)", rule["rule"]):
                target = node
                for part in ref.strip(".").split("."):
                    props = target.get("properties", {})
                    assert part in props, f"{kind} {path}: rule names undeclared field {ref!r}"
                    target = props[part]
                    # The API server compiles rules against typed fields only.
                    assert "type" in target, f"{kind} {path}: rule names untyped field {ref!r}"
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize(
    ("kind", "dotted"),
    [
        ("GenericJob", "spec.replicaSpecs"),
        ("PyTorchTrainingJob", "spec.replicaSpecs"),
        ("ColossalAIJob", "spec.replicaSpecs"),
    ],
)
def test_replica_specs_are_maps_keyed_by_type(kind: str, dotted: str) -> None:
    node = at(schema_of(kind), dotted)
    assert node["x-kubernetes-list-type"] == "map"
    assert node["x-kubernetes-list-map-keys"] == ["type"]
    assert "type" in node["items"]["required"]


@pytest.mark.parametrize("kind", ["GenericJob", "PyTorchTrainingJob"])
def test_replica_specs_need_one_entry(kind: str) -> None:
    node = at(schema_of(kind), "spec.replicaSpecs")
    assert node["minItems"] == 1
    assert "replicaSpecs" in at(schema_of(kind), "spec")["required"]


# --------------------------------------------------------------------------- real manifests (jsonschema)

import jsonschema  # noqa: E402 - the test extra installs it


def validator(kind: str) -> Any:
    # OpenAPI 3.0 schemas follow JSON Schema draft 4/5 (boolean exclusiveMinimum); the
    # x-kubernetes-* keywords are unknown to jsonschema and ignored.
    schema = schema_of(kind)
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def errors(manifest: dict[str, Any]) -> list[str]:
    return [
        "/".join(map(str, e.absolute_path)) + ": " + e.message
        for e in validator(manifest["kind"]).iter_errors(manifest)
    ]


PYTORCH = job(
    "PyTorchTrainingJob",
    "mnist",
    {
        "torchrunConfig": {"enabled": True, "procPerNode": "gpu", "maxRestarts": 3},
        "elastic": {"enable": True, "minReplicas": 1, "maxReplicas": 4},
        "runPolicy": {"cleanUpPolicy": "Unfinished", "backoffLimit": 2, "activeDeadlineSeconds": 3600},
        "replicaSpecs": [
            replica(
                "node",
                2,
                template(
                    ["python", "train.py"],
                    name="trainer",
                    image="pytorch/pytorch:2.2.0",
                    resources={"limits": {"nvidia.com/gpu": 1}},
                ),
                restartPolicy="ExitCode",
            )
        ],
    },
)


def test_valid_pytorch_job_validates() -> None:
    parse_job(copy.deepcopy(PYTORCH))  # the model accepts it
    assert errors(PYTORCH) == []


def mutate(manifest: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(manifest)
    node: Any = out
    parts = [int(p) if p.isdigit() else p for p in dotted.split(".")]
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
    return out


@pytest.mark.parametrize(
    ("dotted", "value", "where"),
    [
        ("spec.replicaSpecs.0.restartPolicy", "Sometimes", "spec/replicaSpecs/0/restartPolicy"),
        ("spec.replicaSpecs", [], "spec/replicaSpecs"),
        ("spec.replicaSpecs.0.replicas", -1, "spec/replicaSpecs/0/replicas"),
        ("spec.replicaSpecs.0.replicas", "two", "spec/replicaSpecs/0/replicas"),
        ("spec.runPolicy.activeDeadlineSeconds", 0, "spec/runPolicy/activeDeadlineSeconds"),
        ("spec.runPolicy.cleanUpPolicy", "Some", "spec/runPolicy/cleanUpPolicy"),
        ("spec.torchrunConfig.rdzvBackend", "zookeeper", "spec/torchrunConfig/rdzvBackend"),
        ("spec.elastic.enable", "maybe", "spec/elastic/enable"),
        ("spec.replicaSpecs.0.template", "pod", "spec/replicaSpecs/0/template"),
    ],
)
def test_invalid_pytorch_job_is_rejected_by_crd_and_model(dotted: str, value: Any, where: str) -> None:
    bad = mutate(PYTORCH, dotted, value)
    found = errors(bad)
    assert any(e.startswith(where + ":") for e in found), found
    with pytest.raises(ManifestError):
        parse_job(bad)


def test_spec_is_required() -> None:
    bad = {k: v for k, v in PYTORCH.items() if k != "spec"}
    assert any("'spec' is a required property" in e for e in errors(bad))


@pytest.mark.parametrize("path", sorted(MANIFESTS.glob("*.yaml")), ids=lambda p: p.name)
def test_manifests_the_model_accepts_validate_against_the_crd(path: Path) -> None:
    manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    parse_job(copy.deepcopy(manifest), str(path))  # every render manifest is a valid job
    assert errors(manifest) == []


def test_other_kinds_reject_bad_values() -> None:
    generic = job(
        "GenericJob",
        "g",
        {
            "successRules": [{"worker": [0, "1"]}],
            "replicaSpecs": [replica("worker", None, template(name="c", image=None))],
        },
    )
    assert errors(generic) == []
    assert errors(mutate(generic, "spec.successRules", [{"worker": "0"}]))
    assert errors(mutate(generic, "spec.replicaSpecs.0.restartPolicy", {"policy": "Sometimes"}))
    deepspeed = job(
        "DeepSpeedJob",
        "d",
        {
            "config": {"slotPerWorker": 2, "run": {"python": "train.py"}},
            "worker": {"template": template(name="c", image=None)},
        },
    )
    assert errors(deepspeed) == []
    assert errors(mutate(deepspeed, "spec.config.slotsPerWorker", 0))
    assert errors(mutate(deepspeed, "spec.config.autotune", "always"))
    colossal = job(
        "ColossalAIJob",
        "c",
        {
            "ssh": {"sshAuthMountPath": "/root/.ssh"},
            "runPolicy": {"cleanUpWorkers": "all"},
            "worker": {"command": ["train.py"], "template": template(name="worker", image=None)},
        },
    )
    assert errors(colossal) == []
    assert errors(mutate(colossal, "spec.worker.command", []))
    assert errors(mutate(colossal, "spec.worker.procPerWorker", 0))
