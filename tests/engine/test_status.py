"""The status derived at the end of a pass (:mod:`t9k_jobs.engine.status`) [§1.8, §1.9]: phase,
conditions, tasks, aggregate and ``status.tensorboard``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.engine import reconcile

from .jobs import deepspeed, pytorch
from .sim import Sim, created_pods, started


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
    ready = reconcile(sim.job, replace(sim.observed(), ready=frozenset({("TensorBoard", "j")})), sim.now, sim.runtime())
    board = ready.status.tensorboard
    assert (board.action, board.ready, board.reason, board.type) == ("NOP", True, "DependentReady", "Normal")
    assert board.note == "TensorBoard [j] is ready"
    unserved = reconcile(sim.job, sim.observed(), sim.now, replace(sim.runtime(), unserved=frozenset({"TensorBoard"})))
    assert (unserved.status.tensorboard.type, unserved.status.tensorboard.reason) == ("Warning", "DependentUnavailable")
    assert Sim(pytorch(name="n")).plan().status.tensorboard is None


def test_a_tensorboard_not_served_is_one_warning_event_with_why():
    """Issue 41: on a cluster without T9k's TensorBoard API the status said it, but no Event did
    (a queue not enforced has one): now one ``TensorBoardUnavailable`` Warning, at the first pass
    that sees it, with the runtime's reason; none at the passes after."""
    sim = Sim(pytorch(name="j", tensorboardSpec={"trainingLogFilesets": ["t9k://pvc/logs/run1"]}))
    runtime = replace(sim.runtime(), unserved=frozenset({"TensorBoard"}), unserved_hint="no TensorBoard API here")
    sim.runtime = lambda: runtime  # type: ignore[method-assign]
    for _ in range(3):
        sim.step()
    events = [(e.type, e.reason, e.message) for plan in sim.plans for e in plan.events if "TensorBoard" in e.reason]
    assert events == [("Warning", "TensorBoardUnavailable", "spec.tensorboardSpec is not served: no TensorBoard API here")]
    assert not [e for e in Sim(pytorch(name="n")).step().events if "TensorBoard" in e.reason]
