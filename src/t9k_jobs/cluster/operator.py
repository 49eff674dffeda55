"""``t9k-jobs operator``: the process that runs the controller on a cluster.

Start-up: load the kubeconfig (or the in-cluster account), serve ``/healthz``, ``/readyz`` and
``/metrics``, find which optional child kinds the API server serves (T9k's PodGroup, Kubernetes'
scheduling.k8s.io/v1beta1 PodGroup, TensorBoard; asked again every ``--discovery-interval``, and a
change ends the process with exit code 3 so it starts again to match), retrying with backoff while the API server cannot be reached or answers 5xx/429 (healthy, not
ready: a kubelet does not restart it, and it starts as soon as the API server is back instead
of after a CrashLoopBackOff), start the informers (every replica, so a standby's cache is warm), and, with
leader election on, start the workers only while holding the Lease. Losing the Lease ends
the process with exit code 1, so its supervisor restarts it as a fresh candidate (as
client-go controllers do). SIGTERM or SIGINT stop it cleanly: workers stop, the Lease is
released, exit code 0, within :data:`STOP_WITHIN` seconds however the API server behaves (one
that never answers included: what the way out waits for is bounded, the Lease's release and the
last Events given up rather than waited for; a kubelet's grace period is 30 s, and a stop that
takes long holds a rolling update).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import leader
from .client import DEFAULT_BURST, DEFAULT_QPS, NATIVE_PODGROUPS, OPTIONAL_CHILDREN, ApiError, BadAnswer, KubeClient
from ..engine.runtime import NODE_LOST_AFTER
from .controller import Controller

log = logging.getLogger("t9k_jobs.operator")

EXIT_LOST_LEASE = 1
#: Exit status when what the API server serves changed under a running operator (T9k's
#: PodGroup CRD or scheduling.k8s.io/v1beta1 installed or removed): its Deployment starts it
#: again, and the new process's informers and gang mode follow the cluster.
EXIT_SERVED_CHANGED = 3
#: Marks, in the set of served kinds, that Kubernetes' own PodGroup (scheduling.k8s.io/v1beta1) is.
NATIVE_GANG = "scheduling.k8s.io/PodGroup"
#: Backoff between discovery attempts while the API server cannot be reached (seconds).
DISCOVERY_BACKOFF = (0.5, 10.0)
#: Seconds from SIGTERM to the end of the process, at most (the tests hold it to 5).
STOP_WITHIN = 4.0
#: Of those, the most the Events of the last passes and the Lease's release may take, each.
STOP_EVENTS = 1.0
STOP_RELEASE = 2.0


@dataclass
class OperatorConfig:
    """Settings of one operator process (the CLI flags of ``t9k-jobs operator``)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespaces: list[str] = field(default_factory=list)
    workers: int = 8
    leader_elect: bool = True
    lease_name: str = "t9k-jobs-operator"
    lease_namespace: str = "default"
    identity: str = ""
    bind: str = ":8080"
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    #: Seconds between two checks of what the API server serves (0: checked at start only).
    discovery_interval: float = 300.0
    #: Seconds a node may be unreachable before the replicas on it are lost (``--node-lost-after``).
    node_lost_after: float = NODE_LOST_AFTER
    #: Seconds a finished job without its own ``t9k-jobs.io/ttl-seconds-after-finished`` is kept
    #: before it is deleted (``--ttl-after-finished``); ``None``: kept.
    ttl_after_finished: int | None = None
    #: Whether a gang job gets a PodDisruptionBudget (``--no-disruption-budgets``: no).
    disruption_budgets: bool = True


