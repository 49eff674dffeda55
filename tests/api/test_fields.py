"""Fields that are refused at validation rather than dropped or failing later (issue 21).

Each refusal is one line naming the field path and what is accepted; each accepted neighbour
shows the check is no wider than it must be.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from t9k_jobs.api import ManifestError, parse_job
from t9k_jobs.api.kinds import extra_launch_args, launch_items
from tests.helpers import job, replica, template


def _tpl(name: str = "c", **extra: Any) -> dict[str, Any]:
    return template(name=name, image="example/img:1", **extra)


def refused(manifest: dict[str, Any]) -> list[str]:
    with pytest.raises(ManifestError) as err:
        parse_job(copy.deepcopy(manifest))
    return err.value.errors


def colossalai(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"worker": {"replicas": 2, "command": ["train.py"], "template": _tpl("worker")}}
    base.update(spec)
    return job("ColossalAIJob", "cai", base)


def colossalai_older(launcher: dict[str, Any] | None = None, **torch: Any) -> dict[str, Any]:
    specs: list[dict[str, Any]] = [replica("worker", 2, _tpl("worker"))]
    if launcher is not None:
        specs.insert(0, {"type": "launcher", "template": _tpl("launcher"), **launcher})  # may set replicas
    return job("ColossalAIJob", "cai", {"torchConfig": {"script": ["train.py"], **torch}, "replicaSpecs": specs})


def generic(replicas: dict[str, int], **spec: Any) -> dict[str, Any]:
    return job("GenericJob", "g", {"replicaSpecs": [replica(t, n, _tpl()) for t, n in replicas.items()], **spec})


# --------------------------------------------------------------------------- ColossalAI torchArgs


@pytest.mark.parametrize(
    ("torch_args", "index", "held"),
    [
        (["--rdzv_conf=join_timeout=30"], 0, "'--rdzv_conf=join_timeout=30' holds '='"),
        (["--rdzv_conf", "join_timeout=30"], 1, "'join_timeout=30' holds '='"),
        (["--max_restarts", "3", "--rdzv_conf=a=1,b=2"], 2, "holds ','"),
        (["--local_addr", "a,b"], 1, "'a,b' holds ','"),
        (["--"], 0, "'--' is an empty option name"),
    ],
)
def test_colossalai_torch_args_colossalai_run_cannot_pass_are_refused(torch_args: list[str], index: int, held: str) -> None:
    """colossalai run (0.5) splits --extra_launch_args at every ',' and each item at '=' into two
    parts: such values made the launcher fail minutes into the run (issue 21)."""
    manifest = colossalai()
    manifest["spec"]["worker"]["torchArgs"] = torch_args
    (line,) = refused(manifest)
    assert line.startswith(f"spec.worker.torchArgs[{index}]: "), line
    assert held in line and "--extra_launch_args" in line, line


def test_colossalai_older_form_extra_args_are_checked_at_their_own_path() -> None:
    errors = refused(colossalai_older(torchArgs=["--standalone"], extraArgs=["--rdzv_conf", "timeout=3"]))
    assert errors == [
        "spec.torchConfig.extraArgs[1]: 'timeout=3' holds '=': colossalai run passes torchrun options as one "
        "--extra_launch_args=name=value,name=value list, so a name or value cannot contain ',' or '='"
    ]


def test_colossalai_torch_args_it_can_pass_are_accepted_and_joined() -> None:
    args = ["--max_restarts", "3", "--standalone", "--rdzv_backend=c10d", "--log_dir", "/tmp/x.y"]
    manifest = colossalai()
    manifest["spec"]["worker"]["torchArgs"] = args
    parse_job(manifest)
    assert launch_items(args) == [
        ("max_restarts", "3", 1),
        ("standalone", None, 2),
        ("rdzv_backend", "c10d", 3),
        ("log_dir", "/tmp/x.y", 5),
    ]
    assert extra_launch_args(args) == "max_restarts=3,standalone,rdzv_backend=c10d,log_dir=/tmp/x.y"


# --------------------------------------------------------------------------- ColossalAI: the two forms


def test_torch_config_next_to_worker_is_refused() -> None:
    """torchConfig was ignored next to worker: procPerWorker 8 became 1 and extraArgs were lost."""
    errors = refused(colossalai(torchConfig={"procPerWorker": 8, "script": ["train.py"], "extraArgs": ["--standalone"]}))
    assert len(errors) == 1
    assert errors[0].startswith("spec.torchConfig: belongs to the older form (torchConfig with replicaSpecs)")
    assert "worker.procPerWorker" in errors[0]


def test_replica_specs_next_to_launcher_is_refused() -> None:
    manifest = colossalai_older({})
    manifest["spec"]["launcher"] = {"image": "other/img:2"}
    (line,) = refused(manifest)
    assert line.startswith("spec.torchConfig: belongs to the older form"), line
    assert "has launcher of the current form" in line


@pytest.mark.parametrize(
    ("launcher", "ok"),
    [({}, True), ({"replicas": 1}, True), ({"replicas": 0}, False), ({"replicas": 2}, False)],
)
def test_older_form_launcher_replicas_is_one(launcher: dict[str, Any], ok: bool) -> None:
    """The older form's launcher ``replicas`` was read by nothing: 1 (or absent) is the one
    launcher there is; any other count is refused."""
    manifest = colossalai_older(launcher)
    if ok:
        assert parse_job(manifest).spec.legacy_launcher_template is not None
        return
    assert refused(manifest) == [
        f"spec.replicaSpecs[0].replicas: {launcher['replicas']} launchers asked for: a ColossalAIJob has "
        "exactly one launcher (1, or leave it out)"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda m: m["spec"].pop("torchConfig"), "spec.torchConfig: required with replicaSpecs"),
        (lambda m: m["spec"].pop("replicaSpecs"), "spec.replicaSpecs: required with torchConfig"),
        (lambda m: m["spec"]["torchConfig"].pop("script"), "spec.torchConfig.script: required"),
        (lambda m: m["spec"]["torchConfig"].update(command=["t.py"]), "spec.torchConfig.command: give the training script in script or in command, not both"),
        (lambda m: m["spec"]["torchConfig"].update(script=["python", "t.py"]), "spec.torchConfig.script: command[0] is 'python'"),
        (lambda m: m["spec"]["replicaSpecs"].pop(1), "spec.replicaSpecs: an entry of type worker is required"),
        (lambda m: m["spec"]["replicaSpecs"][1].update(template=_tpl("trainer")), "spec.replicaSpecs[1].template.spec.containers: a container named 'worker' is required"),
        (lambda m: m["spec"]["replicaSpecs"][1].update(replicas=0), "spec.replicaSpecs[1].replicas: at least 1"),
    ],
    ids=["no-torch-config", "no-replica-specs", "no-script", "script-and-command", "python-script",
         "no-worker", "no-worker-container", "no-workers"],  # fmt: skip
)
def test_older_form_problems_name_the_field_the_user_wrote(change: Any, expected: str) -> None:
    """The older form was rewritten into worker before it was checked, so its errors named
    spec.worker..., a field the manifest does not have."""
    manifest = colossalai_older({})
    change(manifest)
    (line,) = refused(manifest)
    assert line.startswith(expected), line


def test_older_form_round_trips_without_the_worker_it_was_read_into() -> None:
    """The spec written back (job.yaml of a local run, the SDK's create) is the older form alone:
    read again, it is the same job, not a mixed one."""
    job = parse_job(colossalai_older({}, procPerWorker=2, extraArgs=["--standalone"]))
    assert job.spec.worker is not None and job.spec.worker.proc_per_worker == 2
    assert job.spec.worker.torch_args == ["--standalone"]
    spec = job.dump()["spec"]
    assert "worker" not in spec and "launcher" not in spec
    again = parse_job(job.dump())
    assert again.spec.worker == job.spec.worker
    newer = parse_job(colossalai())
    assert "launcher" not in newer.dump()["spec"], "the default launcher is not written back either"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ([{"name": "A", "value": 1}], "spec.launcher.env[0].value: must be a string (quote numbers and booleans)"),
        ([{"name": "A", "value": "1"}, {"value": "x"}], "spec.launcher.env[1].name: required, a string"),
        ([{"name": "A=B", "value": "x"}], "spec.launcher.env[0].name: 'A=B' must be printable ASCII without '=' or spaces"),
        ([{"name": "A", "valueFrom": "secret"}], "spec.launcher.env[0].valueFrom: must be a mapping"),
        (["A=1"], "spec.launcher.env[0].name: required, a string"),
    ],
)
def test_launcher_env_is_checked_as_env_vars(env: list[Any], expected: str) -> None:
    """A malformed launcher env entry failed only at pod creation on a cluster."""
    (line,) = refused(colossalai(launcher={"env": env}))
    assert line.startswith(expected), line


def test_launcher_env_of_values_and_value_from_is_accepted() -> None:
    env = [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    assert parse_job(colossalai(launcher={"env": env})).spec.launcher.env == env


# --------------------------------------------------------------------------- GenericJob rules


@pytest.mark.parametrize(
    ("field", "rules", "expected"),
    [
        ("successRules", [{"master": [0]}], "spec.successRules[0].master: no replica type 'master' in replicaSpecs (types: worker, ps)"),
        ("failureRules", [{"worker": [0]}, {"worker": [0, 3]}], "spec.failureRules[1].worker[1]: rank 3 does not exist: type 'worker' has 3 replicas (ranks 0 to 2)"),
        ("successRules", [{"ps": ["1"]}], "spec.successRules[0].ps[0]: rank 1 does not exist: type 'ps' has 1 replicas (rank 0)"),
    ],
)
def test_rules_that_could_never_be_met_are_refused(field: str, rules: list[Any], expected: str) -> None:
    assert refused(generic({"worker": 3, "ps": 1}, **{field: rules})) == [expected]


def test_rules_within_the_replicas_are_accepted() -> None:
    job = parse_job(generic({"worker": 3, "ps": 1}, successRules=[{"worker": [0, "2"], "ps": [0]}], failureRules=[{"ps": [0]}]))
    assert job.spec.success_rules == [{"worker": [0, "2"], "ps": [0]}]


# --------------------------------------------------------------------------- Service ports


def test_one_service_port_needs_no_name() -> None:
    """Kubernetes allows one unnamed port; it was refused."""
    job = parse_job(generic({"worker": 2}, service={"ports": [{"port": 2222}]}))
    assert job.spec.service.ports[0].name is None


@pytest.mark.parametrize(
    ("ports", "expected"),
    [
        ([{"port": 1}, {"name": "b", "port": 2}], "spec.service.ports[0].name: required when the Service has more than one port"),
        ([{"name": "a", "port": 1}, {"name": "a", "port": 2}], "spec.service.ports[1].name: 'a' is also the name of ports[0]"),
        ([{"name": "a", "port": 1}, {"name": "b", "port": 1}], "spec.service.ports[1].port: 1/TCP is also ports[0]"),
        ([{"name": "Http", "port": 1}], "spec.service.ports[0].name: port name 'Http' must be a DNS label"),
    ],
)
def test_service_ports_are_checked_as_the_api_server_checks_them(ports: list[Any], expected: str) -> None:
    (line,) = refused(generic({"worker": 1}, service={"ports": ports}))
    assert line.startswith(expected), line


def test_one_port_number_for_two_protocols_is_accepted() -> None:
    parse_job(generic({"worker": 1}, service={"ports": [{"name": "a", "port": 53}, {"name": "b", "port": 53, "protocol": "UDP"}]}))


# --------------------------------------------------------------------------- queue


@pytest.mark.parametrize("queue", [None, "", "default", "team-a.gpu"])
def test_queue_names_accepted(queue: str | None) -> None:
    job = parse_job(generic({"worker": 1}, scheduler={"t9kScheduler": {"queue": queue}}))
    assert job.spec.scheduler.t9k_scheduler.queue_name == (queue or "default")


@pytest.mark.parametrize("queue", ["Team A", "a_b", "-a", "q" * 64])
def test_queue_names_that_are_no_queue_or_label_are_refused(queue: str) -> None:
    (line,) = refused(generic({"worker": 1}, scheduler={"t9kScheduler": {"queue": queue}}))
    assert line.startswith("spec.scheduler.t9kScheduler.queue: ") and "is not a queue name" in line, line


# --------------------------------------------------------------------------- nothing to run (issue 41)


def _deepspeed(run: dict[str, Any]) -> dict[str, Any]:
    return job("DeepSpeedJob", "ds", {"config": {"run": run}, "worker": {"replicas": 2, "template": _tpl("worker")}})


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ({"python": []}, "spec.config.run.python: nothing to run: give the training script and its arguments"),
        ({"python": [""]}, "spec.config.run.python: nothing to run"),
        ({"python": "  "}, "spec.config.run.python: nothing to run"),
        ({"module": []}, "spec.config.run.module: nothing to run: give the module and its arguments"),
        ({"exec": []}, "spec.config.run.exec: nothing to run: give the program and its arguments"),
        ({"exec": [" ", "x"]}, "spec.config.run.exec: nothing to run"),
    ],
)
def test_a_deepspeedjob_with_nothing_to_run_is_refused(run: dict[str, Any], expected: str) -> None:
    """``config.run.python: []`` (one of T9k's own manifests has that shape) started deepspeed with no
    script: the cluster's command ended in ``--launcher=pdsh``, a local run failed after 71 s."""
    (line,) = refused(_deepspeed(run))
    assert line.startswith(expected), line
    assert parse_job(_deepspeed({"python": "train.py --epochs 3"})).spec.config.run.python == ["train.py", "--epochs", "3"]


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (colossalai(worker={"replicas": 2, "command": [], "template": _tpl("worker")}), "spec.worker.command: nothing to run"),
        (colossalai(worker={"replicas": 2, "command": [""], "template": _tpl("worker")}), "spec.worker.command: nothing to run"),
        (colossalai_older(script=[]), "spec.torchConfig.script: nothing to run"),
    ],
)  # fmt: skip
def test_a_colossalaijob_with_nothing_to_run_says_so_in_plain_words(manifest: dict[str, Any], expected: str) -> None:
    (line,) = refused(manifest)
    assert line.startswith(expected) and "List should have" not in line, line
