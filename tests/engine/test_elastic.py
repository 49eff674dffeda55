"""Elastic training [§3.5, §4.7]: ``expectedReplicas`` split by ``scalingWeight``, scaling up
and down, relaunches that count no restart.
"""

from __future__ import annotations

from .jobs import deepspeed, pytorch
from .sim import Sim, created_pods, deleted_pods, started


def elastic_job(expected, *, weights=(1, 2), lo=2, hi=12):
    m = pytorch(
        [("a", 1), ("b", 1)],
        name="el",
        torchrunConfig={"enabled": True},
        elastic={"enabled": True, "minReplicas": lo, "maxReplicas": hi, "expectedReplicas": expected},
    )
    for spec, w in zip(m["spec"]["replicaSpecs"], weights):
        spec["scalingWeight"] = w
    return m


def test_elastic_splits_expected_replicas_by_scaling_weight():
    plan = Sim(elastic_job(6)).step()
    assert sorted(created_pods(plan)) == ["el-a-0", "el-a-1", "el-b-0", "el-b-1", "el-b-2", "el-b-3"]


def test_elastic_expected_is_clamped_to_max():
    plan = Sim(elastic_job(100, weights=(1, 1), hi=4)).step()
    assert len(created_pods(plan)) == 4


def test_elastic_torchrun_nnodes_is_min_max():
    sim = Sim(elastic_job(6, lo=2, hi=12))
    sim.step()
    assert sim.container("el-b-0")["args"][0] == "--nnodes=2:12"


def test_elastic_scale_up_creates_next_indices():
    sim = Sim(
        pytorch(
            [("worker", 1)],
            name="el",
            torchrunConfig={"enabled": True},
            elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 8, "expectedReplicas": 3},
        )
    )
    sim.settle()
    sim.step()
    assert sim.live() == ["el-worker-0", "el-worker-1", "el-worker-2"]
    sim.edit(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 8, "expectedReplicas": 5})
    plan = sim.step()
    assert sorted(created_pods(plan)) == ["el-worker-3", "el-worker-4"]
    assert deleted_pods(plan) == []


def test_elastic_scale_down_deletes_highest_indices():
    sim = Sim(
        pytorch(
            [("worker", 1)],
            name="el",
            torchrunConfig={"enabled": True},
            elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 8, "expectedReplicas": 5},
        )
    )
    sim.settle()
    sim.step()
    sim.edit(elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 8, "expectedReplicas": 3})
    plan = sim.step()
    assert sorted(deleted_pods(plan)) == ["el-worker-3", "el-worker-4"]
    assert created_pods(plan) == []
    assert sim.live() == ["el-worker-0", "el-worker-1", "el-worker-2"]
    assert sum(sim.status.aggregate.dump().values()) == 3
    assert sim.status.backoff_count == 0
    assert sim.status.phase == "Running"


def test_elastic_pod_group_min_member_is_min_replicas():
    m = elastic_job(6, lo=3, hi=12)
    m["spec"]["scheduler"] = {"t9kScheduler": {"queue": "q1"}}
    plan = Sim(m).step()
    pg = next(o for o in plan.create if o["kind"] == "PodGroup")
    assert pg["spec"]["minMember"] == 3


def test_elastic_remainder_goes_to_the_first_specs():
    plan = Sim(elastic_job(5, weights=(1, 1))).step()
    assert sorted(created_pods(plan)) == ["el-a-0", "el-a-1", "el-a-2", "el-b-0", "el-b-1"]


def test_deepspeed_elastic_scale_up_reaches_the_launcher():
    """§4.7: a new expectedReplicas rewrites the hostfile and relaunches worker-0 (the launcher),
    without counting a restart; the other workers keep running."""
    elastic = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 2}
    sim = started(deepspeed(2, name="ds", elastic=elastic))
    worker1 = sim.pods["ds-worker-1"].uid
    sim.edit(elastic={**elastic, "expectedReplicas": 3})
    plan = sim.step()
    assert [o["metadata"]["name"] for o in plan.update] == ["ds-launch"]
    assert deleted_pods(plan) == ["ds-worker-0"]
    assert any(e.reason == "RelaunchingReplica" for e in plan.events)
    sim.settle()
    assert "ds-worker-2" in sim.others[("ConfigMap", "ds-launch")]["data"]["hostfile"]
    assert "ds-worker-2" in " ".join(sim.container("ds-worker-0", "worker")["command"])
    assert sim.pods["ds-worker-1"].uid == worker1
    assert sim.status.backoff_count == 0 and sim.status.phase == "Running"
    assert all(rs.restart_count == 0 for t in sim.status.tasks for rs in t.replicas)


def test_deepspeed_elastic_scale_down_prunes_services_and_relaunches():
    elastic = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 3}
    sim = started(deepspeed(3, name="ds", elastic=elastic))
    sim.edit(elastic={**elastic, "expectedReplicas": 2})
    plan = sim.step()
    assert ("Service", "ds-worker-2") in [(d.kind, d.name) for d in plan.delete]
    assert sorted(deleted_pods(plan)) == ["ds-worker-0", "ds-worker-2"]
    sim.settle()
    assert ("Service", "ds-worker-2") not in sim.others
    assert "ds-worker-2" not in sim.others[("ConfigMap", "ds-launch")]["data"]["hostfile"]
    assert sorted(sim.live()) == ["ds-worker-0", "ds-worker-1"]


def elastic_workers(expected: int) -> dict:
    return {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": expected}


def test_elastic_scale_down_then_up_within_grace_period_is_no_restart():
    m = pytorch(
        [("master", 1), ("worker", 1)],
        name="el",
        policy="Never",
        torchrunConfig={"enabled": True},
        elastic=elastic_workers(2),
    )
    sim = started(m, graceful=True)
    sim.edit(elastic=elastic_workers(1))
    assert deleted_pods(sim.step()) == ["el-worker-0"]
    sim.edit(elastic=elastic_workers(2))  # wanted again while its pod still terminates
    plan = sim.step()
    assert created_pods(plan) == [] and deleted_pods(plan) == []
    sim.gc()
    plan = sim.step()
    assert created_pods(plan) == ["el-worker-0"]
    assert sim.status.backoff_count == 0
    assert sim.replica("el-worker-0").phase == "Creating"
    assert sim.status.phase == "Running"


def test_finished_status_is_final_when_a_terminating_replica_is_wanted_again():
    m = pytorch(
        [("master", 1), ("worker", 1)],
        name="el",
        torchrunConfig={"enabled": True},
        elastic=elastic_workers(2),
    )
    sim = started(m, graceful=True)
    sim.edit(elastic=elastic_workers(1))
    sim.step()
    sim.succeed("el-master-0")
    sim.edit(elastic=elastic_workers(2))
    sim.step()
    assert sim.status.phase == "Succeeded"
    assert sim.plan().status == sim.status
