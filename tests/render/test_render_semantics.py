"""What ``render`` must produce, stated explicitly (independent of the golden files).

Each test names the section of the T9k semantics reference (t9k-semantics.md) it checks.
The manifests are the project's own, under ``manifests/``; each mirrors the features of a
real public T9k manifest (G1, P1, P3, P5, D2, C1) or a documented legacy form.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
import yaml

from .render_support import FAKE_KEYS, MANIFESTS, manifest_names, render_manifest
from t9k_jobs.api import ManifestError, load_manifest, parse_job
from t9k_jobs.frameworks import framework_for
from t9k_jobs.render import render, to_yaml
from tests import helpers
from tests.helpers import replica, template


# --------------------------------------------------------------------------- helpers


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def names(objects: list[dict[str, Any]], kind: str) -> list[str]:
    return [o["metadata"]["name"] for o in of_kind(objects, kind)]


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}: {names(objects, kind)}"
    return found[0]


def ctr(pod: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    containers = pod["spec"]["containers"]
    if name is None:
        return containers[0]
    return next(c for c in containers if c["name"] == name)


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container.get("volumeMounts") or []}


def volume(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in pod["spec"].get("volumes") or [] if v["name"] == name)


def script(container: dict[str, Any]) -> str:
    """The shell script of a ``/bin/sh -c <script>`` command."""
    command = container["command"]
    assert command[:2] == ["/bin/sh", "-c"], command
    return command[2]


def job_of(name: str):
    return load_manifest(MANIFESTS / f"{name}.yaml")


def _tpl(container_name: str = "pytorch", **extra: Any) -> dict[str, Any]:
    return template(name=container_name, image="example/img:1", **extra)


# --------------------------------------------------------------------------- common (§1.2, §1.3)


EXPECTED_PODS = {
    "generic-service": [f"tf-ring-generic-worker-{i}" for i in range(4)],
    "generic-paused": [],
    "pytorch-workers": [f"cifar-ddp-worker-{i}" for i in range(4)],
    "pytorch-node-torchrun": ["handrun-nodes-node-0", "handrun-nodes-node-1"],
    "pytorch-debug": ["seg-debug-node-0"],
    "pytorch-master-worker-scheduler": ["bert-finetune-master-0", "bert-finetune-worker-0", "bert-finetune-worker-1"],
    "pytorch-elastic": [f"resnet-elastic-trainer-{i}" for i in range(4)] + ["resnet-elastic-helper-0"],
    "deepspeed-gpt": [f"llm-350m-worker-{i}" for i in range(3)],
    "deepspeed-legacy": ["ds-legacy-worker-0", "ds-legacy-worker-1"],
    "colossalai-workers": ["cai-opt-launcher"] + [f"cai-opt-worker-{i}" for i in range(4)],
    "colossalai-legacy": ["cai-legacy-launcher", "cai-legacy-worker-0", "cai-legacy-worker-1"],
}


def test_every_manifest_has_expected_pod_names() -> None:
    assert sorted(EXPECTED_PODS) == manifest_names()


@pytest.mark.parametrize("name", sorted(EXPECTED_PODS))
def test_pod_names_are_job_type_index(name: str) -> None:
    """§1.2: pods are ``<job>-<type>-<index>``; the ColossalAI launcher has no index."""
    assert names(render_manifest(name), "Pod") == EXPECTED_PODS[name]


@pytest.mark.parametrize("name", sorted(EXPECTED_PODS))
def test_every_pod_has_restart_policy_never(name: str) -> None:
    """§3.1/§4.1: the controller restarts replicas itself, so every pod is restartPolicy Never
    (also ColossalAIJob, whose template says OnFailure, §5.4)."""
    for pod in of_kind(render_manifest(name), "Pod"):
        assert pod["spec"]["restartPolicy"] == "Never", pod["metadata"]["name"]


@pytest.mark.parametrize("name", sorted(EXPECTED_PODS))
def test_one_headless_service_per_replica_named_like_the_pod(name: str) -> None:
    """§1.2: one headless Service per replica, named like the pod, selecting only that pod.
    The ColossalAI launcher is never dialled, so it has none."""
    objects = render_manifest(name)
    job = job_of(name)
    replica_label = f"{job.kind.lower()}-replica"
    pods = {p["metadata"]["name"]: p for p in of_kind(objects, "Pod")}
    services = of_kind(objects, "Service")
    expected = [n for n in EXPECTED_PODS[name] if not n.endswith("-launcher")]
    if name == "generic-paused":
        expected = ["held-job-worker-0", "held-job-worker-1"]  # §1.5: a paused job keeps its Services
    assert [s["metadata"]["name"] for s in services] == expected
    for svc in services:
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["selector"] == {replica_label: svc["metadata"]["name"]}
        pod = pods.get(svc["metadata"]["name"])
        if pod is not None:
            assert pod["metadata"]["labels"][replica_label] == svc["metadata"]["name"]


@pytest.mark.parametrize("name", sorted(EXPECTED_PODS))
def test_pod_labels(name: str) -> None:
    """§1.3: owner, component and role labels on every pod."""
    job = job_of(name)
    kind = job.kind.lower()
    for pod in of_kind(render_manifest(name), "Pod"):
        labels = pod["metadata"]["labels"]
        pod_name = pod["metadata"]["name"]
        suffix = pod_name[len(job.name) + 1 :]  # <type>-<index>, or "launcher"
        replica_type = suffix if suffix == "launcher" else suffix.rsplit("-", 1)[0]
        assert labels["tensorstack.dev/owner-name"] == job.name
        assert labels["tensorstack.dev/owner-kind"] == job.kind
        assert labels["tensorstack.dev/component"] == kind
        assert labels["tensorstack.dev/component-type"] == "user"
        assert labels[kind] == job.name
        assert labels[f"{kind}-replica"] == pod_name
        assert labels["scheduler.tensorstack.dev/role"] == replica_type


@pytest.mark.parametrize("name", sorted(EXPECTED_PODS))
def test_objects_come_in_apply_order(name: str) -> None:
    order = ["ConfigMap", "Secret", "Service", "PodGroup", "TensorBoard", "PodDisruptionBudget", "Pod"]
    kinds = [o["kind"] for o in render_manifest(name)]
    assert kinds == sorted(kinds, key=order.index)


# --------------------------------------------------------------------------- GenericJob (§2.2)


def test_generic_tf_config_substituted_with_service_hosts_and_port() -> None:
    """§2.2: $(service.<type>[<rank>].host), $(service.port[<name>]), $(type), $(rank)."""
    objects = render_manifest("generic-service")
    hosts = [f"tf-ring-generic-worker-{i}:2222" for i in range(4)]
    for i in range(4):
        pod = one(objects, "Pod", f"tf-ring-generic-worker-{i}")
        values = env(ctr(pod, "tensorflow"))
        assert "$(" not in values["TF_CONFIG"]
        assert json.loads(values["TF_CONFIG"]) == {
            "cluster": {"worker": hosts},
            "task": {"type": "worker", "index": i},
        }
        assert values["WORKER_COUNT"] == "4"  # $(replicas[worker])
        assert values["LEFT_ALONE"] == "$(HOME)/cache"  # unknown token: left for Kubernetes
        assert ctr(pod)["command"][-1] == f"--task=worker-{i}"  # substitution in command too


def test_generic_injects_no_env_of_its_own() -> None:
    """§2.2: GenericJob is the low-automation kind: no MASTER_ADDR etc.; only the restart attempt
    every container of every kind is told (issue 42)."""
    for pod in of_kind(render_manifest("generic-service"), "Pod"):
        assert list(env(ctr(pod))) == ["T9K_JOBS_RESTART_ATTEMPT", "TF_CONFIG", "WORKER_COUNT", "LEFT_ALONE"]


def test_generic_services_carry_the_declared_port() -> None:
    """§1.2: ``spec.service.ports`` copied onto each per-replica Service (port 2222)."""
    for svc in of_kind(render_manifest("generic-service"), "Service"):
        assert svc["spec"]["ports"] == [{"name": "grpc", "port": 2222}]


def test_generic_restart_and_cleanup_policy_are_parsed() -> None:
    job = job_of("generic-service")
    spec = job.spec.replica_specs[0]
    assert (spec.restart_policy.policy, spec.restart_policy.limit) == ("OnFailure", 50)
    assert framework_for(job).clean_up(job) == ("Unfinished", frozenset())
    assert job.spec.success_rules == [{"worker": [0]}]
    assert job.spec.failure_rules == [{"worker": [i]} for i in range(4)]


def test_generic_without_service_has_no_services_and_refuses_service_tokens() -> None:
    """§2.2: the service variables are available only when ``spec.service`` is set; without it a
    job has no Services, and a service variable (which would stay as text) is refused (issue 41)."""
    worker = replica("worker", 2, _tpl("main", env=[{"name": "PEER", "value": "$(rank)"}]))
    job = parse_job(helpers.job("GenericJob", "nosvc", {"replicaSpecs": [worker]}))
    objects = render(job, keygen=lambda: dict(FAKE_KEYS))
    assert of_kind(objects, "Service") == []
    assert env(ctr(one(objects, "Pod", "nosvc-worker-1")))["PEER"] == "1"
    peer = {"name": "PEER", "value": "$(service.worker[0].host):$(rank)"}
    with pytest.raises(ManifestError, match=r"env\[0\]\.value: \$\(service\.worker\[0\]\.host\) needs spec\.service"):
        parse_job(helpers.job("GenericJob", "nosvc", {"replicaSpecs": [replica("worker", 2, _tpl("main", env=[peer]))]}))


def test_generic_created_paused_makes_no_pods() -> None:
    """§1.5: a job created paused makes no pods; Services stay."""
    objects = render_manifest("generic-paused")
    assert of_kind(objects, "Pod") == []
    assert names(objects, "Service") == ["held-job-worker-0", "held-job-worker-1"]


# --------------------------------------------------------------------------- PyTorchTrainingJob (§3)


def test_pytorch_plain_python_gets_the_full_distributed_env() -> None:
    """§3.3: MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK without torchrun; worker-0 is master."""
    objects = render_manifest("pytorch-workers")
    ports = set()
    for i in range(4):
        pod = one(objects, "Pod", f"cifar-ddp-worker-{i}")
        values = env(ctr(pod, "pytorch"))
        assert values["MASTER_ADDR"] == "cifar-ddp-worker-0"
        assert values["RANK"] == str(i)
        assert values["WORLD_SIZE"] == "4"
        assert values["LOCAL_RANK"] == "0"
        ports.add(values["MASTER_PORT"])
        # The command is the user's, untouched.
        assert ctr(pod)["command"][:2] == ["python", "cifar/ddp_train.py"]
    assert len(ports) == 1
    port = int(ports.pop())
    master_svc = one(objects, "Service", "cifar-ddp-worker-0")
    assert port in [p["port"] for p in master_svc["spec"]["ports"]]


def test_pytorch_rank_follows_spec_order_and_master_first() -> None:
    """§3.3: RANK is the global index in replicaSpecs order; WORLD_SIZE all replicas."""
    objects = render_manifest("pytorch-master-worker-scheduler")
    # Torchrun mode: no RANK; check the same job without torchrun.
    job = job_of("pytorch-master-worker-scheduler")
    data = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    del data["spec"]["torchrunConfig"]
    plain = render(parse_job(data), keygen=lambda: dict(FAKE_KEYS))
    ranks = {p["metadata"]["name"]: env(ctr(p))["RANK"] for p in of_kind(plain, "Pod")}
    assert ranks == {"bert-finetune-master-0": "0", "bert-finetune-worker-0": "1", "bert-finetune-worker-1": "2"}
    assert {env(ctr(p))["WORLD_SIZE"] for p in of_kind(plain, "Pod")} == {"3"}
    assert {env(ctr(p))["MASTER_ADDR"] for p in of_kind(objects, "Pod")} == {"bert-finetune-master-0"}


def test_pytorch_tensorboard_named_like_the_job() -> None:
    """§1.9: a TensorBoard named after the job, its spec the job's tensorboardSpec verbatim."""
    objects = render_manifest("pytorch-workers")
    tb = one(objects, "TensorBoard", "cifar-ddp")
    assert tb["apiVersion"] == "tensorstack.dev/v1beta1"
    assert tb["spec"] == {
        "trainingLogFilesets": ["t9k://pvc/vision/cifar/runs/ddp/log"],
        "image": "example.registry/ml/tensorboard:2.12",
    }
    assert of_kind(render_manifest("pytorch-node-torchrun"), "TensorBoard") == []


