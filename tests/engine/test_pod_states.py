"""Pod states as a real kubelet reports them, and what the job says about them.

* A pod whose containers have all terminated is ended, even while the kubelet still reports it
  ``Running`` (or ``Pending``): for a few seconds a real kubelet does exactly that.
* A pod that cannot start (no image, no ConfigMap, no node) is named in the status with the
  kubelet's or the scheduler's reason and message, and reported once by a Warning event.
* A container's terminated reason (``OOMKilled``) is carried into the failure messages.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from t9k_jobs.engine import ContainerState, ObservedPod
from t9k_jobs.engine.reconcile import UNFINISHED_GRACE

from .jobs import pytorch
from .sim import Sim, started

NEVER_PULL = 'Container image "nope:1" is not present with pull policy of Never'
NO_CPU = "0/1 nodes are available: 1 Insufficient cpu."


def set_pod(sim: Sim, name: str, phase: str, *containers: ContainerState, **kw) -> None:
    """Write a pod's status as the kubelet would: phase and container states (scheduled)."""
    pod = sim.pods[name]
    kw.setdefault("scheduled", True)
    sim.pods[name] = replace(pod, phase=phase, containers=tuple(containers) or pod.containers, **kw)


def done(code: int = 0, reason: str | None = None, name: str = "pytorch") -> ContainerState:
    return ContainerState(name, "Terminated", code, reason or ("Completed" if code == 0 else "Error"))


def waiting(reason: str, message: str | None = None, name: str = "pytorch") -> ContainerState:
    return ContainerState(name, "Waiting", None, reason, message)


def warnings(plan, reason: str = "ReplicaWaiting") -> list[str]:
    return [e.message for e in plan.events if e.type == "Warning" and e.reason == reason]


# ====================================================================== 1. ended by its containers


def pod(phase: str, *containers: ContainerState, **kw) -> ObservedPod:
    return ObservedPod("p", "u", "worker", 0, phase, tuple(containers), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("phase", "containers", "effective"),
    [
        ("Running", (done(0),), "Succeeded"),
        ("Running", (done(0), done(0, name="sidecar")), "Succeeded"),
        ("Running", (done(0), done(1, name="sidecar")), "Failed"),
        ("Running", (done(0), ContainerState("sidecar", "Running")), "Running"),
        ("Pending", (done(128, "StartError"),), "Failed"),
        ("Unknown", (done(0),), "Succeeded"),
        ("Running", (ContainerState("pytorch", "Terminated", None),), "Failed"),  # no exit code: not 0
        ("Failed", (ContainerState("pytorch", "Running"),), "Failed"),  # a reported end is final
        ("Succeeded", (done(1),), "Succeeded"),
        ("Pending", (), "Pending"),
    ],
)
def test_effective_phase_follows_the_kubelet(phase, containers, effective) -> None:
    p = pod(phase, *containers)
    assert p.effective_phase == effective
    assert p.terminal == (effective in ("Succeeded", "Failed"))


def test_init_containers_do_not_end_a_pod() -> None:
    p = pod("Pending", waiting("PodInitializing"), init_containers=(done(0, name="init"),))
    assert p.effective_phase == "Pending" and not p.terminal


def test_finished_worker_reported_running_is_not_cleaned_up_as_unfinished() -> None:
    """cleanUpPolicy Unfinished must keep a worker that exited 0 (and its logs) even while the
    kubelet still reports its pod Running; the job reports it Succeeded."""
    sim = started(pytorch(name="j", runPolicy={"cleanUpPolicy": "Unfinished"}))
    set_pod(sim, "j-worker-0", "Running", done(0))  # exited 0; phase not yet updated
    plan = sim.step()
    assert sim.replica("j-worker-0").phase == "Succeeded"
    assert not plan.delete
    sim.succeed("j-master-0")
    plan = sim.step()
    assert sim.status.phase == "Succeeded"
    assert not plan.delete and plan.requeue_after is not None  # the grace of the Unfinished clean-up
    sim.tick(UNFINISHED_GRACE)
    plan = sim.step()
    assert [d.name for d in plan.delete] == ["j-worker-1"], "only the replica still running is unfinished"
    sim.step()
    assert sim.replica("j-worker-0").phase == "Succeeded"
    assert sim.replica("j-worker-1").phase == "Deleted"
    assert sim.status.aggregate.succeeded == 2


