"""Issue 42 in real pods: the operator finds a job whose replicas fell silent by its progress
deadline (the log API's last line of each running container) and restarts it, and every
container knows its restart attempt (``T9K_JOBS_RESTART_ATTEMPT``); a job that prints within its
deadline is left alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request

from tests import helpers
from tests.helpers import replica, template

from ..cluster.kube import Kube, core_path, job_path, pod_path
from .conftest import TRAINING_IMAGE, wait_phase

DEADLINE = "t9k-jobs.io/progress-deadline-seconds"

#: Attempt 0 prints twice and hangs; a later attempt prints and ends 0.
HANGS_FIRST = """import os, time
attempt = os.environ["T9K_JOBS_RESTART_ATTEMPT"]
print("attempt", attempt, flush=True)
if attempt == "0":
    print("working", flush=True)
    time.sleep(3600)
print("resumed and done", flush=True)
"""
#: A line a second for 20 s.
TICKS = "import time\nfor i in range(20):\n    print('tick', i, flush=True)\n    time.sleep(1)\n"


def job(name: str, code: str, deadline: int) -> dict:
    pod = template(["python", "-c", code], image=TRAINING_IMAGE, pod={"terminationGracePeriodSeconds": 2})
    spec = {"replicaSpecs": [replica("master", 1, pod, restartPolicy="OnFailure")], "runPolicy": {"backoffLimit": 2}}
    manifest = helpers.job("PyTorchTrainingJob", name, spec)
    manifest["metadata"]["annotations"] = {DEADLINE: str(deadline)}
    return manifest


def test_a_silent_job_is_restarted_and_one_that_prints_is_not(node, kube: Kube, kubectl, namespace: str) -> None:
    paths = {}
    before = log_probes(kube)
    for manifest in (job("silent", HANGS_FIRST, 10), job("chatty", TICKS, 4)):
        manifest["metadata"]["namespace"] = namespace
        kube.create(job_path(namespace, "PyTorchTrainingJob"), manifest)
        paths[manifest["metadata"]["name"]] = job_path(namespace, "PyTorchTrainingJob", manifest["metadata"]["name"])
    silent = wait_phase(kube, paths["silent"], ("Succeeded", "Failed"), timeout=240)
    assert silent["status"]["phase"] == "Succeeded" and silent["status"]["backoffCount"] == 1, silent["status"]
    assert silent["status"]["tasks"][0]["replicas"][0]["restartCount"] == 1, silent["status"]
    [stall] = kube.wait_for_events(
        namespace, lambda e: e["involvedObject"]["name"] == "silent" and e["reason"] == "NoProgress",
        what="the NoProgress Warning")  # fmt: skip
    assert stall["type"] == "Warning" and "silent-master-0" in stall["message"], stall
    assert "no replica wrote a log line for 10 s" in stall["message"], stall
    [note] = kube.wait_for_events(
        namespace, lambda e: e["involvedObject"]["name"] == "silent" and e["reason"] == "StacksNotDumped",
        what="the note that no stacks were dumped")  # fmt: skip
    assert "silent-master-0" in note["message"] and "does not exec" in note["message"], note
    restarts = kube.wait_for_events(
        namespace, lambda e: e["involvedObject"]["name"] == "silent" and e["reason"] == "RestartingReplica",
        what="the restart")  # fmt: skip
    assert "(NoProgress)" in restarts[0]["message"], restarts
    # The new pod was told it is attempt 1 (cleanUpPolicy None, the default: it stays).
    env = {e["name"]: e.get("value") for e in kube.get(pod_path(namespace, "silent-master-0"))["spec"]["containers"][0]["env"]}
    assert env["T9K_JOBS_RESTART_ATTEMPT"] == "1" and env["PYTHONFAULTHANDLER"] == "1", env
    assert "attempt 1\nresumed and done" in kubectl("logs", "-n", namespace, "silent-master-0").stdout

    chatty = wait_phase(kube, paths["chatty"], ("Succeeded", "Failed"), timeout=240)
    assert chatty["status"]["phase"] == "Succeeded" and chatty["status"].get("backoffCount", 0) == 0, chatty["status"]
    assert not [e for e in kube.list(core_path(namespace, "events"))
                if e["involvedObject"]["name"] == "chatty" and e["reason"] == "NoProgress"]  # fmt: skip
    # The chatty job was judged on its last lines (read through the log API), never on its start.
    after = log_probes(kube)
    read, failed = after["read"] - before["read"], after["failed"] - before["failed"]
    assert read >= 3 and failed == 0, (before, after)
    print(f"log probes for both jobs: {read:.0f} read, {failed:.0f} failed")


def log_probes(kube: Kube) -> dict[str, float]:
    """``t9k_jobs_log_probes_total`` by outcome, summed over the operator's pods (their /metrics)."""
    out = {"read": 0.0, "failed": 0.0}
    for pod in kube.list("/api/v1/namespaces/t9k-jobs-system/pods"):
        ip = pod["status"].get("podIP")
        if not ip:
            continue
        with urllib.request.urlopen(f"http://{ip}:8080/metrics", timeout=5) as answer:
            text = answer.read().decode()
        for outcome, value in re.findall(r'^t9k_jobs_log_probes_total\{outcome="(\w+)"\} (\S+)$', text, re.M):
            out[outcome] += float(value)
    return out


