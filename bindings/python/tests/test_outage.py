"""Redis down: with on_redis_error allow/deny a client opens anyway, every
call is decided at once by the policy, and decisions come back from Redis
within one reconnect pause once it is up; with raise, opening fails."""
import asyncio
import time

import pytest

import ratelimit
from ratelimit import aio


@pytest.fixture
def dead_url(dead_port):
    return "redis://127.0.0.1:%d/0" % dead_port


@pytest.mark.parametrize("policy, allowed", [("allow", True), ("deny", False)])
def test_opens_while_redis_is_down_and_decides_fast(dead_url, policy, allowed):
    with ratelimit.Client(dead_url, on_redis_error=policy, connect_timeout=0.5) as client:
        lim = client.limiter("down", "5/10s", algorithm="gcra")
        t0 = time.perf_counter()
        results = [lim.acquire("user-%d" % (i % 7)) for i in range(10000)]
        elapsed = time.perf_counter() - t0
        # the bound: an outage must not make each call pay a connect
        assert elapsed < 1.0, "10,000 decisions while Redis is down took %.3f s" % elapsed
        assert all(r.fallback for r in results)
        assert all(bool(r) is allowed for r in results)
        batch = lim.acquire_many(["a", "b", "c"])
        assert all(r.fallback and bool(r) is allowed for r in batch)


def test_raise_fails_to_open(dead_url):
    url = dead_url
    with pytest.raises(ratelimit.ConnectionError) as info:
        ratelimit.Client(url)
    assert info.value.code == ratelimit._ratelimit.ERR_CONNECTION
    assert isinstance(info.value, ConnectionError)  # the builtin too
    with pytest.raises(ratelimit.ConnectionError):
        ratelimit.Client(url, on_redis_error="raise", reconnect_max=0.1)


def test_primitives_without_a_policy_raise_while_down(dead_url):
    # on_redis_error is for rate-limit decisions; a lock cannot be faked
    with ratelimit.Client(dead_url, on_redis_error="allow") as client:
        with pytest.raises((ratelimit.ConnectionError, ratelimit.Timeout)):
            client.lock("l", lease=1.0).try_acquire()


@pytest.mark.parametrize("reconnect_max", [0.25, None])
def test_decisions_resume_within_reconnect_max(dead_port, start_redis, reconnect_max):
    url = "redis://127.0.0.1:%d/0" % dead_port
    pause = 1.0 if reconnect_max is None else reconnect_max
    with ratelimit.Client(url, on_redis_error="allow", reconnect_max=reconnect_max, connect_timeout=0.5) as client:
        lim = client.limiter("resume", "3/10s", algorithm="fixed_window")
        # long enough for the backoff to grow to its cap
        deadline = time.monotonic() + 2 * pause + 0.5
        while time.monotonic() < deadline:
            assert lim.acquire("u").fallback
            time.sleep(0.01)
        server = start_redis(dead_port)
        up = time.monotonic()
        while lim.acquire("probe").fallback:
            assert time.monotonic() - up < pause + 1.0, "still on the fallback %.2f s after Redis came up" % (
                time.monotonic() - up)
            time.sleep(0.005)
        # from Redis again: the limit counts
        assert [bool(lim.acquire("u")) for _ in range(4)] == [True, True, True, False]
        assert not lim.peek("u").fallback
        server.stop()
        # and down again: the policy decides again, at once
        t0 = time.perf_counter()
        results = [lim.acquire("u") for _ in range(1000)]
        assert time.perf_counter() - t0 < 1.0 + 0.5  # at most one connect attempt in there
        assert results[-1].fallback and results[-1].allowed


def test_async_client_opens_while_down(dead_url):
    async def main():
        async with await aio.AsyncClient.connect(dead_url, on_redis_error="deny", reconnect_max=0.5) as client:
            r = await client.limiter("down", "5/10s").acquire("u")
            assert not r and r.fallback
        with pytest.raises(ratelimit.ConnectionError):
            await aio.AsyncClient.connect(dead_url, on_redis_error="raise")
    asyncio.run(main())
