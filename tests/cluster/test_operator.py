"""The operator against the real control plane; the tests play the kubelet by writing pod status.

One operator process serves the module (all namespaces, no leader election); each test works
in its own namespace.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_jobs.api import parse_job
from t9k_jobs.render import render
from tests import helpers
from tests.helpers import replica, template

from .kube import Kube, KubeError, core_path, job_path, pod_path
from .operator_proc import OperatorProcess

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "tests" / "render" / "manifests"
OWNER = "tensorstack.dev/owner-name"
SERVER_ONLY = {"TensorBoard"}  # not served by the test control plane


@pytest.fixture(scope="module")
def operator(control_plane, tmp_path_factory) -> OperatorProcess:
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    op = OperatorProcess(control_plane.kubeconfig, log, "--no-leader-elect", "--log-level", "DEBUG").start()
    yield op
    code = op.stop()
    assert code == 0, f"operator exited {code} on SIGTERM:\n{op.tail()}"


# --------------------------------------------------------------------------- helpers


def manifest(name: str, ns: str) -> dict[str, Any]:
    obj = yaml.safe_load((MANIFESTS / name).read_text())
    obj["metadata"]["namespace"] = ns
    return obj


def pytorch(name: str, ns: str, workers: int = 2, policy: str = "OnFailure", **spec: Any) -> dict[str, Any]:
    """A PyTorchTrainingJob with one master and ``workers`` workers."""
    specs = [
        replica(t, n, template(["python", "train.py"], image="example.registry/pytorch:2.1"), restartPolicy=policy)
        for t, n in (("master", 1), ("worker", workers))
    ]
    return helpers.job("PyTorchTrainingJob", name, {"replicaSpecs": specs, **spec}, namespace=ns)


def create(kube: Kube, obj: dict[str, Any]) -> dict[str, Any]:
    return kube.create(job_path(obj["metadata"]["namespace"], obj["kind"]), obj)


def pods(kube: Kube, ns: str, job: str, live_only: bool = True) -> dict[str, dict[str, Any]]:
    out = {p["metadata"]["name"]: p for p in kube.list(pod_path(ns), label_selector=f"{OWNER}={job}")}
    if live_only:
        out = {n: p for n, p in out.items() if not p["metadata"].get("deletionTimestamp")}
    return out


def status(kube: Kube, ns: str, kind: str, name: str) -> dict[str, Any]:
    return kube.get(job_path(ns, kind, name)).get("status") or {}


def wait_phase(
    kube: Kube, ns: str, kind: str, name: str, phase: str, op: OperatorProcess, timeout: float = 30
) -> dict:
    try:
        return kube.wait_for(
            lambda: (s := status(kube, ns, kind, name)).get("phase") == phase and s,
            timeout=timeout,
            what=f"{kind} {name} phase {phase}",
        )
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\nstatus: {status(kube, ns, kind, name)}\noperator log:\n{op.tail()}"
        ) from None


def wait_pods(kube: Kube, ns: str, job: str, count: int, op: OperatorProcess, timeout: float = 30) -> dict:
    try:
        return kube.wait_for(
            lambda: len(p := pods(kube, ns, job)) == count and p,
            timeout=timeout,
            what=f"{count} pods of {job}",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{op.tail()}") from None


def wait_replaced(kube: Kube, ns: str, job: str, pod: str, old_uid: str, timeout: float = 30) -> dict:
    """Wait until pod ``pod`` of ``job`` exists again with a uid other than ``old_uid``; return it."""
    return kube.wait_for(
        lambda: (p := pods(kube, ns, job).get(pod)) and p["metadata"]["uid"] != old_uid and p,
        timeout=timeout,
        what=f"{pod} replaced",
    )


def run_all(kube: Kube, ns: str, job: str) -> None:
    for name in pods(kube, ns, job):
        kube.set_pod_phase(ns, name, "Running")


def condition(st: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in st.get("conditions") or []:
        if c["type"] == type_:
            return c
    raise AssertionError(f"no condition {type_} in {st.get('conditions')}")


def events(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return [e for e in kube.list(core_path(ns, "events")) if e["involvedObject"]["name"] == name]


def reasons(kube: Kube, ns: str, name: str) -> set[str]:
    return {e["reason"] for e in events(kube, ns, name)}


def is_subset(expected: Any, live: Any, path: str = "") -> list[str]:
    """Differences where ``expected`` is not contained in ``live`` (server defaults are allowed)."""
    if isinstance(expected, dict):
        if not isinstance(live, dict):
            return [f"{path}: expected a mapping, found {live!r}"]
        out = []
        for k, v in expected.items():
            if k not in live:
                if v not in ([], {}, None):  # the API server drops empty lists and maps
                    out.append(f"{path}.{k}: missing")
            else:
                out += is_subset(v, live[k], f"{path}.{k}")
        return out
    if isinstance(expected, list):
        if not isinstance(live, list) or len(live) != len(expected):
            return [f"{path}: expected {len(expected)} items, found {live!r}"]
        return [d for i, (a, b) in enumerate(zip(expected, live)) for d in is_subset(a, b, f"{path}[{i}]")]
    if ".resources." in path and quantity(expected) == quantity(live):
        return []  # the API server canonicalises quantities: 3000m is stored as 3
    return [] if str(expected) == str(live) else [f"{path}: expected {expected!r}, found {live!r}"]


_SUFFIX = {
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def quantity(value: Any) -> float | None:
    """A Kubernetes resource quantity as a number (``"3000m"`` -> 3.0), ``None`` if it is not one."""
    text = str(value)
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * _SUFFIX[suffix]
            except ValueError:
                return None
    try:
        return float(text)
    except ValueError:
        return None


# --------------------------------------------------------------------------- per kind: what render prints


KIND_MANIFESTS = [
    "generic-service.yaml",
    "pytorch-master-worker-scheduler.yaml",
    "deepspeed-gpt.yaml",
    "colossalai-workers.yaml",
]


@pytest.mark.parametrize("file", KIND_MANIFESTS)
def test_children_match_render(kube: Kube, namespace: str, operator: OperatorProcess, file: str) -> None:
    obj = manifest(file, namespace)
    job = create(kube, obj)
    # Render the job as stored (with its uid): what `t9k-jobs render` prints for it.
    # This 1.37 API server serves scheduling.k8s.io/v1beta1 (not T9k's PodGroup): t9kScheduler jobs
    # get a native PodGroup (gang "native"), and no PriorityClass: the admin made none here (issue 33).
    unranked = frozenset[str]()
    expected = [o for o in render(parse_job(job), gang="native", priority_classes=unranked) if o["kind"] not in SERVER_ONLY]
    want_pods = [o for o in expected if o["kind"] == "Pod"]
    live_pods = wait_pods(kube, namespace, obj["metadata"]["name"], len(want_pods), operator)
    paths = {"Service": "services", "ConfigMap": "configmaps", "Secret": "secrets"}
    apis = {"PodGroup": f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups",
            "PodDisruptionBudget": f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"}  # fmt: skip
    problems = []
    for o in expected:
        name = o["metadata"]["name"]
        if o["kind"] == "Pod":
            live = {"apiVersion": "v1", "kind": "Pod", **live_pods[name]}  # list items carry neither
        else:
            live = kube.wait_for(
                lambda o=o: kube.get(
                    f"{apis[o['kind']]}/{o['metadata']['name']}"
                    if o["kind"] in apis
                    else core_path(namespace, paths[o["kind"]], o["metadata"]["name"])
                )
            )
        refs = live["metadata"].get("ownerReferences") or []
        assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in refs] == [
            (obj["kind"], obj["metadata"]["name"], job["metadata"]["uid"], True)
        ], f"{o['kind']} {name}: owner references {refs}"
        want = copy.deepcopy(o)
        if o["kind"] == "Secret":
            # The key pair is made at creation: compare the keys, not the values.
            assert sorted(live.get("data") or {}) == sorted(
                want.pop("stringData", {}) or want.pop("data", {})
            )
            want.pop("stringData", None)
            want.pop("data", None)
        problems += [f"{o['kind']} {name}{d}" for d in is_subset(want, live)]
    assert problems == [], "\n".join(problems)
    # Nothing else was created for the job.
    live_names = set(pods(kube, namespace, obj["metadata"]["name"], live_only=False))
    assert live_names == {o["metadata"]["name"] for o in want_pods}
    st = kube.wait_for(
        lambda: (s := status(kube, namespace, obj["kind"], obj["metadata"]["name"])).get("phase") and s
    )
    assert st["phase"] in ("Pending", "Running")
    assert "Initialized" in {c["type"] for c in st["conditions"]}


# --------------------------------------------------------------------------- lifecycle


def test_pytorch_runs_restarts_and_succeeds(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    ns, name = namespace, "ddp"
    create(kube, pytorch(name, ns, workers=2, policy="OnFailure", runPolicy={"backoffLimit": 3}))
    first = wait_pods(kube, ns, name, 3, operator)
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Pending", operator)
    assert st["aggregate"]["creating"] + st["aggregate"]["pending"] == 3

    run_all(kube, ns, name)
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
    kube.wait_for(
        lambda: status(kube, ns, "PyTorchTrainingJob", name).get("aggregate", {}).get("running") == 3
    )
    assert condition(st, "Running")["status"] == "True"
    assert st.get("startTime")

    # A worker fails with exit code 1: OnFailure restarts it (a new pod, same name).
    kube.set_pod_phase(ns, "ddp-worker-1", "Failed", exit_code=1)
    wait_replaced(kube, ns, name, "ddp-worker-1", first["ddp-worker-1"]["metadata"]["uid"])
    st = kube.wait_for(
        lambda: (s := status(kube, ns, "PyTorchTrainingJob", name)).get("backoffCount") == 1 and s
    )
    worker = next(t for t in st["tasks"] if t["type"] == "worker")
    assert worker["restartCount"] == 1
    assert "RestartingReplica" in kube.wait_for(lambda: reasons(kube, ns, name) & {"RestartingReplica"})
    # Same names for the others: nothing but worker-1 was replaced.
    now = pods(kube, ns, name)
    assert {n: p["metadata"]["uid"] for n, p in now.items() if n != "ddp-worker-1"} == {
        n: p["metadata"]["uid"] for n, p in first.items() if n != "ddp-worker-1"
    }

    kube.set_pod_phase(ns, "ddp-worker-1", "Running")
    kube.set_pod_phase(ns, "ddp-master-0", "Succeeded")
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Succeeded", operator)
    assert condition(st, "Completed")["status"] == "True"
    assert st.get("completionTime")
    assert "Succeeded" in kube.wait_for(lambda: reasons(kube, ns, name) & {"Succeeded"})

    # Deleting the job cascades to its pods (owner references + the garbage collector).
    kube.delete(job_path(ns, "PyTorchTrainingJob", name))
    kube.wait_for(
        lambda: not pods(kube, ns, name, live_only=False), timeout=60, what="pods garbage-collected"
    )


def test_never_policy_fails_the_job(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    ns, name = namespace, "never"
    create(kube, pytorch(name, ns, workers=1, policy="Never"))
    wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
    kube.set_pod_phase(ns, "never-master-0", "Failed", exit_code=3)
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Failed", operator)
    assert condition(st, "Failed")["status"] == "True"
    assert st["backoffCount"] == 0
    assert "never-master-0" in pods(kube, ns, name, live_only=False), (
        "the failed pod is kept (cleanUpPolicy None)"
    )


def test_backoff_limit_fails_the_job(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    ns, name = namespace, "limit"
    create(kube, pytorch(name, ns, workers=1, policy="OnFailure", runPolicy={"backoffLimit": 1}))
    wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    # The master decides a PyTorchTrainingJob: its first failure is retried, the second is final.
    uid = pods(kube, ns, name)["limit-master-0"]["metadata"]["uid"]
    kube.set_pod_phase(ns, "limit-master-0", "Failed", exit_code=1)
    kube.wait_for(
        lambda: (
            pods(kube, ns, name).get("limit-master-0", {}).get("metadata", {}).get("uid") not in (None, uid)
        ),
        what="master recreated",
    )
    kube.set_pod_phase(ns, "limit-master-0", "Failed", exit_code=1)  # fails before it was seen running
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Failed", operator)
    assert st["backoffCount"] == 1


def test_pause_and_resume(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    ns, name = namespace, "pausable"
    create(kube, pytorch(name, ns, workers=1))
    wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)

    kube.patch(job_path(ns, "PyTorchTrainingJob", name), {"spec": {"runMode": {"pause": {"enabled": True}}}})
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Paused", operator)
    kube.wait_for(lambda: not pods(kube, ns, name, live_only=False), what="pods deleted while paused")
    assert condition(st, "Paused")["status"] == "True"

    kube.patch(job_path(ns, "PyTorchTrainingJob", name), {"spec": {"runMode": {"pause": {"enabled": False}}}})
    wait_pods(kube, ns, name, 2, operator)
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Resuming", operator)
    run_all(kube, ns, name)
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
    assert condition(st, "Paused")["status"] == "False"


def test_debug_mode_runs_the_debug_command(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    ns = namespace
    obj = manifest("pytorch-debug.yaml", ns)
    create(kube, obj)
    live = wait_pods(kube, ns, "seg-debug", 1, operator)
    (pod,) = live.values()
    c = next(c for c in pod["spec"]["containers"] if c["name"] == "pytorch")
    assert c["command"] == ["sleep", "inf"]
    assert not c.get("args")
    # A debug replica that exits is left for the user to inspect: no restart, no end of the job.
    kube.set_pod_phase(ns, pod["metadata"]["name"], "Failed", exit_code=1)
    kube.wait_for(
        lambda: status(kube, ns, "PyTorchTrainingJob", "seg-debug").get("aggregate", {}).get("failed") == 1,
        what="the exit is reported",
    )
    time.sleep(1)
    assert [p["metadata"]["uid"] for p in pods(kube, ns, "seg-debug").values()] == [pod["metadata"]["uid"]]
    assert status(kube, ns, "PyTorchTrainingJob", "seg-debug")["phase"] not in ("Succeeded", "Failed")


@pytest.mark.parametrize(
    ("policy", "left"),
    [("None", {"c-master-0", "c-worker-0"}), ("Unfinished", {"c-master-0"}), ("All", set())],
)
def test_clean_up_policy(
    kube: Kube, namespace: str, operator: OperatorProcess, policy: str, left: set[str]
) -> None:
    ns, name = namespace, "c"
    create(kube, pytorch(name, ns, workers=1, runPolicy={"cleanUpPolicy": policy}))
    wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
    kube.set_pod_phase(ns, "c-master-0", "Succeeded")  # the worker is still running
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Succeeded", operator)
    kube.wait_for(lambda: set(pods(kube, ns, name)) == left, what=f"pods left by cleanUpPolicy {policy}")
    time.sleep(1)
    assert set(pods(kube, ns, name)) == left


def test_active_deadline_fails_the_job(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    ns, name = namespace, "slow"
    create(kube, pytorch(name, ns, workers=1, runPolicy={"activeDeadlineSeconds": 2}))
    wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
    st = wait_phase(kube, ns, "PyTorchTrainingJob", name, "Failed", operator, timeout=20)
    assert condition(st, "Failed")["reason"] == "DeadlineExceeded"
    kube.wait_for(lambda: not pods(kube, ns, name), what="running pods stopped at the deadline")


def test_elastic_scale_up_and_down(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    ns, name = namespace, "elastic"
    obj = pytorch(
        name,
        ns,
        workers=1,
        torchrunConfig={"enabled": True, "maxRestarts": 3, "procPerNode": "1"},
        elastic={"enabled": True, "minReplicas": 1, "maxReplicas": 6, "expectedReplicas": 2},
    )
    obj["spec"]["replicaSpecs"] = obj["spec"]["replicaSpecs"][1:]  # workers only
    create(kube, obj)
    wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)

    kube.patch(job_path(ns, "PyTorchTrainingJob", name), {"spec": {"elastic": {"expectedReplicas": 4}}})
    live = wait_pods(kube, ns, name, 4, operator)
    assert set(live) == {f"elastic-worker-{i}" for i in range(4)}

    kube.patch(job_path(ns, "PyTorchTrainingJob", name), {"spec": {"elastic": {"expectedReplicas": 1}}})
    live = wait_pods(kube, ns, name, 1, operator)
    assert set(live) == {"elastic-worker-0"}
    st = status(kube, ns, "PyTorchTrainingJob", name)
    assert st["phase"] == "Running"
    assert st["backoffCount"] == 0, "scaling down is not a failure"


def test_deepspeed_elastic_rescale_rewrites_the_hostfile_and_relaunches_the_launcher(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    """§4.7 on a real API server: the hostfile ConfigMap is patched (resourceVersion precondition),
    worker-0 (the launcher) is replaced, worker-1 keeps its pod, the new worker gets its Service;
    scaling down deletes the Service of the worker scaled away. No restart is counted."""
    ns = namespace
    obj = manifest("deepspeed-gpt.yaml", ns)
    name = obj["metadata"]["name"]
    obj["spec"]["elastic"] = {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 2}
    create(kube, obj)
    live = wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, "DeepSpeedJob", name, "Running", operator)
    launcher, other = live[f"{name}-worker-0"]["metadata"]["uid"], live[f"{name}-worker-1"]["metadata"]["uid"]
    hostfile = core_path(ns, "configmaps", f"{name}-launch")
    before = kube.get(hostfile)

    kube.patch(job_path(ns, "DeepSpeedJob", name), {"spec": {"elastic": {"expectedReplicas": 3}}})
    kube.wait_for(lambda: f"{name}-worker-2" in kube.get(hostfile)["data"]["hostfile"], what="hostfile rewritten")
    assert kube.get(hostfile)["metadata"]["uid"] == before["metadata"]["uid"], "updated in place, not recreated"
    relaunched = wait_replaced(kube, ns, name, f"{name}-worker-0", launcher)
    assert f"{name}-worker-2" in " ".join(relaunched["spec"]["containers"][0]["command"])
    live = wait_pods(kube, ns, name, 3, operator)
    assert live[f"{name}-worker-1"]["metadata"]["uid"] == other
    kube.wait_for(lambda: kube.exists(core_path(ns, "services", f"{name}-worker-2")), what="Service of worker-2")
    assert "RelaunchingReplica" in kube.wait_for(lambda: reasons(kube, ns, name) & {"RelaunchingReplica"})

    kube.patch(job_path(ns, "DeepSpeedJob", name), {"spec": {"elastic": {"expectedReplicas": 2}}})
    kube.wait_for(lambda: not kube.exists(core_path(ns, "services", f"{name}-worker-2")), what="Service pruned")
    kube.wait_for(lambda: f"{name}-worker-2" not in kube.get(hostfile)["data"]["hostfile"], what="hostfile shrunk")
    st = status(kube, ns, "DeepSpeedJob", name)
    assert st["backoffCount"] == 0 and st["phase"] == "Running", st


def test_pod_deleted_by_someone_else_is_replaced(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns, name = namespace, "victim"
    create(kube, pytorch(name, ns, workers=1))
    first = wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, "PyTorchTrainingJob", name, "Running", operator)
    kube.delete(pod_path(ns, "victim-worker-0"))
    wait_replaced(kube, ns, name, "victim-worker-0", first["victim-worker-0"]["metadata"]["uid"])
    assert "ReplicaDeleted" in kube.wait_for(lambda: reasons(kube, ns, name) & {"ReplicaDeleted"})


def test_malformed_job_does_not_block_the_others(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns = namespace
    bad = pytorch("broken", ns, workers=1)
    bad["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"] = []  # the schema lets it through
    try:
        create(kube, bad)
    except KubeError as exc:  # pragma: no cover - a stricter schema is fine too
        pytest.fail(f"expected the API server to accept the object, got {exc}")
    create(kube, pytorch("fine", ns, workers=1))
    wait_pods(kube, ns, "fine", 2, operator)
    found = kube.wait_for(
        lambda: [e for e in events(kube, ns, "broken") if e["reason"] == "InvalidSpec"],
        what="InvalidSpec event",
    )
    assert "containers" in found[0]["message"]
    assert not pods(kube, ns, "broken", live_only=False)


def test_metrics_and_health(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    assert operator.http("/healthz")[0] == 200
    code, body = operator.http("/readyz")
    assert code == 200 and "leader" in body
    create(kube, pytorch("counted", namespace, workers=1))
    wait_pods(kube, namespace, "counted", 2, operator)
    kube.wait_for(lambda: operator.metric("controller_runtime_reconcile_total") > 0)
    assert operator.metric("t9k_jobs_pods_created_total", kind="PyTorchTrainingJob") >= 2
    assert operator.metric("rest_client_requests_total", verb="create") >= 2
    assert operator.metric("workqueue_adds_total") > 0
    assert operator.metric("t9k_jobs_jobs", kind="PyTorchTrainingJob") >= 1


# --------------------------------------------------------------------------- every kind: Running, Succeeded, Failed


@pytest.mark.parametrize("outcome", ["Succeeded", "Failed"])
@pytest.mark.parametrize("file", KIND_MANIFESTS)
def test_each_kind_runs_and_ends(
    kube: Kube, namespace: str, operator: OperatorProcess, file: str, outcome: str
) -> None:
    """All replicas run (phase Running, aggregate running = replicas), then all succeed or all
    keep failing (restarts by each kind's policy until its backoff is used up)."""
    obj = manifest(file, namespace)
    kind, name = obj["kind"], obj["metadata"]["name"]
    create(kube, obj)
    count = len([o for o in render(parse_job(obj)) if o["kind"] == "Pod"])
    wait_pods(kube, namespace, name, count, operator)
    run_all(kube, namespace, name)
    st = wait_phase(kube, namespace, kind, name, "Running", operator)
    st = kube.wait_for(
        lambda: (s := status(kube, namespace, kind, name)).get("aggregate", {}).get("running") == count and s
    )
    assert sum(len(t["replicas"]) for t in st["tasks"]) == count
    assert condition(st, "Running")["status"] == "True"

    end = time.monotonic() + 60
    while (phase := status(kube, namespace, kind, name).get("phase")) != outcome:
        assert phase not in ("Succeeded", "Failed"), f"{kind} ended {phase}, expected {outcome}"
        assert time.monotonic() < end, f"{kind} did not reach {outcome}:\n{operator.tail()}"
        for pod_name, p in pods(kube, namespace, name).items():
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                try:
                    kube.set_pod_phase(
                        namespace, pod_name, outcome, exit_code=0 if outcome == "Succeeded" else 1
                    )
                except KubeError as exc:
                    assert exc.status in (404, 409, 422), exc  # cleaned up or replaced meanwhile
        time.sleep(0.3)
    st = status(kube, namespace, kind, name)
    assert condition(st, "Completed")["status"] == "True"
    assert condition(st, "Failed")["status"] == ("True" if outcome == "Failed" else "False")
    assert st.get("completionTime")
    expected_event = "Succeeded" if outcome == "Succeeded" else None
    if expected_event:
        assert expected_event in kube.wait_for(lambda: reasons(kube, namespace, name) & {expected_event})
    else:
        assert kube.wait_for(lambda: [e for e in events(kube, namespace, name) if e["type"] == "Warning"])


def test_two_kinds_with_one_name_say_the_names_are_taken(kube: Kube, namespace: str, operator: OperatorProcess) -> None:
    """A PyTorchTrainingJob and a DeepSpeedJob named alike want the pod and Service
    ``<name>-worker-0``: the second one says whose they are (condition and Warning) instead of
    waiting in silence, and creates them once the first job and its children are gone."""
    ns = namespace
    create(kube, pytorch("same", ns, workers=1))
    wait_pods(kube, ns, "same", 2, operator)
    ds = manifest("deepspeed-legacy.yaml", ns)
    ds["metadata"]["name"] = "same"
    create(kube, ds)
    init = kube.wait_for(
        lambda: (c := condition(status(kube, ns, "DeepSpeedJob", "same"), "Initialized"))
        and c.get("reason") == "ChildConflict" and c,
        timeout=30,
        what="the DeepSpeedJob's ChildConflict condition",
    )
    assert "Pod same-worker-0 belongs to PyTorchTrainingJob/same" in init["message"], init
    assert "Service same-worker-0 belongs to PyTorchTrainingJob/same" in init["message"], init
    warnings = kube.wait_for_events(
        ns, lambda e: e["involvedObject"]["kind"] == "DeepSpeedJob" and e["reason"] == "ChildConflict",
        what="the DeepSpeedJob's ChildConflict Warning",
    )
    assert warnings[0]["type"] == "Warning", warnings
    assert status(kube, ns, "DeepSpeedJob", "same")["phase"] == "Pending"
    # The PyTorchTrainingJob keeps its pods; once it is gone, the DeepSpeedJob gets its own.
    owner_kind = lambda p: p["metadata"]["ownerReferences"][0]["kind"]  # noqa: E731
    live = pods(kube, ns, "same")
    assert owner_kind(live["same-worker-0"]) == owner_kind(live["same-master-0"]) == "PyTorchTrainingJob"
    assert owner_kind(live["same-worker-1"]) == "DeepSpeedJob"  # a free name is the DeepSpeedJob's
    kube.delete(job_path(ns, "PyTorchTrainingJob", "same"), propagation="Background")
    kube.wait_for(
        lambda: (p := pods(kube, ns, "same")) and {owner_kind(x) for x in p.values()} == {"DeepSpeedJob"}
        and "same-worker-0" in p,
        timeout=120,
        what="the DeepSpeedJob's own pods once the names are free",
    )
    kube.wait_for(
        lambda: (c := condition(status(kube, ns, "DeepSpeedJob", "same"), "Initialized"))
        and c.get("reason") != "ChildConflict",
        timeout=60,
        what="the conflict condition to clear",
    )
