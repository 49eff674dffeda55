"""The day-two verbs and the SDK against the real API server: no operator, no kubelet.

The tests write what the operator and the kubelet would (a job's status, a pod and its status,
an Event) and check what ``t9k-jobs get/describe/wait/delete/pause/resume/scale/create`` and
``t9k_jobs.Client`` make of it. Real pods and real logs are in tests/node/test_verbs.py.

No sleep decides a result: waits are on conditions, with generous limits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from t9k_jobs import Client
from t9k_jobs.errors import (
    AlreadyExists,
    InvalidJob,
    JobEndedOtherwise,
    NotFound,
    UsageError,
    WaitTimeout,
)
from tests import helpers
from tests.helpers import replica, template

from .kube import Kube, core_path, job_path, now_rfc3339, pod_path

LIMIT = 90.0  # seconds: generous, the machine may be a loaded 2-core VM


def cli(
    kubeconfig: Path | None, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``t9k-jobs ARGS`` with ``KUBECONFIG`` set to ``kubeconfig`` (unset when None)."""
    environ = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    if kubeconfig is not None:
        environ["KUBECONFIG"] = str(kubeconfig)
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=LIMIT,
        cwd=cwd,
        env=environ,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.strip().count("\n") == 0, done.stderr
    return done.stderr.strip().removeprefix("error: ")


def generic(name: str, replicas: int = 2, **spec: Any) -> dict[str, Any]:
    worker = replica("worker", replicas, template(["true"], name="main", image="busybox"))
    return helpers.job("GenericJob", name, {"replicaSpecs": [worker], **spec})


def elastic(name: str) -> dict[str, Any]:
    spec = {
        "torchrunConfig": {"enabled": True},
        "elastic": {"enabled": True, "minReplicas": 1, "maxReplicas": 4, "expectedReplicas": 2},
        "replicaSpecs": [replica("worker", 2, template(["python", "train.py"], image="x"))],
    }
    return helpers.job("PyTorchTrainingJob", name, spec)


def put(kube: Kube, ns: str, manifest: dict[str, Any]) -> dict[str, Any]:
    body = {**manifest, "metadata": {**manifest["metadata"], "namespace": ns}}
    return kube.create(job_path(ns, manifest["kind"]), body)


def set_status(kube: Kube, ns: str, kind: str, name: str, status: dict[str, Any]) -> None:
    """Write the job's status as the operator would (through the status subresource)."""
    kube.patch(f"{job_path(ns, kind, name)}/status", {"status": status})


def running(replicas: list[str], restarts: int = 0) -> dict[str, Any]:
    return {
        "phase": "Running",
        "aggregate": {"running": len(replicas)},
        "tasks": [
            {
                "type": "worker",
                "restartCount": restarts,
                "replicas": [
                    {"name": r, "uid": f"uid-{r}", "phase": "Running", "containers": [{"name": "main", "state": "Running"}]}
                    for r in replicas
                ],
            }
        ],
        "conditions": [{"type": "Running", "status": "True", "reason": "-", "message": "The job is running."}],
    }


def failed(message: str) -> dict[str, Any]:
    return {
        "phase": "Failed",
        "completionTime": now_rfc3339(),
        "conditions": [{"type": "Failed", "status": "True", "reason": "ReplicaFailed", "message": message}],
    }


@pytest.fixture
def kc(control_plane) -> Path:
    return control_plane.kubeconfig


@pytest.fixture
def client(control_plane, namespace: str):
    with Client.cluster(control_plane.kubeconfig, namespace=namespace) as c:
        yield c


# --------------------------------------------------------------------------- create and get


