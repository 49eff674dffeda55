"""Lease-based leader election (``coordination.k8s.io/v1`` Lease), on kubernetes_asyncio's elector.

kubernetes_asyncio's :class:`~kubernetes_asyncio.leaderelection.leaderelection.LeaderElection`
implements client-go's algorithm: a candidate takes the Lease when its holder has not renewed
it for ``lease_duration`` seconds (measured on the candidate's own clock from when it last saw
the record change); the leader renews every ``retry_period`` seconds and gives up when it
could not renew within ``renew_deadline``. Defaults follow controller-runtime: 15 s, 10 s, 2 s.

What we add: :func:`release`, which clears the holder on a clean shutdown so a standby takes
over at its next retry instead of waiting out the lease (client-go's ``ReleaseOnCancel``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

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
    """
    gauge = metrics.LEADER.labels(name=name)

    async def started() -> None:
        gauge.set(1)
        log.info("%s became the leader (lease %s/%s)", identity, namespace, name)
        await on_started()

    async def stopped() -> None:
        gauge.set(0)
        log.warning("%s lost the lease %s/%s", identity, namespace, name)
        await on_stopped()

    lock = LeaseLock(name, namespace, identity, client.api_client)
    config = electionconfig.Config(
        lock,
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
        onstarted_leading=started,
        onstopped_leading=stopped,
    )
    await leaderelection.LeaderElection(config).run()


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
