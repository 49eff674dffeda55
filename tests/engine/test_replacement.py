"""How a replica's replacement is told from the pod it replaces (:mod:`t9k_jobs.engine.replicas`):
by the pod alone, its restart-attempt label (``restart-generation``) against the replica's restart
count, or its deletion while the replica waits for a new pod; never by a marker in the status.
Statuses written before this rule (``Creating`` with the old pod's uid) are still read.
"""

from __future__ import annotations

from dataclasses import replace

from t9k_jobs.api.common import JobStatus

from .jobs import deepspeed, pytorch
from .sim import Sim, created_pods, deleted_pods, started


def as_written(sim: Sim, status: JobStatus) -> None:
    """Give the job ``status`` as read back from the API server (camelCase JSON)."""
    raw = status.model_dump_json(by_alias=True, exclude_none=True)
    sim.job = sim.job.model_copy(update={"status": JobStatus.model_validate_json(raw)})


def edit_replica(status: JobStatus, name: str, **fields) -> None:
    for task in status.tasks:
        for rs in task.replicas:
            if rs.name == name:
                for k, v in fields.items():
                    setattr(rs, k, v)


def test_each_pod_carries_its_restart_attempt():
    """A replica's pod is labelled with the replica's restart count when it was made (the label
    keeps its on-cluster name, ``restart-generation``); a restart makes the next attempt, and a
    pod of an earlier one is the pod being replaced."""
    sim = started(pytorch(name="j", policy="OnFailure"))
    assert sim.pod("j-worker-0")["metadata"]["labels"]["batch.tensorstack.dev/restart-generation"] == "0"
    sim.fail("j-worker-0", 1)
    plan = sim.step()
    assert deleted_pods(plan) == ["j-worker-0"]
    sim.settle()
    assert sim.pod("j-worker-0")["metadata"]["labels"]["batch.tensorstack.dev/restart-generation"] == "1"
    assert sim.pods["j-worker-0"].restart_attempt == 1


def test_a_pod_of_an_earlier_restart_attempt_is_replaced_whatever_the_status_says():
    """The restart attempt is read from the pod: a status whose restart marker was lost (written
    by hand, restored from a backup) still has its old attempt's pod replaced, not adopted."""
    sim = started(pytorch(name="j", policy="OnFailure"))
    sim.fail("j-worker-0", 1)
    old = sim.pods["j-worker-0"]  # restart attempt 0
    sim.step()  # restart counted (worker-0 is now at attempt 1), its pod deleted
    status = sim.status.model_copy(deep=True)
    for task in status.tasks:
        for rs in task.replicas:
            if rs.name == "j-worker-0":
                rs.phase, rs.uid = "Failed", ""  # the marker gone
    sim.job = sim.job.model_copy(update={"status": status})
    sim.pods["j-worker-0"] = replace(old, deleting=False)
    plan = sim.step()
    assert deleted_pods(plan) == ["j-worker-0"]
    assert sim.status.phase == "Running"
    assert sim.status.backoff_count == 1, "the old pod's end was counted once, not again"
    assert not any(e.reason == "RestartingReplica" for e in plan.events)


def test_a_replica_being_replaced_carries_no_uid():
    """The status of a replica whose pod is being replaced says ``Creating`` with what the old pod
    showed and no uid; a stale view that still shows the old pod, not deleting, changes nothing."""
    sim = started(pytorch(name="j", policy="OnFailure"))
    sim.fail("j-worker-0", 137)
    old = sim.pods["j-worker-0"]
    sim.step()
    rs = sim.replica("j-worker-0")
    assert (rs.phase, rs.uid, rs.restart_count) == ("Creating", "", 1)
    assert rs.containers[0].exit_code == 137
    sim.pods["j-worker-0"] = old  # the deletion not seen yet
    again = sim.plan()
    assert deleted_pods(again) == ["j-worker-0"] and created_pods(again) == []
    assert again.status == sim.status
    assert sim.condition("ReplicaFailure").status == "False", "a replica being replaced waits for nothing"


def test_an_older_status_with_the_uid_marker_is_read_without_a_second_restart():
    """Migration: before issue 23 a replica being replaced was recorded ``Creating`` with the old
    pod's uid. Such a status, beside that pod (failed, its deletion not yet under way, made before
    pods carried a restart attempt), is read: the pod is deleted once, the restart is not counted
    again, and the status written no longer carries the uid."""
    sim = started(pytorch(name="j", policy="OnFailure", backoff=1))
    sim.fail("j-worker-0", 1)
    old = sim.pods["j-worker-0"]
    # What the older version wrote on the pass that decided the restart.
    status = sim.status.model_copy(deep=True)
    edit_replica(status, "j-worker-0", phase="Creating", uid=old.uid, restart_count=1)
    status.task("worker").restart_count = 1
    status.backoff_count = 1
    as_written(sim, status)
    sim.pods["j-worker-0"] = replace(old, restart_attempt=None)  # no restart-generation label
    plan = sim.step()
    assert deleted_pods(plan) == ["j-worker-0"]
    assert not [e for e in plan.events if e.reason == "RestartingReplica"]
    assert sim.status.backoff_count == 1 and sim.status.phase == "Running"
    rs = sim.replica("j-worker-0")
    assert (rs.phase, rs.uid, rs.restart_count) == ("Creating", "", 1)
    plan = sim.step(start="Running")
    assert created_pods(plan) == ["j-worker-0"]
    assert sim.pods["j-worker-0"].restart_attempt == 1
    sim.step()
    assert sim.status.backoff_count == 1 and sim.status.phase == "Running"
    assert sim.replica("j-worker-0").phase == "Running"


def test_an_older_status_marking_a_relaunch_is_not_judged_as_a_failure():
    """Migration, uncounted: an older version relaunched the other ranks of a DeepSpeedJob whose
    rank the scheduler preempted, marking them ``Creating`` with their uid, and stopped before its
    deletes went out. A rank that then exits 143 is relaunched, not judged: with backoffLimit 0 a
    judged failure would end the job."""
    sim = Sim(deepspeed(2, name="ds", backoff=0, policy="OnFailure"), graceful=True)
    sim.settle(start="Running")
    sim.step()
    sim.disrupt("ds-worker-0", end=143)
    status = sim.status.model_copy(deep=True)
    for name in ("ds-worker-0", "ds-worker-1"):
        reason = "PreemptionByScheduler" if name == "ds-worker-0" else None
        edit_replica(status, name, phase="Creating", uid=sim.pods[name].uid, reason=reason)
    as_written(sim, status)
    sim.fail("ds-worker-1", 143)  # not deleting: the older version's delete never went out
    plan = sim.step()
    assert deleted_pods(plan) == ["ds-worker-1"]
    assert sim.status.phase != "Failed" and sim.status.backoff_count == 0
    assert all(rs.uid == "" for t in sim.status.tasks for rs in t.replicas)
    sim.gc()
    assert sorted(created_pods(sim.step(start="Running"))) == ["ds-worker-0", "ds-worker-1"]
    sim.step()
    assert sim.status.phase == "Running" and sim.status.backoff_count == 0
