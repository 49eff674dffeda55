"""The helm CLI for the chart tests: built from Go modules by ``tools/helm/build.sh`` (cached).

``build()`` runs once per session; the conftests call it after collection (and
``scripts/test.sh`` before pytest) so a cold build (about 4 minutes on 2 cores) is not charged to
a test's timeout. ``helm()`` runs the binary; ``binary()`` fails the test, in one line, when it
cannot be built (no Go, a failed build).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tools" / "helm" / "build.sh"
CHART = REPO / "charts" / "t9k-jobs"

_build: dict[str, object] = {}


def build() -> None:
    """Run build.sh once; remember the binary's path or why there is none."""
    if _build:
        return
    out = subprocess.run(["bash", str(BUILD)], capture_output=True, text=True, check=False)
    if out.returncode == 0:
        _build["bin"] = Path(out.stdout.strip().splitlines()[-1])
    elif shutil.which("go") is None:
        _build["error"] = (
            "the chart tests need the Go toolchain (go >= 1.26) on PATH: tools/helm/build.sh builds helm"
        )
    else:
        tail = "\n".join(out.stderr.splitlines()[-30:])
        _build["error"] = f"tools/helm/build.sh failed (exit {out.returncode}):\n{tail}"


def binary() -> Path:
    """The helm binary; fails (never skips) the calling test when it cannot be built."""
    build()
    if "error" in _build:
        pytest.fail(str(_build["error"]), pytrace=False)
    return _build["bin"]  # type: ignore[return-value]


def helm(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` (text output, not checked)."""
    return subprocess.run(
        [str(binary()), *args], capture_output=True, text=True, check=False, timeout=timeout, env=env
    )
