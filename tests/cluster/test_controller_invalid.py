"""A spec the engine cannot handle (issue 32), in an operator's controller against the real API server.

The engine raising is a t9k-jobs bug, so it is injected here (its ``reconcile`` replaced by one
that raises) on a job the real API server holds; no operator process runs in this module, so the
controller under test is the only writer of the job's status.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from t9k_jobs.cluster.client import KubeClient
from t9k_jobs.cluster.controller import Controller
from t9k_jobs.cluster.projection import job_key

from .kube import Kube, job_path
from .test_invalid_spec import LIMIT, deepspeed, invalid_events, spec_valid


def test_a_spec_the_engine_cannot_handle_is_marked_once_and_not_retried(
    kube: Kube, namespace: str, control_plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug of the engine (injected: its reconcile raises) on a job the real API server holds:
    one InvalidSpec event and the condition, written through the status subresource; the key is
    not retried (the pass returns instead of raising), and a second pass over the same spec says
    nothing new."""
    ns, name = namespace, "buggy"
    raw = kube.create(job_path(ns, "DeepSpeedJob"), deepspeed(name, ns, []))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("t9k_jobs.cluster.controller.reconcile", broken)

    async def passes() -> list[str]:
        client = await KubeClient.from_config(control_plane.kubeconfig)
        ctl = Controller(client, [ns], 1)
        key = job_key("DeepSpeedJob", ns, name)
        latest = {"raw": raw}
        ctl.job_object = lambda k: latest["raw"]  # type: ignore[method-assign]  # the informer's part
        results = []
        try:
            # A pass that raised was retried with backoff, a traceback each time; it returns now.
            results.append(await ctl.reconcile_key(key))
            latest["raw"] = kube.get(job_path(ns, "DeepSpeedJob", name))  # with the status it wrote
            results.append(await ctl.reconcile_key(key))
            await asyncio.gather(*ctl._background)  # the events sent
        finally:
            ctl.queue.shut_down()
            await ctl.events_client.close()
            await client.close()
        return results

    assert asyncio.run(passes()) == ["invalid", "invalid"]
    cond = spec_valid(kube, ns, name)
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "InvalidSpec")
    assert cond["message"].startswith("t9k-jobs cannot reconcile this spec (ZeroDivisionError: division by zero)")
    events = kube.wait_for(lambda: invalid_events(kube, ns, name), timeout=LIMIT, what="InvalidSpec event")
    assert [e["message"] for e in events] == [cond["message"]]
