"""Success and failure (:mod:`t9k_jobs.engine.outcome`): who decides for each kind [§2.3,
§3.2, §4.4, §5.3], from the replicas that ended for good.
"""

from __future__ import annotations

from .jobs import colossalai, deepspeed, generic, pytorch
from .sim import created_pods, deleted_pods, started


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


def test_deepspeed_worker0_failure_for_good_fails_the_job():
    sim = started(deepspeed(2, name="ds", backoff=0))
    sim.fail("ds-worker-0", 137)
    sim.step()
    assert sim.status.phase == "Failed"
    assert "ds-worker-0 failed with exit code 137" in sim.condition("Failed").message


def test_colossalai_launcher_decides():
    sim = started(colossalai(2, name="cai"))
    sim.succeed("cai-launcher")
    sim.step()
    assert sim.status.phase == "Succeeded"
    sim = started(colossalai(2, name="cai"))
    sim.fail("cai-launcher", 1)
    sim.step()
    assert sim.status.phase == "Failed"


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


def test_genericjob_empty_lists_of_rules_are_no_rules():
    """``successRules: []`` replaced "every replica succeeds" by no rule at all, so a job whose
    replicas all succeeded ended Failed (NoRuleMatched); ``failureRules: []`` let a failed replica
    go unnoticed. An empty list is no rules, as T9k's Go reads ``len(rules) == 0`` (issue 32)."""
    sim = started(generic([("worker", 2)], name="g", successRules=[], failureRules=[]))
    sim.succeed("g-worker-0")
    sim.step()
    assert sim.status.phase == "Running"
    sim.succeed("g-worker-1")
    sim.step()
    assert sim.status.phase == "Succeeded"

    sim = started(generic([("worker", 2)], name="g", policy="Never", successRules=[], failureRules=[]))
    sim.fail("g-worker-1", 3)
    sim.step()
    assert sim.status.phase == "Failed"
    assert sim.condition("Failed").message == "GenericJob g has failed: g-worker-1 failed with exit code 3"
