"""Golden files: ``render`` of every manifest in ``manifests/`` against ``golden/<name>.yaml``.

The ssh key pair is replaced by fixed fake strings, so the output is deterministic. When the
rendering changes on purpose, regenerate the files with the Python that has the project installed
(``scripts/bootstrap.sh``) and review the diff before committing:

    UPDATE_GOLDEN=1 python -m pytest tests/render/test_golden.py

A golden file is a reviewed record of behaviour, not a snapshot to bless blindly: the
explicit behaviour checks live in ``test_render_semantics.py``.
"""

from __future__ import annotations

import difflib
import os

import pytest
import yaml

from .render_support import GOLDEN, MANIFESTS, manifest_names, render_manifest
from t9k_jobs.render import to_yaml

UPDATE = os.environ.get("UPDATE_GOLDEN", "") not in ("", "0")
HOW_TO_UPDATE = (
    "If the change is intended, regenerate with "
    "`UPDATE_GOLDEN=1 python -m pytest tests/render/test_golden.py` (the project's Python) "
    "and review the diff of tests/render/golden/."
)


def test_there_are_manifests() -> None:
    assert len(manifest_names()) >= 11, f"expected the render manifests under {MANIFESTS}"


def test_every_golden_file_has_a_manifest() -> None:
    stale = sorted({p.stem for p in GOLDEN.glob("*.yaml")} - set(manifest_names()))
    assert not stale, f"golden files without a manifest (delete them): {stale}"


@pytest.mark.parametrize("name", manifest_names())
def test_render_matches_golden(name: str) -> None:
    actual = to_yaml(render_manifest(name))
    golden = GOLDEN / f"{name}.yaml"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(actual, encoding="utf-8")
        return
    if not golden.exists():
        pytest.fail(f"no golden file {golden}. {HOW_TO_UPDATE}")
    expected = golden.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"golden/{name}.yaml",
                tofile=f"render(manifests/{name}.yaml)",
            )
        )
        pytest.fail(f"render output differs from golden/{name}.yaml. {HOW_TO_UPDATE}\n{diff}")


@pytest.mark.parametrize("name", manifest_names())
def test_render_is_deterministic_and_valid_yaml(name: str) -> None:
    first = to_yaml(render_manifest(name))
    assert to_yaml(render_manifest(name)) == first
    docs = [d for d in yaml.safe_load_all(first) if d is not None]
    assert docs == render_manifest(name), "to_yaml must round-trip through yaml.safe_load_all"
