"""A finished job's time to live (issue 43, part 3; :mod:`t9k_jobs.engine.ttl`): the plan says when
the job is to be deleted, counted from its ``completionTime``, by its annotation, else the
runtime's default; a job that has not finished never expires; a bad annotation is refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.api import ManifestError
from t9k_jobs.engine.ttl import expire_after
from t9k_jobs.frameworks import parse_job

from .jobs import generic
from .sim import Sim

TTL = "t9k-jobs.io/ttl-seconds-after-finished"


def with_ttl(value: str | None) -> dict:
    manifest = generic([("worker", 1)], policy="Never")
    if value is not None:
        manifest["metadata"]["annotations"] = {TTL: value}
    return manifest


def finished(manifest: dict) -> Sim:
    sim = Sim(manifest)
    sim.settle(start="Running")
    assert sim.plan().expire_after is None  # running: never
    sim.succeed("gj-worker-0")
    sim.step()
    assert sim.status.phase == "Succeeded"
    return sim


def test_the_plan_says_when_a_finished_job_is_to_be_deleted() -> None:
    sim = finished(with_ttl("100"))
    assert sim.plan().expire_after == pytest.approx(100)
    sim.tick(60)
    assert sim.plan().expire_after == pytest.approx(40)
    sim.tick(60)
    plan = sim.plan()
    assert plan.expire_after == 0 and plan.finished  # not a wake-up: a local run still ends


def test_zero_deletes_at_once_and_no_annotation_keeps_it() -> None:
    assert finished(with_ttl("0")).plan().expire_after == 0
    assert finished(with_ttl(None)).plan().expire_after is None


def test_the_runtimes_default_applies_without_an_annotation_and_the_annotation_wins() -> None:
    sim = finished(with_ttl(None))
    runtime = replace(sim.runtime(), ttl_after_finished=30)
    completion = sim.status.completion_time
    assert expire_after(sim.job, runtime, "Succeeded", completion, sim.now) == pytest.approx(30)
    own = finished(with_ttl("5"))
    assert expire_after(own.job, runtime, "Succeeded", completion, own.now) == pytest.approx(5)
    assert expire_after(sim.job, runtime, "Running", completion, sim.now) is None
    assert expire_after(sim.job, runtime, "Failed", None, sim.now) is None


@pytest.mark.parametrize("value", ["-1", "1.5", "soon", "", "99999999999"])
def test_a_ttl_that_is_not_a_non_negative_integer_is_refused_naming_the_annotation(value: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_job(with_ttl(value))
    assert TTL in str(err.value) and "non-negative integer" in str(err.value)