def test_create_then_get_in_every_format(kc: Path, kube: Kube, namespace: str, tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(generic("two")))
    done = cli(kc, "create", "-f", str(path), "-n", namespace)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "genericjob.batch.tensorstack.dev/two created\n"
    assert kube.get(job_path(namespace, "GenericJob", "two"))["spec"]["replicaSpecs"][0]["replicas"] == 2

    again = cli(kc, "create", "-f", str(path), "-n", namespace)
    assert one_line_error(again, 1) == f"GenericJob 'two' already exists in namespace '{namespace}'"
    # FILE alone, as run, validate and render take it (issue 41), is the same create.
    positional = cli(kc, "create", str(path), "-n", namespace)
    assert one_line_error(positional, 1) == f"GenericJob 'two' already exists in namespace '{namespace}'"
    assert one_line_error(cli(kc, "create", str(path), "-f", str(path), "-n", namespace), 2).startswith(
        "give the manifest once: -f FILE (as kubectl create -f) or FILE"
    )
    assert one_line_error(cli(kc, "create", "-n", namespace), 2).startswith("no manifest given: t9k-jobs create -f FILE")

    table = cli(kc, "get", "gj", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "READY", "RESTARTS", "AGE"]
    assert table[1].split()[:4] == ["two", "Pending", "0/2", "0"]

    set_status(kube, namespace, "GenericJob", "two", running(["two-worker-0", "two-worker-1"], restarts=1))
    row = cli(kc, "get", "genericjobs", "two", "-n", namespace).stdout.splitlines()[1].split()
    assert row[:4] == ["two", "Running", "2/2", "1"]

    every = cli(kc, "get", "-n", namespace).stdout.splitlines()
    assert every[0].split()[:2] == ["KIND", "NAME"] and every[1].split()[:3] == ["GenericJob", "two", "Running"]
    wide = cli(kc, "get", "gj", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-5:] == ["BACKOFF", "MODE", "QUEUE", "PRIORITY", "POSITION"]
    assert wide[1].split()[-5:] == ["0", "Immediate", "-", "-", "-"]  # no t9kScheduler: no queue, no position
    all_ns = cli(kc, "get", "gj", "-A").stdout.splitlines()
    assert all_ns[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert [namespace, "two", "Running"] in [line.split()[:3] for line in all_ns[1:]]

    obj = json.loads(cli(kc, "get", "gj", "two", "-n", namespace, "-o", "json").stdout)
    assert obj["kind"] == "GenericJob" and obj["status"]["phase"] == "Running"
    assert obj["metadata"]["namespace"] == namespace and obj["metadata"]["uid"]
    listing = yaml.safe_load(cli(kc, "get", "gj", "-n", namespace, "-o", "yaml").stdout)
    assert listing["kind"] == "List" and [i["metadata"]["name"] for i in listing["items"]] == ["two"]
    assert cli(kc, "get", "gj", "-n", namespace, "-o", "name").stdout == "genericjob.batch.tensorstack.dev/two\n"

    missing = cli(kc, "get", "pj", "nothere", "-n", namespace)
    assert one_line_error(missing, 1) == f"PyTorchTrainingJob 'nothere' not found in namespace '{namespace}'"
    empty = cli(kc, "get", "dj", "-n", namespace)
    assert empty.returncode == 0 and empty.stdout == ""
    assert f"No jobs of DeepSpeedJob found in namespace {namespace}." in empty.stderr


def test_create_refuses_bad_input_with_one_line(kc: Path, namespace: str, tmp_path: Path) -> None:
    bad = generic("bad")
    bad["spec"]["replicaSpecs"][0]["replicas"] = -1
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    message = one_line_error(cli(kc, "create", "-f", str(path), "-n", namespace), 2)
    assert message.startswith(f"{path}: spec.replicaSpecs[0].replicas:"), message

    other = generic("elsewhere")
    other["metadata"]["namespace"] = "somewhere-else"
    path.write_text(yaml.safe_dump(other))
    message = one_line_error(cli(kc, "create", "-f", str(path), "-n", namespace), 2)
    assert "metadata.namespace is 'somewhere-else'" in message

    no_ns = generic("lost")
    no_ns["metadata"]["namespace"] = "t-no-such-namespace"
    path.write_text(yaml.safe_dump(no_ns))
    assert "not found" in one_line_error(cli(kc, "create", "-f", str(path)), 1)


def test_the_target_is_chosen_by_the_options(kc: Path, kube: Kube, namespace: str, tmp_path: Path) -> None:
    put(kube, namespace, generic("where"))
    # $KUBECONFIG set: the cluster; --local: this machine's runs (none in tmp_path).
    assert cli(kc, "get", "gj", "where", "-n", namespace).returncode == 0
    local = cli(kc, "get", "gj", "where", "--local", cwd=tmp_path)
    assert "no local run of genericjob 'where'" in one_line_error(local, 1)
    # No $KUBECONFIG: local, unless a cluster option says otherwise.
    assert "no local run" in one_line_error(cli(None, "get", "gj", "where", cwd=tmp_path), 1)
    assert cli(None, "get", "gj", "where", "--kubeconfig", str(kc), "-n", namespace).returncode == 0
    home = {"HOME": str(tmp_path)}
    assert "no kubeconfig" in one_line_error(cli(None, "get", "--cluster", cwd=tmp_path, env=home), 1)
    # Options of both kinds, or a context the kubeconfig does not have: usage errors.
    assert "--local: -n/--namespace is a cluster option" in one_line_error(
        cli(None, "get", "--local", "-n", namespace), 2
    )
    assert "cannot be combined" in one_line_error(cli(kc, "get", "-n", namespace, "--runs-dir", str(tmp_path)), 2)
    assert "--context: no context 'nope'" in one_line_error(cli(kc, "get", "--context", "nope"), 2)
    assert "--kubeconfig: /nonexistent is not a file" in one_line_error(
        cli(None, "get", "--kubeconfig", "/nonexistent"), 2
    )


# --------------------------------------------------------------------------- wait


def test_wait_reaches_fails_and_times_out(kc: Path, kube: Kube, namespace: str) -> None:
    put(kube, namespace, generic("w"))
    waiter = subprocess.Popen(
        [sys.executable, "-m", "t9k_jobs.cli", "wait", "gj", "w", "--for=Succeeded", "--timeout", "80s",
         "--kubeconfig", str(kc), "-n", namespace],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        set_status(kube, namespace, "GenericJob", "w", running(["w-worker-0", "w-worker-1"]))
        set_status(kube, namespace, "GenericJob", "w", {"phase": "Succeeded", "completionTime": now_rfc3339()})
        out, err = waiter.communicate(timeout=LIMIT)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert waiter.returncode == 0, err
    assert out == "GenericJob w is Succeeded\n"

    put(kube, namespace, generic("f"))
    set_status(kube, namespace, "GenericJob", "f", failed("f-worker-1 failed with exit code 3"))
    message = one_line_error(cli(kc, "wait", "gj", "f", "--for=Succeeded", "-n", namespace), 1)
    assert message == "GenericJob f ended Failed, not Succeeded: f-worker-1 failed with exit code 3"
    assert cli(kc, "wait", "gj", "f", "--for=condition=Failed", "-n", namespace).returncode == 0

    put(kube, namespace, generic("slow"))
    message = one_line_error(cli(kc, "wait", "gj", "slow", "--for=Running", "--timeout", "1s", "-n", namespace), 1)
    assert message == "timed out after 1s waiting for GenericJob slow to be Running; it is Pending"
    assert "--for='Done' is not accepted" in one_line_error(
        cli(kc, "wait", "gj", "slow", "--for=Done", "-n", namespace), 2
    )
    assert "not found" in one_line_error(cli(kc, "wait", "gj", "nope", "--for=Running", "-n", namespace), 1)


def test_sdk_wait_follows_changes_and_raises_typed_errors(client: Client, kube: Kube, namespace: str) -> None:
    put(kube, namespace, generic("sdk"))
    result: dict[str, Any] = {}

    def wait() -> None:
        try:
            result["job"] = client.wait("gj", "sdk", phase="Running", timeout=80)
        except Exception as exc:  # noqa: BLE001 - checked below
            result["error"] = exc

    waiter = threading.Thread(target=wait)
    waiter.start()
    set_status(kube, namespace, "GenericJob", "sdk", running(["sdk-worker-0", "sdk-worker-1"]))
    waiter.join(timeout=LIMIT)
    assert "error" not in result, result
    job = result["job"]
    assert job.kind == "GenericJob" and job.status.phase == "Running" and job.status.aggregate.running == 2

    with pytest.raises(WaitTimeout) as timeout:
        client.wait("gj", "sdk", phase="Succeeded", timeout="1s")
    assert timeout.value.exit_code == 1 and timeout.value.phase == "Running"
    assert str(timeout.value) == "timed out after 1s waiting for GenericJob sdk to be Succeeded; it is Running"

    set_status(kube, namespace, "GenericJob", "sdk", failed("sdk-worker-0 failed with exit code 1"))
    with pytest.raises(JobEndedOtherwise) as ended:
        client.wait("genericjob", "sdk")
    assert ended.value.phase == "Failed" and "ended Failed, not Succeeded" in str(ended.value)
    with pytest.raises(NotFound):
        client.wait("gj", "nothere")
    with pytest.raises(UsageError):
        client.wait("gj", "sdk", phase="Done")


def test_wait_ends_when_the_job_is_deleted(client: Client, kube: Kube, namespace: str) -> None:
    put(kube, namespace, generic("gone"))
    result: dict[str, Any] = {}

    def wait() -> None:
        try:
            client.wait("gj", "gone", timeout=80)
        except Exception as exc:  # noqa: BLE001
            result["error"] = exc

    waiter = threading.Thread(target=wait)
    waiter.start()
    kube.delete(job_path(namespace, "GenericJob", "gone"))
    waiter.join(timeout=LIMIT)
    error = result.get("error")
    assert isinstance(error, (JobEndedOtherwise, NotFound)), result


# --------------------------------------------------------------------------- the SDK's other methods


def test_sdk_create_get_list_delete(client: Client, kube: Kube, namespace: str, kc: Path) -> None:
    created = client.create(generic("made"))
    assert created.name == "made" and created.namespace == namespace and created.metadata.uid
    with pytest.raises(AlreadyExists) as exists:
        client.create(generic("made"))
    assert exists.value.exit_code == 1
    with pytest.raises(InvalidJob) as invalid:
        client.create({**generic("x"), "kind": "TFJob"})
    assert invalid.value.exit_code == 2 and "kind: 'TFJob' is not one of" in str(invalid.value)

    set_status(kube, namespace, "GenericJob", "made", running(["made-worker-0", "made-worker-1"]))
    job = client.get("GenericJob", "made")
    assert job.status is not None and job.status.phase == "Running"
    put(kube, namespace, elastic("grow"))
    assert sorted((j.kind, j.name) for j in client.list()) == [("GenericJob", "made"), ("PyTorchTrainingJob", "grow")]
    assert [j.name for j in client.list("pj")] == ["grow"]
    rows = client.summaries("gj")
    assert [(r.name, r.phase, r.ready) for r in rows] == [("made", "Running", "2/2")]

    with pytest.raises(NotFound) as missing:
        client.get("pj", "nothere")
    cli_line = one_line_error(cli(kc, "get", "pj", "nothere", "-n", namespace), 1)
    assert str(missing.value) == cli_line, "the SDK raises the line the CLI prints"

    assert str(client.delete("gj", "made")) == "genericjob.batch.tensorstack.dev/made deleted"
    Kube.wait_for(lambda: not kube.exists(job_path(namespace, "GenericJob", "made")), timeout=LIMIT, what="deleted")
    with pytest.raises(NotFound):
        client.delete("gj", "made")
    done = cli(kc, "delete", "pj", "grow", "-n", namespace)
    assert done.returncode == 0 and done.stdout == "pytorchtrainingjob.batch.tensorstack.dev/grow deleted\n"


def test_pause_resume_and_scale_patch_the_spec(kc: Path, kube: Kube, namespace: str) -> None:
    put(kube, namespace, generic("p"))
    done = cli(kc, "pause", "gj", "p", "-n", namespace)
    assert done.returncode == 0, done.stderr
    assert "paused" in done.stdout
    spec = lambda kind, name: kube.get(job_path(namespace, kind, name))["spec"]  # noqa: E731
    assert spec("GenericJob", "p")["runMode"]["pause"]["enabled"] is True
    assert cli(kc, "pause", "gj", "p", "-n", namespace).returncode == 0, "pausing a paused job changes nothing"
    assert cli(kc, "resume", "gj", "p", "-n", namespace).returncode == 0
    assert spec("GenericJob", "p")["runMode"]["pause"]["enabled"] is False

    message = one_line_error(cli(kc, "scale", "gj", "p", "--replicas", "3", "-n", namespace), 2)
    assert message.startswith("scale: GenericJob has no elastic mode")
    put(kube, namespace, elastic("e"))
    done = cli(kc, "scale", "pj", "e", "--replicas", "3", "-n", namespace)
    assert done.returncode == 0, done.stderr
    assert spec("PyTorchTrainingJob", "e")["elastic"]["expectedReplicas"] == 3
    message = one_line_error(cli(kc, "scale", "pj", "e", "--replicas", "9", "-n", namespace), 2)
    assert message == "--replicas: 9 is outside PyTorchTrainingJob e's elastic range [1, 4] (spec.elastic.minReplicas, maxReplicas)"

    set_status(kube, namespace, "GenericJob", "p", failed("over"))
    message = one_line_error(cli(kc, "pause", "gj", "p", "-n", namespace), 1)
    assert message == "GenericJob p has finished (Failed): there is nothing to pause"


# --------------------------------------------------------------------------- describe


def test_describe_says_why_a_pod_cannot_be_scheduled(kc: Path, kube: Kube, namespace: str) -> None:
    job = put(kube, namespace, generic("big", replicas=1))
    set_status(
        kube, namespace, "GenericJob", "big",
        {"phase": "Pending", "conditions": [{"type": "Running", "status": "False", "reason": "Pending", "message": "The job is pending."}]},
    )
    labels = {
        "tensorstack.dev/owner-kind": "GenericJob",
        "tensorstack.dev/owner-name": "big",
        "batch.tensorstack.dev/replica-type": "worker",
        "batch.tensorstack.dev/replica-index": "0",
    }
    kube.create(
        pod_path(namespace),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "big-worker-0", "labels": labels, "ownerReferences": [{
                "apiVersion": "batch.tensorstack.dev/v1beta1", "kind": "GenericJob", "name": "big",
                "uid": job["metadata"]["uid"], "controller": True,
            }]},  # as the operator makes it: controlled by the job
            "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "64"}}}]},
        },
    )
    scheduler_says = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available."
    kube.patch(
        f"{pod_path(namespace, 'big-worker-0')}/status",
        {
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": scheduler_says, "lastTransitionTime": now_rfc3339()}
                ],
            }
        },
    )
    kube.create(
        core_path(namespace, "events"),
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "big-worker-0.sched"},
            "involvedObject": {"kind": "Pod", "name": "big-worker-0", "namespace": namespace},
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": scheduler_says,
            "lastTimestamp": now_rfc3339(),
            "source": {"component": "default-scheduler"},
        },
    )
    kube.create(
        core_path(namespace, "events"),
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "big.created"},
            "involvedObject": {"kind": "GenericJob", "name": "big", "namespace": namespace, "uid": job["metadata"]["uid"]},
            "type": "Normal",
            "reason": "SuccessfulCreatePod",
            "message": "created pod big-worker-0",
            "lastTimestamp": now_rfc3339(),
            "source": {"component": "t9k-jobs-operator"},
        },
    )
    done = cli(kc, "describe", "gj", "big", "-n", namespace)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    why = next(line for line in out.splitlines() if line.startswith("Why:"))
    assert f"big-worker-0 is waiting: Unschedulable: {scheduler_says}" in why, out
    for section in ("Spec:", "Conditions:", "Replicas:", "Events:"):
        assert section in out
    assert "worker: 1 replica(s), restart OnFailure" in out
    replica = next(line for line in out.splitlines() if line.strip().startswith("big-worker-0 "))
    assert replica.split()[:2] == ["big-worker-0", "Creating"] and "Unschedulable" in replica
    assert "FailedScheduling" in out and "pod/big-worker-0" in out
    assert "SuccessfulCreatePod" in out and "genericjob/big" in out


