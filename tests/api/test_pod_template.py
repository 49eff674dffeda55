"""A replica's pod template is checked as the API server checks a Pod, for all four kinds (issue 32).

A template of the wrong shape (``volumes: 5``, ``volumeMounts: "data"``, ``resources: "big"``) was
accepted by ``validate`` and ``create``; plug-ins then raised while building the pods (render,
run and the operator printed a traceback). Each is now one line naming the field path, at the
path of the kind's template; shapes that real manifests use are accepted.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_jobs.api import ManifestError
from t9k_jobs.api.pod_schema import GENERATE_COMMAND, TYPES_FILE, check_pod_template, generate_types, parse_quantity
from t9k_jobs.frameworks import parse_job
from t9k_jobs.render import render
from tests.helpers import job, replica

IMAGE = "example/img:1"


def _keys() -> dict[str, str]:
    return {"id_ed25519": "k", "id_ed25519.pub": "p", "authorized_keys": "p", "config": "c"}


def manifest(kind: str, container: dict[str, Any], pod: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """A job of ``kind`` whose training container has ``container``'s fields (and the pod
    ``pod``'s), and the field path of that template."""
    def tpl(name: str) -> dict[str, Any]:
        return {"spec": {**(pod or {}), "containers": [{"name": name, "image": IMAGE, **container}]}}

    if kind == "GenericJob":
        return job(kind, "j", {"replicaSpecs": [replica("worker", 2, tpl("main"))]}), "spec.replicaSpecs[0].template"
    if kind == "PyTorchTrainingJob":
        return job(kind, "j", {"replicaSpecs": [replica("worker", 2, tpl("pytorch"))]}), "spec.replicaSpecs[0].template"
    if kind == "DeepSpeedJob":
        spec = {"config": {"run": {"python": ["t.py"]}}, "worker": {"replicas": 2, "template": tpl("worker")}}
        return job(kind, "j", spec), "spec.worker.template"
    return job(kind, "j", {"worker": {"replicas": 2, "command": ["t.py"], "template": tpl("worker")}}), "spec.worker.template"


KINDS = ["GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"]


def refused(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ManifestError) as err:
        parse_job(copy.deepcopy(data))
    return err.value.errors


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("container", "pod", "where", "says"),
    [
        ({}, {"volumes": 5}, "spec.volumes", "must be a list, not int 5"),
        ({}, {"volumes": {}}, "spec.volumes", "must be a list, not dict {}"),
        ({"volumeMounts": "data"}, {}, "spec.containers[0].volumeMounts", "must be a list, not str 'data'"),
        ({"resources": "big"}, {}, "spec.containers[0].resources", "must be a mapping (a Kubernetes ResourceRequirements)"),
        ({"resources": {"limits": {"cpu": "big"}}}, {}, "spec.containers[0].resources.limits.cpu", "str 'big' is not a quantity"),
        ({"resources": {"limits": 5}}, {}, "spec.containers[0].resources.limits", "must be a mapping of names to values"),
        ({"envFrom": "x"}, {}, "spec.containers[0].envFrom", "must be a list"),
        ({"ports": [{"containerPort": "80"}]}, {}, "spec.containers[0].ports[0].containerPort", "must be an integer, not str '80'"),
        ({"securityContext": {"privileged": "yes"}}, {}, "spec.containers[0].securityContext.privileged", "must be true or false"),
        ({}, {"nodeSelector": ["gpu"]}, "spec.nodeSelector", "must be a mapping of names to values"),
    ],
)
def test_a_template_field_of_the_wrong_type_is_refused_with_its_path(
    kind: str, container: dict[str, Any], pod: dict[str, Any], where: str, says: str
) -> None:
    data, template = manifest(kind, container, pod)
    (line,) = refused(data)
    assert line.startswith(f"{template}.{where}: {says}"), line


