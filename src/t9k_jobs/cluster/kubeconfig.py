"""One kubeconfig reader for the operator and the SDK (issue 44): each file is read and parsed once
per process while it is unchanged, and every question (what is wrong with it, the server, the
contexts, the namespace, the connection settings) is answered from that one parse.

Which files, and when a pod's ServiceAccount is used instead, follows one of two documented orders:

- :func:`kubectl_source`, kubectl's (the SDK, the CLI, the dashboard): ``--kubeconfig``, else
  ``$KUBECONFIG`` (a list of files), else ``~/.kube/config``; in a pod where none of these
  exists, its ServiceAccount (client-go's ``clientcmd`` defaulting to in-cluster);
- :func:`operator_source`, controller-runtime's (``pkg/client/config``: ``--kubeconfig``,
  ``$KUBECONFIG``, the in-cluster account, then ``~/.kube/config``): the operator.

Merging follows kubectl's rules for ``$KUBECONFIG``: the first file to name a cluster, context or
user wins, and the first ``current-context`` set; a relative path (a certificate, a key) is taken
relative to the file that names it. The connection settings come from kubernetes_asyncio's
``KubeConfigLoader`` over this parse (:meth:`KubeConfig.loader`), so no file is read again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: kubectl's and client-go's default kubeconfig.
DEFAULT_FILE = "~/.kube/config"
#: What :func:`kubectl_source` and :func:`operator_source` return for a pod's ServiceAccount.
IN_CLUSTER = "in-cluster"

#: A file as last read: ``(mtime in ns, size, inode)`` and the :class:`KubeConfig` of the files.
_cache: dict[tuple[str, ...], tuple[tuple[Any, ...], KubeConfig]] = {}


def kubectl_source(kubeconfig: str | os.PathLike[str] | None = None, environ: Any = None) -> str | list[str]:
    """kubectl's order (module docstring): the kubeconfig files to read, or :data:`IN_CLUSTER`."""
    env = os.environ if environ is None else environ
    files = _named(kubeconfig, env)
    if kubeconfig is None and not env.get("KUBECONFIG") and env.get("KUBERNETES_SERVICE_HOST") \
            and not any(Path(f).is_file() for f in files):  # fmt: skip
        return IN_CLUSTER
    return files


def operator_source(kubeconfig: str | os.PathLike[str] | None = None, environ: Any = None) -> str | list[str]:
    """controller-runtime's order (module docstring): the kubeconfig files, or :data:`IN_CLUSTER`."""
    env = os.environ if environ is None else environ
    if kubeconfig is None and not env.get("KUBECONFIG") and env.get("KUBERNETES_SERVICE_HOST"):
        return IN_CLUSTER
    return _named(kubeconfig, env)


def _named(kubeconfig: str | os.PathLike[str] | None, env: Any) -> list[str]:
    if kubeconfig is not None:
        return [os.fspath(kubeconfig)]
    listed = [f for f in str(env.get("KUBECONFIG") or "").split(os.pathsep) if f]
    return [os.path.expanduser(f) for f in listed] if listed else [os.path.expanduser(DEFAULT_FILE)]


@dataclass(frozen=True)
class Named:
    """A cluster, context or user of a kubeconfig: its entry (``name`` and the mapping) and the
    file that named it first (relative paths in it are relative to that file)."""

    entry: dict[str, Any]
    path: str


