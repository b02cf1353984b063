"""ratelimit.aio decisions on the asynchronous core (rl_submit + a completion
queue watched by the event loop): exactness with thousands in flight, the
same results and errors as the blocking client, cancellation, closing with
requests in flight, Redis down, a loop that never blocks; with asyncio's
loop and with uvloop when it is installed. No timing assertions of speed."""
import asyncio
import contextlib
import gc
import multiprocessing
import threading

import pytest

import ratelimit
from ratelimit import _ratelimit, aio

from aioloops import LOOPS, run, uvloop, watchers
from posixonly import needs_fork

NOW = 1_700_000_000.0  # an explicit clock: every decision at a known instant


def state_of(client):
    """The running loop's side of client: its completion queue and futures."""
    return client._run.state()


async def settle(st, limit=30.0):
    """Waits until every completion due in st's queue was taken."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while st.queue.pending and loop.time() < deadline:
        await asyncio.sleep(0.01)
    assert st.queue.pending == 0, "completions still due after %s s" % limit


@contextlib.contextmanager
def paused(server):
    """server stopped (SIGSTOP) for the block: sent requests wait unanswered."""
    server.pause()
    try:
        yield
    finally:
        server.resume()


def fields(r):
    return (r.allowed, r.limit, r.remaining, r.retry_after, r.reset_after, r.wait, r.fallback)


# ---- exactness -----------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
@pytest.mark.parametrize("algorithm", ratelimit.ALGORITHMS)
def test_thousands_in_flight_admit_exactly_the_limit(server, raw, algorithm, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url, timeout=10.0) as client:
            lim = client.limiter("crowd-" + algorithm, "1000/hour", algorithm=algorithm)

            async def one(i):
                return await lim.acquire("hot", now=NOW)
            results = await asyncio.gather(*(one(i) for i in range(5000)))
            assert sum(bool(r) for r in results) == 1000
            assert not any(r.fallback for r in results)
            assert (await lim.peek("hot", now=NOW)).remaining == 0
            st = state_of(client)
            assert st.futures == {} and st.queue.pending == 0
    run(main(), loop_kind)


@pytest.mark.parametrize("algorithm", ["gcra", "token_bucket", "sliding_log"])
def test_redis_clock_many_tasks_many_permits(server, raw, algorithm):
    # Redis's own clock; refills far slower than the test runs (1 per 86.4 s)
    async def main():
        async with aio.AsyncClient(server.url, timeout=10.0) as client:
            lim = client.limiter("crowd3-" + algorithm, "1000/day", algorithm=algorithm)

            async def worker(k):
                return [await lim.acquire("hot", 3) for _ in range(50)]
            results = [r for rs in await asyncio.gather(*(worker(k) for k in range(100))) for r in rs]
            assert sum(bool(r) for r in results) == 333  # 999 of 1000 permits, 3 at a time
            assert (await lim.peek("hot")).remaining == 1
    run(main())


# ---- same results as the blocking client ----------------------------------------

def script(lim, algorithm):
    """A fixed sequence of (method, args, kwargs) with an explicit clock."""
    steps = []
    for k in range(12):
        now = NOW + 0.137 * k
        steps.append(("acquire", ("u", 1 + k % 2), {"now": now}))
        steps.append(("peek", ("u",), {"now": now}))
        if algorithm in ("token_bucket", "leaky_bucket", "gcra"):
            steps.append(("reserve", ("v",), {"max_wait": 0.5, "now": now}))
        if k % 4 == 0:
            steps.append(("acquire_many", (["a", ("b", 2), "u"],), {"now": now}))
        if k % 3 == 0:  # ids the core escapes, or hashes (past 256 escaped bytes)
            steps.append(("acquire", ("we{ird}:id%", 1), {"now": now}))
            steps.append(("acquire_many", ([("{x}" * 100, 2), "\u00e9:"],), {"now": now}))
    # refused before anything is sent, with the blocking path's message
    steps += [("acquire", ("u", 0), {"now": NOW}), ("acquire", ("", 1), {"now": NOW}),
              ("acquire", ("u", 10**6), {"now": NOW}), ("peek", ("u",), {"now": -1}),
              ("acquire_many", (["a", ("b", 0)],), {"now": NOW}),
              ("acquire_many", (["a", ""],), {"now": NOW}),
              ("acquire_many", ("ab",), {}), ("acquire", (7,), {})]
    if algorithm not in ("token_bucket", "leaky_bucket", "gcra"):
        steps.append(("reserve", ("v",), {"now": NOW}))
    return steps


def form(value=None, error=None):
    """A comparable form of a call's result, or of its exception."""
    if isinstance(error, ratelimit.RateLimitExceeded):
        return ("exceeded", str(error), fields(error.result))
    if error is not None:
        return ("error", type(error).__name__, str(error), getattr(error, "code", None))
    if isinstance(value, list):
        return [fields(r) for r in value]
    return value if isinstance(value, float) else fields(value)


