"""Admission by a Kueue queue (issue 24; engine/admission.py, frameworks/queueing.py).

Where the runtime queues (``Runtime.queueing``: Kueue's Workload API is served) a job with
``t9kScheduler`` owns one Workload and has no pod until Kueue admits it; an eviction stops its pods
without counting anything and queues it again with a new Workload. The Workload's status is played
here by ``Sim.workload`` (Kueue's conditions as :class:`WorkloadState`); tests/node/test_kueue.py
runs the same with the real Kueue.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.engine import WorkloadState

from .jobs import generic, pytorch
from .sim import Sim

SCHED = {"t9kScheduler": {"queue": "team-a", "priority": 40}}
ADMITTED = WorkloadState(admitted=True, reason="Admitted", message="The workload is admitted", cluster_queue="cq")


def created(plan, kind):
    return [o for o in plan.create if o["kind"] == kind]


def deleted(plan, kind):
    return [(d.name, d.reason) for d in plan.delete if d.kind == kind]


def events(sim: Sim, *reasons: str) -> list[tuple[str, str, str]]:
    out = [(e.type, e.reason, e.message) for plan in sim.plans for e in plan.events]
    return [e for e in out if e[1] in reasons]


def queued_sim(manifest=None, **kw) -> Sim:
    return Sim(manifest or pytorch([("master", 1), ("worker", 2)], name="j", scheduler=SCHED), queueing=True, **kw)


def admit(sim: Sim, state: WorkloadState = ADMITTED) -> None:
    sim.workload = state


def test_the_workload_asks_for_the_queue_the_priority_and_every_replica():
    sim = queued_sim()
    plan = sim.step()
    (wl,) = created(plan, "Workload")
    assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert wl["metadata"]["name"] == "j" and wl["metadata"]["namespace"] == "demo"
    assert wl["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert wl["metadata"]["ownerReferences"][0]["controller"] is True
    assert wl["spec"]["queueName"] == "team-a"
    assert wl["spec"]["priority"] == 40
    assert [(s["name"], s["count"]) for s in wl["spec"]["podSets"]] == [("master", 1), ("worker", 2)]
    assert wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"
    # No pod before admission, not even a gated one; no pod carries Kueue's queue label.
    assert created(plan, "Pod") == []


@pytest.mark.parametrize("queue", [None, ""])
def test_no_queue_means_the_default_local_queue(queue):
    sched = {"t9kScheduler": {"queue": queue, "priority": 0}}
    (wl,) = created(queued_sim(pytorch(name="j", scheduler=sched)).step(), "Workload")
    assert wl["spec"]["queueName"] == "default"
    assert wl["spec"]["priority"] == 0


def test_a_job_waits_with_no_pod_and_says_what_kueue_says():
    sim = queued_sim()
    sim.step()
    assert sim.status.phase == "Pending"
    q = sim.condition("Queued")
    assert (q.status, q.reason) == ("True", "Creating")
    sim.step()  # made; Kueue has not written a condition yet
    q = sim.condition("Queued")
    assert (q.status, q.reason) == ("True", "Submitted") and "Kueue has not looked at its Workload yet" in q.message
    sim.workload = WorkloadState(reason="Inadmissible", message="LocalQueue team-a doesn't exist")
    plan = sim.step()
    assert created(plan, "Pod") == [] and sim.pods == {}
    q = sim.condition("Queued")
    assert (q.status, q.reason) == ("True", "Inadmissible")
    assert q.message == "waiting in LocalQueue team-a: LocalQueue team-a doesn't exist"
    assert [r.phase for t in sim.status.tasks for r in t.replicas] == ["Creating"] * 3
    assert sim.status.start_time is None  # the deadline's clock has not started
    sim.step()
    # Said once, as a Warning, for a queue that cannot admit the job as it stands.
    assert events(sim, "Inadmissible") == [("Warning", "Inadmissible", q.message)]
    sim.workload = WorkloadState(
        reason="Pending",
        message="couldn't assign flavors to pod set worker: insufficient unused quota for cpu in flavor default, 1 more needed",
    )
    sim.step()
    q = sim.condition("Queued")
    assert (q.status, q.reason) == ("True", "Pending") and "insufficient unused quota for cpu" in q.message


def test_admitted_the_pods_are_made_with_the_flavors_node_labels():
    sim = queued_sim(pytorch([("master", 1), ("worker", 2)], name="j", scheduler=SCHED, template=None))
    sim.step()
    admit(sim, replace(ADMITTED, node_selectors={"worker": {"pool": "gpu"}}))
    plan = sim.step(start="Running")
    assert sorted(p["metadata"]["name"] for p in created(plan, "Pod")) == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert sim.pod("j-worker-1")["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert "nodeSelector" not in sim.pod("j-master-0")["spec"]
    for name in sim.pods:
        assert not any(k.startswith("kueue.x-k8s.io/") for k in sim.pod(name)["metadata"]["labels"])
    q = sim.condition("Queued")
    assert (q.status, q.reason, q.message) == ("False", "Admitted", "admitted by ClusterQueue cq from LocalQueue team-a")
    assert events(sim, "Admitted") == [("Normal", "Admitted", q.message)]
    sim.step()
    assert sim.status.phase == "Running"
    assert created(sim.step(), "Workload") == []  # one Workload, made once


def test_an_eviction_stops_the_pods_counts_nothing_and_queues_the_job_again():
    sim = queued_sim(pytorch([("master", 1), ("worker", 2)], name="j", scheduler=SCHED, policy="Never"), graceful=True)
    sim.step()
    admit(sim)
    sim.settle()
    assert sim.status.phase == "Running"
    sim.workload = replace(ADMITTED, admitted=False, evicted="Preempted", reason="Preempted",
                           message="Preempted to accommodate a workload (UID: u, JobUID: j) due to prioritization in the ClusterQueue")  # fmt: skip
    plan = sim.step()
    assert sorted(deleted(plan, "Pod")) == [("j-master-0", "Evicted"), ("j-worker-0", "Evicted"), ("j-worker-1", "Evicted")]
    assert deleted(plan, "Workload") == []  # its quota is held until the pods are gone
    assert sim.status.phase == "Pending"
    q = sim.condition("Queued")
    assert (q.status, q.reason) == ("True", "Preempted") and q.message.startswith("evicted: Preempted to accommodate")
    # The pods end as SIGTERM ends them: not judged, even under restartPolicy Never.
    for name in list(sim.pods):
        sim.fail(name, 143)
    sim.step()
    assert sim.status.phase == "Pending" and sim.condition("Failed").status == "False"
    sim.gc()
    plan = sim.step()
    assert deleted(plan, "Workload") == [("j", "Requeue")]
    plan = sim.step()
    assert len(created(plan, "Workload")) == 1  # a new one, pending again
    assert sim.condition("Queued").reason == "Creating"
    admit(sim)
    sim.settle()
    assert sim.status.phase == "Running"
    assert sim.status.backoff_count == 0
    assert all(r.restart_count == 0 for t in sim.status.tasks for r in t.replicas)
    assert all(t.restart_count == 0 for t in sim.status.tasks)
    assert [e[1] for e in events(sim, "Evicted", "Admitted")] == ["Admitted", "Evicted", "Admitted"]
    for name in list(sim.pods):
        sim.succeed(name)
    sim.step()
    assert sim.status.phase == "Succeeded"


def test_a_finished_or_paused_job_gives_its_quota_back():
    sim = queued_sim(generic([("worker", 1)], name="gj", scheduler=SCHED))
    sim.step()
    admit(sim)
    sim.settle()
    sim.edit(runMode={"pause": {"enabled": True}})
    plan = sim.step()
    assert deleted(plan, "Workload") == [("gj", "Released")]
    assert sim.status.phase == "Paused"
    assert sim.condition("Queued").reason == "Paused"
    sim.edit(runMode={"pause": {"enabled": False}})
    plan = sim.step()
    assert len(created(plan, "Workload")) == 1 and created(plan, "Pod") == []
    admit(sim)
    sim.settle()
    sim.succeed("gj-worker-0")
    sim.step()
    assert sim.status.phase == "Succeeded"
    assert deleted(sim.plans[-1], "Workload") == [("gj", "Released")]
    assert ("Workload", "gj") not in sim.others


def test_a_changed_shape_queues_again():
    sim = queued_sim(generic([("worker", 2)], name="gj", scheduler=SCHED))
    sim.step()
    admit(sim)
    sim.settle()
    spec = sim.job.model_dump(by_alias=True, exclude_none=True, mode="json")["spec"]
    spec["replicaSpecs"][0]["replicas"] = 3
    sim.edit(replicaSpecs=spec["replicaSpecs"])
    plan = sim.step()
    assert deleted(plan, "Workload") == [("gj", "Changed")]
    plan = sim.step()
    (wl,) = created(plan, "Workload")
    assert wl["spec"]["podSets"][0]["count"] == 3
    assert deleted(plan, "Pod")  # not admitted with the new shape: its pods wait too


def test_without_t9k_scheduler_or_without_kueue_nothing_is_queued():
    sim = Sim(pytorch(name="j"), queueing=True)
    plan = sim.step(start="Running")
    assert created(plan, "Workload") == [] and len(created(plan, "Pod")) == 3
    assert sim.condition("Queued") is None
    sim = Sim(pytorch(name="j", scheduler=SCHED), queueing=False, gang="native")
    plan = sim.step()
    assert created(plan, "Workload") == [] and len(created(plan, "Pod")) == 3
    assert sim.condition("Queued") is None


def test_the_deadline_counts_from_admission():
    sim = queued_sim(pytorch([("worker", 1)], name="j", scheduler=SCHED, runPolicy={"activeDeadlineSeconds": 60}))
    sim.step()
    sim.tick(600)  # ten minutes in the queue
    sim.step()
    assert sim.status.phase == "Pending" and sim.status.start_time is None
    admit(sim)
    sim.settle()
    assert sim.status.phase == "Running"
    sim.tick(30)
    sim.step()
    assert sim.status.phase == "Running"
    sim.tick(31)
    sim.step()
    assert sim.status.phase == "Failed"


def test_a_job_running_before_kueue_came_is_left_running():
    sim = Sim(pytorch([("worker", 2)], name="j", scheduler=SCHED), gang="native")
    sim.settle()
    assert sim.status.phase == "Running"
    sim.queueing = True  # Kueue installed, the operator restarted
    plan = sim.step()
    assert created(plan, "Workload") == [] and deleted(plan, "Pod") == []
    assert sim.status.phase == "Running" and sim.condition("Queued") is None
    sim.succeed("j-worker-0")
    sim.succeed("j-worker-1")
    sim.step()
    assert sim.status.phase == "Succeeded"
