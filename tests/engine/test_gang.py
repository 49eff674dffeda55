"""``spec.scheduler.t9kScheduler`` in each gang mode a runtime reports (``Runtime.gang``).

``t9k``: T9k's PodGroup (test_desired.py covers it); ``native``: a ``scheduling.k8s.io/v1beta1``
PodGroup and ``schedulingGroup`` on the pods (Kubernetes 1.37 with ``GenericWorkload``; the real
API server and node tests are in tests/cluster and tests/node); ``none``: the default scheduler,
a ``GangScheduling`` condition and one Warning.
"""

from __future__ import annotations

import pytest

from .jobs import colossalai, pytorch
from .sim import Sim

SCHED = {"t9kScheduler": {"queue": "gpu", "priority": 40}}


def created(plan, kind):
    return [o for o in plan.create if o["kind"] == kind]


def gang_events(sim: Sim) -> list[tuple[str, str, str]]:
    events = [e for plan in sim.plans for e in plan.events]
    return [(e.type, e.reason, e.message) for e in events if e.reason == "GangNotEnforced"]


def test_native_pod_group_and_pod_fields():
    sim = Sim(pytorch([("master", 1), ("worker", 2)], name="j", scheduler=SCHED), gang="native")
    plan = sim.step()
    (pg,) = created(plan, "PodGroup")
    assert pg["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert pg["metadata"]["name"] == "j"
    assert pg["metadata"]["ownerReferences"][0]["uid"] == "job-uid"
    assert pg["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 3}},
        "disruptionMode": {"all": {}},
        "priorityClassName": "t9k-priority-40",
    }
    pods = created(plan, "Pod")
    assert len(pods) == 3
    for pod in pods:
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "j"}
        assert pod["spec"]["priorityClassName"] == "t9k-priority-40"
        assert "schedulerName" not in pod["spec"]
        labels = pod["metadata"]["labels"]
        assert "scheduler.tensorstack.dev/queue" not in labels
        assert "scheduler.tensorstack.dev/group-name" not in labels
    assert sim.condition("GangScheduling") is None
    assert created(sim.step(), "PodGroup") == []  # made once


def test_native_elastic_min_count_is_min_replicas():
    m = pytorch(
        [("a", 1), ("b", 1)],
        name="el",
        torchrunConfig={"enabled": True},
        elastic={"enabled": True, "minReplicas": 3, "maxReplicas": 12, "expectedReplicas": 6},
        scheduler=SCHED,
    )
    (pg,) = created(Sim(m, gang="native").step(), "PodGroup")
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3


def test_native_template_scheduler_name_gives_way_to_the_default():
    m = pytorch(name="j", scheduler=SCHED)
    for spec in m["spec"]["replicaSpecs"]:
        spec["template"]["spec"]["schedulerName"] = "my-scheduler"
    sim = Sim(m, gang="native")
    sim.step()
    assert "schedulerName" not in sim.pod("j-master-0")["spec"]


