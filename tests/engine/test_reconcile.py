"""Unit tests of ``reconcile``: one behaviour of the T9k job semantics each.

Every test drives :class:`Sim` (the in-memory runtime in ``sim.py``) with a small manifest
from ``jobs.py`` and checks the pods it creates or deletes and the status it writes.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from t9k_jobs.engine import ContainerState, reconcile
from t9k_jobs.engine.reconcile import UNFINISHED_GRACE, rfc3339

from .jobs import colossalai, ctr, deepspeed, generic, pytorch, tmpl
from .sim import T0, Sim


def created_pods(plan) -> list[str]:
    return [o["metadata"]["name"] for o in plan.create if o["kind"] == "Pod"]


def deleted_pods(plan) -> list[str]:
    return [d.name for d in plan.delete if d.kind == "Pod"]


def started(manifest, **kw) -> Sim:
    """A job whose pods all exist and run."""
    sim = Sim(manifest, **kw)
    sim.settle(start="Running")
    sim.step()
    return sim


# ====================================================================== names, labels, pod spec


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


# ====================================================================== PyTorch env and torchrun


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


# ====================================================================== GenericJob substitution

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


def test_genericjob_service_variables_untouched_without_service():
    sim = Sim(generic([("worker", 2)], name="g", template=SUBST))
    plan = sim.step()
    c = sim.container("g-worker-1")
    assert c["command"] == ["run", "--type=worker", "--rank=1"]
    assert c["args"] == ["--n=2", "--peer=$(service.worker[1].host):$(service.port[http])", "$(FOO)"]
    assert sim.env("g-worker-1")["PORT"] == "$(service.port[http])"
    assert not [o for o in plan.create if o["kind"] == "Service"]


def test_genericjob_service_per_replica_with_declared_ports():
    m = generic([("worker", 2)], name="g", service={"ports": [{"name": "http", "port": 2222}]})
    plan = Sim(m).step()
    services = {o["metadata"]["name"]: o for o in plan.create if o["kind"] == "Service"}
    assert sorted(services) == ["g-worker-0", "g-worker-1"]
    assert services["g-worker-1"]["spec"]["ports"][0]["port"] == 2222
    assert services["g-worker-1"]["spec"]["selector"] == {"genericjob-replica": "g-worker-1"}


def test_genericjob_unknown_replica_type_or_rank_untouched():
    t = tmpl(ctr("main", command=["x", "$(replicas[nope])", "$(service.worker[5].host)"]))
    sim = Sim(
        generic([("worker", 2)], name="g", template=t, service={"ports": [{"name": "http", "port": 1}]})
    )
    sim.step()
    assert sim.container("g-worker-0")["command"] == ["x", "$(replicas[nope])", "$(service.worker[5].host)"]


# ====================================================================== restart policies


def test_onfailure_restarts_a_failed_pod_with_the_same_name():
    sim = started(pytorch(policy="OnFailure", backoff=3, name="j"))
    old_uid = sim.pods["j-worker-1"].uid
    sim.fail("j-worker-1", 1)
    plan = sim.step()
    assert deleted_pods(plan) == ["j-worker-1"]
    assert created_pods(plan) == []
    assert sim.status.backoff_count == 1
    assert sim.status.task("worker").restart_count == 1
    assert sim.status.task("master").restart_count == 0
    assert sim.replica("j-worker-1").phase == "Creating"
    plan = sim.step()
    assert created_pods(plan) == ["j-worker-1"]
    assert sim.pods["j-worker-1"].uid != old_uid
    assert sim.status.phase == "Running"
    assert sim.status.backoff_count == 1
    assert sim.replica("j-worker-1").restart_count == 1


def test_never_does_not_restart_a_failed_pod():
    sim = started(pytorch(policy="Never", name="j"))
    sim.fail("j-worker-1", 1)
    plan = sim.step()
    plan2 = sim.step()
    assert deleted_pods(plan) == deleted_pods(plan2) == []
    assert created_pods(plan) == created_pods(plan2) == []
    assert sim.status.backoff_count == 0
    assert sim.replica("j-worker-1").phase == "Failed"
    assert sim.status.phase == "Running"


@pytest.mark.parametrize("code", [137, 130, 143, 138])
def test_exitcode_policy_restarts_retryable_codes(code):
    sim = started(pytorch(policy="ExitCode", name="j"))
    sim.fail("j-worker-0", code)
    plan = sim.step()
    assert deleted_pods(plan) == ["j-worker-0"]
    assert sim.status.backoff_count == 1


@pytest.mark.parametrize("code", [1, 2, 139])
def test_exitcode_policy_does_not_restart_other_codes(code):
    sim = started(pytorch(policy="ExitCode", name="j"))
    sim.fail("j-worker-0", code)
    plan = sim.step()
    assert deleted_pods(plan) == []
    assert sim.status.backoff_count == 0
    assert sim.replica("j-worker-0").phase == "Failed"


def test_exitcode_policy_reads_the_training_container_code():
    t = tmpl(ctr("sidecar"), ctr("pytorch", command=["python", "t.py"]))
    sim = started(pytorch(policy="ExitCode", name="j", template=t))
    pod = sim.pods["j-worker-0"]
    # The sidecar died with 1, the training container was killed with 137: retryable.
    sim.pods["j-worker-0"] = replace(
        pod,
        phase="Failed",
        containers=(ContainerState("sidecar", "Terminated", 1), ContainerState("pytorch", "Terminated", 137)),
    )
    assert deleted_pods(sim.step()) == ["j-worker-0"]


def test_onfailure_does_not_restart_a_succeeded_pod():
    sim = started(pytorch(policy="OnFailure", name="j"))
    sim.succeed("j-worker-0")
    plan = sim.step()
    assert deleted_pods(plan) == [] and sim.status.backoff_count == 0
    assert sim.replica("j-worker-0").phase == "Succeeded"


def test_always_restarts_a_succeeded_pod():
    sim = started(pytorch(policy="Always", name="j"))
    sim.succeed("j-master-0")
    plan = sim.step()
    assert deleted_pods(plan) == ["j-master-0"]
    assert sim.status.phase == "Running"
    assert sim.status.backoff_count == 1
    assert created_pods(sim.step()) == ["j-master-0"]


def test_backoff_limit_is_shared_by_all_replicas():
    sim = started(pytorch([("master", 1), ("worker", 3)], policy="OnFailure", backoff=2, name="j"))
    sim.fail("j-worker-0")
    sim.settle()
    sim.fail("j-worker-1")
    sim.settle()
    assert sim.status.backoff_count == 2
    assert sim.status.task("worker").restart_count == 2
    # Both restarts are used up: worker-2 failing is final, and so is the master.
    sim.fail("j-worker-2")
    plan = sim.step()
    assert deleted_pods(plan) == [] and sim.status.backoff_count == 2
    assert sim.replica("j-worker-2").phase == "Failed"
    assert sim.status.phase == "Running"
    sim.fail("j-master-0", 3)
    sim.step()
    assert sim.status.phase == "Failed"
    assert sim.status.backoff_count == 2


def test_backoff_limit_counts_failures_in_the_same_pass():
    sim = started(pytorch([("master", 1), ("worker", 3)], policy="OnFailure", backoff=2, name="j"))
    for i in range(3):
        sim.fail(f"j-worker-{i}")
    plan = sim.step()
    assert len(deleted_pods(plan)) == 2
    assert sim.status.backoff_count == 2


def test_backoff_limit_zero_never_restarts():
    sim = started(pytorch(policy="OnFailure", backoff=0, name="j"))
    sim.fail("j-master-0", 137)
    plan = sim.step()
    assert deleted_pods(plan) == []
    assert sim.status.phase == "Failed"


def test_default_backoff_limit_is_3():
    sim = started(pytorch([("master", 1)], policy="OnFailure", name="j"))
    for _ in range(3):
        sim.fail("j-master-0")
        sim.settle()
    assert sim.status.backoff_count == 3 and sim.status.phase == "Running"
    sim.fail("j-master-0")
    sim.step()
    assert sim.status.phase == "Failed"


def test_genericjob_limit_is_per_replica():
    sim = started(
        generic(
            [("worker", 2)],
            name="g",
            policy="OnFailure",
            limit=1,
            successRules=[{"worker": [0, 1]}],
            failureRules=[{"worker": [0, 1]}],
        )
    )
    sim.fail("g-worker-0")
    sim.settle()
    assert sim.replica("g-worker-0").restart_count == 1
    assert sim.status.task("worker").restart_count == 1
    # worker-0 used its one restart; worker-1 still has its own.
    sim.fail("g-worker-0")
    assert deleted_pods(sim.step()) == []
    sim.fail("g-worker-1")
    assert deleted_pods(sim.step()) == ["g-worker-1"]
    sim.settle()
    assert sim.status.task("worker").restart_count == 2
    sim.fail("g-worker-1")
    sim.step()
    assert sim.status.phase == "Failed"


def test_genericjob_default_limit_zero_does_not_restart():
    sim = started(generic([("worker", 2)], name="g", policy="OnFailure"))
    sim.fail("g-worker-0")
    plan = sim.step()
    assert deleted_pods(plan) == []


# ====================================================================== success and failure


def test_pytorch_master_success_ends_the_job_while_workers_run():
    sim = started(pytorch(name="j"))
    sim.succeed("j-master-0")
    sim.step()
    assert sim.status.phase == "Succeeded"
    assert sim.pods["j-worker-0"].phase == "Running"


def test_pytorch_master_failure_for_good_fails_the_job():
    sim = started(pytorch(policy="Never", name="j"))
    sim.fail("j-master-0", 3)
    sim.step()
    assert sim.status.phase == "Failed"
    assert "j-master-0 failed with exit code 3" in sim.condition("Failed").message
    assert sim.condition("Failed").message.startswith("PyTorchTrainingJob j has failed")


def test_pytorch_worker_failure_for_good_does_not_end_the_job():
    sim = started(pytorch(policy="Never", name="j"))
    sim.fail("j-worker-0", 1)
    sim.step()
    sim.step()
    assert sim.status.phase == "Running"
    assert sim.condition("ReplicaFailure").status == "True"
    assert "j-worker-0 failed with exit code 1" in sim.condition("ReplicaFailure").message


def test_pytorch_master_retryable_failure_does_not_end_the_job():
    sim = started(pytorch(policy="OnFailure", name="j"))
    sim.fail("j-master-0", 1)
    sim.step()
    assert sim.status.phase == "Running"


def test_genericjob_success_rule():
    sim = started(generic([("master", 1), ("worker", 2)], name="g", successRules=[{"master": [0]}]))
    sim.succeed("g-worker-0")
    sim.step()
    assert sim.status.phase == "Running"
    sim.succeed("g-master-0")
    sim.step()
    assert sim.status.phase == "Succeeded"


def test_genericjob_failure_rule_spanning_types_with_string_ranks():
    m = generic(
        [("master", 3), ("worker", 2)],
        name="g",
        policy="Never",
        failureRules=[{"master": ["2"], "worker": ["0", 1]}],
        successRules=[{"master": [0]}],
    )
    sim = started(m)
    sim.fail("g-master-2")
    sim.fail("g-worker-0")
    sim.step()
    assert sim.status.phase == "Running"
    sim.fail("g-worker-1")
    sim.step()
    assert sim.status.phase == "Failed"
    assert sim.condition("Failed").message.startswith("The job is failed with rule:")


def test_genericjob_success_rule_spanning_types():
    m = generic([("master", 1), ("worker", 2)], name="g", successRules=[{"master": [0], "worker": ["1"]}])
    sim = started(m)
    sim.succeed("g-master-0")
    sim.step()
    assert sim.status.phase == "Running"
    sim.succeed("g-worker-1")
    sim.step()
    assert sim.status.phase == "Succeeded"


def test_genericjob_failure_rules_are_checked_before_success_rules():
    m = generic(
        [("worker", 2)],
        name="g",
        policy="Never",
        successRules=[{"worker": [0]}],
        failureRules=[{"worker": [1]}],
    )
    sim = started(m)
    sim.succeed("g-worker-0")
    sim.fail("g-worker-1")
    sim.step()
    assert sim.status.phase == "Failed"


def test_genericjob_succeeded_replica_under_always_does_not_count():
    sim = started(
        generic([("worker", 1)], name="g", policy="Always", limit=5, successRules=[{"worker": [0]}])
    )
    sim.succeed("g-worker-0")
    plan = sim.step()
    assert sim.status.phase == "Running"
    assert deleted_pods(plan) == ["g-worker-0"]


def test_genericjob_rule_on_replica_that_can_still_restart_is_not_met():
    sim = started(generic([("worker", 1)], name="g", limit=1, failureRules=[{"worker": [0]}]))
    sim.fail("g-worker-0")
    sim.step()
    assert sim.status.phase == "Running"


def test_deepspeed_worker0_decides_success():
    sim = started(deepspeed(3, name="ds"))
    sim.succeed("ds-worker-1")
    sim.step()
    assert sim.status.phase == "Running"
    sim.succeed("ds-worker-0")
    sim.step()
    assert sim.status.phase == "Succeeded"


def test_deepspeed_retryable_failure_restarts_all_workers_with_one_backoff():
    sim = started(deepspeed(3, name="ds", backoff=3))
    uids = {n: p.uid for n, p in sim.pods.items()}
    sim.fail("ds-worker-2", 137)
    plan = sim.step()
    assert sorted(deleted_pods(plan)) == ["ds-worker-0", "ds-worker-1", "ds-worker-2"]
    assert sim.status.backoff_count == 1
    assert sim.status.phase == "Running"
    plan = sim.step(start="Running")
    assert sorted(created_pods(plan)) == ["ds-worker-0", "ds-worker-1", "ds-worker-2"]
    assert all(sim.pods[n].uid != uids[n] for n in uids)
    assert sim.status.backoff_count == 1


def test_deepspeed_worker0_failure_for_good_fails_the_job():
    sim = started(deepspeed(2, name="ds", backoff=0))
    sim.fail("ds-worker-0", 137)
    sim.step()
    assert sim.status.phase == "Failed"
    assert "ds-worker-0 failed with exit code 137" in sim.condition("Failed").message


def test_deepspeed_worker0_runs_deepspeed_and_others_sshd():
    sim = Sim(deepspeed(2, name="ds"))
    sim.step()
    assert "deepspeed --hostfile=/t9k/hostfile" in " ".join(sim.container("ds-worker-0", "worker")["command"])
    assert sim.container("ds-worker-1", "worker")["command"][-1].count("/usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys & t9k_sshd=$!") == 1


def test_colossalai_launcher_decides():
    sim = started(colossalai(2, name="cai"))
    sim.succeed("cai-launcher")
    sim.step()
    assert sim.status.phase == "Succeeded"
    sim = started(colossalai(2, name="cai"))
    sim.fail("cai-launcher", 1)
    sim.step()
    assert sim.status.phase == "Failed"


def test_colossalai_never_restarts_anything():
    sim = started(colossalai(2, name="cai"))
    sim.fail("cai-worker-0", 137)
    sim.vanish("cai-worker-1")
    plan = sim.step()
    plan2 = sim.step()
    assert created_pods(plan) == created_pods(plan2) == []
    assert deleted_pods(plan) == deleted_pods(plan2) == []
    assert sim.status.backoff_count == 0
    # Every worker has ended while the launcher waits: nothing can train any more.
    assert sim.status.phase == "Failed"
    assert "every worker ended before the launcher" in sim.condition("Failed").message


def test_colossalai_one_dead_worker_leaves_the_decision_to_the_launcher():
    sim = started(colossalai(2, name="cai"))
    sim.fail("cai-worker-0", 255)
    sim.step()
    assert sim.status.phase == "Running"
    sim.fail("cai-launcher", 1)
    sim.step()
    assert sim.status.phase == "Failed" and "cai-launcher failed with exit code 1" in sim.condition("Failed").message


def test_colossalai_launcher_deleted_externally_fails_the_job():
    sim = started(colossalai(2, name="cai"))
    sim.vanish("cai-launcher")
    plan = sim.step()
    assert created_pods(plan) == []
    assert sim.status.phase == "Failed"


def test_colossalai_workers_run_sshd_and_launcher_runs_colossalai():
    sim = Sim(colossalai(2, name="cai"))
    sim.step()
    assert sim.container("cai-worker-1", "worker")["command"][-1].count("/usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys & t9k_sshd=$!") == 1
    assert "colossalai run" in " ".join(sim.container("cai-launcher", "launcher")["command"])


# ====================================================================== pause, resume, debug


def pause(sim: Sim, enabled: bool, resume_specs=None) -> None:
    p = {"enabled": enabled}
    if resume_specs is not None:
        p["resumeSpecs"] = resume_specs
    sim.edit(runMode={"pause": p})


def test_pause_deletes_pods_and_sets_paused():
    sim = started(pytorch(name="j"))
    pause(sim, True)
    plan = sim.step()
    assert sorted(deleted_pods(plan)) == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert sim.status.phase == "Paused"
    assert sim.condition("Paused").status == "True"
    assert sim.pods == {}
    plan = sim.step()
    assert created_pods(plan) == []
    assert sim.status.phase == "Paused"


def test_job_created_paused_makes_no_pods():
    sim = Sim(pytorch(name="j", runMode={"pause": {"enabled": True}}))
    plan = sim.step()
    assert created_pods(plan) == []
    assert sim.status.phase == "Paused"


def test_resume_goes_through_resuming_and_applies_resume_specs():
    sim = started(pytorch(name="j"))
    specs = [{"type": "worker", "command": ["python", "-u"], "args": ["resume.py"]}]
    pause(sim, True, specs)
    sim.step()
    pause(sim, False, specs)
    plan = sim.step()
    assert sorted(created_pods(plan)) == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert sim.status.phase == "Resuming"
    assert sim.container("j-worker-1")["command"] == ["python", "-u"]
    assert sim.container("j-worker-1")["args"] == ["resume.py"]
    assert sim.container("j-master-0")["command"] == ["python"]
    assert sim.container("j-master-0")["args"] == ["train.py", "--epochs=1"]
    sim.run_all()
    sim.step()
    assert sim.status.phase == "Running"
    assert sim.condition("Paused").status == "False"


def test_pause_does_not_reset_backoff():
    sim = started(pytorch(name="j"))
    sim.fail("j-worker-0")
    sim.settle()
    pause(sim, True)
    sim.step()
    pause(sim, False)
    sim.settle()
    assert sim.status.backoff_count == 1


def test_pausing_a_finished_job_is_a_no_op():
    sim = started(pytorch(name="j"))
    sim.succeed("j-master-0")
    sim.step()
    pause(sim, True)
    plan = sim.step()
    assert deleted_pods(plan) == []
    assert sim.status.phase == "Succeeded"


def test_debug_replaces_training_command_keeps_env():
    sim = Sim(pytorch(name="j", torchrunConfig={"enabled": True}, runMode={"debug": {"enabled": True}}))
    sim.step()
    c = sim.container("j-worker-0")
    assert c["command"] == ["sleep", "inf"]
    assert c["args"] == []
    assert sim.env("j-worker-0")["MASTER_ADDR"] == "j-master-0"


def test_debug_without_torchrun_still_injects_rank():
    sim = Sim(pytorch(name="j", runMode={"debug": {"enabled": True}}))
    sim.step()
    assert sim.container("j-worker-1")["command"] == ["sleep", "inf"]
    assert sim.env("j-worker-1")["RANK"] == "2"


def test_debug_command_per_type():
    debug = {"enabled": True, "replicaSpecs": [{"type": "worker", "command": ["bash", "-c", "sleep 1d"]}]}
    sim = Sim(pytorch(name="j", runMode={"debug": debug}))
    sim.step()
    assert sim.container("j-worker-0")["command"] == ["bash", "-c", "sleep 1d"]
    assert sim.container("j-master-0")["command"] == ["sleep", "inf"]


def test_debug_deepspeed_default_is_sshd():
    sim = Sim(deepspeed(2, name="ds", runMode={"debug": {"enabled": True}}))
    sim.step()
    for n in ("ds-worker-0", "ds-worker-1"):
        # Debug mode: sshd is the main process, with no watch that would end the worker.
        assert sim.container(n, "worker")["command"][-1].endswith(
            "exec /usr/sbin/sshd -D -e -o AuthorizedKeysFile=/root/.ssh/authorized_keys"
        )
        assert sim.container(n, "worker")["args"] == []


def test_debug_genericjob_default_is_sleep_inf():
    sim = Sim(generic(name="g", runMode={"debug": {"enabled": True}}))
    sim.step()
    assert sim.container("g-worker-0")["command"] == ["sleep", "inf"]


def test_debug_mode_never_decides_or_restarts():
    sim = started(pytorch(name="j", policy="OnFailure", runMode={"debug": {"enabled": True}}))
    sim.fail("j-master-0", 1)
    sim.succeed("j-worker-0")
    plan = sim.step()
    assert deleted_pods(plan) == [] and created_pods(plan) == []
    assert sim.status.phase == "Running"
    assert sim.status.backoff_count == 0
    sim.step()
    assert sim.status.phase == "Running"


# ====================================================================== clean-up


def finish_with_mixed_pods(m) -> tuple[Sim, object]:
    """master succeeds while worker-0 has succeeded and worker-1 still runs."""
    sim = started(m)
    sim.succeed("j-worker-0")
    sim.step()
    sim.succeed("j-master-0")
    return sim, sim.step()


@pytest.mark.parametrize(
    "policy, deleted",
    [
        ("All", ["j-master-0", "j-worker-0", "j-worker-1"]),
        ("Unfinished", ["j-worker-1"]),
        ("None", []),
    ],
)
def test_clean_up_policy_after_success(policy, deleted):
    m = pytorch(name="j", runPolicy={"cleanUpPolicy": policy})
    sim, plan = finish_with_mixed_pods(m)
    assert sim.status.phase == "Succeeded"
    if policy == "Unfinished":
        # Replicas still running get UNFINISHED_GRACE seconds to end by themselves first.
        assert deleted_pods(plan) == [] and plan.requeue_after == pytest.approx(UNFINISHED_GRACE, abs=1)
        assert not plan.finished
        sim.tick(UNFINISHED_GRACE)
        plan = sim.step()
    assert sorted(deleted_pods(plan)) == deleted
    assert sim.live() == sorted({"j-master-0", "j-worker-0", "j-worker-1"} - set(deleted))


def test_unfinished_clean_up_keeps_a_replica_that_ends_during_the_grace():
    """Ranks that end together reach the runtime a moment apart: the one seen second keeps its result."""
    sim, plan = finish_with_mixed_pods(pytorch(name="j", runPolicy={"cleanUpPolicy": "Unfinished"}))
    assert deleted_pods(plan) == []
    sim.tick(1)
    sim.succeed("j-worker-1")
    plan = sim.step()
    assert deleted_pods(plan) == [] and plan.finished
    assert sim.replica("j-worker-1").phase == "Succeeded"
    assert sim.status.aggregate.succeeded == 3


def test_clean_up_policy_defaults_to_none():
    _, plan = finish_with_mixed_pods(pytorch(name="j"))
    assert deleted_pods(plan) == []


def test_genericjob_clean_up_policy_all():
    sim = started(generic([("worker", 2)], name="g", cleanUpPolicy="All", successRules=[{"worker": [0]}]))
    sim.succeed("g-worker-0")
    plan = sim.step()
    assert sim.status.phase == "Succeeded"
    assert sorted(deleted_pods(plan)) == ["g-worker-0", "g-worker-1"]


def test_clean_up_keeps_services():
    m = pytorch(name="j", runPolicy={"cleanUpPolicy": "All"})
    sim, plan = finish_with_mixed_pods(m)
    assert [d for d in plan.delete if d.kind != "Pod"] == []
    assert ("Service", "j-master-0") in sim.others


@pytest.mark.parametrize("clean, deleted", [(True, ["cai-worker-0", "cai-worker-1"]), (False, [])])
def test_colossalai_clean_up_workers_spares_the_launcher(clean, deleted):
    sim = started(colossalai(2, name="cai", runPolicy={"cleanUpWorkers": clean}))
    sim.succeed("cai-launcher")
    plan = sim.step()
    assert sim.status.phase == "Succeeded"
    assert sorted(deleted_pods(plan)) == deleted
    assert "cai-launcher" in sim.pods


# ====================================================================== deadline


def test_active_deadline_fails_the_job_and_deletes_running_pods():
    sim = Sim(pytorch(name="j", runPolicy={"activeDeadlineSeconds": 100}))
    sim.settle(start="Running")
    plan = sim.step()
    assert sim.status.phase == "Running"
    assert plan.requeue_after == pytest.approx(100)
    sim.succeed("j-worker-0")
    sim.tick(60)
    plan = sim.step()
    assert sim.status.phase == "Running"
    assert plan.requeue_after == pytest.approx(40)
    sim.tick(40)
    plan = sim.step()
    assert sim.status.phase == "Failed"
    assert sorted(deleted_pods(plan)) == ["j-master-0", "j-worker-1"]
    failed = sim.condition("Failed")
    assert failed.status == "True" and failed.reason == "DeadlineExceeded"
    assert sim.condition("Completed").status == "True"


def test_deadline_counts_from_start_time_even_when_no_pod_starts():
    """The API: activeDeadlineSeconds is relative to startTime, which the first pass that acts on
    the job sets (as Kubernetes' Job controller); a job stuck Pending times out too."""
    sim = Sim(pytorch(name="j", runPolicy={"activeDeadlineSeconds": 100}))
    plan = sim.step()  # pods created, never scheduled
    assert sim.status.start_time == rfc3339(sim.now)
    assert plan.requeue_after == pytest.approx(100)
    sim.tick(99)
    plan = sim.step()
    assert sim.status.phase == "Pending" and plan.requeue_after == pytest.approx(1)
    sim.tick(1)
    plan = sim.step()
    assert sim.status.phase == "Failed"
    assert sim.condition("Failed").reason == "DeadlineExceeded"
    assert sorted(deleted_pods(plan)) == ["j-master-0", "j-worker-0", "j-worker-1"]


def test_a_pause_stops_the_deadline_clock_and_a_resume_restarts_it():
    """As a suspended Kubernetes Job: pausing clears startTime, resuming sets it anew."""
    sim = started(pytorch(name="j", runPolicy={"activeDeadlineSeconds": 100}))
    sim.tick(90)
    pause(sim, True)
    sim.step()
    assert sim.status.phase == "Paused" and sim.status.start_time is None
    sim.settle(start=None)
    sim.tick(1000)
    pause(sim, False)
    sim.step()
    assert sim.status.start_time == rfc3339(sim.now)
    sim.run_all()
    sim.step()
    assert sim.status.phase == "Running"
    sim.tick(99)
    sim.step()
    assert sim.status.phase == "Running"
    sim.tick(1)
    sim.step()
    assert sim.status.phase == "Failed"


# ====================================================================== external deletion


def test_external_deletion_under_onfailure_recreates_and_counts_backoff():
    sim = started(pytorch(name="j", policy="OnFailure"))
    sim.vanish("j-worker-0")
    plan = sim.step()
    plan = plan if created_pods(plan) else sim.step()
    assert created_pods(plan) == ["j-worker-0"]
    assert sim.status.backoff_count == 1
    assert sim.status.task("worker").restart_count == 1
    assert sim.status.phase == "Running"
    assert any(e.reason == "ReplicaDeleted" for p in sim.plans for e in p.events)


def test_external_deletion_under_never_is_final():
    sim = started(pytorch(name="j", policy="Never"))
    sim.vanish("j-worker-0")
    plan = sim.step()
    assert created_pods(plan) == [] and created_pods(sim.step()) == []
    assert sim.replica("j-worker-0").phase == "Deleted"
    assert sim.status.phase == "Running"
    sim.vanish("j-master-0")
    sim.step()
    assert sim.status.phase == "Failed"
    assert sim.replica("j-master-0").phase == "Deleted"


def test_external_deletion_after_the_job_ended_is_ignored():
    sim = started(pytorch(name="j", policy="OnFailure"))
    sim.succeed("j-master-0")
    sim.step()
    sim.vanish("j-worker-0")
    plan = sim.step()
    assert created_pods(plan) == []
    assert sim.status.phase == "Succeeded" and sim.status.backoff_count == 0


def test_unscheduled_pods_are_left_alone():
    sim = Sim(pytorch(name="j"))
    sim.step()
    for _ in range(4):
        plan = sim.step()
        assert plan.create == [] and plan.delete == []
    assert sim.status.phase == "Pending"
    assert sim.status.aggregate.creating == 3


def test_the_pass_that_starts_the_job_asks_to_look_again_at_its_deadline():
    """The runtime needs no further event to enforce activeDeadlineSeconds."""
    sim = Sim(pytorch(name="j", runPolicy={"activeDeadlineSeconds": 30}))
    sim.step()
    for name in list(sim.pods):
        sim.run(name)
    plan = sim.step()
    assert sim.status.phase == "Running" and sim.status.start_time
    assert plan.requeue_after == pytest.approx(30, abs=1)


def test_pods_scheduled_after_a_pass_are_kept():
    """Found on the real control plane: a pod recorded as Creating while unscheduled that then
    gets scheduled is the same new pod, not a replica being replaced (Creating with a uid is
    the restart marker, so an unscheduled pod is recorded without one)."""
    sim = Sim(pytorch(name="j"))
    sim.step()  # created, unscheduled
    sim.step()
    assert {(rs.phase, rs.uid) for t in sim.status.tasks for rs in t.replicas} == {("Creating", "")}
    assert sim.status.condition("Initialized").status == "True", "the pods exist: the job is initialized"
    for name in list(sim.pods):
        sim.run(name)
    plan = sim.step()
    assert plan.delete == [] and plan.create == []
    assert sim.status.phase == "Running" and sim.status.aggregate.running == 3


def test_pod_failing_before_it_was_seen_scheduled_is_restarted_once():
    """Found on the real control plane: a replacement pod that fails before any pass saw it
    scheduled is judged like any ended pod (one more restart), not taken for the pod replaced."""
    sim = Sim(pytorch([("master", 1), ("worker", 1)], name="j", runPolicy={"backoffLimit": 1}))
    sim.settle()
    sim.fail("j-master-0")
    sim.step()  # restart: counted, old pod deleted
    sim.step()  # the replacement is created, unscheduled
    assert sim.status.backoff_count == 1
    sim.step()
    sim.fail("j-master-0")  # fails straight from unscheduled
    plan = sim.step()
    assert created_pods(plan) == []
    assert sim.status.phase == "Failed", "backoffLimit 1 is used up: the master's second failure ends the job"
    assert sim.status.backoff_count == 1


# ====================================================================== elastic


def elastic_job(expected, *, weights=(1, 2), lo=2, hi=12):
    m = pytorch(
        [("a", 1), ("b", 1)],
        name="el",
        torchrunConfig={"enabled": True},
        elastic={"enabled": True, "minReplicas": lo, "maxReplicas": hi, "expectedReplicas": expected},
    )
    for spec, w in zip(m["spec"]["replicaSpecs"], weights):
        spec["scalingWeight"] = w
    return m


def test_elastic_splits_expected_replicas_by_scaling_weight():
    plan = Sim(elastic_job(6)).step()
    assert sorted(created_pods(plan)) == ["el-a-0", "el-a-1", "el-b-0", "el-b-1", "el-b-2", "el-b-3"]


def test_elastic_expected_is_clamped_to_max():
    plan = Sim(elastic_job(100, weights=(1, 1), hi=4)).step()
    assert len(created_pods(plan)) == 4


def test_elastic_torchrun_nnodes_is_min_max():
    sim = Sim(elastic_job(6, lo=2, hi=12))
    sim.step()
    assert sim.container("el-b-0")["args"][0] == "--nnodes=2:12"


def test_elastic_scale_up_creates_next_indices():
    sim = Sim(
        pytorch(
            [("worker", 1)],
            name="el",
            torchrunConfig={"enabled": True},
            elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 8, "expectedReplicas": 3},
        )
    )
    sim.settle()
    sim.step()
    assert sim.live() == ["el-worker-0", "el-worker-1", "el-worker-2"]
    sim.edit(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 8, "expectedReplicas": 5})
    plan = sim.step()
    assert sorted(created_pods(plan)) == ["el-worker-3", "el-worker-4"]
    assert deleted_pods(plan) == []