@pytest.mark.parametrize(
    ("container", "pod", "expected"),
    [
        ({"volumeMounts": [{"name": "data"}]}, {"volumes": [{"name": "data", "emptyDir": {}}]},
         "spec.containers[0].volumeMounts[0].mountPath: required in a Kubernetes VolumeMount"),
        ({"volumeMounts": [{"name": "nope", "mountPath": "/d"}]}, {"volumes": [{"name": "data", "emptyDir": {}}]},
         "spec.containers[0].volumeMounts[0].name: 'nope' is not a volume of the pod (volumes: data)"),
        ({"volumeMounts": [{"name": "d", "mountPath": "/d", "subPath": "../x"}]}, {"volumes": [{"name": "d", "emptyDir": {}}]},
         "spec.containers[0].volumeMounts[0].subPath: '../x' must be a relative path without '..'"),
        ({}, {"volumes": [{"name": "d", "emptyDir": {}}, {"name": "d", "emptyDir": {}}]},
         "spec.volumes[1].name: 'd' is the name of another volume of the pod"),
        ({}, {"volumes": [{"name": "Data", "emptyDir": {}}]}, "spec.volumes[0].name: 'Data' must be a DNS label"),
        ({}, {"volumes": [{"name": "d"}]}, "spec.volumes[0]: a volume source is required"),
        ({}, {"volumes": [{"name": "d", "emptyDir": {}, "hostPath": {"path": "/x"}}]},
         "spec.volumes[0]: one volume source per volume, not 2 (emptyDir, hostPath)"),
        ({"resources": {"limits": {"nvidia.com/gpu": "0.5"}}}, {},
         "spec.containers[0].resources.limits[\"nvidia.com/gpu\"]: '0.5' must be a whole number"),
        ({"resources": {"limits": {"cpu": 1}, "requests": {"cpu": "2"}}}, {},
         "spec.containers[0].resources.requests.cpu: '2' must not be above limits[\"cpu\"]"),
        ({"resources": {"limits": {"nvidia.com/gpu": 2}, "requests": {"nvidia.com/gpu": 1}}}, {},
         'spec.containers[0].resources.requests["nvidia.com/gpu"]: must equal limits["nvidia.com/gpu"]'),
        ({"resources": {"requests": {"memory": "-1Gi"}}}, {}, "spec.containers[0].resources.requests.memory: '-1Gi' must not be negative"),
        ({"env": [{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}, {},
         "spec.containers[0].env[0]: value and valueFrom: give one of the two"),
        ({"env": [{"name": "A", "valueFrom": {}}]}, {}, "spec.containers[0].env[0].valueFrom: exactly one of fieldRef"),
        ({"envFrom": [{"prefix": "X_"}]}, {}, "spec.containers[0].envFrom[0]: exactly one of configMapRef and secretRef"),
        ({"ports": [{"containerPort": 70000}]}, {}, "spec.containers[0].ports[0].containerPort: 70000 must be between 1 and 65535"),
        ({"ports": [{"containerPort": 80, "protocol": "HTTP"}]}, {}, "spec.containers[0].ports[0].protocol: 'HTTP' is not accepted"),
        ({"ports": [{"containerPort": 80, "name": "web"}, {"containerPort": 81, "name": "web"}]}, {},
         "spec.containers[0].ports[1].name: 'web' names another port of the container"),
    ],
)
def test_values_the_api_server_refuses_are_refused(container: dict[str, Any], pod: dict[str, Any], expected: str) -> None:
    data, template = manifest("DeepSpeedJob", container, pod)
    (line,) = refused(data)
    assert line.startswith(f"{template}.{expected}"), line


def test_template_labels_and_annotations_are_checked_as_kubernetes_does() -> None:
    data, _ = manifest("GenericJob", {})
    data["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"labels": {"team": "a b"}}
    assert refused(data)[0].startswith("spec.replicaSpecs[0].template.metadata.labels.team: 'a b' is not a label value")
    data["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"labels": ["a"]}
    assert refused(data)[0].startswith("spec.replicaSpecs[0].template.metadata.labels: must be a mapping")
    data["spec"]["replicaSpecs"][0]["template"]["metadata"] = {"annotations": {"-bad": "x"}}
    assert refused(data)[0].startswith('spec.replicaSpecs[0].template.metadata.annotations["-bad"]: not a valid key')
    good = {"labels": {"app.kubernetes.io/name": "x", "empty": ""}, "annotations": {"example.com/note": "any text"}}
    data["spec"]["replicaSpecs"][0]["template"]["metadata"] = good
    assert parse_job(data).spec.replica_specs[0].template["metadata"] == good


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_real_manifests_use_are_accepted_and_render(kind: str) -> None:
    container = {
        "resources": {"limits": {"cpu": 8, "memory": "48Gi", "nvidia.com/gpu": "2"}, "requests": {"cpu": "500m", "memory": 2.5e9}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "shm", "mountPath": "/dev/shm"},
                         {"name": "cfg", "mountPath": "/etc/app/app.yaml", "subPath": "app.yaml", "readOnly": True}],
        "env": [{"name": "A", "value": "1"}, {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "envFrom": [{"configMapRef": {"name": "cm"}}],
        "ports": [{"containerPort": 8080, "name": "http"}],
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "readinessProbe": {"httpGet": {"port": "http", "path": "/"}},
        "someFieldOfANewerKubernetes": {"any": ["thing"]},  # passed through, as T9k passes the template
    }  # fmt: skip
    pod = {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}, {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
                    {"name": "cfg", "configMap": {"name": "app"}}],
        "nodeSelector": {"gpu": "a100"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }  # fmt: skip
    data, _ = manifest(kind, container, pod)
    job = parse_job(data)
    assert render(job, keygen=_keys)


def test_a_null_field_is_the_field_left_out() -> None:
    """As the API server reads a Pod: ``volumes: null`` is no volumes (a plug-in adding its own
    volume to it raised before)."""
    data, _ = manifest("DeepSpeedJob", {"volumeMounts": None, "resources": {"limits": None}, "env": None}, {"volumes": None})
    job = parse_job(data)
    c = job.spec.worker.template["spec"]["containers"][0]
    assert "volumes" not in job.spec.worker.template["spec"] and "volumeMounts" not in c and c["resources"] == {}
    assert render(job, keygen=_keys)


def test_the_colossalai_launcher_resources_are_checked_as_a_containers() -> None:
    data, _ = manifest("ColossalAIJob", {})
    data["spec"]["launcher"] = {"resources": "big"}
    assert refused(data) == [
        "spec.launcher.resources: must be a mapping (a Kubernetes ResourceRequirements), not str 'big'"
    ]
    data["spec"]["launcher"] = {"resources": {"limits": {"memory": "lots"}}}
    assert refused(data)[0].startswith("spec.launcher.resources.limits.memory: str 'lots' is not a quantity")
    data["spec"]["launcher"] = {"env": [{"name": "A", "valueFrom": {"secretKeyRef": "s"}}]}
    assert refused(data)[0].startswith("spec.launcher.env[0].valueFrom.secretKeyRef: must be a mapping")


def test_the_older_colossalai_form_names_the_replica_spec() -> None:
    spec = {
        "torchConfig": {"script": ["t.py"]},
        "replicaSpecs": [
            replica("launcher", None, {"spec": {"containers": [{"name": "launcher", "image": IMAGE}], "volumes": 5}}),
            replica("worker", 2, {"spec": {"containers": [{"name": "worker", "image": IMAGE, "resources": "big"}]}}),
        ],
    }
    lines = refused(job("ColossalAIJob", "j", spec))
    assert lines[0].startswith("spec.replicaSpecs[0].template.spec.volumes: must be a list"), lines
    assert any(line.startswith("spec.replicaSpecs[1].template.spec.containers[0].resources: must be a mapping") for line in lines)


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", "0.5"), ("4Gi", str(4 * 2**30)), ("1e3", "1000"), ("1E", "1e18"), ("2", "2"), (3, "3"), (0.5, "0.5"), ("1.5k", "1500")],
)
def test_quantities(text: Any, value: str) -> None:
    from decimal import Decimal

    assert parse_quantity(text) == Decimal(value)


@pytest.mark.parametrize("text", ["big", "1.5.2", "", "1 Gi", "Gi", "2e", "1e999", str(2**63), True, float("inf"), [1]])
def test_not_quantities(text: Any) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_a_template_is_not_changed_but_for_its_nulls() -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x", "args": None}], "x": 1}}
    out = check_pod_template(copy.deepcopy(template))
    assert out == {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}], "x": 1}}


def test_the_kubernetes_types_are_up_to_date_with_the_client() -> None:
    """````pod_types.json`` is generated from the locked ``kubernetes_asyncio``'s models."""
    assert TYPES_FILE.read_text(encoding="utf-8") == generate_types(), f"regenerate with: {GENERATE_COMMAND}"


def test_validate_and_render_say_one_line_and_exit_2(tmp_path: Path) -> None:
    """The issue's case end to end: ``validate`` and ``render`` printed a traceback."""
    data, _ = manifest("DeepSpeedJob", {"volumeMounts": "data"}, {"volumes": 5})
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    for verb in ("validate", "render"):
        done = subprocess.run(
            [sys.executable, "-m", "t9k_jobs.cli", verb, str(path)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""
        assert done.stderr == (
            f"error: {path}: spec.worker.template.spec.containers[0].volumeMounts: must be a list, not str 'data'\n"
        ), done.stderr
