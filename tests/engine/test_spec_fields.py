"""Status and events for fields of issue 21: ReplicaFailure after a deadline, spec warnings."""

from __future__ import annotations

from .jobs import pytorch
from .sim import Sim


def test_a_deadline_with_no_failed_replica_leaves_replica_failure_false() -> None:
    """§1.8: ReplicaFailure says "one or more replicas have failed". A job that ran out of time
    with every replica running has none: it said True before, with the deadline's message."""
    sim = Sim(pytorch(name="j", policy="Never", runPolicy={"activeDeadlineSeconds": 100}))
    sim.settle(start="Running")
    sim.tick(100)
    sim.step()
    assert sim.status.phase == "Failed"
    assert sim.condition("Failed").reason == "DeadlineExceeded"
    rf = sim.condition("ReplicaFailure")
    assert (rf.status, rf.reason, rf.message) == ("False", "-", "No replica has failed.")
    sim.step()
    assert sim.condition("ReplicaFailure").status == "False", "a later pass keeps it"


def test_a_deadline_after_a_replica_failed_names_that_replica() -> None:
    sim = Sim(pytorch(name="j", policy="Never", runPolicy={"activeDeadlineSeconds": 100}))
    sim.settle(start="Running")
    sim.fail("j-worker-1", code=3)  # a non-master: the job keeps running (§3.2)
    sim.step()
    assert sim.status.phase == "Running"
    sim.tick(100)
    sim.step()
    assert sim.condition("Failed").reason == "DeadlineExceeded"
    rf = sim.condition("ReplicaFailure")
    assert (rf.status, rf.reason, rf.message) == ("True", "Failed", "j-worker-1 failed with exit code 3")


def test_spec_warnings_are_events_of_the_first_pass_only() -> None:
    sim = Sim(pytorch(name="j", scheduler={"t9kScheduler": {"priority": 3}}))
    first = sim.step()
    assert [(e.type, e.reason, e.message) for e in first.events if e.reason == "SpecWarning"] == [
        ("Warning", "SpecWarning", "spec.scheduler.t9kScheduler.queue: not set; the job's pods use the queue 'default'")
    ]
    later = sim.settle(start="Running")
    assert all(e.reason != "SpecWarning" for p in sim.plans[1:] for e in p.events), later
