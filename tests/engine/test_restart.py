"""Restart policies and backoff (:mod:`t9k_jobs.engine.restart`) [§1.4]: which ended replicas
restart and how restarts are counted. How a replacement is told from the pod it replaces is in
``test_replacement.py``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.engine import ContainerState
from t9k_jobs.engine.apply import apply_walk
from t9k_jobs.engine.reconcile import begin
from t9k_jobs.engine.replicas import classify
from t9k_jobs.engine.restart import restarts

from .jobs import colossalai, ctr, deepspeed, generic, pytorch, tmpl
from .sim import Sim, created_pods, deleted_pods, started


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


def test_deepspeed_exitcode_policy_restarts_all_only_for_retryable_codes():
    sim = started(deepspeed(2, name="ds", policy="ExitCode"))
    sim.fail("ds-worker-1", 1)
    assert deleted_pods(sim.step()) == []
    sim = started(deepspeed(2, name="ds", policy="ExitCode"))
    sim.fail("ds-worker-1", 138)
    assert sorted(deleted_pods(sim.step())) == ["ds-worker-0", "ds-worker-1"]


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


def test_a_rank_that_ended_for_good_beside_a_restart_of_all_is_not_named_failed():
    """DeepSpeed under ExitCode: worker-1 exits 1 (not retryable) in the pass where worker-0 exits
    137 (retryable): every worker restarts, so worker-1 is not final; ReplicaFailure does not name
    it on this pass only to forget it on the next (a fixed point, as the property test checks)."""
    sim = Sim(deepspeed(2, name="ds", policy="ExitCode", backoff=1), graceful=True)
    sim.step()
    for name in ("ds-worker-0", "ds-worker-1"):
        sim.schedule(name)
        sim.pods[name] = replace(sim.pods[name], deleting=True)  # deleted by someone, still terminating
    sim.fail("ds-worker-1", 1)
    sim.step()
    sim.fail("ds-worker-0", 137)
    sim.step()
    assert sim.condition("ReplicaFailure").status == "False"
    again = sim.plan()
    assert again.create == [] and again.delete == []
    assert again.status == sim.status


def test_the_restart_policy_decides_and_the_pass_applies():
    """The policy reads the classified replicas and returns its decision (every rank of a
    DeepSpeedJob, one backoff); nothing is counted until the pass applies it."""
    sim = started(deepspeed(3, name="ds", backoff=3))
    sim.fail("ds-worker-2", 137)
    p, t = begin(sim.job, sim.observed(), sim.now, sim.runtime())
    apply_walk(t, classify(p, t.backoff_count))
    decision = restarts(p, t)
    assert decision is not None and decision.every and decision.backoff_count == 1
    assert [(r.status.name, r.status.phase, r.status.uid, r.status.restart_count) for r in decision.replicas] == [
        (f"ds-worker-{i}", "Creating", "", 1) for i in range(3)
    ]
    assert {r.why for r in decision.replicas} == {"exit code 137"}
    assert t.backoff_count == 0 and t.task_restarts == {"worker": 0}
    assert restarts(p, t) == decision, "a decision is a value: asking again gives the same"
