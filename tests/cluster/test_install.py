"""`t9k-jobs install` against the real API server: CRDs, namespace and RBAC, idempotent."""

from __future__ import annotations

import subprocess
import sys

from .kube import Kube


def install(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", "install", "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_install_applies_crds_and_rbac_twice(control_plane, kube: Kube, kubectl) -> None:
    for _ in range(2):  # a second install changes nothing and still succeeds
        out = install(str(control_plane.kubeconfig))
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert "customresourcedefinition/pytorchtrainingjobs.batch.tensorstack.dev applied" in lines
        assert "clusterrole/t9k-jobs-operator applied" in lines
        assert "namespace/t9k-jobs-system applied" in lines
    role = kube.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/t9k-jobs-operator")
    assert all("*" not in r["verbs"] and "*" not in r["resources"] for r in role["rules"])
    kube.get("/api/v1/namespaces/t9k-jobs-system/serviceaccounts/t9k-jobs-operator")
    # kubectl sees the kinds by their short names, with the printer columns.
    got = kubectl("get", "pj,gj,dj,caij", "-A")
    assert got.returncode == 0


def test_install_reports_an_unreachable_server_in_one_line(tmp_path) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: x}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    out = install(str(kc), "--wait", "1")
    assert out.returncode == 1
    assert out.stderr.startswith("error: install:") and "Traceback" not in out.stderr
