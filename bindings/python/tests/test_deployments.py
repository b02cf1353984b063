"""Sentinel and Cluster URLs against real deployments: limits hold exactly,
semaphores and locks work, many threads share one key exactly."""
import asyncio
import re
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

import ratelimit
from ratelimit import aio


def name(what):
    return "%s-%s" % (what, uuid.uuid4().hex[:12])


@pytest.fixture
def client(topology_url):
    c = ratelimit.Client(topology_url, timeout=2.0)
    yield c
    c.close()


@pytest.mark.parametrize("algorithm", ["fixed_window", "gcra", "sliding_log", "token_bucket"])
def test_admits_exactly_the_limit(client, algorithm):
    lim = client.limiter(name(algorithm), "5/10s", algorithm=algorithm)
    ids = ["user-%d" % i for i in range(12)]  # spread over many cluster slots
    for ident in ids:
        results = [lim.acquire(ident) for _ in range(8)]
        assert [bool(r) for r in results] == [True] * 5 + [False] * 3, (ident, results)
        assert not any(r.fallback for r in results)
        assert results[-1].retry_after > 0
        assert lim.peek(ident).remaining == 0


def test_batch_over_many_slots(client):
    lim = client.limiter(name("batch"), "5/10s", algorithm="fixed_window")
    ids = ["id-%d" % i for i in range(20)]
    first = lim.acquire_many([(i, 3) for i in ids])
    assert all(first) and [r.remaining for r in first] == [2] * 20
    second = lim.acquire_many([(i, 3) for i in ids] + [(i, 2) for i in ids])
    assert [bool(r) for r in second] == [False] * 20 + [True] * 20
    lim.reset(ids[0])
    assert lim.peek(ids[0]).remaining == 5


def test_semaphore(client):
    sem = client.semaphore(name("sem"), permits=2, lease=10.0)
    a = sem.acquire(timeout=2.0)
    b = sem.try_acquire()
    assert b is not None and sem.try_acquire() is None
    assert sem.holders() == 2 and sem.available() == 0
    assert b.fencing_token > a.fencing_token
    assert a.refresh(5.0)
    assert a.release() and not a.release()
    with sem.acquire(timeout=2.0) as c:
        assert sem.available() == 0 and c.fencing_token > b.fencing_token
    assert b.release()
    assert sem.holders() == 0 and sem.available() == 2


def test_lock(client):
    lock = client.lock(name("lock"), lease=10.0)
    with lock.acquire(timeout=2.0) as held:
        assert lock.try_acquire() is None
        assert held.extend(5.0)
        first = held.fencing_token
    with lock.acquire(timeout=2.0) as again:
        assert again.fencing_token > first
    assert lock.try_acquire().release()


def test_lock_waiter_gets_it_on_release(client):
    lock = client.lock(name("lockwait"), lease=10.0)
    held = lock.acquire(timeout=2.0)
    got = []
    t = threading.Thread(target=lambda: got.append(lock.acquire(timeout=5.0)))
    t.start()
    held.release()
    t.join(10)
    assert got and got[0].fencing_token > held.fencing_token
    got[0].release()


@pytest.mark.parametrize("algorithm", ["fixed_window", "gcra", "sliding_log"])
def test_many_threads_one_key_admit_exactly_the_limit(topology_url, algorithm):
    threads, calls = 8, 50
    with ratelimit.Client(topology_url, timeout=2.0, pool_size=4) as client:
        # per hour: nothing refills while the test runs
        lim = client.limiter(name("hammer"), "100/hour", algorithm=algorithm)
        allowed, errors = [0] * threads, []
        start = threading.Barrier(threads)

        def run(i):
            try:
                start.wait()
                for _ in range(calls):
                    r = lim.acquire("one-key")
                    assert not r.fallback
                    allowed[i] += bool(r)
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert not errors, errors
        assert sum(allowed) == 100, allowed


def test_async_client(topology_url):
    async def main():
        async with await aio.AsyncClient.connect(topology_url, timeout=2.0, reconnect_max=0.5) as client:
            lim = client.limiter(name("aio"), "5/10s", algorithm="fixed_window")
            results = await asyncio.gather(*[lim.acquire("u") for _ in range(12)])
            assert sum(map(bool, results)) == 5
            async with client.semaphore(name("aiosem"), permits=1, lease=5.0).acquire(timeout=2.0) as permit:
                assert permit.fencing_token > 0
    asyncio.run(main())


def test_async_thousands_in_flight_across_nodes(topology_url):
    # the asynchronous core routes per request (cluster: one connection per
    # node, redirects per request) and pipelines: exact per id
    async def main():
        async with await aio.AsyncClient.connect(topology_url, timeout=5.0, reconnect_max=0.5) as client:
            lim = client.limiter(name("aiomany"), "20/hour", algorithm="gcra")
            ids = ["user-%d" % i for i in range(50)]  # spread over the slots
            results = await asyncio.gather(*(lim.acquire(ids[i % 50]) for i in range(2000)))
            admitted = {u: 0 for u in ids}
            for i, r in enumerate(results):
                admitted[ids[i % 50]] += bool(r)
            assert set(admitted.values()) == {20}
            assert not any(await lim.acquire_many(ids))
            assert [(await lim.peek(u)).remaining for u in ids[:5]] == [0] * 5
    asyncio.run(main())