def test_elastic_scale_down_deletes_highest_indices():
    sim = Sim(
        pytorch(
            [("worker", 1)],
            name="el",
            torchrunConfig={"enabled": True},
            elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 8, "expectedReplicas": 5},
        )
    )
    sim.settle()
    sim.step()
    sim.edit(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 8, "expectedReplicas": 3})
    plan = sim.step()
    assert sorted(deleted_pods(plan)) == ["el-worker-3", "el-worker-4"]
    assert created_pods(plan) == []
    assert sim.live() == ["el-worker-0", "el-worker-1", "el-worker-2"]
    assert sum(sim.status.aggregate.dump().values()) == 3
    assert sim.status.backoff_count == 0
    assert sim.status.phase == "Running"


def test_elastic_pod_group_min_member_is_min_replicas():
    m = elastic_job(6, lo=3, hi=12)
    m["spec"]["scheduler"] = {"t9kScheduler": {"queue": "q1"}}
    plan = Sim(m).step()
    pg = next(o for o in plan.create if o["kind"] == "PodGroup")
    assert pg["spec"]["minMember"] == 3


# ====================================================================== scheduler


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


# ====================================================================== status


def conditions(sim: Sim) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in sim.status.conditions]


def test_phase_pending_until_all_pods_exist_and_one_runs():
    sim = Sim(pytorch(name="j"))
    sim.step()
    assert sim.status.phase == "Pending"
    sim.schedule("j-master-0")
    sim.step()
    assert sim.status.phase == "Pending"
    sim.run("j-worker-0")
    sim.step()
    assert sim.status.phase == "Running"
    assert sim.status.start_time is not None
    assert sim.condition("Running").status == "True"


