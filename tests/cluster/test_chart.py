"""The Helm chart charts/t9k-jobs: generated, up to date, rendering what deploy/ holds; no cluster.

The chart is regenerated with ``python -m t9k_jobs.deploy.chart --write charts/t9k-jobs``; helm
is built by tools/helm/build.sh. Installing, upgrading and uninstalling it on a real node:
tests/node/test_helm.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from t9k_jobs.deploy import chart, rbac
from t9k_jobs.deploy.chart import GENERATE_COMMAND, check_chart, generate_chart
from t9k_jobs.deploy.chart_values import default_values, values_schema

from .helm import CHART, helm

STANDARD_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
}


def render(*args: str, release: str = "t9k-jobs", namespace: str = rbac.NAMESPACE) -> list[dict[str, Any]]:
    """``helm template`` of the chart: the objects, in order."""
    out = helm("template", release, str(CHART), "--namespace", namespace, *args)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d is not None]


def render_error(*args: str) -> str:
    out = helm("template", "t9k-jobs", str(CHART), *args)
    assert out.returncode != 0, f"helm template {' '.join(args)} succeeded:\n{out.stdout[:2000]}"
    return out.stderr


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


def flag(args: list[str], name: str) -> list[str]:
    """Every value given to ``name`` in ``args``."""
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]


def without_helm_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without Helm's standard labels and resource policy (anywhere in its metadata)."""
    obj = copy.deepcopy(obj)

    def strip(meta: dict[str, Any]) -> None:
        for key, drop in (("labels", STANDARD_LABELS), ("annotations", {"helm.sh/resource-policy"})):
            values = {k: v for k, v in (meta.get(key) or {}).items() if k not in drop}
            if values:
                meta[key] = values
            else:
                meta.pop(key, None)

    strip(obj["metadata"])
    if obj["kind"] == "Deployment":
        strip(obj["spec"]["template"]["metadata"])
    return obj


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


# --------------------------------------------------------------------------- generated, up to date


def test_committed_chart_is_up_to_date() -> None:
    problems = check_chart(CHART)
    assert not problems, "\n".join(problems) + f"\nregenerate with: {GENERATE_COMMAND}"


def test_check_reports_stale_missing_and_extra_files(tmp_path: Path) -> None:
    assert chart.main(["--write", str(tmp_path)]) == 0
    assert check_chart(tmp_path) == []
    assert chart.main(["--check", str(tmp_path)]) == 0
    values = tmp_path / "values.yaml"
    values.write_text(values.read_text().replace("replicaCount: 2", "replicaCount: 3"))
    (tmp_path / "templates" / "crds" / "genericjobs.yaml").unlink()
    (tmp_path / "templates" / "extra.yaml").write_text("kind: ConfigMap\n")
    problems = check_chart(tmp_path)
    assert any("values.yaml: out of date" in p and "+replicaCount: 2" in p for p in problems), problems
    assert any(p.endswith("genericjobs.yaml: missing") for p in problems), problems
    assert any("extra.yaml: not generated" in p for p in problems), problems
    assert chart.main(["--check", str(tmp_path)]) == 1
    # --write puts back what it generates and leaves files it did not write alone.
    assert chart.main(["--write", str(tmp_path)]) == 0
    assert [p for p in check_chart(tmp_path) if "extra.yaml" not in p] == []


def test_generation_is_deterministic() -> None:
    assert generate_chart() == generate_chart()


def test_values_yaml_and_schema_agree() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values == default_values()
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema == values_schema()
    jsonschema.validate(values, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**values, "replicas": 3}, schema)  # a misspelt key


def test_a_new_deployment_flag_needs_a_chart_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag with a value added to the Deployment in rbac.py stops the generator, naming it."""
    original = rbac.deployment

    def with_flag(*args: Any, **kw: Any) -> dict[str, Any]:
        dep = original(*args, **kw)
        dep["spec"]["template"]["spec"]["containers"][0]["args"] += ["--resync-period", "30"]
        return dep

    monkeypatch.setattr(rbac, "deployment", with_flag)
    with pytest.raises(ValueError, match="--resync-period 30 has no chart value"):
        generate_chart()


def test_the_defaults_are_the_operators() -> None:
    """values.yaml's operator settings are the defaults of ``t9k-jobs operator`` itself."""
    import typer.main

    from t9k_jobs import cli

    command = typer.main.get_command(cli.app).commands["operator"]  # type: ignore[attr-defined]
    params = command.make_context("operator", []).params
    values = default_values()
    assert params["workers"] == values["workers"]
    assert params["qps"] == values["kubeApi"]["qps"]
    assert params["burst"] == values["kubeApi"]["burst"]
    assert params["log_level"] == values["logLevel"]
    assert params["bind"] == f":{values['metrics']['port']}"


