"""The image builder tries ``buildah bud`` again only after the transient memfd-sealing failure.

The command is a real program (a shell script standing in for buildah's exit behaviour): what is
under test is the decision to retry, which depends only on the exit status and the output.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def load_images():
    spec = importlib.util.spec_from_file_location("t9k_images_under_test", REPO / "tools/images/images.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def failing_then_ok(tmp_path: Path, failures: int, message: str) -> list[str]:
    """A command that fails ``failures`` times printing ``message``, then succeeds; counts runs."""
    script = tmp_path / "bud.sh"
    script.write_text(
        "#!/bin/bash\n"
        f'n=$(( $(cat "{tmp_path}/runs" 2>/dev/null || echo 0) + 1 )); echo $n > "{tmp_path}/runs"\n'
        f'if [ $n -le {failures} ]; then echo "{message}"; exit 1; fi\n'
        "echo built\n"
    )
    script.chmod(0o755)
    return [str(script)]


def runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


def test_the_transient_memfd_failure_is_tried_again(tmp_path: Path) -> None:
    images = load_images()
    argv = failing_then_ok(tmp_path, 2, "Close_Fd sealing memfd copy: Device or resource busy")
    log = images.Log(tmp_path / "log")
    images.bud_with_retries("operator", argv, log, dict(os.environ))
    assert runs(tmp_path) == 3


def test_the_transient_failure_gives_up_after_the_last_attempt(tmp_path: Path) -> None:
    images = load_images()
    argv = failing_then_ok(tmp_path, 10, "Close_Fd sealing memfd copy: Device or resource busy")
    with pytest.raises(images.Failure) as failure:
        images.bud_with_retries("operator", argv, images.Log(tmp_path / "log"), dict(os.environ))
    assert runs(tmp_path) == images.BUD_ATTEMPTS
    assert "sealing memfd copy" in failure.value.tail[-1]


def test_any_other_failure_is_not_tried_again(tmp_path: Path) -> None:
    images = load_images()
    argv = failing_then_ok(tmp_path, 1, "ERROR: No matching distribution found for torch")
    with pytest.raises(images.Failure) as failure:
        images.bud_with_retries("operator", argv, images.Log(tmp_path / "log"), dict(os.environ))
    assert runs(tmp_path) == 1
    assert failure.value.message == "buildah exited with 1"
