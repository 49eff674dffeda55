"""A job in one topology domain (issue 43, part 1; :mod:`t9k_jobs.engine.topology`): every pod's
affinity to the job's pods on the label, required or preferred; a native gang's PodGroup carries
the constraint; where no gang places the pods as a unit, a ``Topology`` condition and one Warning
say so, never silence; a local run is one domain."""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.api import ManifestError
from t9k_jobs.engine import WorkloadState, reconcile
from t9k_jobs.frameworks import parse_job

from .jobs import ctr, pytorch, tmpl
from .sim import Sim

KEY, MODE = "t9k-jobs.io/topology-key", "t9k-jobs.io/topology-mode"
RACK = "topology.kubernetes.io/rack"
SCHED = {"t9kScheduler": {"queue": "default", "priority": 10}}


def job(mode: str | None = None, scheduler: bool = True, template: dict | None = None) -> dict:
    manifest = pytorch(name="j", template=template, **({"scheduler": SCHED} if scheduler else {}))
    manifest["metadata"]["annotations"] = {KEY: RACK, **({MODE: mode} if mode else {})}
    return manifest


def term() -> dict:
    return {"labelSelector": {"matchLabels": {"tensorstack.dev/owner-kind": "PyTorchTrainingJob",
                                              "tensorstack.dev/owner-name": "j"}}, "topologyKey": RACK}  # fmt: skip


def warnings(sim: Sim) -> list[str]:
    return [e.message for plan in sim.plans for e in plan.events if e.reason == "TopologyNotEnforced"]


def test_required_on_a_native_gang_constrains_its_pod_group_and_keeps_its_pods_together() -> None:
    sim = Sim(job(), gang="native")
    sim.settle(start="Running")
    group = sim.others[("PodGroup", "j")]
    assert group["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}
    for pod in sim.specs.values():
        assert pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [term()]
    assert sim.condition("Topology") is None and warnings(sim) == []


def test_a_dropped_constraint_is_said_once_and_stays_a_condition() -> None:
    sim = Sim(job(), gang="native")
    sim.drops_constraints = True
    sim.settle(start="Running")
    cond = sim.condition("Topology")
    assert cond.status == "False" and cond.reason == "TopologyNotEnforced", cond
    assert "feature gate TopologyAwareWorkloadScheduling is off" in cond.message
    assert len(warnings(sim)) == 1


@pytest.mark.parametrize(("gang", "scheduler", "why"), [("t9k", True, "not native PodGroups"),
                                                         ("none", True, "not native PodGroups"),
                                                         ("native", False, "no t9kScheduler gang")])  # fmt: skip
def test_required_without_a_native_gang_is_said_not_placed_as_a_unit(gang: str, scheduler: bool, why: str) -> None:
    sim = Sim(job(scheduler=scheduler), gang=gang)
    sim.settle(start="Running")
    cond = sim.condition("Topology")
    assert cond is not None and why in cond.message and "kept in one domain of " + RACK in cond.message, cond
    assert len(warnings(sim)) == 1
    assert all(p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [term()]
               for p in sim.specs.values())  # fmt: skip


def test_preferred_is_a_soft_affinity_beside_the_templates_own_and_says_nothing() -> None:
    own = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}  # fmt: skip
    template = tmpl(ctr(command=["python"], args=["train.py"]))
    template["spec"]["affinity"] = {"nodeAffinity": own}
    sim = Sim(job("Preferred", template=template), gang="native")
    sim.settle(start="Running")
    for pod in sim.specs.values():
        affinity = pod["spec"]["affinity"]
        assert affinity["nodeAffinity"] == own
        assert affinity["podAffinity"] == {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term()}]}
    assert "schedulingConstraints" not in sim.others[("PodGroup", "j")]["spec"]
    assert sim.condition("Topology") is None and warnings(sim) == []


def test_a_local_run_is_one_domain() -> None:
    sim = Sim(job(), gang="t9k")
    plan = reconcile(sim.job, sim.observed(), sim.now, replace(sim.runtime(), one_node=True))
    assert plan.status.condition("Topology") is None


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [({KEY: "rack key"}, "is not a node label key"), ({KEY: "-rack"}, "is not a node label key"),
     ({KEY: RACK, MODE: "Strict"}, "'Strict' is not accepted; expected Required or Preferred"),
     ({MODE: "Required"}, "which the job does not set")],
)  # fmt: skip
def test_a_bad_topology_is_refused_naming_the_annotation(annotations: dict, expected: str) -> None:
    manifest = pytorch(name="j")
    manifest["metadata"]["annotations"] = annotations
    with pytest.raises(ManifestError) as err:
        parse_job(manifest)
    assert expected in str(err.value) and "t9k-jobs.io/topology-" in str(err.value), str(err.value)