def test_keys_use_one_hash_tag_per_entity(client, topology_url):
    lim = client.limiter("tagged", "5/10s", algorithm="gcra")
    key = lim.key("user-1")
    assert "{tagged:user-1}" in key


def test_slot_migration_told_source_first(cluster_url, topologies):
    # the last step of a migration done source first (older redis-cli
    # --cluster, redis-trib): the source redirects to the destination, which
    # redirects back until it hears, here for 300 ms. Blocking and asyncio
    # calls ride it out: no error, no fallback, each decision counted once.
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "topology"))
    import topology as T
    where = topologies.get("cluster")["RL_TEST_TOPOLOGY_DIR"]
    limit = 1000000
    with ratelimit.Client(cluster_url, timeout=1.0) as client:
        key_name = name("pingpong")
        lim = client.limiter(key_name, "%d/hour" % limit, algorithm="fixed_window")
        slot = T.key_slot(lim.key("hot"))
        admitted, calls, errors, stop = [0], [0], [], threading.Event()
        counting = threading.Lock()  # += is no atomic step: without a GIL updates would be lost

        def count(results):
            for r in results:
                assert not r.fallback, r
                with counting:
                    admitted[0] += bool(r)
                    calls[0] += 1

        def blocking():
            try:
                while not stop.is_set():
                    count([lim.acquire("hot")])
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        async def in_flight():
            async with await aio.AsyncClient.connect(cluster_url, timeout=1.0) as ac:
                alim = ac.limiter(key_name, "%d/hour" % limit, algorithm="fixed_window")
                while not stop.is_set():
                    count(await asyncio.gather(*(alim.acquire("hot") for _ in range(32))))

        def asynchronous():
            try:
                asyncio.run(in_flight())
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        # peeks (they consume nothing) with a timeout shorter than the window:
        # they give up when it really runs out, and say so
        short = ratelimit.Client(cluster_url, timeout=0.2)
        short_lim = short.limiter(key_name, "%d/hour" % limit, algorithm="fixed_window")
        gave_up = []

        def impatient():
            while not stop.is_set():
                try:
                    short_lim.peek("hot")
                except ratelimit.Timeout as e:
                    gave_up.append(str(e))
                except Exception as e:  # noqa: BLE001
                    errors.append(e)

        workers = [threading.Thread(target=blocking) for _ in range(2)] + [
            threading.Thread(target=asynchronous), threading.Thread(target=impatient)]
        for w in workers:
            w.start()
        src = T.cluster_slot_owner(where, slot)
        moved = []
        mover = threading.Thread(target=lambda: moved.append(
            T.cluster_move_slot(where, slot, source_first=True, hold_ms=300)))
        try:
            time.sleep(0.2)
            mover.start()
            # the window is real: each master sends the key to the other
            key, pingpong, deadline = lim.key("hot"), False, time.monotonic() + 10
            while mover.is_alive() and not pingpong and time.monotonic() < deadline:
                try:
                    T.call(src, "GET", key)
                except T.ReplyError as e:
                    if not str(e).startswith("MOVED"):
                        continue  # ASK while the keys migrate
                    dst = int(str(e).rsplit(":", 1)[1])
                    try:
                        T.call(dst, "GET", key)
                    except T.ReplyError as back:
                        pingpong = str(back).startswith("MOVED") and str(back).endswith(":%d" % src)
            mover.join(30)
            time.sleep(0.3)
        finally:
            stop.set()
            for w in workers:
                w.join(30)
        short.close()
        assert moved and pingpong
        assert not errors, errors[:3]
        assert gave_up
        for message in gave_up:
            m = re.fullmatch(r"gave up after (\d+) redirects and retries in (\d+) ms \(command timeout 200 ms\): "
                             r"MOVED %d 127\.0\.0\.1:\d+" % slot, message)
            assert m and int(m[1]) > 3 and int(m[2]) >= 200, message
        assert calls[0] > 0 and admitted[0] == calls[0]
        assert lim.peek("hot").remaining == limit - admitted[0]


def test_a_sentinel_that_requires_a_user(sentinel_acl_url):
    with ratelimit.Client(sentinel_acl_url) as c:
        assert c.limiter(name("acl"), "5/s").acquire("u")
    password = re.search(r"sentinel_password=([^&]*)", sentinel_acl_url).group(1)
    for bad in (re.sub(r"sentinel_username=[^&]*&", "", sentinel_acl_url),
                re.sub(r"sentinel_username=[^&]*&", "sentinel_username=nobody&", sentinel_acl_url)):
        with pytest.raises(ratelimit.ConnectionError, match="WRONGPASS") as info:
            ratelimit.Client(bad)
        assert password not in str(info.value) and password not in repr(info.value)
