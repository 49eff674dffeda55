"""The generated deploy files (deploy/rbac.yaml, deploy/operator.yaml) and ``install``, no cluster.

``deploy/`` is regenerated with ``python -m t9k_jobs.deploy.rbac --write deploy``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_jobs.api import KINDS
from t9k_jobs.cluster import client as kube
from t9k_jobs.cluster.client import ApiError, Resource
from t9k_jobs.deploy.install import KIND_RESOURCES, InstallError, install, resource_for
from t9k_jobs.deploy.rbac import (
    DEFAULT_IMAGE,
    GENERATE_COMMAND,
    LEASE_NAME,
    METRICS_PORT,
    NAME,
    NAMESPACE,
    check_deploy,
    deployment,
    deployment_objects,
    generate_deploy,
    install_objects,
    main,
    manifests,
    rbac_objects,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
GROUP = "batch.tensorstack.dev"
PLURALS = [cls.PLURAL for cls in KINDS.values()]
WRITES = {"create", "update", "patch", "delete", "deletecollection"}


def load(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")) if d is not None]


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


RBAC = load("rbac.yaml")
OPERATOR = load("operator.yaml")
CLUSTER_ROLE = by_kind(RBAC, "ClusterRole")
LEASE_ROLE = by_kind(RBAC, "Role")
DEPLOYMENT = by_kind(OPERATOR, "Deployment")


def grants(rules: list[dict[str, Any]], group: str, resource: str, name: str | None = None) -> set[str]:
    """The verbs ``rules`` allow on ``group``/``resource`` (object ``name`` when given)."""
    verbs: set[str] = set()
    for rule in rules:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            if "resourceNames" in rule and (name is None or name not in rule["resourceNames"]):
                continue
            verbs |= set(rule["verbs"])
    return verbs


# --------------------------------------------------------------------------- files up to date


def test_committed_files_are_up_to_date() -> None:
    problems = check_deploy(DEPLOY)
    assert not problems, "\n".join(problems) + f"\nregenerate with: {GENERATE_COMMAND}"


def test_committed_files_parse_to_the_generated_objects() -> None:
    assert RBAC == rbac_objects()
    assert OPERATOR == deployment_objects(DEFAULT_IMAGE)


def test_check_reports_stale_and_missing_files(tmp_path: Path) -> None:
    assert main(["--write", str(tmp_path)]) == 0
    assert check_deploy(tmp_path) == []
    assert main(["--check", str(tmp_path)]) == 0
    (tmp_path / "operator.yaml").write_text(
        generate_deploy()["operator.yaml"].replace("replicas: 2", "replicas: 1")
    )
    (tmp_path / "rbac.yaml").unlink()
    problems = check_deploy(tmp_path)
    assert any(p.startswith(f"{tmp_path / 'rbac.yaml'}: missing") for p in problems)
    assert any("operator.yaml: out of date" in p and "-  replicas: 1" in p for p in problems)
    assert main(["--check", str(tmp_path)]) == 1


def test_generation_is_deterministic() -> None:
    assert generate_deploy() == generate_deploy()


def test_apply_order() -> None:
    kinds = [o["kind"] for o in manifests()]
    assert kinds == ["CustomResourceDefinition"] * 4 + [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
    ]
    assert manifests(image="x/y:1")[-1]["spec"]["template"]["spec"]["containers"][0]["image"] == "x/y:1"
    assert install_objects() == manifests()[:-1]


# --------------------------------------------------------------------------- cluster role


def test_every_rule_is_explicit() -> None:
    for role in (CLUSTER_ROLE, LEASE_ROLE):
        assert role["rules"]
        for rule in role["rules"]:
            assert set(rule) <= {"apiGroups", "resources", "resourceNames", "verbs"}, rule
            for key in ("apiGroups", "resources", "verbs"):
                assert rule[key], f"{key} is empty in {rule}"
                assert "*" not in rule[key] and not any("*" in v for v in rule[key]), rule
            assert "nonResourceURLs" not in rule


def test_jobs_are_never_written_but_their_status_and_deleted_only_past_their_ttl() -> None:
    for plural in PLURALS:
        # delete: a finished job past its time to live (engine/ttl.py); never update or patch.
        assert grants(CLUSTER_ROLE["rules"], GROUP, plural) == {"get", "list", "watch", "delete"}, plural
        assert grants(CLUSTER_ROLE["rules"], GROUP, f"{plural}/status") == {"get", "update", "patch"}
        # The OwnerReferencesPermissionEnforcement check for blockOwnerDeletion; no endpoint behind it.
        assert grants(CLUSTER_ROLE["rules"], GROUP, f"{plural}/finalizers") == {"update"}
    for rule in CLUSTER_ROLE["rules"]:
        if GROUP in rule["apiGroups"]:
            for resource in rule["resources"]:
                base, _, sub = resource.partition("/")
                assert base in PLURALS and sub in ("", "status", "finalizers"), resource
                if not sub:
                    assert not (WRITES - {"delete"}) & set(rule["verbs"]), rule


@pytest.mark.parametrize(
    "res",
    [r for r in (*kube.CORE_CHILDREN.values(), *kube.OPTIONAL_CHILDREN.values()) if r.kind != "Secret"],
    ids=lambda r: r.kind,
)
def test_children_can_be_watched_created_and_deleted_and_only_non_pods_patched(res: Resource) -> None:
    """Pods are never changed in place (a new launch is a new pod), nor Kueue Workloads (a job
    whose shape changed queues again with a new one: engine/admission.py); the other children are
    patched to the spec's desired state (engine.desired), never replaced wholesale."""
    verbs = {"get", "list", "watch", "create", "delete"}
    replaced = res.kind in ("Pod", "Workload")
    assert grants(CLUSTER_ROLE["rules"], res.group, res.plural) == (verbs if replaced else verbs | {"patch"})