def test_status_on_success_matches_the_captured_dump():
    sim = started(pytorch(name="j"))
    sim.succeed("j-master-0")
    sim.step()
    assert sim.status.phase == "Succeeded"
    assert conditions(sim) == [
        ("Initialized", "True", "-"),
        ("Running", "False", "Succeeded"),
        ("Failed", "False", "Succeeded"),
        ("Completed", "True", "Succeeded"),
        ("ReplicaFailure", "False", "-"),
    ]
    assert sim.condition("Completed").message == "The job has finished successfully."
    assert sim.condition("Initialized").message == "The job has been initialized successfully."
    assert sim.condition("ReplicaFailure").message == "All pods are running normally."
    assert sim.status.completion_time is not None


def test_status_on_failure_matches_the_captured_dump():
    sim = started(deepspeed(2, name="baichuan2-sft", backoff=0))
    sim.fail("baichuan2-sft-worker-0", 137)
    sim.step()
    assert sim.status.phase == "Failed"
    assert conditions(sim) == [
        ("Initialized", "True", "-"),
        ("Running", "False", "Failed"),
        ("Failed", "True", "Failed"),
        ("Completed", "True", "Failed"),
        ("ReplicaFailure", "True", "Failed"),
    ]
    msg = "DeepSpeedJob baichuan2-sft has failed: baichuan2-sft-worker-0 failed with exit code 137"
    assert sim.condition("Failed").message == msg
    assert sim.condition("Running").message == msg


