"""Leases (issue 25): lease= on limiters, local decisions, the bound under
concurrency (threads, asyncio tasks, leasing and non-leasing clients on one
key), give-back on close and at interpreter exit, and fork."""
import asyncio
import bisect
import datetime
import json
import math
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import ratelimit
from ratelimit import aio
from posixonly import needs_fork

SCRIPT_COMMANDS = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro")


def script_calls(raw):
    """Scripts Redis ran since its last CONFIG RESETSTAT."""
    stats = raw.info("commandstats")
    return sum(stats.get("cmdstat_" + c, {}).get("calls", 0) for c in SCRIPT_COMMANDS)


# ---- lease= is checked where a limiter is made ----------------------------------

BAD_VALUES = [0, 0.0, -1, -0.05, float("nan"), float("inf"), -float("inf"), 3600.001, 1e9, 0.0004]
BAD_TYPES = ["0.05", b"1", True, [0.05], object()]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=repr)
def test_bad_lease_values_are_invalid_and_send_nothing(client, raw, bad):
    raw.config_resetstat()
    with pytest.raises(ratelimit.InvalidArgument, match=r"lease must be in 0\.001\.\.3600 seconds \(got "):
        client.limiter("v", "10/s", lease=bad)
    with pytest.raises(ratelimit.InvalidArgument, match="lease must be in"):
        client.limiter("v", lease=bad)  # the stored spec: refused before asking for it
    sent = {k: v["calls"] for k, v in raw.info("commandstats").items()
            if k not in ("cmdstat_config|resetstat", "cmdstat_config", "cmdstat_info")}
    assert sent == {} and raw.dbsize() == 0


@pytest.mark.parametrize("bad", BAD_TYPES, ids=lambda b: type(b).__name__)
def test_lease_of_a_wrong_type_is_a_type_error(client, bad):
    with pytest.raises(TypeError, match="lease must be a number of seconds"):
        client.limiter("v", "10/s", lease=bad)


def test_lease_bounds_and_units(client):
    assert client.limiter("v", "10/s").lease is None
    assert client.limiter("v", "10/s", lease=None).lease is None
    assert client.limiter("v", "10/s", lease=0.001).lease == 0.001
    assert client.limiter("v", "10/s", lease=3600).lease == 3600.0
    assert client.limiter("v", "10/s", lease=datetime.timedelta(milliseconds=50)).lease == 0.05
    lim = client.limiter("v", "10/s", lease=0.05)
    assert repr(lim) == "<Limiter 'v': 10 per 1.0 s, gcra, lease 0.05 s>"


def test_stored_spec_limiter_takes_a_lease(client, raw):
    client.configure("stored", "100/s", algorithm="token_bucket")
    lim = client.limiter("stored", lease=0.2)
    assert lim.stored and lim.lease == 0.2
    assert repr(lim) == "<Limiter 'stored': the spec stored in Redis, lease 0.2 s>"
    assert lim.acquire("u").allowed


def test_async_limiter_checks_the_lease_too(server, raw):
    async def main():
        async with await aio.AsyncClient.connect(server.url) as c:
            with pytest.raises(ratelimit.InvalidArgument, match="lease must be in"):
                c.limiter("v", "10/s", lease=0)
            with pytest.raises(TypeError):
                c.limiter("v", "10/s", lease="1")
            lim = c.limiter("v", "10/s", lease=0.25)
            assert lim.lease == 0.25 and "lease 0.25 s" in repr(lim)
    asyncio.run(main())


def test_result_local_is_false_without_a_lease(client):
    r = client.limiter("plain", "10/s").acquire("u")
    assert r.local is False and "local" not in repr(r)
    assert set(client.stats()["plain"]) >= {"local_allowed", "local_denied", "lease_calls"}
    assert client.stats()["plain"]["local_allowed"] == 0 and client.stats()["plain"]["lease_calls"] == 0


# ---- local decisions --------------------------------------------------------------

HOT = ("1000000/minute", "gcra")  # generous: a block is never short of permits


