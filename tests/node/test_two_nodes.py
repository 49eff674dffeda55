"""Two real nodes (issue 25): ranks on different nodes train together, and a node lost mid-job.

Node 2 (``t9k-node-2``) joins the cluster for this module (conftest ``second_node``): its own
containerd, kubelet and kube-proxy in namespaces and a cgroup of their own. ``Node.lose`` freezes
every process of it with the cgroup freezer (``tools/node/fault.sh DIR lose``), which the control
plane sees as a node that lost power or its network: kube-controller-manager marks it
``Ready=Unknown`` after its ``--node-monitor-grace-period`` (50 s), and the operator fails the
replicas on it with reason ``NodeLost`` once it has been so for ``--node-lost-after`` (60 s, the
default the node suite's operator runs with). ``Node.restore`` thaws the node's daemons first
and its pods only once the kubelet's kill of every stale container is pending, so no rank runs
twice. Each test prints its timeline (``pytest -s``); docs/reliability.md has the figures.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..cluster.kube import Kube, core_path, job_path, pod_path
from .conftest import KUEUE, TRAINING_IMAGE, delete_queues, make_queues, wait_phase
from .test_examples import replicas

GRACE = 5  # terminationGracePeriodSeconds of the replicas here
RACK = "topology.kubernetes.io/rack"
OWNER = "tensorstack.dev/owner-name"
# What the operator's own timings allow: NotReady after 50 s, lost 60 s later, the grace period,
# a new pod: about 2 minutes; the bound is generous for a loaded 2-core machine.
LOST_BOUND = 420.0

# A replica that says who and where it is, every 0.2 s, into a file on the host (a hostPath, the
# same directory on both nodes), until the test drops `done` there; then it exits 0.
HEARTBEAT = r"""
import os, sys, time
out = open(f"/shared/beats-{os.environ['POD_UID']}", "a", buffering=1)
while not os.path.exists("/shared/done"):
    out.write(f"{time.time():.3f} {os.environ['NODE_NAME']}\n")
    time.sleep(0.2)
print("done on", os.environ["NODE_NAME"], flush=True)
"""


@pytest.fixture
def lost(node, second_node: str) -> Iterator[list[str]]:
    """Nodes a test loses are restored afterwards, whatever happened."""
    nodes: list[str] = []
    yield nodes
    for name in nodes:
        if name in node.lost():
            node.restore(name)


def heartbeat_job(name: str, shared: Path, policy: str, limit: int = 3) -> dict[str, Any]:
    """A GenericJob of one worker that prefers ``t9k-node-2`` and beats into ``shared``."""
    env = [
        {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    prefer = {"weight": 100, "preference": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["t9k-node-2"]}]}}  # fmt: skip
    template = {
        "spec": {
            "terminationGracePeriodSeconds": GRACE,
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [prefer]}},
            "volumes": [{"name": "shared", "hostPath": {"path": str(shared), "type": "Directory"}}],
            "containers": [{
                "name": "main", "image": TRAINING_IMAGE, "imagePullPolicy": "Never",
                "command": ["python", "-c", HEARTBEAT], "env": env,
                "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
                "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
            }],
        }
    }  # fmt: skip
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "GenericJob",
        "metadata": {"name": name},
        "spec": {"replicaSpecs": [{"type": "worker", "replicas": 1, "restartPolicy": {"policy": policy, "limit": limit},
                                   "template": template}]},
    }  # fmt: skip


def node_ready(kube: Kube, name: str) -> str:
    node = kube.get(f"/api/v1/nodes/{name}")
    return next((c["status"] for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"), "?")


def event_reasons(kube: Kube, ns: str, name: str) -> dict[str, str]:
    return {e["reason"]: e["message"] for e in kube.list(core_path(ns, "events")) if e["involvedObject"]["name"] == name}


def running_pod(kube: Kube, ns: str, job: str) -> dict[str, Any]:
    """The job's one live pod, once it runs."""
    return Kube.wait_for(
        lambda: next((p for p in kube.list(pod_path(ns), label_selector=f"{OWNER}={job}")
                      if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("phase") == "Running"),
                     None),
        timeout=300, interval=0.5, what=f"a Running pod of {job}",
    )  # fmt: skip


def pod_processes(uid: str) -> list[int]:
    """Live processes of the pod ``uid`` on this machine (its containers' cgroups are named
    ``pod<uid>``, with ``-`` or ``_`` in the uid)."""
    marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            text = Path(f"/proc/{pid}/cgroup").read_text()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and any(m in text for m in marks):
            out.append(int(pid))
    return out