def test_pytorch_restart_policy_exit_code_is_parsed() -> None:
    job = job_of("pytorch-workers")
    assert job.spec.replica_specs[0].restart_policy == "ExitCode"


def test_pytorch_hand_written_torchrun_keeps_command_and_gets_master_env() -> None:
    """EX-P3 / §3.3: no torchrunConfig; the user's torchrun uses $(MASTER_ADDR):$(MASTER_PORT),
    which Kubernetes expands only from container env, so both must be injected."""
    raw = (MANIFESTS / "pytorch-node-torchrun.yaml").read_text()
    assert "- torchrun \n" in raw and "- '2' \n" in raw, "the manifest keeps the trailing spaces"
    objects = render_manifest("pytorch-node-torchrun")
    expected_command = [
        "torchrun", "--nnodes", "2", "--nproc_per_node", "3", "--rdzv_backend", "c10d",
        "--rdzv_endpoint", "$(MASTER_ADDR):$(MASTER_PORT)", "--max_restarts", "5", "--role", "node",
        "fashion_train.py", "--ckpt", "weights.pt", "--log_dir", "tb", "--backend", "gloo",
    ]  # fmt: skip
    for i in range(2):
        pod = one(objects, "Pod", f"handrun-nodes-node-{i}")
        c = ctr(pod, "pytorch")
        assert c["command"] == expected_command
        assert "args" not in c
        values = env(c)
        assert values["MASTER_ADDR"] == "handrun-nodes-node-0"
        assert values["MASTER_PORT"].isdigit()
        assert values["RANK"] == str(i) and values["WORLD_SIZE"] == "2"