def test_status_tasks_record_replicas_and_training_container():
    sim = started(pytorch(name="j"))
    sim.succeed("j-master-0")
    sim.step()
    master = sim.replica("j-master-0")
    assert master.phase == "Succeeded" and master.uid == sim.pods["j-master-0"].uid
    assert [(c.name, c.state, c.exit_code) for c in master.containers] == [("pytorch", "Terminated", 0)]
    assert [t.type for t in sim.status.tasks] == ["master", "worker"]
    assert [r.name for r in sim.status.task("worker").replicas] == ["j-worker-0", "j-worker-1"]


def test_aggregate_sums_to_desired_replicas():
    sim = Sim(pytorch([("master", 1), ("worker", 3)], name="j", policy="OnFailure"))
    sim.step()
    agg = sim.status.aggregate
    assert (agg.creating, sum(agg.dump().values())) == (4, 4)
    sim.run("j-master-0")
    sim.schedule("j-worker-0")
    sim.run("j-worker-1")
    sim.fail("j-worker-2")
    sim.step()
    agg = sim.status.aggregate
    assert sum(agg.dump().values()) == 4
    assert (agg.running, agg.pending, agg.creating) == (2, 1, 1)  # worker-2 is being restarted
    sim.step()
    sim.succeed("j-master-0")
    sim.step()
    assert sum(sim.status.aggregate.dump().values()) == 4
    assert sim.status.aggregate.succeeded == 1


