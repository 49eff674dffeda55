"""What the operator reads of Kueue's Topology Aware Scheduling (issue 43; cluster/kueue.py): an
admission's ``topologyAssignment`` (Kueue v0.17.0 ``v1beta2``: levels and slices), one node
selector per pod; and whether a LocalQueue's ClusterQueue has a flavor with a Topology. The real
Kueue admits by topology in tests/node/test_two_nodes.py."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from t9k_jobs.cluster.client import CLUSTERQUEUES, LOCALQUEUES, RESOURCEFLAVORS
from t9k_jobs.cluster.informer import Informer
from t9k_jobs.cluster.kueue import (
    Flavor,
    QueueTopology,
    cluster_queue_flavors,
    placements,
    project_flavor,
    project_workload,
)

RACK, HOST = "topology.kubernetes.io/rack", "kubernetes.io/hostname"


def test_universal_values_and_counts_give_each_pod_its_domain_in_order() -> None:
    assignment = {"levels": [RACK, HOST], "slices": [
        {"domainCount": 1, "valuesPerLevel": [{"universal": "r1"}, {"universal": "n1"}], "podCounts": {"universal": 2}},
        {"domainCount": 2, "valuesPerLevel": [{"universal": "r1"}, {"individual": {"roots": ["2", "3"], "prefix": "n"}}],
         "podCounts": {"individual": [1, 2]}},
    ]}  # fmt: skip
    assert placements(assignment, 5) == (
        {RACK: "r1", HOST: "n1"}, {RACK: "r1", HOST: "n1"}, {RACK: "r1", HOST: "n2"},
        {RACK: "r1", HOST: "n3"}, {RACK: "r1", HOST: "n3"},
    )  # fmt: skip
    # The pod set's count bounds it (a bigger count in the slices gives no more).
    assert len(placements(assignment, 3)) == 3


def test_an_individual_level_takes_its_prefix_and_suffix() -> None:
    assignment = {"levels": [HOST], "slices": [{"domainCount": 2, "podCounts": {"universal": 1},
                  "valuesPerLevel": [{"individual": {"prefix": "node-", "suffix": ".a", "roots": ["1", "2"]}}]}]}  # fmt: skip
    assert placements(assignment) == ({HOST: "node-1.a"}, {HOST: "node-2.a"})


def test_an_assignment_that_does_not_parse_gives_none() -> None:
    ok = {"domainCount": 1, "valuesPerLevel": [{"universal": "r1"}], "podCounts": {"universal": 1}}
    for bad in (None, "x", {}, {"levels": []}, {"levels": [RACK], "slices": [{**ok, "domainCount": 0}]},
                {"levels": [RACK, HOST], "slices": [ok]},
                {"levels": [RACK], "slices": [{**ok, "podCounts": {"individual": [1, 2]}}]},
                {"levels": [RACK], "slices": [{**ok, "valuesPerLevel": [{"individual": {"roots": []}}]}]}):  # fmt: skip
        assert placements(bad) == (), bad


json = st.recursive(st.none() | st.booleans() | st.integers(-3, 5) | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["levels", "slices", "domainCount", "valuesPerLevel", "podCounts",
                                         "universal", "individual", "roots", "prefix", "suffix"]), inner, max_size=4),
                    max_leaves=12)  # fmt: skip


@given(json, json)
def test_any_object_is_read_without_raising(assignment: Any, count: Any) -> None:
    out = placements(assignment, count)
    assert all(isinstance(s, dict) for s in out)


def test_a_workload_admitted_by_topology_projects_its_placements() -> None:
    status = {
        "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True", "reason": "Admitted"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [
            {"name": "worker", "count": 2, "flavors": {"cpu": "tas"},
             "topologyAssignment": {"levels": [RACK], "slices": [
                 {"domainCount": 1, "valuesPerLevel": [{"universal": "b"}], "podCounts": {"universal": 2}}]}},
            {"name": "master", "count": 1, "flavors": {"cpu": "plain"}},
        ]},
    }  # fmt: skip
    state, flavors = project_workload(status)
    assert state.admitted and state.placements == {"worker": ({RACK: "b"}, {RACK: "b"})}
    assert flavors == (("worker", ("tas",)), ("master", ("plain",)))


def test_a_queue_places_by_topology_where_its_cluster_queue_has_a_flavor_with_one() -> None:
    client: Any = None  # the informers' caches are filled by hand: nothing is listed
    flavors: Informer[Flavor] = Informer(client, RESOURCEFLAVORS, transform=project_flavor)
    qt = QueueTopology(client, ["team-a"], flavors)
    flavors.store[("", "tas")] = project_flavor({"spec": {"nodeLabels": {"pool": "a"}, "topologyName": "racks"}})
    flavors.store[("", "plain")] = project_flavor({"spec": {}})
    qt.cluster_queues.store[("", "cq-tas")] = cluster_queue_flavors(
        {"spec": {"resourceGroups": [{"flavors": [{"name": "plain"}]}, {"flavors": [{"name": "tas"}]}]}})
    qt.cluster_queues.store[("", "cq-plain")] = cluster_queue_flavors({"spec": {"resourceGroups": [{"flavors": [{"name": "plain"}]}]}})
    (lq,) = qt.local_queues
    assert lq.transform({"spec": {"clusterQueue": "cq-tas"}}) == "cq-tas"
    lq.store[("team-a", "fast")] = "cq-tas"
    lq.store[("team-a", "slow")] = "cq-plain"
    lq.store[("team-a", "dangling")] = "cq-gone"
    assert qt.serves("team-a", "fast")
    assert not qt.serves("team-a", "slow") and not qt.serves("team-a", "dangling") and not qt.serves("team-a", "none")
    assert not qt.serves("team-b", "fast")
    assert lq.resource is LOCALQUEUES and qt.cluster_queues.resource is CLUSTERQUEUES