def outcome(call):
    try:
        return form(call())
    except Exception as e:  # noqa: BLE001  (compared as type and message)
        return form(error=e)


async def async_outcome(coro_fn):
    try:
        return form(await coro_fn())
    except Exception as e:  # noqa: BLE001
        return form(error=e)


@pytest.mark.parametrize("loop_kind", LOOPS)
@pytest.mark.parametrize("algorithm", ratelimit.ALGORITHMS)
def test_same_results_as_the_blocking_client(server, raw, algorithm, loop_kind):
    rate = "5/2s"
    with ratelimit.Client(server.url, prefix="sync") as sync_client:
        lim = sync_client.limiter("same", rate, algorithm=algorithm)
        expected = [outcome(lambda: getattr(lim, m)(*a, **kw)) for m, a, kw in script(lim, algorithm)]

    async def main():
        async with aio.AsyncClient(server.url, prefix="async") as client:
            alim = client.limiter("same", rate, algorithm=algorithm)
            return [await async_outcome(lambda: getattr(alim, m)(*a, **kw)) for m, a, kw in script(alim, algorithm)]
    got = run(main(), loop_kind)
    assert got == expected
    tagged = [o[0] for o in expected if isinstance(o, tuple) and isinstance(o[0], str)]
    assert tagged.count("error") >= 8
    if algorithm in ("token_bucket", "leaky_bucket", "gcra"):
        assert "exceeded" in tagged  # reserve refused past max_wait, as RateLimitExceeded
    assert any(isinstance(o, tuple) and o[0] is False for o in expected)  # some denials


def test_redis_errors_map_as_in_the_blocking_path(server, raw):
    with ratelimit.Client(server.url) as sync_client:
        lim = sync_client.limiter("wrong", "5/s")
        raw.lpush(lim.key("u"), "not a gcra state")
        with pytest.raises(ratelimit.RedisError) as sync_info:
            lim.acquire("u")

    async def main():
        async with aio.AsyncClient(server.url) as client:
            with pytest.raises(ratelimit.RedisError) as info:
                await client.limiter("wrong", "5/s").acquire("u")
            assert info.value.code == _ratelimit.ERR_REDIS == sync_info.value.code
            assert str(info.value) == str(sync_info.value)
            assert await client.limiter("wrong", "5/s").acquire("other")  # the client goes on
    run(main())


# ---- cancellation -----------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_cancellation_mid_flight_leaks_no_future_and_the_client_goes_on(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url, timeout=10.0) as client:
            lim = client.limiter("cancel", "100000/hour", algorithm="token_bucket")
            tasks = [asyncio.ensure_future(lim.acquire("u")) for _ in range(3000)]
            await asyncio.sleep(0)  # every task has submitted its decision
            st = state_of(client)
            for t in tasks[::2]:
                t.cancel()
            done = await asyncio.gather(*tasks, return_exceptions=True)
            cancelled = sum(isinstance(d, asyncio.CancelledError) for d in done)
            allowed = sum(isinstance(d, ratelimit.Result) and bool(d) for d in done)
            assert cancelled + allowed == 3000 and allowed >= 1500
            await settle(st)  # the cancelled ones' completions came and were dropped
            assert st.futures == {}
            # a cancelled decision that already ran stays consumed; none ran twice
            consumed = 100000 - (await lim.peek("u")).remaining
            assert allowed <= consumed <= 3000
            # the client goes on: same queue, same connection
            more = await asyncio.gather(*(lim.acquire("w") for _ in range(500)))
            assert all(more) and st.futures == {} and st.queue.pending == 0
    run(main(), loop_kind)


