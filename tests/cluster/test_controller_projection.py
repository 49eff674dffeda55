"""The slim pod projection the informer caches: what the engine needs, nothing else."""

from __future__ import annotations

import asyncio

from t9k_jobs.cluster.controller import CHILD_SELECTOR
from t9k_jobs.cluster.projection import job_key, project_child
from t9k_jobs.engine import ContainerState


def pod(**status) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "j-worker-2",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "17",
            "labels": {
                "tensorstack.dev/owner-kind": "PyTorchTrainingJob",
                "tensorstack.dev/owner-name": "j",
                "batch.tensorstack.dev/replica-type": "worker",
                "batch.tensorstack.dev/replica-index": "2",
            },
            "ownerReferences": [
                {"kind": "PyTorchTrainingJob", "name": "j", "uid": "job-uid", "controller": True}
            ],
        },
        "spec": {"containers": [{"name": "pytorch", "image": "x"}]},
        "status": status,
    }


def test_new_pod_is_unscheduled_pending():
    c = project_child(pod())
    assert c.owner == job_key("PyTorchTrainingJob", "ns", "j") and c.owner_uid == "job-uid"
    assert c.pod is not None
    assert (c.pod.replica_type, c.pod.index, c.pod.phase, c.pod.scheduled) == ("worker", 2, "Pending", False)


def test_terminated_container_carries_exit_code_and_reason():
    c = project_child(
        pod(
            phase="Failed",
            reason="Evicted",
            conditions=[{"type": "PodScheduled", "status": "True"}],
            containerStatuses=[
                {"name": "pytorch", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
            ],
        )
    )
    assert c.pod is not None and c.pod.scheduled and c.pod.phase == "Failed" and c.pod.reason == "Evicted"
    assert c.pod.containers == (ContainerState("pytorch", "Terminated", 137, "OOMKilled"),)
    assert c.pod.exit_code("pytorch") == 137


def test_projection_ignores_resource_version_changes():
    a, b = pod(phase="Running"), pod(phase="Running")
    b["metadata"]["resourceVersion"] = "18"
    b["metadata"]["managedFields"] = [{"manager": "kubelet"}]
    assert project_child(a) == project_child(b), (
        "an update that changes nothing the engine reads is not an event"
    )


def test_deleting_and_other_kinds():
    p = pod()
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert project_child(p).deleting and project_child(p).pod.deleting
    svc = {"kind": "Service", "metadata": {"name": "s", "namespace": "ns", "uid": "u", "labels": {}}}
    c = project_child(svc)
    assert c.pod is None and c.owner is None and c.kind == "Service"


def test_child_selector_names_every_kind():
    assert CHILD_SELECTOR.startswith("tensorstack.dev/owner-kind in (")
    for kind in ("GenericJob", "PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"):
        assert kind in CHILD_SELECTOR


def test_urgent_changes_are_ends_and_disappearances():
    from dataclasses import replace

    from t9k_jobs.cluster.controller import _urgent

    running = project_child(pod(phase="Running"))
    failed = project_child(
        pod(phase="Failed", containerStatuses=[{"name": "pytorch", "state": {"terminated": {"exitCode": 1}}}])
    )
    assert _urgent(failed, running), "a pod that ended may end the job or need a replacement"
    assert _urgent(None, running), "a pod that disappeared may need a replacement"
    assert not _urgent(running, project_child(pod())), "scheduled/running changes are batched"
    assert not _urgent(failed, failed), "an ended pod that changes again is not news"
    svc = replace(running, kind="Service", pod=None)
    assert not _urgent(None, svc)


def test_job_record_is_dropped_once_it_holds_nothing():
    """One record per job (cluster/state.py), and none kept for a job that is gone and has no
    children left: the soak showed the growth when empty entries were kept."""
    from kubernetes_asyncio.client import ApiClient, Configuration

    from t9k_jobs.cluster.client import KubeClient
    from t9k_jobs.cluster.controller import Controller
    from t9k_jobs.cluster.projection import ChildRef

    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "PyTorchTrainingJob",
        "metadata": {"name": "j", "namespace": "ns", "uid": "job-uid", "resourceVersion": "5"},
        "status": {"phase": "Running"},
    }

    async def go() -> None:
        conf = Configuration(host="https://127.0.0.1:1")  # never contacted: bookkeeping only
        client = KubeClient(ApiClient(conf))
        try:
            ctl = Controller(client, None, 1)
            owner = job_key("PyTorchTrainingJob", "ns", "j")
            assert str(owner) == "PyTorchTrainingJob/ns/j"
            first = project_child(pod())
            second = project_child(
                {**pod(), "metadata": {**pod()["metadata"], "name": "j-worker-3", "uid": "u2"}}
            )
            ctl._on_job("ADDED", ("ns", "j"), job, None)
            assert ctl.jobs[owner].phase == "Running"
            for c in (first, second):
                ctl._on_child("ADDED", ("ns", c.name), c, None)
            assert set(ctl.jobs[owner].children) == {ChildRef("Pod", "j-worker-2"), ChildRef("Pod", "j-worker-3")}
            ctl.jobs[owner].secrets.add("j-ssh")
            ctl._on_job("DELETED", ("ns", "j"), None, job)
            state = ctl.jobs[owner]
            assert state.phase is None and not state.secrets, "the job's own entries go with it"
            ctl._on_child("DELETED", ("ns", first.name), None, first)
            assert set(ctl.jobs[owner].children) == {ChildRef("Pod", "j-worker-3")}
            ctl._on_child("DELETED", ("ns", second.name), None, second)
            assert owner not in ctl.jobs
            ctl._on_child("ADDED", ("ns", first.name), first, None)
            ctl._on_child("DELETED", ("ns", first.name), None, first)
            assert ctl.jobs == {}, "a child of a job that is gone leaves no record behind"
            ctl.queue.shut_down()
            await ctl.events_client.close()
        finally:
            await client.close()

    asyncio.run(go())