def test_observed_generation_is_recorded():
    m = pytorch(name="j")
    m["metadata"]["generation"] = 7
    sim = Sim(m)
    sim.step()
    assert sim.status.observed_generation == 7


# ====================================================================== terminal and idempotent


@pytest.mark.parametrize("end", ["succeed", "fail"])
def test_terminal_phase_stays_terminal(end):
    sim = started(pytorch(name="j", policy="Never"))
    getattr(sim, end)("j-master-0")
    sim.step()
    phase = sim.status.phase
    conds = conditions(sim)
    assert phase in ("Succeeded", "Failed")
    sim.fail("j-worker-0", 137)
    sim.succeed("j-worker-1")
    sim.vanish("j-master-0")
    for _ in range(3):
        sim.tick(1000)
        plan = sim.step()
        assert created_pods(plan) == []
        assert sim.status.phase == phase
        assert conditions(sim) == conds


def test_finished_plan_is_finished():
    sim = started(pytorch(name="j"))
    sim.succeed("j-master-0")
    sim.step()
    assert sim.step().finished


def world_states():
    """Sims at various interesting points of a job's life."""
    out = []
    sim = Sim(pytorch(name="j", runPolicy={"activeDeadlineSeconds": 500}))
    out.append(copy.deepcopy(sim))  # nothing yet
    sim.step()
    out.append(copy.deepcopy(sim))  # created, unscheduled
    sim.run_all()
    out.append(copy.deepcopy(sim))  # running, status not yet updated
    sim.step()
    sim.fail("j-worker-1", 137)
    out.append(copy.deepcopy(sim))  # a failure to handle
    sim.step()
    out.append(copy.deepcopy(sim))  # a restart under way
    sim.succeed("j-master-0")
    out.append(copy.deepcopy(sim))  # a success to handle
    sim.step()
    out.append(copy.deepcopy(sim))  # finished
    return out


