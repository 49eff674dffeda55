"""Fields a valid job accepts without effect, or with a silent default, are named (issue 21):
``spec_warnings`` gives one ``<field path>: <what happens instead>`` line each."""

from __future__ import annotations

from typing import Any

import pytest

from t9k_jobs.api import parse_job
from t9k_jobs.frameworks import spec_warnings
from tests.helpers import job, template


def _tpl(name: str = "c", **extra: Any) -> dict[str, Any]:
    return template(name=name, image="example/img:1", **extra)


def warnings_of(kind: str, spec: dict[str, Any]) -> list[str]:
    return spec_warnings(parse_job(job(kind, "j", spec)))


def pytorch(**spec: Any) -> dict[str, Any]:
    container = spec.pop("container", {"command": ["python", "t.py"]})
    return {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": _tpl("pytorch", **container)}], **spec}


def deepspeed(gpus: int | None = None, **config: Any) -> dict[str, Any]:
    extra = {"resources": {"limits": {"nvidia.com/gpu": gpus}}} if gpus else {}
    return {"config": {"run": {"python": ["t.py"]}, **config}, "worker": {"replicas": 2, "template": _tpl("worker", **extra)}}


@pytest.mark.parametrize("t9k", [{}, {"queue": None}, {"queue": ""}, {"priority": 5}])
def test_an_unset_queue_is_said_to_be_default(t9k: dict[str, Any]) -> None:
    assert warnings_of("PyTorchTrainingJob", pytorch(scheduler={"t9kScheduler": t9k})) == [
        "spec.scheduler.t9kScheduler.queue: not set; the job's pods use the queue 'default'"
    ]


def test_a_set_queue_and_no_scheduler_say_nothing() -> None:
    assert warnings_of("PyTorchTrainingJob", pytorch(scheduler={"t9kScheduler": {"queue": "q"}})) == []
    assert warnings_of("PyTorchTrainingJob", pytorch()) == []


def test_colossalai_older_restart_policy_that_would_restart_is_named() -> None:
    """The older form's restartPolicy {policy, limit} restarted nothing, in silence."""
    spec = {
        "torchConfig": {"script": ["t.py"]},
        "replicaSpecs": [
            {"type": "launcher", "restartPolicy": {"policy": "OnFailure", "limit": 3}, "template": _tpl("launcher")},
            {"type": "worker", "replicas": 2, "restartPolicy": "Never", "template": _tpl("worker")},
        ],
    }
    assert warnings_of("ColossalAIJob", spec) == [
        "spec.replicaSpecs[0].restartPolicy: no effect; a ColossalAIJob never restarts a replica "
        "(T9k: a restarted pod would not rejoin the training)"
    ]
    spec["replicaSpecs"][0]["restartPolicy"] = {"policy": "OnFailure", "limit": 0}
    spec["replicaSpecs"][1]["restartPolicy"] = {"policy": "Always"}
    assert warnings_of("ColossalAIJob", spec) == [], "a limit of 0 restarts nothing either"


def test_debug_and_resume_entries_for_a_type_the_job_lacks() -> None:
    """T9k's own debug example (P5) names worker in a job of node replicas: accepted, named."""
    run_mode = {
        "debug": {"enabled": True, "replicaSpecs": [{"type": "launcher"}, {"type": "worker"}]},
        "pause": {"resumeSpecs": [{"type": "ps"}]},
    }
    assert warnings_of("PyTorchTrainingJob", pytorch(runMode=run_mode)) == [
        "spec.runMode.debug.replicaSpecs[0].type: 'launcher' is not a replica type of this job (worker); "
        "the entry applies to no replica",
        "spec.runMode.pause.resumeSpecs[0].type: 'ps' is not a replica type of this job (worker); "
        "the entry applies to no replica",
    ]


def test_blocks_not_switched_on_and_both_spellings() -> None:
    spec = pytorch(
        torchrunConfig={"enabled": False, "enable": True, "procPerNode": 4, "maxRestarts": 1},
        elastic={"maxReplicas": 3},
    )
    spec["replicaSpecs"][0]["scalingWeight"] = 2
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.torchrunConfig.enable: ignored; enabled (false) is given too and wins",
        "spec.torchrunConfig: maxRestarts, procPerNode have no effect without enabled: true (torchrun is not used)",
        "spec.elastic: maxReplicas has no effect without enabled: true (the replica counts are fixed)",
        "spec.replicaSpecs[0].scalingWeight: no effect without elastic; the replicas are 2",
    ]