def test_the_controller_builds_one_runtime_from_discovery() -> None:
    """What the engine decides for is fixed at start-up from what the API server serves (the
    operator restarts itself when that changes): the gang mode, queueing through Kueue, the
    optional kinds not served, and --node-lost-after. Observed says only what exists."""
    from kubernetes_asyncio.client import ApiClient, Configuration

    from t9k_jobs.cluster.client import KubeClient
    from t9k_jobs.cluster.controller import Controller

    async def go() -> list[tuple[str, bool, frozenset[str], float]]:
        client = KubeClient(ApiClient(Configuration(host="https://127.0.0.1:1")))  # never contacted
        out = []
        try:
            for kinds, native, after in (
                ({"PodGroup", "TensorBoard"}, False, 60.0),
                ({"TensorBoard", "Workload"}, True, 90.0),
                (set(), False, 60.0),
            ):
                ctl = Controller(client, None, 1, optional_kinds=kinds, native_gang=native, node_lost_after=after)
                r = ctl.runtime
                out.append((r.gang, r.queueing, r.unserved, r.node_lost_after))
                ctl.queue.shut_down()
                await ctl.events_client.close()
        finally:
            await client.close()
        return out

    assert asyncio.run(go()) == [
        ("t9k", False, frozenset({"Workload"}), 60.0),
        ("native", True, frozenset(), 90.0),
        ("none", False, frozenset({"PodGroup", "TensorBoard", "Workload"}), 60.0),
    ]


def terminated(code: int, reason: str, message: str | None = None, name: str = "pytorch") -> dict:
    state = {"exitCode": code, "reason": reason, "startedAt": "2026-01-01T00:00:00Z"}
    if message:
        state["message"] = message
    return {"name": name, "ready": False, "started": False, "state": {"terminated": state}}


def waiting(reason: str, message: str | None = None, name: str = "pytorch") -> dict:
    state = {"reason": reason, **({"message": message} if message else {})}
    return {"name": name, "ready": False, "started": False, "state": {"waiting": state}}


def test_pod_reported_running_with_every_container_terminated_has_ended():
    """A real kubelet reports ``phase: Running`` for a few seconds after the only container of a
    restartPolicy Never pod terminated; the engine and the urgent-change check see the end."""
    from t9k_jobs.cluster.controller import _urgent

    running = project_child(
        pod(phase="Running", containerStatuses=[{"name": "pytorch", "state": {"running": {}}}])
    )
    exited = project_child(pod(phase="Running", containerStatuses=[terminated(0, "Completed")]))
    assert exited.pod.phase == "Running", "the projection keeps what the kubelet said"
    assert _urgent(exited, running), "the replica has ended: look at the job now"
    assert exited.pod.terminal and exited.pod.effective_phase == "Succeeded"
    succeeded = project_child(pod(phase="Succeeded", containerStatuses=[terminated(0, "Completed")]))
    assert not _urgent(succeeded, exited), "the phase catching up is no news"


def test_init_containers_are_projected_apart_and_do_not_end_the_pod():
    c = project_child(
        pod(
            phase="Pending",
            initContainerStatuses=[terminated(0, "Completed", name="fetch")],
            containerStatuses=[waiting("PodInitializing")],
        )
    )
    assert c.pod.init_containers == (ContainerState("fetch", "Terminated", 0, "Completed"),)
    assert c.pod.containers == (ContainerState("pytorch", "Waiting", None, "PodInitializing"),)
    assert not c.pod.terminal