def test_master_ended_while_reported_running_ends_the_job() -> None:
    sim = started(pytorch(name="j"))
    set_pod(sim, "j-master-0", "Running", done(0))
    sim.step()
    assert sim.status.phase == "Succeeded"


def test_failed_container_of_a_running_pod_is_restarted_now() -> None:
    sim = started(pytorch(name="j", policy="OnFailure"))
    set_pod(sim, "j-worker-1", "Running", done(1))
    plan = sim.step()
    assert [d.name for d in plan.delete] == ["j-worker-1"]
    assert sim.status.backoff_count == 1
    assert any(e.reason == "RestartingReplica" and "exit code 1" in e.message for e in plan.events)


def test_pending_pod_whose_container_could_not_start_has_failed() -> None:
    sim = started(pytorch([("master", 1)], name="j", policy="Never"))
    set_pod(
        sim, "j-master-0", "Pending", ContainerState("pytorch", "Terminated", 128, "StartError", "exec: no")
    )
    sim.step()
    assert sim.status.phase == "Failed"
    assert (
        sim.condition("Failed").message
        == "PyTorchTrainingJob j has failed: j-master-0 failed with exit code 128 (StartError)"
    )


# ====================================================================== 2. replicas that cannot start


def test_missing_image_is_named_in_the_status_and_reported_once() -> None:
    sim = Sim(pytorch([("master", 1), ("worker", 1)], name="j"))
    sim.step(start="Pending")
    sim.step()
    assert sim.status.phase == "Pending"
    assert sim.condition("ReplicaFailure").message == "All pods are running normally."
    set_pod(sim, "j-worker-0", "Pending", waiting("ErrImageNeverPull", NEVER_PULL))
    plan = sim.step()
    assert sim.status.phase == "Pending"
    rf = sim.condition("ReplicaFailure")
    assert (rf.status, rf.reason) == ("False", "ReplicaWaiting"), (
        "it has not failed for good: it may still start"
    )
    assert rf.message == f"j-worker-0 is waiting: ErrImageNeverPull: {NEVER_PULL}"
    c = sim.replica("j-worker-0").containers[0]
    assert (c.state, c.reason, c.message) == ("Waiting", "ErrImageNeverPull", NEVER_PULL)
    assert warnings(plan) == [f"j-worker-0 is waiting: ErrImageNeverPull: {NEVER_PULL}"]
    # Level-triggered: the next passes see the same reason in the stored status and stay quiet.
    assert warnings(sim.step()) == []
    assert warnings(sim.step()) == []
    # The reason goes away: all is well again.
    sim.run("j-worker-0")
    sim.run("j-master-0")
    plan = sim.step()
    assert sim.status.phase == "Running"
    assert sim.condition("ReplicaFailure").message == "All pods are running normally."
    assert sim.condition("ReplicaFailure").reason == "-"


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        ("CreateContainerConfigError", 'configmap "x" not found'),
        ("ErrImagePull", 'failed to pull and unpack image "docker.io/library/nope:1": not found'),
        ("ImagePullBackOff", 'Back-off pulling image "nope:1"'),
        ("CrashLoopBackOff", "back-off 10s restarting failed container=pytorch"),
        ("InvalidImageName", 'Failed to apply default image tag "Nope": invalid reference format'),
    ],
)
def test_every_waiting_reason_but_the_benign_ones_is_a_problem(reason: str, message: str) -> None:
    sim = Sim(pytorch([("master", 1)], name="j"))
    sim.step(start="Pending")
    set_pod(sim, "j-master-0", "Pending", waiting(reason, message))
    plan = sim.step()
    assert sim.condition("ReplicaFailure").message == f"j-master-0 is waiting: {reason}: {message}"
    assert warnings(plan) == [f"j-master-0 is waiting: {reason}: {message}"]


@pytest.mark.parametrize("reason", ["ContainerCreating", "PodInitializing"])
def test_benign_waiting_reasons_are_not_problems(reason: str) -> None:
    sim = Sim(pytorch([("master", 1)], name="j"))
    sim.step(start="Pending")
    set_pod(sim, "j-master-0", "Pending", waiting(reason))
    plan = sim.step()
    assert sim.condition("ReplicaFailure").message == "All pods are running normally."
    assert warnings(plan) == []
    assert sim.replica("j-master-0").containers[0].reason == reason


