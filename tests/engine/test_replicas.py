"""Every desired replica classified (:mod:`t9k_jobs.engine.replicas`) [§1.4, §1.11]: pods
deleted by someone else, pods not yet scheduled, and replacements seen at any moment.
"""

from __future__ import annotations

from .jobs import pytorch
from .sim import Sim, created_pods, started


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
