"""A local run's own copy of its manifest, and how edits reach it.

Each run keeps ``manifest.yaml`` in its run dir: the manifest it was started with (the user's
file as written, or the job read from standard input). The runtime applies what that copy says
(the local ``kubectl edit``), and ``pause``, ``resume`` and ``scale`` edit that copy only, never the
user's file: two runs of one manifest are two jobs, and pausing one leaves the other alone.

A run started from a file with ``--watch`` (the default) still follows edits of that file: the
fields the user changed there since the run last read it (a three-way merge: the file as last read,
the file now, the run's copy) are carried into the copy, and only those, so a user's edit of the
replicas does not undo a ``pause`` done since, and a user's edit of ``spec.runMode.pause`` wins over
an earlier ``resume``. Lists are merged whole (a changed ``replicaSpecs`` replaces the copy's).

The copy is read and written under an ``flock`` of the run dir (:func:`t9k_jobs.local.ownership.dir_lock`)
so that a verb's edit and the runtime's merge of a user's edit never lose one another.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from ..api import Job
from ..api.created import as_created
from ..api.reading import ReadError, decode, parse_documents, read_source
from ..render import to_yaml
from .ownership import write_atomic
from .rundir import RunDir, write_run_info

_MISSING = object()


def merge_edit(base: Any, new: Any, ours: Any) -> Any:
    """``ours`` with the changes from ``base`` to ``new`` applied (dicts key by key, recursively;
    anything else whole): keys the user added or changed take ``new``'s value, keys the user
    removed go, and everything the user did not touch keeps ``ours``'s value."""
    if isinstance(base, dict) and isinstance(new, dict) and isinstance(ours, dict):
        out = dict(ours)
        for key in set(base) | set(new):
            old, now = base.get(key, _MISSING), new.get(key, _MISSING)
            if old == now:
                continue
            if now is _MISSING:
                out.pop(key, None)
            elif old is _MISSING or key not in ours:
                out[key] = copy.deepcopy(now)
            else:
                out[key] = merge_edit(old, now, ours[key])
        return out
    return copy.deepcopy(new) if base != new else ours


def set_path(doc: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    """A copy of ``doc`` with ``path`` (``["spec", "runMode", "pause", "enabled"]``) set to
    ``value``, mappings made on the way. Raises ``ValueError`` when something on the way is not a
    mapping."""
    out = copy.deepcopy(doc)
    node = out
    for i, key in enumerate(path[:-1]):
        nxt = node.get(key)
        if nxt is None:
            nxt = node[key] = {}
        if not isinstance(nxt, dict):
            raise ValueError(f"{'.'.join(path[: i + 1])} is not a mapping")
        node = nxt
    node[path[-1]] = value
    return out


def read_copy(run_dir: Path) -> dict[str, Any] | None:
    """The run's manifest copy as a mapping; None when there is none (a run of an older version)
    or it is not one job's mapping. Raises ``OSError`` when it cannot be read."""
    path = RunDir(run_dir).copy
    try:
        text = decode(path.read_bytes())
    except FileNotFoundError:
        return None
    except ReadError:
        return None
    try:
        docs = parse_documents(text)
    except (ReadError, ValueError):
        return None
    return docs[0] if len(docs) == 1 and isinstance(docs[0], dict) else None


def write_copy(run_dir: Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` as the run's manifest copy, whole (temp file and rename). Raises ``OSError``."""
    import yaml

    write_atomic(RunDir(run_dir).copy, yaml.safe_dump(doc, sort_keys=False), mode=0o600)


def without_status(job: Job) -> dict[str, Any]:
    """``job`` as a manifest without its status: the copy of a run of a job read from standard input."""
    doc = job.dump()
    doc.pop("status", None)
    return doc


def manifest_doc(path: Path) -> dict[str, Any] | None:
    """The user's manifest as a mapping, read as :func:`t9k_jobs.frameworks.load_manifest` reads it (None
    when it no longer reads as one job: it was read a moment ago, so that is an edit in between),
    without what the API server sets (:func:`t9k_jobs.api.created.as_created`)."""
    try:
        docs = parse_documents(decode(read_source(path)))
    except (ReadError, OSError):
        return None
    return as_created(docs[0])[0] if len(docs) == 1 and isinstance(docs[0], dict) else None


__all__ = ["manifest_doc", "merge_edit", "read_copy", "set_path", "without_status", "write_copy"]


def rewrite_job(run_dir: Path, job: Job) -> list[str]:
    """``job.yaml`` again with the spec now applied (what ``get``/``describe`` read), keeping its
    modification time: that is when the run started; and ``run.json`` (the replicas). The lines
    that say what could not be written."""
    files = RunDir(run_dir)
    path = files.job
    problems = []
    try:
        info = json.loads(files.info.read_bytes())
        write_run_info(run_dir, job, float(info["created"]), info.get("ttlSecondsAfterFinished"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        problems.append(f"cannot write {files.info}: {getattr(exc, 'strerror', None) or exc}")
    try:
        st = path.stat()
        tmp = files.temporary(path)
        tmp.write_text(to_yaml([job.model_copy(update={"status": None}).dump()]), encoding="utf-8")
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(tmp, path)
    except OSError as exc:
        problems.append(f"cannot write {path}: {exc.strerror or exc}")
    return problems
