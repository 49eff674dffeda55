"""What makes a kubeconfig unusable, said in one line before anything is loaded, and its server's
URL (issue 34 took them out of :mod:`t9k_jobs.sdk.cluster_api`, whose :func:`connect` checks
with them). Pure: reads the files, runs nothing, sends nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def kubeconfig_problem(files: list[str], context: str | None = None) -> str | None:
    """What makes ``files`` unusable, in one line, or None (:func:`_inspect`)."""
    return _inspect(files, context)[0]


def kubeconfig_server(files: list[str], context: str | None = None) -> str | None:
    """The API server's URL of ``context`` (else the current one) in ``files`` (merged as kubectl
    does), without the trailing ``/``; None when the files do not say (:func:`kubeconfig_problem`)."""
    server = _inspect(files, context)[1]
    return server.rstrip("/") if server else None


def _inspect(files: list[str], context: str | None = None) -> tuple[str | None, str | None]:
    """``(problem, server)``: what makes ``files`` (one kubeconfig, or ``$KUBECONFIG``'s list, merged as kubectl does:
    the first file to set a name wins) unusable, in one line naming the file and the field, or
    None when it looks usable. Checked: each existing file is YAML and a mapping (an empty file
    is allowed in a list, as kubectl allows it, but not alone); ``clusters``, ``contexts`` and
    ``users`` are lists of named entries; there is at least one cluster; the context used
    (``context``, else ``current-context``) exists and names a cluster (and a user, when it
    names one) that the files have."""
    import yaml

    clusters: dict[str, Any] = {}
    contexts: dict[str, Any] = {}
    users: dict[str, Any] = {}
    current: str | None = None
    read = []
    for name in files:
        path = Path(name)
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return f"kubeconfig {name}: cannot be read: {getattr(exc, 'strerror', None) or exc}", None
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            return f"kubeconfig {name}: is not valid YAML{where}", None
        if doc is None:
            read.append((name, True))
            continue
        if not isinstance(doc, dict):
            return (
                f"kubeconfig {name}: is not a kubeconfig: it holds a {type(doc).__name__}, not a mapping "
                "with clusters, contexts, users and current-context"
            ), None
        read.append((name, False))
        for field, into in (("clusters", clusters), ("contexts", contexts), ("users", users)):
            entries = doc.get(field)
            if entries is None:
                continue
            if not isinstance(entries, list):
                return f"kubeconfig {name}: {field} must be a list of named entries, not a {type(entries).__name__}", None
            for i, entry in enumerate(entries):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    return f"kubeconfig {name}: {field}[{i}] must be a mapping with a name", None
                into.setdefault(entry["name"], entry)
        cur = doc.get("current-context")
        if current is None and isinstance(cur, str) and cur:
            current = cur
    if read and all(empty for _, empty in read):
        return f"kubeconfig {read[0][0]}: is empty; it needs clusters, contexts, users and current-context", None
    if not read:
        return None, None
    where = read[0][0] if len(read) == 1 else ", ".join(n for n, _ in read)
    if not clusters:
        return f"kubeconfig {where}: has no clusters (clusters: a list of name and cluster.server)", None
    used = context or current
    if used is None:
        names = ", ".join(contexts) or "none"
        return f"kubeconfig {where}: has no current-context; give --context (it has: {names})", None
    if used not in contexts:
        if context is not None:
            return None, None  # --context names one it lacks: said below, as before
        return f"kubeconfig {where}: current-context {used!r} is not among its contexts ({', '.join(contexts) or 'none'})", None
    ctx = contexts[used].get("context")
    if not isinstance(ctx, dict):
        return f"kubeconfig {where}: context {used!r} has no context mapping (cluster, user, namespace)", None
    cluster = ctx.get("cluster")
    if cluster not in clusters:
        return f"kubeconfig {where}: context {used!r} names cluster {cluster!r}, which is not among its clusters ({', '.join(clusters)})", None
    server = (clusters[cluster].get("cluster") or {}).get("server") if isinstance(clusters[cluster].get("cluster"), dict) else None
    if not isinstance(server, str) or not server:
        return f"kubeconfig {where}: cluster {cluster!r} has no server (cluster.server: https://HOST:PORT)", None
    user = ctx.get("user")
    if user is not None and user not in users:
        return f"kubeconfig {where}: context {used!r} names user {user!r}, which is not among its users ({', '.join(users) or 'none'})", None
    return None, server


__all__ = ["kubeconfig_problem", "kubeconfig_server"]