@pytest.mark.parametrize("i", range(7))
def test_reconcile_is_idempotent(i):
    sim = world_states()[i]
    a = reconcile(sim.job, sim.observed(), sim.now)
    b = reconcile(sim.job, sim.observed(), sim.now)
    assert a.create == b.create
    assert a.delete == b.delete
    assert a.status == b.status
    assert a.events == b.events
    assert a.requeue_after == b.requeue_after


@pytest.mark.parametrize("i", range(7))
def test_reconcile_converges_to_a_fixed_point(i):
    sim = world_states()[i]
    plan = sim.settle(start=None)
    assert not plan.create and not plan.delete
    again = sim.plan()
    assert again.create == [] and again.delete == []
    assert again.status == sim.status


def test_reconcile_does_not_mutate_its_inputs():
    sim = world_states()[3]
    job_before = sim.job.model_copy(deep=True)
    pods_before = dict(sim.pods)
    reconcile(sim.job, sim.observed(), sim.now)
    assert sim.job == job_before
    assert sim.pods == pods_before


def test_reconcile_uses_the_given_clock_only():
    sim = world_states()[0]
    plan = reconcile(sim.job, sim.observed(), T0 + 5)
    assert plan.status.start_time == "2023-11-14T22:13:25Z"


def test_resume_waits_for_paused_pods_to_terminate():
    sim = started(pytorch(name="j", policy="Never"), graceful=True)
    pause(sim, True)
    sim.step()
    assert sim.status.phase == "Paused" and all(p.deleting for p in sim.pods.values())
    sim.fail("j-master-0", 143)  # exits on SIGTERM while terminating: not a failure to act on
    pause(sim, False)
    plan = sim.step()  # the old pods are still terminating
    assert created_pods(plan) == []
    assert sim.status.phase == "Resuming"
    sim.gc()
    plan = sim.step()
    assert sorted(created_pods(plan)) == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert sim.status.phase == "Resuming"
    assert sim.status.backoff_count == 0
    sim.run_all()
    sim.step()
    assert sim.status.phase == "Running"