def test_pytorch_torchrun_config_builds_the_command() -> None:
    """§3.4: ``torchrun <torchrun_args> <script> <args>``; containers[0].command (python) ignored;
    only MASTER_ADDR/MASTER_PORT injected (§3.3, §7 #1)."""
    objects = render_manifest("pytorch-master-worker-scheduler")
    for pod in of_kind(objects, "Pod"):
        c = ctr(pod, "pytorch")
        argv = list(c["command"]) + list(c.get("args") or [])
        assert argv[0] == "torchrun"
        assert "python" not in argv
        assert argv[-5:] == ["finetune.py", "--epochs", "2", "--lr", "2e-5"]
        flags = argv[1:-5]
        assert "--nnodes=3" in flags
        assert "--nproc_per_node=4" in flags  # procPerNode: gpu -> the nvidia.com/gpu limit
        assert "--rdzv_backend=c10d" in flags
        assert "--rdzv_endpoint=$(MASTER_ADDR):$(MASTER_PORT)" in flags
        assert "--max_restarts=1" in flags
        assert "--monitor_interval=2" in flags  # extraOptions
        values = env(c)
        assert set(values) == {"MASTER_ADDR", "MASTER_PORT", "T9K_JOBS_RESTART_ATTEMPT"}
        assert values["MASTER_ADDR"] == "bert-finetune-master-0"