def test_local_decisions_and_far_fewer_scripts(client, raw):
    lim = client.limiter("hot", HOT[0], algorithm=HOT[1], lease=0.5)
    raw.config_resetstat()
    results = [lim.acquire("k") for _ in range(2000)]
    scripts = script_calls(raw)
    assert all(r.allowed for r in results)
    local = sum(r.local for r in results)
    assert local >= 2000 - 100, local
    assert scripts <= 2000 / 20, scripts
    assert "local=True" in repr(next(r for r in results if r.local))
    s = client.stats()["hot"]
    assert s["allowed"] == 2000 and s["denied"] == 0
    assert s["local_allowed"] == local and s["local_denied"] == 0
    assert 1 <= s["lease_calls"] <= scripts


def test_acquire_at_most_and_batches_decide_locally(client, raw):
    lim = client.limiter("hot-batch", HOT[0], algorithm=HOT[1], lease=0.5)
    for _ in range(100):  # the block grows
        lim.acquire("k")
    raw.config_resetstat()
    ups = [lim.acquire_at_most("k", 3) for _ in range(100)]
    assert all(r.allowed and 1 <= r.granted <= 3 for r in ups)
    assert sum(r.local for r in ups) >= 90
    batch = lim.acquire_many(["k"] * 50)
    assert all(r.allowed for r in batch) and sum(r.local for r in batch) >= 40
    assert script_calls(raw) <= 20


def test_denials_are_remembered(client):
    lim = client.limiter("deny", "5/minute", algorithm="fixed_window", lease=1.0)
    results = [lim.acquire("k") for _ in range(20)]
    assert sum(r.allowed for r in results) == 5  # one client: its blocks hold the whole limit
    denied = [r for r in results if not r.allowed]
    assert not denied[0].local  # Redis said no ...
    assert all(r.local for r in denied[1:])  # ... and the client remembers it
    assert all(0 < r.retry_after <= denied[0].retry_after for r in denied)
    s = client.stats()["deny"]
    assert s["denied"] == 15 and s["local_denied"] == 14


def test_asyncio_local_decisions(server, raw):
    async def main():
        async with await aio.AsyncClient.connect(server.url) as c:
            lim = c.limiter("hot-aio", HOT[0], algorithm=HOT[1], lease=0.5)
            raw.config_resetstat()
            one = [await lim.acquire("k") for _ in range(1000)]

            async def task():
                return [await lim.acquire("k") for _ in range(50)]
            many = [r for rs in await asyncio.gather(*(task() for _ in range(64))) for r in rs]
            return one, many, script_calls(raw), c.sync.stats()["hot-aio"]
    one, many, scripts, s = asyncio.run(main())
    assert all(r.allowed for r in one + many)
    assert sum(r.local for r in one) >= 950
    assert sum(r.local for r in many) >= len(many) * 0.9
    assert scripts <= (len(one) + len(many)) / 20, scripts
    assert s["local_allowed"] == sum(r.local for r in one + many)


# ---- never over-admit ---------------------------------------------------------------

# Redis's clock as the scripts count it: whole ms (gcra: us), so two
# decisions t apart may see up to t + 1 ms of refill, and a log's span may
# be 1 ms short (as core/tests/test_lease_bound.c and LeaseTest allow)
CLOCK_ROUNDING = {"sliding_log": 0.001, "token_bucket": 0.001, "gcra": 0.000001}