def beats(shared: Path) -> dict[str, list[float]]:
    """Pod uid -> the times of its heartbeats."""
    out: dict[str, list[float]] = {}
    for f in shared.glob("beats-*"):
        out[f.name[len("beats-"):]] = [float(line.split()[0]) for line in f.read_text().splitlines() if line.strip()]
    return out


@pytest.mark.timeout(900)
def test_ddp_ranks_on_two_nodes_train_to_accuracy(node, second_node: str, kube: Kube, kubectl, namespace: str) -> None:
    """The main example with required pod anti-affinity: its two torchrun ranks land on different
    nodes, find each other through the job's Services (pod network routed between the nodes, the
    Services' ClusterIPs by kube-proxy on each) and reach the accuracy of the one-node run."""
    import yaml

    from .conftest import REPO

    job = yaml.safe_load((REPO / "examples" / "pytorch-ddp" / "job.yaml").read_text())
    name = job["metadata"]["name"]
    spec = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {OWNER: name}}, "topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip
    kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(job))
    done = wait_phase(kube, job_path(namespace, "PyTorchTrainingJob", name), ("Succeeded", "Failed"), timeout=600)
    pods = {p: kube.get(pod_path(namespace, p)) for p in (f"{name}-worker-0", f"{name}-worker-1")}
    logs = {p: kubectl("logs", "-n", namespace, p).stdout for p in pods}
    assert done["status"]["phase"] == "Succeeded", (done["status"], logs)
    assert {p["spec"]["nodeName"] for p in pods.values()} == {"t9k-node", second_node}
    final = re.search(r"final test_accuracy ([\d.]+)", logs[f"{name}-worker-0"])
    assert final and float(final.group(1)) >= 0.90, logs[f"{name}-worker-0"]
    assert "rank 1 of 2 joined" in logs[f"{name}-worker-1"], logs[f"{name}-worker-1"]
    # The job succeeds when its master (worker-0) does (T9k). Rank 1 leaves the same final barrier,
    # but its kubelet, on the other node, may report it a moment after the job ended: Running then
    # (the clean-up takes it), never Failed (seen once with the suite's two lanes loading the node).
    phases = {n: rs["phase"] for n, rs in replicas(done).items()}
    assert phases[f"{name}-worker-0"] == "Succeeded", done["status"]
    assert phases[f"{name}-worker-1"] in ("Succeeded", "Running"), done["status"]


