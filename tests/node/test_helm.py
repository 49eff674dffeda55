"""The Helm chart (charts/t9k-jobs) on the real node: install, a job, upgrade, uninstall.

The session's operator (installed by ``t9k-jobs install``, conftest.py) is scaled to zero for
the test, so one operator reconciles at a time, and put back afterwards, leading again. The CRDs
it installed are taken over by the release the way Helm documents for objects made outside it
(its ``managed-by`` label and release annotations), so the chart installs them as a user's first
``helm install`` would, and given back as they were. The release lives in a namespace of its
own, under another name (``helm-test``), so none of its objects collides with the session's.
"""

from __future__ import annotations

import copy
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from t9k_jobs.deploy.rbac import NAME, NAMESPACE
from tests import helpers
from tests.helpers import replica, template

from ..cluster import helm as helm_build
from ..cluster.kube import Kube, KubeError, job_path, pod_path
from .conftest import OPERATOR_IMAGE, TRAINING_IMAGE, install_operator, wait_phase

RELEASE = "helm-test"
FULLNAME = f"{RELEASE}-t9k-jobs-operator"
CRDS = [
    f"{p}.batch.tensorstack.dev"
    for p in ("genericjobs", "pytorchtrainingjobs", "deepspeedjobs", "colossalaijobs")
]
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
SELECTOR = "app.kubernetes.io/name=t9k-jobs,app.kubernetes.io/component=operator"
REPO, TAG = OPERATOR_IMAGE.rsplit(":", 1)


def generic(name: str) -> dict[str, Any]:
    """A GenericJob of one worker that prints and exits 0."""
    pod = template(["sh", "-c", "echo helm chart job done"], name="main", image=TRAINING_IMAGE,
                   pod={"terminationGracePeriodSeconds": 5})
    worker = replica("worker", 1, pod, restartPolicy={"policy": "Never"})
    return helpers.job("GenericJob", name, {"successRules": [{"worker": [0]}], "replicaSpecs": [worker]})


def create_job(kube: Kube, ns: str, name: str) -> str:
    obj = generic(name)
    obj["metadata"]["namespace"] = ns
    kube.create(job_path(ns, "GenericJob"), obj)
    return job_path(ns, "GenericJob", name)


def operator_pods(kube: Kube, ns: str) -> list[dict[str, Any]]:
    """The live (not deleting) operator pods in ``ns``."""
    pods = kube.list(pod_path(ns), label_selector=SELECTOR)
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def wait_leader(kube: Kube, ns: str, lease: str, timeout: float = 180) -> str:
    """Wait until one of the running, ready operator pods in ``ns`` holds ``lease``; its name."""

    def holder() -> str:
        spec = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{lease}").get("spec", {})
        ready = {
            p["metadata"]["name"]
            for p in operator_pods(kube, ns)
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        }
        name = spec.get("holderIdentity") or ""
        return name if name in ready else ""

    return Kube.wait_for(
        holder, timeout=timeout, interval=0.5, what=f"a ready operator pod in {ns} to hold {lease}"
    )


def new_namespace(kube: Kube) -> str:
    name = f"n-{secrets.token_hex(4)}"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    Kube.wait_for(lambda: kube.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"), timeout=60,
                  what=f"the default ServiceAccount of {name}")
    return name


