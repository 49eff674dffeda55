"""A finished job's time to live on a cluster (issue 43, part 3): the operator deletes it, with
its children, its annotation's seconds (else its own ``--ttl-after-finished``) after its
``completionTime``; a job with a longer one, and a job still running, stay. The tests play the
kubelet by writing pod status; the garbage collector of kube-controller-manager collects the
children."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

import pytest

from tests import helpers
from tests.helpers import replica, template

from .kube import Kube, job_path, pod_path
from .operator_proc import OperatorProcess

TTL = "t9k-jobs.io/ttl-seconds-after-finished"
DEFAULT = 4  # the operator's --ttl-after-finished


@pytest.fixture(scope="module")
def operator(control_plane, tmp_path_factory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("operator-ttl") / "operator.log"
    op = OperatorProcess(control_plane.kubeconfig, log, "--no-leader-elect", "--log-level", "DEBUG",
                         "--ttl-after-finished", str(DEFAULT)).start()  # fmt: skip
    yield op
    assert op.stop() == 0, op.tail()


def generic(kube: Kube, ns: str, name: str, ttl: str | None) -> str:
    spec = {"replicaSpecs": [replica("worker", 1, template(["true"], image="example.registry/x:1"))]}
    manifest = helpers.job("GenericJob", name, spec, namespace=ns)
    if ttl is not None:
        manifest["metadata"]["annotations"] = {TTL: ttl}
    kube.create(job_path(ns, "GenericJob"), manifest)
    return job_path(ns, "GenericJob", name)


def succeed(kube: Kube, ns: str, name: str, path: str) -> float:
    """Play the kubelet until the job Succeeded; its completionTime (seconds since the epoch)."""
    Kube.wait_for(lambda: kube.get(pod_path(ns, f"{name}-worker-0")), timeout=60, what=f"{name}'s pod")
    kube.set_pod_phase(ns, f"{name}-worker-0", "Succeeded")
    done = Kube.wait_for(lambda: (s := kube.get(path).get("status") or {}).get("phase") == "Succeeded" and s,
                         timeout=60, what=f"{name} Succeeded")  # fmt: skip
    return datetime.fromisoformat(done["completionTime"].replace("Z", "+00:00")).timestamp()


def test_finished_jobs_are_deleted_after_their_time_to_live_and_the_others_stay(operator, kube: Kube,
                                                                                namespace: str) -> None:  # fmt: skip
    own = generic(kube, namespace, "own", "10")
    default = generic(kube, namespace, "default", None)
    long = generic(kube, namespace, "long", "3600")
    running = generic(kube, namespace, "running", "0")
    finished = {name: succeed(kube, namespace, name, path) for name, path in (("own", own), ("default", default), ("long", long))}
    Kube.wait_for(lambda: kube.get(pod_path(namespace, "running-worker-0")), timeout=60, what="running's pod")
    kube.set_pod_phase(namespace, "running-worker-0", "Running")

    Kube.wait_for(lambda: not kube.exists(default), timeout=60, interval=0.2, what="the default-TTL job deleted")
    assert time.time() - finished["default"] >= DEFAULT - 1
    Kube.wait_for(lambda: not kube.exists(own), timeout=60, interval=0.2, what="the 10 s job deleted")
    gone = time.time() - finished["own"]
    assert 9 <= gone < 30, gone  # completionTime has whole seconds
    assert kube.exists(long) and kube.exists(running)
    assert (kube.get(running).get("status") or {}).get("phase") == "Running"
    # Its children go with it: the garbage collector deletes what the job owned.
    Kube.wait_for(lambda: not kube.exists(pod_path(namespace, "own-worker-0")), timeout=60, what="own's pod collected")
    assert operator.metric("controller_runtime_reconcile_total", result="deleted") >= 2
