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


# --------------------------------------------------------------------------- issue 32: the second walk


def generic(*policies: dict[str, Any]) -> dict[str, Any]:
    specs = [{"type": f"t{i}", "restartPolicy": p, "template": _tpl()} for i, p in enumerate(policies)]
    return {"replicaSpecs": specs}


def test_generic_restart_limits_without_effect() -> None:
    assert warnings_of("GenericJob", generic({"policy": "Never", "limit": 3}, {"policy": "OnFailure"})) == [
        "spec.replicaSpecs[0].restartPolicy.limit: no effect with policy Never (the replica is never restarted)",
        "spec.replicaSpecs[1].restartPolicy: policy OnFailure restarts nothing while limit is 0 (the default); "
        "limit is the number of restarts each replica may have",
    ]
    quiet = generic({"policy": "Never"}, {"policy": "Always", "limit": 2}, {"policy": "OnFailure", "limit": 0}, {"limit": 1})
    assert warnings_of("GenericJob", quiet) == []


def test_backoff_limit_without_effect() -> None:
    spec = pytorch(runPolicy={"backoffLimit": 5})
    spec["replicaSpecs"][0]["restartPolicy"] = "Never"
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.runPolicy.backoffLimit: no effect; every replica's restartPolicy is Never"
    ]
    spec = pytorch(runPolicy={"backoffLimit": 0})
    spec["replicaSpecs"][0]["restartPolicy"] = "ExitCode"
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.replicaSpecs[0].restartPolicy: ExitCode restarts nothing with spec.runPolicy.backoffLimit 0"
    ]
    ds = deepspeed()
    ds["runPolicy"] = {"backoffLimit": 2}
    ds["worker"]["restartPolicy"] = "Never"
    assert warnings_of("DeepSpeedJob", ds) == ["spec.runPolicy.backoffLimit: no effect; every replica's restartPolicy is Never"]
    assert warnings_of("PyTorchTrainingJob", pytorch()) == [], "the default backoffLimit with the default Never says nothing"


def test_replicas_beside_expected_replicas_and_counts_elastic_clamps() -> None:
    """``replicas: 6`` beside ``expectedReplicas: 3`` made 3 pods without a word."""
    elastic = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 3}
    spec = pytorch(torchrunConfig={"enabled": True}, elastic=elastic)
    spec["replicaSpecs"][0]["replicas"] = 6
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.replicaSpecs[0].replicas: 6 has no effect; spec.elastic.expectedReplicas (3) is the replica count, "
        "split between the types by scalingWeight"
    ]
    spec["elastic"] = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 9}
    spec["replicaSpecs"][0]["replicas"] = 9
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.elastic.expectedReplicas: 9 replicas is outside elastic's range; 4 run (spec.elastic.maxReplicas)"
    ]
    ds = deepspeed()
    ds["elastic"] = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 3}
    ds["worker"]["replicas"] = 6
    assert warnings_of("DeepSpeedJob", ds) == [
        "spec.worker.replicas: 6 has no effect; spec.elastic.expectedReplicas (3) is the worker count"
    ]
    del ds["elastic"]["expectedReplicas"]
    assert warnings_of("DeepSpeedJob", ds) == [
        "spec.worker.replicas: 6 replicas is outside elastic's range; 4 run (spec.elastic.maxReplicas)"
    ]


def test_every_scaling_weight_zero() -> None:
    spec = pytorch(torchrunConfig={"enabled": True}, elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 4})
    spec["replicaSpecs"] = [
        {"type": t, "replicas": 1, "scalingWeight": 0, "template": _tpl("pytorch", command=["python", "t.py"])}
        for t in ("master", "worker")
    ]
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.replicaSpecs[0].scalingWeight: every scalingWeight is 0; the replicas are split as if each were 1"
    ]


def test_template_scheduling_fields_that_t9k_scheduler_overrides() -> None:
    spec = pytorch(scheduler={"t9kScheduler": {"queue": "q", "priority": 50}})
    spec["replicaSpecs"][0]["template"]["spec"].update(schedulerName="volcano", priorityClassName="high")
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.replicaSpecs[0].template.spec.schedulerName: 'volcano' is replaced; with spec.scheduler.t9kScheduler "
        "the pods use t9k-scheduler, or the default scheduler where the cluster gang-schedules with scheduling.k8s.io "
        "PodGroups (it is kept only on a cluster that serves neither)",
        "spec.scheduler.t9kScheduler.priority: where the cluster gang-schedules with scheduling.k8s.io PodGroups, "
        "spec.replicaSpecs[0].template.spec's priorityClassName 'high' sets the pods' and the PodGroup's priority "
        "instead of 50 (T9k's PodGroup and Kueue take 50)",
    ]
    # No t9kScheduler: the template's fields are the pods' own; no priority asked for: nothing is overridden.
    del spec["scheduler"]
    assert warnings_of("PyTorchTrainingJob", spec) == []
    spec["scheduler"] = {"t9kScheduler": {"queue": "q"}}
    spec["replicaSpecs"][0]["template"]["spec"].pop("schedulerName")
    assert warnings_of("PyTorchTrainingJob", spec) == []


def test_a_template_name_or_namespace_is_named() -> None:
    spec = pytorch()
    spec["replicaSpecs"][0]["template"]["metadata"] = {"name": "mine", "namespace": "other", "labels": {"a": "b"}}
    assert warnings_of("PyTorchTrainingJob", spec) == [
        "spec.replicaSpecs[0].template.metadata.name: no effect; the replica pods are named <job>-<type>-<index>",
        "spec.replicaSpecs[0].template.metadata.namespace: no effect; the replica pods are in the job's namespace",
    ]
