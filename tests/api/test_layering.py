"""Imports point down only (issue 23), and no two modules import each other (issue 34).

Every module's imports are read with ``ast``. Between layers they go to a lower layer. A layer is
a subpackage (``api``, ``engine``, ...) or a top-level module (``render``, ``cli``, ...). Imports
inside functions count too: an upward import hidden in a function is still an upward import.
Layers on one level are peers and import nothing from each other (``local`` and ``cluster``). A
new layer must be placed in :data:`LAYERS` before it can import anything.

Within a layer, the modules' imports form no circle (:func:`test_no_import_circle`): a circle
works only through the order modules happen to be loaded in, or through an import moved into a
function to break it, and it ties two modules that can no longer be read or moved apart. Imports
under ``if TYPE_CHECKING:`` never run, so they cannot fail at run time; they are checked in a test
of their own (:func:`test_no_import_circle_through_type_only_imports`), which also fails, because
a type-only circle still says that two modules each need the other's words: one of them belongs
lower. Its message says which of the circle's imports are type-only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

import t9k_jobs

SRC = Path(t9k_jobs.__file__).resolve().parent

#: Bottom first. A layer may import from the levels below its own, never from its own level's
#: other layers or from above.
LEVELS: list[set[str]] = [
    {"errors", "addressing", "loglines", "changes", "threads"},  # vocabulary that needs nothing of ours
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
    {"cli"},  # the command line (cli/: one module a group of verbs, one layer), over all of the above
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
    return [(line, module) for line, module, _ in _all_imports(name, path)]


def _all_imports(name: str, path: Path) -> list[tuple[int, str, bool]]:
    """:func:`_imports` with, for each, whether it is type-only (under ``if TYPE_CHECKING:`` or
    ``if typing.TYPE_CHECKING:``, in its body, not its ``else``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only: set[int] = set()  # ids of the import nodes under `if TYPE_CHECKING:`
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            type_only.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, a.name, id(node) in type_only) for a in node.names if a.name.split(".")[0] == ROOT
            ]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] == ROOT:
                found += [(node.lineno, f"{module}.{a.name}", id(node) in type_only) for a in node.names]
    return sorted(found)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


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


#: Circles allowed for a while, each to be removed by a change under way: a pair of modules
#: (either order). Empty since issue 34 opened the last three; add nothing here: open the circle.
KNOWN_CIRCLES: set[frozenset[str]] = set()

Edge = tuple[str, str]  # (importer, imported)
Where = list[tuple[str, int, bool]]  # (file, line, type-only) of each import behind an edge


def _graph(type_only: bool) -> dict[Edge, Where]:
    """The edges between this package's modules: run-time imports (module level and inside
    functions), and the type-only ones too where ``type_only``. An import of ``X.Y`` is an edge
    to the longest of ``X.Y``, ``X`` that is a module (``from .base import Job``: to ``base``);
    the package itself (``t9k_jobs``: its version and lazy façade) is no node."""
    modules = dict(_modules())
    edges: dict[Edge, Where] = {}
    for name, path in modules.items():
        if name == ROOT:
            continue
        for line, target, typed in _all_imports(name, path):
            if typed and not type_only:
                continue
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in (ROOT, name) or target not in modules:
                continue
            where = edges.setdefault((name, target), [])
            if (str(path.relative_to(SRC.parent)), line, typed) not in where:  # one per line
                where.append((str(path.relative_to(SRC.parent)), line, typed))
    return edges


def _circles(edges: Iterable[Edge]) -> list[list[str]]:
    """One shortest circle ``[a, b, ..., a]`` through each strongly connected set of modules
    (Tarjan's algorithm, then a breadth-first search back to its first module)."""
    succ: dict[str, list[str]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
        succ.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    sets: list[list[str]] = []

    def visit(v: str) -> None:  # recursive: the package's import depth is small
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                sets.append(sorted(members))

    for v in sorted(succ):
        if v not in index:
            visit(v)
    circles = []
    for members in sets:
        inside, start = set(members), members[0]
        came: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in came:
            nxt = []
            for v in frontier:
                for w in succ[v]:
                    if w in inside and w not in came:
                        came[w] = v
                        nxt.append(w)
            frontier = nxt
        path, v = [start], start
        while True:
            v = came[v]
            path.append(v)
            if v == start:
                break
        circles.append(path[::-1])
    return circles


def _circle_report(edges: dict[Edge, Where]) -> list[str]:
    allowed = {(a, b) for pair in KNOWN_CIRCLES for a in pair for b in pair if a != b}
    out = []
    for circle in _circles(e for e in edges if e not in allowed):
        lines = [" -> ".join(circle)]
        for a, b in zip(circle, circle[1:]):
            for file, line, typed in edges[(a, b)]:
                lines.append(f"  {file}:{line}: imports {b}{' (type-only)' if typed else ''}")
        out.append("\n".join(lines))
    return out


def test_no_import_circle() -> None:
    """Run-time imports, at module level and inside functions, form no circle between modules."""
    found = _circle_report(_graph(type_only=False))
    assert not found, "import circles (open each: move what both need to a lower module):\n" + "\n".join(found)


def test_no_import_circle_through_type_only_imports() -> None:
    """With the ``if TYPE_CHECKING:`` imports added, still no circle: the lines marked
    ``(type-only)`` are the imports only a type checker runs."""
    found = _circle_report(_graph(type_only=True))
    assert not found, "import circles through type-only imports:\n" + "\n".join(found)


def test_the_known_circles_are_still_there() -> None:
    """An entry of :data:`KNOWN_CIRCLES` whose circle is gone is removed from it."""
    edges = _graph(type_only=True)
    gone = [sorted(pair) for pair in KNOWN_CIRCLES if not any(set(c) >= pair for c in _circles(edges))]
    assert not gone, f"remove these from KNOWN_CIRCLES (tests/api/test_layering.py): {gone}"


def test_a_circle_is_named_with_its_lines(tmp_path: Path) -> None:
    edges: dict[Edge, Where] = {
        ("t9k_jobs.x.a", "t9k_jobs.x.b"): [("t9k_jobs/x/a.py", 3, False)],
        ("t9k_jobs.x.b", "t9k_jobs.x.a"): [("t9k_jobs/x/b.py", 9, True)],
        ("t9k_jobs.x.b", "t9k_jobs.x.c"): [("t9k_jobs/x/b.py", 4, False)],
    }
    assert _circle_report(edges) == [
        "t9k_jobs.x.a -> t9k_jobs.x.b -> t9k_jobs.x.a\n"
        "  t9k_jobs/x/a.py:3: imports t9k_jobs.x.b\n"
        "  t9k_jobs/x/b.py:9: imports t9k_jobs.x.a (type-only)"
    ]
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nelse:\n    from . import b\n"
    )
    assert _all_imports("t9k_jobs.x.m", module) == [(3, "t9k_jobs.x.a", True), (5, "t9k_jobs.x.b", False)]


#: A module past this many lines holds more than one idea (issue 34: "no file of src/ is over 800
#: lines"); generated tables are data files (api/pod_types.json), not modules.
MAX_LINES = 800


def test_no_module_is_over_max_lines() -> None:
    long = {
        str(path.relative_to(SRC)): n
        for path in sorted(SRC.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules (lines): {long}"
