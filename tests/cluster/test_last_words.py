"""The last-words ConfigMap (issue 42; :mod:`t9k_jobs.cluster.last_words`) against the real API
server: made once per job, owned by it, merged into by later deletes (a merge patch with the
resourceVersion precondition), bounded by its budget with the oldest attempts dropped first. The
reading of real pods' logs is tested in real pods (tests/node/test_progress.py)."""

from __future__ import annotations

import asyncio
import json

from t9k_jobs.api import parse_job
from t9k_jobs.cluster import last_words
from t9k_jobs.cluster.client import CONFIGMAPS, KubeClient
from t9k_jobs.cluster.last_words import INDEX, LastWords, _tail

from .. import helpers
from .kube import Kube, job_path


def _job(kube: Kube, ns: str) -> object:
    """A job made in the API server: the ConfigMap names it as its owner, and kube-controller-manager's
    garbage collector deletes what an owner that does not exist owns (a made-up UID lost the ConfigMap
    mid-test)."""
    spec = {"replicaSpecs": [helpers.replica("worker", 1, helpers.template(["true"], name="c"))]}
    manifest = helpers.job("GenericJob", "talker", spec, namespace=ns)
    made = kube.create(job_path(ns, "GenericJob"), manifest)
    manifest["metadata"]["uid"] = made["metadata"]["uid"]
    return parse_job(manifest)


def entry(attempt: int, size: int = 10) -> tuple[dict, str]:
    text = "".join(f"2026-12-05T00:00:{attempt:02d}.000000001Z attempt {attempt} {'x' * size}\n" for _ in range(1))
    return ({"replica": "talker-worker-0", "attempt": attempt, "container": "c", "exitCode": 1,
             "reason": "Error", "why": "Restart", "deleted": "2026-12-05T00:00:00Z"}, text)  # fmt: skip


def test_kept_lines_are_merged_per_attempt_and_the_oldest_go_past_the_budget(control_plane, kube: Kube, namespace: str,
                                                                             monkeypatch) -> None:  # fmt: skip
    job = _job(kube, namespace)

    async def go() -> dict:
        client = await KubeClient.from_config(control_plane.kubeconfig)
        try:
            keeper = LastWords(client)
            await keeper._store(job, [entry(0)])  # type: ignore[arg-type]
            await keeper._store(job, [entry(1), entry(2)])  # type: ignore[arg-type]
            monkeypatch.setattr(last_words, "BUDGET", 2500)  # room for about two attempts of 1 KB
            await keeper._store(job, [entry(3, 1000), entry(4, 1000)])  # type: ignore[arg-type]
            return await client.get(CONFIGMAPS, namespace, last_words.name_of("talker"))
        finally:
            await client.close()

    cm = asyncio.run(go())
    index = last_words.attempts(cm)
    assert [e["attempt"] for e in index] == [3, 4], index  # 0, 1, 2 dropped, oldest first
    assert set(cm["data"]) == {INDEX, "talker-worker-0.attempt-3.c.log", "talker-worker-0.attempt-4.c.log"}
    assert "attempt 4 xxx" in cm["data"]["talker-worker-0.attempt-4.c.log"]
    owner = cm["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("GenericJob", "talker", job.metadata.uid)  # type: ignore[attr-defined]
    assert cm["metadata"]["labels"][last_words.LABEL] == "talker"
    assert json.loads(cm["data"][INDEX]) == index


def test_the_tail_keeps_whole_lines_of_the_end() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    kept = _tail(text, 100)
    assert len(kept.encode()) <= 100 and kept.endswith("line 999\n") and kept.startswith("line ")
    assert _tail("short\n", 100) == "short\n"
    assert last_words.attempts(None) == [] and last_words.attempts({"data": {INDEX: "not json"}}) == []


def test_lost_attempts_are_counted_once_per_pod_in_the_configmap_and_the_metrics(control_plane, kube: Kube,
                                                                                namespace: str) -> None:  # fmt: skip
    """The lost attempts (issue 42, part 5) go to the ConfigMap's ``lost.json`` and the operator's
    counters once per pod: a pass that says a pod again, this operator or a new one (another
    ``LastWords``, the ConfigMap's own list), adds nothing."""
    from prometheus_client import REGISTRY

    from t9k_jobs.engine import Lost

    job = _job(kube, namespace)
    first = (Lost("talker-worker-0", "uid-a", 0, "Failed", 10.0, 2), Lost("talker-worker-1", "uid-b", 0, "Restart", 4.0, 2))

    def sample(name: str, reason: str) -> float:
        return REGISTRY.get_sample_value(name, {"reason": reason}) or 0.0

    before = (sample("t9k_jobs_lost_gpu_seconds_total", "Failed"), sample("t9k_jobs_lost_replica_seconds_total", "Restart"))

    async def go() -> dict:
        client = await KubeClient.from_config(control_plane.kubeconfig)
        try:
            await LastWords(client).keep(job, [], {}, first)  # type: ignore[arg-type]
            again = LastWords(client)  # an operator that did not count them: the ConfigMap did
            await again.keep(job, [], {}, (*first, Lost("talker-worker-0", "uid-c", 1, "Failed", 1.0, 2)))  # type: ignore[arg-type]
            await again.keep(job, [], {}, first)  # type: ignore[arg-type]
            return await client.get(CONFIGMAPS, namespace, last_words.name_of("talker"))
        finally:
            await client.close()

    cm = asyncio.run(go())
    totals = last_words.lost_totals(cm)
    assert totals is not None and totals["counted"] == ["uid-a", "uid-b", "uid-c"], totals
    assert totals["reasons"] == {"Failed": {"attempts": 2, "replicaSeconds": 11.0, "gpuSeconds": 22.0},
                                 "Restart": {"attempts": 1, "replicaSeconds": 4.0, "gpuSeconds": 8.0}}  # fmt: skip
    assert last_words.attempts(cm) == []  # no pod deleted: no last lines
    assert sample("t9k_jobs_lost_gpu_seconds_total", "Failed") - before[0] == 22.0
    assert sample("t9k_jobs_lost_replica_seconds_total", "Restart") - before[1] == 4.0
