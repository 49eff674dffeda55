"""Children whose names are held by someone else (``Observed.conflicts``): a PyTorchTrainingJob and a
DeepSpeedJob of one name in one namespace want the same pods, Services and ConfigMap."""

from __future__ import annotations

from t9k_jobs.api import parse_job
from t9k_jobs.engine import Observed, Runtime, reconcile
from t9k_jobs.engine.reconcile import CONFLICT_RECHECK

from .jobs import deepspeed

T0 = 1_700_000_000.0
HELD = {("Pod", "same-worker-0"): "PyTorchTrainingJob/same", ("Service", "same-worker-0"): "PyTorchTrainingJob/same"}


def job():
    manifest = deepspeed(2, name="same")
    manifest["metadata"]["uid"] = "ds-uid"
    return parse_job(manifest)


def test_names_held_by_others_are_not_created_and_the_status_says_whose() -> None:
    plan = reconcile(job(), Observed(conflicts=dict(HELD)), T0, Runtime())
    made = {(o["kind"], o["metadata"]["name"]) for o in plan.create}
    assert ("Pod", "same-worker-0") not in made and ("Service", "same-worker-0") not in made
    assert {("Pod", "same-worker-1"), ("Service", "same-worker-1"), ("ConfigMap", "same-launch")} <= made
    init = plan.status.condition("Initialized")
    assert init.status == "False" and init.reason == "ChildConflict"
    assert "Pod same-worker-0 belongs to PyTorchTrainingJob/same" in init.message
    assert "Service same-worker-0 belongs to PyTorchTrainingJob/same" in init.message
    # (the helper's worker has a command, which a DeepSpeed worker does not run: a SpecWarning)
    assert [e.reason for e in plan.events if e.type == "Warning" and e.reason != "SpecWarning"] == ["ChildConflict"]
    assert plan.requeue_after == CONFLICT_RECHECK and plan.status.phase == "Pending"


def test_the_warning_is_sent_once_and_the_condition_clears_when_the_names_are_free() -> None:
    j = job()
    first = reconcile(j, Observed(conflicts=dict(HELD)), T0, Runtime())
    j = j.model_copy(update={"status": first.status})
    again = reconcile(j, Observed(conflicts=dict(HELD)), T0 + 30, Runtime())
    assert not [e for e in again.events if e.reason == "ChildConflict"]
    freed = reconcile(j, Observed(), T0 + 60, Runtime())
    assert ("Pod", "same-worker-0") in {(o["kind"], o["metadata"]["name"]) for o in freed.create}
    assert freed.status.condition("Initialized").reason != "ChildConflict"
