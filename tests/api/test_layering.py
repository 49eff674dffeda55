"""Imports point down only (issue 23): every module's imports, read with ``ast``, go to a lower layer.

A layer is a subpackage (``api``, ``engine``, ...) or a top-level module (``render``, ``cli``, ...).
Imports inside functions count too: an upward import hidden in a function is still an upward
import. Layers on one level are peers and import nothing from each other (``local`` and
``cluster``). A new layer must be placed in :data:`LAYERS` before it can import anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import t9k_jobs

SRC = Path(t9k_jobs.__file__).resolve().parent

#: Bottom first. A layer may import from the levels below its own, never from its own level's
#: other layers or from above.
LEVELS: list[set[str]] = [
    {"errors", "addressing", "yamledit", "loglines", "changes"},  # vocabulary that needs nothing of ours
    {"startup"},  # what the command line loads first (typer's help and values without the heavy parts)
    {"api"},  # typed models, defaults, validation, manifest reading
    {"words"},  # ages, tables, -o name, a name in a URL: said by the runtimes and the SDK (the kinds' table)
    {"frameworks", "sshkeys"},  # one plug-in per kind (and the key pairs their Secrets hold)
    {"engine"},  # pure reconcile over the plug-ins
    {"render"},  # a job's objects as the operator would make them (t9k-jobs render)
    {"local", "cluster"},  # the two runtimes: the process supervisor, the operator (neither imports sdk)
    {"deploy"},  # CRDs, RBAC, Deployment, Helm chart, `t9k-jobs install` (from cluster's tables)
    # The SDK above both runtimes (issue 34): Client, its Backend protocol, the view and its words,
    # the argument checks, and both backends (over local's runtime and cluster's REST client).
    {"sdk"},
    {"dashboard"},  # the web dashboard, over the SDK (t9k-jobs dashboard)
    {"cli"},
]
LAYERS = {name: level for level, names in enumerate(LEVELS) for name in names}
#: The package itself: ``t9k_jobs.__version__`` may be read from anywhere; its own lazy import of
#: the SDK's ``Client`` is the façade and not a layer's import.
ROOT = "t9k_jobs"


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, path))
    return out


def _imports(name: str, path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import of ``t9k_jobs`` in the file, relative ones resolved;
    ``from X import Y`` counts as importing ``X.Y`` (``Y`` may be a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == ROOT]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] == ROOT:
                found += [(node.lineno, f"{module}.{a.name}") for a in node.names]
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def test_every_layer_is_placed() -> None:
    unplaced = sorted({_layer(name) for name, _ in _modules()} - set(LAYERS) - {ROOT})
    assert not unplaced, f"place these in LEVELS (tests/api/test_layering.py): {unplaced}"


def test_imports_point_down_only() -> None:
    upward = []
    for name, path in _modules():
        here = _layer(name)
        if here == ROOT:
            continue
        for line, target in _imports(name, path):
            there = _layer(target)
            if there == here or target == f"{ROOT}.__version__":
                continue
            if there not in LAYERS or LAYERS[there] >= LAYERS.get(here, -1):
                upward.append(f"{path.relative_to(SRC.parent)}:{line}: {here} imports {target}")
    assert not upward, "imports that do not point down:\n" + "\n".join(upward)


@pytest.mark.parametrize("loader", ["parse_job", "load_manifest"])
def test_manifests_are_read_through_the_plug_ins(loader: str) -> None:
    """``api``'s loaders check the models only; outside ``frameworks`` a module that reads a job
    takes ``frameworks``' own, which also checks the names of what the job makes."""
    through_api = []
    for name, path in _modules():
        if _layer(name) in {"api", "frameworks"}:
            continue
        for line, target in _imports(name, path):
            if target == f"{ROOT}.api.{loader}":
                through_api.append(f"{path.relative_to(SRC.parent)}:{line}")
    assert not through_api, f"import {loader} from t9k_jobs.frameworks, not t9k_jobs.api: {through_api}"


def test_the_resolver_sees_relative_and_nested_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "t9k_jobs" / "frameworks"
    pkg.mkdir(parents=True)
    module = pkg / "x.py"
    module.write_text("from ..local import runner\n\ndef f():\n    from .. import api\n    import t9k_jobs.cluster.client\n")
    assert _imports("t9k_jobs.frameworks.x", module) == [
        (1, "t9k_jobs.local.runner"),
        (4, "t9k_jobs.api"),
        (5, "t9k_jobs.cluster.client"),
    ]
