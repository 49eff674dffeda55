"""What ``t9k-jobs`` loads before a verb (issue 35; t9k_jobs.startup, t9k_jobs.cluster.lazy_client).

The CLI's speed is a benchmark (benchmarks/cli_latency.py), never a timed test: these tests guard
the import graph each verb leaves behind, and that the shortcuts change no output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param

from t9k_jobs.cli import app
from t9k_jobs.startup import _QuickValues, command_for, command_name

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "examples" / "pytorch-ddp" / "job.yaml"

#: Never loaded by a verb of the command line.
NEVER = {"torch", "markdown_it", "pygments"}
#: What only a cluster needs: the operator's package and the SDK's cluster backend (issue 34 moved
#: it from t9k_jobs.cluster to t9k_jobs.sdk; it stays loaded only by a cluster verb).
CLUSTER = {"aiohttp", "kubernetes_asyncio", "t9k_jobs.cluster", "t9k_jobs.sdk.cluster", "t9k_jobs.sdk.cluster_api",
           "t9k_jobs.sdk.cluster_logs", "t9k_jobs.sdk.gang_why", "t9k_jobs.cluster.kubeconfig"}  # fmt: skip

_PROBE = """
import atexit, json, sys
def _dump():
    with open({out!r}, "w") as f:
        json.dump(sorted(sys.modules), f)
atexit.register(_dump)
sys.argv = ["t9k-jobs"] + {argv!r}
from t9k_jobs.cli import main
main()
"""


def loaded(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules loaded when ``t9k-jobs ARGV`` ends (top-level names and dotted ones)."""
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(out=str(out), argv=list(argv))],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **(env or {}), "KUBECONFIG": ""},
        timeout=120,
    )
    names = set(json.loads(out.read_text()))
    return names | {n.split(".")[0] for n in names}, done


@pytest.mark.parametrize("argv", [["version"], ["--help"], ["get", "--help"], ["validate", "--help"]])
def test_light_verbs_load_no_models_and_no_cluster(tmp_path: Path, argv: list[str]) -> None:
    names, done = loaded(tmp_path, *argv)
    assert done.returncode == 0, done.stderr
    assert not names & (NEVER | CLUSTER), sorted(names & (NEVER | CLUSTER))
    assert "pydantic" not in names, "typer's values or the API models were loaded"


def test_a_local_get_loads_no_cluster_client(tmp_path: Path) -> None:
    names, done = loaded(tmp_path, "get", "--local")
    assert done.returncode == 0, done.stderr
    assert "No local runs" in done.stderr
    assert not names & (NEVER | CLUSTER), sorted(names & (NEVER | CLUSTER))
    assert "cryptography" not in names


@pytest.mark.parametrize("verb", ["validate", "render"])
def test_local_verbs_load_no_cluster_client(tmp_path: Path, verb: str) -> None:
    names, done = loaded(tmp_path, verb, str(JOB))
    assert done.returncode == 0, done.stderr
    assert not names & (NEVER | CLUSTER), sorted(names & (NEVER | CLUSTER))


def test_the_help_and_a_usage_error_need_neither_markdown_nor_pygments(tmp_path: Path) -> None:
    names, done = loaded(tmp_path, "render", "--output", "xml", str(JOB))
    assert done.returncode == 2
    assert "'xml' is not one of" in done.stderr
    assert not names & NEVER


