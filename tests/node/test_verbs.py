"""The day-two verbs and the SDK on the real node, as a new user would try them (issue 13):
``t9k-jobs create -f examples/pytorch-ddp/job.yaml``, ``get pj``, ``logs pj digits-ddp --all -f``
showing both ranks and ending, ``wait --for=Succeeded``, ``describe`` of jobs that cannot start
saying why; the SDK creating, waiting for and reading the GenericJob example.

Real pods and real logs only: nothing here writes a status.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from t9k_jobs import Client
from t9k_jobs.errors import JobEndedOtherwise
from tests import helpers
from tests.helpers import replica, template

from ..cluster.kube import Kube
from .conftest import REPO, TRAINING_IMAGE

LIMIT = 600.0  # seconds: the main example trains in real pods on a loaded 2-core machine


def cli(node, *args: str, timeout: float = LIMIT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(node.kubeconfig)}
    return subprocess.run(
        [sys.executable, "-m", "t9k_jobs.cli", *args], capture_output=True, text=True, timeout=timeout, env=env,
        check=False,
    )


def test_create_get_logs_follow_and_wait_on_the_main_example(node, kube: Kube, namespace: str) -> None:
    example = REPO / "examples" / "pytorch-ddp" / "job.yaml"
    done = cli(node, "create", "-f", str(example), "-n", namespace)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pytorchtrainingjob.batch.tensorstack.dev/digits-ddp created\n"

    table = cli(node, "get", "pj", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "PHASE", "READY", "RESTARTS", "AGE"]
    assert table[1].split()[0] == "digits-ddp" and table[1].split()[2].endswith("/2"), table

    # Started right after create: it waits for the pods, follows both ranks, ends with the job.
    follow = cli(node, "logs", "pj", "digits-ddp", "--all", "-f", "-n", namespace)
    assert follow.returncode == 0, follow.stderr
    lines = follow.stdout.splitlines()
    assert any(line.startswith("[worker-0] ") and "final test_accuracy" in line for line in lines), follow.stdout
    assert "[worker-1] rank 1 of 2 joined on digits-ddp-worker-1" in lines, follow.stdout
    assert all(re.match(r"\[worker-[01]\] ", line) for line in lines), follow.stdout

    waited = cli(node, "wait", "pj", "digits-ddp", "--for=Succeeded", "--timeout", "5m", "-n", namespace)
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout == "PyTorchTrainingJob digits-ddp is Succeeded\n"
    row = cli(node, "get", "pj", "digits-ddp", "-n", namespace).stdout.splitlines()[1].split()
    assert row[:4] == ["digits-ddp", "Succeeded", "0/2", "0"], row

    # The logs of a finished job: merged in time order, one replica, the tail, with timestamps.
    merged = cli(node, "logs", "pj", "digits-ddp", "-n", namespace).stdout.splitlines()
    assert sorted(merged) == sorted(lines), "the merged logs are what following printed"
    one = cli(node, "logs", "pj", "digits-ddp", "--type", "worker", "--index", "1", "-n", namespace).stdout
    assert "rank 1 of 2 joined on digits-ddp-worker-1" in one and "[worker-1]" not in one
    tail = cli(node, "logs", "pj", "digits-ddp", "--tail", "2", "--timestamps", "-n", namespace).stdout.splitlines()
    assert len(tail) == 2 and all(re.match(r"\[worker-[01]\] \d{4}-\d\d-\d\dT\S+Z ", line) for line in tail), tail
    described = cli(node, "describe", "pj", "digits-ddp", "-n", namespace).stdout
    assert re.search(r"digits-ddp-worker-0\s+Succeeded\s+0\s+0\s+t9k-node", described), described

    gone = cli(node, "delete", "pj", "digits-ddp", "-n", namespace)
    assert gone.returncode == 0 and "deleted" in gone.stdout
    Kube.wait_for(
        lambda: not kube.list(f"/api/v1/namespaces/{namespace}/pods"), timeout=120, what="the pods to go"
    )


def _manifest(name: str, **container: object) -> dict:
    pod = template(**{"name": "main", "image": TRAINING_IMAGE, "command": ["true"], **container})
    return helpers.job("GenericJob", name, {"replicaSpecs": [replica("worker", 1, pod)]})


def test_describe_says_why_jobs_cannot_start(node, namespace: str, tmp_path: Path) -> None:
    cases = {
        "no-room": ({"resources": {"requests": {"cpu": "64"}}}, r"no-room-worker-0 is waiting: Unschedulable: 0/1 nodes are available: .*Insufficient cpu"),
        "no-image": (
            {"image": "localhost/no-such-image:1", "imagePullPolicy": "Never"},
            r'no-image-worker-0 is waiting: ErrImageNeverPull: Container image "localhost/no-such-image:1" is not present',
        ),
    }
    for name, (container, _) in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(_manifest(name, **container)))
        assert cli(node, "create", "-f", str(path), "-n", namespace).returncode == 0
    for name, (_, pattern) in cases.items():

        def why() -> str:
            out = cli(node, "describe", "gj", name, "-n", namespace).stdout
            line = next((x for x in out.splitlines() if x.startswith("Why:")), "")
            return out if re.search(pattern, line) else ""

        out = Kube.wait_for(why, timeout=120, interval=1.0, what=f"describe of {name} to say why")
        assert "Phase:       Pending" in out, out
        if name == "no-room":
            assert "FailedScheduling" in out, out  # the scheduler's Event about the pod


def test_sdk_creates_waits_for_and_reads_the_generic_example(node, namespace: str) -> None:
    with Client.cluster(node.kubeconfig, namespace=namespace) as client:
        job = client.create(REPO / "examples" / "generic-exchange" / "job.yaml")
        assert job.name == "exchange" and job.namespace == namespace
        with client.logs("gj", "exchange", follow=True) as stream:
            followed = list(stream)
        done = client.wait("gj", "exchange", timeout=300)
        assert done.status.phase == "Succeeded"
        lines = list(client.logs("gj", "exchange"))
        assert "[worker-0] exchange ok" in "\n".join(lines), lines
        for rank in range(3):
            assert any(line.startswith(f"[worker-{rank}] rank {rank} received from") for line in lines), lines
        assert sorted(followed) == sorted(lines)
        one = list(client.logs("gj", "exchange", replica_type="worker", index=2))
        assert any(line.startswith("rank 2 received from [0, 1]") for line in one), one
        try:
            client.wait("gj", "exchange", phase="Failed", timeout=60)
            raise AssertionError("a Succeeded job does not become Failed")
        except JobEndedOtherwise as exc:
            assert str(exc).startswith("GenericJob exchange ended Succeeded, not Failed")