def test_describe_says_why_without_status_or_when_paused(client: Client, kube: Kube, namespace: str) -> None:
    put(kube, namespace, generic("fresh"))
    text = client.describe("gj", "fresh")
    assert "Why:         no status yet: the operator has not reconciled it" in text
    put(kube, namespace, generic("held", runMode={"pause": {"enabled": True}}))
    set_status(kube, namespace, "GenericJob", "held", {"phase": "Paused"})
    text = client.describe("gj", "held")
    assert "Why:         paused (spec.runMode.pause): t9k-jobs resume gj held" in text
    assert "Run mode:    Pause" in text
    set_status(kube, namespace, "GenericJob", "fresh", failed("fresh-worker-0 failed with exit code 2"))
    assert "Why:         fresh-worker-0 failed with exit code 2" in client.describe("gj", "fresh")
    with pytest.raises(NotFound):
        client.describe("gj", "nothere")


# --------------------------------------------------------------------------- logs (no kubelet here)


def test_logs_usage_errors_and_following_a_job_without_pods(kc: Path, kube: Kube, namespace: str, client: Client) -> None:
    put(kube, namespace, generic("quiet"))
    assert "has no replica type 'master'" in one_line_error(
        cli(kc, "logs", "gj", "quiet", "--type", "master", "-n", namespace), 1
    )
    assert one_line_error(cli(kc, "logs", "gj", "quiet", "--index", "0", "-n", namespace), 2) == "--index needs --type"
    assert "--all cannot be combined" in one_line_error(
        cli(kc, "logs", "gj", "quiet", "--all", "--type", "worker", "-n", namespace), 2
    )
    # No pod, no log: said in one line, exit 1, as kubectl logs of a workload without pods
    # (issue 33: it printed nothing and exited 0).
    nothing = cli(kc, "logs", "gj", "quiet", "-n", namespace)
    assert nothing.stdout == ""
    assert one_line_error(nothing, 1) == (
        "GenericJob quiet has no pods, so no log to show: they are not created yet, or were deleted "
        "(a finished job's clean-up, a pause)"
    )
    assert "no pods of type worker" in one_line_error(cli(kc, "logs", "gj", "quiet", "-t", "worker", "-n", namespace), 1)
    # Following ends once the job has finished (and there is nothing to drain).
    with client.logs("gj", "quiet", follow=True) as lines:
        set_status(kube, namespace, "GenericJob", "quiet", {"phase": "Succeeded", "completionTime": now_rfc3339()})
        assert list(lines) == []