def delete_namespace(kube: Kube, name: str) -> None:
    try:
        kube.delete(f"/api/v1/namespaces/{name}")
    except KubeError as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def helm(node, tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``helm(*args, check=True)`` against the node, with its config, cache and data under tmp_path."""
    binary = helm_build.binary()
    env = {
        **os.environ,
        "KUBECONFIG": str(node.kubeconfig),
        "HELM_CONFIG_HOME": str(tmp_path / "helm-config"),
        "HELM_CACHE_HOME": str(tmp_path / "helm-cache"),
        "HELM_DATA_HOME": str(tmp_path / "helm-data"),
    }

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, env=env, check=False, timeout=420
        )
        if check and out.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {out.returncode}:\n{out.stdout}{out.stderr}")
        return out

    return run


@pytest.fixture
def session_operator_paused(node, kube: Kube, kubectl) -> Iterator[None]:
    """The session's operator scaled to zero, its CRDs ready for adoption; both put back after."""
    kubectl("-n", NAMESPACE, "scale", f"deployment/{NAME}", "--replicas=0")
    Kube.wait_for(lambda: not kube.list(pod_path(NAMESPACE), label_selector=SELECTOR), timeout=120,
                  interval=0.5, what="the session's operator pods to be gone")
    saved = {name: copy.deepcopy(kube.get(f"{CRD_PATH}/{name}")["metadata"]) for name in CRDS}
    try:
        yield
    finally:
        for name, before in saved.items():
            now = kube.get(f"{CRD_PATH}/{name}")["metadata"]
            patch: dict[str, Any] = {}
            for key in ("labels", "annotations"):
                old, new = before.get(key) or {}, now.get(key) or {}
                patch[key] = {**{k: None for k in new if k not in old}, **old}
            restored = kube.patch(f"{CRD_PATH}/{name}", {"metadata": patch})["metadata"]
            for key in ("labels", "annotations"):
                assert (restored.get(key) or {}) == (before.get(key) or {}), (name, key, restored.get(key))
        install_operator(node)  # server-side apply: replicas back to 2
        wait_leader(kube, NAMESPACE, NAME)


def adopt_crds(kube: Kube, release_namespace: str) -> None:
    """Mark the installed CRDs as the release's (Helm takes over objects so marked)."""
    for name in CRDS:
        kube.patch(f"{CRD_PATH}/{name}", {"metadata": {
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {
                "meta.helm.sh/release-name": RELEASE,
                "meta.helm.sh/release-namespace": release_namespace,
            },
        }})


@pytest.mark.timeout(900)  # two rollouts, two jobs and the session's operator back, on a loaded machine
def test_helm_install_upgrade_uninstall(
    node, kube: Kube, kubectl, helm, session_operator_paused, namespace: str
) -> None:
    release_ns = f"t9k-helm-{secrets.token_hex(3)}"
    chart = str(helm_build.CHART)
    image = ["--set", f"image.repository={REPO}", "--set", f"image.tag={TAG}"]
    unwatched = ""
    try:
        adopt_crds(kube, release_ns)
        out = helm("install", RELEASE, chart, "-n", release_ns, "--create-namespace", *image,
                   "--wait", "--timeout", "5m")
        assert "STATUS: deployed" in out.stdout, out.stdout
        assert f"the operator {FULLNAME} runs in {release_ns}" in out.stdout  # NOTES.txt
        deployment = f"/apis/apps/v1/namespaces/{release_ns}/deployments/{FULLNAME}"
        assert kube.get(deployment)["spec"]["replicas"] == 2
        Kube.wait_for(lambda: kube.get(deployment)["status"].get("readyReplicas") == 2, timeout=180,
                      interval=0.5, what="both operator pods of the release to be ready")
        wait_leader(kube, release_ns, FULLNAME)
        for name in CRDS:  # the chart's CRDs, now the release's
            meta = kube.get(f"{CRD_PATH}/{name}")["metadata"]
            assert meta["annotations"]["helm.sh/resource-policy"] == "keep"
            assert meta["labels"]["app.kubernetes.io/instance"] == RELEASE
        assert kube.exists(f"{RBAC}/clusterroles/{FULLNAME}")

        # All namespaces are watched: a job anywhere runs.
        first = wait_phase(kube, create_job(kube, namespace, "chart-first"), ("Succeeded", "Failed"))
        assert first["status"]["phase"] == "Succeeded", first["status"]

        # Upgrade: one replica, another rate limit, and only `namespace` watched.
        unwatched = new_namespace(kube)
        helm("upgrade", RELEASE, chart, "-n", release_ns, *image, "--set", "replicaCount=1",
             "--set", "kubeApi.qps=20", "--set", f"watchNamespaces={{{namespace}}}",
             "--wait", "--timeout", "5m")
        Kube.wait_for(lambda: len(operator_pods(kube, release_ns)) == 1, timeout=180, interval=0.5,
                      what="one operator pod after the upgrade")
        leader = wait_leader(kube, release_ns, FULLNAME)
        (pod,) = operator_pods(kube, release_ns)
        assert pod["metadata"]["name"] == leader
        args = pod["spec"]["containers"][0]["args"]
        assert args[args.index("--kube-api-qps") + 1] == "20"
        assert args[args.index("--namespace") + 1] == namespace and args.count("--namespace") == 1
        # Rights in the watched namespace only, by a Role; the ClusterRole is gone.
        assert not kube.exists(f"{RBAC}/clusterroles/{FULLNAME}")
        assert kube.exists(f"{RBAC}/namespaces/{namespace}/roles/{FULLNAME}-jobs")
        account = f"system:serviceaccount:{release_ns}:{FULLNAME}"
        for ns, answer in ((namespace, "yes"), (unwatched, "no")):
            can = kubectl("auth", "can-i", "create", "pods", "-n", ns, f"--as={account}", check=False)
            assert can.stdout.strip() == answer, (ns, can.stdout, can.stderr)

        ignored = create_job(kube, unwatched, "chart-ignored")
        done = wait_phase(kube, create_job(kube, namespace, "chart-second"), ("Succeeded", "Failed"))
        assert done["status"]["phase"] == "Succeeded", done["status"]
        # The job outside the watched namespace was created first and is still untouched.
        assert not kube.get(ignored).get("status", {}).get("phase")
        assert kube.list(pod_path(unwatched)) == []
        logs = kubectl("logs", "-n", release_ns, leader).stdout
        assert f"namespaces {namespace}," in logs, logs[-3000:]
        assert "forbidden" not in logs.lower(), logs[-3000:]  # the Role grants all it needs

        # Uninstall: everything of the release goes but the CRDs, and with them the jobs.
        out = helm("uninstall", RELEASE, "-n", release_ns, "--wait", "--timeout", "5m")
        for name in CRDS:
            assert name in out.stdout, out.stdout  # "These resources were kept due to the resource policy"
            assert kube.exists(f"{CRD_PATH}/{name}")
        assert kube.exists(job_path(namespace, "GenericJob", "chart-second"))
        for path in (
            f"/apis/apps/v1/namespaces/{release_ns}/deployments/{FULLNAME}",
            f"/api/v1/namespaces/{release_ns}/serviceaccounts/{FULLNAME}",
            f"{RBAC}/namespaces/{release_ns}/roles/{FULLNAME}",
            f"{RBAC}/namespaces/{release_ns}/rolebindings/{FULLNAME}",
            f"{RBAC}/namespaces/{namespace}/roles/{FULLNAME}-jobs",
            f"{RBAC}/namespaces/{namespace}/rolebindings/{FULLNAME}-jobs",
        ):
            assert not kube.exists(path), path
        Kube.wait_for(lambda: not operator_pods(kube, release_ns), timeout=120, interval=0.5,
                      what="the release's operator pods to be gone")
        assert helm("status", RELEASE, "-n", release_ns, check=False).returncode != 0
    finally:
        helm("uninstall", RELEASE, "-n", release_ns, "--wait", check=False)
        for ns in (release_ns, unwatched):
            if ns:
                delete_namespace(kube, ns)