def worst_excess(admissions, algorithm, limit, period, burst=None):
    """How far timestamped admissions exceed the algorithm's bound (<= 0: within).

    Each admission is (start, end) of its call: it happened in between, so
    with tol the longest call (plus the server clock's rounding), sorted
    ends e give a sound check.
    sliding_log: any limit + 1 admissions span >= period: e[i+limit] - e[i]
    >= period - tol. gcra, token_bucket: at most burst + rate * t in any
    interval t: j - i + 1 <= burst + rate * (e[j] - e[i] + tol)."""
    ends = sorted(end for _, end in admissions)
    tol = max(end - start for start, end in admissions) + CLOCK_ROUNDING[algorithm]
    if algorithm == "sliding_log":
        gaps = [period - tol - (ends[i + limit] - ends[i]) for i in range(len(ends) - limit)]
        return max(gaps, default=-1.0)
    rate, burst = limit / period, burst or limit
    # max over j >= i of (j - rate * e[j]), as a suffix maximum
    suffix, best = [0.0] * len(ends), -math.inf
    for j in range(len(ends) - 1, -1, -1):
        best = max(best, j - rate * ends[j])
        suffix[j] = best
    return max((suffix[i] - (burst + i - 1 - rate * ends[i] + rate * tol) for i in range(len(ends))),
               default=-1.0)


def test_the_bound_check_catches_over_admission():
    # the checker itself: limit + 1 admissions inside one period are caught
    many = [(t, t + 0.001) for t in (0.09 * i for i in range(11))]
    assert worst_excess(many, "sliding_log", 10, 1.0) > 0
    assert worst_excess(many[:10], "sliding_log", 10, 1.0) <= 0
    assert worst_excess([(0, 0.001)] * 12, "gcra", 10, 1.0) > 0
    assert worst_excess([(0, 0.001)] * 10, "gcra", 10, 1.0) <= 0


SPECS = [("sliding_log", 150, 1.0, None), ("gcra", 150, 1.0, 30), ("token_bucket", 150, 1.0, 30)]


