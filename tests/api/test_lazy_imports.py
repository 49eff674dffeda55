"""An import of our own modules inside a function says why it is there (issue 44).

An import at the top of a module is the import graph a reader sees first, and the one tools see
(``ruff``'s sorting and unused-import checks, ``mypy``, "go to definition", tests/api/test_layering.py
reads both). An import moved into a function hides it from the first glance, runs again on every
call, and saves start-up time only where it keeps a heavy module (pydantic, the cluster stack,
the engine, the local runtime, prometheus_client...) out of some verb that never needs it: the
command line's ``--help`` and ``version``, a local verb, a cluster verb
(tests/cli/test_startup.py guards what each loads). Such an import is kept, and says what it keeps
out, in a trailing comment ``# lazy: <reason>`` on its line (the first or the last line of one
written over several); every other import of ours goes to the top of its module.

Read with ``ast`` (and the comments with ``tokenize``): every ``import``/``from ... import`` of
``t9k_jobs`` (relative or absolute) inside a function or method, at any depth, except under
``if TYPE_CHECKING:`` (which never runs). Their number may shrink, never grow unseen: raising
:data:`MOST` is a decision to write down with the import's reason.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

import t9k_jobs

SRC = Path(t9k_jobs.__file__).resolve().parent
ROOT = "t9k_jobs"

#: The most function-local imports of our own modules (each with its ``# lazy:`` reason): the
#: number issue 44 ended with. Lower it when one goes; raise it only with the reason in the import.
MOST = 68

#: ``# lazy:`` and then at least three words saying what the import keeps out of which verb.
_REASON = re.compile(r"#\s*lazy:\s+\S+(?:\s+\S+){2,}")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _ours(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == ROOT
    return any(alias.name.split(".")[0] == ROOT for alias in node.names)


def _local_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Our own imports inside a function (any depth), those under ``if TYPE_CHECKING:`` left out."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.orelse:  # the `else:` of `if TYPE_CHECKING:` does run
                    visit_one(stmt, in_function)
                continue
            visit_one(child, in_function)

    def visit_one(node: ast.AST, in_function: bool) -> None:
        if in_function and isinstance(node, (ast.Import, ast.ImportFrom)) and _ours(node):
            found.append(node)
        visit(node, in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def _comments(source: str) -> dict[int, str]:
    """Line number -> the comment on that line."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string
    return out


def _says_why(node: ast.Import | ast.ImportFrom, comments: dict[int, str]) -> bool:
    """Whether the import's line (its first or last, written over several) has a ``# lazy:`` reason."""
    return any(
        _REASON.search(comments.get(line, "")) for line in {node.lineno, node.end_lineno or node.lineno}
    )


def _lazy_imports() -> list[tuple[str, bool]]:
    """``(file:line, whether it says why)`` for every function-local import of ours."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        comments = _comments(source)
        where = path.relative_to(SRC.parent)
        out += [
            (f"{where}:{node.lineno}", _says_why(node, comments))
            for node in _local_imports(ast.parse(source))
        ]
    return out


def test_every_function_local_import_of_ours_says_why() -> None:
    """Each one carries ``# lazy: <what it keeps out of which verb>``; the others belong at the top."""
    missing = [where for where, says_why in _lazy_imports() if not says_why]
    assert not missing, (
        "imports of t9k_jobs inside a function without a '# lazy: <reason>' comment: move each to the top "
        "of its module, or say what it keeps out of which verb's start (issue 44):\n" + "\n".join(missing)
    )


def test_the_function_local_imports_of_ours_do_not_grow() -> None:
    found = _lazy_imports()
    per_file = Counter(where.rpartition(":")[0] for where, _ in found)
    assert len(found) <= MOST, (
        f"{len(found)} imports of t9k_jobs inside functions, more than the {MOST} allowed (MOST in "
        "tests/api/test_lazy_imports.py): move the new ones to the top of their module. Per file: "
        + ", ".join(f"{path} {n}" for path, n in sorted(per_file.items()))
    )


def test_the_reader_finds_nested_type_checking_and_multi_line_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import top\n"
        "if TYPE_CHECKING:\n"
        "    from .a import A\n"
        "def f():\n"
        "    import os\n"
        "    from .b import B  # lazy: loads b, which f's callers seldom need\n"
        "    if TYPE_CHECKING:\n"
        "        from .c import C\n"
        "    else:\n"
        "        import t9k_jobs.d  # lazy: too short\n"
        "    class K:\n"
        "        def g(self):\n"
        "            from t9k_jobs.e import (  # noqa: F401\n"
        "                E,\n"
        "            )  # lazy: loads e, which only g needs\n"
        "            from .f import (  # lazy: loads f, which only g needs\n"
        "                F,\n"
        "            )\n"
    )
    comments = _comments(source)
    found = [(node.lineno, _says_why(node, comments)) for node in _local_imports(ast.parse(source))]
    assert found == [(7, True), (11, False), (14, True), (17, True)]
