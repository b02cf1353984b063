"""Free-threaded CPython (3.13t and later, built with --disable-gil): the
extension keeps the GIL off, and the objects it shares between threads
(a client, its limiters, the completion queues of asyncio loops on several
threads) decide exactly while many threads use them at once. On a GIL
build the import test skips; the threaded ones run there too."""
import asyncio
import os
import subprocess
import sys
import sysconfig
import threading

import pytest

import ratelimit

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


@pytest.fixture
def gil_state():
    """On a free-threaded build the GIL must still be off in this process: a
    threaded test run with it on would prove nothing about its absence."""
    if FREE_THREADED:
        assert not sys._is_gil_enabled(), "the GIL was re-enabled in the test process"
    yield
    if FREE_THREADED:
        assert not sys._is_gil_enabled()


@pytest.mark.skipif(not FREE_THREADED, reason="a GIL build of CPython")
def test_import_leaves_the_gil_disabled():
    # a fresh interpreter, PYTHON_GIL unset: an extension without
    # Py_mod_gil would turn the GIL on at import, with a RuntimeWarning
    env = {k: v for k, v in os.environ.items() if k != "PYTHON_GIL"}
    code = ("import sys, warnings; warnings.simplefilter('error')\n"
            "import ratelimit, ratelimit.aio, ratelimit._ratelimit\n"
            "assert not sys._is_gil_enabled(), 'the import enabled the GIL'\n"
            "print(ratelimit._ratelimit.__file__)")
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], env=env, cwd="/",
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "t-" in os.path.basename(out.stdout.strip()), out.stdout  # the cp313t build's suffix


def _run_threads(n, target):
    barrier = threading.Barrier(n)
    errors = []

    def run(k):
        try:
            barrier.wait()
            target(k)
        except BaseException as e:  # noqa: B036 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors


@pytest.mark.parametrize("algorithm", ratelimit.ALGORITHMS)
def test_many_threads_share_a_client_exactly(client, gil_state, algorithm):
    # 32 threads, one client, limiters made concurrently on it (one name:
    # one limit), every kind of call: exactly the limit is admitted
    limit = 300
    granted = [0] * 32

    def work(k):
        lim = client.limiter("ft-" + algorithm, "%d/day" % limit, algorithm=algorithm)
        n = 0
        for i in range(20):
            if k % 3 == 0:
                n += sum(bool(r) for r in lim.acquire_many(["hot", "hot"]))
            elif k % 3 == 1 and algorithm != "sliding_log":
                r = lim.acquire_at_most("hot", 2)
                n += r.granted if r else 0
            else:
                n += bool(lim.acquire("hot"))
        granted[k] = n

    _run_threads(32, work)
    assert sum(granted) == limit  # 32 x 20 calls of 1-2 permits each, far past it


def test_leased_limiter_from_many_threads(client, gil_state):
    # leases: a client's blocks, shared by its threads, decided from memory
    limit = 500
    lim = client.limiter("ft-lease", "%d/day" % limit, algorithm="gcra", lease=0.05)
    granted = [0] * 16

    def work(k):
        granted[k] = sum(bool(lim.acquire("hot")) for _ in range(100))

    _run_threads(16, work)
    assert sum(granted) <= limit
    lim.close()  # the unused rest of the blocks goes back: a caller without a lease gets exactly it
    plain = client.limiter("ft-lease", "%d/day" % limit, algorithm="gcra")
    rest = 0
    while rest <= limit and plain.acquire("hot"):
        rest += 1
    # never over; a booking given back after another one stays used until it
    # ends (docs/semantics.md, Leases), so a few may be missing
    assert limit * 0.9 <= sum(granted) + rest <= limit


def test_event_loops_on_many_threads_share_a_client(server, raw, gil_state):
    # an asyncio loop per thread, all on one client: the clients' lists of
    # completion queues and the queues' counters are touched from each
    limit = 200
    aclient = ratelimit.aio.AsyncClient(server.url, timeout=2.0)
    lim = aclient.limiter("ft-aio", "%d/day" % limit, algorithm="gcra")
    granted = [0] * 8

    async def loop_work(k):
        n = 0
        for _ in range(3):  # several batches: queues are held and let go in between
            results = await asyncio.gather(*(lim.acquire("hot") for _ in range(20)))
            n += sum(bool(r) for r in results)
        return n

    def work(k):
        granted[k] = asyncio.run(loop_work(k))

    try:
        _run_threads(8, work)
    finally:
        asyncio.run(aclient.close())
    assert sum(granted) == limit  # 8 x 60 acquires


def test_close_while_threads_call(server, raw, gil_state):
    # close() from several threads while others call: one closes, the calls
    # either decide or raise ClientClosed, nothing over-admits or crashes
    limit = 100
    client = ratelimit.Client(server.url, timeout=2.0)
    lim = client.limiter("ft-close", "%d/day" % limit, algorithm="gcra")
    granted = [0] * 16

    def work(k):
        if k < 4:
            for _ in range(50):
                client.close()
            return
        n = 0
        for _ in range(40):
            try:
                n += bool(lim.acquire("hot"))
            except ratelimit.ClientClosed:
                pass
        granted[k] = n

    _run_threads(16, work)
    assert client.closed
    assert sum(granted) <= limit
    with pytest.raises(ratelimit.ClientClosed):
        lim.acquire("hot")


def test_init_races_keep_one_client(server, gil_state):
    # __init__ run again from many threads: refused, the first client stays
    client = ratelimit.Client(server.url)
    refused = [0] * 8

    def work(k):
        try:
            client.__init__(server.url)
        except ratelimit.InvalidArgument:
            refused[k] = 1

    _run_threads(8, work)
    assert sum(refused) == 8
    assert client.limiter("ft-init", "5/day").acquire("u")
    client.close()