def test_elastic_remainder_goes_to_the_first_specs():
    plan = Sim(elastic_job(5, weights=(1, 1))).step()
    assert sorted(created_pods(plan)) == ["el-a-0", "el-a-1", "el-a-2", "el-b-0", "el-b-1"]


def preempt(sim: Sim, name: str, code: int = 143) -> None:
    """Someone else deletes a running pod with a grace period; it exits on SIGTERM."""
    sim.pods[name] = replace(sim.pods[name], deleting=True)
    sim.fail(name, code)


def test_pod_preempted_with_grace_period_is_restarted_under_onfailure():
    sim = started(pytorch(name="j", policy="OnFailure"), graceful=True)
    preempt(sim, "j-master-0")
    plan = sim.step()
    assert created_pods(plan) == [] and sim.status.phase == "Running"
    assert sim.status.backoff_count == 1
    sim.gc()
    plan = sim.step()
    assert created_pods(plan) == ["j-master-0"]
    assert sim.status.phase == "Running"


def test_pod_preempted_with_grace_period_is_final_under_never():
    sim = started(pytorch(name="j", policy="Never"), graceful=True)
    preempt(sim, "j-master-0")
    sim.step()
    assert sim.status.phase == "Failed"
    assert "j-master-0 failed with exit code 143" in sim.condition("Failed").message


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


def test_status_tensorboard_follows_the_tensorboard():
    """§1.9: status.tensorboard says whether the TensorBoard is being created, there, or ready."""
    tb = {"trainingLogFilesets": ["t9k://pvc/logs/run1"]}
    sim = Sim(pytorch(name="j", tensorboardSpec=tb))
    plan = sim.plan()
    first = plan.status.tensorboard
    assert first is not None and (first.action, first.ready, first.reason) == ("Create", False, "DependentCreating")
    assert first.dependent == {"apiVersion": "tensorstack.dev/v1beta1", "kind": "TensorBoard", "name": "j",
                               "namespace": "demo"}  # fmt: skip
    sim.step()  # creates it; the next pass sees it
    sim.step()
    assert (sim.status.tensorboard.reason, sim.status.tensorboard.ready) == ("DependentNotReady", False)
    ready = reconcile(sim.job, replace(sim.observed(), ready=frozenset({("TensorBoard", "j")})), sim.now)
    board = ready.status.tensorboard
    assert (board.action, board.ready, board.reason, board.type) == ("NOP", True, "DependentReady", "Normal")
    assert board.note == "TensorBoard [j] is ready"
    unserved = reconcile(sim.job, replace(sim.observed(), unserved=frozenset({"TensorBoard"})), sim.now)
    assert (unserved.status.tensorboard.type, unserved.status.tensorboard.reason) == ("Warning", "DependentUnavailable")
    assert Sim(pytorch(name="n")).plan().status.tensorboard is None


def test_an_unserved_kind_is_never_planned():
    tb = {"trainingLogFilesets": ["t9k://pvc/logs/run1"]}
    sim = Sim(pytorch(name="j", tensorboardSpec=tb))
    plan = reconcile(sim.job, replace(sim.observed(), unserved=frozenset({"TensorBoard"})), sim.now)
    assert [o for o in plan.create if o["kind"] == "TensorBoard"] == []


def test_deepspeed_exitcode_policy_restarts_all_only_for_retryable_codes():
    sim = started(deepspeed(2, name="ds", policy="ExitCode"))
    sim.fail("ds-worker-1", 1)
    assert deleted_pods(sim.step()) == []
    sim = started(deepspeed(2, name="ds", policy="ExitCode"))
    sim.fail("ds-worker-1", 138)
    assert sorted(deleted_pods(sim.step())) == ["ds-worker-0", "ds-worker-1"]


