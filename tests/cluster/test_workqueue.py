"""The work queue's guarantees: de-duplication, one worker per key, delays, backoff."""

from __future__ import annotations

import asyncio

import pytest

from t9k_jobs.cluster.expectations import Expectations
from t9k_jobs.cluster.workqueue import ShutDown, WorkQueue


def run(coro):
    return asyncio.run(coro)


def test_a_key_added_many_times_is_processed_once():
    async def go():
        q = WorkQueue()
        for _ in range(5):
            q.add("a")
        q.add("b")
        assert len(q) == 2
        assert await q.get() == "a"
        assert await q.get() == "b"
        assert len(q) == 0

    run(go())


def test_a_key_added_while_processing_comes_back_only_after_done():
    async def go():
        q = WorkQueue()
        q.add("a")
        key = await q.get()
        q.add("a")  # an event arrives while a worker holds "a"
        assert len(q) == 0, "a second worker must not get a key that is being processed"
        waiter = asyncio.create_task(q.get())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        q.done(key)
        assert await asyncio.wait_for(waiter, 1) == "a"

    run(go())


def test_two_workers_never_hold_the_same_key():
    async def go():
        q = WorkQueue()
        held: set[str] = set()
        overlaps = []

        async def worker():
            while True:
                try:
                    key = await q.get()
                except ShutDown:
                    return
                if key in held:
                    overlaps.append(key)
                held.add(key)
                await asyncio.sleep(0.001)
                held.discard(key)
                q.done(key)

        workers = [asyncio.create_task(worker()) for _ in range(4)]
        for i in range(300):
            q.add(f"k{i % 3}")
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        q.shut_down()
        await asyncio.gather(*workers)
        assert overlaps == []

    run(go())


def test_add_after_keeps_the_earliest_due_time():
    async def go():
        q = WorkQueue()
        q.add_after("a", 5.0)
        q.add_after("a", 0.02)
        q.add_after("a", 10.0)
        assert len(q) == 0
        assert await asyncio.wait_for(q.get(), 1) == "a"

    run(go())


def test_rate_limited_adds_back_off_exponentially_and_forget_resets():
    async def go():
        q = WorkQueue(base_delay=0.01, max_delay=0.04)
        loop = asyncio.get_running_loop()
        delays = []
        for _ in range(4):
            start = loop.time()
            q.add_rate_limited("a")
            key = await asyncio.wait_for(q.get(), 1)
            delays.append(loop.time() - start)
            q.done(key)
        assert q.failures("a") == 4
        assert delays[0] >= 0.009 and delays[1] >= 0.019 and delays[2] >= 0.039
        assert delays[3] < 0.2, "the backoff is capped at max_delay"
        q.forget("a")
        assert q.failures("a") == 0

    run(go())


def test_global_bucket_spaces_rate_limited_adds_of_many_keys():
    async def go():
        q = WorkQueue(base_delay=0.0, qps=100.0, burst=2)
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(6):
            q.add_rate_limited(f"k{i}")
        for _ in range(6):
            q.done(await asyncio.wait_for(q.get(), 1))
        # 2 at once (burst), then 4 more at 100/s
        assert loop.time() - start >= 0.035

    run(go())


def test_shut_down_wakes_waiting_workers():
    async def go():
        q = WorkQueue()
        waiters = [asyncio.create_task(q.get()) for _ in range(3)]
        await asyncio.sleep(0.01)
        q.shut_down()
        for w in waiters:
            with pytest.raises(ShutDown):
                await w

    run(go())


def test_expectations_wait_for_every_named_child():
    e = Expectations(ttl=60)
    assert e.satisfied("j")
    e.expect("j", creates={"Pod/a", "Pod/b"}, deletes={"Pod/c"})
    assert not e.satisfied("j")
    e.observed_create("j", "Pod/a")
    e.observed_create("j", "Pod/b")
    assert not e.satisfied("j")
    e.observed_delete("j", "Pod/c")
    assert e.satisfied("j")


def test_expectations_expire():
    e = Expectations(ttl=0.0)
    e.expect("j", creates={"Pod/a"})
    import time

    time.sleep(0.001)
    assert e.satisfied("j")
