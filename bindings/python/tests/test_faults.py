"""Injected faults (docs/reliability.md, "Faults"), a subset of the C matrix
(core/tests/test_faults.c) through the binding, blocking and asyncio: a real
proxy (Toxiproxy) between the client and Redis, and Redis stopped, full,
flushed or read-only. Each call returns the matrix's outcome within the
timeout, Redis's count afterwards agrees with the admissions the client saw
(never a second consumption), and decisions come from Redis again soon after
the fault ends. toxiproxy-server comes from $RL_TOXIPROXY_SERVER, else
build/deps/toxiproxy/ (scripts/deps.sh builds it), else PATH: missing, these
tests fail."""
import asyncio
import json
import os
import shutil
import socket
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import ratelimit
from ratelimit import aio


TIMEOUT = 0.25          # command timeout, seconds
RECONNECT_MAX = 0.1
MARGIN = 0.25           # scheduling, a loaded 2-core machine
WINDOW = 0.7            # how long a fault lasts while the client calls
STALLED = TIMEOUT / 5   # a call that lost this to the machine may have timed out because of it
RATE = "1000000000/hour"  # never denies: every admission is one count in Redis

REPO = Path(__file__).resolve().parents[3]


def toxiproxy_binary():
    for candidate in (os.environ.get("RL_TOXIPROXY_SERVER"), REPO / "build/deps/toxiproxy/toxiproxy-server",
                      shutil.which("toxiproxy-server")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    pytest.fail("toxiproxy-server not found: run scripts/deps.sh (it builds it into build/deps/toxiproxy) "
                "or set RL_TOXIPROXY_SERVER")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Toxiproxy:
    """One toxiproxy-server on a free loopback port, driven over its HTTP API."""

    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen([toxiproxy_binary(), "-host", "127.0.0.1", "-port", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.api("GET", "/version")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("toxiproxy-server did not start")
                time.sleep(0.02)

    def api(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data, method=method)
        with urllib.request.urlopen(req, timeout=5) as resp:
            text = resp.read()
        return json.loads(text) if text else None

    def proxy(self, name, upstream_port):
        p = self.api("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0",
                                          "upstream": "127.0.0.1:%d" % upstream_port})
        return int(p["listen"].rsplit(":", 1)[1])

    def toxic(self, proxy, type, stream, **attributes):
        self.api("POST", "/proxies/%s/toxics" % proxy,
                 {"name": "%s_%s" % (type, stream), "type": type, "stream": stream, "attributes": attributes})

    def enable(self, proxy, enabled):
        self.api("POST", "/proxies/" + proxy, {"enabled": enabled})

    def reset(self):
        self.api("POST", "/reset")

    def heal(self, proxy):
        """No toxics, and every connection through proxy cut: a connection a
        blackhole dropped bytes of never comes back in reality either."""
        # cut first: a call sent between removing the toxics and the cut
        # would reach Redis and lose its reply
        self.enable(proxy, False)
        self.reset()  # enables it again

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


@pytest.fixture(scope="module")
def toxiproxy():
    t = Toxiproxy()
    yield t
    t.stop()


@pytest.fixture(scope="module")
def redis_server(module_server):
    return module_server


@pytest.fixture(scope="module")
def proxied(toxiproxy, redis_server):
    """The URL of redis_server through the proxy "redis"."""
    port = toxiproxy.proxy("redis", redis_server.port)
    return "redis://127.0.0.1:%d/0" % port


@pytest.fixture(autouse=True)
def healed(request):
    yield
    if "toxiproxy" in request.fixturenames:
        request.getfixturevalue("toxiproxy").heal("redis")


def options(policy):
    return dict(timeout=TIMEOUT, connect_timeout=0.3, reconnect_max=RECONNECT_MAX, pool_size=2,
                on_redis_error=policy)


def count(server, key):
    """Permits taken from a fixed window, as Redis holds them."""
    raw = server.raw()
    try:
        return int(raw.hget(key, "count") or 0)
    finally:
        raw.close()


class Tally:
    """What one client saw: admissions, outcomes unknown to it (timed out or
    cut off after sending: they may have run), errors, slowest call; and how
    long the machine itself stalled meanwhile (a loaded 2-core box: a call
    may take that much longer than its bound, no more). "stalled": the
    unknown calls that lost STALLED to the machine's stalls while they ran,
    which may have failed (timed out) because of them, whatever the fault:
    the exact counts hold give or take those."""

    def __init__(self, policy):
        self.policy = policy
        self.calls = self.admitted = self.unknown = self.stalled = 0
        self.errors = []
        self.slowest = 0.0
        self.slowest_failure = 0.0  # a failed call's time, less the machine's stalls meanwhile
        self.recovered = None
        self.stall = 0.0
        self.stalled_total = 0.0
        self.woke = time.monotonic()
        self._watching = threading.Event()

    def stalled_so_far(self):
        """All the lateness recorded so far, counting a stall still going on."""
        return self.stalled_total + max(0.0, time.monotonic() - self.woke - 0.005)

    def __enter__(self):
        def watch():
            while not self._watching.is_set():
                t = time.monotonic()
                time.sleep(0.005)
                woke = time.monotonic()
                late = woke - t - 0.005
                self.stall = max(self.stall, late)
                self.stalled_total += max(0.0, late)
                self.woke = woke
        self._watcher = threading.Thread(target=watch, daemon=True)
        self._watcher.start()
        return self

    def __exit__(self, *exc):
        self._watching.set()
        self._watcher.join()

    def outcome(self, took, stalled, result=None, error=None):
        self.calls += 1
        self.slowest = max(self.slowest, took)
        if error is not None or result.fallback:
            self.slowest_failure = max(self.slowest_failure, took - stalled)
        if error is not None:
            # under allow / deny a timeout or a broken connection is a fallback, never an exception
            assert not isinstance(error, (ratelimit.Timeout, ratelimit.ConnectionError)) or self.policy == "raise", error
            if isinstance(error, (ratelimit.Timeout, ratelimit.ConnectionError)):
                self.unknown += 1
                self.stalled += stalled >= STALLED
            self.errors.append(error)
            return False
        if result.fallback:
            assert self.policy != "raise"
            assert bool(result) is (self.policy == "allow")
            self.unknown += 1
            self.stalled += stalled >= STALLED
            return False
        assert result, "denied by Redis with a limit that never denies"
        self.admitted += 1
        return True


def hammer(call, tally, inject, clear, window=WINDOW):
    """call() -> Result, in a loop: while the fault lasts (window seconds),
    then until a decision comes from Redis again (3 s at most)."""
    def once():
        t, stalled = time.monotonic(), tally.stalled_so_far()
        try:
            r = call()
        except ratelimit.RateLimitError as e:
            return tally.outcome(time.monotonic() - t, tally.stalled_so_far() - stalled, error=e)
        return tally.outcome(time.monotonic() - t, tally.stalled_so_far() - stalled, result=r)
    assert once(), "no decision from Redis before the fault"  # and the script is loaded there
    inject()
    end = time.monotonic() + window
    while time.monotonic() < end:
        once()
        time.sleep(0.01)
    clear()
    cleared = time.monotonic()
    while time.monotonic() - cleared < 3:
        if once():
            tally.recovered = time.monotonic() - cleared
            return
        time.sleep(0.01)


async def ahammer(call, tally, inject, clear, window=WINDOW):
    """hammer on the asyncio client: call() -> awaitable Result."""
    async def once():
        t, stalled = time.monotonic(), tally.stalled_so_far()
        try:
            r = await asyncio.wait_for(call(), 5)  # a hang fails here, not at the CI's time limit
        except ratelimit.RateLimitError as e:
            return tally.outcome(time.monotonic() - t, tally.stalled_so_far() - stalled, error=e)
        return tally.outcome(time.monotonic() - t, tally.stalled_so_far() - stalled, result=r)
    assert await once(), "no decision from Redis before the fault"
    inject()
    end = time.monotonic() + window
    while time.monotonic() < end:
        await once()
        await asyncio.sleep(0.01)
    clear()
    cleared = time.monotonic()
    while time.monotonic() - cleared < 3:
        if await once():
            tally.recovered = time.monotonic() - cleared
            return
        await asyncio.sleep(0.01)


def run(mode, url, policy, name, id, inject, clear):
    """One client (blocking or asyncio) through one fault: its Tally, and
    the Redis key of the fixed window it counted in."""
    tally = Tally(policy)
    if mode == "sync":
        with ratelimit.Client(url, **options(policy)) as client, tally:
            lim = client.limiter(name, RATE, algorithm="fixed_window")
            hammer(lambda: lim.acquire(id), tally, inject, clear)
            return tally, lim.key(id)

    async def main():
        async with await aio.AsyncClient.connect(url, **options(policy)) as client:
            lim = client.limiter(name, RATE, algorithm="fixed_window")
            with tally:
                await ahammer(lambda: lim.acquire(id), tally, inject, clear)
            return tally, lim.sync.key(id)
    return asyncio.run(main())


def bounded(tally):
    """Every call within the timeout, and back to Redis by itself."""
    assert tally.slowest <= TIMEOUT + MARGIN + tally.stall, "a call took %.3f s (the machine stalled %.3f s)" % (
        tally.slowest, tally.stall)
    assert tally.recovered is not None, "no decision from Redis within 3 s of the fault's end"
    assert tally.recovered <= TIMEOUT + RECONNECT_MAX + MARGIN + tally.stall, "back after %.3f s" % tally.recovered


MODES = [("sync", "raise"), ("sync", "allow"), ("sync", "deny"), ("aio", "raise"), ("aio", "deny")]


@pytest.mark.parametrize("mode, policy", MODES)
def test_reply_that_never_comes_ran_once(toxiproxy, proxied, redis_server, mode, policy):
    # the call went out whole and ran; its reply is late: a timeout (or the
    # policy), and never a second send
    id = "late-%s-%s" % (mode, policy)
    tally, key = run(mode, proxied, policy, "faults", id,
                     lambda: toxiproxy.toxic("redis", "latency", "downstream", latency=800), toxiproxy.reset)
    bounded(tally)
    assert tally.unknown > 0
    assert all(isinstance(e, ratelimit.Timeout) for e in tally.errors)
    assert tally.admitted + tally.unknown - tally.stalled <= count(redis_server, key) <= tally.admitted + tally.unknown


@pytest.mark.parametrize("mode", ["sync", "aio"])
def test_reply_trickling_in_times_out(toxiproxy, proxied, redis_server, mode):
    # a byte every 30 ms: each read gets something, the reply never comes whole in time
    id = "drip-" + mode
    tally, key = run(mode, proxied, "raise", "faults", id,
                     lambda: toxiproxy.toxic("redis", "slicer", "downstream", average_size=1, size_variation=0,
                                             delay=30000),
                     toxiproxy.reset)
    bounded(tally)
    assert tally.errors and all(isinstance(e, ratelimit.Timeout) for e in tally.errors)
    assert tally.admitted + tally.unknown - tally.stalled <= count(redis_server, key) <= tally.admitted + tally.unknown


@pytest.mark.parametrize("mode, policy", [("sync", "raise"), ("sync", "deny"), ("aio", "allow")])
def test_accepts_and_never_answers(toxiproxy, proxied, redis_server, mode, policy):
    # fresh connections the proxy takes and nothing answers: nothing reaches Redis
    id = "blackhole-%s-%s" % (mode, policy)

    def inject():
        redis_server.raw().client_kill_filter(_type="normal", skipme=True)
        toxiproxy.toxic("redis", "timeout", "upstream", timeout=0)
    tally, key = run(mode, proxied, policy, "faults", id, inject, lambda: toxiproxy.heal("redis"))
    bounded(tally)
    assert tally.unknown > 0
    assert tally.admitted <= count(redis_server, key) <= tally.admitted + tally.stalled


@pytest.mark.parametrize("mode, policy", [("sync", "raise"), ("sync", "allow"), ("aio", "deny")])
def test_refused_fails_fast_and_recovers(toxiproxy, proxied, redis_server, mode, policy):
    id = "refused-%s-%s" % (mode, policy)
    tally, key = run(mode, proxied, policy, "faults", id, lambda: toxiproxy.enable("redis", False), toxiproxy.reset)
    bounded(tally)
    # fast: no failed call waits a connect timeout (0.3 s), besides what the
    # machine stalled meanwhile
    assert tally.slowest_failure < 0.3, "a failed call took %.3f s" % tally.slowest_failure
    assert all(isinstance(e, ratelimit.ConnectionError) for e in tally.errors)
    assert tally.admitted <= count(redis_server, key) <= tally.admitted + tally.stalled


@pytest.mark.parametrize("mode, policy", [("sync", "raise"), ("aio", "allow")])
def test_stopped_redis(redis_server, mode, policy):
    # kill -STOP: connections stay up, nothing answers; after -CONT Redis may
    # still run what it had read (the client said "timed out": unknown)
    id = "stopped-%s-%s" % (mode, policy)
    tally, key = run(mode, redis_server.url, policy, "faults", id, redis_server.pause, redis_server.resume)
    bounded(tally)
    assert tally.unknown > 0
    assert tally.admitted <= count(redis_server, key) <= tally.admitted + tally.unknown


@pytest.mark.parametrize("mode", ["sync", "aio"])
def test_out_of_memory_is_a_redis_error_under_every_policy(redis_server, mode):
    # an error reply: the script wrote nothing, and on_redis_error does not apply
    id = "oom-" + mode
    raw = redis_server.raw()

    def inject():
        raw.config_set("maxmemory-policy", "noeviction")
        raw.config_set("maxmemory", 1)
    try:
        tally, key = run(mode, redis_server.url, "allow", "faults", id, inject,
                         lambda: raw.config_set("maxmemory", 0))
    finally:
        raw.config_set("maxmemory", 0)
        raw.close()
    bounded(tally)
    # only the machine's stalls may time a call out here
    assert tally.errors and tally.unknown == tally.stalled
    assert all(isinstance(e, ratelimit.RedisError) and str(e).startswith("OOM") for e in tally.errors), tally.errors[0]
    assert tally.admitted <= count(redis_server, key) <= tally.admitted + tally.stalled


@pytest.mark.parametrize("mode", ["sync", "aio"])
def test_script_flush_under_load_reloads_invisibly(redis_server, mode):
    # NOSCRIPT proves the script did not run: loaded again and sent again, no error, counted once
    id = "flush-" + mode
    stop = threading.Event()

    def flusher():
        raw = redis_server.raw()
        while not stop.is_set():
            raw.script_flush()
            time.sleep(0.02)
        raw.close()
    thread = threading.Thread(target=flusher)
    try:
        tally, key = run(mode, redis_server.url, "raise", "faults", id, thread.start, stop.set)
    finally:
        stop.set()
        thread.join()
    bounded(tally)
    # no error but a timeout the machine's stalls explain
    assert len(tally.errors) == tally.unknown == tally.stalled
    assert tally.admitted > 20
    assert tally.admitted <= count(redis_server, key) <= tally.admitted + tally.stalled


@pytest.mark.parametrize("mode", ["sync", "aio"])
def test_demoted_to_a_replica_answers_readonly(redis_server, start_redis, mode):
    # the server the client uses becomes a replica: every write is refused at
    # once (a standalone client does not look elsewhere), under every policy,
    # until it is promoted again
    server = start_redis()
    raw = server.raw()
    master = redis_server.raw()
    master.config_set("repl-diskless-sync-delay", 0)  # else the first sync waits 5 s
    master.close()

    def demote():
        raw.config_set("repl-diskless-load", "swapdb")  # no dump.rdb left in the working directory
        raw.replicaof("127.0.0.1", redis_server.port)
        deadline = time.monotonic() + 5
        while raw.role()[3] not in ("connected", b"connected"):
            assert time.monotonic() < deadline, "the replica did not sync"
            time.sleep(0.01)
    id = "readonly-" + mode
    tally, key = run(mode, server.url, "deny", "faults", id, demote, lambda: raw.replicaof("NO", "ONE"))
    raw.close()
    bounded(tally)
    # only the machine's stalls may time a call out here
    assert tally.errors and tally.unknown == tally.stalled
    assert all(isinstance(e, ratelimit.RedisError) and str(e).startswith("READONLY") for e in tally.errors)
    # the master never had the key; the warm-up's permit went with the full sync
    assert tally.admitted - 1 <= count(server, key) <= tally.admitted - 1 + tally.stalled


# ---- a batch cut part-way: what Redis decided is still reported ---------------

BATCH_LIMIT, BATCH_PERIOD_MS = 1000000000, 3600000


def fresh_reply_bytes():
    """The bytes of a fresh id's fixed-window reply (RESP2, 8 integers:
    allowed, limit, remaining, retry_after, reset_after, wait, granted, rate):
    the same for every fresh id, so a proxy can pass exactly one."""
    values = [1, BATCH_LIMIT, BATCH_LIMIT - 1, -1, BATCH_PERIOD_MS, 0, 1, 0]
    return len("*8\r\n") + sum(len(":%d\r\n" % v) for v in values)


@pytest.mark.parametrize("max_batch", [1, 2])
@pytest.mark.parametrize("fault", ["stall", "cut"])
@pytest.mark.parametrize("mode, policy", [("sync", "raise"), ("sync", "allow"), ("aio", "raise"), ("aio", "deny")])
def test_batch_cut_part_way_reports_what_redis_decided(toxiproxy, proxied, redis_server, fault, mode, policy,
                                                       max_batch):
    # both requests reach Redis; the proxy passes the first reply, then stalls
    # (slicer: a pause after each reply) or cuts the connection (limit_data).
    # Two calls (max_batch=1): the first's decision is reported. One batch
    # call (max_batch=2): its one reply is cut, both fail (or the policy's).
    # asyncio submits one at a time: the I/O thread may send the first alone
    # (it never waits for company), and then it is decided.
    size = fresh_reply_bytes()
    error = ratelimit.Timeout if fault == "stall" else ratelimit.ConnectionError
    prefix = "batch-%s-%s-%s-%d-" % (fault, mode, policy, max_batch)

    def together(first):
        decided = isinstance(first, ratelimit.Result) and not first.fallback
        return max_batch > 1 and (mode == "sync" or not decided)

    def failed_first(results):
        return "request 0: " if together(results[0]) else "request 1: "

    def attach():
        if fault == "stall":
            toxiproxy.toxic("redis", "slicer", "downstream", average_size=size, size_variation=0,
                            delay=int(3 * TIMEOUT * 1e6))
        else:
            toxiproxy.toxic("redis", "limit_data", "downstream", bytes=size + 3)

    def check(outcomes, took, ids):
        first, second = outcomes
        batched = together(first)
        if not batched:
            assert isinstance(first, ratelimit.Result), first
            assert first.allowed and not first.fallback and first.remaining == BATCH_LIMIT - 1
        for failed in outcomes if batched else [second]:
            if policy == "raise":
                assert isinstance(failed, error), failed
            else:
                assert isinstance(failed, ratelimit.Result) and failed.fallback
                assert failed.allowed is (policy == "allow")
        assert took <= TIMEOUT + MARGIN
        toxiproxy.heal("redis")
        # the second ran too: a request cut short may have consumed
        assert [count(redis_server, key) for key in ids] == [1, 1]

    rate = "%d/hour" % BATCH_LIMIT

    def keys(lim, ids):
        return [lim.key(i) for i in ids]

    if mode == "sync":
        with ratelimit.Client(proxied, **options(policy), max_batch=max_batch) as client:
            lim = client.limiter("faults", rate, algorithm="fixed_window")
            warm = lim.acquire(prefix + "warm")  # the scripts loaded, a connection open
            assert (warm.remaining, warm.reset_after) == (BATCH_LIMIT - 1, BATCH_PERIOD_MS / 1000)
            ids = [prefix + "a", prefix + "b"]
            attach()
            t = time.monotonic()
            outcomes = lim.acquire_many(ids, return_exceptions=True)
            check(outcomes, time.monotonic() - t, keys(lim, ids))
            if policy == "raise":
                ids = [prefix + "c", prefix + "d"]
                attach()
                t = time.monotonic()
                with pytest.raises(error) as raised:
                    lim.acquire_many(ids)
                assert str(raised.value).startswith(failed_first(raised.value.results))
                check(raised.value.results, time.monotonic() - t, keys(lim, ids))
            # and then a batch is decided whole again
            assert all(not r.fallback for r in lim.acquire_many([prefix + "a", prefix + "e"]))
        return

    async def main():
        async with await aio.AsyncClient.connect(proxied, **options(policy), max_batch=max_batch) as client:
            lim = client.limiter("faults", rate, algorithm="fixed_window")
            await lim.acquire(prefix + "warm")
            ids = [prefix + "a", prefix + "b"]
            attach()
            t = time.monotonic()
            outcomes = await lim.acquire_many(ids, return_exceptions=True)
            check(outcomes, time.monotonic() - t, keys(lim.sync, ids))
            if policy == "raise":
                ids = [prefix + "c", prefix + "d"]
                attach()
                t = time.monotonic()
                with pytest.raises(error) as raised:
                    await lim.acquire_many(ids)
                assert str(raised.value).startswith(failed_first(raised.value.results))
                check(raised.value.results, time.monotonic() - t, keys(lim.sync, ids))
            assert all(not r.fallback for r in await lim.acquire_many([prefix + "a", prefix + "e"]))
    asyncio.run(main())
# ---- a server alive but slower than its callers: the backlog stays bounded

CAP = 20  # max_in_flight


def decisions_run_settled(server, key):
    """The decisions Redis has run on key (one permit each, read directly:
    batched or not) once it has run everything it was sent."""
    n, last = count(server, key), -1
    while n != last:
        time.sleep(0.3)
        last, n = n, count(server, key)
    return n


@pytest.mark.parametrize("policy", ["raise", "allow"])
def test_slow_server_async_backlog_stays_bounded(toxiproxy, proxied, redis_server, policy):
    # 8 KB/s upstream: ~50 scripts/s reach Redis while the client is offered
    # ~2,000/s. Past max_in_flight, the server behind, calls fail at once
    # (Backlog, or the fallback) and are never sent: Redis runs at most the
    # cap after the calls stop, and never a call that failed unsent.
    async def main():
        async with await aio.AsyncClient.connect(proxied, timeout=0.2, on_redis_error=policy,
                                                 max_in_flight=CAP) as client:
            lim = client.limiter("faults", RATE, algorithm="fixed_window")
            assert not (await lim.acquire("backlog-" + policy)).fallback  # the script is loaded

            async def timed():
                t = time.monotonic()
                try:
                    return await lim.acquire("backlog-" + policy), time.monotonic() - t
                except ratelimit.RateLimitError as e:
                    return e, time.monotonic() - t

            toxiproxy.toxic("redis", "bandwidth", "upstream", rate=8)
            key = lim.sync.key("backlog-" + policy)
            before = count(redis_server, key)
            tasks = []
            for i in range(2000):
                tasks.append(asyncio.ensure_future(timed()))
                if i % 2:
                    await asyncio.sleep(0.001)
            at_stop = count(redis_server, key)
            outcomes = await asyncio.wait_for(asyncio.gather(*tasks), 10)
            toxiproxy.reset()
            return before, at_stop, decisions_run_settled(redis_server, key), outcomes

    before, at_stop, after, outcomes = asyncio.run(main())
    decided = sum(1 for r, _ in outcomes if isinstance(r, ratelimit.Result) and not r.fallback)
    not_sent = [took for r, took in outcomes if isinstance(r, ratelimit.Backlog)]
    timed_out = sum(1 for r, _ in outcomes if isinstance(r, ratelimit.Timeout))
    fallbacks = [took for r, took in outcomes if isinstance(r, ratelimit.Result) and r.fallback]
    print("\n%s: %d decided, %d timed out, %d not sent (Backlog), %d fallbacks; Redis ran %d (%d after the calls "
          "stopped)" % (policy, decided, timed_out, len(not_sent), len(fallbacks), after - before, after - at_stop))
    assert decided + timed_out + len(not_sent) + len(fallbacks) == len(outcomes)
    assert after - at_stop <= CAP
    if policy == "raise":
        assert not fallbacks and len(not_sent) > len(outcomes) // 2
        assert sorted(not_sent)[len(not_sent) // 2] < 0.1  # most at once, not at the timeout
        assert decided <= after - before <= decided + timed_out  # what failed unsent never ran
    else:
        assert not not_sent and not timed_out  # the policy decides
        assert all(r.allowed for r, _ in outcomes)
        assert after - before <= CAP + decided + len(fallbacks) // 10  # far fewer ran than were called


def test_slow_server_blocking_sends_one_call_at_a_time(toxiproxy, proxied, redis_server):
    # every reply 500 ms late, timeout 0.25 s: once a call timed out the
    # server is behind, and four threads send it one call at a time; the
    # others raise Backlog at once, never sent
    with ratelimit.Client(proxied, **options("raise"), max_in_flight=CAP) as client:
        lim = client.limiter("faults", RATE, algorithm="fixed_window")
        assert lim.acquire("backlog-blocking")
        toxiproxy.toxic("redis", "latency", "upstream", latency=500)
        key = lim.key("backlog-blocking")
        before = count(redis_server, key)
        outcomes, stop = [], threading.Event()

        def run():
            while not stop.is_set():
                t = time.monotonic()
                try:
                    r = lim.acquire("backlog-blocking")
                except ratelimit.RateLimitError as e:
                    r = e
                outcomes.append((r, time.monotonic() - t))
                time.sleep(0.002)

        threads = [threading.Thread(target=run) for _ in range(4)]
        started = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(5)
        window = time.monotonic() - started
        toxiproxy.reset()
        after = decisions_run_settled(redis_server, key)
    not_sent = [took for r, took in outcomes if isinstance(r, ratelimit.Backlog)]
    timed_out = sum(1 for r, _ in outcomes if isinstance(r, ratelimit.Timeout))
    decided = sum(1 for r, _ in outcomes if isinstance(r, ratelimit.Result))
    print("\n%d decided, %d timed out, %d not sent (Backlog); Redis ran %d" % (decided, timed_out, len(not_sent),
                                                                            after - before))
    assert decided + timed_out + len(not_sent) == len(outcomes)
    assert not_sent and max(not_sent) < TIMEOUT  # at once
    assert timed_out <= 4 + 2 * window / TIMEOUT  # one at a time once behind (four per timeout without)
    assert decided <= after - before <= decided + timed_out


def test_max_in_flight_is_checked(redis_server):
    for bad in (0, -1, 1000001):
        with pytest.raises(ratelimit.InvalidArgument, match="max_in_flight must be in 1..1000000"):
            ratelimit.Client(redis_server.url, max_in_flight=bad)
    with pytest.raises(TypeError):
        ratelimit.Client(redis_server.url, max_in_flight="10")
    assert issubclass(ratelimit.Backlog, ratelimit.RedisFailure) and ratelimit.Backlog.code == ratelimit._ratelimit.ERR_BACKLOG
