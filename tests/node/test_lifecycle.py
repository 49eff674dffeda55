"""A job's life in real pods: exit codes and restarts, the deadline, pause and resume, debug mode,
and the operator's own pod deleted mid-job. Small jobs on the training image, several at once."""

from __future__ import annotations

from typing import Any

from tests import helpers
from tests.helpers import replica, template

from ..cluster.kube import Kube, job_path, pod_path
from .conftest import TRAINING_IMAGE, exec_ending_its_container, lease_holder, wait_phase

# The main process is a shell: PID 1 of a container cannot SIGKILL itself, so the test kills the
# shell's child (a python waiting for /tmp/done) from outside; the shell then exits 128 + 9 = 137.
WAIT_FOR_DONE = "python -c \"import os, time\nwhile not os.path.exists('/tmp/done'): time.sleep(0.2)\"; exit $?"


def pytorch(name: str, command: list[str], policy: str = "ExitCode", workers: int = 0, **spec: Any) -> dict:
    """A PyTorchTrainingJob with one master (and ``workers`` workers) running ``command``."""

    def of(type_: str, n: int) -> dict[str, Any]:
        pod = template(command, image=TRAINING_IMAGE, pod={"terminationGracePeriodSeconds": 5})
        return replica(type_, n, pod, restartPolicy=policy)

    specs = [of("master", 1)] + ([of("worker", workers)] if workers else [])
    return helpers.job("PyTorchTrainingJob", name, {"replicaSpecs": specs, **spec})


def create(kube: Kube, ns: str, obj: dict) -> str:
    obj["metadata"]["namespace"] = ns
    kube.create(job_path(ns, obj["kind"]), obj)
    return job_path(ns, obj["kind"], obj["metadata"]["name"])


def running_pod(kube: Kube, ns: str, name: str, timeout: float = 180) -> dict:
    """Wait until pod ``name`` runs (a live, not-deleting pod); return it."""
    return Kube.wait_for(
        lambda: (p := kube.get(pod_path(ns, name)))["status"].get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp") and p,
        timeout=timeout, interval=0.3, what=f"pod {name} to run",
    )


def condition(job: dict, type_: str) -> dict:
    return next(c for c in job["status"]["conditions"] if c["type"] == type_)


def test_exit_codes_in_real_pods(node, kube: Kube, kubectl, namespace: str) -> None:
    """A container killed by SIGKILL ends with 137: under ExitCode it is replaced and the job then
    succeeds; a container that exits 1 fails its job (1 is not a retryable code)."""
    killed = create(kube, namespace, pytorch("killed", ["sh", "-c", WAIT_FOR_DONE]))
    failing = create(kube, namespace, pytorch("failing", ["sh", "-c", "echo failing on purpose; exit 1"]))
    first = running_pod(kube, namespace, "killed-master-0")
    exec_ending_its_container(kubectl, namespace, "killed-master-0", "pkill", "-9", "-x", "python")
    # The replacement: the same name, a new uid, created by the operator after the exit 137.
    second = Kube.wait_for(
        lambda: (p := running_pod(kube, namespace, "killed-master-0", timeout=5))["metadata"]["uid"]
        != first["metadata"]["uid"] and p,
        timeout=180, interval=0.5, what="killed-master-0 to be replaced",
    )
    exec_ending_its_container(kubectl, namespace, second["metadata"]["name"], "touch", "/tmp/done")
    done = wait_phase(kube, killed, ("Succeeded", "Failed"), timeout=180)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    master = done["status"]["tasks"][0]
    assert master["restartCount"] == 1 and done["status"]["backoffCount"] == 1, done["status"]
    restarts = [e["message"] for e in kube.wait_for_events(
        namespace, lambda e: e["involvedObject"]["name"] == "killed" and e["reason"] == "RestartingReplica",
        what="the RestartingReplica Event")]
    assert "exit code 137" in restarts[0], restarts

    failed = wait_phase(kube, failing, ("Succeeded", "Failed"), timeout=180)
    assert failed["status"]["phase"] == "Failed", failed["status"]
    assert "exit code 1" in condition(failed, "Failed")["message"], failed["status"]
    assert "failing on purpose" in kubectl("logs", "-n", namespace, "failing-master-0").stdout


def test_active_deadline_fails_a_running_job(node, kube: Kube, namespace: str) -> None:
    path = create(kube, namespace, pytorch("slow", ["sleep", "600"], runPolicy={"activeDeadlineSeconds": 5}))
    running_pod(kube, namespace, "slow-master-0")
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=120)
    assert done["status"]["phase"] == "Failed"
    assert condition(done, "Failed")["reason"] == "DeadlineExceeded", done["status"]
    Kube.wait_for(lambda: not kube.exists(pod_path(namespace, "slow-master-0")), timeout=60,
                  what="the pod of the timed-out job to be deleted")


