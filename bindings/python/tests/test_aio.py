"""The asyncio flavour: same results, and the event loop keeps running."""
import asyncio
import time

import pytest

import ratelimit
from ratelimit import aio


def run(coro):
    return asyncio.run(coro)


async def ticker(stop):
    """Counts loop iterations; a blocked loop stops it counting."""
    ticks, worst, last = 0, 0.0, time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        worst, last, ticks = max(worst, now - last), now, ticks + 1
    return ticks, worst


def test_async_limiter(server, raw):
    async def main():
        async with await aio.AsyncClient.connect(server.url) as client:
            lim = client.limiter("aio", "3/minute", algorithm="sliding_window")
            got = [await lim.acquire("u") for _ in range(4)]
            assert [r.allowed for r in got] == [True, True, True, False]
            assert (await lim.peek("other")).remaining == 3
            rs = await lim.acquire_many(["a", ("b", 3)])
            assert [r.remaining for r in rs] == [2, 0]
            await lim.reset("u")
            assert await lim.acquire("u")
            assert lim.key("u") == "rl:{aio:u}:sliding_window"
            g = client.limiter("aio-res", "10/s", algorithm="gcra", burst=1)
            assert await g.reserve("u", max_wait=1.0) == 0.0
            # Redis time: the wait is 0.1 s less what passed since the first booking
            assert 0.08 <= await g.reserve("u", max_wait=1.0) <= 0.1

            @lim.limit(key=lambda user: user)
            async def handler(user):
                return user.upper()
            assert await handler("zed") == "ZED"
            for _ in range(2):
                await handler("zed")
            with pytest.raises(ratelimit.RateLimitExceeded):
                await handler("zed")
        assert client.closed
    run(main())


def test_async_blocking_paths_do_not_block_the_loop(server, raw):
    async def main():
        client = aio.AsyncClient(server.url)
        stop = asyncio.Event()
        tick = asyncio.ensure_future(ticker(stop))
        # each wait below would stall a loop it blocked for >= 1 s
        lim = client.limiter("aio-wait", "1/s", algorithm="gcra", burst=1)
        await lim.acquire("u")
        start = time.monotonic()
        r = await lim.acquire("u", timeout=2.0)  # ~1 s of sleeping on the loop
        assert r and time.monotonic() - start >= 0.8

        sem = client.semaphore("aio-sem", permits=1, lease=10.0)
        async with sem.acquire(timeout=1.0) as permit:
            assert permit.fencing_token > 0 and await sem.holders() == 1
            with pytest.raises(ratelimit.AcquireTimeout):
                await sem.acquire(timeout=1.0)
            assert await sem.try_acquire() is None
            assert await permit.refresh(5.0)
        assert await sem.available() == 1

        lock = client.lock("aio-lock", lease=10.0)
        async with lock.acquire(timeout=1.0) as held:
            assert await held.extend() and await lock.try_acquire() is None
        held2 = await lock.acquire(timeout=1.0)
        assert held2.fencing_token > held.fencing_token
        assert await held2.release()

        q = client.delay_queue("aio-q")
        pop = asyncio.ensure_future(q.pop(max=5, timeout=3.0))
        await asyncio.sleep(0.2)
        assert await q.push("m1", delay=0.1) and await q.size() == 1
        assert await pop == ["m1"]
        assert await q.pop_ready() == [] and not await q.remove("m1")

        stop.set()
        ticks, worst = await tick
        # a machine's stall may hold the loop for a while, none of the waits
        assert worst < 0.8 and ticks > 20
        await client.close()
    run(main())


def test_async_cancellation_stops_the_wait(server, raw):
    async def main():
        # a loaded machine may take over the default second to answer a command
        client = await aio.AsyncClient.connect(server.url, timeout=10.0)
        sem = client.semaphore("aio-cancel", permits=1, lease=10.0)
        held = await sem.acquire(timeout=1.0)
        task = asyncio.ensure_future(sem.acquire(timeout=20.0))
        await asyncio.sleep(0.2)
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # before the holder's lease (10 s) or the wait's timeout (20 s) could end it
        assert time.monotonic() - start < 10.0
        await held.release()
        assert await sem.available() == 1  # nothing left acquired by the cancelled waiter
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.delay_queue("aio-cancel").pop(timeout=20.0), 0.2)
        await client.close()
    run(main())