def test_cancelled_while_redis_is_paused(fresh_server):
    async def main():
        async with aio.AsyncClient(fresh_server.url, timeout=10.0) as client:
            lim = client.limiter("paused", "2000/day", algorithm="gcra")  # its key lives 43 s per permit
            assert await lim.acquire("u", now=NOW)  # the I/O thread's connection is up
            st = state_of(client)
            with paused(fresh_server):
                tasks = [asyncio.ensure_future(lim.acquire("u", now=NOW)) for _ in range(1000)]
                await asyncio.sleep(0.1)
                assert not any(t.done() for t in tasks)
                for t in tasks:
                    t.cancel()
                done = await asyncio.gather(*tasks, return_exceptions=True)
                assert all(isinstance(d, asyncio.CancelledError) for d in done)
                assert st.futures == {}  # dropped at once
                assert st.queue.pending == 1000  # their completions are still due
            await settle(st)
            assert st.futures == {}
            # they were sent before the cancel: Redis ran them (documented)
            assert (await lim.peek("u", now=NOW)).remaining == 2000 - 1001
            assert await lim.acquire("u", now=NOW)
    run(main())


def test_cancel_a_batch(fresh_server):
    async def main():
        async with aio.AsyncClient(fresh_server.url, timeout=10.0) as client:
            lim = client.limiter("batch-cancel", "100/hour")
            assert await lim.acquire_many(["x"])
            st = state_of(client)
            with paused(fresh_server):
                task = asyncio.ensure_future(lim.acquire_many(["a", "b", ("c", 2)]))
                await asyncio.sleep(0.05)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert st.futures == {}
            await settle(st)
            assert [r.remaining for r in await lim.acquire_many(["a", "b", "c"])] == [98, 98, 97]
    run(main())


# ---- closing ------------------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_close_completes_everything_in_flight_with_client_closed(fresh_server, loop_kind):
    async def main():
        client = aio.AsyncClient(fresh_server.url, timeout=10.0)
        lim = client.limiter("closing", "100000/hour")
        assert await lim.acquire("u")
        st = state_of(client)
        with paused(fresh_server):  # nothing can complete but by the close
            tasks = [asyncio.ensure_future(lim.acquire("u")) for _ in range(2000)]
            batch = asyncio.ensure_future(lim.acquire_many(["a", "b"]))
            await asyncio.sleep(0.05)
            await client.close()
            done = await asyncio.gather(*tasks, batch, return_exceptions=True)
        assert all(isinstance(d, ratelimit.ClientClosed) for d in done)
        assert {d.code for d in done} == {_ratelimit.ERR_CLOSED}
        assert st.futures == {} and st.queue.closed and st.queue.freed
        assert client._run.loops == {}
        with pytest.raises(ratelimit.ClientClosed):
            await lim.acquire("u")
        with pytest.raises(ratelimit.ClientClosed):
            await lim.acquire_many(["u"])
    run(main(), loop_kind)


def test_close_while_decisions_run(server, raw):
    async def main():
        client = aio.AsyncClient(server.url)
        lim = client.limiter("closing2", "100000/hour")
        tasks = [asyncio.ensure_future(lim.acquire("u%d" % (i % 10))) for i in range(3000)]
        await asyncio.sleep(0)
        st = state_of(client)
        await client.close()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(d, (ratelimit.Result, ratelimit.ClientClosed)) for d in done)
        assert st.futures == {} and st.queue.freed
    run(main())


