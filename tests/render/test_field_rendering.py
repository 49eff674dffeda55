"""Fields that were accepted and then dropped when the pods were made (issue 21), rendered."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from t9k_jobs.api import parse_job
from t9k_jobs.render import render
from tests.helpers import job, template


def _tpl(name: str, **extra: Any) -> dict[str, Any]:
    return template(name=name, image="example/img:1", **extra)


def objects(kind: str, spec: dict[str, Any], name: str = "j") -> list[dict[str, Any]]:
    return render(parse_job(job(kind, name, spec)), keygen=dict)


def one(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


# --------------------------------------------------------------------------- torchrun (§3.4)


@pytest.mark.parametrize(
    ("container", "script"),
    [
        ({"command": ["python", "train.py"], "args": ["--lr", "0.1"]}, ["train.py", "--lr", "0.1"]),
        ({"command": ["/opt/conda/bin/python3", "-m", "pkg.train"], "args": ["--epochs", "2"]}, ["-m", "pkg.train", "--epochs", "2"]),
        ({"command": ["python"], "args": ["train.py", "--lr", "0.1"]}, ["train.py", "--lr", "0.1"]),
        ({"args": ["train.py"]}, ["train.py"]),
    ],
)
def test_torchrun_keeps_the_script_of_a_python_command_with_args(container: dict[str, Any], script: list[str]) -> None:
    """``command: [python, train.py]`` with ``args: [--lr, 0.1]`` ran ``torchrun ... --lr 0.1``:
    the script was dropped and torchrun failed with a usage error."""
    spec = {
        "torchrunConfig": {"enabled": True},
        "replicaSpecs": [{"type": "worker", "replicas": 2, "template": _tpl("pytorch", **container)}],
    }
    c = one(objects("PyTorchTrainingJob", spec), "Pod", "j-worker-0")["spec"]["containers"][0]
    assert c["command"] == ["torchrun"]
    flags = [a for a in c["args"] if a.startswith("--nnodes") or a.startswith("--max_restarts")]
    assert len(flags) == 2
    assert c["args"][c["args"].index(flags[-1]) + 1 :] == script


# --------------------------------------------------------------------------- DeepSpeed slots (§4.3)


def _deepspeed(resources: dict[str, Any] | None, **config: Any) -> dict[str, Any]:
    extra = {"resources": resources} if resources else {}
    return {
        "config": {"run": {"python": ["t.py"]}, **config},
        "worker": {"replicas": 2, "template": _tpl("worker", **extra)},
    }


@pytest.mark.parametrize(
    ("resources", "config", "slots"),
    [
        ({"limits": {"nvidia.com/gpu": 4}}, {}, 4),
        ({"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}, {}, 2),
        (None, {}, 1),
        ({"limits": {"cpu": 4}}, {}, 1),
        ({"limits": {"nvidia.com/gpu": 4}}, {"slotsPerWorker": 2}, 2),
        ({"limits": {"nvidia.com/gpu": 4}}, {"slotPerWorker": 3}, 3),
    ],
)
def test_deepspeed_slots_default_to_the_workers_gpus(resources: dict[str, Any] | None, config: dict[str, Any], slots: int) -> None:
    """A worker with 4 GPUs and no slotsPerWorker had ``slots=1``: one GPU of four trained."""
    hostfile = one(objects("DeepSpeedJob", _deepspeed(resources, **config)), "ConfigMap", "j-launch")["data"]["hostfile"]
    assert hostfile == f"j-worker-0 slots={slots}\nj-worker-1 slots={slots}\n"


def test_deepspeed_slots_follow_the_training_container_not_a_sidecar() -> None:
    spec = _deepspeed(None)
    spec["worker"]["template"]["spec"]["containers"] = [
        {"name": "sidecar", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        {"name": "worker", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 8}}},
    ]
    hostfile = one(objects("DeepSpeedJob", spec), "ConfigMap", "j-launch")["data"]["hostfile"]
    assert hostfile.splitlines()[0] == "j-worker-0 slots=8"


# --------------------------------------------------------------------------- ColossalAI (§5)


def _launch(objs: list[dict[str, Any]], name: str = "j-launcher") -> list[str]:
    script = one(objs, "Pod", name)["spec"]["containers"][0]["command"][2]
    return shlex.split(script[script.index("colossalai run") :])


def test_colossalai_older_form_gives_procs_script_and_launch_args() -> None:
    spec = {
        "torchConfig": {"procPerWorker": 4, "script": ["t.py", "--x"], "torchArgs": ["--max_restarts", "0"], "extraArgs": ["--standalone"]},
        "replicaSpecs": [{"type": "worker", "replicas": 2, "template": _tpl("worker")}],
    }
    launch = _launch(objects("ColossalAIJob", spec))
    assert "--nproc_per_node=4" in launch
    assert "--extra_launch_args=max_restarts=0,standalone" in launch
    assert launch[-2:] == ["t.py", "--x"]


def test_colossalai_launcher_env_reaches_the_launcher() -> None:
    spec = {
        "launcher": {"env": [{"name": "A", "value": "1"}, {"name": "P", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]},
        "worker": {"command": ["t.py"], "template": _tpl("worker")},
    }
    env = one(objects("ColossalAIJob", spec), "Pod", "j-launcher")["spec"]["containers"][0]["env"]
    assert {"name": "A", "value": "1"} in env
    assert {"name": "P", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in env


# --------------------------------------------------------------------------- GenericJob Service, queue


def test_one_unnamed_service_port_is_on_every_replicas_service() -> None:
    spec = {
        "service": {"ports": [{"port": 2222, "targetPort": 2222}]},
        "replicaSpecs": [
            {"type": "worker", "replicas": 2, "template": _tpl("c", command=["echo", "$(service.worker[1].host)"])}
        ],
    }
    objs = objects("GenericJob", spec)
    for i in range(2):
        assert one(objs, "Service", f"j-worker-{i}")["spec"]["ports"] == [{"port": 2222, "targetPort": 2222}]
    assert one(objs, "Pod", "j-worker-0")["spec"]["containers"][0]["command"] == ["echo", "j-worker-1"]


@pytest.mark.parametrize("t9k", [{}, {"queue": None}, {"queue": ""}])
def test_an_unset_queue_is_default_on_pods_and_pod_group(t9k: dict[str, Any]) -> None:
    spec = {"scheduler": {"t9kScheduler": t9k}, "replicaSpecs": [{"type": "worker", "template": _tpl("c")}]}
    objs = objects("GenericJob", spec)
    assert one(objs, "PodGroup", "j")["spec"]["queue"] == "default"
    assert one(objs, "Pod", "j-worker-0")["metadata"]["labels"]["scheduler.tensorstack.dev/queue"] == "default"


# --------------------------------------------------------------------------- fields shown nowhere else
# (docs/api-coverage.md names these tests for fields the other tests do not render)


def _deepspeed_launch(config: dict[str, Any], **spec: Any) -> tuple[list[str], str]:
    worker = _tpl("worker", env=[{"name": "A", "value": "1"}])
    objs = objects("DeepSpeedJob", {"config": config, "worker": {"replicas": 2, "template": worker}, **spec})
    text = one(objs, "Pod", "j-worker-0")["spec"]["containers"][0]["command"][2]
    last = text.rsplit("t9k_run ", 1)[1]
    return shlex.split(last), text


@pytest.mark.parametrize(
    ("config", "tail"),
    [
        ({"run": {"python": ["t.py", "--x"]}, "localRank": False}, ["--no_local_rank", "t.py", "--x"]),
        ({"run": {"module": ["pkg.train"]}, "autotune": "tune"}, ["--autotuning=tune", "--module", "pkg.train"]),
        ({"run": {"exec": ["./train.sh"]}, "otherArgs": ["--include", "localhost:0"]}, ["--include", "localhost:0", "--no_python", "./train.sh"]),
    ],
)
def test_deepspeed_config_flags(config: dict[str, Any], tail: list[str]) -> None:
    launch, _ = _deepspeed_launch(config)
    assert launch[:3] == ["deepspeed", "--hostfile=/t9k/hostfile", "--launcher=pdsh"]
    assert launch[3:] == tail


def test_deepspeed_custom_command_and_disable_custom_env() -> None:
    launch, text = _deepspeed_launch({"customCommand": "deepspeed t.py && echo done", "slotsPerWorker": 2})
    assert launch == ["/bin/sh", "-c", "deepspeed t.py && echo done"]
    assert "/root/.deepspeed_env A" in text, "the container's env names go to the env file"
    _, text = _deepspeed_launch({"run": {"python": ["t.py"]}}, disableCustomEnv=True)
    assert "/root/.deepspeed_env A" not in text and text.count("/root/.deepspeed_env") == 1


def test_torchrun_config_flags() -> None:
    spec = {
        "torchrunConfig": {
            "enabled": True, "maxRestarts": 2, "procPerNode": 3, "rdzvBackend": "etcd-v2",
            "extraOptions": ["--monitor_interval=5"], "minNodes": 1,
        },  # fmt: skip
        "replicaSpecs": [{"type": "worker", "replicas": 2, "template": _tpl("pytorch", args=["t.py"])}],
    }
    args = one(objects("PyTorchTrainingJob", spec), "Pod", "j-worker-0")["spec"]["containers"][0]["args"]
    assert args == [
        "--nnodes=1:2", "--nproc_per_node=3", "--rdzv_backend=etcd-v2", "--rdzv_endpoint=$(MASTER_ADDR):$(MASTER_PORT)",
        "--rdzv_id=j", "--max_restarts=2", "--monitor_interval=5", "t.py",
    ]  # fmt: skip


def test_service_port_fields_are_copied() -> None:
    port = {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns-port", "appProtocol": "dns"}
    spec = {"service": {"ports": [port]}, "replicaSpecs": [{"type": "worker", "template": _tpl("c")}]}
    assert one(objects("GenericJob", spec), "Service", "j-worker-0")["spec"]["ports"] == [port]


def test_colossalai_launcher_fields() -> None:
    spec = {
        "launcher": {"image": "launch/img:2", "workingDir": "/w", "resources": {"limits": {"cpu": "1"}}},
        "worker": {"command": ["t.py"], "template": _tpl("worker")},
        "ssh": {"authMountPath": "/home/u/.ssh", "sshdPath": "/opt/sshd"},
    }
    objs = objects("ColossalAIJob", spec)
    c = one(objs, "Pod", "j-launcher")["spec"]["containers"][0]
    assert (c["name"], c["image"], c["workingDir"], c["resources"]) == ("launcher", "launch/img:2", "/w", {"limits": {"cpu": "1"}})
    assert c["command"][2].startswith("install -d -m 700 /home/u/.ssh")
    assert "/opt/sshd -D -e -o AuthorizedKeysFile=/home/u/.ssh/authorized_keys" in (
        one(objs, "Pod", "j-worker-0")["spec"]["containers"][0]["command"][2]
    )
