"""A replica's node lost, on a real API server (issue 25; :mod:`t9k_jobs.engine.node_loss`).

The test plays the kubelet and kube-controller-manager's node lifecycle controller: it makes a
Node, binds a replica pod to it, reports the pod Running, then turns the node's ``Ready``
condition ``Unknown`` as the node lifecycle controller does when the kubelet stops posting status.
The API server itself keeps the pod deleted gracefully ``Terminating`` (no kubelet confirms it), so
only the operator's forced delete frees the name. tests/node/test_node_loss.py does the same with
real kubelets and a frozen node.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from .. import helpers
from .kube import Kube, KubeError, now_rfc3339, pod_path
from .operator_proc import OperatorProcess
from .test_operator import events, pods, status

LIMIT = 2  # --node-lost-after, seconds
GRACE = 3  # the replica pods' terminationGracePeriodSeconds


@pytest.fixture(scope="module")
def operator(control_plane, tmp_path_factory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("operator-node-loss") / "operator.log"
    op = OperatorProcess(
        control_plane.kubeconfig, log, "--no-leader-elect", "--log-level", "DEBUG", "--node-lost-after", str(LIMIT)
    ).start()
    yield op
    assert op.stop() == 0, op.tail()


@pytest.fixture
def node(kube: Kube) -> Iterator[str]:
    name = f"lost-{secrets.token_hex(3)}"
    kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    set_ready(kube, name, "True")
    yield name
    try:
        kube.delete(f"/api/v1/nodes/{name}")
    except KubeError as exc:
        if exc.status != 404:
            raise


def set_ready(kube: Kube, node: str, value: str) -> None:
    """The node's ``Ready`` condition, as the kubelet (True) or the node lifecycle controller
    (Unknown, reason NodeStatusUnknown) writes it."""
    reason = "KubeletReady" if value == "True" else "NodeStatusUnknown"
    now = now_rfc3339()
    cond = {"type": "Ready", "status": value, "reason": reason, "lastHeartbeatTime": now, "lastTransitionTime": now}
    kube.patch(f"/api/v1/nodes/{node}/status", {"status": {"conditions": [cond]}})


def generic(name: str, ns: str, policy: str) -> dict[str, Any]:
    template = {
        "spec": {
            "terminationGracePeriodSeconds": GRACE,
            "containers": [{"name": "main", "image": "example.registry/busybox:1", "command": ["sleep", "600"]}],
        }
    }
    spec = {"replicaSpecs": [{"type": "worker", "replicas": 2, "restartPolicy": {"policy": policy, "limit": 2},
                              "template": template}]}  # fmt: skip
    return helpers.job("GenericJob", name, spec, namespace=ns)


def start_on(kube: Kube, ns: str, job: str, node: str, op: OperatorProcess) -> str:
    """Wait for the job's two pods, bind worker-1 to ``node``, report both Running; worker-1's uid."""
    live = kube.wait_for(lambda: len(p := pods(kube, ns, job)) == 2 and p, timeout=60, what=f"2 pods of {job}")
    pod = f"{job}-worker-1"
    kube.create(f"{pod_path(ns, pod)}/binding", {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod},
                                                 "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    for name in live:
        kube.set_pod_phase(ns, name, "Running")
    kube.wait_for(lambda: status(kube, ns, "GenericJob", job).get("phase") == "Running", timeout=60,
                  what=f"{job} Running")  # fmt: skip
    return live[pod]["metadata"]["uid"]


def reasons(kube: Kube, ns: str, job: str, reason: str) -> list[str]:
    return [e["message"] for e in events(kube, ns, job) if e["reason"] == reason]


def test_a_replica_on_a_lost_node_is_force_deleted_and_replaced(kube: Kube, namespace: str, node: str, operator) -> None:
    job = "gj"
    kube.create(f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{namespace}/genericjobs", generic(job, namespace, "OnFailure"))
    old_uid = start_on(kube, namespace, job, node, operator)
    set_ready(kube, node, "Unknown")
    # Deleted with its grace period, which no kubelet ends: the pod stays Terminating...
    kube.wait_for(lambda: reasons(kube, namespace, job, "NodeLost"), timeout=60, what="a NodeLost event")
    [lost] = reasons(kube, namespace, job, "NodeLost")
    assert f"node {node} unreachable since" in lost and f"{job}-worker-1" in lost, lost
    # ...until the operator deletes it with a zero grace period once that has passed, and makes
    # the replica's new pod (a new uid) under the same name.
    new = kube.wait_for(
        lambda: (p := pods(kube, namespace, job).get(f"{job}-worker-1")) and p["metadata"]["uid"] != old_uid and p,
        timeout=60, what="worker-1 replaced",
    )  # fmt: skip
    assert not new["spec"].get("nodeName")
    [forced] = reasons(kube, namespace, job, "ForceDeleted")
    assert f"{job}-worker-1" in forced and node in forced
    st = status(kube, namespace, "GenericJob", job)
    replica = {r["name"]: r for t in st["tasks"] for r in t["replicas"]}[f"{job}-worker-1"]
    assert replica["restartCount"] == 1 and st["phase"] == "Running", st
    assert {e["reason"] for e in events(kube, namespace, job)} >= {"NodeLost", "ForceDeleted"}


def test_a_never_replica_on_a_lost_node_fails_the_job(kube: Kube, namespace: str, node: str, operator) -> None:
    job = "gn"
    kube.create(f"/apis/batch.tensorstack.dev/v1beta1/namespaces/{namespace}/genericjobs", generic(job, namespace, "Never"))
    start_on(kube, namespace, job, node, operator)
    set_ready(kube, node, "Unknown")
    st = kube.wait_for(lambda: (s := status(kube, namespace, "GenericJob", job)).get("phase") == "Failed" and s,
                       timeout=60, what=f"{job} Failed")  # fmt: skip
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert "NodeLost" in failed["message"], failed
    replica = {r["name"]: r for t in st["tasks"] for r in t["replicas"]}[f"{job}-worker-1"]
    assert replica["phase"] == "Failed" and replica["reason"] == "NodeLost", replica
    # The stale pod does not stay Terminating for ever: force-deleted after its grace period.
    kube.wait_for(lambda: f"{job}-worker-1" not in pods(kube, namespace, job, live_only=False), timeout=60,
                  what="the lost pod gone")  # fmt: skip