@pytest.mark.timeout(900)
def test_a_replica_on_a_lost_node_is_replaced_on_the_other_and_never_runs_twice(
    node, second_node: str, kube: Kube, namespace: str, lost: list[str], tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    name = "beat"
    kube.create(job_path(namespace, "GenericJob"), heartbeat_job(name, shared, "OnFailure"))
    first = running_pod(kube, namespace, name)
    assert first["spec"]["nodeName"] == second_node, first["spec"]
    Kube.wait_for(lambda: beats(shared).get(first["metadata"]["uid"]), timeout=120, what="the first heartbeats")
    t0 = time.monotonic()
    timeline: dict[str, float] = {}
    lost.append(second_node)
    node.lose(second_node)
    Kube.wait_for(lambda: node_ready(kube, second_node) != "True", timeout=LOST_BOUND, interval=0.5,
                  what=f"{second_node} NotReady")  # fmt: skip
    timeline["NotReady"] = time.monotonic() - t0
    Kube.wait_for(lambda: "NodeLost" in event_reasons(kube, namespace, name), timeout=LOST_BOUND, interval=0.5,
                  what="the NodeLost event")  # fmt: skip
    timeline["NodeLost"] = time.monotonic() - t0
    second = running_pod(kube, namespace, name)
    timeline["replaced, Running"] = time.monotonic() - t0
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["spec"]["nodeName"] == "t9k-node", second["spec"]
    reasons = event_reasons(kube, namespace, name)
    assert "ForceDeleted" in reasons and second_node in reasons["NodeLost"], reasons
    Kube.wait_for(lambda: beats(shared).get(second["metadata"]["uid"]), timeout=120, what="the new heartbeats")

    # The node comes back: its kubelet stops the stale container before it runs again.
    node.restore(second_node)
    lost.remove(second_node)
    timeline["restored"] = time.monotonic() - t0
    Kube.wait_for(lambda: not pod_processes(first["metadata"]["uid"]), timeout=180,
                  what="the stale container gone from the node")  # fmt: skip
    (shared / "done").write_text("")
    done = wait_phase(kube, job_path(namespace, "GenericJob", name), ("Succeeded", "Failed"), timeout=300)
    timeline["Succeeded"] = time.monotonic() - t0
    assert done["status"]["phase"] == "Succeeded", done["status"]
    [rs] = replicas(done).values()
    assert rs["restartCount"] == 1, rs
    seen = beats(shared)
    old, new = seen[first["metadata"]["uid"]], seen[second["metadata"]["uid"]]
    assert max(old) < min(new), f"the stale rank beat at {max(old)}, after its replacement's first beat {min(new)}"
    assert set(seen) == {first["metadata"]["uid"], second["metadata"]["uid"]}, seen.keys()
    print("\nnode lost -> " + ", ".join(f"{k} +{v:.1f} s" for k, v in timeline.items()))


@pytest.mark.timeout(900)
def test_a_never_replica_on_a_lost_node_fails_the_job_with_reason_node_lost(
    node, second_node: str, kube: Kube, namespace: str, lost: list[str], tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    name = "never"
    kube.create(job_path(namespace, "GenericJob"), heartbeat_job(name, shared, "Never", limit=0))
    first = running_pod(kube, namespace, name)
    assert first["spec"]["nodeName"] == second_node, first["spec"]
    t0 = time.monotonic()
    lost.append(second_node)
    node.lose(second_node)
    done = wait_phase(kube, job_path(namespace, "GenericJob", name), ("Succeeded", "Failed"), timeout=LOST_BOUND)
    took = time.monotonic() - t0
    assert done["status"]["phase"] == "Failed", done["status"]
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert "NodeLost" in failed["message"], failed
    [rs] = replicas(done).values()
    assert (rs["phase"], rs["reason"]) == ("Failed", "NodeLost") and second_node in rs["message"], rs
    # The stale pod is force-deleted once its grace period has passed, node still lost.
    Kube.wait_for(
        lambda: not kube.list(pod_path(namespace), label_selector=f"{OWNER}={name}"), timeout=120, interval=0.5,
        what="the lost pod force-deleted",
    )  # fmt: skip
    print(f"\nnode lost -> job Failed (NodeLost) +{took:.1f} s")


# Each torchrun worker process: join the group, then all-reduce a one every 0.5 s until the test
# drops `done`; a rank whose peer froze blocks in its all-reduce until torchrun restarts it.
RING = r"""
import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
print(f"rank {rank} of {size} joined on {os.environ['NODE_NAME']} "
      f"(restart {os.environ.get('TORCHELASTIC_RESTART_COUNT')})", flush=True)
while not os.path.exists("/shared/done"):
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == size
    time.sleep(0.5)
dist.barrier()
print(f"rank {rank} done", flush=True)
os._exit(0)  # not destroy_process_group(): it can deadlock on the GIL (examples/pytorch-ddp/train.py, leave)
"""


@pytest.mark.timeout(900)
def test_torchrun_ranks_rendezvous_again_when_a_node_is_lost(
    node, second_node: str, kube: Kube, kubectl, namespace: str, lost: list[str], tmp_path: Path
) -> None:
    """A PyTorchTrainingJob with torchrun (c10d rendezvous on the master's Service): its worker's
    node is lost; the worker fails NodeLost and its new pod (on the other node) joins the
    rendezvous; the master's torchrun agent sees a node waiting and restarts its rank into a new
    round (a membership change, not one of its maxRestarts: 0), in the same pod. Both ranks
    all-reduce again and the job Succeeds with one restart counted, the worker's.

    The ranks set ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``, as a user of torch 2.5 must for a
    membership change to work: by default the agents share their TCP store with the ranks under the
    prefix ``/worker/attempt_<restart count>``, which a membership change does not raise, so the
    ranks of the second round may read the first round's gloo addresses ("Gloo connectFullMesh
    failed", seen here), and agents whose restart counts differ never find each other's keys. With
    it, each round's rank 0 serves a store of its own (docs/launchers.md)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "ring.py").write_text(RING)
    name = "ring"

    def replica_spec(type_: str, host: str, policy: str) -> dict[str, Any]:
        spec = heartbeat_job(name, shared, policy)["spec"]["replicaSpecs"][0]
        pod = spec["template"]["spec"]
        pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"][
            "matchExpressions"][0]["values"] = [host]  # fmt: skip
        main = pod["containers"][0]
        main.update(name="pytorch", command=["python"], args=["/shared/ring.py"])
        main["env"].append({"name": "OMP_NUM_THREADS", "value": "1"})
        main["env"].append({"name": "LOGLEVEL", "value": "INFO"})  # torchrun's agent says what it decides
        main["env"].append({"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"})
        return {"type": type_, "replicas": 1, "restartPolicy": policy, "template": spec["template"]}

    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "PyTorchTrainingJob", "metadata": {"name": name},
        "spec": {
            "torchrunConfig": {"enabled": True, "procPerNode": "1", "rdzvBackend": "c10d", "maxRestarts": 0},
            "runPolicy": {"backoffLimit": 3},
            "replicaSpecs": [replica_spec("master", "t9k-node", "OnFailure"),
                             replica_spec("worker", second_node, "OnFailure")],
        },
    }  # fmt: skip
    kube.create(job_path(namespace, "PyTorchTrainingJob"), job)
    path = job_path(namespace, "PyTorchTrainingJob", name)
    # Every pod's log as last read (by uid), so that a replaced pod's log is not lost.
    pod_logs: dict[str, str] = {}
    stop_collecting = threading.Event()

    def collect() -> None:
        while not stop_collecting.wait(2.0):
            try:
                for pod in kube.list(pod_path(namespace), label_selector=f"{OWNER}={name}"):
                    meta = pod["metadata"]
                    out = kubectl("logs", "-n", namespace, meta["name"], check=False).stdout
                    if out:
                        pod_logs[f"{meta['name']} {meta['uid'][:8]} on {pod['spec'].get('nodeName')}"] = out
            except Exception:  # noqa: BLE001 - diagnostics only
                pass

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    master_log = lambda: kubectl("logs", "-n", namespace, f"{name}-master-0", check=False).stdout  # noqa: E731
    Kube.wait_for(lambda: "rank 0 of 2 joined" in master_log(), timeout=300, interval=1, what="the first round")
    worker = kube.get(pod_path(namespace, f"{name}-worker-0"))
    master_uid = kube.get(pod_path(namespace, f"{name}-master-0"))["metadata"]["uid"]
    assert worker["spec"]["nodeName"] == second_node, worker["spec"]
    t0 = time.monotonic()
    lost.append(second_node)
    node.lose(second_node)
    try:
        Kube.wait_for(lambda: master_log().count("rank 0 of 2 joined") >= 2, timeout=LOST_BOUND, interval=1,
                      what="the master's rank in a second round")  # fmt: skip
    except AssertionError as exc:  # what the cluster shows then, to tell why
        seen = [kubectl(*args, check=False).stdout[-3000:] for args in (
            ("get", "pods", "-n", namespace, "-o", "wide"),
            ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp"),
            ("get", "pytorchtrainingjobs", "-n", namespace, name, "-o", "jsonpath={.status}"),
            ("logs", "-n", "t9k-jobs-system", "deployment/t9k-jobs-operator", "--tail=60"),
        )]
        stop_collecting.set()
        logs = "\n".join(f"--- pod {k}:\n{v[-4000:]}" for k, v in pod_logs.items())
        raise AssertionError(f"{exc}\n--- master:\n{master_log()[-3000:]}\n{logs}\n---\n" + "\n---\n".join(seen)) from None
    stop_collecting.set()
    again = time.monotonic() - t0
    (shared / "done").write_text("")
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=300)
    log = master_log()
    assert done["status"]["phase"] == "Succeeded", (done["status"], log)
    rs = replicas(done)
    assert rs[f"{name}-worker-0"]["restartCount"] == 1 and rs[f"{name}-master-0"]["restartCount"] == 0, rs
    assert kube.get(pod_path(namespace, f"{name}-master-0"))["metadata"]["uid"] == master_uid
    new_worker = kubectl("logs", "-n", namespace, f"{name}-worker-0").stdout
    assert "rank 1 of 2 joined on t9k-node " in new_worker and "rank 1 done" in new_worker, new_worker
    assert "rank 0 done" in log, log
    print(f"\nnode lost -> torchrun's second round +{again:.1f} s")


#: A rank that says where it runs and waits for ``/shared/done``.
WAITS = "import os, time\nprint('up on', os.environ['NODE_NAME'], flush=True)\nwhile not os.path.exists('/shared/done'):\n    time.sleep(0.2)\n"


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("default_queue")  # the node runs Kueue: a t9kScheduler job queues first
def test_a_drain_waits_for_a_running_gang_and_goes_on_once_it_ended(
    node, second_node: str, kube: Kube, kubectl, namespace: str, tmp_path: Path
) -> None:
    """Issue 43's disruption budget on the real nodes: a gang of two ranks, one per node (required
    anti-affinity). ``kubectl drain`` of node 2 (its eviction of the gang's rank there) is refused
    by the job's PodDisruptionBudget while the gang runs, where it would have stopped the whole
    gang; once the job Succeeded the budget is gone and the same drain succeeds."""
    import yaml

    tmp_path.chmod(0o777)
    name = "gangdrain"
    job = heartbeat_job(name, tmp_path, "OnFailure")
    worker = job["spec"]["replicaSpecs"][0]
    worker["replicas"] = 2
    spec = worker["template"]["spec"]
    spec["containers"][0]["command"] = ["python", "-c", WAITS]
    spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {OWNER: name}}, "topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip
    job["spec"]["scheduler"] = {"t9kScheduler": {"queue": "default", "priority": 0}}
    kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump(job))
    pdb = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"
    Kube.wait_for(lambda: kube.get(pdb)["status"].get("currentHealthy") == 2, timeout=300, interval=0.5,
                  what="both ranks running and counted by the budget")  # fmt: skip
    drain = ["drain", second_node, f"--pod-selector={OWNER}={name}", "--ignore-daemonsets", "--delete-emptydir-data"]
    try:
        refused = kubectl(*drain, "--timeout=20s", check=False, timeout=120)
        assert refused.returncode != 0 and "disruption budget" in (refused.stdout + refused.stderr), refused
        on_two = [p for p in kube.list(pod_path(namespace), label_selector=f"{OWNER}={name}") if p["spec"]["nodeName"] == second_node]
        assert len(on_two) == 1 and not on_two[0]["metadata"].get("deletionTimestamp"), on_two
        (tmp_path / "done").write_text("")
        done = wait_phase(kube, job_path(namespace, "GenericJob", name), ("Succeeded", "Failed"), timeout=300)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        Kube.wait_for(lambda: not kube.exists(pdb), timeout=60, what="the budget deleted with the job's end")
        drained = kubectl(*drain, "--timeout=60s", check=False, timeout=120)
        assert drained.returncode == 0, drained
    finally:
        kubectl("uncordon", second_node, check=False)


def free_millicpu_of(kube: Kube, node: str) -> int:
    """``node``'s allocatable CPU less the requests of the pods bound to it that have not ended."""
    from .test_gang import _millis

    total = _millis(kube.get(f"/api/v1/nodes/{node}")["status"]["allocatable"]["cpu"])
    used = sum(_millis(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0"))
               for p in kube.list("/api/v1/pods") if p["spec"].get("nodeName") == node
               and p["status"].get("phase") not in ("Succeeded", "Failed") for c in p["spec"]["containers"])  # fmt: skip
    return total - used


@pytest.fixture
def racks(kube: Kube, second_node: str) -> Iterator[dict[str, str]]:
    """The two real nodes, each its own rack (``topology.kubernetes.io/rack``: a and b), for the
    test; the label is taken off afterwards."""
    racks = {"t9k-node": "a", second_node: "b"}
    for name, rack in racks.items():
        kube.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {RACK: rack}}})
    yield racks
    for name in racks:
        kube.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": {RACK: None}}})