def test_resource_flavors_are_only_read() -> None:
    """The node labels of Kueue's flavors are read for an admitted job's pods, never changed."""
    assert grants(CLUSTER_ROLE["rules"], "kueue.x-k8s.io", "resourceflavors") == {"get", "list", "watch"}


def test_secrets_can_only_be_created() -> None:
    """The operator makes its jobs' ssh-key Secrets; any read of Secrets (get, list, watch) would
    reach every Secret of the cluster, since RBAC cannot filter by label."""
    assert grants(CLUSTER_ROLE["rules"], "", "secrets") == {"create"}


def test_exact_cluster_role() -> None:
    """Every (group, resource) the operator may touch, with its verbs: nothing more."""
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in CLUSTER_ROLE["rules"]:
        assert "resourceNames" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    children = {"get", "list", "watch", "create", "delete"}
    updated = children | {"patch"}
    expected = {
        **{(GROUP, p): {"get", "list", "watch", "delete"} for p in PLURALS},
        **{(GROUP, f"{p}/status"): {"get", "update", "patch"} for p in PLURALS},
        **{(GROUP, f"{p}/finalizers"): {"update"} for p in PLURALS},
        ("", "pods"): children,
        ("policy", "poddisruptionbudgets"): updated,
        # A running replica's last log line, for a job's progress deadline (issue 42): read only.
        ("", "pods/log"): {"get"},
        ("", "services"): updated,
        ("", "configmaps"): updated,
        ("", "secrets"): {"create"},
        ("", "events"): {"create", "patch"},
        ("scheduler.tensorstack.dev", "podgroups"): updated,
        ("scheduling.k8s.io", "podgroups"): updated,
        # PriorityClasses: read only (which t9k-priority-N the admin made); never made (issue 33).
        ("scheduling.k8s.io", "priorityclasses"): {"get", "list", "watch"},
        ("tensorstack.dev", "tensorboards"): updated,
        # Kueue: a t9kScheduler job's Workload (deleted, never patched), the flavors' node labels
        # and, with the queues, whether a job's queue places it by topology: read only.
        ("kueue.x-k8s.io", "workloads"): children,
        ("kueue.x-k8s.io", "resourceflavors"): {"get", "list", "watch"},
        ("kueue.x-k8s.io", "localqueues"): {"get", "list", "watch"},
        ("kueue.x-k8s.io", "clusterqueues"): {"get", "list", "watch"},
        ("", "nodes"): {"get", "list", "watch"},
    }
    assert granted == expected
    assert ("", "pods/status") not in granted and ("", "pods/exec") not in granted


def test_cluster_role_is_bound_to_the_service_account() -> None:
    binding = by_kind(RBAC, "ClusterRoleBinding")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": NAME,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    account = by_kind(RBAC, "ServiceAccount")
    assert account["metadata"]["name"] == NAME and account["metadata"]["namespace"] == NAMESPACE


# --------------------------------------------------------------------------- leader election


