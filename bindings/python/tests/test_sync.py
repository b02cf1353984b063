"""Semaphore, lock and delay queue through the Python API."""
import threading
import time

import pytest

import ratelimit


def test_semaphore_counts_and_releases(client, raw):
    sem = client.semaphore("db", permits=2, lease=30.0)
    assert sem.available() == 2 and sem.holders() == 0
    a = sem.acquire(timeout=1.0)
    b = sem.try_acquire()
    assert a and b and a.id != b.id
    assert b.fencing_token > a.fencing_token
    assert sem.available() == 0 and sem.holders() == 2
    assert sem.try_acquire() is None
    with pytest.raises(ratelimit.AcquireTimeout) as info:
        sem.acquire(timeout=0.2)
    # busy is "not acquired", never "Redis failed": an outage handler must not catch it
    assert info.value.code == 0 and isinstance(info.value, (ratelimit.NotAcquired, TimeoutError))
    assert not isinstance(info.value, (ratelimit.RedisFailure, ratelimit.Timeout))
    assert "0.2 s" in str(info.value) and "all 2 taken" in str(info.value)
    assert a.refresh(10.0) and a.lease == 10.0
    assert a.release() and not a.release()
    with sem.acquire(timeout=1.0) as c:
        assert sem.holders() == 2
    assert sem.holders() == 1 and not c.refresh()
    b.release()
    assert sem.available() == 2


def test_semaphore_waiter_is_woken_by_release(client):
    sem = client.semaphore("wake", permits=1, lease=30.0)
    held = sem.acquire(timeout=1.0)
    got = []

    def waiter():
        with sem.acquire(timeout=5.0) as p:
            got.append((time.monotonic(), p.fencing_token))

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    released_at = time.monotonic()
    held.release()
    t.join(5)
    assert got and got[0][0] - released_at < 0.5  # woken, not polled after seconds
    assert got[0][1] > held.fencing_token


def test_semaphore_lease_expires(client):
    sem = client.semaphore("expire", permits=1, lease=0.2)
    p = sem.acquire(timeout=1.0)
    assert sem.try_acquire() is None
    time.sleep(0.3)
    q = sem.try_acquire()
    assert q is not None and q.fencing_token > p.fencing_token
    assert not p.release()  # it had expired


def test_semaphore_never_over_admits(client):
    sem = client.semaphore("crowd", permits=3, lease=10.0)
    inside, peak, lock = [0], [0], threading.Lock()

    def worker():
        for _ in range(5):
            with sem.acquire(timeout=10.0):
                with lock:
                    inside[0] += 1
                    peak[0] = max(peak[0], inside[0])
                time.sleep(0.005)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert peak[0] == 3 and sem.holders() == 0


def test_lock(client, raw):
    lock = client.lock("nightly-job", lease=10.0)
    with lock.acquire(timeout=1.0) as held:
        assert held.fencing_token > 0 and held.token
        assert lock.try_acquire() is None
        with pytest.raises(ratelimit.AcquireTimeout):
            lock.acquire(timeout=0.1)
        assert held.extend(5.0) and held.lease == 5.0
        first = held.fencing_token
    second = lock.try_acquire()
    assert second is not None and second.fencing_token > first
    assert second.release()
    assert not second.extend()


def test_lock_lease_loss(client):
    lock = client.lock("lost", lease=0.15)
    held = lock.acquire(timeout=1.0)
    time.sleep(0.25)
    assert not held.extend()
    other = lock.acquire(timeout=1.0)
    assert other.fencing_token > held.fencing_token
    assert not held.release()  # cannot release someone else's lock
    assert lock.try_acquire() is None
    other.release()


def test_delay_queue(client, raw):
    q = client.delay_queue("jobs")
    assert q.push("m1", delay=0.2)
    assert not q.push("m1", delay=0.0)  # already queued: unchanged
    assert q.push(b"m2", delay=0.0)
    assert q.push("m3", delay=30.0)
    assert q.size() == 3
    assert q.pop_ready(max=10) == ["m2"]
    assert q.pop_ready(max=10) == []
    start = time.monotonic()
    assert q.pop(max=10, timeout=2.0) == ["m1"]
    assert 0.1 < time.monotonic() - start < 1.0
    assert q.remove("m3") and not q.remove("m3")
    assert q.size() == 0
    start = time.monotonic()
    assert q.pop(max=10, timeout=0.3) == []
    assert 0.25 < time.monotonic() - start < 1.0


def test_delay_queue_blocking_pop_is_woken_by_push(client):
    q = client.delay_queue("wake")
    got = []
    t = threading.Thread(target=lambda: got.append((q.pop(timeout=5.0), time.monotonic())))
    t.start()
    time.sleep(0.3)
    pushed = time.monotonic()
    q.push("hello")
    t.join(5)
    assert got[0][0] == ["hello"] and got[0][1] - pushed < 0.5


def test_delay_queue_bytes_round_trip(client):
    q = client.delay_queue("bin")
    raw_bytes = b"\xff\x00binary"
    q.push(raw_bytes)
    (text,) = q.pop_ready()
    assert isinstance(text, str)
    q.push(text)  # surrogateescape: the same bytes go back
    assert client.delay_queue("bin", decode=False).pop_ready() == [raw_bytes]
    q.push("héllo")
    assert client.delay_queue("bin", decode=False).pop_ready() == ["héllo".encode()]


def test_delay_queue_consumers_never_share(client):
    q = client.delay_queue("share")
    for i in range(200):
        q.push("m%d" % i)
    seen, lock = [], threading.Lock()

    def consumer():
        while True:
            got = q.pop_ready(max=7)
            if not got:
                return
            with lock:
                seen.extend(got)

    threads = [threading.Thread(target=consumer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(seen) == sorted("m%d" % i for i in range(200))
