"""The second walk over the fields (issue 32): what ``validate`` accepts does what it says, or is
refused with its field path (warnings are in tests/frameworks/test_spec_warnings.py).

- GenericJob rules: an empty list is no rules; an empty rule, or a type with no rank, is refused;
- torchrun: the script is found after python's options (carried as their environment variables,
  or the python command run as written), and a command torchrun cannot run (torchrun itself, a
  shell, nothing) is refused;
- one ``runMode.debug.replicaSpecs`` / ``pause.resumeSpecs`` entry per replica type.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from t9k_jobs.api import ManifestError, parse_job
from t9k_jobs.api.torchrun import TorchrunError, torchrun_script
from t9k_jobs.render import render
from tests.helpers import job, replica, template


def refused(manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(ManifestError) as err:
        parse_job(copy.deepcopy(manifest))
    return err.value.errors


def generic(**spec: Any) -> dict[str, Any]:
    specs = [replica(t, n, template(["true"], name="c", image="x")) for t, n in (("worker", 2), ("ps", 1))]
    return job("GenericJob", "g", {"replicaSpecs": specs, **spec})


def pytorch(command: list[str] | None, args: list[str] | None = None, **torchrun: Any) -> dict[str, Any]:
    extra = {"args": args} if args is not None else {}
    spec = {
        "torchrunConfig": {"enabled": True, **torchrun},
        "replicaSpecs": [replica("worker", 2, template(command, name="pytorch", image="x", **extra))],
    }
    return job("PyTorchTrainingJob", "p", spec)


# --------------------------------------------------------------------------- GenericJob rules


@pytest.mark.parametrize(
    ("field", "rules", "expected"),
    [
        ("successRules", [{}], "spec.successRules[0]: an empty rule is never met"),
        ("failureRules", [{"worker": [0]}, {}], "spec.failureRules[1]: an empty rule is never met"),
        ("successRules", [{"worker": []}], "spec.successRules[0].worker: no rank given"),
        ("failureRules", [{"worker": [1], "ps": []}], "spec.failureRules[0].ps: no rank given"),
    ],
)
def test_a_rule_that_names_no_replica_is_refused(field: str, rules: list[Any], expected: str) -> None:
    (line,) = refused(generic(**{field: rules}))
    assert line.startswith(expected), line


def _with_tokens(service: dict[str, Any] | None, command: list[str], env: str | None = None) -> dict[str, Any]:
    """A GenericJob (worker x2, ps x1) whose worker runs ``command`` with ``TF_CONFIG=env``."""
    manifest = generic(**({"service": service} if service is not None else {}))
    c = manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    c["command"] = command
    if env is not None:
        c["env"] = [{"name": "A", "value": "plain"}, {"name": "TF_CONFIG", "value": env}]
    return manifest


PORTS = {"ports": [{"name": "http", "port": 2222}, {"name": "grpc", "port": 2223}]}
WORKER = "spec.replicaSpecs[0].template.spec.containers[0]"


@pytest.mark.parametrize(
    ("service", "command", "env", "expected"),
    [
        (PORTS, ["run"], "$(service.worker[0].host):$(service.port[htp])",
         f"{WORKER}.env[1].value: $(service.port[htp]) names no port of spec.service.ports (named ports: http, grpc)"),
        (PORTS, ["run", "--peer=$(service.worker[2].host)"], None,
         f"{WORKER}.command[1]: $(service.worker[2].host) names rank 2, but type 'worker' has 2 replicas (ranks from 0 to 1)"),
        (PORTS, ["run", "$(service.chief[0].host)"], None,
         f"{WORKER}.command[1]: $(service.chief[0].host) names no replica type of replicaSpecs (types: worker, ps)"),
        (PORTS, ["run", "--n=$(replicas[chief])"], None,
         f"{WORKER}.command[1]: $(replicas[chief]) names no replica type of replicaSpecs (types: worker, ps)"),
        (None, ["run"], "$(service.worker[0].host):$(service.port[http])",
         f"{WORKER}.env[1].value: $(service.worker[0].host) needs spec.service, which the job lacks"),
        (None, ["run", "$(service.port[http])"], None, f"{WORKER}.command[1]: $(service.port[http]) needs spec.service"),
        (PORTS, ["run", "$(service.worker[0].address)"], None,
         f"{WORKER}.command[1]: $(service.worker[0].address) is not a GenericJob variable"),
        ({"ports": [{"port": 2222}]}, ["run", "$(service.port[http])"], None,
         f"{WORKER}.command[1]: $(service.port[http]) names no port of spec.service.ports (named ports: none with a name)"),
    ],
)  # fmt: skip
def test_a_genericjob_variable_that_names_nothing_is_refused(
    service: dict[str, Any] | None, command: list[str], env: str | None, expected: str
) -> None:
    """Issue 41: such a token stayed as text in the replica's command or env and the program failed
    later, far from the cause; now the manifest is refused at the value holding it."""
    (line,) = refused(_with_tokens(service, command, env))
    assert line.startswith(expected), line


def test_genericjob_variables_that_name_something_and_kubernetes_own_pass() -> None:
    ok = _with_tokens(PORTS, ["run", "$(service.ps[0].host):$(service.port[grpc])", "$(replicas[worker])", "$(rank)",
                              "$(type)", "$(HOME)", "$$(service.nothing[9].host)"],
                      "$(service.worker[1].host):$(service.port[http]) $(MY_VAR) $(service.port)")  # fmt: skip
    assert parse_job(ok).kind == "GenericJob"


def test_an_empty_list_of_rules_is_no_rules() -> None:
    """``successRules: []`` used to replace "all succeed" by nothing, so a job whose replicas all
    exited 0 ended Failed (NoRuleMatched); the engine reads it as absent (tests/engine/test_outcome.py)."""
    job_ = parse_job(generic(successRules=[], failureRules=[]))
    assert job_.spec.success_rules == [] and job_.spec.failure_rules == []


# --------------------------------------------------------------------------- torchrun


@pytest.mark.parametrize(
    ("command", "args", "argv", "env"),
    [
        (["python", "-u", "train.py"], [], ["train.py"], {}),
        (["python3", "-u", "-B", "train.py", "--x"], ["--lr", "0.1"], ["train.py", "--x", "--lr", "0.1"], {"PYTHONDONTWRITEBYTECODE": "1"}),
        (["python", "-uOO", "-W", "ignore", "-X", "dev", "-Xutf8", "t.py"], [], ["t.py"],
         {"PYTHONOPTIMIZE": "2", "PYTHONWARNINGS": "ignore", "PYTHONDEVMODE": "1", "PYTHONUTF8": "1"}),
        (["python", "-Wdefault", "-W", "error::DeprecationWarning", "t.py"], [], ["t.py"],
         {"PYTHONWARNINGS": "default,error::DeprecationWarning"}),
        (["python", "-X", "int_max_str_digits=9000", "t.py"], [], ["t.py"], {"PYTHONINTMAXSTRDIGITS": "9000"}),
        (["python"], ["-u", "t.py"], ["t.py"], {}),
        (["/opt/conda/bin/python3.11", "-m", "pkg.train", "--x"], [], ["-m", "pkg.train", "--x"], {}),
        (["python", "-um", "pkg"], [], ["-m", "pkg"], {}),
        (["bash", "-c", "ignored"], ["python", "-u", "t.py"], ["t.py"], {}),
        (["train.py", "--x"], [], ["train.py", "--x"], {}),
        (None, ["t.py", "--x"], ["t.py", "--x"], {}),
    ],
)
def test_the_script_and_the_python_options_torchrun_can_carry(
    command: list[str] | None, args: list[str], argv: list[str], env: dict[str, str]
) -> None:
    script = torchrun_script(command or [], args)
    assert (script.argv, script.env) == (argv, env)


def test_python_options_reach_the_rendered_pod_as_variables_the_users_own_winning() -> None:
    manifest = pytorch(["python", "-u", "-O", "-W", "ignore", "train.py"], ["--lr", "0.1"])
    manifest["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"] = [{"name": "PYTHONWARNINGS", "value": "error"}]
    pod = next(o for o in render(parse_job(manifest), keygen=dict) if o["kind"] == "Pod")
    c = pod["spec"]["containers"][0]
    assert c["command"] == ["torchrun"]
    assert c["args"][-3:] == ["train.py", "--lr", "0.1"] and "-u" not in c["args"] and "-O" not in c["args"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["PYTHONOPTIMIZE"] == "1"
    assert env["PYTHONWARNINGS"] == "error", "the container's own value wins"


@pytest.mark.parametrize(
    ("command", "args", "where", "says"),
    [
        (["python"], None, "command[0]", "nothing for torchrun to run"),
        (["python", "-u"], None, "command[1]", "nothing for torchrun to run"),
        (["python", "-W"], None, "command[1]", "python's -W needs a value after it"),
        (["python", "-X", "pycache_prefix", "t.py"], None, "command[2]", "python's -X pycache_prefix needs =value"),
        (["python", "-E", "-m", "torch.distributed.launch", "t.py"], None, "command[2]", "runs torchrun"),
        (["bash", "-c", "python t.py"], None, "command[0]", "'bash' would be the training script, and torchrun runs it with python"),
        (["/bin/sh", "run.sh"], None, "command[0]", "'/bin/sh' would be the training script"),
        (["torchrun", "--nproc_per_node=2", "t.py"], None, "command[0]", "runs torchrun, and with torchrunConfig t9k-jobs starts torchrun itself"),
        (["python", "-m", "torch.distributed.run", "t.py"], None, "command[1]", "runs torchrun"),
        (["sh"], ["--nproc_per_node=2", "t.py"], "args[0]", "'--nproc_per_node=2' is where the training script goes"),
    ],
)
def test_what_torchrun_cannot_run_is_refused_with_its_path(
    command: list[str], args: list[str] | None, where: str, says: str
) -> None:
    (line,) = refused(pytorch(command, args))
    prefix = f"spec.replicaSpecs[0].template.spec.containers[0].{where}: {says}"
    assert line.startswith(prefix), line


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (["python", "-c", "print(1)"], []),
        (["python", "-E", "t.py"], ["--x"]),
        (["python3", "-uI", "t.py"], []),
        (["python", "--check-hash-based-pycs", "always", "t.py"], []),
        (["python", "-X", "frozen_modules=off", "t.py"], []),
        (["sh"], ["python", "-S", "t.py"]),
    ],
)
def test_a_python_option_no_variable_carries_runs_the_command_as_written(command: list[str], args: list[str]) -> None:
    """``python -c code`` (or ``-E``, ``-I``...): torchrun runs the python command itself as a
    program, ``--no-python``, so each worker runs what the container would have run."""
    script = torchrun_script(command, args)
    python = command[:1] if "python" in command[0] else args[:1]
    rest = command[1:] + args if "python" in command[0] else args[1:]
    assert script.no_python and script.argv == [*python, *rest] and script.env == {}
    pod = next(o for o in render(parse_job(pytorch(command, args or None)), keygen=dict) if o["kind"] == "Pod")
    c = pod["spec"]["containers"][0]
    assert c["args"][c["args"].index("--no-python") + 1 :] == [*python, *rest]


def test_with_no_python_in_extra_options_a_python_command_runs_as_written() -> None:
    script = torchrun_script(["python", "-u", "t.py"], [], ["--no-python"])
    assert script.argv == ["python", "-u", "t.py"] and script.torchrun_args(["--no-python"]) == ["python", "-u", "t.py"]


def test_a_program_runs_under_torchrun_with_no_python() -> None:
    """``--no-python`` in extraOptions: torchrun runs the program itself, a shell included."""
    job_ = parse_job(pytorch(["bash", "-c", "python t.py"], extraOptions=["--no-python"]))
    pod = next(o for o in render(job_, keygen=dict) if o["kind"] == "Pod")
    assert pod["spec"]["containers"][0]["args"][-4:] == ["--no-python", "bash", "-c", "python t.py"]


def test_torchrun_errors_name_the_field_and_item() -> None:
    with pytest.raises(TorchrunError) as err:
        torchrun_script(["python", "-u"], ["-W"])
    assert err.value.path == "args[0]"


def test_without_torchrun_the_command_is_the_containers() -> None:
    manifest = pytorch(["bash", "-c", "python t.py"])
    manifest["spec"]["torchrunConfig"]["enabled"] = False
    assert parse_job(manifest)


# --------------------------------------------------------------------------- run modes


@pytest.mark.parametrize("mode", ["debug", "pause"])
def test_one_run_mode_entry_per_replica_type(mode: str) -> None:
    """Two entries for one type: the first applied, the others were ignored in silence."""
    field = "replicaSpecs" if mode == "debug" else "resumeSpecs"
    entries = [{"type": "worker"}, {"type": "ps"}, {"type": "worker", "command": ["sleep", "1"]}]
    (line,) = refused(generic(runMode={mode: {"enabled": False, field: entries}}))
    assert line == f"spec.runMode.{mode}.{field}[2].type: 'worker' is also entry [0]; one entry per replica type"
    assert parse_job(generic(runMode={mode: {field: entries[:2]}}))