def test_pause_then_resume_to_succeeded(node, kube: Kube, namespace: str) -> None:
    """Pause deletes the pods; resume recreates them with the resumeSpecs command, which succeeds."""
    job = pytorch("pausing", ["sleep", "600"], runMode={"pause": {"enabled": False, "resumeSpecs": [
        {"type": "master", "command": ["python", "-c", "print('resumed')"]}]}})
    path = create(kube, namespace, job)
    running_pod(kube, namespace, "pausing-master-0")
    kube.patch(path, {"spec": {"runMode": {"pause": {"enabled": True}}}})
    paused = wait_phase(kube, path, ("Paused",), timeout=60)
    assert condition(paused, "Paused")["status"] == "True"
    Kube.wait_for(lambda: not kube.exists(pod_path(namespace, "pausing-master-0")), timeout=60,
                  what="the paused job's pod to be gone")
    kube.patch(path, {"spec": {"runMode": {"pause": {"enabled": False}}}})
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=180)
    assert done["status"]["phase"] == "Succeeded", done["status"]


def test_debug_mode_waits_and_exec_works(node, kube: Kube, kubectl, namespace: str) -> None:
    """In debug mode the replica runs the debug command instead of training; a user execs into it."""
    job = pytorch("debugging", ["python", "-c", "raise SystemExit(3)"],
                  runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "master", "command": ["sleep", "inf"]}]}})
    path = create(kube, namespace, job)
    running_pod(kube, namespace, "debugging-master-0")
    out = kubectl("exec", "-n", namespace, "debugging-master-0", "--", "python", "-c", "import torch; print('debug ok')")
    assert "debug ok" in out.stdout
    assert kube.get(path)["status"]["phase"] == "Running"


def test_operator_pod_deleted_mid_job(node, kube: Kube, kubectl, namespace: str) -> None:
    """The leader's pod is deleted while a job runs: another operator pod takes the Lease, creates
    no duplicate pod (the replica keeps its uid), and the job finishes."""
    path = create(kube, namespace, pytorch("steady", ["sh", "-c", WAIT_FOR_DONE]))
    before = running_pod(kube, namespace, "steady-master-0")
    leader = lease_holder(kube)
    pods = kube.list("/api/v1/namespaces/t9k-jobs-system/pods", label_selector="app.kubernetes.io/name=t9k-jobs")
    leader_pod = next(p["metadata"]["name"] for p in pods if leader.startswith(p["metadata"]["name"]))
    kubectl("delete", "pod", "-n", "t9k-jobs-system", leader_pod, "--wait=false")
    Kube.wait_for(lambda: (h := lease_holder(kube)) and not h.startswith(leader_pod), timeout=120,
                  interval=0.5, what="another operator pod to take the Lease")
    exec_ending_its_container(kubectl, namespace, "steady-master-0", "touch", "/tmp/done")
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=180)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    after = kube.get(pod_path(namespace, "steady-master-0"))
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert done["status"]["tasks"][0]["restartCount"] == 0
    # The Deployment replaced the deleted operator pod.
    Kube.wait_for(
        lambda: kube.get("/apis/apps/v1/namespaces/t9k-jobs-system/deployments/t9k-jobs-operator")["status"]
        .get("readyReplicas", 0) >= 2,
        timeout=180, what="the operator Deployment back to 2 ready pods",
    )


def test_a_fail_rule_for_exit_42_fails_at_once_while_137_restarts(node, kube: Kube, namespace: str) -> None:
    """Issue 43's failure rules in real pods: ``t9k-jobs.io/failure-policy`` with a ``Fail`` rule
    for exit 42. The first attempt exits 137 (a real SIGKILL of its own python): restarted by the
    OnFailure policy, counted; the second exits 42: the job fails at once, reason FailurePolicy,
    with backoff left."""
    script = ('python -c "import os, signal\na = os.environ[\'T9K_JOBS_RESTART_ATTEMPT\']\nprint(\'attempt\', a, flush=True)\n'
              'os.kill(os.getpid(), signal.SIGKILL) if a == \'0\' else None"; code=$?; [ $code = 0 ] && exit 42; exit $code')  # fmt: skip
    obj = pytorch("rules", ["sh", "-c", script], policy="OnFailure", runPolicy={"backoffLimit": 5})
    obj["metadata"]["annotations"] = {"t9k-jobs.io/failure-policy": '[{"onExitCodes": {"operator": "In", "values": [42]}, "action": "Fail"}]'}
    path = create(kube, namespace, obj)
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=240)
    assert done["status"]["phase"] == "Failed" and done["status"]["backoffCount"] == 1, done["status"]
    failed = condition(done, "Failed")
    assert failed["reason"] == "FailurePolicy" and "rules-master-0 ended (exit code 42" in failed["message"], failed
    restarts = kube.wait_for_events(
        namespace, lambda e: e["involvedObject"]["name"] == "rules" and e["reason"] == "RestartingReplica", what="the restart")
    assert "exit code 137" in restarts[0]["message"], restarts