def test_native_colossalai_launcher_joins_the_gang():
    # Started alone, the launcher would hold its node while the workers wait for theirs.
    sim = Sim(colossalai(3, name="cai", scheduler=SCHED), gang="native")
    plan = sim.step()
    (pg,) = created(plan, "PodGroup")
    assert pg["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    assert sim.pod("cai-launcher")["spec"]["schedulingGroup"] == {"podGroupName": "cai"}
    assert sim.pod("cai-worker-0")["spec"]["schedulingGroup"] == {"podGroupName": "cai"}


def test_t9k_mode_colossalai_launcher_stays_out_of_t9ks_group():
    sim = Sim(colossalai(3, name="cai", scheduler=SCHED))
    (pg,) = created(sim.step(), "PodGroup")
    assert pg["spec"]["minMember"] == 3
    assert "scheduler.tensorstack.dev/group-name" not in sim.pod("cai-launcher")["metadata"]["labels"]


def test_native_a_class_the_template_names_is_kept_and_named_by_the_group():
    m = pytorch(name="j", scheduler=SCHED)
    for spec in m["spec"]["replicaSpecs"]:
        spec["template"]["spec"]["priorityClassName"] = "team-high"
    sim = Sim(m, gang="native")
    (pg,) = created(sim.step(), "PodGroup")
    assert pg["spec"]["priorityClassName"] == "team-high"
    assert sim.pod("j-master-0")["spec"]["priorityClassName"] == "team-high"


def priority_events(sim: Sim) -> list[tuple[str, str, str]]:
    events = [e for plan in sim.plans for e in plan.events]
    return [(e.type, e.reason, e.message) for e in events if e.reason == "PriorityNotEnforced"]


def test_native_names_the_class_the_cluster_has():
    sim = Sim(pytorch([("master", 1), ("worker", 2)], name="j", scheduler=SCHED), gang="native",
              priority_classes=frozenset({"t9k-priority-40", "system-cluster-critical"}))  # fmt: skip
    plan = sim.step()
    (pg,) = created(plan, "PodGroup")
    assert pg["spec"]["priorityClassName"] == "t9k-priority-40"
    assert all(p["spec"]["priorityClassName"] == "t9k-priority-40" for p in created(plan, "Pod"))
    assert sim.condition("Priority") is None and priority_events(sim) == []


def test_native_without_the_class_runs_at_the_default_priority_with_one_warning():
    """Issue 33: the operator makes no PriorityClass; a priority the admin did not allow (no
    t9k-priority-N) leaves the pods and the PodGroup without a class: the default priority, which
    preempts nobody. A condition says so while it holds, one Warning when it first appears."""
    sim = Sim(pytorch([("master", 1), ("worker", 2)], name="j", scheduler=SCHED), gang="native",
              priority_classes=frozenset({"t9k-priority-50"}))  # fmt: skip
    plan = sim.step()
    (pg,) = created(plan, "PodGroup")
    assert "priorityClassName" not in pg["spec"]
    pods = created(plan, "Pod")
    assert len(pods) == 3
    for pod in pods:
        assert "priorityClassName" not in pod["spec"] and "priority" not in pod["spec"]
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "j"}
    cond = sim.condition("Priority")
    assert (cond.status, cond.reason) == ("False", "NoPriorityClass")
    assert cond.message.startswith(
        "spec.scheduler.t9kScheduler.priority (40) is not enforced: this cluster has no PriorityClass t9k-priority-40"
    ), cond.message
    assert "jobPriorities.allowed" in cond.message
    sim.run_all()
    sim.step()
    sim.step()
    assert sim.status.phase == "Running"
    assert sim.condition("Priority").last_transition_time == cond.last_transition_time
    assert priority_events(sim) == [("Warning", "PriorityNotEnforced", cond.message)]
    # The admin allows the priority: the condition goes; pods made from then on name the class.
    sim.priority_classes = frozenset({"t9k-priority-40"})
    sim.step()
    assert sim.condition("Priority") is None
    assert priority_events(sim) == [("Warning", "PriorityNotEnforced", cond.message)]


def test_no_priority_condition_where_the_priority_goes_elsewhere():
    """Kueue carries the priority in the Workload; T9k's PodGroup in its spec; a template's own
    class or priority is the user's; without known classes (render) every class is taken to exist."""
    own = pytorch(name="j", scheduler=SCHED)
    for spec in own["spec"]["replicaSpecs"]:
        spec["template"]["spec"]["priorityClassName"] = "team-high"
    none = frozenset()
    for manifest, kw in (
        (pytorch(name="j", scheduler=SCHED), {"gang": "native", "queueing": True, "priority_classes": none}),
        (pytorch(name="j", scheduler=SCHED), {"gang": "t9k", "priority_classes": none}),
        (own, {"gang": "native", "priority_classes": none}),
        (pytorch(name="j"), {"gang": "native", "priority_classes": none}),
        (pytorch(name="j", scheduler=SCHED), {"gang": "native"}),
    ):
        sim = Sim(manifest, **kw)
        sim.step()
        assert sim.condition("Priority") is None, kw
        assert priority_events(sim) == [], kw
    sim = Sim(own, gang="native", priority_classes=none)
    (pg,) = created(sim.step(), "PodGroup")
    assert pg["spec"]["priorityClassName"] == "team-high"  # the user's class: the admission plugin judges it


