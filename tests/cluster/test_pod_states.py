"""Pod states a real kubelet and scheduler write, and what the operator makes of them.

The test plays the kubelet by writing pod status in the exact shapes a real one writes:

* a finished container in a pod still reported ``phase: Running`` (the kubelet updates the phase
  a little later): the replica has ended and ``cleanUpPolicy: Unfinished`` keeps it;
* pods that cannot start: ``ErrImageNeverPull``, ``CreateContainerConfigError`` and
  ``PodScheduled=False``/``Unschedulable``: the job's status names them, one Warning each;
* ``OOMKilled``: named in the restart event and the failure messages.
"""

from __future__ import annotations

from typing import Any

from .kube import Kube, now_rfc3339, pod_path
from .operator_proc import OperatorProcess
from .test_operator import (  # noqa: F401 - operator is a fixture
    condition,
    create,
    events,
    operator,
    pods,
    pytorch,
    run_all,
    status,
    wait_phase,
    wait_pods,
)

KIND = "PyTorchTrainingJob"
NEVER_PULL = 'Container image "nope:1" is not present with pull policy of Never'
NO_CONFIGMAP = 'configmap "x" not found'
NO_CPU = "0/1 nodes are available: 1 Insufficient cpu."


def write_status(kube: Kube, ns: str, name: str, status_: dict[str, Any]) -> None:
    """Replace the pod's status with ``status_`` (merge patch: lists are replaced whole)."""
    kube.patch(f"{pod_path(ns, name)}/status", {"status": status_})


def cond(type_: str, ok: bool, reason: str | None = None, message: str | None = None) -> dict[str, Any]:
    c = {
        "type": type_,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": now_rfc3339(),
    }
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def waiting_pod(reason: str, message: str) -> dict[str, Any]:
    """A scheduled pod whose only container cannot be created (as the kubelet reports it)."""
    return {
        "phase": "Pending",
        "conditions": [
            cond("PodReadyToStartContainers", True),
            cond("Initialized", True),
            cond("Ready", False, "ContainersNotReady", "containers with unready status: [pytorch]"),
            cond("ContainersReady", False, "ContainersNotReady", "containers with unready status: [pytorch]"),
            cond("PodScheduled", True),
        ],
        "hostIP": "10.0.0.2",
        "podIP": "10.244.0.7",
        "startTime": now_rfc3339(),
        "containerStatuses": [
            {
                "name": "pytorch",
                "image": "nope:1",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
        ],
        "qosClass": "BestEffort",
    }


def replica(st: dict[str, Any], name: str) -> dict[str, Any]:
    for task in st.get("tasks") or []:
        for rs in task["replicas"]:
            if rs["name"] == name:
                return rs
    raise AssertionError(f"no replica {name} in {st.get('tasks')}")


def waiting_events(kube: Kube, ns: str, job: str) -> list[str]:
    return sorted(e["message"] for e in events(kube, ns, job) if e["reason"] == "ReplicaWaiting")


def test_finished_worker_reported_running_is_kept_by_clean_up_unfinished(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns, name = namespace, "keep"
    create(kube, pytorch(name, ns, workers=1, runPolicy={"cleanUpPolicy": "Unfinished"}))
    wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, KIND, name, "Running", operator)

    # What a real kubelet writes right after the worker's only container exited 0: the phase is
    # still Running; a few seconds later it would write Succeeded.
    started = pods(kube, ns, name)["keep-worker-0"]["status"]["startTime"]
    write_status(
        kube,
        ns,
        "keep-worker-0",
        {
            "phase": "Running",
            "conditions": [
                cond("PodReadyToStartContainers", True),
                cond("Initialized", True),
                cond("Ready", False, "PodCompleted"),
                cond("ContainersReady", False, "PodCompleted"),
                cond("PodScheduled", True),
            ],
            "startTime": started,
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "image": "example.registry/pytorch:2.1",
                    "imageID": "example.registry/pytorch@sha256:0123",
                    "containerID": "containerd://4f2a",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "lastState": {},
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "containerID": "containerd://4f2a",
                            "startedAt": started,
                            "finishedAt": now_rfc3339(),
                        }
                    },
                }
            ],
        },
    )
    kube.wait_for(
        lambda: replica(status(kube, ns, KIND, name), "keep-worker-0")["phase"] == "Succeeded",
        what="the worker reported Succeeded",
    )
    kube.set_pod_phase(ns, "keep-master-0", "Succeeded")
    st = wait_phase(kube, ns, KIND, name, "Succeeded", operator)
    # The pass that ended the job made its clean-up deletes before it wrote this status.
    live = pods(kube, ns, name)
    assert "keep-worker-0" in live, f"the finished worker was deleted as unfinished:\n{operator.tail()}"
    assert replica(st, "keep-worker-0")["phase"] == "Succeeded"
    assert st["aggregate"]["succeeded"] == 2


