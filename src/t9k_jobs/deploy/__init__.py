"""What installs t9k-jobs on a cluster, generated from the code: the CRDs (:mod:`.crd`, from the API
models), the namespace, RBAC and operator Deployment (:mod:`.rbac`), the Helm chart (:mod:`.chart`)
and ``t9k-jobs install`` (:mod:`.install`), which server-side applies the same objects.

It sits above :mod:`t9k_jobs.cluster` (the operator and the SDK's cluster backend), whose resource
tables say what the operator's role must allow; nothing below imports it.
"""

from __future__ import annotations

import argparse
import difflib
import sys
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


def generator_parser(prog: str, description: str, write_help: str, check_help: str, *, required: bool) -> argparse.ArgumentParser:
    """The command line every generator shares: ``--write DIR`` or ``--check DIR`` (one of them
    when ``required``; else neither prints to stdout). A generator adds its own options."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--write", metavar="DIR", help=write_help)
    group.add_argument("--check", metavar="DIR", help=check_help)
    return parser


def report_check(problems: list[str], stale: str, fresh: str) -> int:
    """Print ``--check``'s verdict: each problem, then ``stale`` (what is out of date and the
    command that regenerates it) on stderr, exit status 1; or ``fresh`` on stdout, 0."""
    for problem in problems:
        print(problem, file=sys.stderr)
    print(stale if problems else fresh, file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


def write_files(out: Path, files: dict[str, str]) -> None:
    """Write ``files`` (relative path -> text) under ``out``, making folders, printing each path."""
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(path)