class Operator:
    """One operator process: controller, optional leader election, health and metrics server."""

    def __init__(self, config: OperatorConfig) -> None:
        self.config = config
        self.identity = (
            config.identity or os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
        )
        self.client: KubeClient | None = None
        self.controller: Controller | None = None
        self.leading = False
        self.stopping = asyncio.Event()
        self.exit_code = 0
        self._runner: web.AppRunner | None = None
        self._waiting_for: str = "the API server"

    async def run(self) -> int:
        """Run until SIGTERM/SIGINT (exit 0) or until the Lease is lost (exit 1)."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stopping.set)
        c = self.config
        client = await self._unless_stopped(KubeClient.from_config(c.kubeconfig, c.context, qps=c.qps, burst=c.burst))
        if client is None:  # stopped while a credential plugin ran
            return self.exit_code
        self.client = client
        try:
            await self._serve_health()
            served = await self._discover()
            if served is None:  # stopped while waiting for the API server
                return self.exit_code
            native = NATIVE_GANG in served
            served.discard(NATIVE_GANG)
            self.controller = Controller(
                self.client,
                c.namespaces or None,
                c.workers,
                optional_kinds=served,
                identity=self.identity,
                native_gang=native,
                node_lost_after=c.node_lost_after,
                ttl_after_finished=c.ttl_after_finished,
                disruption_budgets=c.disruption_budgets,
            )
            log.info("t9kScheduler jobs: gang mode %s", self.controller.gang_mode)
            log.info(
                "t9k-jobs operator %s starting: namespaces %s, %d workers, leader election %s",
                self.identity,
                ",".join(c.namespaces) or "all",
                c.workers,
                "on" if c.leader_elect else "off",
            )
            main = asyncio.create_task(self._main())
            stop = asyncio.create_task(self.stopping.wait())
            recheck = asyncio.create_task(self._recheck_served(served | ({NATIVE_GANG} if native else set())))
            await asyncio.wait({main, stop}, return_when=asyncio.FIRST_COMPLETED)
            stopped_at = loop.time()
            stop.cancel()
            recheck.cancel()
            await asyncio.gather(recheck, stop, return_exceptions=True)
            if not main.done():
                main.cancel()
                await asyncio.gather(main, return_exceptions=True)
            elif main.exception() is not None:
                raise main.exception()  # type: ignore[misc]
            await self.controller.stop(events_grace=STOP_EVENTS)
            if c.leader_elect and self.leading:
                left = min(STOP_RELEASE, STOP_WITHIN - STOP_EVENTS - (loop.time() - stopped_at))
                try:
                    await asyncio.wait_for(
                        leader.release(self.client, c.lease_name, c.lease_namespace, self.identity), max(left, 0.1)
                    )
                except TimeoutError:
                    log.warning(
                        "the lease %s/%s was not released within %.1f s (the API server does not answer): a "
                        "standby takes it when it expires", c.lease_namespace, c.lease_name, max(left, 0.1),
                    )  # fmt: skip
        finally:
            if self._runner is not None:
                await self._runner.cleanup()
            await self.client.close()
        return self.exit_code

    async def _unless_stopped(self, coro: Any) -> Any:
        """``await coro``, unless a stop signal comes first: then it is cancelled and None returned."""
        work = asyncio.ensure_future(coro)
        stop = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, stop, return_exceptions=True)
            return None
        await asyncio.gather(stop, return_exceptions=True)
        return work.result()

    async def _main(self) -> None:
        assert self.controller is not None and self.client is not None
        await self.controller.start_informers()
        if not self.config.leader_elect:
            self.leading = True
            await self.controller.run_workers()
            return

        async def started() -> None:
            self.leading = True
            await self.controller.run_workers()  # type: ignore[union-attr]

        async def stopped() -> None:
            self.leading = False
            self.exit_code = EXIT_LOST_LEASE
            self.stopping.set()

        c = self.config
        await leader.lead(self.client, c.lease_name, c.lease_namespace, self.identity, started, stopped)

    async def _discover(self) -> set[str] | None:
        """The optional kinds served, asked again with exponential backoff
        (:data:`DISCOVERY_BACKOFF`) while the API server cannot be reached or answers 5xx or 429;
        None when a stop signal came first. Other API errors (401, 403) are raised: retrying
        would not change them."""
        delay, cap = DISCOVERY_BACKOFF
        started = time.monotonic()
        while not self.stopping.is_set():
            try:
                served = await self._unless_stopped(self._served_optional_kinds())
                return served  # None: stopped while the API server did not answer
            except ApiError as exc:
                if exc.status < 500 and exc.status != 429 and not isinstance(exc, BadAnswer):
                    raise  # 401, 403: trying again would not change them
                problem = str(exc)  # a 5xx, 429, or an answer of another shape (a proxy): may pass
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            log.warning(
                "the API server cannot be reached (%s); trying again in %.1f s (waiting %.0f s so far)",
                problem, delay, time.monotonic() - started,
            )
            self._waiting_for = f"the API server ({problem})"
            try:
                await asyncio.wait_for(self.stopping.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass
            delay = min(cap, delay * 2)
        return None

    async def _recheck_served(self, at_start: set[str]) -> None:
        """Every ``discovery_interval`` seconds, ask again what is served; when it differs from
        ``at_start``, stop with :data:`EXIT_SERVED_CHANGED` (the Lease is given up first) so a
        new process starts with informers and a gang mode that match. Errors reaching the API
        server are logged and the next check goes on."""
        interval = self.config.discovery_interval
        if interval <= 0:
            return
        while not self.stopping.is_set():
            try:
                await asyncio.wait_for(self.stopping.wait(), timeout=interval)
                return
            except asyncio.TimeoutError:
                pass
            try:
                now = await self._served_optional_kinds()
            except (ApiError, aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                log.warning("checking what the API server serves failed: %s (next check in %.0f s)", exc, interval)
                continue
            if now != at_start:
                log.warning(
                    "the API server now serves %s (at start: %s): stopping with exit %d so the "
                    "operator starts again with informers and a gang mode that match",
                    ", ".join(sorted(now)) or "no optional kind",
                    ", ".join(sorted(at_start)) or "no optional kind",
                    EXIT_SERVED_CHANGED,
                )
                self.exit_code = EXIT_SERVED_CHANGED
                self.stopping.set()
                return

    async def _served_optional_kinds(self) -> set[str]:
        """The optional child kinds served (``PodGroup`` means T9k's), plus :data:`NATIVE_GANG`
        when ``scheduling.k8s.io/v1beta1`` serves ``podgroups`` (Kubernetes 1.37 with the
        ``GenericWorkload`` gate and the API version enabled)."""
        assert self.client is not None
        served = set()
        try:
            listing = await self.client.request("GET", f"/apis/{NATIVE_PODGROUPS.group}/{NATIVE_PODGROUPS.version}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            listing = {}
        if any(isinstance(r, dict) and r.get("name") == NATIVE_PODGROUPS.plural for r in _resources(listing)):
            served.add(NATIVE_GANG)
        for kind, res in OPTIONAL_CHILDREN.items():
            try:
                listing = await self.client.request("GET", f"/apis/{res.group}/{res.version}")
            except ApiError as exc:
                if exc.status != 404:
                    raise
                log.info(
                    "%s (%s) is not served by this cluster: jobs that ask for it run without it%s",
                    kind,
                    res.group,
                    (
                        " (t9kScheduler jobs: gang-scheduled through scheduling.k8s.io/v1beta1 PodGroups)"
                        if NATIVE_GANG in served
                        else " (t9kScheduler jobs: the default scheduler, a GangScheduling condition and a Warning)"
                    )
                    if kind == "PodGroup"
                    else " (t9kScheduler jobs are not queued: Kueue is not installed)"
                    if kind == "Workload"
                    else "",
                )
                continue
            if any(isinstance(r, dict) and r.get("name") == res.plural for r in _resources(listing)):
                served.add(kind)
        return served

    # ------------------------------------------------------------------ health and metrics

    async def _serve_health(self) -> None:
        host, _, port = self.config.bind.rpartition(":")
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        # A scrape or probe still open at the stop is given a second, not the default minute.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host or None, int(port))
        await site.start()
        log.info("serving /healthz /readyz /metrics on %s", self.config.bind)

    async def _healthz(self, request: web.Request) -> web.Response:
        # The event loop answers, and no informer task has died.
        if self.controller is None:
            return web.Response(text="ok (starting)\n")
        dead = self.controller.stopped_tasks()
        if dead:
            return web.Response(status=500, text=f"stopped: {', '.join(dead)}\n")
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.controller is None:
            return web.Response(status=503, text=f"waiting for {self._waiting_for}\n")
        if not self.controller.synced:
            return web.Response(status=503, text="informer caches not synced\n")
        role = "leader" if self.leading else "standby"
        return web.Response(text=f"ok ({role})\n")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})


def run_operator(config: OperatorConfig, log_level: str = "INFO") -> int:
    """Run an operator process to the end; returns its exit code."""
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    return asyncio.run(Operator(config).run())


def _resources(listing: dict[str, object]) -> list[object]:
    """The ``resources`` of a discovery document (``/apis/GROUP/VERSION``), ``[]`` when it has none
    or they are not a list (an answer of another shape is not a reason to stop)."""
    found = listing.get("resources")
    return found if isinstance(found, list) else []