#: Fails every attempt, saying which.
FAILS = """import os, sys
attempt = os.environ["T9K_JOBS_RESTART_ATTEMPT"]
for i in range(3):
    print(f"attempt {attempt} line {i}", flush=True)
print(f"attempt {attempt}: failing on purpose", file=sys.stderr, flush=True)
sys.exit(3)
"""


def test_a_failed_and_cleaned_up_job_still_shows_its_last_lines(node, kube: Kube, kubectl, namespace: str) -> None:
    """A job whose replica fails twice (a restart, then no backoff left) and whose pods are deleted
    by ``cleanUpPolicy: All``: the operator kept each attempt's last lines and end before it deleted
    the pods, so, with the operator's pods replaced meanwhile, ``t9k-jobs logs`` still shows them
    (with a note that the pods are gone) and ``describe`` lists each attempt's end."""
    pod = template(["python", "-c", FAILS], image=TRAINING_IMAGE, pod={"terminationGracePeriodSeconds": 2})
    spec = {"replicaSpecs": [replica("master", 1, pod, restartPolicy="OnFailure")],
            "runPolicy": {"backoffLimit": 1, "cleanUpPolicy": "All"}}  # fmt: skip
    manifest = helpers.job("PyTorchTrainingJob", "gone", spec, namespace=namespace)
    kube.create(job_path(namespace, "PyTorchTrainingJob"), manifest)
    path = job_path(namespace, "PyTorchTrainingJob", "gone")
    done = wait_phase(kube, path, ("Succeeded", "Failed"), timeout=240)
    assert done["status"]["phase"] == "Failed", done["status"]
    Kube.wait_for(lambda: not kube.list(pod_path(namespace)), timeout=120, interval=0.5, what="the pods deleted")
    # Every operator pod replaced: what was kept is in the cluster, not in an operator's memory.
    old = {p["metadata"]["name"] for p in kube.list("/api/v1/namespaces/t9k-jobs-system/pods")}
    kubectl("delete", "pod", "-n", "t9k-jobs-system", *sorted(old), "--wait=false")
    Kube.wait_for(
        lambda: (ps := kube.list("/api/v1/namespaces/t9k-jobs-system/pods"))
        and not {p["metadata"]["name"] for p in ps} & old
        and all(c.get("ready") for p in ps for c in p["status"].get("containerStatuses") or [{}]),
        timeout=240, interval=0.5, what="new operator pods, ready",
    )  # fmt: skip
    logs = cli(node, "logs", "pj", "gone", "-n", namespace)
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert lines[0].startswith("[t9k-jobs] the pods are gone"), lines
    assert "gone-master-0 attempt 0 exit code 3 (Error)" in lines[0] and "(Restart)" in lines[0], lines[0]
    assert "gone-master-0 attempt 1 exit code 3 (Error)" in lines[0] and "(CleanUp)" in lines[0], lines[0]
    # Merged by the runtime's timestamps: stdout and stderr of one attempt may interleave.
    for a, part in ((0, lines[1:5]), (1, lines[5:])):
        assert sorted(part) == sorted(f"[master-0] {text}" for text in [
            f"attempt {a} line 0", f"attempt {a} line 1", f"attempt {a} line 2", f"attempt {a}: failing on purpose"]), lines
    one = cli(node, "logs", "pj", "gone", "-n", namespace, "--type", "master", "--index", "0", "--tail", "1")
    # The last by the runtime's timestamps: the stderr line or the stdout line before it (the two
    # streams are read apart, and may be stamped in either order).
    assert one.stdout.splitlines()[1:] in (["attempt 1: failing on purpose"], ["attempt 1 line 2"]), one.stdout
    described = cli(node, "describe", "pj", "gone", "-n", namespace)
    section, lost = described.stdout.split("Ended attempts", 1)[1].split("Events:", 1)[0].split("Lost to attempts", 1)
    rows = [line.split() for line in section.splitlines()[2:] if line.strip()]
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in rows] == [
        ("gone-master-0", "0", "3", "Error", "Restart"), ("gone-master-0", "1", "3", "Error", "CleanUp")], section
    # Both attempts failed on their own (exit 3): lost to Failed, with the seconds they ran, no GPU.
    [row] = [line.split() for line in lost.splitlines()[2:] if line.strip()]
    assert row[:2] == ["Failed", "2"] and row[3] == "0", lost


def cli(node, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(node.kubeconfig)}
    return subprocess.run([sys.executable, "-m", "t9k_jobs.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env, check=False)  # fmt: skip
