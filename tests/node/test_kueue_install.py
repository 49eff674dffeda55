"""Issue 24, first piece: Kueue v0.17.0 on the test node, installed as ``tools/node/up.sh --kueue``
installs it (the ``node`` fixture passes the same manifests to ``Node.up``). Its pod runs, its
webhooks (admission and CRD conversion) answer the API server on the host, the queues of
docs/scheduling.md are accepted and a LocalQueue becomes Active, and a T9k job that asks for no
queue never meets Kueue. That ``down`` leaves nothing behind, the route Kueue needs included, is
checked by the session's last test (test_tooling.py::test_down_leaves_the_machine_as_it_was)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests import helpers
from tests.helpers import replica, template

from ..cluster.kube import Kube, job_path, pod_path
from . import hoststate
from .conftest import KUEUE, REPO, TRAINING_IMAGE, delete_queues, make_queues, wait_phase

from node import (  # noqa: E402
    HOST_IP, KUEUE_CERT_SECRET, KUEUE_DEPLOYMENT, KUEUE_NAMESPACE, KUEUE_TIMEOUT, NODE_IP, POD_CIDR)

KUEUE_V1BETA1 = "/apis/kueue.x-k8s.io/v1beta1"
KUEUE_VERSION = re.search(r"^require sigs\.k8s\.io/kueue (v\S+)", (REPO / "tools/kueue/go.mod").read_text(),
                          re.MULTILINE)[1]
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == type_), {})


def test_kueue_runs_and_answers(node, kube: Kube) -> None:
    """One Kueue pod Running and Ready in kueue-system from the image built here; the CA it made
    for itself is in its webhook configurations and in the conversion webhooks of its CRDs, the
    storage version being v1beta2; the install was timed."""
    def ready() -> list[dict[str, Any]]:
        # Waited for: a test that restarts the API server (test_faults.py) may have made Kueue lose
        # its leader Lease, and its container restart, just before.
        pods = kube.list(pod_path(KUEUE_NAMESPACE))
        running = [p for p in pods if p["status"].get("phase") == "Running"
                   and all(c["ready"] for c in p["status"]["containerStatuses"])]
        assert len(pods) == len(running) == 1, [(p["metadata"]["name"], p["status"]) for p in pods]
        return running

    running = Kube.wait_for(ready, timeout=120, interval=0.5, what="one Kueue pod Running and Ready")
    assert running[0]["metadata"]["name"].startswith(KUEUE_DEPLOYMENT)
    assert running[0]["spec"]["containers"][0]["image"] == f"localhost/kueue:{KUEUE_VERSION}"
    for kind in ("validating", "mutating"):
        config = kube.get(f"{ADMISSION}/{kind}webhookconfigurations/kueue-{kind}-webhook-configuration")
        assert config["webhooks"] and all(w["clientConfig"].get("caBundle") for w in config["webhooks"]), kind
    for plural in ("clusterqueues", "localqueues", "workloads", "cohorts"):
        crd = kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.kueue.x-k8s.io")
        assert crd["spec"]["conversion"]["strategy"] == "Webhook", plural
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"].get("caBundle"), plural
        assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == ["v1beta2"], plural
    assert node.kueue_seconds is not None and 0 < node.kueue_seconds < KUEUE_TIMEOUT
    print(f"Kueue {KUEUE_VERSION}: installed and answering in {node.kueue_seconds:.1f} s")


def test_a_manager_replaced_once_its_certificate_is_made_mounts_it_at_start(node, kube: Kube) -> None:
    """The remedy ``install_kueue`` applies when the kubelet is slow to project the certificate
    Kueue made into its pod's volume (node.KUEUE_REMOUNT_AFTER): the manager's pod is deleted, and
    its replacement finds the certificate in the Secret and in its volume at start (no new
    certificate made), is Ready, leads, and its webhooks answer."""
    deployment = f"/apis/apps/v1/namespaces/{KUEUE_NAMESPACE}/deployments/{KUEUE_DEPLOYMENT}"
    Kube.wait_for(lambda: kube.get(deployment)["status"].get("readyReplicas") == 1, timeout=120, interval=0.5,
                  what="Kueue ready before the test")
    secret = kube.get(f"/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets/{KUEUE_CERT_SECRET}")
    before = [p["metadata"]["name"] for p in kube.list(pod_path(KUEUE_NAMESPACE))]
    replaced = node._kueue_remount()
    assert replaced and sorted(replaced) == sorted(before), (replaced, before)

    def back() -> str:
        pods = kube.list(pod_path(KUEUE_NAMESPACE))
        names = [p["metadata"]["name"] for p in pods]
        assert len(names) == 1 and names[0] not in before, names
        assert all(c["ready"] for c in pods[0]["status"].get("containerStatuses") or [{"ready": False}]), names
        leases = kube.list(f"/apis/coordination.k8s.io/v1/namespaces/{KUEUE_NAMESPACE}/leases")
        assert any(((lease.get("spec") or {}).get("holderIdentity") or "").startswith(names[0])
                   for lease in leases), leases
        return names[0]

    new = Kube.wait_for(back, timeout=180, interval=0.5, what="Kueue's replacement pod Ready and leading")
    log = "\n".join(f.read_text(errors="replace") for f in (node.dir / "pod-logs").glob(f"{KUEUE_NAMESPACE}_{new}_*/*/*.log"))
    assert "certs are ready" in log and "no cert refresh needed" in log, log[-3000:]
    assert "refreshing CA and server certs" not in log, "the replacement made a new certificate"
    assert kube.get(f"/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets/{KUEUE_CERT_SECRET}")["data"] == secret["data"]
    probe = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"generateName": "probe-"}}
    answer = Kube.wait_for(lambda: kube.create(f"{KUEUE}/resourceflavors?dryRun=All", probe), timeout=60,
                           interval=0.5, what="Kueue's admission webhooks to answer")
    assert answer["kind"] == "ResourceFlavor"


def test_the_host_routes_the_pod_network_into_the_node(node) -> None:
    """The API server (on the host, at HOST_IP) reaches Kueue's webhook pod through a route over
    the host bridge that joins the nodes' veths (node 1's among its ports), absent before the node
    started (the last test finds it gone again)."""
    ours = f"{POD_CIDR} via {NODE_IP} dev {node.bridge}"
    assert Path(f"/sys/class/net/{node.veth}/master").resolve().name == node.bridge
    now = hoststate.routes()
    assert any(r.startswith(ours) for r in now), now
    assert not any(r.startswith(POD_CIDR) for r in node.host_before["routes"]), node.host_before["routes"]
    assert node.plane.server.startswith(f"https://{HOST_IP}:")


def test_queues_for_t9k_jobs_become_active(node, kube: Kube, namespace: str) -> None:
    """A ResourceFlavor, a ClusterQueue with a CPU and memory quota and LowerPriority preemption,
    and a LocalQueue ``default`` pointing to it (conftest.make_queues): Kueue reports both queues
    Active; the ClusterQueue reads back in v1beta1 through the conversion webhook."""
    queue = make_queues(kube, namespace, cpu="1", memory="1Gi")
    try:
        cq = kube.get(f"{KUEUE}/clusterqueues/{queue}")
        assert condition(cq, "Active").get("status") == "True", cq.get("status")
        local = kube.get(f"{KUEUE}/namespaces/{namespace}/localqueues/default")
        assert condition(local, "Active")["reason"] == "Ready", local["status"]
        assert local["spec"]["clusterQueue"] == queue
        old = kube.get(f"{KUEUE_V1BETA1}/clusterqueues/{queue}")  # through the conversion webhook
        assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1", old
        assert old["spec"]["resourceGroups"] == cq["spec"]["resourceGroups"], (old["spec"], cq["spec"])
        assert old["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority", old["spec"]
    finally:
        delete_queues(kube, namespace)


def test_the_queues_of_docs_scheduling_md_are_accepted(kubectl) -> None:
    """The YAML of docs/scheduling.md ("Queues for T9k jobs") passes Kueue's schemas and webhooks
    (a server-side dry run: nothing is created)."""
    text = (REPO / "docs" / "scheduling.md").read_text()
    section = text.split("## Queues for T9k jobs", 1)[1]
    manifest = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    kinds = [d["kind"] for d in yaml.safe_load_all(manifest)]
    assert kinds == ["ResourceFlavor", "ClusterQueue", "LocalQueue"], kinds
    out = kubectl("apply", "--dry-run=server", "-o", "name", "-f", "-", input=manifest)
    assert out.stdout.split() == [
        "resourceflavor.kueue.x-k8s.io/default-flavor",
        "clusterqueue.kueue.x-k8s.io/cluster-queue",
        "localqueue.kueue.x-k8s.io/default",
    ], out.stdout


def test_a_job_without_t9k_scheduler_never_meets_kueue(node, kube: Kube, namespace: str) -> None:
    """A GenericJob that asks for no queue runs to Succeeded: no Workload in its namespace, its pod
    carries no Kueue label, annotation or scheduling gate."""
    pod = template(["sh", "-c", "echo plain"], name="main", image=TRAINING_IMAGE,
                   pod={"terminationGracePeriodSeconds": 2})
    worker = replica("worker", 1, pod, restartPolicy={"policy": "Never"})
    spec = {"successRules": [{"worker": [0]}], "replicaSpecs": [worker]}
    manifest = helpers.job("GenericJob", "plain", spec, namespace=namespace)
    kube.create(job_path(namespace, "GenericJob"), manifest)
    pod = Kube.wait_for(lambda: kube.get(pod_path(namespace, "plain-worker-0")), timeout=120, interval=0.2,
                        what="pod plain-worker-0 to be created")
    marks = {**pod["metadata"].get("labels", {}), **pod["metadata"].get("annotations", {})}
    assert not [k for k in marks if "kueue.x-k8s.io" in k], marks
    assert not pod["spec"].get("schedulingGates"), pod["spec"]
    done = wait_phase(kube, job_path(namespace, "GenericJob", "plain"), ("Succeeded", "Failed"), timeout=180)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert kube.list(f"{KUEUE}/namespaces/{namespace}/workloads") == []