def test_waiting_reason_and_message_are_projected():
    message = 'Container image "nope:1" is not present with pull policy of Never'
    c = project_child(
        pod(
            phase="Pending",
            conditions=[{"type": "PodScheduled", "status": "True"}],
            containerStatuses=[waiting("ErrImageNeverPull", message)],
        )
    )
    assert c.pod.containers == (ContainerState("pytorch", "Waiting", None, "ErrImageNeverPull", message),)


def test_unschedulable_condition_is_projected():
    message = "0/1 nodes are available: 1 Insufficient cpu."
    unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    c = project_child(pod(phase="Pending", conditions=[unschedulable]))
    assert not c.pod.scheduled
    assert (c.pod.scheduling_reason, c.pod.scheduling_message) == ("Unschedulable", message)


def test_pod_message_and_terminated_message_are_projected():
    start_error = 'exec: "python": executable file not found in $PATH'
    c = project_child(
        pod(
            phase="Failed",
            reason="Evicted",
            message="The node was low on resource: memory.",
            containerStatuses=[terminated(128, "StartError", start_error)],
        )
    )
    assert c.pod.message == "The node was low on resource: memory."
    assert c.pod.containers == (ContainerState("pytorch", "Terminated", 128, "StartError", start_error),)


def test_a_tensorboard_is_ready_when_its_status_says_so() -> None:
    def board(status: dict) -> dict:
        return {"kind": "TensorBoard", "metadata": {"name": "j", "namespace": "n", "uid": "u"}, "status": status}

    assert not project_child(board({})).ready
    assert not project_child(board({"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]})).ready
    assert project_child(board({"ready": True})).ready
    assert project_child(board({"conditions": [{"type": "Ready", "status": "True"}]})).ready
    assert project_child(board({"phase": "Running"})).ready
    assert not project_child({"kind": "Service", "metadata": {"name": "s"}, "status": {"ready": True}}).ready


def test_the_cache_catches_up_with_a_write_by_resource_version_equality_only() -> None:
    """resourceVersions are opaque (API conventions): never ordered. Our status write was made
    over version ``base``; the cache has caught up once it holds our version or any other
    version than ``base`` (a watch delivers an object's versions in order)."""
    from t9k_jobs.cluster.controller import _caught_up
    from t9k_jobs.cluster.state import Written

    def at(rv: str) -> dict:
        return {"metadata": {"resourceVersion": rv}}

    written = Written(at("opaque-b"), base="opaque-a")
    assert not _caught_up(at("opaque-a"), written)  # still the version we wrote over
    assert _caught_up(at("opaque-b"), written)  # the echo of our write
    assert _caught_up(at("opaque-c"), written)  # a later change
    assert _caught_up(at("9"), Written(at("10"), base="8"))  # no numeric ordering: "9" < "10" is not asked
    assert _caught_up(None, written)


def workload(conditions: list[dict], admission: dict | None = None) -> dict:
    """A Kueue v1beta2 Workload of job ``j`` with ``conditions`` (Kueue v0.17.0's condition types)."""
    obj = pod()
    obj.update(apiVersion="kueue.x-k8s.io/v1beta2", kind="Workload", spec={"queueName": "q", "podSets": []})
    obj["metadata"]["name"] = "j"
    obj["status"] = {"conditions": conditions, **({"admission": admission} if admission else {})}
    return obj


def cond(type_: str, status: str, reason: str, message: str) -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def test_a_workload_projects_kueues_words_and_its_admission():
    pending = project_child(workload([cond("QuotaReserved", "False", "Inadmissible", "LocalQueue q doesn't exist")]))
    assert pending.pod is None and pending.workload is not None
    assert (pending.workload.admitted, pending.workload.evicted) == (False, None)
    assert (pending.workload.reason, pending.workload.message) == ("Inadmissible", "LocalQueue q doesn't exist")
    admission = {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "worker", "flavors": {"cpu": "on-demand", "memory": "on-demand"}, "count": 2}],
    }
    admitted = project_child(
        workload(
            [
                cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
                cond("Admitted", "True", "Admitted", "The workload is admitted"),
            ],
            admission,
        )
    )
    assert admitted.workload.admitted and admitted.workload.cluster_queue == "cq"
    assert admitted.flavors == (("worker", ("on-demand",)),)
    evicted = project_child(
        workload(
            [
                cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
                cond("Admitted", "True", "Admitted", "The workload is admitted"),
                cond("Evicted", "True", "Preempted", "Preempted to accommodate a workload"),
            ],
            admission,
        )
    )
    assert not evicted.workload.admitted
    assert (evicted.workload.evicted, evicted.workload.message) == ("Preempted", "Preempted to accommodate a workload")
    assert project_child(pod()).workload is None