def test_image_pull_back_off_and_err_image_pull_are_one_reason() -> None:
    """The kubelet alternates the two while it retries one missing image: one event, not one per flip."""
    sim = Sim(pytorch([("master", 1)], name="j"))
    sim.step(start="Pending")
    set_pod(sim, "j-master-0", "Pending", waiting("ErrImagePull", "not found"))
    assert len(warnings(sim.step())) == 1
    set_pod(sim, "j-master-0", "Pending", waiting("ImagePullBackOff", 'Back-off pulling image "nope:1"'))
    assert warnings(sim.step()) == []
    assert (
        sim.condition("ReplicaFailure").message
        == 'j-master-0 is waiting: ImagePullBackOff: Back-off pulling image "nope:1"'
    )
    set_pod(sim, "j-master-0", "Pending", waiting("CreateContainerConfigError", 'configmap "x" not found'))
    assert len(warnings(sim.step())) == 1, "another reason is news"


def test_unschedulable_pod_is_named_with_the_schedulers_message() -> None:
    sim = Sim(pytorch([("master", 1)], name="j"))
    sim.step()  # created, not scheduled
    set_pod(
        sim,
        "j-master-0",
        "Pending",
        scheduled=False,
        scheduling_reason="Unschedulable",
        scheduling_message=NO_CPU,
    )
    plan = sim.step()
    rs = sim.replica("j-master-0")
    assert (rs.phase, rs.reason, rs.message) == ("Creating", "Unschedulable", NO_CPU)
    assert sim.status.phase == "Pending"
    assert sim.condition("ReplicaFailure").message == f"j-master-0 is waiting: Unschedulable: {NO_CPU}"
    assert warnings(plan) == [f"j-master-0 is waiting: Unschedulable: {NO_CPU}"]
    # The scheduler rewords its message as the cluster changes: the same reason, no new event.
    set_pod(
        sim,
        "j-master-0",
        "Pending",
        scheduled=False,
        scheduling_reason="Unschedulable",
        scheduling_message="0/2 nodes are available: 2 Insufficient cpu.",
    )
    assert warnings(sim.step()) == []


def test_init_container_that_cannot_start_is_named() -> None:
    sim = Sim(pytorch([("master", 1)], name="j"))
    sim.step(start="Pending")
    set_pod(
        sim,
        "j-master-0",
        "Pending",
        waiting("PodInitializing"),
        init_containers=(waiting("ImagePullBackOff", 'Back-off pulling image "tools:9"', name="fetch"),),
    )
    plan = sim.step()
    msg = 'j-master-0 is waiting: ImagePullBackOff: init container fetch: Back-off pulling image "tools:9"'
    assert sim.condition("ReplicaFailure").message == msg
    assert warnings(plan) == [msg]


def test_replicas_waiting_for_one_reason_share_an_entry() -> None:
    sim = Sim(pytorch([("master", 1), ("worker", 5)], name="j"))
    sim.step(start="Pending")
    for name in sim.pods:
        if name != "j-master-0":
            set_pod(sim, name, "Pending", waiting("ErrImageNeverPull", NEVER_PULL))
    set_pod(sim, "j-master-0", "Pending", waiting("CreateContainerConfigError", 'configmap "x" not found'))
    plan = sim.step()
    assert sim.condition("ReplicaFailure").message == (
        'j-master-0 is waiting: CreateContainerConfigError: configmap "x" not found; '
        f"j-worker-0, j-worker-1, j-worker-2 and 2 more are waiting: ErrImageNeverPull: {NEVER_PULL}"
    )
    assert len(warnings(plan)) == 6, "one event per replica"


def test_running_job_names_a_replacement_that_cannot_start() -> None:
    sim = started(pytorch(name="j", policy="OnFailure"))
    sim.fail("j-worker-1", 1)
    sim.step()  # deletes it for the restart
    sim.step(start="Pending")  # creates the replacement
    set_pod(sim, "j-worker-1", "Pending", waiting("ErrImagePull", "not found"))
    plan = sim.step()
    assert sim.status.phase == "Running"
    assert sim.condition("Running").status == "True"
    assert sim.condition("ReplicaFailure").message == "j-worker-1 is waiting: ErrImagePull: not found"
    assert warnings(plan) == ["j-worker-1 is waiting: ErrImagePull: not found"]


def test_a_waiting_container_of_several_is_named() -> None:
    sim = Sim(pytorch([("master", 1)], name="j"))
    sim.step(start="Pending")
    set_pod(
        sim,
        "j-master-0",
        "Pending",
        waiting("ContainerCreating"),
        waiting("CreateContainerConfigError", 'configmap "x" not found', name="sidecar"),
    )
    sim.step()
    assert sim.condition("ReplicaFailure").message == (
        'j-master-0 is waiting: CreateContainerConfigError (container sidecar): configmap "x" not found'
    )


