"""What a job wants to exist (:mod:`t9k_jobs.engine.desired`): pod names, labels and spec
[§1.2, §1.3], the env and command each framework gives its replicas [§2.2, §3.3, §3.4, §4.2,
§5.2], the PodGroup [§1.7] and TensorBoard [§1.9] children, and children brought back to their
desired hash.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.api import ManifestError
from t9k_jobs.engine import reconcile

from .jobs import colossalai, ctr, deepspeed, generic, pytorch, tmpl
from .sim import Sim, created_pods, started


def test_pods_are_named_job_type_index():
    sim = Sim(pytorch([("master", 1), ("worker", 3)], name="mnist"))
    plan = sim.step()
    assert created_pods(plan) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"]


def test_colossalai_launcher_pod_has_no_index():
    sim = Sim(colossalai(2, name="cai"))
    plan = sim.step()
    assert sorted(created_pods(plan)) == ["cai-launcher", "cai-worker-0", "cai-worker-1"]


def test_pod_labels_of_reference_1_3():
    sim = Sim(generic([("master", 1), ("worker", 2)], name="job-test"))
    sim.step()
    labels = sim.pod("job-test-worker-1")["metadata"]["labels"]
    assert labels["tensorstack.dev/owner-name"] == "job-test"
    assert labels["tensorstack.dev/owner-kind"] == "GenericJob"
    assert labels["tensorstack.dev/component"] == "genericjob"
    assert labels["tensorstack.dev/component-type"] == "user"
    assert labels["genericjob"] == "job-test"
    assert labels["genericjob-replica"] == "job-test-worker-1"
    assert labels["scheduler.tensorstack.dev/role"] == "worker"
    assert sim.pod("job-test-master-0")["metadata"]["labels"]["scheduler.tensorstack.dev/role"] == "master"


def test_pytorch_pods_carry_owner_name_label():
    sim = Sim(pytorch(name="torch-mnist"))
    sim.step()
    for name in sim.pods:
        assert sim.pod(name)["metadata"]["labels"]["tensorstack.dev/owner-name"] == "torch-mnist"
        assert sim.pod(name)["metadata"]["labels"]["tensorstack.dev/owner-kind"] == "PyTorchTrainingJob"


def test_pods_are_owned_by_the_job():
    sim = Sim(pytorch(name="j"))
    sim.step()
    refs = sim.pod("j-master-0")["metadata"]["ownerReferences"]
    assert (
        refs[0]["kind"] == "PyTorchTrainingJob" and refs[0]["name"] == "j" and refs[0]["controller"] is True
    )


@pytest.mark.parametrize(
    "manifest",
    [pytorch(), generic(), deepspeed(), colossalai()],
    ids=["pytorch", "generic", "deepspeed", "colossalai"],
)
def test_every_pod_has_restart_policy_never(manifest):
    sim = Sim(manifest)
    plan = sim.step()
    assert created_pods(plan)
    for name in created_pods(plan):
        assert sim.pod(name)["spec"]["restartPolicy"] == "Never", name


def test_pytorch_env_without_torchrun_ranks_in_spec_order():
    sim = Sim(pytorch([("ps", 1), ("worker", 4)], name="ps-job"))
    sim.step()
    envs = {n: sim.env(n) for n in sim.pods}
    ranks = {n: envs[n]["RANK"] for n in envs}
    assert ranks == {
        "ps-job-ps-0": "0",
        "ps-job-worker-0": "1",
        "ps-job-worker-1": "2",
        "ps-job-worker-2": "3",
        "ps-job-worker-3": "4",
    }
    for env in envs.values():
        assert env["MASTER_ADDR"] == "ps-job-ps-0"
        assert env["WORLD_SIZE"] == "5"
        assert env["LOCAL_RANK"] == "0"
        assert env["MASTER_PORT"].isdigit()
    assert len({env["MASTER_PORT"] for env in envs.values()}) == 1


def test_pytorch_master_port_is_exposed_by_master_service():
    sim = Sim(pytorch(name="j"))
    plan = sim.step()
    services = {o["metadata"]["name"]: o for o in plan.create if o["kind"] == "Service"}
    port = int(sim.env("j-worker-1")["MASTER_PORT"])
    assert port in [p["port"] for p in services["j-master-0"]["spec"]["ports"]]


def test_pytorch_type_named_master_is_master_even_if_not_first():
    sim = Sim(pytorch([("worker", 2), ("master", 1)], name="j"))
    sim.step()
    assert sim.env("j-worker-0")["MASTER_ADDR"] == "j-master-0"


def test_pytorch_keeps_the_users_command_without_torchrun():
    sim = Sim(pytorch(name="j"))
    sim.step()
    c = sim.container("j-worker-0")
    assert c["command"] == ["python"] and c["args"] == ["train.py", "--epochs=1"]


TORCHRUN = {"enabled": True, "procPerNode": 4, "maxRestarts": 2, "extraOptions": ["--monitor_interval=5"]}


def test_torchrun_command_and_flags():
    sim = Sim(pytorch([("node", 3)], name="tr", torchrunConfig=TORCHRUN))
    sim.step()
    c = sim.container("tr-node-1")
    assert c["command"] == ["torchrun"]
    args = c["args"]
    assert args[:4] == [
        "--nnodes=3",
        "--nproc_per_node=4",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=$(MASTER_ADDR):$(MASTER_PORT)",
    ]
    assert "--max_restarts=2" in args
    assert "--monitor_interval=5" in args
    assert args[-2:] == ["train.py", "--epochs=1"]
    assert args.index("--max_restarts=2") < args.index("train.py")
    assert "python" not in args


def test_torchrun_injects_master_addr_but_not_rank():
    sim = Sim(pytorch([("node", 3)], name="tr", torchrunConfig=TORCHRUN))
    sim.step()
    env = sim.env("tr-node-2")
    assert env["MASTER_ADDR"] == "tr-node-0" and env["MASTER_PORT"].isdigit()
    assert not {"RANK", "WORLD_SIZE", "LOCAL_RANK"} & set(env)


def test_torchrun_proc_per_node_gpu_reads_the_gpu_limit():
    t = tmpl(ctr(args=["train.py"], resources={"limits": {"nvidia.com/gpu": 8}}))
    sim = Sim(
        pytorch([("node", 2)], name="tr", template=t, torchrunConfig={"enabled": True, "procPerNode": "gpu"})
    )
    sim.step()
    assert "--nproc_per_node=8" in sim.container("tr-node-0")["args"]


def test_container_named_pytorch_is_the_training_container_even_if_not_first():
    t = tmpl(ctr("sidecar", command=["sleep", "inf"]), ctr("pytorch", command=["python"], args=["t.py"]))
    sim = Sim(pytorch([("node", 2)], name="tr", template=t, torchrunConfig={"enabled": True}))
    sim.step()
    assert sim.container("tr-node-0", "pytorch")["command"] == ["torchrun"]
    assert sim.container("tr-node-0", "pytorch")["args"][-1] == "t.py"
    assert sim.container("tr-node-0", "sidecar")["command"] == ["sleep", "inf"]
    assert "MASTER_ADDR" in sim.env("tr-node-0", "pytorch")
    assert "MASTER_ADDR" not in sim.env("tr-node-0", "sidecar")


def test_users_own_env_value_wins():
    t = tmpl(ctr(command=["python", "t.py"], env={"MASTER_PORT": "1234"}))
    sim = Sim(pytorch([("master", 1)], name="j", template=t))
    sim.step()
    env = sim.container("j-master-0")["env"]
    assert [e["value"] for e in env if e["name"] == "MASTER_PORT"] == ["1234"]


SUBST = tmpl(
    ctr(
        "main",
        command=["run", "--type=$(type)", "--rank=$(rank)"],
        args=["--n=$(replicas[worker])", "--peer=$(service.worker[1].host):$(service.port[http])", "$(FOO)"],
        env={"ME": "$(service.$(type)[0].host)", "PORT": "$(service.port[http])", "HOME_DIR": "$(HOME)"},
    )
)


def test_genericjob_substitutes_variables_with_service():
    m = generic(
        [("master", 1), ("worker", 3)],
        name="g",
        template=SUBST,
        service={"ports": [{"name": "http", "port": 2222}]},
    )
    sim = Sim(m)
    sim.step()
    c = sim.container("g-worker-2")
    assert c["command"] == ["run", "--type=worker", "--rank=2"]
    assert c["args"] == ["--n=3", "--peer=g-worker-1:2222", "$(FOO)"]
    assert sim.env("g-worker-2")["PORT"] == "2222"
    assert sim.env("g-worker-2")["HOME_DIR"] == "$(HOME)"
    assert sim.container("g-master-0")["command"] == ["run", "--type=master", "--rank=0"]


def test_genericjob_service_variables_refused_without_service():
    """§2.2: service variables exist only with ``spec.service``; without it they would stay as
    text, so the job is refused where they are (issue 41)."""
    with pytest.raises(ManifestError, match=r"args\[1\]: \$\(service\.worker\[1\]\.host\) needs spec\.service"):
        Sim(generic([("worker", 2)], name="g", template=SUBST))


def test_genericjob_service_per_replica_with_declared_ports():
    m = generic([("worker", 2)], name="g", service={"ports": [{"name": "http", "port": 2222}]})
    plan = Sim(m).step()
    services = {o["metadata"]["name"]: o for o in plan.create if o["kind"] == "Service"}
    assert sorted(services) == ["g-worker-0", "g-worker-1"]
    assert services["g-worker-1"]["spec"]["ports"][0]["port"] == 2222
    assert services["g-worker-1"]["spec"]["selector"] == {"genericjob-replica": "g-worker-1"}


def test_genericjob_unknown_replica_type_or_rank_refused():
    for token, said in (("$(replicas[nope])", "names no replica type"), ("$(service.worker[5].host)", "names rank 5")):
        t = tmpl(ctr("main", command=["x", token]))
        with pytest.raises(ManifestError, match=said):
            Sim(generic([("worker", 2)], name="g", template=t, service={"ports": [{"name": "http", "port": 1}]}))


def test_deepspeed_worker0_runs_deepspeed_and_others_sshd():
    sim = Sim(deepspeed(2, name="ds"))
    sim.step()
    assert "deepspeed --hostfile=/t9k/hostfile" in " ".join(sim.container("ds-worker-0", "worker")["command"])
    assert sim.container("ds-worker-1", "worker")["command"][-1].count("/usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys & t9k_sshd=$!") == 1


def test_colossalai_workers_run_sshd_and_launcher_runs_colossalai():
    sim = Sim(colossalai(2, name="cai"))
    sim.step()
    assert sim.container("cai-worker-1", "worker")["command"][-1].count("/usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys & t9k_sshd=$!") == 1
    assert "colossalai run" in " ".join(sim.container("cai-launcher", "launcher")["command"])


def test_t9k_scheduler_pod_group_and_pod_fields():
    m = pytorch(
        [("ps", 1), ("worker", 4)],
        name="job-sample",
        scheduler={"t9kScheduler": {"queue": "default", "priority": 10}},
    )
    sim = Sim(m)
    plan = sim.step()
    pgs = [o for o in plan.create if o["kind"] == "PodGroup"]
    assert len(pgs) == 1
    pg = pgs[0]
    assert pg["apiVersion"] == "scheduler.tensorstack.dev/v1beta1"
    assert pg["metadata"]["name"] == "job-sample"
    assert pg["metadata"]["ownerReferences"][0]["name"] == "job-sample"
    assert pg["spec"] == {"minMember": 5, "priority": 10, "queue": "default"}
    for name in created_pods(plan):
        pod = sim.pod(name)
        assert pod["spec"]["schedulerName"] == "t9k-scheduler"
        assert pod["metadata"]["labels"]["scheduler.tensorstack.dev/group-name"] == "job-sample"
        assert pod["metadata"]["labels"]["scheduler.tensorstack.dev/queue"] == "default"


def test_pod_group_is_created_once():
    m = pytorch(name="j", scheduler={"t9kScheduler": {"queue": "q"}})
    sim = Sim(m)
    sim.step()
    plan = sim.step()
    assert [o for o in plan.create if o["kind"] == "PodGroup"] == []


def test_no_scheduler_no_pod_group():
    sim = Sim(pytorch(name="j"))
    plan = sim.step()
    assert not [o for o in plan.create if o["kind"] == "PodGroup"]
    assert "schedulerName" not in sim.pod("j-master-0")["spec"]
    assert "scheduler.tensorstack.dev/group-name" not in sim.pod("j-master-0")["metadata"]["labels"]


def test_colossalai_pod_group_counts_workers_and_launcher_only_queues():
    sim = Sim(colossalai(3, name="cai", scheduler={"t9kScheduler": {"queue": "q1", "priority": 5}}))
    plan = sim.step()
    pg = next(o for o in plan.create if o["kind"] == "PodGroup")
    assert pg["spec"] == {"minMember": 3, "priority": 5, "queue": "q1"}
    launcher = sim.pod("cai-launcher")["metadata"]["labels"]
    worker = sim.pod("cai-worker-0")["metadata"]["labels"]
    assert launcher["scheduler.tensorstack.dev/queue"] == "q1"
    assert "scheduler.tensorstack.dev/group-name" not in launcher
    assert worker["scheduler.tensorstack.dev/group-name"] == "cai"


def test_pytorch_tensorboard_child_named_like_the_job():
    tb = {"trainingLogFilesets": ["t9k://pvc/logs/run1"], "image": "tensorflow/tensorflow:2.11.0"}
    sim = Sim(pytorch(name="j", tensorboardSpec=tb))
    plan = sim.step()
    boards = [o for o in plan.create if o["kind"] == "TensorBoard"]
    assert len(boards) == 1
    assert boards[0]["apiVersion"] == "tensorstack.dev/v1beta1"
    assert boards[0]["metadata"]["name"] == "j"
    assert boards[0]["spec"] == tb
    assert [o for o in sim.step().create if o["kind"] == "TensorBoard"] == []


def test_an_unserved_kind_is_never_planned():
    tb = {"trainingLogFilesets": ["t9k://pvc/logs/run1"]}
    sim = Sim(pytorch(name="j", tensorboardSpec=tb))
    plan = reconcile(sim.job, sim.observed(), sim.now, replace(sim.runtime(), unserved=frozenset({"TensorBoard"})))
    assert [o for o in plan.create if o["kind"] == "TensorBoard"] == []


def test_a_child_that_drifted_is_updated_and_one_without_a_desired_hash_too():
    """Children whose desired hash differs from the wanted one (edited by hand, or made by an
    older operator without one) are brought back; Secrets (unreadable) are never updated."""
    sim = started(deepspeed(2, name="ds"))
    sim.others[("ConfigMap", "ds-launch")] = {**sim.others[("ConfigMap", "ds-launch")], "metadata": {"name": "ds-launch"}}
    plan = sim.step()
    assert [o["metadata"]["name"] for o in plan.update] == ["ds-launch"]
    assert sim.step().update == []