def rack_gang(kube: Kube, namespace: str, name: str, cpu_m: int) -> None:
    """Create a gang of two ranks of ``cpu_m`` millicpu each, to be kept in one rack."""
    from .test_gang import gang_job

    job = gang_job(name, 2, cpu_m, 0, "sleep 20")
    job["metadata"]["annotations"] = {"t9k-jobs.io/topology-key": RACK}
    job["metadata"]["namespace"] = namespace
    kube.create(job_path(namespace, "GenericJob"), job)


def bound_gang(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    """The two pods of gang ``name`` once both are bound to a node."""
    from .test_gang import job_pods

    return Kube.wait_for(lambda: len(p := job_pods(kube, namespace, name)) == 2
                         and all(x["spec"].get("nodeName") for x in p) and p,
                         timeout=240, interval=0.5, what=f"the gang {name} bound")  # fmt: skip


@pytest.mark.timeout(600)
@pytest.mark.usefixtures("default_queue")  # the node runs Kueue: a t9kScheduler job queues first
def test_a_gang_in_one_rack_lands_on_one_node_and_one_that_fits_no_rack_waits(
    node, racks: dict[str, str], kube: Kube, namespace: str
) -> None:
    """Issue 43's topology on the real nodes, each its own rack (``topology.kubernetes.io/rack``:
    a and b): a gang of two small ranks with ``t9k-jobs.io/topology-key`` lands on one node; a gang
    whose two ranks fit the two nodes together but neither alone waits, none of its pods bound,
    and its pods say why (kube-scheduler's PodGroup placement, gate TopologyAwareWorkloadScheduling)."""
    from .test_gang import job_pods

    rack_gang(kube, namespace, "together", 50)
    pods = bound_gang(kube, namespace, "together")
    assert len({p["spec"]["nodeName"] for p in pods}) == 1, [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods]
    # Each rank a little more than half of the larger node's free CPU: the two nodes hold it, one does not.
    free = max(free_millicpu_of(kube, n) for n in racks)
    rack_gang(kube, namespace, "apart", free // 2 + 50)
    # The scheduler tried the gang (a pod says PodScheduled False), and bound none of it.
    waiting = Kube.wait_for(lambda: [x for x in job_pods(kube, namespace, "apart") if any(
        c["type"] == "PodScheduled" and c["status"] == "False" for c in (x.get("status") or {}).get("conditions", []))],
        timeout=300, interval=0.5, what="the big gang tried and unschedulable")  # fmt: skip
    assert not [p for p in job_pods(kube, namespace, "apart") if p["spec"].get("nodeName")]
    print("the gang that fits no rack waits:", next(c["message"] for c in waiting[0]["status"]["conditions"]
                                                   if c["type"] == "PodScheduled"))  # fmt: skip


@pytest.mark.timeout(600)
def test_kueue_places_a_gang_in_one_rack_and_one_that_fits_no_rack_waits_in_its_queue(
    node, racks: dict[str, str], kube: Kube, namespace: str
) -> None:
    """Issue 43's topology through Kueue's Topology Aware Scheduling on the real nodes, each its own
    rack: the queue's flavor has a Topology (rack, then host), so the Workload of a job with
    ``t9k-jobs.io/topology-key`` asks for one rack; Kueue admits the small gang with a
    ``topologyAssignment`` and its pods go to the host it names, together. A gang whose ranks each
    need more than half a node's CPU fits the quota but no rack: Kueue does not admit it, the job
    holds no pod and its ``Queued`` condition gives Kueue's reason."""
    from .test_gang import _millis, job_pods

    host = "kubernetes.io/hostname"
    make_queues(kube, namespace, topology=[RACK, host])
    try:
        rack_gang(kube, namespace, "together", 50)
        pods = bound_gang(kube, namespace, "together")
        wl = kube.get(f"{KUEUE}/namespaces/{namespace}/workloads/together")
        (ps,) = wl["spec"]["podSets"]
        assert ps["topologyRequest"] == {"required": RACK}, ps
        (assigned,) = wl["status"]["admission"]["podSetAssignments"]
        # Kueue keeps only the host level where the lowest level is the host (it names the rack too).
        assert assigned["topologyAssignment"]["levels"][-1] == host, assigned
        nodes = {p["spec"]["nodeName"] for p in pods}
        assert len(nodes) == 1, [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods]
        (where,) = nodes
        for p in pods:
            assert p["spec"]["nodeSelector"][host] == where, p["spec"]
            assert "affinity" not in p["spec"] or "podAffinity" not in p["spec"]["affinity"], p["spec"]["affinity"]
        # Each rank more than half of the larger node's CPU: the quota holds it, no rack does.
        each = max(_millis(kube.get(f"/api/v1/nodes/{n}")["status"]["allocatable"]["cpu"]) for n in racks) // 2 + 50
        rack_gang(kube, namespace, "apart", each)
        path = job_path(namespace, "GenericJob", "apart")

        def queued() -> dict[str, Any] | None:
            conds = (kube.get(path).get("status") or {}).get("conditions") or []
            cond = next((c for c in conds if c["type"] == "Queued" and c.get("message")), None)
            return cond if cond is not None and "topology" in cond["message"].lower() else None

        cond = Kube.wait_for(queued, timeout=240, interval=0.5, what="Kueue to say the gang fits no rack")
        print("the gang that fits no rack waits:", cond["reason"], cond["message"])
        assert kube.get(path)["status"]["phase"] == "Pending"
        assert job_pods(kube, namespace, "apart") == []
    finally:
        for job in ("together", "apart"):
            try:
                kube.delete(job_path(namespace, "GenericJob", job))
            except Exception:  # noqa: BLE001 - not made when the test failed early
                pass
        delete_queues(kube, namespace)
