"""Tests that need a control plane of their own: etcd and kube-apiserver only, no watch cache.

* Without kube-controller-manager nothing else acts: a deleted namespace stays Terminating with
  its contents, which is how a job in a terminating namespace is set up on purpose.
* With ``--watch-cache=false`` a watch goes to etcd, so compacting etcd (through its HTTP gateway)
  while an informer is cut off makes the server answer ``410 Gone`` when it comes back; the
  shared control plane's watch cache would answer the old resourceVersion from memory instead.
"""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from t9k_jobs.cluster.client import CONFIGMAPS, KubeClient
from t9k_jobs.cluster.informer import Informer
from tests.helpers import await_until

from .conftest import CRD_DIR, ControlPlane, ControlPlaneError, build_bin_dir
from .kube import Kube, job_path
from .netcut import NetCut
from .operator_proc import OperatorProcess
from .test_informer import cm
from .test_operator import pytorch


@pytest.fixture(scope="module")
def bare_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(
        tmp_path_factory.mktemp("bare"),
        build_bin_dir(),
        controller_manager=False,
        crds=[CRD_DIR],
        apiserver_args=["--watch-cache=false"],
    )
    try:
        plane.start()
    except ControlPlaneError as exc:
        pytest.fail(f"the control plane did not start: {exc}", pytrace=False)
    yield plane
    plane.stop()


def etcd(plane: ControlPlane, call: str, body: dict) -> dict:
    req = urllib.request.Request(
        f"{plane.etcd_url}/v3/kv/{call}", data=json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def compact_everything(plane: ControlPlane) -> int:
    """Compact etcd to its current revision; return that revision."""
    rev = int(etcd(plane, "range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    etcd(plane, "compaction", {"revision": str(rev), "physical": True})
    return rev


def test_partition_past_compaction_relists_and_reports_the_difference(bare_plane, tmp_path: Path) -> None:
    plane, ns = bare_plane, "default"

    async def go() -> None:
        direct = await KubeClient.from_config(plane.kubeconfig)
        net = await NetCut(plane.server).start()
        cut_off = await KubeClient.from_config(net.kubeconfig(plane.kubeconfig, tmp_path / "kubeconfig"))
        task = None
        try:
            for i in range(4):
                await direct.create(CONFIGMAPS, ns, cm(ns, f"c{i}", "a"))
            events: list[tuple[str, str]] = []
            inf = Informer(
                cut_off, CONFIGMAPS, namespace=ns, label_selector="team=a", transform=lambda o: o["data"]["v"]
            )
            inf.add_handler(lambda ev, key, new, old: events.append((ev, key[1])))
            task = asyncio.create_task(inf.run())
            await asyncio.wait_for(inf.synced.wait(), 10)
            await direct.patch(CONFIGMAPS, ns, "c3", {"data": {"v": "2"}})
            await await_until(lambda: inf.get(ns, "c3") == "2", "c3's patch to arrive", 10)
            assert inf.relists == 1
            seen_rv = int(inf.resource_version)

            await net.cut()
            events.clear()
            await direct.delete(CONFIGMAPS, ns, "c0")
            await direct.patch(CONFIGMAPS, ns, "c1", {"data": {"v": "3"}})
            await direct.create(CONFIGMAPS, ns, cm(ns, "c4", "a"))
            await direct.create(CONFIGMAPS, ns, cm(ns, "c5", "a"))
            await direct.delete(CONFIGMAPS, ns, "c5")  # born and gone while away: never reported
            assert compact_everything(plane) > seen_rv
            await asyncio.sleep(1.0)  # a few refused reconnects
            assert events == [] and inf.get(ns, "c0") == "1", "nothing can arrive during the cut"

            await net.mend()
            await await_until(lambda: inf.relists == 2, "a second list after the cut", 30)
            assert sorted(events) == [("ADDED", "c4"), ("DELETED", "c0"), ("MODIFIED", "c1")]
            assert inf.store == {(ns, "c1"): "3", (ns, "c2"): "1", (ns, "c3"): "2", (ns, "c4"): "1"}

            # And it watches again from the new list: later changes still arrive, one by one.
            events.clear()
            await direct.patch(CONFIGMAPS, ns, "c2", {"data": {"v": "4"}})
            await await_until(lambda: inf.get(ns, "c2") == "4", "c2's patch to arrive", 10)
            assert events == [("MODIFIED", "c2")] and inf.relists == 2
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await net.close()
            await cut_off.close()
            await direct.close()

    asyncio.run(go())


def test_job_in_a_terminating_namespace_is_not_retried(bare_plane, tmp_path: Path) -> None:
    """A create refused with 403 NamespaceTerminating ends the pass quietly: no further create of
    that pass is sent, no error, no backoff loop.

    The operator's metrics tell when the pass is over (the reconcile counter counts it after the
    pass, and a failed pass is re-queued, counting a retry, before that), so nothing waits for a
    fixed time: once the one pass is counted, what it sent and whether it will be retried is known.
    """
    kube, ns = Kube(bare_plane.kubeconfig), "doomed"
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.create(job_path(ns, "PyTorchTrainingJob"), pytorch("late", ns, workers=2))
    kube.delete(f"/api/v1/namespaces/{ns}")
    assert kube.get(f"/api/v1/namespaces/{ns}")["status"]["phase"] == "Terminating"

    op = OperatorProcess(bare_plane.kubeconfig, tmp_path / "op.log", "--no-leader-elect").start()
    try:
        passes = lambda: op.metric("controller_runtime_reconcile_total")
        kube.wait_for(lambda: passes() >= 1, timeout=30, what="the job's reconcile pass")
        # The only job, queued once at start: one pass. It has 3 Services and 3 pods to create;
        # the first create goes alone, is refused, and is the pass's last request.
        assert passes() == 1, op.tail()
        assert op.metric("controller_runtime_reconcile_total", result="success") == 1, op.tail()
        refused = op.metric("t9k_jobs_api_errors_total", verb="create", reason="Forbidden")
        assert refused == 1, f"{refused:g} creates refused: the pass went on after the first refusal"
        assert op.metric("rest_client_requests_total", verb="create") == 1, op.tail()
        retries = op.metric("workqueue_retries_total")
        assert retries == 0, f"retried a create the namespace refuses:\n{op.tail()}"
        assert op.metric("controller_runtime_reconcile_errors_total") == 0, op.tail()
        assert op.metric("t9k_jobs_pods_created_total") == 0
        job = kube.get(job_path(ns, "PyTorchTrainingJob", "late"))
        assert not job.get("status"), "the pass ended at the refusal: no status written"
    finally:
        assert op.stop() == 0, op.tail()