def test_pytorch_scheduler_pod_group_and_pod_labels() -> None:
    """§1.7: PodGroup named like the job with minMember = all replicas, queue and priority;
    pods carry group-name and queue labels and use the T9k scheduler."""
    objects = render_manifest("pytorch-master-worker-scheduler")
    pg = one(objects, "PodGroup", "bert-finetune")
    assert pg["apiVersion"] == "scheduler.tensorstack.dev/v1beta1"
    assert pg["spec"] == {"minMember": 3, "priority": 60, "queue": "gpu-a100"}
    for pod in of_kind(objects, "Pod"):
        labels = pod["metadata"]["labels"]
        assert labels["scheduler.tensorstack.dev/group-name"] == "bert-finetune"
        assert labels["scheduler.tensorstack.dev/queue"] == "gpu-a100"
        assert pod["spec"]["schedulerName"] == "t9k-scheduler"
    # Without a scheduler: no PodGroup and the default scheduler.
    plain = render_manifest("pytorch-workers")
    assert of_kind(plain, "PodGroup") == []
    assert all("schedulerName" not in p["spec"] for p in of_kind(plain, "Pod"))


@pytest.mark.parametrize("gang", ["native", "none"])
def test_pytorch_scheduler_on_a_cluster_without_t9k_scheduler(gang: str) -> None:
    """Issue 22: ``render --gang native`` shows the scheduling.k8s.io/v1beta1 PodGroup
    (gang.minCount = every replica, disruptionMode all) and pods joining it with schedulingGroup
    on the default scheduler; ``--gang none``: no PodGroup, the default scheduler. Neither
    carries T9k's queue or group-name labels."""
    objects = render(
        load_manifest(MANIFESTS / "pytorch-master-worker-scheduler.yaml"), keygen=lambda: dict(FAKE_KEYS), gang=gang  # type: ignore[arg-type]
    )
    if gang == "native":
        pg = one(objects, "PodGroup", "bert-finetune")
        assert pg["apiVersion"] == "scheduling.k8s.io/v1beta1"
        assert pg["spec"] == {
            "schedulingPolicy": {"gang": {"minCount": 3}},
            "disruptionMode": {"all": {}},
            "priorityClassName": "t9k-priority-60",
        }
    else:
        assert of_kind(objects, "PodGroup") == []
    pods = of_kind(objects, "Pod")
    assert len(pods) == 3
    for pod in pods:
        assert "schedulerName" not in pod["spec"]
        joined = pod["spec"].get("schedulingGroup")
        assert joined == ({"podGroupName": "bert-finetune"} if gang == "native" else None)
        assert pod["spec"].get("priorityClassName") == ("t9k-priority-60" if gang == "native" else None)
        labels = pod["metadata"]["labels"]
        assert "scheduler.tensorstack.dev/group-name" not in labels
        assert "scheduler.tensorstack.dev/queue" not in labels


def test_pytorch_debug_mode_defaults_for_an_unlisted_type() -> None:
    """§1.5 + EX-P5: debug replicaSpecs name another type, so `node` gets the defaults:
    command `sleep inf`, args emptied, init containers kept; debug wins over torchrun,
    the distributed env is still injected, GPU requests untouched."""
    objects = render_manifest("pytorch-debug")
    pod = one(objects, "Pod", "seg-debug-node-0")
    c = ctr(pod, "pytorch")
    assert c["command"] == ["sleep", "inf"]
    assert c["args"] == []
    assert [ic["name"] for ic in pod["spec"]["initContainers"]] == ["fetch-data"]
    assert set(env(c)) == {"MASTER_ADDR", "MASTER_PORT", "T9K_JOBS_RESTART_ATTEMPT"}
    assert env(c)["MASTER_ADDR"] == "seg-debug-node-0"
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert c["resources"]["requests"]["nvidia.com/gpu"] == 2
    assert names(objects, "Service") == ["seg-debug-node-0"]