def test_close_waits_for_a_blocking_call_in_the_executor(fresh_server):
    # Client.close defers rl_client_close while a blocking call (one without
    # an asynchronous form) runs in the executor: decisions and waits go on
    # meanwhile, and the queue is freed once it returned
    async def main():
        client = aio.AsyncClient(fresh_server.url, timeout=10.0)
        sem = client.semaphore("hold", permits=1, lease=30.0)
        assert await sem.acquire(timeout=1.0)
        lim = client.limiter("deferred", "100000/hour")
        st = state_of(client)
        with paused(fresh_server):
            stored = asyncio.ensure_future(client.get_config("deferred"))  # blocks in a thread
            waiter = asyncio.ensure_future(sem.acquire(timeout=30.0))
            tasks = [asyncio.ensure_future(lim.acquire("u")) for _ in range(100)]
            await asyncio.sleep(0.2)
            await client.close()
            await asyncio.sleep(0.1)
            assert client.closed and not st.queue.freed and not waiter.done()  # deferred
        assert await stored is None  # it returns, then the client closes
        done = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(d, (ratelimit.Result, ratelimit.ClientClosed)) for d in done)
        with pytest.raises(ratelimit.ClientClosed):
            await waiter
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not st.queue.freed and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert st.futures == {} and st.queue.freed
    run(main())


# ---- Redis down ------------------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
@pytest.mark.parametrize("policy, allowed", [("allow", True), ("deny", False)])
def test_redis_down_decided_by_the_policy(dead_port, policy, allowed, loop_kind):
    url = "redis://127.0.0.1:%d/0" % dead_port

    async def main():
        async with aio.AsyncClient(url, on_redis_error=policy, connect_timeout=0.5) as client:
            lim = client.limiter("down", "5/10s", algorithm="gcra")
            results = await asyncio.wait_for(
                asyncio.gather(*(lim.acquire("user-%d" % (i % 7)) for i in range(3000))), 60)
            assert all(r.fallback for r in results)
            assert all(bool(r) is allowed for r in results)
            assert (await lim.peek("x")).fallback
            batch = await asyncio.wait_for(lim.acquire_many(["a", "b", "c"]), 60)
            assert all(r.fallback and bool(r) is allowed for r in batch)
            if allowed:
                assert await lim.reserve("r") == 0.0
            else:
                with pytest.raises(ratelimit.RateLimitExceeded):
                    await lim.reserve("r")
    run(main(), loop_kind)


def test_redis_down_with_raise(start_redis, dead_port):
    async def main():
        s = start_redis(dead_port)
        async with aio.AsyncClient(s.url, reconnect_max=0.05) as client:
            lim = client.limiter("raise", "5/s")
            assert await lim.acquire("u")
            s.stop()
            errors = await asyncio.wait_for(
                asyncio.gather(*(lim.acquire("u") for _ in range(200)), return_exceptions=True), 60)
            assert all(isinstance(e, (ratelimit.ConnectionError, ratelimit.Timeout)) for e in errors)
            # back up on the same port: decisions resume on the same client
            start_redis(dead_port)
            for _ in range(200):
                try:
                    if await lim.acquire("u"):
                        break
                except (ratelimit.ConnectionError, ratelimit.Timeout):
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("decisions did not resume")
    run(main())


def test_paused_redis_times_out_as_the_blocking_path(fresh_server):
    async def main():
        async with aio.AsyncClient(fresh_server.url, timeout=0.3) as client:
            lim = client.limiter("slow", "5/s")
            assert await lim.acquire("u")
            with paused(fresh_server):
                errors = await asyncio.gather(*(lim.acquire("u") for _ in range(50)), return_exceptions=True)
            assert all(isinstance(e, ratelimit.Timeout) for e in errors)
            assert {e.code for e in errors} == {_ratelimit.ERR_TIMEOUT}
    run(main())


