"""The helm CLI for the chart tests: built from Go modules by ``tools/helm/build.sh`` (cached).

``build()`` runs once per session (:func:`.gotool.build_go_tool`; a cold build is about 4
minutes on 2 cores). ``helm()`` runs the binary; ``binary()`` fails the test, in one line, when it
cannot be built (no Go, a failed build).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .gotool import build_go_tool

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "tools" / "helm" / "build.sh"
CHART = REPO / "charts" / "t9k-jobs"



def build() -> Path | str:
    """Build helm once per session (:func:`~.gotool.build_go_tool`)."""
    return build_go_tool(BUILD, "1.26", needed_by="the chart tests", builds="helm")


def binary() -> Path:
    """The helm binary; fails (never skips) the calling test when it cannot be built."""
    built = build()
    if isinstance(built, str):
        pytest.fail(built, pytrace=False)
    return built


def helm(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` (text output, not checked)."""
    return subprocess.run(
        [str(binary()), *args], capture_output=True, text=True, check=False, timeout=timeout, env=env
    )
