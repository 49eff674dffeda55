"""A replica whose node is lost (issue 25; :mod:`t9k_jobs.engine.node_loss`): after the node has
been unreachable for ``node_lost_after`` seconds the replica has failed with reason ``NodeLost``,
its pod is deleted, then force-deleted once its grace period has passed, and the restart policy
decides what follows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.engine.node_loss import FORCE_DELETED, NODE_LOST, project, wake

from .jobs import colossalai, deepspeed, generic, pytorch
from .sim import Sim, created_pods, deleted_pods


def events(sim: Sim, reason: str) -> list[str]:
    return [e.message for plan in sim.plans for e in plan.events if e.reason == reason]


def placed(sim: Sim, nodes: dict[str, str]) -> None:
    """Bind running pods to nodes (``spec.nodeName``)."""
    for name, node in nodes.items():
        sim.pods[name] = replace(sim.pods[name], node=node)


def running(policy: str = "OnFailure", limit: int = 3, **spec) -> Sim:
    sim = Sim(generic([("worker", 2)], name="gj", policy=policy, limit=limit, **spec), graceful=True)
    sim.settle(start="Running")
    sim.step()
    placed(sim, {"gj-worker-0": "n1", "gj-worker-1": "n2"})
    assert sim.status.phase == "Running"
    return sim


def test_a_replica_on_a_lost_node_is_replaced_after_the_limit_and_the_grace_period() -> None:
    sim = running()
    old_uid = sim.pods["gj-worker-1"].uid
    sim.unreachable["n2"] = sim.now  # its Ready condition left True now
    sim.tick(59)
    plan = sim.step()
    assert plan.delete == [] and not events(sim, NODE_LOST)
    assert plan.requeue_after == pytest.approx(1.0)  # looks again when the limit passes
    assert sim.replica("gj-worker-1").phase == "Running"

    sim.tick(1)
    plan = sim.step()
    assert [(d.name, d.reason, d.force) for d in plan.delete] == [("gj-worker-1", NODE_LOST, False)]
    [message] = events(sim, NODE_LOST)
    assert "node n2 unreachable since" in message and "60 s limit" in message and "gj-worker-1" in message
    rs = sim.replica("gj-worker-1")
    assert rs.phase == "Creating" and rs.restart_count == 1  # a failure: counted
    assert sim.status.phase == "Running"

    # Deleted, but no kubelet confirms: the pod stays until its grace period (30 s) has passed.
    sim.tick(29)
    plan = sim.step()
    assert plan.delete == [] and created_pods(plan) == []
    assert plan.requeue_after == pytest.approx(1.0)
    sim.tick(1)
    plan = sim.step()
    assert [(d.name, d.uid, d.force) for d in plan.delete] == [("gj-worker-1", old_uid, True)]
    [forced] = events(sim, FORCE_DELETED)
    assert "gj-worker-1" in forced and "node n2" in forced
    assert "gj-worker-1" not in sim.pods

    plan = sim.step(start="Running")
    assert created_pods(plan) == ["gj-worker-1"] and sim.pods["gj-worker-1"].uid != old_uid
    placed(sim, {"gj-worker-1": "n1"})
    assert len(events(sim, NODE_LOST)) == 1 and len(events(sim, FORCE_DELETED)) == 1
    for name in ("gj-worker-0", "gj-worker-1"):
        sim.succeed(name)
    sim.step()
    assert sim.status.phase == "Succeeded"
    assert sim.replica("gj-worker-1").restart_count == 1


def test_a_node_back_before_the_limit_changes_nothing() -> None:
    sim = running()
    sim.unreachable["n2"] = sim.now
    sim.tick(30)
    assert sim.step().delete == []
    del sim.unreachable["n2"]
    sim.tick(60)
    plan = sim.step()
    assert plan.delete == [] and plan.requeue_after is None
    assert sim.status.backoff_count == 0 and not events(sim, NODE_LOST)


def test_a_never_replica_on_a_lost_node_fails_the_job_with_reason_node_lost() -> None:
    sim = running(policy="Never", limit=0)
    sim.unreachable["n2"] = sim.now - 61
    plan = sim.step()
    assert sim.status.phase == "Failed"
    cond = sim.condition("Failed")
    assert cond is not None and NODE_LOST in (cond.message or ""), cond
    rs = sim.replica("gj-worker-1")
    assert (rs.phase, rs.reason) == ("Failed", NODE_LOST)
    assert "node n2 unreachable" in (rs.message or "")
    assert ("gj-worker-1", NODE_LOST) in [(d.name, d.reason) for d in plan.delete]
    # The finished job still frees the name: force-deleted after the grace period.
    sim.tick(30)
    plan = sim.step()
    assert [(d.name, d.force) for d in plan.delete] == [("gj-worker-1", True)]
    assert sim.status.phase == "Failed"
    assert "gj-worker-1" not in sim.pods


def test_a_pod_deleted_before_its_node_is_lost_is_force_deleted_once_both_have_passed() -> None:
    """A pod whose deletion someone else started (the clean-up, a pause) on a node that then stops
    answering: force-deleted when the node is lost and its grace period has passed."""
    sim = running()
    sim.pods["gj-worker-1"] = replace(sim.pods["gj-worker-1"], deleting=True, deletion_deadline=sim.now + 5)
    sim.unreachable["n2"] = sim.now
    assert wake(sim.observed(), sim.now, sim.node_lost_after) == pytest.approx(60.0)
    sim.tick(60)
    plan = sim.step()
    assert [(d.name, d.force) for d in plan.delete] == [("gj-worker-1", True)]


def test_a_node_back_after_the_delete_lets_its_kubelet_finish() -> None:
    sim = running()
    sim.unreachable["n2"] = sim.now - 60
    sim.step()  # deleted, reason NodeLost
    del sim.unreachable["n2"]  # the kubelet answers again before the grace period passes
    sim.tick(60)
    plan = sim.step()
    assert not any(d.force for d in plan.delete) and not events(sim, FORCE_DELETED)
    sim.gc()  # the kubelet stops the container and the pod goes
    plan = sim.step(start="Running")
    assert created_pods(plan) == ["gj-worker-1"]


def test_pods_that_ended_before_the_node_was_lost_keep_their_end() -> None:
    sim = running(successRules=[{"worker": [0, 1]}])
    sim.succeed("gj-worker-1")
    sim.unreachable["n2"] = sim.now - 120
    observed = project(sim.observed(), sim.now, sim.node_lost_after)
    assert observed.pods["gj-worker-1"].effective_phase == "Succeeded"
    plan = sim.step()
    assert deleted_pods(plan) == [] and sim.replica("gj-worker-1").phase == "Succeeded"


def test_every_rank_of_a_pytorch_job_restarts_on_its_policy_when_one_node_is_lost() -> None:
    sim = Sim(pytorch([("master", 1), ("worker", 1)], name="j", policy="OnFailure", backoff=2), graceful=True)
    sim.settle(start="Running")
    sim.step()
    placed(sim, {"j-master-0": "n1", "j-worker-0": "n2"})
    sim.unreachable["n2"] = sim.now - 60
    plan = sim.step()
    assert ("j-worker-0", NODE_LOST) in [(d.name, d.reason) for d in plan.delete]
    # A lost node is not the program's fault: restarted, not counted against backoffLimit
    # (issue 43; engine/failure_policy.py), unless a failure rule says so.
    assert sim.status.backoff_count == 0 and sim.status.phase != "Failed"
    assert sim.replica("j-worker-0").restart_count == 1


def test_a_deepspeed_worker_on_a_lost_node_relaunches_every_worker_once_its_pod_is_gone() -> None:
    """DeepSpeed's ranks cannot rejoin (restart scope ``all``): every worker restarts (a lost node
    counts no backoff), and the lost one's new pod waits until the forced delete frees its name."""
    sim = Sim(deepspeed(3, name="ds", backoff=3), graceful=True)
    sim.settle(start="Running")
    sim.step()
    placed(sim, {"ds-worker-0": "n1", "ds-worker-1": "n1", "ds-worker-2": "n2"})
    sim.unreachable["n2"] = sim.now - 60
    plan = sim.step()
    assert sorted(deleted_pods(plan)) == ["ds-worker-0", "ds-worker-1", "ds-worker-2"]
    assert sim.status.backoff_count == 0 and sim.status.phase == "Running"
    # The Ready node's kubelet stops its two; the lost one stays Terminating.
    sim.pods = {n: p for n, p in sim.pods.items() if n == "ds-worker-2"}
    plan = sim.step(start="Running")
    assert "ds-worker-2" not in created_pods(plan)
    sim.tick(30)
    plan = sim.step(start="Running")
    assert [(d.name, d.force) for d in plan.delete] == [("ds-worker-2", True)]
    plan = sim.step(start="Running")
    assert "ds-worker-2" in created_pods(plan) and sim.status.backoff_count == 0


def test_colossalai_follows_its_rules_when_a_worker_node_is_lost() -> None:
    """ColossalAI restarts nothing: a worker lost with its node has ended, failed ``NodeLost``, and
    its pod is deleted; the job's end follows its launcher, whose ssh to that worker breaks
    (``test_restart.py``: the launcher's exit decides)."""
    sim = Sim(colossalai(2, name="cai"), graceful=True)
    sim.settle(start="Running")
    sim.step()
    placed(sim, {"cai-worker-0": "n1", "cai-worker-1": "n2"})
    sim.unreachable["n2"] = sim.now - 60
    plan = sim.step()
    assert ("cai-worker-1", NODE_LOST) in [(d.name, d.reason) for d in plan.delete]
    assert sim.replica("cai-worker-1").reason == NODE_LOST and sim.status.backoff_count == 0
    assert "cai-launcher" in sim.live() and sim.status.phase == "Running"
