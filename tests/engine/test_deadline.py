"""``activeDeadlineSeconds`` (:mod:`t9k_jobs.engine.deadline`) [§1.4].
"""

from __future__ import annotations

import pytest

from t9k_jobs.engine.deadline import deadline
from t9k_jobs.engine.decisions import Deadline
from t9k_jobs.engine.reconcile import begin, rfc3339

from .jobs import pytorch
from .sim import Sim, deleted_pods, pause, started


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


def test_the_pass_that_starts_the_job_asks_to_look_again_at_its_deadline():
    """The runtime needs no further event to enforce activeDeadlineSeconds."""
    sim = Sim(pytorch(name="j", runPolicy={"activeDeadlineSeconds": 30}))
    sim.step()
    for name in list(sim.pods):
        sim.run(name)
    plan = sim.step()
    assert sim.status.phase == "Running" and sim.status.start_time
    assert plan.requeue_after == pytest.approx(30, abs=1)


def test_the_deadline_policy_returns_its_decision():
    """The policy says when the deadline passes, or, once it has, the outcome and the pods to stop;
    the pass applies it (the status is derived afterwards)."""
    sim = Sim(pytorch(name="j", runPolicy={"activeDeadlineSeconds": 100}))
    sim.settle(start="Running")
    sim.step()
    sim.succeed("j-worker-0")
    p, _ = begin(sim.job, sim.observed(), sim.now + 30, sim.runtime())
    before = deadline(p, sim.status.start_time)
    assert before.outcome is None and before.stop == () and before.wake == pytest.approx(70)
    p, _ = begin(sim.job, sim.observed(), sim.now + 100, sim.runtime())
    after = deadline(p, sim.status.start_time)
    assert after.outcome is not None and after.outcome.reason == "DeadlineExceeded"
    assert sorted(pod.name for pod in after.stop) == ["j-master-0", "j-worker-1"]
    assert after.wake is None
    assert deadline(p, None) == Deadline(), "no clock, no deadline"