def test_deepspeed_elastic_scale_up_reaches_the_launcher():
    """§4.7: a new expectedReplicas rewrites the hostfile and relaunches worker-0 (the launcher),
    without counting a restart; the other workers keep running."""
    elastic = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 2}
    sim = started(deepspeed(2, name="ds", elastic=elastic))
    worker1 = sim.pods["ds-worker-1"].uid
    sim.edit(elastic={**elastic, "expectedReplicas": 3})
    plan = sim.step()
    assert [o["metadata"]["name"] for o in plan.update] == ["ds-launch"]
    assert deleted_pods(plan) == ["ds-worker-0"]
    assert any(e.reason == "RelaunchingReplica" for e in plan.events)
    sim.settle()
    assert "ds-worker-2" in sim.others[("ConfigMap", "ds-launch")]["data"]["hostfile"]
    assert "ds-worker-2" in " ".join(sim.container("ds-worker-0", "worker")["command"])
    assert sim.pods["ds-worker-1"].uid == worker1
    assert sim.status.backoff_count == 0 and sim.status.phase == "Running"
    assert all(rs.restart_count == 0 for t in sim.status.tasks for rs in t.replicas)


def test_deepspeed_elastic_scale_down_prunes_services_and_relaunches():
    elastic = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 3}
    sim = started(deepspeed(3, name="ds", elastic=elastic))
    sim.edit(elastic={**elastic, "expectedReplicas": 2})
    plan = sim.step()
    assert ("Service", "ds-worker-2") in [(d.kind, d.name) for d in plan.delete]
    assert sorted(deleted_pods(plan)) == ["ds-worker-0", "ds-worker-2"]
    sim.settle()
    assert ("Service", "ds-worker-2") not in sim.others
    assert "ds-worker-2" not in sim.others[("ConfigMap", "ds-launch")]["data"]["hostfile"]
    assert sorted(sim.live()) == ["ds-worker-0", "ds-worker-1"]


def test_a_child_that_drifted_is_updated_and_one_without_a_desired_hash_too():
    """Children whose desired hash differs from the wanted one (edited by hand, or made by an
    older operator without one) are brought back; Secrets (unreadable) are never updated."""
    sim = started(deepspeed(2, name="ds"))
    sim.others[("ConfigMap", "ds-launch")] = {**sim.others[("ConfigMap", "ds-launch")], "metadata": {"name": "ds-launch"}}
    plan = sim.step()
    assert [o["metadata"]["name"] for o in plan.update] == ["ds-launch"]
    assert sim.step().update == []


def elastic_workers(expected: int) -> dict:
    return {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": expected}


def test_elastic_scale_down_then_up_within_grace_period_is_no_restart():
    m = pytorch(
        [("master", 1), ("worker", 1)],
        name="el",
        policy="Never",
        torchrunConfig={"enabled": True},
        elastic=elastic_workers(2),
    )
    sim = started(m, graceful=True)
    sim.edit(elastic=elastic_workers(1))
    assert deleted_pods(sim.step()) == ["el-worker-0"]
    sim.edit(elastic=elastic_workers(2))  # wanted again while its pod still terminates
    plan = sim.step()
    assert created_pods(plan) == [] and deleted_pods(plan) == []
    sim.gc()
    plan = sim.step()
    assert created_pods(plan) == ["el-worker-0"]
    assert sim.status.backoff_count == 0
    assert sim.replica("el-worker-0").phase == "Creating"
    assert sim.status.phase == "Running"


def test_finished_status_is_final_when_a_terminating_replica_is_wanted_again():
    m = pytorch(
        [("master", 1), ("worker", 1)],
        name="el",
        torchrunConfig={"enabled": True},
        elastic=elastic_workers(2),
    )
    sim = started(m, graceful=True)
    sim.edit(elastic=elastic_workers(1))
    sim.step()
    sim.succeed("el-master-0")
    sim.edit(elastic=elastic_workers(2))
    sim.step()
    assert sim.status.phase == "Succeeded"
    assert sim.plan().status == sim.status


def test_restart_of_an_unscheduled_pod_being_deleted_is_a_fixed_point():
    sim = Sim(deepspeed(2, name="ds", policy="OnFailure", backoff=1), graceful=True)
    sim.step()
    sim.pods["ds-worker-0"] = replace(sim.pods["ds-worker-0"], deleting=True)  # never scheduled
    sim.run("ds-worker-1")
    sim.fail("ds-worker-1", 1)
    sim.step()  # restart every worker; both pods are still terminating
    assert sim.status.backoff_count == 1
    again = sim.plan()
    assert again.create == [] and again.delete == []
    assert again.status == sim.status
    sim.gc()
    assert sorted(created_pods(sim.step())) == ["ds-worker-0", "ds-worker-1"]


def test_each_pod_carries_its_restart_attempt():
    """A replica's pod is labelled with the replica's restart count when it was made (the label
    keeps its on-cluster name, ``restart-generation``); a restart makes the next attempt, and a
    pod of an earlier one is the pod being replaced."""
    sim = started(pytorch(name="j", policy="OnFailure"))
    assert sim.pod("j-worker-0")["metadata"]["labels"]["batch.tensorstack.dev/restart-generation"] == "0"
    sim.fail("j-worker-0", 1)
    plan = sim.step()
    assert deleted_pods(plan) == ["j-worker-0"]
    sim.settle()
    assert sim.pod("j-worker-0")["metadata"]["labels"]["batch.tensorstack.dev/restart-generation"] == "1"
    assert sim.pods["j-worker-0"].restart_attempt == 1


def test_a_pod_of_an_earlier_restart_attempt_is_replaced_whatever_the_status_says():
    """The restart attempt is read from the pod: a status whose restart marker was lost (written
    by hand, restored from a backup) still has its old attempt's pod replaced, not adopted."""
    sim = started(pytorch(name="j", policy="OnFailure"))
    sim.fail("j-worker-0", 1)
    old = sim.pods["j-worker-0"]  # restart attempt 0
    sim.step()  # restart counted (worker-0 is now at attempt 1), its pod deleted
    status = sim.status.model_copy(deep=True)
    for task in status.tasks:
        for rs in task.replicas:
            if rs.name == "j-worker-0":
                rs.phase, rs.uid = "Failed", ""  # the marker gone
    sim.job = sim.job.model_copy(update={"status": status})
    sim.pods["j-worker-0"] = replace(old, deleting=False)
    plan = sim.step()
    assert deleted_pods(plan) == ["j-worker-0"]
    assert sim.status.phase == "Running"
    assert sim.status.backoff_count == 1, "the old pod's end was counted once, not again"
    assert not any(e.reason == "RestartingReplica" for e in plan.events)