def test_a_job_priority_class_is_the_admins_to_make():
    from t9k_jobs.deploy.rbac import priority_class

    pc = priority_class(100)
    assert pc["metadata"]["name"] == "t9k-priority-100" and pc["value"] == 100
    assert (pc["globalDefault"], pc["preemptionPolicy"]) == (False, "PreemptLowerPriority")
    assert priority_class(0, "Never")["preemptionPolicy"] == "Never"
    for bad in (101, -1, True, 7.0, "7"):
        with pytest.raises(ValueError, match="from 0 to 100"):
            priority_class(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="preemptionPolicy"):
        priority_class(5, "Sometimes")


def test_none_default_scheduler_condition_and_one_warning():
    sim = Sim(pytorch([("master", 1), ("worker", 2)], name="j", scheduler=SCHED), gang="none")
    plan = sim.step()
    assert created(plan, "PodGroup") == []
    for pod in created(plan, "Pod"):
        assert "schedulerName" not in pod["spec"]
        assert "schedulingGroup" not in pod["spec"]
        assert "scheduler.tensorstack.dev/queue" not in pod["metadata"]["labels"]
    cond = sim.condition("GangScheduling")
    assert (cond.status, cond.reason) == ("False", "NotEnforced")
    assert "queue gpu, priority 40" in cond.message
    assert "not enforced" in cond.message
    sim.run_all()
    sim.step()
    sim.step()
    assert sim.status.phase == "Running"
    assert sim.condition("GangScheduling").last_transition_time == cond.last_transition_time
    assert gang_events(sim) == [("Warning", "GangNotEnforced", cond.message)]


def test_none_without_t9k_scheduler_says_nothing():
    sim = Sim(pytorch(name="j"), gang="none")
    sim.step()
    assert sim.condition("GangScheduling") is None
    assert gang_events(sim) == []


def test_t9k_mode_has_no_gang_condition():
    sim = Sim(pytorch(name="j", scheduler=SCHED))
    sim.step()
    assert sim.condition("GangScheduling") is None
    assert sim.pod("j-master-0")["spec"]["schedulerName"] == "t9k-scheduler"


def queue_events(sim: Sim) -> list[tuple[str, str, str]]:
    events = [e for plan in sim.plans for e in plan.events]
    return [(e.type, e.reason, e.message) for e in events if e.reason == "QueueNotEnforced"]


def test_native_without_kueue_says_the_queue_is_not_enforced_once():
    """A native PodGroup has no queue, and without Kueue nothing else takes it (issue 32): a
    condition and one Warning say so, where it was dropped in silence."""
    sim = Sim(pytorch([("master", 1), ("worker", 2)], name="j", scheduler=SCHED), gang="native")
    plan = sim.step()
    (pg,) = created(plan, "PodGroup")
    assert "queue" not in str(pg["spec"])
    cond = sim.condition("Queueing")
    assert (cond.status, cond.reason) == ("False", "NotEnforced")
    assert cond.message.startswith("spec.scheduler.t9kScheduler.queue (gpu) is not enforced: this cluster gang-schedules")
    sim.run_all()
    sim.step()
    sim.step()
    assert sim.status.phase == "Running"
    assert sim.condition("Queueing").last_transition_time == cond.last_transition_time
    assert queue_events(sim) == [("Warning", "QueueNotEnforced", cond.message)]


def test_a_queue_that_is_enforced_or_not_asked_for_says_nothing():
    for manifest, kw in (
        (pytorch(name="j", scheduler=SCHED), {"gang": "native", "queueing": True}),  # Kueue takes the queue
        (pytorch(name="j", scheduler=SCHED), {"gang": "t9k"}),  # T9k's scheduler takes it
        (pytorch(name="j", scheduler={"t9kScheduler": {"priority": 3}}), {"gang": "native"}),  # no queue named
    ):
        sim = Sim(manifest, **kw)
        sim.step()
        assert sim.condition("Queueing") is None, kw
        assert queue_events(sim) == [], kw


def test_a_runtime_names_one_of_the_three_gang_modes():
    """The gang mode is the runtime's, fixed for its life (``Runtime.gang``); a mode that is not
    one of the three is a caller's mistake, said when the runtime is made, not on every pass."""
    from t9k_jobs.engine import Runtime

    assert [Runtime(gang=g).gang for g in ("t9k", "native", "none")] == ["t9k", "native", "none"]
    with pytest.raises(ValueError, match="gang mode 'volcano' is not one of t9k, native, none"):
        Runtime(gang="volcano")  # type: ignore[arg-type]
