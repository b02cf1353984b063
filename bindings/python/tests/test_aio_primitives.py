"""ratelimit.aio's semaphore, lock and delay queue on the asynchronous core
(rl_submit_semaphore_acquire, rl_submit_queue_pop... + rl_cancel): no thread
per call or wait, woken by a release or push (pub/sub, not polling), and a
cancelled acquire or pop leaves nothing behind: no permit, no place in the
semaphore's queue, no lost message. With asyncio's loop and with uvloop.
Redis's own view is read with a raw redis client."""
import asyncio
import random
import threading
import time

import pytest

import ratelimit
from ratelimit import _ratelimit, aio

from aioloops import LOOPS, run, takes_reader, watchers
from posixonly import needs_fork

# A waiter that stopped checking in drops out of the semaphore's queue after
# 3 s (RL_WAITER_TTL_MS): anything gone well before that left actively.
LEFT_WITHIN = 1.0


def queued(raw, name, kind="semaphore"):
    """Waiters in the semaphore's (kind "lock": the lock's) FIFO queue, as Redis holds it."""
    return raw.zcard("rl:{%s}:%s:queue" % (name, kind))


async def until(predicate, limit):
    """Seconds until predicate() held (polled every 5 ms); fails after limit."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not predicate():
        if loop.time() - start > limit:
            pytest.fail("not within %s s" % limit)
        await asyncio.sleep(0.005)
    return loop.time() - start


async def settled(client):
    """Waits until every completion of this loop's calls came (cancelled ones
    too, and what they gave back was submitted)."""
    st = client._run.state()
    await until(lambda: not st.futures and not st.queue.pending, 10)
    return st


# ---- exclusion and service ---------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_many_tasks_on_one_semaphore_never_exceed_its_permits_and_all_are_served(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url, timeout=5.0) as client:
            sem = client.semaphore("crowd", permits=5, lease=30.0)
            inside = most = served = 0
            fences = []

            async def worker():
                nonlocal inside, most, served
                async with sem.acquire(timeout=60.0) as permit:
                    inside += 1
                    most = max(most, inside)
                    fences.append(permit.fencing_token)
                    await asyncio.sleep(0.002)
                    inside -= 1
                    served += 1
            await asyncio.gather(*(worker() for _ in range(300)))
            assert served == 300 and most == 5  # all served, never more than 5 at once, and 5 at times
            assert len(set(fences)) == 300
            assert await sem.holders() == 0 and queued(raw, "crowd") == 0
    run(main(), loop_kind)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_lock_excludes_and_serves_every_task(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            lock = client.lock("crowd-lock", lease=30.0)
            inside, order = 0, []

            async def worker(i):
                nonlocal inside
                async with lock.acquire(timeout=60.0) as held:
                    inside += 1
                    assert inside == 1
                    order.append(held.fencing_token)
                    await asyncio.sleep(0.001)
                    inside -= 1
            await asyncio.gather(*(worker(i) for i in range(100)))
            assert len(order) == 100 and order == sorted(order)  # fencing tokens rise with each holder
            assert await lock.try_acquire() is not None
    run(main(), loop_kind)


def test_waiters_are_served_in_arrival_order(server, raw):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            sem = client.semaphore("fifo", permits=1, lease=30.0)
            held = await sem.acquire(timeout=1.0)
            got = []

            async def waiter(i):
                permit = await sem.acquire(timeout=30.0)
                got.append(i)
                await permit.release()
            tasks = []
            for i in range(10):
                tasks.append(asyncio.ensure_future(waiter(i)))
                await until(lambda: queued(raw, "fifo") == i + 1, 2)
            await held.release()
            await asyncio.gather(*tasks)
            assert got == list(range(10))
    run(main())


# ---- woken, not polling ---------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_waiter_is_woken_by_the_release(server, raw, loop_kind):
    # a waiter checks in with Redis a second after its last try; released
    # 0.3 to 0.6 s after it queued, it is woken by the publish or not before
    # 0.4 s
    async def main():
        async with aio.AsyncClient(server.url) as client:
            sem = client.semaphore("wake", permits=1, lease=30.0)
            lock = client.lock("wake-lock", lease=30.0)
            latencies = []
            for k in range(4):
                for owner in (sem, lock):
                    held = await owner.acquire(timeout=1.0)
                    waiter = asyncio.ensure_future(owner.acquire(timeout=10.0))
                    await asyncio.sleep(0.3 + 0.1 * k)  # queued and subscribed, at different phases
                    assert not waiter.done()
                    released = time.monotonic()
                    assert await held.release()
                    got = await waiter
                    latencies.append(time.monotonic() - released)
                    assert await got.release()
            assert max(latencies) < 0.3, latencies  # polling would take 0.4 s at least
    run(main(), loop_kind)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_a_pop_is_woken_by_the_push(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            q = client.delay_queue("wake-q")
            latencies = []
            for k in range(4):
                pop = asyncio.ensure_future(q.pop(max=5, timeout=10.0))
                await asyncio.sleep(0.3 + 0.1 * k)
                assert not pop.done()
                pushed = time.monotonic()
                assert await q.push("m%d" % k)
                assert await pop == ["m%d" % k]
                latencies.append(time.monotonic() - pushed)
            assert max(latencies) < 0.3, latencies  # polling would take 0.4 s at least
            # a message due later wakes the pop when it is due
            pop = asyncio.ensure_future(q.pop(timeout=5.0))
            await asyncio.sleep(0.1)
            pushed = time.monotonic()
            assert await q.push(b"later", delay=0.4)
            assert await pop == ["later"]
            assert 0.35 <= time.monotonic() - pushed < 0.7
    run(main(), loop_kind)


# ---- timeouts -------------------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_timeouts(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            sem = client.semaphore("busy", permits=1, lease=30.0)
            lock = client.lock("busy-lock", lease=30.0)
            held, held_lock = await sem.acquire(timeout=1.0), await lock.acquire(timeout=1.0)
            for owner, name, kind, text in ((sem, "busy", "semaphore", "no permit within 0.3 s"),
                                            (lock, "busy-lock", "lock", "not acquired within 0.3 s")):
                start = time.monotonic()
                with pytest.raises(ratelimit.AcquireTimeout, match=text):
                    await owner.acquire(timeout=0.3)
                assert 0.3 <= time.monotonic() - start < 1.0
                assert await owner.try_acquire() is None
                await until(lambda: queued(raw, name, kind) == 0, LEFT_WITHIN)  # the waiter left
            assert await sem.holders() == 1
            q = client.delay_queue("busy-q")
            start = time.monotonic()
            assert await q.pop(timeout=0.3) == [] and await q.pop_ready() == []
            assert 0.3 <= time.monotonic() - start < 1.0
            await held.release()
            await held_lock.release()
    run(main(), loop_kind)


# ---- cancellation -------------------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_cancelled_acquires_leave_no_holder_and_no_waiter(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            sem = client.semaphore("cancel", permits=2, lease=30.0)
            held = [await sem.acquire(timeout=1.0) for _ in range(2)]
            waiters = [asyncio.ensure_future(sem.acquire(timeout=30.0)) for _ in range(50)]
            await until(lambda: queued(raw, "cancel") == 50, 2)
            for w in waiters:
                w.cancel()
            done = await asyncio.gather(*waiters, return_exceptions=True)
            assert all(isinstance(d, asyncio.CancelledError) for d in done)
            await until(lambda: queued(raw, "cancel") == 0, LEFT_WITHIN)
            await settled(client)
            for p in held:
                await p.release()
            assert await sem.available() == 2 and await sem.holders() == 0
            # and wait_for's timeout, and asyncio.timeout where there is one
            held = await sem.acquire(timeout=1.0), await sem.acquire(timeout=1.0)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(sem.acquire(timeout=30.0), 0.2)
            if hasattr(asyncio, "timeout"):
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await sem.acquire()
            await until(lambda: queued(raw, "cancel") == 0, LEFT_WITHIN)
            await settled(client)
            for p in held:
                await p.release()
            assert await sem.holders() == 0
    run(main(), loop_kind)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_cancelled_as_the_permit_is_granted(server, raw, loop_kind):
    # the release and the cancel race: the core may have granted the permit
    # (it gives it back), the completion may be on its way (drain gives it
    # back), or the task may already hold the result (the task gives it back)
    async def main():
        async with aio.AsyncClient(server.url) as client:
            sem = client.semaphore("race", permits=1, lease=30.0)
            lock = client.lock("race-lock", lease=30.0)
            outcomes = set()
            for k in range(40):
                owner, name, kind = (sem, "race", "semaphore") if k % 2 else (lock, "race-lock", "lock")
                held = await owner.acquire(timeout=1.0)
                waiter = asyncio.ensure_future(owner.acquire(timeout=30.0))
                await until(lambda: queued(raw, name, kind) == 1, 2)
                release = asyncio.ensure_future(held.release())
                for _ in range(k % 5):
                    await asyncio.sleep(0)
                waiter.cancel()
                await release
                try:
                    got = await waiter
                    outcomes.add("won")
                    await got.release()
                except asyncio.CancelledError:
                    outcomes.add("cancelled")
                await settled(client)
                await until(lambda: queued(raw, name, kind) == 0, LEFT_WITHIN)
                # nothing held: the next acquire succeeds at once
                again = await owner.try_acquire()
                assert again is not None, "round %d: a cancelled waiter kept the permit" % k
                await again.release()
            assert "cancelled" in outcomes
    run(main(), loop_kind)


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_cancelled_after_the_grant_reached_the_future(server, raw, loop_kind):
    # the completion resolved the wait's future, and the task is cancelled
    # before it resumed: the task raises CancelledError and gives the permit
    # (or the messages) back itself
    if not takes_reader(loop_kind):
        pytest.skip("takes the loop's reader away: loops with add_reader only")

    async def main():
        async with aio.AsyncClient(server.url) as client:
            loop = asyncio.get_running_loop()
            sem = client.semaphore("late", permits=1, lease=30.0)
            q = client.delay_queue("late-q")
            st = client._run.state()
            for what in ("permit", "messages"):
                if what == "permit":
                    held = client.sync.semaphore("late", 1, 30.0).acquire(timeout=1.0)
                    waiter = asyncio.ensure_future(sem.acquire(timeout=10.0))
                    await until(lambda: queued(raw, "late") == 1, 2)
                else:
                    waiter = asyncio.ensure_future(q.pop(max=5, timeout=10.0))
                    await asyncio.sleep(0.2)
                loop.remove_reader(st.fd)  # completions now wait until drained below
                try:
                    if what == "permit":
                        assert held.release()
                    else:
                        assert client.sync.delay_queue("late-q").push("m1")
                    await until(lambda: _readable(st.fd), 5)
                    st.drain()  # the future has its value; the task resumes later
                    assert not waiter.done()
                    waiter.cancel()
                finally:
                    loop.add_reader(st.fd, st.drain)
                with pytest.raises(asyncio.CancelledError):
                    await waiter
                await settled(client)
            again = await sem.try_acquire()
            assert again is not None and await sem.holders() == 1  # the permit went back
            await again.release()
            await asyncio.sleep(0.002)  # due times are ms: a tie sorts by name, 'end' before 'm1'
            assert await q.push("end")
            assert await q.pop_ready(max=10) == ["m1", "end"]  # the message went back, due at once
    run(main(), loop_kind)


def _readable(fd):
    import select
    return bool(select.select([fd], [], [], 0)[0])


def test_a_cancel_right_after_the_submit_reaches_the_wait(server, raw):
    # Low level, through the loop state as the waits use it: each wait is
    # cancelled right after it was submitted. The core may drop such a
    # cancel (see _RECANCEL_FIRST): asked again, every wait stops long
    # before its 5 s end, and none keeps a place in the queue.
    async def main():
        async with aio.AsyncClient(server.url) as client:
            sem = client.semaphore("instant", permits=1, lease=30.0)
            held = await sem.acquire(timeout=1.0)
            st = client._run.state()
            start = time.monotonic()
            for _ in range(2000):
                tag, future = st.start(_ratelimit.Completions.submit_acquire, "instant", 1, 30.0, 5.0)
                future.cancel()
                st.cancel(tag)
            await until(lambda: not st.futures, 10)
            assert time.monotonic() - start < 3.0
            await until(lambda: queued(raw, "instant") == 0, LEFT_WITHIN)
            assert await sem.holders() == 1
            await held.release()
    run(main())


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_cancelled_pops_lose_no_message(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            q = client.delay_queue("no-loss")
            sent = ["m%d" % i for i in range(300)]
            received = []
            rng = random.Random(7)

            async def consumer():
                while True:
                    received.extend(await q.pop(max=rng.randint(1, 3), timeout=30.0))

            consumers = [asyncio.ensure_future(consumer()) for _ in range(20)]
            for i, m in enumerate(sent):
                assert await q.push(m)
                if i % 15 == 0:  # cancel one consumer mid-wait, start another
                    victim = consumers.pop(rng.randrange(len(consumers)))
                    victim.cancel()
                    consumers.append(asyncio.ensure_future(consumer()))
                if i % 7 == 0:
                    await asyncio.sleep(0)
            await asyncio.sleep(0.2)
            for c in consumers:
                c.cancel()
            await asyncio.gather(*consumers, return_exceptions=True)
            await settled(client)
            assert await q.push("end")  # after every push-back on the same connection
            rest = await q.pop_ready(max=1000)
            assert rest[-1:] == ["end"] or "end" in rest
            rest.remove("end")
            assert sorted(received + rest) == sorted(sent)  # each message once: none lost, none twice
            assert len(received) > 100  # the consumers did get most of them
    run(main(), loop_kind)


def test_cancelled_pop_as_messages_arrive(server, raw):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            q = client.delay_queue("pop-race")
            total = 0
            got = []
            for k in range(40):
                pop = asyncio.ensure_future(q.pop(max=10, timeout=30.0))
                await asyncio.sleep(0.01)
                pushes = [asyncio.ensure_future(q.push("k%d-%d" % (k, i))) for i in range(3)]
                total += 3
                for _ in range(k % 4):
                    await asyncio.sleep(0)
                pop.cancel()
                await asyncio.gather(*pushes)
                try:
                    got.extend(await pop)
                except asyncio.CancelledError:
                    pass
            await settled(client)
            assert await q.push("end")
            rest = [m for m in await q.pop_ready(max=1000) if m != "end"]
            assert len(got) + len(rest) == total == len(set(got + rest))
    run(main())


# ---- closing ----------------------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_close_completes_every_wait_with_client_closed(server, raw, loop_kind):
    async def main():
        client = aio.AsyncClient(server.url)
        sem = client.semaphore("closing", permits=1, lease=30.0)
        lock = client.lock("closing-lock", lease=30.0)
        held, held_lock = await sem.acquire(timeout=1.0), await lock.acquire(timeout=1.0)
        waits = [asyncio.ensure_future(sem.acquire()) for _ in range(10)]
        waits += [asyncio.ensure_future(lock.acquire(timeout=30.0)) for _ in range(5)]
        waits += [asyncio.ensure_future(client.delay_queue("closing-q").pop(timeout=None)) for _ in range(5)]
        await until(lambda: queued(raw, "closing") == 10, 2)
        st = client._run.state()
        await client.close()
        done = await asyncio.wait_for(asyncio.gather(*waits, return_exceptions=True), 5)
        assert all(isinstance(d, ratelimit.ClientClosed) for d in done), done
        assert {d.code for d in done} == {_ratelimit.ERR_CLOSED}
        assert st.futures == {} and st.queue.freed
        for call in (held.release, held_lock.extend, lambda: sem.acquire(timeout=1.0), sem.try_acquire,
                     lambda: client.delay_queue("closing-q").push("x")):
            with pytest.raises(ratelimit.ClientClosed):
                await call()
    run(main(), loop_kind)


# ---- no thread per call -------------------------------------------------------------------

@pytest.mark.parametrize("loop_kind", LOOPS)
def test_no_thread_per_call_or_wait(server, raw, loop_kind):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            sem = client.semaphore("threads", permits=1, lease=30.0)
            held = await sem.acquire(timeout=1.0)
            q = client.delay_queue("threads-q")
            before = threading.active_count()
            waits = [asyncio.ensure_future(sem.acquire(timeout=30.0)) for _ in range(400)]
            waits += [asyncio.ensure_future(q.pop(timeout=30.0)) for _ in range(100)]
            counts = []
            for _ in range(20):
                await asyncio.sleep(0.01)
                counts.append(threading.active_count())
            assert queued(raw, "threads") == 400 and not any(w.done() for w in waits)
            pushes = await asyncio.gather(*(q.push("m%d" % i) for i in range(100)))
            popped = await asyncio.gather(*waits[400:])
            counts.append(threading.active_count())
            assert all(pushes) and sorted(m for p in popped for m in p) == sorted("m%d" % i for i in range(100))
            for w in waits[:400]:
                w.cancel()
            await asyncio.gather(*waits[:400], return_exceptions=True)
            await held.release()
            counts.append(threading.active_count())
            assert set(counts) == {before}
    run(main(), loop_kind)


# ---- the same results and errors as the blocking client ------------------------------------

def test_same_values_and_errors_as_the_blocking_client(server, raw):
    bad = [("semaphore", ("s", 0, 1.0)), ("semaphore", ("s", 2, -1.0)), ("semaphore", ("", 2, 1.0)),
           ("semaphore", ("s", 2, "x")), ("lock", ("l", 0)), ("lock", ("l\0", 1.0))]

    def outcome(call):
        try:
            value = call()
        except Exception as e:  # noqa: BLE001  (compared as type and message)
            return type(e).__name__, str(e)
        return "value", value

    async def async_outcome(call):
        try:
            value = await call()
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e)
        return "value", value

    def calls(client):
        out = []
        for kind, args in bad:
            owner = getattr(client, kind)
            out.append(lambda o=owner, a=args: o(*a).acquire(timeout=1.0))
            out.append(lambda o=owner, a=args: o(*a).try_acquire())
        sem = client.semaphore("s", 1, 1.0)
        out.append(lambda: sem.acquire(timeout=-1))
        out.append(lambda: sem.acquire(timeout=float("inf")))
        q = client.delay_queue("q")
        out += [lambda: q.pop(max=0, timeout=0.1), lambda: q.pop_ready(max=10001), lambda: q.push("", 0.0),
                lambda: q.push("m", -1.0), lambda: q.push(7, 0.0), lambda: q.pop(timeout="x"),
                lambda: client.delay_queue("").pop_ready()]
        return out

    with ratelimit.Client(server.url) as sync_client:
        expected = [outcome(c) for c in calls(sync_client)]

    async def main():
        async with aio.AsyncClient(server.url) as client:
            got = [await async_outcome(c) for c in calls(client)]
            # a permit's and a held lock's calls return what the blocking ones do
            sem, lock = client.semaphore("same", 1, 5.0), client.lock("same-lock", 5.0)
            permit, held = await sem.acquire(timeout=1.0), await lock.acquire(timeout=1.0)
            assert isinstance(permit.sync, ratelimit.Permit) and isinstance(held.sync, ratelimit.HeldLock)
            assert permit.lease == 5.0 and permit.sync.semaphore is sem.sync and len(permit.id) > 8
            assert await permit.refresh(7.5) is True and permit.lease == 7.5
            assert await held.extend() is True and held.lease == 5.0
            assert await permit.release() is True and await permit.release() is False
            assert await held.release() is True and await held.release() is False
            stale = ratelimit.Permit(sem.sync, "no-such-permit", 1, 5.0)
            assert await aio.AsyncPermit(stale, client._run).refresh() is False
            q = client.delay_queue("same-q", decode=False)
            assert await q.push(b"\xff\x00m") is True and await q.push(b"\xff\x00m") is False
            assert await q.pop_ready() == [b"\xff\x00m"]
            return got
    got = run(main())
    assert got == expected
    assert all(kind != "value" for kind, _ in expected)


def test_limiter_acquire_with_a_timeout_waits_on_the_loop(server, raw):
    async def main():
        async with aio.AsyncClient(server.url) as client:
            lim = client.limiter("patient", "4/s", algorithm="gcra", burst=1)
            assert await lim.acquire("u")
            before = threading.active_count()
            start = time.monotonic()
            results = await asyncio.gather(*(lim.acquire("u", timeout=3.0) for _ in range(3)))
            assert all(results) and 0.7 <= time.monotonic() - start < 2.0  # 250 ms apart
            assert threading.active_count() == before
            denied = await lim.acquire("u", timeout=0.05)  # the next slot is further away
            assert not denied and denied.retry_after > 0.05
            with ratelimit.Client(server.url) as sync_client:
                sync_lim = sync_client.limiter("patient", "4/s", algorithm="gcra", burst=1)
                for kwargs in ({"timeout": -1}, {"timeout": 1.0, "now": 1.0e9}, {"timeout": "x"}):
                    with pytest.raises(Exception) as sync_info:
                        sync_lim.acquire("u", **kwargs)
                    with pytest.raises(type(sync_info.value), match=str(sync_info.value).replace("(", r"\(")
                                       .replace(")", r"\)")):
                        await lim.acquire("u", **kwargs)
    run(main())


def test_a_wait_in_one_loop_is_not_cancelled_from_another(server, raw):
    # one client, two loops in two threads, each with a wait as its first
    # call: their tags differ, so cancelling one leaves the other alone
    client = aio.AsyncClient(server.url)
    sem = client.semaphore("two-loops", permits=1, lease=30.0)
    held = client.sync.semaphore("two-loops", 1, 30.0).acquire(timeout=1.0)
    result = []

    def other_loop():
        async def wait():
            permit = await sem.acquire(timeout=10.0)
            result.append(await permit.release())
        try:
            asyncio.run(wait())
        except BaseException as e:  # noqa: BLE001  (compared below)
            result.append(e)
    t = threading.Thread(target=other_loop)

    async def main():
        t.start()
        await until(lambda: queued(raw, "two-loops") == 1, 5)
        waiter = asyncio.ensure_future(sem.acquire(timeout=10.0))
        await until(lambda: queued(raw, "two-loops") == 2, 5)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await until(lambda: queued(raw, "two-loops") == 1, LEFT_WITHIN)
        assert held.release()
        await until(lambda: result, 5)
        await client.close()
    run(main())
    t.join(10)
    assert result == [True]


def _forked_child(client, out):
    async def use():
        sem = client.semaphore("forked-sem", permits=1, lease=30.0)
        async with sem.acquire(timeout=5.0) as permit:
            holders = await sem.holders()  # in the new loop's default executor
        q = client.delay_queue("forked-q")
        pop = asyncio.ensure_future(q.pop(timeout=5.0))
        await asyncio.sleep(0.1)
        await q.push("from-child")
        limited = await client.limiter("forked-lim", "1/s", algorithm="gcra").acquire("u", timeout=5.0)
        return permit.fencing_token > 0, holders, await pop, bool(limited)
    out.put(asyncio.run(asyncio.wait_for(use(), 30)))


@needs_fork
def test_a_forked_child_waits_too(server, raw):
    # nothing of the parent's executor or threads is needed: the child's
    # waits run on its own I/O thread and its loop's default executor
    import multiprocessing
    client = aio.AsyncClient(server.url)

    async def warm():
        sem = client.semaphore("forked-sem", permits=1, lease=30.0)
        await (await sem.acquire(timeout=1.0)).release()
        assert await sem.holders() == 0
        assert await client.limiter("forked-lim", "1/s", algorithm="gcra").acquire("u")
    run(warm())
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=_forked_child, args=(client, out))
    proc.start()
    assert out.get(timeout=60) == (True, 1, ["from-child"], True)
    proc.join(30)
    assert proc.exitcode == 0
    run(client.close())


def test_completions_primitives_low_level(server, raw):
    client = ratelimit.Client(server.url)
    lim = client.limiter("low-p", "3/hour")
    q = _ratelimit.Completions()
    C = _ratelimit.Completions
    q.submit(1, lim, "u", 1, 0, None, None)
    q.submit_acquire(2, client, "low-sem", 1, 2.5, None)
    q.submit_acquire(3, client, "low-lock", None, 1.0, 0.5)
    q.submit_push(4, client, "low-q", b"a\0b", 0)
    q.submit_pop(5, client, "low-q", 5, 1.0)
    q.submit_acquire(6, client, "low-sem", 1, 2.5, 0)  # busy: None
    got = {}
    while len(got) < 6:
        got.update((t, (s, v)) for t, s, v in q.take())
    assert got[1][0] == 0 and isinstance(got[1][1], ratelimit.Result) and got[1][1].allowed
    status, (permit_id, fence, lease) = got[2]
    assert status == 0 and fence >= 1 and lease == 2.5
    assert got[3][0] == 0 and got[3][1][2] == 1.0
    assert got[4] == (0, True) and got[5] == (0, [b"a\0b"]) and got[6] == (0, None)
    q.submit_held(7, client, 0, "low-sem", permit_id, None)
    q.submit_held(8, client, 0, "low-sem", permit_id, None)
    q.submit_held(9, client, 3, "low-lock", got[3][1][0], 4.0)
    q.submit_pop(10, client, "low-q", 2, 30.0)
    q.cancel(client, 10)
    got = {}
    while len(got) < 4:
        got.update((t, (s, v)) for t, s, v in q.take())
    assert got[7] == (0, True) and got[8] == (0, False) and got[9] == (0, True)
    assert got[10][0] == _ratelimit.ERR_CANCELLED and isinstance(got[10][1], ratelimit.Cancelled)
    assert q.pending == 0
    with pytest.raises(TypeError, match="ratelimit.Client"):
        C.submit_pop(q, 11, "not a client", "low-q", 1, None)
    with pytest.raises(ratelimit.InvalidArgument, match="operation"):
        q.submit_held(11, client, 4, "low-sem", "x", None)
    with pytest.raises(ratelimit.InvalidArgument, match="max"):
        q.submit_pop(11, client, "low-q", 0, None)
    assert q.pending == 0 and q.take() == []
    client.close()
    q.cancel(client, 10)  # a no-op once closed
    with pytest.raises(ratelimit.ClientClosed):
        q.submit_acquire(11, client, "low-sem", 1, 1.0, None)
    assert q.pending == 0
    q.close()
    assert q.freed


@pytest.mark.parametrize("loop_kind", LOOPS)
def test_reset_counts_and_remove_run_on_the_core_without_a_thread(server, raw, loop_kind):
    """reset, available / holders, size / remove: one round trip each on the
    asynchronous core (no executor thread ever starts), the blocking answers."""
    def threads():  # but a loop without add_reader's one watching thread
        return threading.active_count() - len(watchers())

    async def main():
        async with aio.AsyncClient(server.url) as client:
            before = threads()
            lim = client.limiter("rt-reset", "2/minute")
            assert (await lim.acquire("u")).allowed and (await lim.acquire("u")).allowed
            assert not (await lim.acquire("u")).allowed
            await lim.reset("u")
            assert (await lim.acquire("u")).remaining == 1
            sem = client.semaphore("rt-sem", permits=3, lease=30.0)
            held = await sem.acquire(timeout=1.0)
            assert (await sem.holders(), await sem.available()) == (1, 2)
            assert (client.sync.semaphore("rt-sem", 3, 30.0).holders(),
                    client.sync.semaphore("rt-sem", 3, 30.0).available()) == (1, 2)
            await held.release()
            assert (await sem.holders(), await sem.available()) == (0, 3)
            q = client.delay_queue("rt-q")
            assert await q.push("a") and await q.push("b", delay=60.0)
            assert await q.size() == 2
            assert await q.remove("b") is True and await q.remove("b") is False
            assert await q.size() == 1 == raw.zcard("rl:{rt-q}:delay_queue")
            with pytest.raises(ratelimit.InvalidArgument):
                await q.remove("")
            assert threads() == before
    run(main(), loop_kind)
