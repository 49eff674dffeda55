"""Go tools the cluster and chart tests run, built from Go modules by a ``tools/*/build.sh``.

Each build script builds once and caches, and prints the path of what it built on its last line
of output. :func:`build_go_tool` runs one script once per session (the conftests call it after
collection, and ``scripts/test.sh`` before pytest, so a cold build is not charged to a test's
timeout) and keeps its answer: that path, or why there is none (no Go, a failed build), which the
caller turns into a failed test, never a skipped one.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_built: dict[Path, Path | str] = {}


def build_go_tool(script: Path, go_version: str, *, needed_by: str, builds: str) -> Path | str:
    """Run ``script`` (bash) once per session: the path it printed last, or, as a string, why
    there is none. ``go_version`` is the least Go the script's modules need; ``needed_by`` (``the
    chart tests``) and ``builds`` (``helm``) word the message when Go is not on PATH."""
    if script in _built:
        return _built[script]
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    name = script.relative_to(REPO)
    result: Path | str
    if out.returncode == 0:
        result = Path(out.stdout.strip().splitlines()[-1])
    elif shutil.which("go") is None:
        result = (
            f"{needed_by} need the Go toolchain (go >= {go_version}) on PATH: {name} builds {builds} "
            "with it; install Go and rerun"
        )
    else:
        tail = "\n".join(out.stderr.splitlines()[-30:])
        result = f"{name} failed (exit {out.returncode}):\n{tail}"
    _built[script] = result
    return result