def test_torchrun_command_that_is_replaced_or_cut() -> None:
    spec = pytorch(torchrunConfig={"enabled": True}, container={"command": ["bash", "-c", "x"], "args": ["t.py"]})
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.replicaSpecs[0].template.spec.containers[0].command: replaced by torchrun (T9k: with "
        "torchrunConfig the command no longer takes effect); the script and its arguments come from args"
    ]
    for container in (
        {"command": ["python", "t.py"], "args": ["--lr", "0.1"]},
        {"command": ["python", "-m", "pkg"]},
        {"command": ["python", "-u", "t.py"]},  # torchrun runs python -u itself (issue 32): honoured, no word
        {"command": ["python", "-O", "t.py"]},  # carried as PYTHONOPTIMIZE
    ):
        assert warnings_of("PyTorchTrainingJob", pytorch(torchrunConfig={"enabled": True}, container=container)) == []


def test_torchrun_script_that_may_not_be_python_is_named() -> None:
    """A command torchrun runs as the script with python, that does not look like a python script."""
    spec = pytorch(torchrunConfig={"enabled": True}, container={"command": ["/app/train", "--x"]})
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.replicaSpecs[0].template.spec.containers[0].command: torchrun runs '/app/train' with python as the "
        "training script; if it is not a python script, give one (or add --no-python to "
        "torchrunConfig.extraOptions to run a program)"
    ]
    spec["torchrunConfig"]["extraOptions"] = ["--no-python"]
    assert warnings_of("PyTorchTrainingJob", spec) == []


def test_torchrun_min_nodes_under_elastic() -> None:
    spec = pytorch(
        torchrunConfig={"enabled": True, "minNodes": 1},
        elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 3},
    )
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.torchrunConfig.minNodes: no effect with elastic; torchrun's --nnodes is "
        "elastic.minReplicas:elastic.maxReplicas"
    ]


def test_deepspeed_custom_command_and_slots() -> None:
    assert warnings_of("DeepSpeedJob", deepspeed(customCommand="deepspeed t.py", localRank=False)) == [
        "spec.config.run: no effect with customCommand (T9k: only slotsPerWorker still applies)",
        "spec.config.localRank: no effect with customCommand (T9k: only slotsPerWorker still applies)",
    ]
    assert warnings_of("DeepSpeedJob", deepspeed(gpus=4, slotsPerWorker=1)) == [
        "spec.config.slotsPerWorker: 1 ranks per worker, but the worker's container 'worker' has 4 GPUs "
        "(leave it out to run one rank per GPU)"
    ]
    assert warnings_of("DeepSpeedJob", deepspeed(gpus=4)) == []
    assert warnings_of("DeepSpeedJob", deepspeed(gpus=2, slotsPerWorker=2, slotPerWorker=3)) == [
        "spec.config.slotPerWorker: ignored; slotsPerWorker (2) is given too and wins"
    ]


def test_worker_commands_that_sshd_replaces() -> None:
    spec = deepspeed()
    spec["worker"]["template"] = _tpl("worker", command=["python", "t.py"])
    assert warnings_of("DeepSpeedJob", spec) == [
        "spec.worker.template.spec.containers[0].command: replaced; worker-0 runs the deepspeed launcher and "
        "the other workers sshd; config.run says what each rank runs"
    ]
    cai = {"worker": {"command": ["t.py"], "template": _tpl("worker", args=["x"])}}
    assert warnings_of("ColossalAIJob", cai) == [
        "spec.worker.template.spec.containers[0].args: replaced; a ColossalAIJob worker runs sshd (T9k docs); "
        "the launcher runs the training command on it"
    ]
