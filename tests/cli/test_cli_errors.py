"""The real command line, run as a subprocess: bad manifests give a short message and exit 2.

Every invalid input must exit with status 2, name the file and the field path on stderr,
and never show a Python traceback. ``render`` of a valid manifest exits 0 and prints YAML.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from tests.helpers import API_VERSION, job, replica, template

API = f"apiVersion: {API_VERSION}\n"
TIMEOUT = 60


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=cwd,
    )


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def assert_clean_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, every needle on stderr, nothing that looks like a traceback anywhere."""
    output = f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
    assert result.returncode == 2, output
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr, output
    for needle in needles:
        assert needle in result.stderr, f"{needle!r} missing from stderr\n{output}"


PYTORCH_WORKER = """\
kind: PyTorchTrainingJob
metadata:
  name: bad-job
spec:
  replicaSpecs:
    - type: worker
      {field}
      template:
        spec:
          containers:
            - name: pytorch
              image: example/pytorch:1
              command: ["python", "train.py"]
"""


def pytorch_with(field: str) -> str:
    return API + PYTORCH_WORKER.format(field=field)


def test_python_dash_m_entry_point_works() -> None:
    result = cli("--help")
    assert result.returncode == 0, result.stderr
    assert "render" in result.stdout and "validate" in result.stdout


@pytest.mark.parametrize("command", ["validate", "render"])
def test_wrong_field_type(tmp_path: Path, command: str) -> None:
    path = write(tmp_path, "type.yaml", pytorch_with('replicas: "two"'))
    result = cli(command, str(path))
    assert_clean_error(result, str(path), "spec.replicaSpecs[0].replicas", "'two'")
    assert "integer" in result.stderr


@pytest.mark.parametrize("command", ["validate", "render"])
def test_unknown_kind_suggests_deepspeedjob(tmp_path: Path, command: str) -> None:
    path = write(
        tmp_path,
        "kind.yaml",
        API
        + """\
kind: DeepspeedJob
metadata:
  name: bad-job
spec:
  config:
    run:
      python: ["train.py"]
  worker:
    template:
      spec:
        containers:
          - name: worker
            image: example/ds:1
""",
    )
    result = cli(command, str(path))
    assert_clean_error(result, str(path), "kind", "DeepspeedJob", "DeepSpeedJob")


def test_unknown_field_suggests_the_right_spelling(tmp_path: Path) -> None:
    path = write(tmp_path, "unknown.yaml", pytorch_with("restartpolicy: OnFailure"))
    result = cli("validate", str(path))
    assert_clean_error(result, str(path), "spec.replicaSpecs[0].restartpolicy", "unknown field", "restartPolicy")


def test_bad_enum_value_lists_the_accepted_values(tmp_path: Path) -> None:
    path = write(tmp_path, "enum.yaml", pytorch_with("restartPolicy: Sometimes"))
    result = cli("validate", str(path))
    assert_clean_error(result, str(path), "spec.replicaSpecs[0].restartPolicy", "Sometimes")
    for value in ("Never", "OnFailure", "Always", "ExitCode"):
        assert value in result.stderr


def test_deepspeed_with_both_python_and_module(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "both.yaml",
        API
        + """\
kind: DeepSpeedJob
metadata:
  name: bad-job
spec:
  config:
    run:
      python: ["train.py"]
      module: ["pkg.train"]
  worker:
    replicas: 2
    template:
      spec:
        containers:
          - name: worker
            image: example/ds:1
""",
    )
    result = cli("validate", str(path))
    assert_clean_error(result, str(path), "spec.config", "run.python", "run.module")
    assert "exactly one" in result.stderr