def test_lease_role_covers_only_our_lease_in_our_namespace() -> None:
    assert LEASE_ROLE["metadata"]["namespace"] == NAMESPACE
    rules = LEASE_ROLE["rules"]
    assert grants(rules, "coordination.k8s.io", "leases", LEASE_NAME) == {"get", "create", "update"}
    assert grants(rules, "coordination.k8s.io", "leases", "someone-else") == {"create"}
    assert {r for rule in rules for r in rule["resources"]} == {"leases"}
    binding = by_kind(RBAC, "RoleBinding")
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]


# --------------------------------------------------------------------------- deployment


def container() -> dict[str, Any]:
    (found,) = DEPLOYMENT["spec"]["template"]["spec"]["containers"]
    return found


def test_probes_point_at_healthz_and_readyz_on_the_metrics_port() -> None:
    c = container()
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path
        assert ports.get(get["port"], get["port"]) == METRICS_PORT
    # The operator serves them where --metrics-bind-address says: the same port.
    assert c["args"][c["args"].index("--metrics-bind-address") + 1] == f":{METRICS_PORT}"


def test_operator_flags_are_spelled_out_at_the_operators_defaults() -> None:
    """Every setting the Helm chart maps to a value is in the manifest, at ``t9k-jobs operator``'s
    own default (parsing no arguments gives the same as parsing the Deployment's)."""
    import typer.main

    from t9k_jobs import cli

    command = typer.main.get_command(cli.app).commands["operator"]  # type: ignore[attr-defined]
    args = container()["args"]
    flags = ("--lease-name", "--metrics-bind-address", "--workers", "--kube-api-qps", "--kube-api-burst")
    for name in (*flags, "--log-level"):
        assert name in args, name
    given = command.make_context("operator", args[1:]).params
    defaults = command.make_context("operator", []).params
    assert given.pop("lease_namespace") == NAMESPACE and defaults.pop("lease_namespace") == ""
    assert given == defaults


def test_operator_command_and_leader_election() -> None:
    spec = DEPLOYMENT["spec"]
    assert DEPLOYMENT["metadata"]["namespace"] == NAMESPACE
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    c = container()
    assert c["image"] == DEFAULT_IMAGE == "t9k-jobs:0.1.0"
    assert [*c["command"], *c["args"]][:2] == ["t9k-jobs", "operator"]
    assert "--leader-elect" in c["args"]
    assert c["args"][c["args"].index("--lease-namespace") + 1] == NAMESPACE
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert DEPLOYMENT["spec"]["template"]["spec"]["serviceAccountName"] == NAME


def test_the_cli_accepts_the_deployments_arguments() -> None:
    """The container's arguments parse as ``t9k-jobs operator`` options (nothing is run)."""
    import typer.main

    from t9k_jobs import cli

    group = typer.main.get_command(cli.app)
    command = getattr(group, "commands", {}).get("operator")
    assert command is not None, "t9k-jobs has an operator command"
    c = container()
    argv = [*c["command"], *c["args"]]
    assert argv[:2] == ["t9k-jobs", "operator"]
    ctx = command.make_context("operator", argv[2:])
    for name in ("bind", "metrics_bind_address", "metrics_port"):
        if name in ctx.params:  # the probes' port is the operator's port
            assert str(ctx.params[name]).endswith(str(METRICS_PORT)), (name, ctx.params[name])


def test_operator_runs_locked_down() -> None:
    pod = DEPLOYMENT["spec"]["template"]["spec"]
    c = container()
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] is True and pod["securityContext"]["runAsNonRoot"] is True
    assert isinstance(pod["securityContext"]["runAsUser"], int) and pod["securityContext"]["runAsUser"] > 0
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][kind])
    ns = by_kind(RBAC, "Namespace")
    assert ns["metadata"]["name"] == NAMESPACE
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_deployment_arguments_are_checked() -> None:
    assert deployment(replicas=1)["spec"]["replicas"] == 1
    with pytest.raises(ValueError, match="replicas"):
        deployment(replicas=0)
    with pytest.raises(ValueError, match="image"):
        deployment(image="")