@dataclass(frozen=True)
class KubeConfig:
    """The kubeconfig ``files`` merged (module docstring). ``read``: those that exist, in order;
    ``error``: a file that cannot be used at all (not readable, not YAML, not a mapping, a list
    that is not one), in one line naming it; :meth:`problem` adds what a context needs."""

    files: tuple[str, ...]
    read: tuple[str, ...] = ()
    error: str | None = None
    empty: tuple[str, ...] = ()
    clusters: dict[str, Named] = field(default_factory=dict)
    contexts: dict[str, Named] = field(default_factory=dict)
    users: dict[str, Named] = field(default_factory=dict)
    current: str | None = None

    @property
    def exists(self) -> bool:
        """Whether any of the files exists."""
        return bool(self.read)

    def problem(self, context: str | None = None) -> str | None:
        """What makes these files unusable with ``context`` (else ``current-context``), in one line
        naming the file and the field; None when they look usable or none exists. An empty file is
        allowed in a list, as kubectl allows it, but not alone; a ``context`` they lack is left to
        the caller (its own words for its flag)."""
        if self.error is not None:
            return self.error
        if not self.read:
            return None
        if len(self.empty) == len(self.read):
            return f"kubeconfig {self.read[0]}: is empty; it needs clusters, contexts, users and current-context"
        where = ", ".join(self.read)
        if not self.clusters:
            return f"kubeconfig {where}: has no clusters (clusters: a list of name and cluster.server)"
        used = context or self.current
        if used is None:
            names = ", ".join(self.contexts) or "none"
            return f"kubeconfig {where}: has no current-context; give --context (it has: {names})"
        if used not in self.contexts:
            if context is not None:
                return None
            return f"kubeconfig {where}: current-context {used!r} is not among its contexts ({', '.join(self.contexts) or 'none'})"
        ctx = self.contexts[used].entry.get("context")
        if not isinstance(ctx, dict):
            return f"kubeconfig {where}: context {used!r} has no context mapping (cluster, user, namespace)"
        cluster = ctx.get("cluster")
        if cluster not in self.clusters:
            return f"kubeconfig {where}: context {used!r} names cluster {cluster!r}, which is not among its clusters ({', '.join(self.clusters)})"
        if not self.server(used):
            return f"kubeconfig {where}: cluster {cluster!r} has no server (cluster.server: https://HOST:PORT)"
        user = ctx.get("user")
        if user is not None and user not in self.users:
            return f"kubeconfig {where}: context {used!r} names user {user!r}, which is not among its users ({', '.join(self.users) or 'none'})"
        return None

    def context(self, name: str | None = None) -> dict[str, Any] | None:
        """The ``context`` mapping (cluster, user, namespace) of ``name`` (else the current one)."""
        used = self.contexts.get(name or self.current or "")
        ctx = used.entry.get("context") if used is not None else None
        return ctx if isinstance(ctx, dict) else None

    def server(self, context: str | None = None) -> str | None:
        """The API server's URL of ``context`` (else the current one), without the trailing ``/``;
        None when the files do not say."""
        ctx = self.context(context) or {}
        named = self.clusters.get(ctx.get("cluster")) if isinstance(ctx.get("cluster"), str) else None
        cluster = named.entry.get("cluster") if named is not None else None
        server = cluster.get("server") if isinstance(cluster, dict) else None
        return server.rstrip("/") if isinstance(server, str) and server else None

    def namespace(self, context: str | None = None) -> str | None:
        """The namespace ``context`` (else the current one) names, if any."""
        ns = (self.context(context) or {}).get("namespace")
        return ns if isinstance(ns, str) and ns else None

    def loader(self, context: str | None = None) -> Any:
        """kubernetes_asyncio's ``KubeConfigLoader`` for ``context`` (else the current one) over
        this parse, each entry remembering its file (relative paths); raises its
        ``ConfigException`` for a context or entry it cannot use."""
        from kubernetes_asyncio.config.kube_config import ConfigNode, KubeConfigLoader

        root = self.read[0] if self.read else "kube-config"

        def nodes(entries: dict[str, Named]) -> list[Any]:
            return [ConfigNode(f"{n.path}/{name}", n.entry, n.path) for name, n in entries.items()]

        doc = {"clusters": nodes(self.clusters), "contexts": nodes(self.contexts), "users": nodes(self.users)}
        if self.current is not None:
            doc["current-context"] = self.current  # type: ignore[assignment]
        return KubeConfigLoader(config_dict=ConfigNode(root, doc, root), active_context=context, config_base_path=None)


def read(files: Sequence[str | os.PathLike[str]]) -> KubeConfig:
    """The kubeconfig ``files`` (in order; missing ones are skipped), merged: parsed once per
    process while every file is unchanged (its modification time, size and inode). Never raises:
    what is wrong is :attr:`KubeConfig.error` and :meth:`KubeConfig.problem`."""
    names = tuple(os.fspath(f) for f in files)
    signature = tuple(_signature(f) for f in names)
    cached = _cache.get(names)
    if cached is not None and cached[0] == signature:
        return cached[1]
    config = _parse(names)
    _cache[names] = (signature, config)
    return config


def _signature(name: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(name)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _parse(names: tuple[str, ...]) -> KubeConfig:
    import yaml

    read: list[str] = []
    empty: list[str] = []
    merged: dict[str, dict[str, Named]] = {"clusters": {}, "contexts": {}, "users": {}}
    current: str | None = None

    def failed(line: str) -> KubeConfig:
        return KubeConfig(names, tuple(read), line)

    for name in names:
        if not Path(name).is_file():
            continue
        read.append(name)
        try:
            text = Path(name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return failed(f"kubeconfig {name}: cannot be read: {getattr(exc, 'strerror', None) or exc}")
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            return failed(f"kubeconfig {name}: is not valid YAML" + (f" (line {mark.line + 1})" if mark is not None else ""))
        if doc is None:
            empty.append(name)
            continue
        if not isinstance(doc, dict):
            return failed(f"kubeconfig {name}: is not a kubeconfig: it holds a {type(doc).__name__}, not a mapping "
                          "with clusters, contexts, users and current-context")  # fmt: skip
        for key, into in merged.items():
            entries = doc.get(key)
            if entries is None:
                continue
            if not isinstance(entries, list):
                return failed(f"kubeconfig {name}: {key} must be a list of named entries, not a {type(entries).__name__}")
            for i, entry in enumerate(entries):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    return failed(f"kubeconfig {name}: {key}[{i}] must be a mapping with a name")
                into.setdefault(entry["name"], Named(entry, name))
        cur = doc.get("current-context")
        if current is None and isinstance(cur, str) and cur:
            current = cur
    return KubeConfig(names, tuple(read), None, tuple(empty), merged["clusters"], merged["contexts"], merged["users"], current)


__all__ = ["IN_CLUSTER", "KubeConfig", "Named", "kubectl_source", "operator_source", "read"]
