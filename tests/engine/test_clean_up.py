"""Clean-up (:mod:`t9k_jobs.engine.clean_up`) [§1.6]: ``cleanUpPolicy`` and ``cleanUpWorkers``.
"""

from __future__ import annotations

import pytest

from t9k_jobs.engine.reconcile import UNFINISHED_GRACE

from .jobs import colossalai, generic, pytorch
from .sim import Sim, deleted_pods, started


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