def test_pytorch_debug_mode_for_a_listed_type() -> None:
    """§1.5: a listed type gets its own command and skipInitContainer."""
    job = job_of("pytorch-debug")
    data = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    data["spec"]["runMode"]["debug"]["replicaSpecs"][0]["type"] = "node"
    pod = one(render(parse_job(data), keygen=dict), "Pod", "seg-debug-node-0")
    assert ctr(pod, "pytorch")["command"] == ["sleep", "3600"]
    assert ctr(pod, "pytorch")["args"] == []
    assert "initContainers" not in pod["spec"]


def test_pytorch_elastic_replicas_split_by_weight() -> None:
    """§3.5: expectedReplicas (5) split 3:1 by scalingWeight (floor, remainder in spec order),
    torchrun --nnodes=min:max, PodGroup minMember = minReplicas; `enable` accepted (§1.10)."""
    job = job_of("pytorch-elastic")
    assert job.spec.elastic_enabled and job.spec.torchrun_enabled
    objects = render_manifest("pytorch-elastic")
    assert len(of_kind(objects, "Pod")) == 5
    assert one(objects, "PodGroup", "resnet-elastic")["spec"]["minMember"] == 2
    for pod in of_kind(objects, "Pod"):
        c = ctr(pod)
        argv = c["command"] + c["args"]
        assert argv[0] == "torchrun"
        assert "--nnodes=2:6" in argv
        assert argv[-3:] == ["-m", "resnet.train", "--resume"]
        assert env(c)["MASTER_ADDR"] == "resnet-elastic-trainer-0"


# --------------------------------------------------------------------------- DeepSpeedJob (§4)


def test_deepspeed_hostfile_and_env_file() -> None:
    """§4.3: hostfile ``<worker> slots=<slotsPerWorker>``; the env file ``NAME=VALUE`` per
    container env var, written by worker-0 from its own environment (valueFrom resolved)."""
    objects = render_manifest("deepspeed-gpt")
    cm = one(objects, "ConfigMap", "llm-350m-launch")
    assert cm["data"] == {"hostfile": "".join(f"llm-350m-worker-{i} slots=2\n" for i in range(3))}
    text = script(ctr(one(objects, "Pod", "llm-350m-worker-0"), "worker"))
    assert "/root/.deepspeed_env CUDA_DEVICE_MAX_CONNECTIONS NCCL_DEBUG" in text


def test_deepspeed_worker0_launches_and_others_run_sshd() -> None:
    """§4.2/§4.3: worker-0 runs ``deepspeed --hostfile=/t9k/hostfile --launcher=pdsh <run.python>``
    after sshd; the other workers run ``/usr/sbin/sshd -D`` (with ``-e``: its log in the pod's),
    after installing the keys where StrictModes accepts them."""
    objects = render_manifest("deepspeed-gpt")
    job = job_of("deepspeed-gpt")
    run_python = job.spec.config.run.python
    assert run_python[0] == "Megatron/pretrain_gpt.py" and len(run_python) == 32  # comments between items are not items
    w0 = ctr(one(objects, "Pod", "llm-350m-worker-0"), "worker")
    text = script(w0)
    assert w0["args"] == []
    assert text.startswith("install -d -m 700 /root/.ssh")
    assert "{ /usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys & }" in text
    assert "t9k_wait_sshd llm-350m-worker-0 llm-350m-worker-1 llm-350m-worker-2" in text
    assert "t9k_run deepspeed --hostfile=/t9k/hostfile --launcher=pdsh" in text
    launch = shlex.split(text[text.index("deepspeed --hostfile") :])
    assert launch == ["deepspeed", "--hostfile=/t9k/hostfile", "--launcher=pdsh", *run_python]
    assert "--no_local_rank" not in launch  # localRank: true
    for i in (1, 2):
        c = ctr(one(objects, "Pod", f"llm-350m-worker-{i}"), "worker")
        assert c["command"][:2] == ["/bin/sh", "-c"]
        assert "/usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys & t9k_sshd=$!" in script(c)
        assert "this worker is done" in script(c)  # it ends once its launcher is done with it
        assert c["args"] == []