# --------------------------------------------------------------------------- helm lint and template


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["--set", "watchNamespaces={team-a,team-b}", "--set", "metrics.serviceMonitor.enabled=true"],
        ["--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ops",
         "--set", "crds.install=false"],
    ],
    ids=["defaults", "namespaced-monitored", "own-account-no-crds"],
)
def test_helm_lint_passes(values: list[str]) -> None:
    out = helm("lint", "--strict", str(CHART), *values)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout


def test_default_render_is_deploy() -> None:
    """Release t9k-jobs in t9k-jobs-system with default values: exactly deploy/'s objects (CRDs,
    RBAC, Deployment; not the Namespace, which Helm makes) plus Helm's labels and, on the CRDs,
    the keep policy."""
    objects = render()
    deploy = [o for o in rbac.manifests() if o["kind"] != "Namespace"]
    got = sorted((without_helm_metadata(o) for o in objects), key=key)
    assert [key(o) for o in got] == sorted(key(o) for o in deploy)
    for have, want in zip(got, sorted(deploy, key=key), strict=True):
        assert have == want, key(want)
    for obj in objects:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/instance"] == "t9k-jobs"
        assert labels["helm.sh/chart"] == "t9k-jobs-0.1.0"
        if obj["kind"] == "CustomResourceDefinition":
            assert obj["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    # The selector is deploy/'s: a Deployment made by `t9k-jobs install` can be taken over.
    assert one(objects, "Deployment")["spec"]["selector"] == {"matchLabels": rbac.SELECTOR_LABELS}


def test_release_name_and_namespace_name_everything() -> None:
    objects = render(release="prod", namespace="ops")
    name = "prod-t9k-jobs-operator"
    for obj in objects:
        if obj["kind"] != "CustomResourceDefinition":
            assert obj["metadata"]["name"] == name, key(obj)
            assert obj["metadata"].get("namespace", "ops") == "ops", key(obj)
    args = container(objects)["args"]
    assert flag(args, "--lease-name") == [name] and flag(args, "--lease-namespace") == ["ops"]
    lease_role = one(objects, "Role")
    assert [r.get("resourceNames") for r in lease_role["rules"]] == [None, [name]]
    for binding in (one(objects, "ClusterRoleBinding"), one(objects, "RoleBinding")):
        assert binding["roleRef"]["name"] == name
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": "ops"}]
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == name
    assert render("--set", "fullnameOverride=jobs")[0]["metadata"]["name"] == "jobs"


def test_values_reach_the_deployment() -> None:
    objects = render(
        "--set", "image.repository=registry.example.com/t9k/t9k-jobs",
        "--set", "image.tag=1.2.3",
        "--set", "image.pullPolicy=Always",
        "--set", "replicaCount=3",
        "--set", "workers=16",
        "--set", "kubeApi.qps=200.5",
        "--set", "kubeApi.burst=1000000",
        "--set", "logLevel=DEBUG",
        "--set", "metrics.port=9090",
        "--set", "resources.limits.memory=1Gi",
        "--set", "nodeSelector.role=infra",
        "--set-json", 'tolerations=[{"key":"infra","operator":"Exists","effect":"NoSchedule"}]',
        "--set", "affinity=null",
        "--set", "priorityClassName=system-cluster-critical",
        "--set-json", 'imagePullSecrets=[{"name":"regcred"}]',
        "--set", "podAnnotations.team=ml",
    )
    dep = one(objects, "Deployment")
    pod = dep["spec"]["template"]
    c = container(objects)
    assert dep["spec"]["replicas"] == 3
    assert c["image"] == "registry.example.com/t9k/t9k-jobs:1.2.3" and c["imagePullPolicy"] == "Always"
    assert flag(c["args"], "--workers") == ["16"]
    assert flag(c["args"], "--kube-api-qps") == ["200.5"]
    assert flag(c["args"], "--kube-api-burst") == ["1000000"]
    assert flag(c["args"], "--log-level") == ["DEBUG"]
    assert flag(c["args"], "--metrics-bind-address") == [":9090"]
    assert c["ports"] == [{"name": "http", "containerPort": 9090, "protocol": "TCP"}]
    assert pod["metadata"]["annotations"] == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
        "prometheus.io/path": "/metrics",
        "team": "ml",
    }
    # A map value merges into the defaults (Helm's rule): the requests stay.
    assert c["resources"] == {
        "requests": {"cpu": "100m", "memory": "128Mi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    spec = pod["spec"]
    assert spec["nodeSelector"] == {"role": "infra"}
    assert spec["tolerations"] == [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}]
    assert "affinity" not in spec
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    # The operator accepts what the chart passes.
    import typer.main

    from t9k_jobs import cli

    command = typer.main.get_command(cli.app).commands["operator"]  # type: ignore[attr-defined]
    assert c["command"] == ["t9k-jobs"] and c["args"][0] == "operator"
    params = command.make_context("operator", c["args"][1:]).params
    assert (params["workers"], params["qps"], params["burst"], params["log_level"], params["bind"]) == (
        16, 200.5, 1000000, "DEBUG", ":9090",
    )
    # A fraction given as JSON is a number, not a string: the same flag.
    assert flag(container(render("--set-json", "kubeApi.qps=0.5"))["args"], "--kube-api-qps") == ["0.5"]
    # No tag: the chart's appVersion.
    assert container(render("--set", "image.repository=r/t9k-jobs"))["image"] == "r/t9k-jobs:0.1.0"


def test_watch_namespaces_grant_roles_instead_of_a_cluster_role() -> None:
    objects = render("--set", "watchNamespaces={team-a,team-b}")
    # Only the cluster-scoped rules (PriorityClasses, Kueue's ResourceFlavors and Nodes read) stay in a
    # ClusterRole of their own: a Role cannot grant them.
    (wide,) = [o for o in objects if o["kind"] == "ClusterRole"]
    (wide_binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
    assert wide["rules"] == rbac.cluster_scoped_rules() and len(wide["rules"]) == 3
    assert wide["metadata"]["name"] == wide_binding["roleRef"]["name"] == "t9k-jobs-operator-cluster-scoped"
    assert "namespace" not in wide["metadata"]
    assert wide_binding["subjects"] == [{"kind": "ServiceAccount", "name": rbac.NAME, "namespace": rbac.NAMESPACE}]
    args = container(objects)["args"]
    assert flag(args, "--namespace") == ["team-a", "team-b"]
    roles = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "Role"}
    bindings = {o["metadata"]["namespace"]: o for o in objects if o["kind"] == "RoleBinding"}
    assert set(roles) == set(bindings) == {"team-a", "team-b", rbac.NAMESPACE}
    for ns in ("team-a", "team-b"):
        # The ClusterRole's rules on namespaced resources, only in the watched namespace.
        assert roles[ns]["rules"] == rbac.namespaced_rules()
        assert rbac.namespaced_rules() + rbac.cluster_scoped_rules() == rbac.cluster_role()["rules"]
        assert roles[ns]["metadata"]["name"] == bindings[ns]["roleRef"]["name"] == "t9k-jobs-operator-jobs"
        assert bindings[ns]["roleRef"]["kind"] == "Role"
        assert bindings[ns]["subjects"] == [
            {"kind": "ServiceAccount", "name": rbac.NAME, "namespace": rbac.NAMESPACE}
        ]
    # The Lease's Role stays in the release's namespace, whatever is watched.
    assert without_helm_metadata(roles[rbac.NAMESPACE]) == rbac.lease_role()
    # Watching the release's own namespace does not clash with the Lease's Role.
    objects = render("--set", f"watchNamespaces={{{rbac.NAMESPACE}}}")
    names = [(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] == "Role"]
    assert sorted(names) == [("Role", rbac.NAME), ("Role", f"{rbac.NAME}-jobs")]


def test_service_account_can_be_brought() -> None:
    objects = render("--set", "serviceAccount.create=false", "--set", "serviceAccount.name=ops")
    assert "ServiceAccount" not in [o["kind"] for o in objects]
    assert one(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "ops"
    for binding in (one(objects, "ClusterRoleBinding"), one(objects, "RoleBinding")):
        assert binding["subjects"][0]["name"] == "ops"
    assert "serviceAccount.name is required when serviceAccount.create is false" in render_error(
        "--set", "serviceAccount.create=false"
    )
    annotated = render("--set", "serviceAccount.annotations.team=ml")
    assert one(annotated, "ServiceAccount")["metadata"]["annotations"] == {"team": "ml"}


def test_metrics_service_and_service_monitor() -> None:
    kinds = [o["kind"] for o in render()]
    assert "Service" not in kinds and "ServiceMonitor" not in kinds
    objects = render(
        "--set", "metrics.serviceMonitor.enabled=true",
        "--set", "metrics.serviceMonitor.labels.release=prom",
        "--set", "metrics.serviceMonitor.scrapeTimeout=10s",
        "--set", "metrics.port=9090",
    )
    service = one(objects, "Service")
    assert service["metadata"]["name"] == f"{rbac.NAME}-metrics"
    assert service["spec"]["selector"] == rbac.SELECTOR_LABELS
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}
    ]
    monitor = one(objects, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["metadata"]["labels"]["app.kubernetes.io/name"] == "t9k-jobs"
    assert monitor["spec"]["selector"] == {"matchLabels": rbac.SELECTOR_LABELS}
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [rbac.NAMESPACE]}
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    ]
    # The Service's port name reaches the container's metrics port, whatever its number.
    (port,) = container(objects)["ports"]
    assert port["name"] == "http" and port["containerPort"] == 9090
    alone = render("--set", "metrics.service.enabled=true", "--set", "metrics.service.type=NodePort")
    assert one(alone, "Service")["spec"]["type"] == "NodePort"
    assert "ServiceMonitor" not in [o["kind"] for o in alone]