def test_failure_and_waiting_are_both_reported() -> None:
    sim = started(pytorch(name="j", policy="Never"))  # the master decides: a worker's failure does not end it
    sim.fail("j-worker-1", 2)
    set_pod(sim, "j-worker-0", "Pending", waiting("ErrImagePull", "not found"))
    sim.step()
    assert sim.status.phase == "Running"
    rf = sim.condition("ReplicaFailure")
    assert (rf.status, rf.reason) == ("True", "Failed")
    assert rf.message == "j-worker-1 failed with exit code 2; j-worker-0 is waiting: ErrImagePull: not found"


# ====================================================================== 3. terminated reasons


def test_oom_killed_is_named_in_the_failure() -> None:
    sim = started(pytorch(name="digits-ddp", policy="Never"))
    set_pod(sim, "digits-ddp-master-0", "Failed", done(137, "OOMKilled"))
    plan = sim.step()
    msg = (
        "PyTorchTrainingJob digits-ddp has failed: digits-ddp-master-0 failed with exit code 137 (OOMKilled)"
    )
    assert sim.condition("Failed").message == msg
    assert (
        sim.condition("ReplicaFailure").message == "digits-ddp-master-0 failed with exit code 137 (OOMKilled)"
    )
    assert [e.message for e in plan.events if e.reason == "Failed"] == [msg]
    c = sim.replica("digits-ddp-master-0").containers[0]
    assert (c.state, c.exit_code, c.reason) == ("Terminated", 137, "OOMKilled")


def test_a_worker_failed_for_good_keeps_its_reason_after_its_pod_is_gone() -> None:
    sim = started(pytorch(name="digits-ddp", policy="Never"))
    set_pod(sim, "digits-ddp-worker-1", "Failed", done(137, "OOMKilled"))
    sim.step()
    expected = "digits-ddp-worker-1 failed with exit code 137 (OOMKilled)"
    assert sim.condition("ReplicaFailure").message == expected
    sim.vanish("digits-ddp-worker-1")
    sim.step()
    assert sim.condition("ReplicaFailure").message == expected


def test_restart_event_names_the_reason() -> None:
    sim = started(pytorch(name="j", policy="ExitCode"))
    set_pod(sim, "j-worker-0", "Failed", done(137, "OOMKilled"))
    plan = sim.step()
    (msg,) = [e.message for e in plan.events if e.reason == "RestartingReplica"]
    assert msg == "restarting j-worker-0 (exit code 137, OOMKilled); backoff count 1"


def test_plain_completed_and_error_reasons_are_left_out() -> None:
    sim = started(pytorch(name="j", policy="Never"))
    set_pod(sim, "j-master-0", "Failed", done(1, "Error"))
    plan = sim.step()
    assert (
        sim.condition("Failed").message
        == "PyTorchTrainingJob j has failed: j-master-0 failed with exit code 1"
    )
    assert sim.replica("j-master-0").containers[0].reason == "Error"
    assert not [e for e in plan.events if "(Error)" in e.message or "Error)" in e.message]


def test_pod_level_reason_and_message_are_kept() -> None:
    sim = started(pytorch(name="j", policy="Never"))
    evicted = (
        "The node was low on resource: memory. "
        "Container pytorch was using 9Gi, which exceeds its request of 0."
    )
    set_pod(
        sim,
        "j-master-0",
        "Failed",
        ContainerState("pytorch", "Terminated", 137, "ContainerStatusUnknown"),
        reason="Evicted",
        message=evicted,
    )
    sim.step()
    rs = sim.replica("j-master-0")
    assert (rs.reason, rs.message) == ("Evicted", evicted)
    assert sim.condition("Failed").message.endswith(
        "j-master-0 failed with exit code 137 (Evicted, ContainerStatusUnknown)"
    )


def test_a_long_message_is_cut() -> None:
    sim = Sim(pytorch([("master", 1)], name="j"))
    sim.step(start="Pending")
    set_pod(sim, "j-master-0", "Pending", waiting("CreateContainerError", "x" * 5000))
    sim.step()
    message = sim.replica("j-master-0").containers[0].message
    assert len(message) == 512 and message.endswith("...")
