"""A gang job's PodDisruptionBudget (issue 43, part 4; :func:`t9k_jobs.frameworks.base.disruption_budget`):
one per ``t9kScheduler`` job, over every pod of the job, ``minAvailable`` the gang's size; gone
while paused, deleted on the pass that ends the job; none for a plain job or a runtime that does
not serve it."""

from __future__ import annotations

from dataclasses import replace

from t9k_jobs.engine import reconcile
from t9k_jobs.frameworks import parse_job

from .jobs import colossalai, pytorch
from .sim import Sim, pause

SCHED = {"t9kScheduler": {"queue": "default", "priority": 10}}


def budget(sim: Sim) -> dict | None:
    return sim.others.get(("PodDisruptionBudget", sim.job.name))


def test_a_gang_job_gets_one_over_all_its_pods_and_a_plain_job_none() -> None:
    sim = Sim(pytorch(name="j", scheduler=SCHED))
    sim.settle(start="Running")
    pdb = budget(sim)
    assert pdb is not None and pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["minAvailable"] == 3  # master + 2 workers
    assert pdb["spec"]["selector"] == {"matchLabels": {"tensorstack.dev/owner-kind": "PyTorchTrainingJob",
                                                       "tensorstack.dev/owner-name": "j"}}  # fmt: skip
    for pod in sim.specs.values():  # the selector selects every pod of the job
        labels = pod["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())
    plain = Sim(pytorch(name="j"))
    plain.settle(start="Running")
    assert budget(plain) is None


def test_a_launcher_outside_the_pod_group_is_counted() -> None:
    for gang in ("t9k", "native"):
        sim = Sim(colossalai(3, scheduler=SCHED), gang=gang)
        sim.settle(start="Running")
        assert budget(sim)["spec"]["minAvailable"] == 4, gang  # 3 workers and the launcher


def test_it_goes_while_paused_and_on_the_pass_that_ends_the_job() -> None:
    sim = Sim(pytorch([("master", 1), ("worker", 1)], name="j", scheduler=SCHED))
    sim.settle(start="Running")
    assert budget(sim) is not None
    pause(sim, True)
    plan = sim.step()
    assert ("PodDisruptionBudget", "j", "Released") in [(d.kind, d.name, d.reason) for d in plan.delete]
    assert budget(sim) is None
    pause(sim, False)
    sim.settle(start="Running")
    assert budget(sim) is not None
    sim.succeed("j-master-0")
    plan = sim.step()
    assert sim.status.phase == "Succeeded"
    assert ("PodDisruptionBudget", "j") in [(d.kind, d.name) for d in plan.delete]
    sim.step()
    assert budget(sim) is None


def test_a_runtime_that_does_not_serve_it_makes_none() -> None:
    sim = Sim(pytorch(name="j", scheduler=SCHED))
    runtime = replace(sim.runtime(), unserved=frozenset({"PodDisruptionBudget"}))
    plan = reconcile(parse_job(pytorch(name="j", scheduler=SCHED)), sim.observed(), sim.now, runtime)
    assert "PodDisruptionBudget" not in [o["kind"] for o in plan.create]
    assert "PodDisruptionBudget" in [o["kind"] for o in sim.plan().create]