def test_crds_can_be_left_out_or_not_kept() -> None:
    assert "CustomResourceDefinition" not in [o["kind"] for o in render("--set", "crds.install=false")]
    crds = [o for o in render("--set", "crds.keep=false") if o["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 4 and all("annotations" not in o["metadata"] for o in crds)


def test_job_priorities_are_the_admins_grant() -> None:
    """Issue 33: no PriorityClass by default; each allowed priority gets t9k-priority-N (value N)
    with the chosen preemption policy; the operator's rights on them stay read-only."""
    assert "PriorityClass" not in [o["kind"] for o in render()]
    objects = render("--set", "jobPriorities.allowed={0,50,100}")
    classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PriorityClass"}
    assert set(classes) == {"t9k-priority-0", "t9k-priority-50", "t9k-priority-100"}
    for n in (0, 50, 100):
        pc = classes[f"t9k-priority-{n}"]
        assert without_helm_metadata(pc) == rbac.priority_class(n)
        assert pc["metadata"]["labels"]["app.kubernetes.io/instance"] == "t9k-jobs"
    never = render("--set", "jobPriorities.allowed={10}", "--set", "jobPriorities.preemptionPolicy=Never")
    (pc,) = [o for o in never if o["kind"] == "PriorityClass"]
    assert without_helm_metadata(pc) == rbac.priority_class(10, "Never")
    for role in [o for o in objects if o["kind"] == "ClusterRole"]:
        for rule in role["rules"]:
            if "priorityclasses" in rule["resources"]:
                assert rule["verbs"] == ["get", "list", "watch"], rule


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "replicaCount=0"], "replicaCount"),
        (["--set", "logLevel=verbose"], "logLevel"),
        (["--set", "replicas=3"], "replicas"),
        (["--set", "watchNamespaces={Team_A}"], "watchNamespaces"),
        (["--set", "kubeApi.qps=-1"], "qps"),
        (["--set", "kubeApi.qps=fast"], "qps"),
        (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
        (["--set", "metrics.port=70000"], "port"),
        (["--set", "jobPriorities.allowed={101}"], "allowed"),
        (["--set", "jobPriorities.allowed={50,50}"], "allowed"),
        (["--set", "jobPriorities.preemptionPolicy=Sometimes"], "preemptionPolicy"),
    ],
    ids=[
        "replicas-0", "log-level", "misspelt-key", "namespace-name", "negative-qps", "qps-word", "pull-policy",
        "port", "priority-101", "priority-twice", "preemption-policy",
    ],
)
def test_bad_values_are_refused_naming_the_field(values: list[str], message: str) -> None:
    err = render_error(*values)
    assert "values don't meet the specifications of the schema" in err, err
    assert message in err, err
