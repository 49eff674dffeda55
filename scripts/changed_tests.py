"""The test files to repeat after a change (``scripts/test.sh --stress``): printed one a line.

    python scripts/changed_tests.py REV

Those changed since the commit REV (committed, staged, not staged, or new and not ignored) under
tests/; those that name a module of src/ that changed (``t9k_jobs.local.volumes``, or the package
``t9k_jobs.local`` for its ``__init__.py``), as an import or a string; and those that name the
folder of a changed example or image (``examples/colossalai-digits``, ``images/training``). Only
test files that still exist, sorted. Exit 2 when REV is not a commit.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def changed_paths(rev: str) -> list[str]:
    """Paths changed since ``rev`` (to the working tree) and new files git does not ignore."""
    return sorted(set(_git("diff", "--name-only", rev, "--")) | set(_git("ls-files", "--others", "--exclude-standard")))


def module_name(path: str) -> str | None:
    """``src/t9k_jobs/local/volumes.py`` -> ``t9k_jobs.local.volumes`` (a package's ``__init__``: the package)."""
    if not (path.startswith("src/") and path.endswith(".py")):
        return None
    parts = list(Path(path[len("src/") :]).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or None


def tests_to_repeat(rev: str) -> list[str]:
    paths = changed_paths(rev)
    tests = {p for p in paths if re.fullmatch(r"tests/(.+/)?test_[^/]+\.py", p)}
    modules = [rf"\b{re.escape(m)}\b" for m in map(module_name, paths) if m]
    folders = {"/".join(p.split("/")[:2]) for p in paths if p.startswith(("examples/", "images/")) and p.count("/") >= 2}
    modules += [re.escape(f) for f in sorted(folders)]
    if modules:
        named = re.compile("|".join(modules))
        for test in ROOT.glob("tests/**/test_*.py"):
            if named.search(test.read_text(encoding="utf-8", errors="replace")):
                tests.add(str(test.relative_to(ROOT)))
    return sorted(t for t in tests if (ROOT / t).is_file())


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/changed_tests.py REV", file=sys.stderr)
        return 2
    try:
        subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "-q", f"{argv[0]}^{{commit}}"],
                       capture_output=True, check=True)  # fmt: skip
    except subprocess.CalledProcessError:
        print(f"{argv[0]}: not a commit here", file=sys.stderr)
        return 2
    print("\n".join(tests_to_repeat(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
