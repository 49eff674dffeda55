"""What installs t9k-jobs on a cluster, generated from the code: the CRDs (:mod:`.crd`, from the API
models), the namespace, RBAC and operator Deployment (:mod:`.rbac`), the Helm chart (:mod:`.chart`)
and ``t9k-jobs install`` (:mod:`.install`), which server-side applies the same objects.

It sits above :mod:`t9k_jobs.cluster` (the operator and the SDK's cluster backend), whose resource
tables say what the operator's role must allow; nothing below imports it.
"""

from __future__ import annotations

import difflib
from pathlib import Path


def stale_files(directory: Path, wanted: dict[str, str]) -> list[str]:
    """Compare the files under ``directory`` with ``wanted`` (relative path -> text): one message
    per missing file (``<path>: missing``) and per different one (``<path>: out of date`` and a
    unified diff, at most 60 lines); an empty list when every file matches. Extra files are the
    caller's to judge."""
    problems: list[str] = []
    for name, text in wanted.items():
        path = directory / name
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        have = path.read_text(encoding="utf-8")
        if have == text:
            continue
        lines = list(
            difflib.unified_diff(
                have.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"{path} (committed)",
                tofile=f"{path} (generated)",
                n=2,
            )
        )
        more = f"... ({len(lines) - 60} more diff lines)\n" if len(lines) > 60 else ""
        problems.append(f"{path}: out of date\n{''.join(lines[:60])}{more}")
    return problems
