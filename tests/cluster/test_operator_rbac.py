"""The operator with exactly the rights `t9k-jobs install` grants it, and no more.

The other cluster tests run the operator as cluster admin. Here it authenticates as its own
ServiceAccount (a token from the TokenRequest API), as in the Deployment of deploy/operator.yaml:
leader election in t9k-jobs-system, every kind of job created, run, restarted and finished, and a
t9kScheduler job's native PodGroup and PriorityClass made. A
rule missing from deploy/rbac.yaml shows up as a 403 in its metrics or a job that never ends.
"""

from __future__ import annotations

from pathlib import Path

from t9k_jobs.api import parse_job
from t9k_jobs.deploy.rbac import NAME, NAMESPACE
from t9k_jobs.render import render

from .kube import Kube, KubeError
from .operator_proc import OperatorProcess
from .test_install import install
from .test_operator import (
    KIND_MANIFESTS,
    create,
    manifest,
    pods,
    pytorch,
    run_all,
    wait_phase,
    wait_pods,
    wait_replaced,
)


def service_account_kubeconfig(control_plane, kube: Kube, dest: Path) -> Path:
    """A kubeconfig that authenticates as the operator's ServiceAccount (token valid one hour)."""
    review = kube.create(
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{NAME}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    text = control_plane.kubeconfig.read_text().replace(control_plane.token, review["status"]["token"])
    dest.write_text(text)
    return dest


def test_operator_needs_no_more_than_its_role(control_plane, kube: Kube, namespace: str, tmp_path) -> None:
    ns = namespace
    out = install(str(control_plane.kubeconfig))
    assert out.returncode == 0, out.stderr
    kubeconfig = service_account_kubeconfig(control_plane, kube, tmp_path / "kubeconfig")
    op = OperatorProcess(
        kubeconfig, tmp_path / "op.log", "--leader-elect", "--lease-namespace", NAMESPACE, "-n", ns
    ).start()
    try:
        kube.wait_for(op.leading, timeout=30, what="the Lease")
        jobs = [manifest(f, ns) for f in KIND_MANIFESTS]
        for obj in jobs:
            create(kube, obj)
        for obj in jobs:
            name = obj["metadata"]["name"]
            count = len([o for o in render(parse_job(obj)) if o["kind"] == "Pod"])
            wait_pods(kube, ns, name, count, op)
            run_all(kube, ns, name)
            wait_phase(kube, ns, obj["kind"], name, "Running", op)
            for pod in pods(kube, ns, name):
                try:
                    kube.set_pod_phase(ns, pod, "Succeeded", exit_code=0)
                except KubeError as exc:  # the job ended on an earlier pod and cleaned this one up
                    assert exc.status == 404, exc
            wait_phase(kube, ns, obj["kind"], name, "Succeeded", op)

        # A restart: the failed pod is deleted and created again.
        create(kube, pytorch("restarts", ns, workers=1, policy="OnFailure"))
        wait_pods(kube, ns, "restarts", 2, op)
        run_all(kube, ns, "restarts")
        wait_phase(kube, ns, "PyTorchTrainingJob", "restarts", "Running", op)
        uid = pods(kube, ns, "restarts")["restarts-worker-0"]["metadata"]["uid"]
        kube.set_pod_phase(ns, "restarts-worker-0", "Failed", exit_code=1)
        wait_replaced(kube, ns, "restarts", "restarts-worker-0", uid)

        # A t9kScheduler job on this 1.37 plane: a native PodGroup, made with the operator's own
        # rights; its priority has no PriorityClass (a priority no other test uses) and the
        # operator, which may only read them, makes none (issue 33).
        create(kube, pytorch("gang", ns, workers=1, scheduler={"t9kScheduler": {"queue": "q", "priority": 77}}))
        wait_pods(kube, ns, "gang", 2, op)
        assert kube.exists(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups/gang")
        assert not kube.exists("/apis/scheduling.k8s.io/v1/priorityclasses/t9k-priority-77")

        forbidden = op.metric("rest_client_requests_total", code="403")
        assert forbidden == 0, f"{forbidden:.0f} requests refused:\n{op.tail()}"
        assert op.metric("t9k_jobs_pods_deleted_total") >= 1
        assert op.metric("leader_election_master_status") == 1
    finally:
        assert op.stop() == 0, op.tail()