def test_dockerfile_runs_the_operator_as_the_deployments_user() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    uid = DEPLOYMENT["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert f"USER {uid}:" in text
    assert 'ENTRYPOINT ["t9k-jobs"]' in text and 'CMD ["operator"]' in text
    # The base is an argument (tools/images builds FROM a base made here); python:3.11-slim by default.
    assert "ARG BASE=python:3.11-slim" in text
    assert [line for line in text.splitlines() if line.startswith("FROM ")] == [
        "FROM ${BASE} AS build",
        "FROM ${BASE}",
    ]


# --------------------------------------------------------------------------- install (fake client)


class FakeClient:
    """Records applies; CRDs become Established after ``established_after`` gets of each."""

    def __init__(
        self, established_after: int = 1, never: str | None = None, refuse: str | None = None
    ) -> None:
        self.applied: list[tuple[Resource, dict[str, Any], str]] = []
        self.gets: dict[str, int] = {}
        self.established_after = established_after
        self.never = never
        self.refuse = refuse

    async def apply(
        self, res: Resource, obj: dict[str, Any], field_manager: str, force: bool = True
    ) -> dict[str, Any]:
        if obj["metadata"]["name"] == self.refuse and obj["kind"] == "ClusterRole":
            raise ApiError(403, "Forbidden", "clusterroles.rbac.authorization.k8s.io is forbidden")
        self.applied.append((res, obj, field_manager))
        return obj

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
        assert res == kube.CRDS and namespace is None
        n = self.gets[name] = self.gets.get(name, 0) + 1
        ok = name != self.never and n >= self.established_after
        cond = {"type": "Established", "status": "True" if ok else "False", "reason": "Installing"}
        return {"metadata": {"name": name}, "status": {"conditions": [cond]}}


def test_install_applies_crds_namespace_and_rbac() -> None:
    client = FakeClient(established_after=2)
    lines = asyncio.run(install(client, poll=0.001))
    assert lines[:4] == [f"customresourcedefinition/{p}.{GROUP} applied" for p in PLURALS]
    assert lines[4:] == [
        "namespace/t9k-jobs-system applied",
        "serviceaccount/t9k-jobs-operator applied",
        "clusterrole/t9k-jobs-operator applied",
        "clusterrolebinding/t9k-jobs-operator applied",
        "role/t9k-jobs-operator applied",
        "rolebinding/t9k-jobs-operator applied",
    ]
    assert [obj for _, obj, _ in client.applied] == install_objects()
    assert {fm for _, _, fm in client.applied} == {"t9k-jobs"}
    for res, obj, _ in client.applied:
        assert res.kind == obj["kind"] and res.api_version == obj["apiVersion"]
        assert res.namespaced == ("namespace" in obj["metadata"])
    assert all(n >= 2 for n in client.gets.values()) and len(client.gets) == 4


def test_install_with_operator_applies_the_deployment_last() -> None:
    client = FakeClient()
    lines = asyncio.run(install(client, with_operator=True, image="reg/t9k-jobs:dev", field_manager="me"))
    assert lines[-1] == "deployment/t9k-jobs-operator applied"
    res, obj, manager = client.applied[-1]
    assert (
        res.path(NAMESPACE, NAME) == "/apis/apps/v1/namespaces/t9k-jobs-system/deployments/t9k-jobs-operator"
    )
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/t9k-jobs:dev"
    assert manager == "me"


def test_install_names_the_crd_that_is_not_established() -> None:
    bad = f"deepspeedjobs.{GROUP}"
    client = FakeClient(never=bad)
    with pytest.raises(
        InstallError, match=rf"not Established after 0.05s: customresourcedefinition/{bad}: Installing"
    ):
        asyncio.run(install(client, with_operator=True, wait=0.05, poll=0.01))
    assert all(obj["kind"] != "Deployment" for _, obj, _ in client.applied)


def test_install_without_wait_does_not_poll() -> None:
    client = FakeClient(never=f"genericjobs.{GROUP}")
    assert len(asyncio.run(install(client, wait=0))) == 10
    assert client.gets == {}


def test_install_error_names_the_object() -> None:
    with pytest.raises(InstallError, match=r"clusterrole/t9k-jobs-operator: 403 Forbidden") as info:
        asyncio.run(install(FakeClient(refuse=NAME)))
    assert isinstance(info.value.__cause__, ApiError)


def test_every_installed_kind_has_a_resource() -> None:
    for obj in manifests():
        assert resource_for(obj) is KIND_RESOURCES[obj["kind"]]
    with pytest.raises(InstallError, match="cannot install v1/ConfigMap"):
        resource_for({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})


def test_install_fails_fast_on_a_name_conflict() -> None:
    class Clash(FakeClient):
        async def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any]:
            cond = {
                "type": "NamesAccepted",
                "status": "False",
                "reason": "ShortNamesConflict",
                "message": '"pj" is taken',
            }
            return {"metadata": {"name": name}, "status": {"conditions": [cond]}}

    with pytest.raises(
        InstallError, match=r"genericjobs\.batch\.tensorstack\.dev: names not accepted: ShortNamesConflict"
    ):
        asyncio.run(install(Clash(), wait=30))
