"""What unfinished attempts cost (issue 42, part 5; :mod:`t9k_jobs.engine.cost`): the pass that
sees a replica pod end without finishing says it with why, how long it ran and the GPUs its
replica asks for; a job that succeeds loses nothing; the totals count each pod once."""

from __future__ import annotations

import pytest

from t9k_jobs.engine import Lost
from t9k_jobs.engine.context import UNFINISHED_GRACE
from t9k_jobs.engine.cost import REMEMBERED, add, gpus, rows
from t9k_jobs.engine.node_loss import NODE_LOST

from .jobs import ctr, generic, pytorch, tmpl
from .sim import Sim, pause


def _gpu_template(n: int = 2) -> dict:
    return tmpl(ctr("main", command=["sh", "-c", "true"], resources={"limits": {"nvidia.com/gpu": str(n)}}))


def lost_of(sim: Sim) -> list[Lost]:
    """Every attempt said lost over the sim's passes, each pod once (as the totals count)."""
    totals, _ = add(None, [one for plan in sim.plans for one in plan.lost])
    said: dict[str, Lost] = {}
    for plan in sim.plans:
        for one in plan.lost:
            said.setdefault(one.uid, one)
    assert sorted(said) == sorted(totals["counted"])
    return list(said.values())


def running(policy: str = "OnFailure", limit: int = 3, replicas: int = 2, **spec) -> Sim:
    sim = Sim(generic([("worker", replicas)], policy=policy, limit=limit, template=_gpu_template(), **spec))
    sim.settle(start="Running")
    sim.step()
    assert sim.status.phase == "Running"
    return sim


def test_a_failed_attempt_costs_what_it_ran_times_its_gpus_and_is_counted_once() -> None:
    sim = running()
    sim.tick(10)
    sim.fail("gj-worker-1", 1)
    uid = sim.pods["gj-worker-1"].uid
    for _ in range(4):  # restarts, repeated passes: the same pod is not counted again
        sim.step(start="Running")
    [one] = lost_of(sim)
    assert (one.pod, one.uid, one.attempt, one.reason) == ("gj-worker-1", uid, 0, "Failed")
    assert one.seconds == pytest.approx(10) and one.gpus == 2
    totals, _ = add(None, [x for plan in sim.plans for x in plan.lost])
    assert rows(totals) == [("Failed", 1, 10.0, 20.0)]


def test_a_job_that_succeeds_loses_nothing_even_a_rank_stopped_by_its_clean_up() -> None:
    sim = Sim(pytorch([("master", 1), ("worker", 1)], name="j"))
    sim.settle(start="Running")
    sim.tick(5)
    sim.succeed("j-master-0")  # the master decides: the worker still runs and is cleaned up
    for _ in range(3):
        sim.step()
    assert sim.status.phase == "Succeeded"
    assert lost_of(sim) == []


def test_the_ranks_still_running_when_the_job_fails_are_lost_to_job_failed() -> None:
    sim = running(policy="Never", limit=0, cleanUpPolicy="Unfinished")
    sim.tick(7)
    sim.fail("gj-worker-0", 2)
    sim.step()
    assert sim.status.phase == "Failed"
    sim.tick(UNFINISHED_GRACE)  # the clean-up spares a running rank this long, then stops it
    sim.step()
    by_pod = {one.pod: (one.reason, round(one.seconds)) for one in lost_of(sim)}
    assert by_pod == {"gj-worker-0": ("Failed", 7), "gj-worker-1": ("JobFailed", 7 + round(UNFINISHED_GRACE))}


def test_a_pause_loses_the_running_attempts_to_paused() -> None:
    sim = running()
    sim.tick(3)
    pause(sim, True)
    sim.step()
    assert {(one.pod, one.reason) for one in lost_of(sim)} == {("gj-worker-0", "Paused"), ("gj-worker-1", "Paused")}


def test_a_lost_node_and_a_preemption_are_said_as_such() -> None:
    sim = running()
    sim.tick(4)
    sim.pods["gj-worker-0"] = sim.pods["gj-worker-0"].__class__(**{**sim.pods["gj-worker-0"].__dict__, "node": "n1"})
    sim.unreachable["n1"] = sim.now - 1000  # unreachable for long past the limit
    sim.disrupt("gj-worker-1", end=143)  # the scheduler's preemption
    sim.step()
    reasons = {one.pod: one.reason for one in lost_of(sim)}
    assert reasons == {"gj-worker-0": NODE_LOST, "gj-worker-1": "Preempted"}


def test_a_replica_that_never_ran_costs_no_seconds() -> None:
    sim = Sim(generic([("worker", 1)], policy="Never", limit=0, template=_gpu_template(1)))
    sim.settle(start="Pending")
    sim.fail("gj-worker-0", 128)  # ContainerCannotRun: its ran_from is when it "failed"
    sim.pods["gj-worker-0"] = sim.pods["gj-worker-0"].__class__(**{**sim.pods["gj-worker-0"].__dict__, "ran_from": None})
    sim.step()
    [one] = lost_of(sim)
    assert (one.reason, one.seconds) == ("Failed", 0.0)


def test_the_totals_count_each_uid_once_and_remember_a_bounded_number() -> None:
    first = [Lost(f"p-{i}", f"uid-{i}", 0, "Restart", 1.5, 1) for i in range(REMEMBERED + 10)]
    totals, new = add(None, first)
    assert len(new) == REMEMBERED + 10 and len(totals["counted"]) == REMEMBERED
    totals, new = add(totals, first[-5:])
    assert new == []
    assert rows(totals) == [("Restart", REMEMBERED + 10, pytest.approx(1.5 * (REMEMBERED + 10)),
                             pytest.approx(1.5 * (REMEMBERED + 10)))]  # fmt: skip
    # What a file edited by hand may hold is read as nothing, never raised.
    assert rows(None) == [] and add({"reasons": "x", "counted": 3}, [])[0] == {"reasons": {}, "counted": []}
    assert rows({"reasons": {"Failed": "x", "Restart": {"attempts": "two"}}}) == [] and rows([1]) == []


def test_gpus_are_read_from_limits_else_requests_mig_slices_and_init_containers() -> None:
    def pod(*containers: dict, init: tuple[dict, ...] = ()) -> dict:
        return {"spec": {"containers": list(containers), "initContainers": list(init)}}

    def c(**resources: dict) -> dict:
        return {"name": "c", "resources": resources}

    assert gpus(pod(c(limits={"nvidia.com/gpu": 4}), c(requests={"amd.com/gpu": "1"}))) == 5
    assert gpus(pod(c(limits={"nvidia.com/mig-1g.10gb": 2, "cpu": "8"}))) == 2
    assert gpus(pod(c(limits={"nvidia.com/gpu": 2}, requests={"nvidia.com/gpu": 1, "cpu": 1}))) == 2  # the limit
    assert gpus(pod(c(), init=(c(limits={"nvidia.com/gpu": 8}),))) == 8
    assert gpus(pod(c(limits={"nvidia.com/gpu": "lots"}))) == 0 and gpus({}) == 0