def test_invalid_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.yaml", API + "kind: [GenericJob\nmetadata: {name: x\n")
    result = cli("validate", str(path))
    assert_clean_error(result, str(path), "YAML", "line ")


def test_empty_file(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.yaml", "# nothing here\n")
    result = cli("render", str(path))
    assert_clean_error(result, str(path), "found 0")


@pytest.mark.parametrize("command", ["validate", "render"])
def test_missing_file(tmp_path: Path, command: str) -> None:
    path = tmp_path / "does-not-exist.yaml"
    result = cli(command, str(path))
    assert_clean_error(result, str(path), "cannot read")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    result = cli("validate", str(tmp_path))
    assert_clean_error(result, str(tmp_path), "is a directory, not a regular file")


def test_several_errors_are_all_reported(tmp_path: Path) -> None:
    text = pytorch_with('replicas: "two"\n      restartPolicy: Sometimes')
    path = write(tmp_path, "many.yaml", text)
    result = cli("validate", str(path))
    assert_clean_error(result, "spec.replicaSpecs[0].replicas", "spec.replicaSpecs[0].restartPolicy")
    assert all(line.startswith("error: ") for line in result.stderr.strip().splitlines())


VALID = (
    API
    + """\
kind: PyTorchTrainingJob
metadata:
  name: tiny-ddp
spec:
  replicaSpecs:
    - type: worker
      replicas: 2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: example/pytorch:1
              command: ["python", "train.py", "--lr", "0.1"]
"""
)


def test_validate_valid_manifest(tmp_path: Path) -> None:
    path = write(tmp_path, "ok.yaml", VALID)
    result = cli("validate", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "PyTorchTrainingJob/tiny-ddp: valid"


def test_render_valid_manifest_prints_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "ok.yaml", VALID)
    result = cli("render", str(path))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["tiny-ddp-worker-0", "tiny-ddp-worker-1"]
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Service"] == ["tiny-ddp-worker-0", "tiny-ddp-worker-1"]
    assert all(p["spec"]["restartPolicy"] == "Never" for p in pods)


def test_render_ssh_kind_generates_a_real_key_pair(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "ds.yaml",
        API
        + """\
kind: DeepSpeedJob
metadata:
  name: tiny-ds
spec:
  config:
    run:
      python: ["train.py"]
  worker:
    replicas: 2
    template:
      spec:
        containers:
          - name: worker
            image: example/ds:1
""",
    )
    result = cli("render", str(path))
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    secret = next(d for d in docs if d["kind"] == "Secret")
    data = secret["stringData"]
    assert data["id_ed25519"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert data["authorized_keys"] == data["id_ed25519.pub"]
    assert data["id_ed25519.pub"].startswith("ssh-ed25519 ")


def test_render_json_output(tmp_path: Path) -> None:
    import json

    path = write(tmp_path, "ok.yaml", VALID)
    result = cli("render", "-o", "json", str(path))
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert listing["kind"] == "List"
    assert [i["kind"] for i in listing["items"]].count("Pod") == 2


COLOSSALAI = """\
kind: ColossalAIJob
metadata:
  name: cai
spec:
  launcher: {{image: example/colossalai:1}}
  worker:
    replicas: 2
    command: {command}
    template:
      spec:
        containers:
          - name: worker
            image: example/colossalai:1
"""


@pytest.mark.parametrize(
    "command", ['["python", "train.py"]', '["/usr/bin/python3", "train.py"]', '["torchrun", "t.py"]', '["run.sh"]']
)
def test_colossalai_command_must_start_with_the_script(tmp_path: Path, command: str) -> None:
    """`colossalai run` takes a .py script or -m module and starts it itself; given anything else
    it prints a usage error and exits 0, so the job would end Succeeded with nothing trained."""
    path = write(tmp_path, "cai.yaml", API + COLOSSALAI.format(command=command))
    result = cli("validate", str(path))
    assert_clean_error(result, "spec.worker.command", "give the training script (a .py file) or -m")
    for good in ('["train.py"]', '["-m", "pkg.train", "--epochs", "3"]'):
        ok = cli("validate", str(write(tmp_path, "ok.yaml", API + COLOSSALAI.format(command=good))))
        assert ok.returncode == 0, ok.stderr


def test_older_colossalai_form_accepts_extra_args_and_restart_policy_objects(tmp_path: Path) -> None:
    """That form's API reference has `torchConfig.extraArgs` and `replicaSpecs[].restartPolicy` as
    `{policy, limit}`: both are accepted; the extra args reach `colossalai run`'s torchrun."""
    legacy = yaml.safe_load((Path(__file__).parents[1] / "render" / "manifests" / "colossalai-legacy.yaml").read_text())
    legacy["spec"]["torchConfig"]["extraArgs"] = ["--max_restarts", "0"]
    for spec in legacy["spec"]["replicaSpecs"]:
        spec["restartPolicy"] = {"policy": "OnFailure", "limit": 3}
    path = tmp_path / "legacy.yaml"
    path.write_text(yaml.safe_dump(legacy))
    assert cli("validate", str(path)).returncode == 0, cli("validate", str(path)).stderr
    rendered = cli("render", str(path))
    assert rendered.returncode == 0, rendered.stderr
    assert "--extra_launch_args=max_restarts=0" in rendered.stdout


GENERIC = job(
    "GenericJob",
    "g",
    {"replicaSpecs": [replica("worker", 1, template(["python", "-c", "print(1)"], name="main", image="x"))]},
)


def _container_change(path: str, value: object) -> dict:
    """GENERIC with one field of the container (or the pod spec, `spec.` prefix) set to ``value``."""
    import copy

    doc = copy.deepcopy(GENERIC)
    pod = doc["spec"]["replicaSpecs"][0]["template"]["spec"]
    if path.startswith("spec."):
        pod[path[5:]] = value
    else:
        pod["containers"][0][path] = value
    return doc


@pytest.mark.parametrize(
    "doc, needles",
    [
        (_container_change("env", [{"name": "A=B", "value": "1"}]), ["env[0].name", "without '='"]),
        (_container_change("env", [{"name": "A", "valueFrom": "secret"}]), ["env[0].valueFrom", "must be a mapping"]),
        (_container_change("env", [{"name": "A", "value": 3}]), ["env[0].value", "must be a string"]),
        (_container_change("command", ["python", "a\x00b"]), ["command[1]", "NUL"]),
        (_container_change("workingDir", 7), ["workingDir", "must be a path"]),
        (_container_change("name", "../evil"), ["containers[0].name", "DNS label"]),
        (_container_change("spec.terminationGracePeriodSeconds", -1), ["terminationGracePeriodSeconds", "non-negative integer"]),
        (_container_change("spec.terminationGracePeriodSeconds", 1.5), ["terminationGracePeriodSeconds", "non-negative integer"]),
    ],
)
def test_what_kubernetes_would_refuse_is_refused_before_running(tmp_path: Path, doc: dict, needles: list[str]) -> None:
    """A container the runtime could not start used to leave its pod Pending for ever; these are
    refused at validation with the field's path, as the API server would."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert_clean_error(cli("run", str(path), "--run-dir", str(tmp_path / "run")), *needles)
    assert not (tmp_path / "run").exists()


def test_duplicate_container_names_and_no_replicas_are_refused(tmp_path: Path) -> None:
    import copy

    doc = copy.deepcopy(GENERIC)
    containers = doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"]
    containers.append(dict(containers[0]))
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert_clean_error(cli("validate", str(path)), "containers[1].name", "used by another container")
    doc = copy.deepcopy(GENERIC)
    doc["spec"]["replicaSpecs"][0]["replicas"] = 0
    path.write_text(yaml.safe_dump(doc))
    assert_clean_error(cli("validate", str(path)), "at least one replica")


def test_render_gang_native_shows_the_native_pod_group(tmp_path: Path) -> None:
    """Issue 22: ``render --gang native`` prints the scheduling.k8s.io/v1beta1 PodGroup a
    Kubernetes 1.37 cluster with GenericWorkload gets; a mode that does not exist is one clear line."""
    text = VALID.replace("spec:\n", "spec:\n  scheduler: {t9kScheduler: {queue: q, priority: 5}}\n", 1)
    path = write(tmp_path, "gang.yaml", text)
    result = cli("render", "--gang", "native", str(path))
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d is not None]
    (pg,) = [d for d in docs if d["kind"] == "PodGroup"]
    assert pg["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    pods = [d for d in docs if d["kind"] == "Pod"]
    assert [p["spec"]["schedulingGroup"] for p in pods] == [{"podGroupName": "tiny-ddp"}] * 2
    bad = cli("render", "--gang", "volcano", str(path))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "--gang" in bad.stderr


@pytest.mark.parametrize("args", [["get"], ["logs", "gj", "x"], ["run", "MANIFEST"], ["run", "-d", "MANIFEST"],
                                  ["describe", "gj", "x"], ["dashboard", "--port", "0"]])
def test_a_removed_working_directory_is_one_line(tmp_path: Path, args: list[str]) -> None:
    """Issue 33: a shell in a folder that was removed since: the local verbs, whose default runs
    dir is relative to it, say so in one line (exit 2), never a traceback."""
    manifest = write(tmp_path, "job.yaml", yaml.safe_dump(job("GenericJob", "x", {"replicaSpecs": [
        replica("worker", 1, template(["true"]))]})))
    gone = tmp_path / "gone"
    gone.mkdir()
    command = " ".join(f"'{a}'" for a in [sys.executable, "-m", "t9k_jobs.cli", *[str(manifest) if a == "MANIFEST" else a for a in args]])
    result = subprocess.run(["sh", "-c", f"cd '{gone}' && rmdir '{gone}' && exec {command}"],
                            capture_output=True, text=True, timeout=TIMEOUT, env={"PATH": "/usr/bin:/bin"})
    assert_clean_error(result, "the current folder no longer exists")
    assert result.stderr.count("\n") == 1, result.stderr