@pytest.mark.parametrize("policy", ["raise", "allow"])
def test_a_decision_after_an_idle_pause(server, raw, policy):
    async def main():
        async with aio.AsyncClient(server.url, timeout=0.2, on_redis_error=policy) as client:
            lim = client.limiter("idle-" + policy, "1000/hour")
            assert await lim.acquire("u")
            await asyncio.sleep(0.6)  # the I/O thread's connection idles past 2 x timeout
            r = await lim.acquire("u")
            assert r and not r.fallback
    run(main())


# ---- the loop keeps running ----------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_the_loop_is_never_blocked(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            lim = client.limiter("ticking", "1000000/hour")
            completed = 0
            stop = False
            gaps = []

            async def ticker():
                last = 0
                while not stop:
                    await asyncio.sleep(0)
                    gaps.append(completed - last)
                    last = completed

            async def worker(k):
                nonlocal completed
                for _ in range(200):
                    assert await lim.acquire("u%d" % k)
                    completed += 1
            tick = asyncio.ensure_future(ticker())
            await asyncio.gather(*(worker(k) for k in range(50)))  # 10,000 decisions
            stop = True
            await tick
            assert completed == 10000
            # the ticker ran all along: never more than a few loop iterations'
            # worth of decisions between two of its ticks (a blocked loop
            # would show all 10,000 at once)
            assert len(gaps) > 100 and max(gaps) <= 200
    run(main(), loop_kind)


def test_submitting_never_waits_for_redis(fresh_server):
    async def main():
        async with aio.AsyncClient(fresh_server.url, timeout=0.5) as client:
            lim = client.limiter("nowait", "5/s")
            assert await lim.acquire("u")
            with paused(fresh_server):
                pending = [asyncio.ensure_future(lim.acquire("u")) for _ in range(1000)]
                ticks = 0
                while not all(p.done() for p in pending):
                    await asyncio.sleep(0)
                    ticks += 1
                assert ticks >= 5  # the loop ran while 1,000 decisions waited on a stuck Redis
            assert all(isinstance(p.exception(), ratelimit.Timeout) for p in pending)
    run(main())


# ---- several loops, the queue's lifetime ----------------------------------------------------------

def test_one_client_several_loops(server, raw):
    client = aio.AsyncClient(server.url)
    lim = client.limiter("loops", "100/hour")
    states = []

    async def use():
        rs = await asyncio.gather(*(lim.acquire("u") for _ in range(10)))
        states.append(state_of(client))
        return rs
    assert all(run(use()))
    assert all(run(use()))  # a new loop: its own queue; the closed loop's one is dropped
    assert states[0] is not states[1] and states[0].queue.freed and not states[1].queue.freed
    results = []
    t = threading.Thread(target=lambda: results.extend(run(use())))
    t.start()
    t.join()
    assert all(results)
    assert all(run(use(), "uvloop" if uvloop else "asyncio"))
    assert all(run(use(), "no_add_reader"))

    async def close():
        await client.close()
    run(close())
    assert all(s.queue.freed for s in states) and client.closed


def test_a_loop_without_add_reader_leaves_no_thread(server, raw):
    # Windows' ProactorEventLoop: a thread selects on the loop's queue, and
    # ends with the loop's side of the client
    before = len(watchers())
    client = aio.AsyncClient(server.url)
    lim = client.limiter("watched", "150/hour")

    async def use():
        rs = await asyncio.gather(*(lim.acquire("u") for _ in range(100)))
        assert state_of(client).watcher is not None
        return sum(map(bool, rs))
    assert run(use(), "no_add_reader") == 100
    assert len(watchers()) == before + 1
    # a new loop: the closed loop's side is torn down at its first call
    assert run(use(), "no_add_reader") == 50
    assert len(watchers()) == before + 1

    async def close():
        await client.close()
    run(close(), "no_add_reader")
    assert len(watchers()) == before


def _forked_child(client, out):
    async def use():
        lim = client.limiter("forked", "150/day")
        return sum(map(bool, await asyncio.gather(*(lim.acquire("hot") for _ in range(100)))))
    out.put(asyncio.run(asyncio.wait_for(use(), 30)))