def test_deepspeed_reserved_paths_are_mounted_on_every_worker() -> None:
    """§1.2/§4.2: the key Secret (copied into /root/.ssh), /t9k/hostfile, /root/.deepspeed_env."""
    objects = render_manifest("deepspeed-gpt")
    secret = one(objects, "Secret", "llm-350m-ssh")
    assert secret["stringData"] == FAKE_KEYS
    for pod in of_kind(objects, "Pod"):
        c = ctr(pod, "worker")
        m = mounts(c)
        assert volume(pod, m["/t9k/ssh"]["name"])["secret"]["secretName"] == "llm-350m-ssh"
        assert "/root/.ssh" not in m  # a Secret volume's modes fail sshd's StrictModes
        assert "install -m 600 \"$f\" /root/.ssh/" in script(c)
        cm_volume = volume(pod, m["/t9k/hostfile"]["name"])["configMap"]["name"]
        assert cm_volume == "llm-350m-launch"
        assert m["/t9k/hostfile"]["subPath"] == "hostfile"
        assert "/root/.deepspeed_env" not in m  # worker-0 writes it
        # The user's own mounts, capabilities and env stay.
        assert {"/t9k/mnt", "/dev/shm"} <= set(m)
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert env(c)["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    for svc in of_kind(objects, "Service"):
        assert [p["port"] for p in svc["spec"]["ports"]] == [22]


def test_deepspeed_legacy_spellings() -> None:
    """§1.10: slotPerWorker, scalar run.python, elastic `enable` (expectedReplicas decides, §4.7)."""
    job = job_of("deepspeed-legacy")
    assert job.spec.config.slots == 4
    assert job.spec.config.run.python == ["train.py", "--epochs", "3"]
    objects = render_manifest("deepspeed-legacy")
    assert names(objects, "Pod") == ["ds-legacy-worker-0", "ds-legacy-worker-1"]
    cm = one(objects, "ConfigMap", "ds-legacy-launch")
    assert cm["data"]["hostfile"] == "ds-legacy-worker-0 slots=4\nds-legacy-worker-1 slots=4\n"
    assert script(ctr(one(objects, "Pod", "ds-legacy-worker-0"), "trainer")).count("/root/.deepspeed_env PYTHONUNBUFFERED") == 1
    # The container is not named `worker`: container 0 is the training container (§4.2).
    text = script(ctr(one(objects, "Pod", "ds-legacy-worker-0"), "trainer"))
    assert text.endswith("t9k_run deepspeed --hostfile=/t9k/hostfile --launcher=pdsh train.py --epochs 3")
    assert script(ctr(one(objects, "Pod", "ds-legacy-worker-1"), "trainer")).count("/usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys & t9k_sshd=$!") == 1


def test_deepspeed_debug_default_is_sshd() -> None:
    """§1.5/§4.8: DeepSpeedJob's debug default is `/usr/sbin/sshd -D`, on worker-0 too (with the
    keys installed and /run/sshd made, so that it serves in a stock image)."""
    job = job_of("deepspeed-legacy")
    data = job.model_dump(by_alias=True, exclude_none=True, mode="json")
    data["spec"]["runMode"] = {"debug": {"enabled": True}}
    for pod in of_kind(render(parse_job(data), keygen=dict), "Pod"):
        c = ctr(pod, "trainer")
        assert script(c).endswith("exec /usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys")
        assert "mkdir -p -m 755 /run/sshd" in script(c) and c["args"] == []


# --------------------------------------------------------------------------- ColossalAIJob (§5)


def test_colossalai_launcher_runs_colossalai_run() -> None:
    """§5.2: launcher pod ``<job>-launcher`` runs ``colossalai run`` over the workers, with the
    worker command at the end; it is built from launcher.image/workingDir."""
    objects = render_manifest("colossalai-workers")
    pod = one(objects, "Pod", "cai-opt-launcher")
    c = ctr(pod, "launcher")
    assert c["image"] == "example.registry/ml/colossalai:0.3-opt"
    assert c["workingDir"] == "/workspace/ColossalAI/examples/language/opt"
    text = script(c)
    assert "colossalai run" in text
    launch = shlex.split(text[text.index("colossalai run") :])
    assert "--nproc_per_node=1" in launch
    assert "--hostfile=/t9k/hostfile" in launch
    assert "--master_addr=cai-opt-worker-0" in launch
    assert launch[-3:] == ["train_opt.py", "--plugin=gemini", "--synthetic=True"]
    assert not any(a.startswith("--extra_launch_args") for a in launch)  # torchArgs: []
    assert c["args"] == []
    assert mounts(c)["/t9k/ssh"]["name"] == "t9k-ssh"
    assert volume(pod, "t9k-ssh")["secret"]["secretName"] == "cai-opt-ssh"
    assert text.startswith("install -d -m 700 /root/.ssh")  # the client key, where ssh looks
    assert "t9k_wait_sshd cai-opt-worker-0 cai-opt-worker-1 cai-opt-worker-2 cai-opt-worker-3" in text
    assert " ssh " not in text  # colossalai speaks ssh itself: the wait needs no ssh client
    hostfile = one(objects, "ConfigMap", "cai-opt-launch")["data"]["hostfile"]
    assert hostfile.splitlines() == [f"cai-opt-worker-{i}" for i in range(4)]


def test_colossalai_workers_run_sshd_with_keys() -> None:
    """§5.2: workers run ``<sshdPath> -D`` (default /usr/sbin/sshd), their command ignored;
    keys installed at authMountPath (default /root/.ssh) from the Secret."""
    objects = render_manifest("colossalai-workers")
    for i in range(4):
        pod = one(objects, "Pod", f"cai-opt-worker-{i}")
        c = ctr(pod, "worker")
        assert script(c).count("/usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys & t9k_sshd=$!") == 1
        assert c["args"] == []
        assert volume(pod, mounts(c)["/t9k/ssh"]["name"])["secret"]["secretName"] == "cai-opt-ssh"
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert one(objects, "Secret", "cai-opt-ssh")["stringData"] == FAKE_KEYS


def test_colossalai_clean_up_workers() -> None:
    """§1.6/§5.5: cleanUpWorkers true (or "all") deletes workers, never the launcher."""
    for name in ("colossalai-workers", "colossalai-legacy"):
        job = job_of(name)
        assert framework_for(job).clean_up(job) == ("All", frozenset({"launcher"}))


def test_colossalai_legacy_form() -> None:
    """§5.5 legacy schema + §1.10: torchConfig + replicaSpecs, sshAuthMountPath, sshdPath."""
    objects = render_manifest("colossalai-legacy")
    launcher = ctr(one(objects, "Pod", "cai-legacy-launcher"), "launcher")
    assert launcher["image"] == "example.registry/ml/colossalai:0.2-vit"
    launch = shlex.split(script(launcher)[script(launcher).index("colossalai run") :])
    assert "--nproc_per_node=2" in launch
    assert launch[-3:] == ["vit_train.py", "--config", "vit.py"]
    assert script(launcher).startswith("install -d -m 700 /home/trainer/.ssh")
    for i in range(2):
        c = ctr(one(objects, "Pod", f"cai-legacy-worker-{i}"), "worker")
        assert script(c).count("/usr/local/sbin/sshd -D -e -o AuthorizedKeysFile=/home/trainer/.ssh/authorized_keys & t9k_sshd=$!") == 1
        assert "install -d -m 700 /home/trainer/.ssh" in script(c) and "/root/.ssh" not in script(c)


def test_colossalai_scheduler_keeps_launcher_out_of_the_pod_group() -> None:
    """§1.7 (§7 #19): minMember = workers; the launcher uses the queue but not the PodGroup."""
    job = parse_job(
        helpers.job(
            "ColossalAIJob",
            "cq",
            {
                "scheduler": {"t9kScheduler": {"queue": "research", "priority": 7}},
                "worker": {"replicas": 3, "command": ["t.py"], "template": _tpl("worker")},
            },
        )
    )
    objects = render(job, keygen=dict)
    assert one(objects, "PodGroup", "cq")["spec"] == {"minMember": 3, "priority": 7, "queue": "research"}
    launcher = one(objects, "Pod", "cq-launcher")["metadata"]["labels"]
    assert launcher["scheduler.tensorstack.dev/queue"] == "research"
    assert "scheduler.tensorstack.dev/group-name" not in launcher
    for i in range(3):
        labels = one(objects, "Pod", f"cq-worker-{i}")["metadata"]["labels"]
        assert labels["scheduler.tensorstack.dev/group-name"] == "cq"


# --------------------------------------------------------------------------- regressions
# Bugs found while writing these tests (fixed in src since): keep them fixed.

# go-yaml v2 (kubectl, sigs.k8s.io/yaml) reads a plain scalar matching this as a float.
_GO_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


def test_to_yaml_quotes_strings_that_other_yaml_parsers_read_as_numbers() -> None:
    objects = render_manifest("pytorch-master-worker-scheduler")
    text = to_yaml(objects)
    # Strings PyYAML (YAML 1.1) does not see as numbers, so it emits them unquoted.
    risky = sorted({s for s in _strings(objects) if _GO_YAML_FLOAT.match(s) and isinstance(yaml.safe_load(s), str)})
    assert "2e-5" in risky
    unquoted = [s for s in risky if re.search(rf"(^|: |- ){re.escape(s)}$", text, flags=re.M)]
    assert unquoted == [], f"emitted as plain scalars (numbers for go-yaml): {unquoted}"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_pytorch_rank_zero_is_the_master_addr_pod() -> None:
    specs = [replica("worker", 2, _tpl(command=["python", "t.py"])), replica("master", 1, _tpl(command=["python", "t.py"]))]
    job = parse_job(helpers.job("PyTorchTrainingJob", "late-master", {"replicaSpecs": specs}))
    for pod in of_kind(render(job, keygen=dict), "Pod"):
        values = env(ctr(pod))
        if values["RANK"] == "0":
            assert pod["metadata"]["name"] == values["MASTER_ADDR"]


def _weighted(name: str, max_replicas: int, expected: int, **weights: int) -> dict[str, Any]:
    """An elastic PyTorchTrainingJob of a master and a worker type without counts; ``weights``
    gives a type's scalingWeight (left out for a type not named)."""
    specs = []
    for t in ("master", "worker"):
        weight = {"scalingWeight": weights[t]} if t in weights else {}
        specs.append(replica(t, None, _tpl(args=["t.py"]), **weight))
    elastic = {"enabled": True, "minReplicas": 1, "maxReplicas": max_replicas, "expectedReplicas": expected}
    spec = {"torchrunConfig": {"enabled": True}, "elastic": elastic, "replicaSpecs": specs}
    return helpers.job("PyTorchTrainingJob", name, spec)


def test_pytorch_elastic_never_exceeds_expected_replicas() -> None:
    job = parse_job(_weighted("zero-weight", 4, 4, master=0))
    assert len(of_kind(render(job, keygen=dict), "Pod")) <= 4


def test_colossalai_torch_args_with_separate_values() -> None:
    worker = {"replicas": 1, "command": ["t.py"], "torchArgs": ["--max_restarts", "3"], "template": _tpl("worker")}
    job = parse_job(helpers.job("ColossalAIJob", "ta", {"worker": worker}))
    text = script(ctr(one(render(job, keygen=dict), "Pod", "ta-launcher"), "launcher"))
    extra = next(a for a in shlex.split(text) if a.startswith("--extra_launch_args="))
    assert extra == "--extra_launch_args=max_restarts=3"


def test_to_yaml_quotes_every_number_or_bool_lookalike() -> None:
    """Strings that go-yaml (kubectl) or YAML 1.1 would type as numbers/booleans stay strings."""
    lookalikes = ["2e-5", "1e3", "1E+3", "-1e-3", "0o17", "0x1F", "1.", ".5", "12", "1_000", "3.0",
                  "yes", "on", "NO", "~", "null", "true", "1:30"]  # fmt: skip
    text = to_yaml([{"args": [*lookalikes, "plain", "--lr=2e-5"]}])
    assert yaml.safe_load(text)["args"] == [*lookalikes, "plain", "--lr=2e-5"]
    for value in lookalikes:
        assert re.search(rf"^- {re.escape(value)}$", text, flags=re.M) is None, f"{value!r} is unquoted:\n{text}"
    assert "- plain\n" in text and "- --lr=2e-5\n" in text


# --------------------------------------------------------------------------- torchrun details (§3.4, §3.5)


def _torchrun_job(container: dict[str, Any], **torchrun: Any) -> dict[str, Any]:
    return helpers.job(
        "PyTorchTrainingJob",
        "tr",
        {"torchrunConfig": {"enabled": True, **torchrun}, "replicaSpecs": [replica("worker", 1, _tpl(**container))]},
    )


@pytest.mark.parametrize(
    ("container", "script"),
    [
        ({"command": ["python", "train.py", "--lr", "0.1"]}, ["train.py", "--lr", "0.1"]),
        ({"command": ["python3"], "args": ["train.py"]}, ["train.py"]),
        ({"command": ["train.py", "--x"]}, ["train.py", "--x"]),
    ],
)
def test_torchrun_reads_the_script_before_replacing_the_command(container: dict[str, Any], script: list[str]) -> None:
    """§3.4: the script comes from ``args``, or from ``command`` less a leading python; it was
    read after the command had become ``torchrun`` (the pod ran ``torchrun <flags> torchrun``)."""
    pod = one(render(parse_job(_torchrun_job(container)), keygen=dict), "Pod", "tr-worker-0")
    c = ctr(pod)
    assert c["command"] == ["torchrun"]
    assert c["args"][-len(script):] == script
    assert "torchrun" not in c["args"]


@pytest.mark.parametrize(("value", "flag"), [(4, "4"), ("2", "2"), ("auto", "auto"), ("cpu", "cpu"), ("gpu", "3")])
def test_proc_per_node_takes_what_torchrun_takes(value: Any, flag: str) -> None:
    """``procPerNode``: a count, ``cpu`` and ``auto`` go to torchrun as they are; ``gpu`` is the
    container's ``nvidia.com/gpu`` limit (here 3)."""
    doc = _torchrun_job({"command": ["python", "t.py"], "resources": {"limits": {"nvidia.com/gpu": 3}}},
                        procPerNode=value)  # fmt: skip
    pod = one(render(parse_job(doc), keygen=dict), "Pod", "tr-worker-0")
    assert f"--nproc_per_node={flag}" in ctr(pod)["args"]


@pytest.mark.parametrize("value", ["0", "many", "-1", "1.5", ""])
def test_proc_per_node_refuses_what_torchrun_refuses(value: str) -> None:
    with pytest.raises(Exception, match="procPerNode"):
        parse_job(_torchrun_job({"command": ["python", "t.py"]}, procPerNode=value))


def test_replicas_left_over_go_to_the_largest_remainders() -> None:
    """§3.5: 4 replicas by weights 1:2 are exactly 1.33 and 2.67: 1 and 3 (the remainder went to
    the first type before, giving 2 and 2)."""
    pods = names(render(parse_job(_weighted("w", 8, 4, master=1, worker=2)), keygen=dict), "Pod")
    assert sorted(pods) == ["w-master-0", "w-worker-0", "w-worker-1", "w-worker-2"]