def test_async_many_tasks_never_over_admit(server, raw):
    async def main():
        async with await aio.AsyncClient.connect(server.url, pool_size=4) as client:
            lim = client.limiter("aio-crowd", "50/hour", algorithm="token_bucket")
            results = await asyncio.gather(*(lim.acquire("hot") for _ in range(200)))
            assert sum(bool(r) for r in results) == 50
    run(main())


def test_async_timed_acquire_follows_the_stored_spec(server, raw):
    # issue 41: a stored spec lowered by another client mid-wait holds the
    # waiters to the new rate, as it does the blocking timed acquire, not to
    # the rate they were submitted with (which admitted 19 of them)
    async def main():
        admin = ratelimit.Client(server.url)
        try:
            admin.configure("aio-stored", "5/s", algorithm="gcra")
            async with await aio.AsyncClient.connect(server.url, config_refresh=0.1) as client:
                lim = client.limiter("aio-stored")
                assert all([await lim.acquire("u") for _ in range(5)])
                waiters = [asyncio.ensure_future(lim.acquire("u", timeout=6)) for _ in range(20)]
                await asyncio.sleep(0.05)  # submitted; their next tries are 200 ms away
                admin.configure("aio-stored", "1/minute", algorithm="gcra")
                start = time.monotonic()
                results = await asyncio.gather(*waiters)
                # the TAT the old rate left lets one through under the new one
                assert sum(bool(r) for r in results) <= 1
                # the others gave up once the new rate put their next chance past the timeout
                assert time.monotonic() - start < 3
        finally:
            admin.close()
    run(main())


def test_async_errors(server, raw):
    async def main():
        with pytest.raises(ratelimit.ConnectionError):
            await aio.AsyncClient.connect("redis://127.0.0.1:1")
        async with await aio.AsyncClient.connect(server.url) as client:
            with pytest.raises(ratelimit.InvalidArgument, match="permits"):
                await client.limiter("e", "1/s").acquire("u", 0)
        assert raw.dbsize() == 0
    run(main())


def test_async_acquire_many_reports_each_outcome(server, raw):
    # as Limiter.acquire_many: victim's key holds another type, Redis refuses
    # that request alone, and the others' decisions (consumed) are reported
    async def main():
        async with await aio.AsyncClient.connect(server.url) as client:
            lim = client.limiter("aeach", "5/minute", algorithm="fixed_window")
            raw.lpush(lim.sync.key("victim"), "x")
            alice, victim, carol = await lim.acquire_many([("alice", 2), "victim", ("carol", 5)],
                                                          return_exceptions=True)
            assert isinstance(alice, ratelimit.Result) and alice.allowed and alice.remaining == 3
            assert isinstance(victim, ratelimit.RedisError) and "WRONGTYPE" in str(victim)
            assert isinstance(carol, ratelimit.Result) and carol.allowed and carol.remaining == 0
            with pytest.raises(ratelimit.RedisError) as raised:
                await lim.acquire_many([("alice", 2), "victim", ("carol", 5)])
            assert str(raised.value).startswith("request 1: ") and "WRONGTYPE" in str(raised.value)
            assert raised.value.code == ratelimit.RedisError.code
            alice, victim, carol = raised.value.results
            assert alice.allowed and alice.remaining == 1 and isinstance(victim, ratelimit.RedisError)
            assert not carol.allowed
            assert int(raw.hget(lim.sync.key("alice"), "count")) == 4
            # an invalid request: raised whatever was asked, nothing queued
            with pytest.raises(ratelimit.InvalidArgument, match="request 1"):
                await lim.acquire_many(["erin", ("frank", 0)], return_exceptions=True)
            assert not raw.exists(lim.sync.key("erin"))
            raw.delete(lim.sync.key("victim"))
            rs = await lim.acquire_many(["victim", "erin"])
            assert [(r.allowed, r.remaining) for r in rs] == [(True, 4), (True, 4)]
    run(main())
