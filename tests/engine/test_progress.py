"""The progress deadline (issue 42; :mod:`t9k_jobs.engine.progress`) in the pure engine: when a
Running job's replicas all fell silent for N seconds it made no progress, and what then
(Restart, Fail, Warn); the restart attempt every container is told."""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.engine.desired import RESTART_ATTEMPT_ENV
from t9k_jobs.engine.progress import NO_PROGRESS, PROGRESSING, RESUMED

from .jobs import deepspeed, generic
from .sim import Sim, created_pods, deleted_pods

DEADLINE = "t9k-jobs.io/progress-deadline-seconds"
ACTION = "t9k-jobs.io/on-no-progress"


def annotated(manifest: dict, deadline: int | None = 30, action: str | None = None) -> dict:
    notes = manifest["metadata"].setdefault("annotations", {})
    if deadline is not None:
        notes[DEADLINE] = str(deadline)
    if action is not None:
        notes[ACTION] = action
    return manifest


def running(manifest: dict) -> Sim:
    """``manifest`` with its replicas Running, each started now, none having printed."""
    sim = Sim(manifest, graceful=True)
    sim.settle(start="Running")
    sim.step()
    started(sim)
    assert sim.status.phase == "Running"
    return sim


def started(sim: Sim) -> None:
    for name, pod in sim.pods.items():
        if not pod.deleting and pod.started_at is None:
            sim.pods[name] = replace(pod, started_at=sim.now)


def printed(sim: Sim, name: str) -> None:
    sim.pods[name] = replace(sim.pods[name], last_output=sim.now)


def events(sim: Sim, reason: str) -> list[str]:
    return [e.message for plan in sim.plans for e in plan.events if e.reason == reason]


def test_a_job_that_prints_within_its_deadline_is_only_looked_at_again() -> None:
    sim = running(annotated(generic(), deadline=30))
    sim.tick(20)
    printed(sim, "gj-worker-1")
    sim.tick(25)  # worker-0 silent 45 s, worker-1 25 s: the job printed 25 s ago
    plan = sim.step()
    assert not plan.delete and not plan.dump_stacks and not events(sim, NO_PROGRESS)
    assert plan.requeue_after == pytest.approx(5.0)  # when its deadline would pass
    assert sim.condition(PROGRESSING) is None


def test_without_the_annotation_nothing_is_watched() -> None:
    sim = running(generic())
    sim.tick(10_000)
    plan = sim.step()
    assert not plan.delete and plan.requeue_after is None and not events(sim, NO_PROGRESS)


def test_restart_restarts_every_replica_counting_one_backoff_and_dumps_first() -> None:
    sim = running(annotated(generic(limit=3), deadline=30))
    printed(sim, "gj-worker-0")
    sim.tick(30)
    plan = sim.step()
    assert plan.dump_stacks == ("gj-worker-0", "gj-worker-1")
    assert sorted(deleted_pods(plan)) == ["gj-worker-0", "gj-worker-1"]
    [said] = events(sim, NO_PROGRESS)
    assert "gj-worker-0 30 s since its last line" in said and "gj-worker-1 no line in 30 s since its start" in said
    assert sim.status.backoff_count == 1
    assert [sim.replica(n).restart_count for n in ("gj-worker-0", "gj-worker-1")] == [1, 1]
    restarts = events(sim, "RestartingReplica")
    assert len(restarts) == 2 and all("(NoProgress)" in m for m in restarts)
    cond = sim.condition(PROGRESSING)
    assert cond.status == "False" and cond.reason == NO_PROGRESS
    # The old pods go; the new ones carry attempt 1 in every container, and the deadline is not
    # judged while they are replaced.
    sim.gc()
    plan = sim.step(start="Running")
    assert sorted(created_pods(plan)) == ["gj-worker-0", "gj-worker-1"]
    assert sim.env("gj-worker-0")[RESTART_ATTEMPT_ENV] == "1"
    started(sim)
    sim.tick(10)
    printed(sim, "gj-worker-1")
    sim.step()
    assert sim.condition(PROGRESSING).status == "True" and sim.condition(PROGRESSING).reason == RESUMED


def test_restart_with_no_restart_left_fails_the_job_with_reason_no_progress() -> None:
    sim = running(annotated(generic(limit=0), deadline=10))
    sim.tick(10)
    plan = sim.step()
    assert sim.status.phase == "Failed"
    failed = sim.condition("Failed")
    assert failed.status == "True" and failed.reason == NO_PROGRESS and "no replica wrote a log line" in failed.message
    assert sorted(deleted_pods(plan)) == ["gj-worker-0", "gj-worker-1"] and plan.dump_stacks
    assert sim.status.backoff_count == 0


