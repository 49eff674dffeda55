"""The controller's create path: slow-start batches, and where a pass stops creating."""

from __future__ import annotations

import asyncio
from typing import Any

from t9k_jobs.api import parse_job
from t9k_jobs.cluster.client import ApiError, KubeClient
from t9k_jobs.cluster.controller import Controller
from t9k_jobs.cluster.projection import job_key
from t9k_jobs.cluster.projection import ChildRef
from t9k_jobs.engine import Observed, Runtime, reconcile
from tests import helpers
from tests.helpers import replica, template

KEY = job_key("PyTorchTrainingJob", "ns", "j")


def job(workers: int) -> Any:
    """A PyTorchTrainingJob j in ns: one master and ``workers`` workers, restartPolicy OnFailure."""
    specs = [
        replica(t, n, template(["true"], image="x"), restartPolicy="OnFailure")
        for t, n in (("master", 1), ("worker", workers))
    ]
    spec = {"replicaSpecs": specs}
    return parse_job(helpers.job("PyTorchTrainingJob", "j", spec, namespace="ns", uid="job-uid", resourceVersion="1"))


def terminating() -> ApiError:
    cause = {"reason": "NamespaceTerminating", "message": "namespace ns is being terminated"}
    body = {"details": {"causes": [cause]}}
    return ApiError(403, "Forbidden", "unable to create new content in namespace ns", body)


def carry_out(
    workers: int, fail: dict[str, ApiError]
) -> tuple[list[list[str]], list[Exception], Controller, dict]:
    """Run one pass's ``_carry_out`` against a fake API server; return the batches of creates
    (names sent together), the errors, the controller and what else was called."""

    async def go() -> tuple[list[list[str]], list[Exception], Controller, dict]:
        from kubernetes_asyncio.client import ApiClient, Configuration

        client = KubeClient(ApiClient(Configuration(host="https://127.0.0.1:1")))  # never contacted
        ctl = Controller(client, None, 1)
        log: list[tuple[str, str]] = []
        calls: dict[str, list[Any]] = {"status": [], "events": []}

        async def create(res: Any, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
            name = obj["metadata"]["name"]
            log.append(("start", name))
            await asyncio.sleep(0)
            log.append(("end", name))
            if name in fail:
                raise fail[name]
            return obj

        async def replace_status(res: Any, body: dict[str, Any]) -> dict[str, Any]:
            calls["status"].append(body)
            return body

        client.create = create  # type: ignore[method-assign]
        client.replace_status = replace_status  # type: ignore[method-assign]
        ctl._emit_event = lambda raw, t, reason, msg: calls["events"].append(reason)  # type: ignore
        j = job(workers)
        raw = j.model_dump(by_alias=True, exclude_none=True, mode="json")
        plan = reconcile(j, Observed(), 1_700_000_000.0, Runtime())
        try:
            errors = await ctl._carry_out(KEY, j, raw, plan)
        finally:
            ctl.queue.shut_down()
            await ctl.events_client.close()
            await client.close()
        batches: list[list[str]] = []
        open_: set[str] = set()
        for what, name in log:
            if what == "start":
                if not open_:
                    batches.append([])
                batches[-1].append(name)
                open_.add(name)
            else:
                open_.discard(name)
        calls["expected"] = ctl.expectations.pending(KEY)
        return batches, errors, ctl, calls

    return asyncio.run(go())


def test_creates_go_in_slow_start_batches_non_pods_first() -> None:
    batches, errors, _, calls = carry_out(4, {})
    services = ["j-master-0", "j-worker-0", "j-worker-1", "j-worker-2", "j-worker-3"]
    assert errors == []
    # 5 Services, then 5 pods (same names): 1, 2, 2 (the rest of the Services), then 8 -> 5 pods.
    assert batches == [services[:1], services[1:3], services[3:5], services]
    assert calls["events"] == [] and calls["status"] == [], "a new job's first pass leaves the status"


def test_a_terminating_namespace_ends_the_pass_at_the_first_refusal() -> None:
    batches, errors, _, calls = carry_out(2, {"j-master-0": terminating()})
    assert batches == [["j-master-0"]], "nothing is sent after the refusal"
    assert errors == [], "no error: nothing to retry"
    assert calls["status"] == [] and calls["events"] == []
    assert calls["expected"] == (frozenset(), frozenset()), "the children not sent are not waited for"


def test_a_failed_batch_ends_the_creates_and_is_reported() -> None:
    invalid = ApiError(422, "Invalid", "spec.ports: Required value")
    batches, errors, _, calls = carry_out(2, {"j-worker-0": invalid})
    assert batches == [["j-master-0"], ["j-worker-0", "j-worker-1"]]
    assert errors == [invalid]
    assert calls["events"] == ["FailedCreateService"]
    # Only what was created is waited for (the informer will show it); not what was never sent.
    expected = frozenset({ChildRef("Service", "j-master-0"), ChildRef("Service", "j-worker-1")})
    assert calls["expected"] == (expected, frozenset())


def _status_pass(status_error: ApiError | None) -> tuple[list[Exception], list[str]]:
    """One ``_carry_out`` of a plan that changes the status and sends an event, against a fake
    API server whose status write fails with ``status_error`` (or succeeds)."""
    from t9k_jobs.api.common import JobStatus
    from t9k_jobs.engine import Event, Plan

    async def go() -> tuple[list[Exception], list[str]]:
        from kubernetes_asyncio.client import ApiClient, Configuration

        client = KubeClient(ApiClient(Configuration(host="https://127.0.0.1:1")))  # never contacted
        ctl = Controller(client, None, 1)
        sent: list[str] = []

        async def replace_status(res: Any, body: dict[str, Any]) -> dict[str, Any]:
            if status_error is not None:
                raise status_error
            return body

        client.replace_status = replace_status  # type: ignore[method-assign]
        ctl._emit_event = lambda raw, t, reason, msg: sent.append(reason)  # type: ignore
        j = job(1)
        raw = j.model_dump(by_alias=True, exclude_none=True, mode="json")
        plan = Plan(status=JobStatus(phase="Running"), events=[Event("Normal", "Running", "j is running")])
        try:
            errors = await ctl._carry_out(KEY, j, raw, plan)
        finally:
            ctl.queue.shut_down()
            await ctl.events_client.close()
            await client.close()
        return errors, sent

    return asyncio.run(go())


def test_events_are_sent_only_after_the_status_is_written() -> None:
    """An event tells of the status the pass wrote: when the write fails (a stale resourceVersion)
    the retried pass derives the events again, so none is sent now (else each would go twice)."""
    conflict = ApiError(409, "Conflict", "the object has been modified")
    errors, sent = _status_pass(conflict)
    assert errors == [conflict] and sent == []
    errors, sent = _status_pass(None)
    assert errors == [] and sent == ["Running"]