@pytest.mark.parametrize("algorithm,limit,period,burst", SPECS, ids=[s[0] for s in SPECS])
def test_threads_never_over_admit(server, raw, algorithm, limit, period, burst):
    """8 threads on one key for 2.5 periods: 6 on a leasing client, 2 on
    one without a lease."""
    leasing = ratelimit.Client(server.url, timeout=2.0)
    plain = ratelimit.Client(server.url, timeout=2.0)
    spec = dict(algorithm=algorithm, burst=burst)
    lims = [leasing.limiter("bound", (limit, period), lease=0.2, **spec),
            plain.limiter("bound", (limit, period), **spec)]
    admitted, lock = [], threading.Lock()
    stop = time.monotonic() + 2.5 * period

    def hammer(lim):
        mine = []
        while time.monotonic() < stop:
            start = time.monotonic()
            r = lim.acquire("hot")
            end = time.monotonic()
            if r.allowed:
                mine.append((start, end))
            else:
                time.sleep(0.001)
        with lock:
            admitted.extend(mine)
    threads = [threading.Thread(target=hammer, args=(lims[0] if i < 6 else lims[1],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    s = leasing.stats()["bound"]
    local = s["local_allowed"] + s["local_denied"]
    leasing.close()
    plain.close()
    assert worst_excess(admitted, algorithm, limit, period, burst) <= 0
    # the limit was what bound them, and the lease was used (near the limit
    # blocks shrink to 1 permit: mostly for denials from memory)
    assert len(admitted) >= 0.5 * limit * 2.5
    assert local > 0


@pytest.mark.parametrize("algorithm,limit,period,burst", SPECS, ids=[s[0] for s in SPECS])
def test_asyncio_tasks_never_over_admit(server, raw, algorithm, limit, period, burst):
    """64 tasks on a leasing AsyncClient and 8 on one without a lease, one key."""
    async def main():
        async with await aio.AsyncClient.connect(server.url) as leasing, \
                await aio.AsyncClient.connect(server.url) as plain:
            spec = dict(algorithm=algorithm, burst=burst)
            a = leasing.limiter("bound-aio", (limit, period), lease=0.2, **spec)
            b = plain.limiter("bound-aio", (limit, period), **spec)
            stop = time.monotonic() + 2.5 * period
            admitted = []

            async def hammer(lim):
                while time.monotonic() < stop:
                    start = time.monotonic()
                    r = await lim.acquire("hot")
                    if r.allowed:
                        admitted.append((start, time.monotonic()))
                    else:
                        await asyncio.sleep(0.002)
            await asyncio.gather(*[hammer(a) for _ in range(64)], *[hammer(b) for _ in range(8)])
            s = leasing.sync.stats()["bound-aio"]
            return admitted, s["local_allowed"] + s["local_denied"]
    admitted, local = asyncio.run(main())
    assert worst_excess(admitted, algorithm, limit, period, burst) <= 0
    assert len(admitted) >= 0.5 * limit * 2.5
    assert local > 0


# ---- giving back ----------------------------------------------------------------------

# fixed_window gives back exactly while nobody wrote on top: after a give-back
# Redis holds exactly what was admitted
GIVE_BACK = ("1000/day", "fixed_window")


def used_up(lim, n):
    """n acquires back to back (the block grows past what they need)."""
    results = [lim.acquire("k") for _ in range(n)]
    assert all(r.allowed for r in results)
    return results


def test_limiter_close_gives_back(client, raw):
    lim = client.limiter("give", GIVE_BACK[0], algorithm=GIVE_BACK[1], lease=30.0)
    check = client.limiter("give", GIVE_BACK[0], algorithm=GIVE_BACK[1])
    used_up(lim, 20)
    held = check.peek("k").remaining
    assert held < 1000 - 20  # the lease holds more than it used
    lim.close()
    assert check.peek("k").remaining == 1000 - 20
    lim.close()  # twice: nothing left to give
    assert check.peek("k").remaining == 1000 - 20
    assert lim.acquire("k").allowed  # still usable: a new block
    with lim:
        used_up(lim, 10)
    assert check.peek("k").remaining == 1000 - 31


def test_async_limiter_close_and_async_with_give_back(server, raw):
    async def main():
        async with await aio.AsyncClient.connect(server.url) as c:
            check = c.limiter("give-aio", GIVE_BACK[0], algorithm=GIVE_BACK[1])
            async with c.limiter("give-aio", GIVE_BACK[0], algorithm=GIVE_BACK[1], lease=30.0) as lim:
                for _ in range(20):
                    assert await lim.acquire("k")
                held = (await check.peek("k")).remaining
            return held, (await check.peek("k")).remaining
    held, after = asyncio.run(main())
    assert held < 980 and after == 980


def test_client_close_gives_back(server, raw):
    c = ratelimit.Client(server.url)
    lim = c.limiter("give-c", GIVE_BACK[0], algorithm=GIVE_BACK[1], lease=30.0)
    used_up(lim, 20)
    c.close()
    with ratelimit.Client(server.url) as other:
        assert other.limiter("give-c", GIVE_BACK[0], algorithm=GIVE_BACK[1]).peek("k").remaining == 980


CHILD = """
import os, sys, json
import ratelimit
c = ratelimit.Client(sys.argv[1])
lim = c.limiter("exit", "1000/day", algorithm="fixed_window", lease=30.0)
assert all(lim.acquire("k") for _ in range(20))
if sys.argv[2] == "hard":
    os._exit(0)   # no atexit: nothing given back
"""


@pytest.mark.parametrize("how,remaining", [("normal", 980), ("hard", None)])
def test_interpreter_exit_gives_back(server, raw, how, remaining):
    subprocess.run([sys.executable, "-c", CHILD, server.url, how], check=True, timeout=30)
    with ratelimit.Client(server.url) as c:
        left = c.limiter("exit", "1000/day", algorithm="fixed_window").peek("k").remaining
    if remaining is None:
        assert left < 980  # the check above can fail: leases are really held
    else:
        assert left == remaining


DAEMON = """
import atexit, sys, threading, time
atexit.register(time.sleep, 0.2)  # registered first, so it runs after ratelimit's: the daemon goes on meanwhile
import ratelimit
c = ratelimit.Client(sys.argv[1])
lim = c.limiter("daemon", "1000000/day", lease=30.0)

def spin():
    while True:
        if not lim.acquire("k"):
            raise SystemExit("denied")
        time.sleep(0.0005)
threading.Thread(target=spin, daemon=True).start()
time.sleep(0.3)
"""


def test_exit_gives_back_without_failing_daemon_threads(server, raw):
    # the client is not closed at exit: a daemon thread still deciding goes on
    p = subprocess.run([sys.executable, "-c", DAEMON, server.url], timeout=30, capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_give_back_keeps_the_client_open(client):
    lim = client.limiter("give-open", GIVE_BACK[0], algorithm=GIVE_BACK[1], lease=30.0)
    check = client.limiter("give-open", GIVE_BACK[0], algorithm=GIVE_BACK[1])
    used_up(lim, 20)
    client._give_back()  # what runs at exit
    assert not client.closed and check.peek("k").remaining == 980
    assert lim.acquire("k").allowed


FORKED = """
import os, sys, json
import ratelimit
c = ratelimit.Client(sys.argv[1])
lim = c.limiter("fork", "1000/day", algorithm="fixed_window", lease=30.0)
check = c.limiter("fork", "1000/day", algorithm="fixed_window")
assert all(lim.acquire("k") for _ in range(20))
held = check.peek("k").remaining
pid = os.fork()
if pid == 0:
    # the child uses the client, then exits normally: atexit closes it,
    # which must not give back the parent's lease
    assert check.peek("k").remaining == held
    sys.exit(0)
_, status = os.waitpid(pid, 0)
after_child = check.peek("k").remaining
more = lim.acquire("k")
print(json.dumps({"status": status, "held": held, "after_child": after_child, "local": more.local}))
"""


@needs_fork
def test_a_forked_child_exiting_leaves_the_parents_lease(server, raw):
    out = subprocess.run([sys.executable, "-c", FORKED, server.url], check=True, timeout=30,
                         capture_output=True, text=True).stdout
    got = json.loads(out)
    assert got["status"] == 0
    assert got["after_child"] == got["held"] < 980  # the child gave nothing back
    assert got["local"]  # the parent still decides from its block
    with ratelimit.Client(server.url) as c:  # and gave it back when it exited
        assert c.limiter("fork", "1000/day", algorithm="fixed_window").peek("k").remaining == 1000 - 21


def test_open_clients_are_tracked_weakly(server):
    import gc
    import weakref
    c = ratelimit.Client(server.url)
    assert c in ratelimit._open_clients
    ref = weakref.ref(c)
    del c
    gc.collect()
    assert ref() is None  # the set kept it from nothing


@pytest.mark.parametrize("algorithm,lowered", [("token_bucket", "10/s"), ("leaky_bucket", "1000/100s")])
@pytest.mark.parametrize("ask_after", [0.0, 0.7])
def test_a_lease_then_a_lowered_stored_rate_adds_nothing(server, raw, algorithm, lowered, ask_after):
    """Issue 41: a bucket of 1000/s drained to 100, a leasing client takes
    a block, the stored rate is lowered: a fresh client gets what the
    bucket holds plus the refill since at the new rate, never the refill
    of the block's validity at the old one (600 were granted, at once and
    after the lease had ended)."""
    admin = ratelimit.Client(server.url, timeout=2.0)
    leasing = ratelimit.Client(server.url, timeout=2.0, config_refresh=0.05)
    fresh = ratelimit.Client(server.url, timeout=2.0)
    try:
        admin.configure("lowered", "1000/s", algorithm=algorithm, **({"burst": 1000} if algorithm == "token_bucket"
                                                                       else {}))
        assert admin.limiter("lowered").acquire("u", 900).allowed
        assert leasing.limiter("lowered", lease=0.5).acquire("u").allowed
        admin.configure("lowered", lowered, algorithm=algorithm, **({"burst": 1000} if algorithm == "token_bucket"
                                                                     else {}))
        lowered_at = time.monotonic()
        time.sleep(ask_after)
        granted = fresh.limiter("lowered").acquire_at_most("u", 1000).granted
        # 100 left at most (less the block); the refill since the drain: a few ms at 1000/s, then 10/s
        assert 1 <= granted <= 100 + 5 + math.ceil((time.monotonic() - lowered_at) * 10), granted
    finally:
        for c in (admin, leasing, fresh):
            c.close()
