"""Preemption is not failure (issue 22; :mod:`t9k_jobs.engine.preemption`).

The scheduler marks each victim pod ``DisruptionTarget=True`` with reason ``PreemptionByScheduler``
and deletes it with its grace period; a native gang with ``disruptionMode: all`` loses every pod
at once. The job recreates them without counting a restart or a backoff, waits for its gang again
(Pending, condition ``Preempted``), and later succeeds as if nothing failed. Other disruption
reasons stay environmental failures, judged by the restart policy [§1.11].
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.engine.preemption import preemption
from t9k_jobs.engine.reconcile import begin
from t9k_jobs.engine.replicas import classify

from .jobs import deepspeed, generic, pytorch
from .sim import Sim, created_pods

SCHED = {"t9kScheduler": {"queue": "gpu", "priority": 40}}
GANG = ["j-master-0", "j-worker-0", "j-worker-1"]


def events(sim: Sim, reason: str) -> list[str]:
    return [e.message for plan in sim.plans for e in plan.events if e.reason == reason]


def running_gang(policy: str, backoff: int | None = None) -> Sim:
    sim = Sim(pytorch([("master", 1), ("worker", 2)], name="j", policy=policy, backoff=backoff, scheduler=SCHED),
              gang="native", graceful=True)  # fmt: skip
    sim.settle(start="Running")
    sim.step()
    assert sim.status.phase == "Running" and sim.live() == GANG
    return sim


def assert_nothing_counted(sim: Sim) -> None:
    assert sim.status.backoff_count == 0
    assert [t.restart_count for t in sim.status.tasks] == [0, 0]
    assert [rs.restart_count for t in sim.status.tasks for rs in t.replicas] == [0, 0, 0]
    assert not events(sim, "RestartingReplica") and not events(sim, "ReplicaDeleted")


@pytest.mark.parametrize("policy,backoff", [("Never", None), ("OnFailure", 0)])
def test_a_preempted_gang_is_recreated_and_succeeds_with_nothing_counted(policy: str, backoff: int | None) -> None:
    sim = running_gang(policy, backoff)
    created_before = len(sim.created)
    # The whole gang is preempted: conditions, then graceful deletion.
    for name in GANG:
        sim.disrupt(name)
    sim.tick(5)
    plan = sim.step()
    assert created_pods(plan) == [] and plan.delete == []  # their deletion is the scheduler's
    assert sim.status.phase == "Pending"
    cond = sim.condition("Preempted")
    assert cond is not None and (cond.status, cond.reason) == ("True", "PreemptionByScheduler")
    assert cond.message.startswith("preempted by higher priority at 2023-11-14T22:13:25Z (j-master-0, j-worker-0, j-worker-1)")
    assert cond.message.endswith("its pods are recreated and wait for the gang again")
    assert [r.phase for t in sim.status.tasks for r in t.replicas] == ["Creating"] * 3
    assert len(events(sim, "Preempted")) == 1
    # The ranks end on SIGTERM (143) and SIGKILL (137) before the pods go.
    sim.disrupt("j-master-0", end=143)
    sim.disrupt("j-worker-0", end=137)
    sim.tick(5)
    assert created_pods(sim.step()) == []
    assert sim.status.phase == "Pending" and sim.condition("Preempted").status == "True"
    sim.gc()
    plan = sim.step()
    assert sorted(created_pods(plan)) == GANG
    assert all(o["metadata"]["labels"]["batch.tensorstack.dev/restart-generation"] == "0"
               for o in plan.create if o["kind"] == "Pod")  # fmt: skip
    assert len(sim.created) == created_before + 3
    # New pods wait for the gang: still Pending, still preempted.
    sim.step()
    assert sim.status.phase == "Pending" and sim.condition("Preempted").status == "True"
    assert len(events(sim, "Preempted")) == 1
    sim.run_all()
    sim.tick(5)
    sim.step()
    assert sim.status.phase == "Running"
    cond = sim.condition("Preempted")
    assert (cond.status, cond.reason) == ("False", "Rescheduled")
    assert cond.message == "preempted at 2023-11-14T22:13:25Z; every replica runs again"
    sim.succeed("j-master-0")
    sim.step()
    assert sim.status.phase == "Succeeded"
    assert_nothing_counted(sim)
    assert sim.condition("Preempted").status == "False"


def test_preemption_is_remembered_when_the_pods_vanish_between_passes() -> None:
    # backoffLimit 0: one counted failure would fail the job.
    sim = running_gang("OnFailure", backoff=0)
    # worker-0: seen running with the notice only; master-0: seen ended; worker-1: seen deleting.
    sim.disrupt("j-worker-0", deleting=False)
    sim.disrupt("j-master-0", end=143, deleting=False)
    sim.disrupt("j-worker-1")
    sim.step()
    assert sim.replica("j-worker-0").reason == "PreemptionByScheduler"
    assert sim.replica("j-worker-0").phase == "Running"
    assert not events(sim, "ReplicaWaiting")
    for name in GANG:
        sim.vanish(name)
    plan = sim.step()
    assert sorted(created_pods(plan)) == GANG
    assert sim.status.phase == "Pending"
    sim.run_all()
    sim.step()
    sim.succeed("j-master-0")
    sim.step()
    assert sim.status.phase == "Succeeded"
    assert_nothing_counted(sim)


def test_a_preemption_notice_without_a_deletion_changes_nothing() -> None:
    # The scheduler's delete never came; kube-controller-manager clears the stale condition.
    sim = running_gang("Never")
    sim.disrupt("j-worker-0", deleting=False)
    plan = sim.step()
    assert plan.delete == [] and created_pods(plan) == []
    assert sim.status.phase == "Running" and sim.condition("Preempted") is None
    sim.pods["j-worker-0"] = replace(sim.pods["j-worker-0"], disruption_reason=None, disruption_message=None)
    sim.step()
    assert sim.replica("j-worker-0").reason is None
    sim.vanish("j-worker-0")  # now a deletion by someone else: final under Never
    sim.step()
    assert sim.replica("j-worker-0").phase == "Deleted"
    assert events(sim, "ReplicaDeleted")


@pytest.mark.parametrize(
    "reason", ["EvictionByEvictionAPI", "DeletionByTaintManager", "DeletionByPodGC", "TerminationByKubelet"]
)
def test_other_disruptions_are_failures_judged_by_the_restart_policy(reason: str) -> None:
    """Judged by the restart policy, but not counted against backoffLimit: not the program's
    fault (issue 43; :mod:`t9k_jobs.engine.failure_policy`)."""
    sim = running_gang("OnFailure", backoff=3)
    sim.disrupt("j-worker-0", reason, end=137)
    sim.step()
    assert sim.status.backoff_count == 0
    assert sim.status.task("worker").restart_count == 1
    assert sim.condition("Preempted") is None and not events(sim, "Preempted")
    assert sim.status.phase == "Running"


def test_an_eviction_under_never_fails_the_job_where_a_preemption_does_not() -> None:
    evicted = running_gang("Never")
    evicted.disrupt("j-master-0", "EvictionByEvictionAPI", end=137)
    evicted.step()
    assert evicted.status.phase == "Failed"
    preempted = running_gang("Never")
    preempted.disrupt("j-master-0", end=137)
    preempted.step()
    assert preempted.status.phase == "Pending"


def test_an_evicted_pod_that_vanishes_counts_as_an_external_deletion() -> None:
    sim = running_gang("OnFailure", backoff=3)
    sim.disrupt("j-worker-1", "EvictionByEvictionAPI", deleting=False)
    sim.step()
    sim.vanish("j-worker-1")
    sim.step()
    assert sim.status.backoff_count == 1
    assert events(sim, "ReplicaDeleted")


def test_a_single_pod_preempted_without_a_gang() -> None:
    # Pod-level default preemption of one replica of a job without t9kScheduler.
    sim = Sim(generic([("worker", 2)], name="g", policy="Never"), graceful=True)
    sim.settle(start="Running")
    sim.step()
    sim.disrupt("g-worker-1", end=143, message="default-scheduler: preempting to accommodate a higher priority pod")
    sim.step()
    assert sim.status.phase == "Pending"
    cond = sim.condition("Preempted")
    assert cond.status == "True"
    assert cond.message.endswith("(g-worker-1): its pods are recreated and wait to be scheduled again")
    sim.gc()
    assert created_pods(sim.step()) == ["g-worker-1"]
    sim.run_all()
    sim.step()
    assert sim.status.phase == "Running" and sim.condition("Preempted").status == "False"
    assert sim.status.task("worker").restart_count == 0
    assert [rs.restart_count for rs in sim.status.task("worker").replicas] == [0, 0]


def test_deepspeed_relaunches_every_rank_when_one_is_preempted() -> None:
    # Restart scope all: ranks cannot rejoin, so the others are relaunched too, uncounted, and a
    # rank that failed on the same pass (its peer went) is not judged.
    sim = Sim(deepspeed(3, name="ds", backoff=0), graceful=True)
    sim.settle(start="Running")
    sim.step()
    sim.disrupt("ds-worker-0", end=143)
    sim.fail("ds-worker-1", 1)
    plan = sim.step()
    # ds-worker-0 is being deleted by the scheduler already.
    assert sorted(d.name for d in plan.delete if d.reason == "Preempted") == ["ds-worker-1", "ds-worker-2"]
    assert sim.status.phase == "Pending"
    sim.gc()
    assert sorted(created_pods(sim.step())) == ["ds-worker-0", "ds-worker-1", "ds-worker-2"]
    sim.run_all()
    sim.step()
    assert sim.status.phase == "Running"
    assert sim.status.backoff_count == 0
    assert sim.status.task("worker").restart_count == 0


def test_the_preemption_policy_returns_its_decision() -> None:
    """Read from the classified replicas: with restart scope all, the ranks relaunched with the
    preempted one (their pods deleted, reason Preempted, nothing counted), those not judged, and
    the one event."""
    sim = Sim(deepspeed(3, name="ds", backoff=0), graceful=True)
    sim.settle(start="Running")
    sim.step()
    sim.disrupt("ds-worker-0", end=143)
    p, t = begin(sim.job, sim.observed(), sim.now, sim.runtime())
    walk = classify(p, t.backoff_count)
    assert [r.name for r in walk.replicas if r.preempted] == ["ds-worker-0"]
    decision = preemption(p, walk)
    assert decision is not None
    assert decision.unjudged == (("worker", 1), ("worker", 2))
    assert [(r.name, r.delete, r.status.phase, r.status.uid) for r in decision.relaunched] == [
        ("ds-worker-1", "Preempted", "Creating", ""),
        ("ds-worker-2", "Preempted", "Creating", ""),
    ]
    assert decision.event is not None and decision.event.reason == "Preempted"