# ---------------------------------------------------------------- Kueue's Topology Aware Scheduling

HOST = "kubernetes.io/hostname"


def tas_sim(manifest: dict, gang: str = "native") -> Sim:
    sim = Sim(manifest, gang=gang, queueing=True)
    sim.queue_topology = True
    return sim


def test_through_a_topology_queue_kueue_places_the_job_and_each_pod_goes_to_its_domain() -> None:
    """A master and its workers ask as one pod-set group; the admission's domains, per pod in rank
    order, become node selectors beside the flavor's labels; no affinity, no PodGroup constraint
    (Kueue decided); nothing said."""
    sim = tas_sim(job())
    (wl,) = [o for o in sim.step().create if o["kind"] == "Workload"]
    assert [(s["name"], s["topologyRequest"]) for s in wl["spec"]["podSets"]] == [
        ("master", {"required": RACK, "podSetGroupName": "job"}),
        ("worker", {"required": RACK, "podSetGroupName": "job"}),
    ]
    placed = {"master": ({RACK: "r1", HOST: "n1"},), "worker": ({RACK: "r1", HOST: "n1"}, {RACK: "r1", HOST: "n2"})}
    sim.workload = WorkloadState(admitted=True, node_selectors={"master": {"pool": "tas"}, "worker": {"pool": "tas"}},
                                 placements=placed)  # fmt: skip
    sim.settle(start="Running")
    selectors = {name: pod["spec"]["nodeSelector"] for name, pod in sim.specs.items()}
    assert selectors == {
        "j-master-0": {"pool": "tas", RACK: "r1", HOST: "n1"},
        "j-worker-0": {"pool": "tas", RACK: "r1", HOST: "n1"},
        "j-worker-1": {"pool": "tas", RACK: "r1", HOST: "n2"},
    }
    assert all("affinity" not in pod["spec"] for pod in sim.specs.values())
    assert "schedulingConstraints" not in sim.others[("PodGroup", "j")]["spec"]
    assert sim.condition("Topology") is None and warnings(sim) == []


def test_preferred_asks_kueue_for_a_preferred_domain() -> None:
    sim = tas_sim(job("Preferred"))
    (wl,) = [o for o in sim.step().create if o["kind"] == "Workload"]
    assert {s["topologyRequest"]["preferred"] for s in wl["spec"]["podSets"]} == {RACK}
    assert not any("required" in s["topologyRequest"] for s in wl["spec"]["podSets"])


def test_pod_sets_kueue_cannot_place_as_one_are_said_not_placed_as_a_unit() -> None:
    """Three replica types (or two of several pods each) are placed each in one domain, maybe not
    the same: the Topology condition and one Warning say so."""
    manifest = pytorch([("master", 2), ("worker", 2)], name="j", scheduler=SCHED)
    manifest["metadata"]["annotations"] = {KEY: RACK}
    sim = tas_sim(manifest)
    (wl,) = [o for o in sim.step().create if o["kind"] == "Workload"]
    assert all(s["topologyRequest"] == {"required": RACK} for s in wl["spec"]["podSets"])
    sim.workload = WorkloadState(admitted=True)
    sim.settle(start="Running")
    cond = sim.condition("Topology")
    assert cond is not None and cond.reason == "TopologyNotEnforced" and "each of the job's 2 pod sets" in cond.message
    assert len(warnings(sim)) == 1


def test_a_queue_without_topology_is_not_asked_and_the_pods_keep_their_affinity() -> None:
    sim = Sim(job(), gang="native", queueing=True)
    (wl,) = [o for o in sim.step().create if o["kind"] == "Workload"]
    assert not any("topologyRequest" in s for s in wl["spec"]["podSets"])
    sim.workload = WorkloadState(admitted=True)
    sim.settle(start="Running")
    assert all(p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [term()]
               for p in sim.specs.values())  # fmt: skip


def test_a_job_without_a_key_in_a_topology_only_queue_still_goes_where_kueue_placed_it() -> None:
    """Kueue places every pod set of a ClusterQueue whose flavors all have a Topology, asked or not
    (its "implied" TAS): the pods follow the admission, so Kueue's view of the nodes holds."""
    manifest = pytorch(name="j", scheduler=SCHED)
    sim = tas_sim(manifest)
    (wl,) = [o for o in sim.step().create if o["kind"] == "Workload"]
    assert not any("topologyRequest" in s for s in wl["spec"]["podSets"])
    sim.workload = WorkloadState(admitted=True, placements={"worker": ({HOST: "n1"}, {HOST: "n2"})})
    sim.settle(start="Running")
    assert sim.specs["j-worker-1"]["spec"]["nodeSelector"] == {HOST: "n2"}
    assert "nodeSelector" not in sim.specs["j-master-0"]["spec"]