@needs_fork
def test_forked_children_use_the_parents_client(server, raw):
    # the parent used it on a loop of its own (I/O thread, queue) before the
    # fork: each child gets an I/O thread and, on its new loop, a queue
    client = aio.AsyncClient(server.url)

    async def warm():
        assert await client.limiter("forked", "150/day").acquire("hot")
    run(warm())
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_forked_child, args=(client, out)) for _ in range(3)]
    for p in procs:
        p.start()
    admitted = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sum(admitted) == 149  # 150 a day, one taken by the parent
    run(client.close())


def test_queue_outlives_the_client_posting_to_it(fresh_server):
    # low level: a queue closed (or dropped) while a client's requests are in
    # flight is freed only once that client cannot post to it any more
    client = ratelimit.Client(fresh_server.url, timeout=10.0)
    lim = client.limiter("lifetime", "100/hour")
    q = _ratelimit.Completions()
    q.submit(1, lim, "u", 1, 0, None, None)
    while not q.take():
        pass
    with paused(fresh_server):
        for tag in range(100):
            q.submit(tag, lim, "u", 1, 0, None, None)
        q.close()
        assert q.closed and not q.freed  # the client still holds it
        with pytest.raises(ratelimit.ClientClosed):
            q.submit(5, lim, "u", 1, 0, None, None)
        other = _ratelimit.Completions()
        del other
        gc.collect()
        client.close()  # completes the 100 into it, then lets it go
        assert q.freed and q.take() == []

    client = ratelimit.Client(fresh_server.url, timeout=10.0)
    lim = client.limiter("lifetime", "100/hour")
    q = _ratelimit.Completions()
    for tag in range(100):
        q.submit(tag, lim, "u", 1, 0, None, None)
    del q  # dropped with requests in flight: the client keeps it alive
    gc.collect()
    client.close()
    gc.collect()


def test_completions_low_level(server, raw):
    client = ratelimit.Client(server.url)
    lim = client.limiter("low", "3/hour", algorithm="token_bucket")
    q = _ratelimit.Completions()
    assert q.fileno() >= 0 and q.take() == [] and q.pending == 0
    for tag in (7, 8, 2**64 - 1, 9):
        q.submit(tag, lim, "u", 1, 0, None, None)
    q.submit(10, lim, "u", 1, 1, None, None)  # peek
    got = []
    while len(got) < 5:
        got += q.take(2)
    assert [t for t, _, _ in got] == [7, 8, 2**64 - 1, 9, 10]  # one connection: in order
    assert [bool(r) for _, _, r in got] == [True, True, True, False, False]
    assert {s for _, s, _ in got} == {0} and q.pending == 0
    with pytest.raises(ratelimit.InvalidArgument, match="permits"):
        q.submit(1, lim, "u", 0, 0, None, None)
    with pytest.raises(ratelimit.InvalidArgument, match="operation"):
        q.submit(1, lim, "u", 1, 5, None, None)  # 3 and 4: acquire_at_most, refund
    fw = client.limiter("low-fw", "3/hour", algorithm="fixed_window")
    with pytest.raises(ratelimit.InvalidArgument, match="reserve needs"):
        q.submit(1, fw, "u", 1, 2, None, None)
    with pytest.raises(TypeError):
        q.submit(1, "not a limiter", "u", 1, 0, None, None)
    with pytest.raises(OverflowError):
        q.submit(-1, lim, "u", 1, 0, None, None)
    assert q.submit_many(100, lim, [], None) == 0
    with pytest.raises(ratelimit.InvalidArgument, match="request 1"):
        q.submit_many(100, lim, ["a", ("b", 4)], None)
    assert q.pending == 0 and q.take() == []
    client.close()
    with pytest.raises(ratelimit.ClientClosed):
        q.submit(1, lim, "u", 1, 0, None, None)
    q.close()
    assert q.freed


def test_aio_reachable_after_a_bare_import():
    import subprocess
    import sys
    code = "import ratelimit; print(ratelimit.aio.AsyncClient.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "AsyncClient"
