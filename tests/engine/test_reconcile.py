"""The composition (:func:`t9k_jobs.engine.reconcile`): a pass is pure, idempotent and
converges, whatever point of a job's life it starts from.

Each policy has its own file, named after its module in ``src/t9k_jobs/engine``. Every test
drives :class:`Sim` (the in-memory runtime in ``sim.py``) with a small manifest from ``jobs.py``
and checks the pods it creates or deletes and the status it writes.
"""

from __future__ import annotations

import copy

import pytest

from t9k_jobs.engine import reconcile

from .jobs import pytorch
from .sim import T0, Sim, started


def test_finished_plan_is_finished():
    sim = started(pytorch(name="j"))
    sim.succeed("j-master-0")
    sim.step()
    assert sim.step().finished


def world_states():
    """Sims at various interesting points of a job's life."""
    out = []
    sim = Sim(pytorch(name="j", runPolicy={"activeDeadlineSeconds": 500}))
    out.append(copy.deepcopy(sim))  # nothing yet
    sim.step()
    out.append(copy.deepcopy(sim))  # created, unscheduled
    sim.run_all()
    out.append(copy.deepcopy(sim))  # running, status not yet updated
    sim.step()
    sim.fail("j-worker-1", 137)
    out.append(copy.deepcopy(sim))  # a failure to handle
    sim.step()
    out.append(copy.deepcopy(sim))  # a restart under way
    sim.succeed("j-master-0")
    out.append(copy.deepcopy(sim))  # a success to handle
    sim.step()
    out.append(copy.deepcopy(sim))  # finished
    return out


@pytest.mark.parametrize("i", range(7))
def test_reconcile_is_idempotent(i):
    sim = world_states()[i]
    a = reconcile(sim.job, sim.observed(), sim.now, sim.runtime())
    b = reconcile(sim.job, sim.observed(), sim.now, sim.runtime())
    assert a.create == b.create
    assert a.delete == b.delete
    assert a.status == b.status
    assert a.events == b.events
    assert a.requeue_after == b.requeue_after


@pytest.mark.parametrize("i", range(7))
def test_reconcile_converges_to_a_fixed_point(i):
    sim = world_states()[i]
    plan = sim.settle(start=None)
    assert not plan.create and not plan.delete
    again = sim.plan()
    assert again.create == [] and again.delete == []
    assert again.status == sim.status


def test_reconcile_does_not_mutate_its_inputs():
    sim = world_states()[3]
    job_before = sim.job.model_copy(deep=True)
    pods_before = dict(sim.pods)
    reconcile(sim.job, sim.observed(), sim.now, sim.runtime())
    assert sim.job == job_before
    assert sim.pods == pods_before


def test_reconcile_uses_the_given_clock_only():
    sim = world_states()[0]
    plan = reconcile(sim.job, sim.observed(), T0 + 5, sim.runtime())
    assert plan.status.start_time == "2023-11-14T22:13:25Z"
