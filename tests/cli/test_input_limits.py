"""Hostile and odd input: every refusal is one line and exit 2, read within bounded memory, and
nothing blocks (a FIFO nobody writes, /dev/zero). Accepted odd input (JSON with tabs, standard
input) is read as the README says. See t9k_jobs.api.reading for the limits and their sources."""

from __future__ import annotations

import codecs
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from t9k_jobs.api.reading import MAX_DEPTH, MAX_MANIFEST_BYTES

from tests.helpers import job, replica, template

from .test_cli_errors import TIMEOUT, assert_clean_error

#: Address space allowed to a CLI reading hostile input: far above its normal needs (about
#: 300 MiB of mappings), far below what an expanded alias bomb or a 50 MB file would take.
MEMORY_CAP = 1024 * 1024 * 1024

GOOD = job(
    "GenericJob", "demo", {"replicaSpecs": [replica("worker", 1, template(["echo", "hi"], name="c", image="x"))]}
)


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def cli(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI under a 1 GiB address-space cap: a reader that tries to hold too much fails."""
    out = subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=TIMEOUT,
        cwd=cwd,
        preexec_fn=_cap_memory,
    )
    return subprocess.CompletedProcess(out.args, out.returncode, out.stdout.decode(errors="replace"),
                                       out.stderr.decode(errors="replace"))  # fmt: skip


def one_line(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert_clean_error(result, *needles)
    assert result.stderr.strip().count("\n") == 0, result.stderr


def good_yaml() -> str:
    return yaml.safe_dump(GOOD, sort_keys=False)


@pytest.mark.parametrize(
    ("name", "data", "needle"),
    [
        ("utf16", codecs.BOM_UTF16_LE + good_yaml().encode("utf-16-le"), "is UTF-16 text; save it as UTF-8"),
        ("utf32", good_yaml().encode("utf-32"), "is UTF-32 text"),
        ("latin1", good_yaml().replace("demo", "café").encode("latin-1"), "byte 0xe9 is not UTF-8"),
        ("binary", bytes(range(256)) * 4, "NUL byte"),
        ("elf", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 100, "binary data"),
    ],
)
def test_text_that_is_not_utf8_is_refused(tmp_path: Path, name: str, data: bytes, needle: str) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(data)
    one_line(cli("validate", str(path)), str(path), needle)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(codecs.BOM_UTF8 + good_yaml().encode())
    assert cli("validate", str(path)).returncode == 0


def test_over_3_mib_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as f:  # 50 MB: more than the memory cap lets a reader hold several times
        f.write(good_yaml().encode() + b"#" + b"x" * (50 * 1024 * 1024) + b"\n")
    one_line(cli("validate", str(path)), "larger than 3 MiB")
    just_over = tmp_path / "over.yaml"
    just_over.write_bytes(good_yaml().encode() + b"#" + b"x" * MAX_MANIFEST_BYTES + b"\n")
    one_line(cli("validate", str(just_over)), "larger than 3 MiB")


def test_a_manifest_just_under_the_limit_is_read(tmp_path: Path) -> None:
    """About 220,000 list items in 3 MiB: read and validated (the bound is on size, not on shape)."""

    def with_args(n: int) -> str:
        doc = json.loads(json.dumps(GOOD))
        doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["args"] = ["a"] * n
        return yaml.safe_dump(doc, sort_keys=False)

    per_item = len(with_args(2)) - len(with_args(1))
    text = with_args((MAX_MANIFEST_BYTES - len(with_args(0)) - 64) // per_item)
    assert MAX_MANIFEST_BYTES - 256 < len(text.encode()) <= MAX_MANIFEST_BYTES
    path = tmp_path / "edge.yaml"
    path.write_text(text)
    result = cli("validate", str(path))
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "directory"])
def test_special_files_are_refused_without_blocking(tmp_path: Path, special: str) -> None:
    if special == "fifo":
        path = tmp_path / "job.yaml"
        os.mkfifo(path)  # nobody ever writes it: a reader that opened it would wait for ever
        needle = "is a FIFO"
    elif special == "directory":
        path = tmp_path
        needle = "is a directory"
    else:
        path = Path(special)
        needle = "is a device"
    one_line(cli("validate", str(path)), needle, "- to read standard input")


def test_deep_nesting_is_refused_before_it_is_built(tmp_path: Path) -> None:
    depth = 200_000
    yaml_path = tmp_path / "deep.yaml"
    yaml_path.write_text("spec: " + "[" * depth + "]" * depth + "\n")
    one_line(cli("validate", str(yaml_path)), f"nested deeper than {MAX_DEPTH} levels")
    json_path = tmp_path / "deep.json"
    json_path.write_text('{"a": ' + "[" * depth + "]" * depth + "}")
    one_line(cli("validate", str(json_path)), f"nested deeper than {MAX_DEPTH} levels")
    block = tmp_path / "block.yaml"
    block.write_text("".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH + 5)))
    one_line(cli("validate", str(block)), "nested deeper")


def test_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    one_line(cli("validate", str(path)), "YAML aliases expand it to more than 3 MiB")


def test_aliases_of_a_sensible_size_are_accepted(tmp_path: Path) -> None:
    text = good_yaml().replace("command:\n", "command: &cmd\n", 1)
    doc = yaml.safe_load(text)
    assert doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    text += "x-shared: *cmd\n"  # an unknown field: refused by the schema, not by the reader
    path = tmp_path / "alias.yaml"
    path.write_text(text)
    one_line(cli("validate", str(path)), "x-shared: unknown field")


def test_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(good_yaml().replace("  name: demo\n", "  name: demo\n  name: other\n"))
    one_line(cli("validate", str(path)), "line 5, column 3: duplicate key 'name' (first at line 4)")
    json_path = tmp_path / "dup.json"
    json_path.write_text('{"apiVersion": "a", "apiVersion": "b"}')
    one_line(cli("validate", str(json_path)), "duplicate key 'apiVersion' in a JSON object")


def test_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(
        "apiVersion: batch.tensorstack.dev/v1beta1\n"
        "kind: GenericJob\n"
        "metadata: {name: demo}\n"
        "spec:\n"
        "  replicaSpecs:\n"
        "  - type: worker\n"
        "    template:\n"
        "      spec:\n"
        "        containers:\n"
        "        - &base {name: c, image: x, command: [echo]}\n"
        "        - <<: *base\n"
        "          <<: {image: y}\n"
        "          name: d\n"
    )
    result = cli("validate", str(path))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("replicas", "1e30", "valid integer (got float 1e+30)"),
        ("replicas", "1.0e+30", "valid integer (got float 1e+30)"),
        ("replicas", str(2**31), "less than or equal to 2147483647"),
        ("replicas", str(10**40), "less than or equal to 2147483647"),
        ("replicas", "-1", "greater than or equal to 0"),
    ],
)
def test_numbers_out_of_kubernetes_ranges_are_refused(tmp_path: Path, field: str, value: str, needle: str) -> None:
    path = tmp_path / "n.yaml"
    path.write_text(good_yaml().replace("replicas: 1\n", f"{field}: {value}\n"))
    one_line(cli("validate", str(path)), "spec.replicaSpecs[0].replicas", needle)


def test_deadline_out_of_range_is_refused(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(GOOD))
    doc["kind"] = "PyTorchTrainingJob"
    doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["name"] = "pytorch"
    for value, needle in (("1e400", "valid integer (got float inf)"), (str(2**63), "9223372036854775807")):
        text = yaml.safe_dump(doc, sort_keys=False) + f"  runPolicy:\n    activeDeadlineSeconds: {value}\n"
        path = tmp_path / "deadline.yaml"
        path.write_text(text)
        one_line(cli("validate", str(path)), "spec.runPolicy.activeDeadlineSeconds", needle)


def test_names_kubernetes_would_refuse(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(GOOD))
    doc["metadata"]["name"] = "a" * 55  # a valid job name; its pod 'aaa…-worker-0' is 64 characters
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    one_line(cli("validate", str(path)), "makes the replica name", "(64 characters)", "at most 54 characters")
    doc["metadata"]["name"] = "a" * 54
    path.write_text(json.dumps(doc))
    assert cli("validate", str(path)).returncode == 0
    doc["spec"]["replicaSpecs"][0]["replicas"] = 11  # worker-10: one character more
    path.write_text(json.dumps(doc))
    one_line(cli("validate", str(path)), "-worker-10' (64 characters)")
    doc["metadata"]["name"] = "A-job"
    path.write_text(json.dumps(doc))
    one_line(cli("validate", str(path)), "metadata.name", "DNS label")


@pytest.mark.parametrize("namespace", ["Not A/Namespace", "UPPER", "a" * 64, "-dash", "dots.are.not.labels"])
def test_a_namespace_must_be_a_dns_label(tmp_path: Path, namespace: str) -> None:
    """metadata.namespace names a Namespace, a DNS-1123 label, as the name does (it was accepted
    as any string, and a cluster refused the job only on create)."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    doc = yaml.safe_load((examples / "pytorch-ddp" / "job.yaml").read_text())
    doc["metadata"]["namespace"] = namespace
    path = tmp_path / "ns.yaml"
    path.write_text(yaml.safe_dump(doc))
    one_line(cli("validate", str(path)), "metadata.namespace", "DNS label")
    doc["metadata"]["namespace"] = "team-a"
    path.write_text(yaml.safe_dump(doc))
    assert cli("validate", str(path)).returncode == 0


def test_a_service_name_must_start_with_a_letter(tmp_path: Path) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    doc = yaml.safe_load((examples / "pytorch-ddp" / "job.yaml").read_text())
    doc["metadata"]["name"] = "9digits"
    path = tmp_path / "pt.yaml"
    path.write_text(yaml.safe_dump(doc))
    one_line(cli("validate", str(path)), "must start with a letter")


def test_elastic_jobs_are_checked_at_max_replicas(tmp_path: Path) -> None:
    spec = {
        "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 11, "expectedReplicas": 1},
        "torchrunConfig": {"enabled": True},
        "replicaSpecs": [replica("worker", 1, template(["python", "t.py"], image="x"))],
    }
    doc = job("PyTorchTrainingJob", "e" * 54, spec)  # worker-0 fits in 63 characters, worker-10 does not
    path = tmp_path / "elastic.yaml"
    path.write_text(yaml.safe_dump(doc))
    one_line(cli("validate", str(path)), "-worker-10' (64 characters)")


def test_json_with_tabs_is_read_as_json(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(GOOD, indent="\t"))
    result = cli("validate", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "GenericJob/demo: valid"
    bad = tmp_path / "bad.json"
    bad.write_text('{\n\t"apiVersion": "x",\n\t"kind": }')
    one_line(cli("validate", str(bad)), "line 3, column 10: not valid JSON")
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(GOOD).replace('"replicas": 1', '"replicas": NaN'))
    one_line(cli("validate", str(nan)), "NaN is not a JSON number")


def test_standard_input(tmp_path: Path) -> None:
    result = cli("validate", "-", stdin=good_yaml().encode())
    assert result.returncode == 0 and result.stdout.strip() == "GenericJob/demo: valid", result.stderr
    result = cli("render", "-", stdin=json.dumps(GOOD).encode())
    assert result.returncode == 0 and "kind: Pod" in result.stdout, result.stderr
    one_line(cli("validate", "-", stdin=b"x" * (MAX_MANIFEST_BYTES + 10)), "<stdin>: is larger than 3 MiB")
    one_line(cli("validate", "-", stdin=b""), "<stdin>: expected exactly one YAML document")
