"""A rate-limited work queue of job keys, with client-go's guarantees, for asyncio.

- **De-duplication**: a key added many times before a worker takes it is processed once.
- **One worker per key**: a key added while a worker holds it is queued again only when
  that worker calls :meth:`WorkQueue.done`, so two workers never reconcile the same job.
- **Delayed adds** (:meth:`WorkQueue.add_after`) for "look again in N seconds".
- **Rate-limited adds** (:meth:`WorkQueue.add_rate_limited`) after errors: the larger of a
  per-key exponential backoff (``base * 2**failures``, capped) and a global token bucket,
  as client-go's ``DefaultControllerRateLimiter`` (5 ms .. 1000 s, 10 qps, burst 100).
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from . import metrics


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down."""


K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Keys (any hashable: the controller's JobKey) waiting for a worker. All methods must be called from the event loop thread.

    ``base_delay`` and ``max_delay`` (seconds) bound the per-key backoff; ``qps``/``burst``
    the global rate of rate-limited adds.
    """

    def __init__(
        self,
        name: str = "t9k-jobs",
        base_delay: float = 0.005,
        max_delay: float = 300.0,
        qps: float = 10.0,
        burst: int = 100,
    ) -> None:
        self.name = name
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._added_at: dict[K, float] = {}
        self._waiting: list[tuple[float, int, K]] = []
        self._waiting_due: dict[K, float] = {}
        self._seq = 0
        self._failures: dict[K, int] = {}
        self._base, self._max = base_delay, max_delay
        self._qps, self._burst = qps, burst
        self._tokens = float(burst)
        self._tokens_at = time.monotonic()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._shutdown = False
        self._depth = metrics.QUEUE_DEPTH.labels(name=name)
        self._adds = metrics.QUEUE_ADDS.labels(name=name)

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K) -> None:
        """Queue ``key`` unless it is already waiting; a key being processed is re-queued at :meth:`done`."""
        if self._shutdown or key in self._dirty:
            return
        self._adds.inc()
        self._dirty.add(key)
        self._added_at.setdefault(key, time.monotonic())
        if key in self._processing:
            return
        self._queue.append(key)
        self._depth.set(len(self._queue))
        self._notify()

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds (at once when ``delay <= 0``); the earliest due time wins."""
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        due = time.monotonic() + delay
        if self._waiting_due.get(key, float("inf")) <= due:
            return
        self._waiting_due[key] = due
        self._seq += 1
        heapq.heappush(self._waiting, (due, self._seq, key))
        self._arm_timer()

    def add_rate_limited(self, key: K) -> None:
        """Queue ``key`` again after its backoff; every call doubles that key's backoff."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        per_key = min(self._max, self._base * (2**failures))
        metrics.QUEUE_RETRIES.labels(name=self.name).inc()
        self.add_after(key, max(per_key, self._bucket_delay()))

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (call after a successful pass)."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """Wait for a key and mark it as being processed; raises :class:`ShutDown`."""
        while not self._queue and not self._shutdown:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        if self._shutdown:
            raise ShutDown()
        key = self._queue.popleft()
        self._depth.set(len(self._queue))
        self._processing.add(key)
        self._dirty.discard(key)
        added = self._added_at.pop(key, None)
        if added is not None:
            metrics.QUEUE_LATENCY.labels(name=self.name).observe(time.monotonic() - added)
        return key

    def done(self, key: K) -> None:
        """The worker finished ``key``; if it was added meanwhile it goes back in the queue."""
        self._processing.discard(key)
        if key in self._dirty and not self._shutdown:
            self._queue.append(key)
            self._depth.set(len(self._queue))
            self._notify()

    def shut_down(self) -> None:
        """Wake every waiting :meth:`get` with :class:`ShutDown`; later adds are ignored."""
        self._shutdown = True
        if self._timer is not None:
            self._timer.cancel()
        self._notify()

    # ------------------------------------------------------------------ internals

    def _notify(self) -> None:
        """Wake one waiting worker per queued key (all of them at shut-down)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                if not self._shutdown:
                    return

    def _bucket_delay(self) -> float:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._tokens_at) * self._qps)
        self._tokens_at = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self._qps

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._waiting:
            return
        delay = max(0.0, self._waiting[0][0] - time.monotonic())
        self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = time.monotonic()
        while self._waiting and self._waiting[0][0] <= now:
            due, _, key = heapq.heappop(self._waiting)
            if self._waiting_due.get(key) == due:
                del self._waiting_due[key]
                self.add(key)
        self._arm_timer()
