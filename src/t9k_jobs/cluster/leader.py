"""Lease-based leader election (``coordination.k8s.io/v1`` Lease), on kubernetes_asyncio's elector.

kubernetes_asyncio's :class:`~kubernetes_asyncio.leaderelection.leaderelection.LeaderElection`
implements client-go's algorithm: a candidate takes the Lease when its holder has not renewed
it for ``lease_duration`` seconds (measured on the candidate's own clock from when it last saw
the record change); the leader renews every ``retry_period`` seconds and gives up when it
could not renew within ``renew_deadline``. Defaults follow controller-runtime: 15 s, 10 s, 2 s.

What we add: :func:`release`, which clears the holder on a clean shutdown so a standby takes
over at its next retry instead of waiting out the lease (client-go's ``ReleaseOnCancel``); and
a Lease lock for which an unreachable API server is a failed attempt, as in client-go, not an
exception (kubernetes_asyncio's lock catches only API errors, so a refused connection during a
renew would end the elector, and the operator with it, at once).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from . import metrics
from .client import LEASES, ApiError, KubeClient

log = logging.getLogger("t9k_jobs.leader")

# Whole seconds: the Lease stores leaseDurationSeconds as an integer.
LEASE_DURATION = 15
RENEW_DEADLINE = 10
RETRY_PERIOD = 2


async def lead(
    client: KubeClient,
    name: str,
    namespace: str,
    identity: str,
    on_started: Callable[[], Awaitable[None]],
    on_stopped: Callable[[], Awaitable[None]],
    lease_duration: int = LEASE_DURATION,
    renew_deadline: int = RENEW_DEADLINE,
    retry_period: int = RETRY_PERIOD,
) -> None:
    """Campaign for Lease ``namespace/name`` as ``identity``; run ``on_started`` while leading.

    Returns after leadership was lost (``on_stopped`` has run then). Durations are seconds.
    Cancelled (the operator's stop), it cancels ``on_started`` too and waits for it to end:
    kubernetes_asyncio runs ``on_started`` as a task of its own that it cancels only when the
    lease is lost, so a stop would leave the workers running, mid-request, after the process
    closed its HTTP session.
    """
    gauge = metrics.LEADER.labels(name=name)
    leading: set[asyncio.Task[Any]] = set()

    async def started() -> None:
        task = asyncio.current_task()
        if task is not None:
            leading.add(task)
        gauge.set(1)
        log.info("%s became the leader (lease %s/%s)", identity, namespace, name)
        await on_started()

    async def stopped() -> None:
        gauge.set(0)
        log.warning("%s lost the lease %s/%s", identity, namespace, name)
        await on_stopped()

    lock = _TolerantLeaseLock(name, namespace, identity, client.api_client)
    lock.call_timeout = renew_deadline / 2
    config = electionconfig.Config(
        lock,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        onstarted_leading=started,
        onstopped_leading=stopped,
    )
    try:
        await leaderelection.LeaderElection(config).run()
    finally:
        for task in leading:
            task.cancel()
        await asyncio.gather(*leading, return_exceptions=True)


class _TolerantLeaseLock(LeaseLock):
    """A :class:`LeaseLock` whose calls report a transport failure (connection refused or reset,
    no answer within ``call_timeout`` seconds) as a failed attempt; the elector then retries
    every retry period until its renew deadline, and only then gives leadership up."""

    call_timeout: float = 5.0

    async def get(self, name: str, namespace: str):  # type: ignore[override]
        got = await self._attempt("read", namespace, name, super().get(name, namespace), None)
        if got is not None:
            return got
        # The elector reads the code from the exception's JSON body; anything but 404 means
        # "could not read the lock": a failed attempt.
        failure = ApiException(status=503, reason="ServiceUnavailable")
        failure.body = json.dumps({"code": 503, "message": "the API server cannot be reached"})
        return False, failure

    async def create(self, name: str, namespace: str, election_record) -> bool:  # type: ignore[override]
        return await self._attempt(
            "create", namespace, name, super().create(name, namespace, election_record), False
        )

    async def update(self, name: str, namespace: str, updated_record) -> bool:  # type: ignore[override]
        return await self._attempt(
            "update", namespace, name, super().update(name, namespace, updated_record), False
        )

    async def _attempt(self, verb: str, namespace: str, name: str, call: Awaitable[Any], failed: Any) -> Any:
        """``await call`` within ``call_timeout`` seconds; ``failed`` when the server is unreachable."""
        try:
            return await asyncio.wait_for(call, self.call_timeout)
        except (OSError, TimeoutError, aiohttp.ClientError) as exc:
            log.warning("cannot %s the lease %s/%s: %s: %s", verb, namespace, name, type(exc).__name__, exc)
            return failed


async def release(client: KubeClient, name: str, namespace: str, identity: str) -> None:
    """Give the Lease up if ``identity`` holds it (best effort; errors are logged)."""
    try:
        lease = await client.get(LEASES, namespace, name)
        if (lease.get("spec") or {}).get("holderIdentity") != identity:
            return
        lease["spec"]["holderIdentity"] = None
        await client.request("PUT", LEASES.path(namespace, name), body=lease)
        metrics.LEADER.labels(name=name).set(0)
        log.info("%s released the lease %s/%s", identity, namespace, name)
    except (ApiError, OSError) as exc:
        log.warning("could not release the lease %s/%s: %s", namespace, name, exc)