def test_pods_that_cannot_start_are_named_in_the_status(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns, name = namespace, "stuck"
    create(kube, pytorch(name, ns, workers=2))
    wait_pods(kube, ns, name, 3, operator)
    write_status(kube, ns, "stuck-master-0", waiting_pod("ErrImageNeverPull", NEVER_PULL))
    write_status(kube, ns, "stuck-worker-0", waiting_pod("CreateContainerConfigError", NO_CONFIGMAP))
    # What the scheduler writes on a pod no node can take.
    write_status(
        kube,
        ns,
        "stuck-worker-1",
        {
            "phase": "Pending",
            "conditions": [cond("PodScheduled", False, "Unschedulable", NO_CPU)],
        },
    )
    expected = (
        f"stuck-master-0 is waiting: ErrImageNeverPull: {NEVER_PULL}; "
        f"stuck-worker-0 is waiting: CreateContainerConfigError: {NO_CONFIGMAP}; "
        f"stuck-worker-1 is waiting: Unschedulable: {NO_CPU}"
    )
    st = kube.wait_for(
        lambda: (
            (s := status(kube, ns, KIND, name)).get("conditions")
            and condition(s, "ReplicaFailure")["message"] == expected
            and s
        ),
        what="the waiting replicas named in the status",
    )
    assert st["phase"] == "Pending"
    rf = condition(st, "ReplicaFailure")
    assert (rf["status"], rf["reason"]) == ("False", "ReplicaWaiting")
    assert replica(st, "stuck-master-0")["containers"] == [
        {"name": "pytorch", "state": "Waiting", "reason": "ErrImageNeverPull", "message": NEVER_PULL}
    ]
    w1 = replica(st, "stuck-worker-1")
    assert (w1["phase"], w1["reason"], w1["message"]) == ("Creating", "Unschedulable", NO_CPU)
    first = [
        f"stuck-master-0 is waiting: ErrImageNeverPull: {NEVER_PULL}",
        f"stuck-worker-0 is waiting: CreateContainerConfigError: {NO_CONFIGMAP}",
        f"stuck-worker-1 is waiting: Unschedulable: {NO_CPU}",
    ]
    kube.wait_for(lambda: waiting_events(kube, ns, name) == first, what="one Warning per waiting replica")

    # The scheduler rewords its message: the status follows, no new event (same reason).
    other_cpu = "0/2 nodes are available: 2 Insufficient cpu."
    write_status(
        kube,
        ns,
        "stuck-worker-1",
        {
            "phase": "Pending",
            "conditions": [cond("PodScheduled", False, "Unschedulable", other_cpu)],
        },
    )
    kube.wait_for(
        lambda: replica(status(kube, ns, KIND, name), "stuck-worker-1").get("message") == other_cpu,
        what="the new scheduler message in the status",
    )
    # A new reason is news: its event comes after any the previous pass could have sent.
    write_status(kube, ns, "stuck-master-0", waiting_pod("CreateContainerError", "context deadline exceeded"))
    news = "stuck-master-0 is waiting: CreateContainerError: context deadline exceeded"
    got = kube.wait_for(
        lambda: (e := waiting_events(kube, ns, name)) and news in e and e, what="the event of the new reason"
    )
    assert got == sorted([*first, news]), "a reason that stays is reported once"

    # Everything starts: all is well again.
    run_all(kube, ns, name)
    st = wait_phase(kube, ns, KIND, name, "Running", operator)
    st = kube.wait_for(
        lambda: (
            (s := status(kube, ns, KIND, name))
            and condition(s, "ReplicaFailure")["message"] == "All pods are running normally."
            and s
        ),
        what="the normal message back",
    )
    assert condition(st, "ReplicaFailure")["reason"] == "-"


def test_oom_killed_is_named_in_the_restart_event_and_the_failure(
    kube: Kube, namespace: str, operator: OperatorProcess
) -> None:
    ns, name = namespace, "digits-ddp"
    create(kube, pytorch(name, ns, workers=1, policy="ExitCode", runPolicy={"backoffLimit": 1}))
    first = wait_pods(kube, ns, name, 2, operator)
    run_all(kube, ns, name)
    wait_phase(kube, ns, KIND, name, "Running", operator)

    kube.set_pod_phase(ns, "digits-ddp-worker-0", "Failed", exit_code=137, reason="OOMKilled")
    restart = "restarting digits-ddp-worker-0 (exit code 137, OOMKilled); backoff count 1"
    kube.wait_for(
        lambda: (
            restart in [e["message"] for e in events(kube, ns, name) if e["reason"] == "RestartingReplica"]
        ),
        what="the restart event",
    )
    kube.wait_for(
        lambda: (
            pods(kube, ns, name).get("digits-ddp-worker-0", {}).get("metadata", {}).get("uid")
            not in (None, first["digits-ddp-worker-0"]["metadata"]["uid"])
        ),
        what="the worker replaced",
    )

    kube.set_pod_phase(ns, "digits-ddp-master-0", "Failed", exit_code=137, reason="OOMKilled")
    st = wait_phase(kube, ns, KIND, name, "Failed", operator)
    failed = (
        "PyTorchTrainingJob digits-ddp has failed: digits-ddp-master-0 failed with exit code 137 (OOMKilled)"
    )
    assert condition(st, "Failed")["message"] == failed
    assert (
        condition(st, "ReplicaFailure")["message"]
        == "digits-ddp-master-0 failed with exit code 137 (OOMKilled)"
    )
    master = replica(st, "digits-ddp-master-0")["containers"]
    assert master == [{"name": "pytorch", "state": "Terminated", "exitCode": 137, "reason": "OOMKilled"}]
    kube.wait_for(
        lambda: [e for e in events(kube, ns, name) if e["reason"] == "Failed" and e["message"] == failed],
        what="the Failed event",
    )
