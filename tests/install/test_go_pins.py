"""Every tool built from Go modules is pinned by a committed go.mod and go.sum."""

from __future__ import annotations

import re
import subprocess

from .stack import ROOT


def committed(path: str) -> bool:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--error-unmatch", path], capture_output=True)
    return out.returncode == 0


def build_scripts() -> list:
    return sorted(p for p in (ROOT / "tools").rglob("*.sh") if re.search(r"\bgo (build|install)\b", p.read_text()))


def test_go_builds_go_through_committed_modules() -> None:
    """Each script that compiles Go does it inside a wrapper module (go build in a directory with
    go.mod and go.sum), never `go install module@version`, whose dependencies no file of ours pins."""
    scripts = build_scripts()
    assert {p.name for p in scripts} >= {"build.sh", "build-peers.sh"}
    for script in scripts:
        text = script.read_text()
        assert not re.search(r"go install\s[^\n]*@", text), f"{script.relative_to(ROOT)} runs go install MODULE@VERSION"
    mods = sorted((ROOT / "tools").rglob("go.mod"))
    assert len(mods) >= 6
    for mod in mods:
        for name in ("go.mod", "go.sum"):
            rel = str((mod.parent / name).relative_to(ROOT))
            assert (mod.parent / name).is_file() and committed(rel), f"{rel} is not committed"
        assert re.search(r"^require \S+ v\S+", mod.read_text(), re.MULTILINE), f"{mod} requires no tool version"
