"""Threads, processes, fork safety, the GIL, dead and slow Redis servers."""
import asyncio
import multiprocessing
import os
import signal
import threading
import time

import pytest

import ratelimit
from ratelimit import aio
from posixonly import needs_fork, needs_sigalrm


@pytest.mark.parametrize("algorithm", ratelimit.ALGORITHMS)
def test_threads_never_over_admit(client, algorithm):
    lim = client.limiter("threads-" + algorithm, "100/day", algorithm=algorithm)  # a day: no window boundary mid-test
    admitted, lock = [0], threading.Lock()
    barrier = threading.Barrier(16)

    def worker():
        barrier.wait()
        n = sum(bool(lim.acquire("hot")) for _ in range(15))
        with lock:
            admitted[0] += n

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert admitted[0] == 100  # 240 attempts at a limit of 100


def _process_worker(url, algorithm, shared, start, out):
    # `shared` is the parent's client inherited through fork; the core must
    # drop the parent's connections on first use in the child
    client = shared if shared is not None else ratelimit.Client(url)
    lim = client.limiter("procs-" + algorithm, "150/day", algorithm=algorithm)
    start.wait()
    out.put(sum(bool(lim.acquire("hot")) for _ in range(60)))


@pytest.mark.parametrize("algorithm", ["sliding_log", "gcra"])
@pytest.mark.parametrize("inherit", [False, True], ids=["own-client", "inherited-client"])
def test_processes_never_over_admit(server, client, algorithm, inherit):
    if inherit and not hasattr(os, "fork"):
        pytest.skip("a client inherited through fork(): Windows has none")
    # Windows: processes of their own (spawn), each with its own client
    ctx = multiprocessing.get_context("fork" if hasattr(os, "fork") else "spawn")
    client.limiter("warm", "1/s").acquire("u")  # the parent's pool holds a live connection
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_process_worker,
                         args=(server.url, algorithm, client if inherit else None, start, out))
             for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    counts = [out.get(timeout=30) for _ in procs]
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    assert sum(counts) == 150  # 240 attempts at a limit of 150
    assert client.limiter("warm", "1/s").peek("v")  # the parent's client still works


@needs_fork
def test_fork_child_uses_own_connections(client, raw):
    lim = client.limiter("fork", "1000/hour", algorithm="fixed_window")
    assert lim.acquire("u").remaining == 999
    before = raw.info("clients")["connected_clients"]
    pid = os.fork()
    if pid == 0:  # child: hammer the inherited client while the parent does too
        code = 1
        try:
            ok = all(lim.acquire("u") for _ in range(100))
            code = 0 if ok else 2
        finally:
            os._exit(code)
    parent_ok = all(lim.acquire("u") for _ in range(100))
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0 and parent_ok
    # 1 + 100 + 100 permits, none lost or double-counted on a shared socket
    assert lim.peek("u").remaining == 1000 - 201
    assert raw.info("clients")["connected_clients"] >= before


class _Busy:
    """Three threads on the blocking path and one event loop on the asyncio
    path, all calling without pause on clients made before any fork."""

    def __init__(self, url):
        self.client = ratelimit.Client(url, timeout=5.0)
        self.aclient = aio.AsyncClient(url, timeout=5.0)
        self.stop = threading.Event()
        self.calls = [0] * 4
        self.threads = [threading.Thread(target=self._blocking, args=(i,)) for i in range(3)]
        self.threads.append(threading.Thread(target=lambda: asyncio.run(self._asyncio())))
        for t in self.threads:
            t.start()
        while min(self.calls) == 0:
            time.sleep(0.01)

    def _blocking(self, i):
        lim = self.client.limiter("busy-blocking-%d" % i, "1000000/day")
        while not self.stop.is_set():
            lim.acquire("u")
            self.calls[i] += 1

    async def _asyncio(self):
        lim = self.aclient.limiter("busy-async", "1000000/day")
        while not self.stop.is_set():
            await asyncio.gather(*(lim.acquire("u") for _ in range(64)))
            self.calls[3] += 1

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)
        asyncio.run(self.aclient.close())
        self.client.close()


def _child_uses_the_parents_clients(busy, name):
    """In a child: one blocking and one asyncio decision on the parent's
    clients (a new event loop: the parent's stays with the parent)."""
    lim = busy.client.limiter(name, "1000000/day", algorithm="fixed_window")
    if not lim.acquire("u"):
        return 2

    async def on_the_async_path():
        return await busy.aclient.limiter(name, "1000000/day", algorithm="fixed_window").acquire("u")
    return 0 if asyncio.run(asyncio.wait_for(on_the_async_path(), 10)) else 3


def _mp_child(busy, name):
    os._exit(_child_uses_the_parents_clients(busy, name))


FORKS = 200


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
@needs_fork
def test_forked_children_of_a_busy_process(server):
    # forks land while the parent's threads hold the core's locks, have
    # requests half-queued and connections checked out: each child must get
    # its two decisions, neither hanging nor crashing (os.fork and
    # multiprocessing's fork start method alike)
    busy = _Busy(server.url)
    failed = []
    try:
        for i in range(FORKS):
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = _child_uses_the_parents_clients(busy, "forked-busy")
                finally:
                    os._exit(code)
            deadline = time.monotonic() + 20
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    status = "hung"
                    break
                time.sleep(0.005)
            if status != 0:
                failed.append(("os.fork", i, status))
        ctx = multiprocessing.get_context("fork")
        for i in range(10):
            p = ctx.Process(target=_mp_child, args=(busy, "forked-busy"))
            p.start()
            p.join(20)
            if p.exitcode != 0:
                if p.exitcode is None:
                    p.kill()
                    p.join()
                failed.append(("multiprocessing", i, p.exitcode))
    finally:
        busy.close()
    assert failed == []
    with ratelimit.Client(server.url) as c:  # two decisions in each child, none lost
        lim = c.limiter("forked-busy", "1000000/day", algorithm="fixed_window")
        assert lim.peek("u").remaining == 1000000 - 2 * (FORKS + 10)