def test_fail_fails_at_once_and_warn_says_it_once() -> None:
    sim = running(annotated(generic(limit=3), deadline=10, action="Fail"))
    sim.tick(11)
    sim.step()
    assert sim.status.phase == "Failed" and sim.condition("Failed").reason == NO_PROGRESS

    sim = running(annotated(generic(limit=3), deadline=10, action="Warn"))
    sim.tick(11)
    plan = sim.step()
    assert not plan.delete and plan.dump_stacks == ("gj-worker-0", "gj-worker-1")
    for _ in range(3):
        sim.tick(5)
        plan = sim.step()
        assert not plan.delete and not plan.dump_stacks
    assert len(events(sim, NO_PROGRESS)) == 1 and sim.status.phase == "Running"
    assert sim.condition(PROGRESSING).status == "False"
    printed(sim, "gj-worker-0")
    sim.step()
    assert sim.condition(PROGRESSING).reason == RESUMED


def test_a_replica_being_created_or_replaced_holds_the_deadline_twice_over_not_for_ever() -> None:
    """While one replica restarts by its policy (its new pod not running yet), the others may wait
    for it: their silence is judged against twice the deadline. A replica that never comes back
    (a crash loop: its peer's rendezvous closed while the peer hangs) does not hold the job for
    ever; its restarted attempts' lines do not count, the silent peer's silence does."""
    sim = running(annotated(generic(limit=3), deadline=10))
    sim.fail("gj-worker-1", 1)
    sim.step()
    sim.gc()
    sim.step(start=None)  # created, not scheduled
    sim.tick(15)  # worker-0 silent 15 s: past one deadline, within two
    plan = sim.step()
    assert not events(sim, NO_PROGRESS) and not plan.dump_stacks
    assert plan.requeue_after == pytest.approx(5.0)  # when twice the deadline would pass
    sim.tick(5)
    plan = sim.step()
    (said,) = events(sim, NO_PROGRESS)
    assert said.startswith("no replica wrote a log line for 20 s (t9k-jobs.io/progress-deadline-seconds): "), said
    assert said.endswith("; gj-worker-1 not running meanwhile (2 deadlines waited for it)"), said
    assert "gj-worker-0 no line in 20 s since its start" in said and plan.dump_stacks


def test_a_crash_looping_replica_does_not_keep_a_hung_peer_alive() -> None:
    """The torchrun case: worker-1 starts, writes its error and fails again and again while
    worker-0 hangs. Each attempt of worker-1 writes a line, but only while it runs; worker-0's
    silence is what is judged between attempts, and the job restarts as a whole."""
    sim = running(annotated(generic(limit=20), deadline=10))
    for _ in range(4):
        sim.tick(4)
        printed(sim, "gj-worker-1")  # its error, then it exits 1
        sim.fail("gj-worker-1", 1)
        sim.step()
        sim.gc()
        sim.step(start=None)  # its next attempt waits (back-off)
        if events(sim, NO_PROGRESS):
            break
        sim.tick(2)
    sim.tick(10)
    sim.step()
    assert events(sim, NO_PROGRESS), "worker-0's silence was never judged"
    (said,) = events(sim, NO_PROGRESS)
    assert "gj-worker-0 no line in" in said and "gj-worker-1 not running meanwhile" in said, said


def test_restart_scope_all_kinds_count_one_backoff_too() -> None:
    sim = running(annotated(deepspeed(2), deadline=5))
    sim.tick(5)
    sim.step()
    assert sim.status.backoff_count == 1 and len(events(sim, NO_PROGRESS)) == 1


def test_every_container_is_told_its_restart_attempt_and_a_value_of_its_own_wins() -> None:
    from .jobs import ctr, tmpl

    template = tmpl(ctr("main", command=["true"]), ctr("side", command=["true"], env={RESTART_ATTEMPT_ENV: "mine"}))
    template["spec"]["initContainers"] = [ctr("init", command=["true"])]
    sim = Sim(generic([("worker", 1)], template=template, limit=2))
    sim.settle(start="Running")
    assert sim.env("gj-worker-0", "main")[RESTART_ATTEMPT_ENV] == "0"
    assert sim.env("gj-worker-0", "side")[RESTART_ATTEMPT_ENV] == "mine"
    init = sim.pod("gj-worker-0")["spec"]["initContainers"][0]
    assert {e["name"]: e["value"] for e in init["env"]}[RESTART_ATTEMPT_ENV] == "0"
    assert "PYTHONFAULTHANDLER" not in sim.env("gj-worker-0", "main")  # only with a progress deadline
    for attempt in (1, 2):
        sim.fail("gj-worker-0", 1)
        sim.settle(start="Running")
        assert sim.env("gj-worker-0", "main")[RESTART_ATTEMPT_ENV] == str(attempt)
