"""One kubeconfig reader (issue 44; t9k_jobs.cluster.kubeconfig): kubectl's and controller-runtime's
orders, kubectl's merge of ``$KUBECONFIG``, each file parsed once while unchanged, and the
connection settings from kubernetes_asyncio's loader over that parse (relative paths by the file
that names them). Messages for bad files: tests/cli/test_cluster_input.py."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import Configuration

from t9k_jobs.cluster import kubeconfig
from t9k_jobs.cluster.kubeconfig import IN_CLUSTER, kubectl_source, operator_source, read


def write(path: Path, clusters: dict[str, str], contexts: dict[str, tuple[str, str | None]],
          current: str | None = None, users: dict[str, dict[str, Any]] | None = None) -> Path:  # fmt: skip
    doc: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": s, "certificate-authority": "ca.crt"}} for n, s in clusters.items()],
        "contexts": [{"name": n, "context": {"cluster": c, "user": "u", **({"namespace": ns} if ns else {})}}
                     for n, (c, ns) in contexts.items()],
        "users": [{"name": n, "user": u} for n, u in (users or {"u": {"token": "t"}}).items()],
    }  # fmt: skip
    if current:
        doc["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubectls_order_uses_a_pods_account_only_where_no_file_exists(tmp_path: Path) -> None:
    home = tmp_path / "home"
    pod = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOME": str(home)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        assert kubectl_source(None, pod) == IN_CLUSTER
        write(home / ".kube" / "config", {"c": "https://a:1"}, {"x": ("c", None)}, "x")
        assert kubectl_source(None, pod) == [str(home / ".kube" / "config")]
        # controller-runtime's: the pod's account before ~/.kube/config.
        assert operator_source(None, pod) == IN_CLUSTER
        assert operator_source(None, {**pod, "KUBECONFIG": f"/a{os.pathsep}/b"}) == ["/a", "/b"]
        assert operator_source("/flag", pod) == kubectl_source("/flag", pod) == ["/flag"]
        assert kubectl_source(None, {}) == [str(home / ".kube" / "config")]


def test_kubeconfig_lists_merge_as_kubectl_merges_them(tmp_path: Path) -> None:
    """The first file to name a cluster, context or user wins, and the first current-context set
    (kubernetes_asyncio's own merger takes the last current-context)."""
    first = write(tmp_path / "a" / "config", {"c": "https://first:1"}, {"x": ("c", "team-a")}, "x")
    second = write(tmp_path / "b" / "config", {"c": "https://second:1", "d": "https://d:1"},
                   {"x": ("d", None), "y": ("d", "team-y")}, "y")  # fmt: skip
    cfg = read([str(tmp_path / "missing"), str(first), str(second)])
    assert cfg.read == (str(first), str(second)) and cfg.current == "x"
    assert cfg.server() == "https://first:1" and cfg.namespace() == "team-a"
    assert cfg.server("y") == "https://d:1" and cfg.namespace("y") == "team-y"
    assert cfg.problem() is None and cfg.problem("y") is None


def test_each_file_is_parsed_once_while_it_is_unchanged(tmp_path: Path) -> None:
    path = write(tmp_path / "config", {"c": "https://a:1"}, {"x": ("c", None)}, "x")
    one = read([str(path)])
    assert read([str(path)]) is one
    write(path, {"c": "https://b:2"}, {"x": ("c", None)}, "x")
    os.utime(path, ns=(1, 1))  # a new signature even within the clock's resolution
    again = read([str(path)])
    assert again is not one and again.server() == "https://b:2"
    assert len([k for k in kubeconfig._cache if k == (str(path),)]) == 1


def test_the_loader_takes_relative_paths_from_the_file_that_names_them(tmp_path: Path) -> None:
    first = write(tmp_path / "a" / "config", {"c": "https://first:1"}, {"x": ("c", None)}, "x")
    second = write(tmp_path / "b" / "config", {"d": "https://d:1"}, {"y": ("d", None)})
    for folder in ("a", "b"):
        (tmp_path / folder / "ca.crt").write_text("not read until a request\n")
    cfg = read([str(first), str(second)])

    async def settings(context: str | None) -> Configuration:
        conf = Configuration()
        await cfg.loader(context).load_and_set(conf)
        return conf

    conf = asyncio.run(settings(None))
    assert conf.host == "https://first:1" and conf.ssl_ca_cert == str(tmp_path / "a" / "ca.crt")
    conf = asyncio.run(settings("y"))
    assert conf.host == "https://d:1" and conf.ssl_ca_cert == str(tmp_path / "b" / "ca.crt")
    assert conf.api_key == {"BearerToken": "Bearer t"}


def test_the_operator_says_a_missing_file_and_a_bad_one_in_one_line(tmp_path: Path) -> None:
    from kubernetes_asyncio.config.config_exception import ConfigException

    from t9k_jobs.cluster.client import KubeClient

    with pytest.raises(ConfigException, match="no kubeconfig: .*missing does not exist"):
        asyncio.run(KubeClient.from_config(tmp_path / "missing"))
    bad = tmp_path / "bad"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigException, match=f"kubeconfig {bad}: is not a kubeconfig"):
        asyncio.run(KubeClient.from_config(bad))
    good = write(tmp_path / "good", {"c": "https://a:1"}, {"x": ("c", None)}, "x")
    with pytest.raises(ConfigException, match="no context 'nope'.*it has x"):
        asyncio.run(KubeClient.from_config(good, "nope"))