def test_gil_is_released_while_redis_is_slow(fresh_server):
    c = ratelimit.Client(fresh_server.url, timeout=1.0)
    lim = c.limiter("gil", "10/s")
    assert lim.acquire("u")
    fresh_server.pause()  # SIGSTOP: connections stay open, nothing answers
    try:
        outcome = []

        def blocked():
            start = time.monotonic()
            try:
                lim.acquire("u")
                outcome.append(("returned", time.monotonic() - start))
            except ratelimit.RateLimitError as e:
                outcome.append((type(e), time.monotonic() - start))

        t = threading.Thread(target=blocked)
        t.start()
        ticks, last, worst = 0, time.monotonic(), 0.0
        while t.is_alive():
            ticks += 1
            now = time.monotonic()
            worst = max(worst, now - last)
            last = now
        t.join()
    finally:
        fresh_server.resume()
    kind, took = outcome[0]
    assert kind is ratelimit.Timeout and 0.9 <= took < 2.0
    assert worst < 0.5, "this thread stalled %.2f s: the GIL was held" % worst
    assert ticks > 10000
    c.close()


def test_dead_redis_raises_within_timeout(fresh_server):
    c = ratelimit.Client(fresh_server.url, timeout=0.5, connect_timeout=0.5)
    lim = c.limiter("dead", "10/s")
    fresh_server.pause()
    start = time.monotonic()
    with pytest.raises(ratelimit.Timeout) as info:
        lim.acquire("u")
    assert time.monotonic() - start < 1.5 and info.value.code == ratelimit._ratelimit.ERR_TIMEOUT
    fresh_server.stop()
    start = time.monotonic()
    with pytest.raises((ratelimit.ConnectionError, ratelimit.Timeout)):
        lim.acquire("u")
    with pytest.raises(ratelimit.ConnectionError):
        client_sem = c.semaphore("s", permits=1, lease=1.0)
        client_sem.try_acquire()
    assert time.monotonic() - start < 1.5
    with pytest.raises(ratelimit.ConnectionError) as info:
        ratelimit.Client(fresh_server.url, connect_timeout=0.5)
    assert info.value.code == ratelimit._ratelimit.ERR_CONNECTION and "connect" in str(info.value)
    c.close()


@pytest.mark.parametrize("policy", ["allow", "deny"])
def test_on_redis_error_fallback(fresh_server, policy):
    c = ratelimit.Client(fresh_server.url, timeout=0.5, on_redis_error=policy)
    lim = c.limiter("fb", "10/s")
    assert not lim.acquire("u").fallback
    fresh_server.stop()
    r = lim.acquire("u")
    assert r.fallback and r.allowed == (policy == "allow")
    rs = lim.acquire_many(["a", "b"])
    assert all(x.fallback and x.allowed == (policy == "allow") for x in rs)
    if policy == "deny":
        assert r.retry_after > 0
        @lim.limit()
        def guarded():
            return 1
        with pytest.raises(ratelimit.RateLimitExceeded):
            guarded()
    # the policy covers rate-limit decisions only: primitives still raise
    with pytest.raises(ratelimit.ConnectionError):
        c.delay_queue("q").size()
    c.close()


def test_redis_restart_is_survived(fresh_server):
    c = ratelimit.Client(fresh_server.url, timeout=1.0)
    lim = c.limiter("restart", "10/s")
    assert lim.acquire("u")
    raw = fresh_server.raw()
    raw.client_kill_filter(_type="normal", skipme=True)  # our pooled connections die
    raw.script_flush()  # and the scripts are gone (NOSCRIPT -> reload)
    assert lim.acquire("u")
    raw.close()
    c.close()


@needs_sigalrm
def test_ctrl_c_interrupts_blocking_waits(client):
    sem = client.semaphore("sigint", permits=1, lease=30.0)
    held = sem.acquire(timeout=1.0)
    lim = client.limiter("sigint", "1/2s", algorithm="fixed_window")
    lim.acquire("u")

    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        for call in (lambda: sem.acquire(timeout=10.0), lambda: lim.acquire("u", timeout=10.0),
                     lambda: client.delay_queue("sigint").pop(timeout=10.0)):
            signal.setitimer(signal.ITIMER_REAL, 0.3)
            start = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                call()
            assert time.monotonic() - start < 1.0
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert sem.holders() == 1  # the interrupted waiter left the queue holding nothing
    held.release()
    assert sem.try_acquire() is not None


def test_cancel_callable(client):
    sem = client.semaphore("cancel", permits=1, lease=30.0)
    sem.acquire(timeout=1.0)
    deadline = time.monotonic() + 0.3
    start = time.monotonic()
    with pytest.raises(ratelimit.Cancelled) as info:
        sem.acquire(timeout=10.0, cancel=lambda: time.monotonic() > deadline)
    assert time.monotonic() - start < 1.0 and info.value.code == ratelimit._ratelimit.ERR_CANCELLED


def test_close_while_calls_are_in_flight(fresh_server):
    c = ratelimit.Client(fresh_server.url, timeout=5.0)
    q = c.delay_queue("inflight")
    results = []
    t = threading.Thread(target=lambda: results.append(q.pop(timeout=0.5)))
    t.start()
    time.sleep(0.1)
    c.close()  # must not free the C client under the waiting call
    t.join(5)
    assert results == [[]]
    with pytest.raises(ratelimit.ClientClosed):
        q.size()