def test_the_operator_loads_a_few_modules_of_kubernetes_asyncio(tmp_path: Path) -> None:
    """The operator's modules, its client and its Lease lock, without the generated API."""
    code = (
        "import json, sys; import t9k_jobs.cluster.operator, t9k_jobs.cluster.leader; "
        "from kubernetes_asyncio import client; client.V1Lease, client.CoordinationV1Api; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kubernetes_asyncio'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    names = json.loads(done.stdout)
    assert "kubernetes_asyncio.client.models.v1_lease" in names
    assert "kubernetes_asyncio.client.api.coordination_v1_api" in names
    assert "kubernetes_asyncio.client.models.v1_pod" not in names
    assert len(names) < 80, names


def test_the_lazy_packages_have_every_name() -> None:
    """Every class the library's packages export, the stand-ins export (``dir`` and ``getattr``),
    and it is the same class."""
    code = (
        "import json, sys; import t9k_jobs.cluster; import kubernetes_asyncio.client as c, "
        "kubernetes_asyncio.client.models as m; "
        "names = lambda p: sorted(n for n in dir(p) if n[:1].isupper()); "
        "print(json.dumps([type(c).__name__, names(c), names(m), c.V1Pod.__module__, m.V1Lease.__module__, "
        "c.CoreV1Api.__module__]))"
    )
    run = lambda source: json.loads(  # noqa: E731
        subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=True).stdout
    )
    lazy, real = run(code), run(code.replace("import t9k_jobs.cluster; ", ""))
    assert lazy[0] == "LazyPackage" and real[0] == "module"
    assert lazy[3:] == real[3:] == [
        "kubernetes_asyncio.client.models.v1_pod",
        "kubernetes_asyncio.client.models.v1_lease",
        "kubernetes_asyncio.client.api.core_v1_api",
    ]
    assert set(lazy[1]) >= set(real[1]) and set(lazy[2]) >= set(real[2])
    assert len(real[2]) > 700


@pytest.mark.parametrize("verb", [command_name(c) for c in app.registered_commands])
def test_one_verb_helps_as_the_whole_group_does(verb: str) -> None:
    """``t9k-jobs VERB --help`` through the one-verb group prints what the whole group prints."""
    whole = typer.main.get_command(app)
    one = command_for(app, [verb])
    assert list(one.commands) == [verb]
    texts = []
    for group in (whole, one):
        with group.make_context("t9k-jobs", [verb], resilient_parsing=True) as ctx:
            sub = group.get_command(ctx, verb)
            with sub.make_context(verb, [], parent=ctx, resilient_parsing=True) as sub_ctx:
                texts.append(sub.get_help(sub_ctx))
    assert texts[0] == texts[1]


SAMPLES = [None, "", "x", "yaml", "json", "wide", "name", "native", "8", "0", "-1", "257", "1.5", "abc",
           "08", " 8", "1_000", "٣", "-", ".", "/nonexistent/x", True, False, 8, ("a", "b"), ()]  # fmt: skip


def _outcome(coercion: object, value: object, param: object, ctx: object) -> tuple[str, object]:
    try:
        result = coercion.coerce(value, param=param, ctx=ctx)  # type: ignore[attr-defined]
    except BadParameter as exc:
        return "error", exc.format_message()
    except Exception as exc:  # noqa: BLE001 - compared, not judged
        return "raised", type(exc).__name__
    return "value", (type(result).__name__, result)


def test_quick_values_are_typers_values() -> None:
    """For every option and argument of every verb and many values, good and bad, the quick
    coercion gives what typer's own gives (value and type, or the same message)."""
    group = typer.main.get_command(app)
    compared = 0
    for name, command in group.commands.items():
        with command.make_context(name, [], resilient_parsing=True) as ctx:
            for param in command.params:
                desc = param.type_descriptor
                for value in SAMPLES:
                    if param.multiple and isinstance(value, str):
                        continue  # click hands a multiple option a tuple
                    quick = _outcome(_QuickValues(desc), value, param, ctx)
                    theirs = _outcome(build_runtime_param(desc), value, param, ctx)
                    assert quick == theirs, (name, param.name, value)
                    compared += 1
    assert compared > 1000


def test_a_package_init_that_does_more_than_import_is_left_as_it_is() -> None:
    from t9k_jobs.cluster.lazy_client import _only_imports

    assert _only_imports('# c\n"""doc\nx = 1\n"""\nfrom a.b import C\nfrom a import d as e\nimport a.f as f\n'
                         '__version__ = "1"\n__all__ = [\n    "C",\n]\n')  # fmt: skip
    assert not _only_imports("from a import *\n")
    assert not _only_imports("from a import b\nb.setup()\n")
    assert not _only_imports("from a import (\n    b,\n)\n")


def test_kubernetes_asyncio_imported_first_stays_the_real_one() -> None:
    code = (
        "import sys, kubernetes_asyncio; import t9k_jobs.cluster; "
        "from t9k_jobs.cluster.lazy_client import install; "
        "print(type(sys.modules['kubernetes_asyncio.client']).__name__, install())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["module", "False"]
