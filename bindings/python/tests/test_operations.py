"""Issue 13 operations: stored specs (configure / get_config / delete_config,
limiters made with rate=None, a change reaching another client within
config_refresh), several rates in one all-or-nothing decision, initial
tokens, per-client quotas, acquire_at_most and refund. Real Redis."""
import asyncio
import threading
import time

import pytest

import ratelimit
from ratelimit import aio

T0 = 1_700_000_000.0  # an explicit clock (seconds) for exact answers


# ---- stored specs ----------------------------------------------------------------------


def test_configure_get_delete(client, raw):
    assert client.get_config("cfg") is None
    assert client.configure("cfg", "10/second;1000/hour", algorithm="token_bucket", burst=[20, None],
                            initial_tokens=5, per_client=True)
    c = client.get_config("cfg")
    assert isinstance(c, ratelimit.LimiterConfig)
    assert (c.algorithm, c.rates, c.bursts, c.initial_tokens, c.per_client) == (
        "token_bucket", ((10, 1.0), (1000, 3600.0)), (20, None), 5, True)
    assert str(c) == "token_bucket 10/second burst 20;1000/hour initial 5 per_client"
    with pytest.raises(AttributeError):
        c.algorithm = "gcra"
    assert raw.exists("rl:config:cfg") and raw.pttl("rl:config:cfg") == -1  # lasts until deleted
    # if_absent keeps what is stored
    assert client.configure("cfg", "1/second", if_absent=True) is False
    assert client.get_config("cfg") == c
    assert client.configure("cfg2", "1/second", if_absent=True) is True
    assert client.get_config("cfg2").rates == ((1, 1.0),)
    assert client.delete_config("cfg") is True
    assert client.delete_config("cfg") is False
    assert client.get_config("cfg") is None


def test_initial_tokens_python_spelling(client):
    # Python's 0 is "empty" (the core's RL_EMPTY), None is "full" (the core's 0)
    client.configure("it0", "10/second", initial_tokens=0)
    assert client.get_config("it0").initial_tokens == 0
    assert str(client.get_config("it0")).endswith("initial 0")
    client.configure("itn", "10/second")
    assert client.get_config("itn").initial_tokens is None
    with pytest.raises(ratelimit.InvalidArgument, match="initial_tokens"):
        client.configure("bad", "10/second", initial_tokens=-1)
    with pytest.raises(ratelimit.InvalidArgument, match="initial tokens apply"):
        client.configure("bad", "10/second", algorithm="fixed_window", initial_tokens=3)


def test_stored_limiter_uses_the_stored_spec(client):
    client.configure("st", (3, 60), algorithm="fixed_window")
    lim = client.limiter("st")
    assert lim.stored and lim.algorithm == "fixed_window" and lim.rate == (3, 60.0)
    assert repr(lim) == "<Limiter 'st': the spec stored in Redis>"
    assert [lim.acquire("u").allowed for _ in range(4)] == [True, True, True, False]
    assert lim.key("u") == "rl:{st:u}:fixed_window"
    lim.reset("u")
    assert lim.acquire("u").remaining == 2


def test_stored_limiter_nothing_stored(client, server):
    with pytest.raises(ratelimit.InvalidArgument, match="no configuration is stored for limiter 'none'"):
        client.limiter("none")
    with pytest.raises(ratelimit.InvalidArgument, match="rate=None uses the spec stored"):
        client.limiter("none", algorithm="gcra")
    # stored, then deleted: the limiter fails once its cache expires
    c2 = ratelimit.Client(server.url, config_refresh=0.05)
    try:
        c2.configure("gone", "5/second")
        lim = c2.limiter("gone")
        assert lim.acquire("u")
        c2.delete_config("gone")
        time.sleep(0.1)
        with pytest.raises(ratelimit.InvalidArgument, match="no configuration is stored for limiter 'gone'"):
            lim.acquire("u")
    finally:
        c2.close()


def test_explicit_rate_must_agree_with_the_stored_one(client):
    client.configure("agree", "10/second", burst=10)
    client.limiter("agree", "10/second")  # burst 10 == the limit: the same spec
    client.limiter("agree", (10, 1.0), burst=10)
    with pytest.raises(ratelimit.InvalidArgument) as e:
        client.limiter("agree", "20/second")
    assert "gcra 10/second" in str(e.value) and "gcra 20/second" in str(e.value)
    with pytest.raises(ratelimit.InvalidArgument, match="per_client"):
        client.limiter("agree", "10/second", per_client=True)


def test_stored_limiter_made_during_an_outage(fresh_server):
    url = fresh_server.url
    setup = ratelimit.Client(url)
    setup.configure("out", "2/minute")
    setup.close()
    fresh_server.stop()
    for policy, allowed in (("allow", True), ("deny", False)):
        c = ratelimit.Client(url, on_redis_error=policy, connect_timeout=0.2, timeout=0.2)
        try:
            lim = c.limiter("out")  # no failure while Redis is down
            r = lim.acquire("u")
            assert r.fallback and r.allowed is allowed
            lim2 = c.limiter("other", "5/second")  # the check is skipped too
            assert lim2.acquire("u").fallback
        finally:
            c.close()


def test_a_change_reaches_another_client_within_config_refresh(server, raw):
    a = ratelimit.Client(server.url, config_refresh=0.2)
    b = ratelimit.Client(server.url, config_refresh=0.2)
    try:
        a.configure("live", (2, 60), algorithm="fixed_window")
        lim = b.limiter("live")
        assert [lim.acquire("u").allowed for _ in range(3)] == [True, True, False]
        a.configure("live", (5, 60), algorithm="fixed_window")  # the window keeps its count
        deadline = time.monotonic() + 0.2 + 0.5
        while lim.peek("u").limit != 5:
            assert time.monotonic() < deadline, "b never saw the new spec"
            time.sleep(0.02)
        assert [lim.acquire("u").allowed for _ in range(4)] == [True, True, True, False]
        assert lim.config.rates == ((5, 60.0),)
    finally:
        a.close()
        b.close()


# ---- several rates ----------------------------------------------------------------------


def test_rate_forms(client):
    assert client.limiter("f1", "10/second;1000/hour").rates == ((10, 1.0), (1000, 3600.0))
    assert client.limiter("f2", ["10/second", (1000, 3600)]).rates == ((10, 1.0), (1000, 3600.0))
    assert client.limiter("f3", ("10/second", "100/minute")).rates == ((10, 1.0), (100, 60.0))
    assert client.limiter("f4", (10, 1)).rates == ((10, 1.0),)
    assert client.limiter("f5", "2/week").rates == ((2, 604800.0),)
    lim = client.limiter("f6", "10/second;1000/hour", burst=20)
    assert lim.bursts == (20, None) and lim.burst == 20
    assert client.limiter("f7", "10/second;1000/hour", burst=[None, 2000]).bursts == (None, 2000)
    with pytest.raises(ratelimit.InvalidArgument, match="one value per rate"):
        client.limiter("f8", "10/second;1000/hour", burst=[1, 2, 3])
    with pytest.raises(ratelimit.InvalidArgument, match="1..8 rates"):
        client.limiter("f9", ["1/second"] * 9)
    with pytest.raises(ratelimit.InvalidArgument, match="1..8 rates"):
        client.limiter("f9", [])
    with pytest.raises(TypeError):
        client.limiter("f9", [1.5])
    with pytest.raises(ratelimit.InvalidArgument, match="burst applies to token_bucket and gcra"):
        client.limiter("f9", "10/second;100/minute", algorithm="fixed_window", burst=[None, 5])
    # parse_rate accepts what limiter() accepts for one rate
    for text in ("10/second", "5 per 30 seconds", "3/500ms", "2/week", "3/month", "1/year"):
        assert ratelimit.parse_rate(text) == client.limiter("pr", text).rate


def test_multi_rate_all_or_nothing(client, raw):
    lim = client.limiter("mr", "3/second;5/minute", algorithm="fixed_window")
    got = [lim.acquire("u", now=T0 + i * 0.01) for i in range(4)]
    assert [r.allowed for r in got] == [True, True, True, False]
    assert got[2].rate_index == 0 and got[3].rate_index == 0
    # the next second: the per-second rate has room, the per-minute one has 2
    r = lim.acquire("u", 3, now=T0 + 1.5)
    assert not r.allowed and r.rate_index == 1 and r.granted == 0
    assert [lim.acquire("u", now=T0 + 1.5 + i * 0.01).allowed for i in range(3)] == [True, True, False]
    assert lim.keys("u") == ["rl:{mr:u}:fixed_window", "rl:{mr:u}:fixed_window:2"]
    assert all(raw.exists(k) for k in lim.keys("u"))
    lim.reset("u")
    assert not any(raw.exists(k) for k in lim.keys("u"))


def test_multi_rate_threads_never_above_any_rate(server, raw):
    c = ratelimit.Client(server.url, pool_size=8)
    lim = c.limiter("mrt", [(20, 60), (12, 3600)], algorithm="sliding_log")
    admitted = []

    def run():
        for _ in range(10):
            admitted.append(lim.acquire("k").allowed)
    try:
        threads = [threading.Thread(target=run) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(admitted) == 12  # the tighter rate, exactly
        assert raw.zcard("rl:{mrt:k}:sliding_log") == raw.zcard("rl:{mrt:k}:sliding_log:2") == 12
    finally:
        c.close()


def test_multi_rate_aio_never_above_any_rate(server, raw):
    async def main():
        c = await aio.AsyncClient.connect(server.url)
        try:
            lim = c.limiter("mra", "30/minute;17/hour", algorithm="gcra")
            rs = await asyncio.gather(*(lim.acquire("k") for _ in range(100)))
            assert sum(r.allowed for r in rs) == 17
            assert all(r.rate_index == 1 for r in rs if not r.allowed)
            many = await lim.acquire_many(["k"] * 5)
            assert not any(many)
        finally:
            await c.close()
    asyncio.run(main())


# ---- acquire_at_most and refund, per algorithm --------------------------------------------


@pytest.mark.parametrize("algorithm", ratelimit.ALGORITHMS)
def test_acquire_at_most(client, algorithm):
    lim = client.limiter("up-" + algorithm, (5, 60), algorithm=algorithm)
    r = lim.acquire_at_most("u", 3, now=T0)
    assert r.allowed and r.granted == 3 and r.remaining == 2
    r = lim.acquire_at_most("u", 10, now=T0)  # more than the capacity: what there is
    assert r.allowed and r.granted == 2 and r.remaining == 0
    r = lim.acquire_at_most("u", 10, now=T0)
    assert not r.allowed and r.granted == 0 and r.retry_after is not None
    with pytest.raises(ratelimit.InvalidArgument, match="permits"):
        lim.acquire_at_most("u", 0, now=T0)
    assert lim.acquire("v", now=T0).granted == 1
    assert lim.peek("v", 2, now=T0).granted == 2


@pytest.mark.parametrize("algorithm", ["token_bucket", "gcra", "leaky_bucket", "fixed_window", "sliding_window"])
def test_refund(client, algorithm):
    lim = client.limiter("rf-" + algorithm, (5, 60), algorithm=algorithm)
    assert lim.acquire("u", 4, now=T0).remaining == 1
    r = lim.refund("u", 2, now=T0)
    assert r.granted == 2 and r.remaining == 3
    r = lim.refund("u", 5, now=T0)  # never above full
    assert r.granted == 5 and r.remaining == 5
    assert lim.acquire("u", 5, now=T0).allowed


def test_refund_sliding_log(client):
    lim = client.limiter("rf-sl", (5, 60), algorithm="sliding_log")
    lim.acquire("u", 4, now=T0)
    r = lim.refund("u", 2, now=T0)
    assert r.remaining == min(5, 1 + r.granted) and 0 <= r.granted <= 2


def test_refund_multi_rate(client):
    lim = client.limiter("rfm", "5/minute;8/hour", algorithm="token_bucket")
    lim.acquire("u", 4, now=T0)
    r = lim.refund("u", 3, now=T0)
    assert r.granted == 3 and r.remaining == 4
    assert lim.acquire_at_most("u", 10, now=T0).granted == 4


def test_aio_acquire_at_most_and_refund(server, raw):
    async def main():
        c = await aio.AsyncClient.connect(server.url)
        try:
            lim = c.limiter("aup", (5, 60), algorithm="token_bucket")
            r = await lim.acquire_at_most("u", 9, now=T0)
            assert r.granted == 5 and r.remaining == 0
            r = await lim.refund("u", 2, now=T0)
            assert r.granted == 2 and r.remaining == 2
            assert lim.rates == ((5, 60.0),) and lim.initial_tokens is None
        finally:
            await c.close()
    asyncio.run(main())


# ---- initial tokens -------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["token_bucket", "gcra", "leaky_bucket"])
def test_initial_tokens_empty_refills(client, algorithm):
    empty = client.limiter("it-e-" + algorithm, (10, 10), algorithm=algorithm, initial_tokens=0)
    assert not empty.acquire("u", now=T0).allowed
    assert empty.acquire("u", now=T0 + 1.0).allowed  # one refilled in a second


@pytest.mark.parametrize("algorithm", ["token_bucket", "gcra", "leaky_bucket"])
def test_initial_tokens(client, algorithm):
    empty = client.limiter("it-e-" + algorithm, (10, 10), algorithm=algorithm, initial_tokens=0)
    assert empty.initial_tokens == 0
    r = empty.acquire("u", now=T0)
    assert not r.allowed and r.remaining == 0 and r.retry_after == 1.0
    some = client.limiter("it-3-" + algorithm, (10, 10), algorithm=algorithm, initial_tokens=3)
    assert some.peek("u", now=T0).remaining == 3
    assert some.acquire("u", 3, now=T0).allowed and not some.acquire("u", now=T0).allowed
    full = client.limiter("it-f-" + algorithm, (10, 10), algorithm=algorithm)
    assert full.initial_tokens is None and full.acquire("u", 10, now=T0).allowed


# ---- per-client quotas ------------------------------------------------------------------------


def test_per_client_isolation(server, raw):
    a = ratelimit.Client(server.url)
    b = ratelimit.Client(server.url)
    try:
        assert a.client_id != b.client_id and len(a.client_id) == 32
        la = a.limiter("pc", (2, 60), algorithm="fixed_window", per_client=True)
        lb = b.limiter("pc", (2, 60), algorithm="fixed_window", per_client=True)
        assert la.per_client
        assert [la.acquire("u").allowed for _ in range(3)] == [True, True, False]
        assert [lb.acquire("u").allowed for _ in range(3)] == [True, True, False]  # a quota of its own
        assert la.key("u") == "rl:{pc:u%%P%s}:fixed_window" % a.client_id
        assert raw.exists(la.key("u")) and raw.exists(lb.key("u"))
        # overall (the default) is one quota for both
        oa = a.limiter("ov", (2, 60), algorithm="fixed_window")
        ob = b.limiter("ov", (2, 60), algorithm="fixed_window")
        assert oa.acquire("u") and ob.acquire("u") and not oa.acquire("u") and not ob.acquire("u")
    finally:
        a.close()
        b.close()


def test_client_id_keeps_the_quota_across_a_reopen(server, raw):
    c = ratelimit.Client(server.url, client_id="pod-7.a_b")
    assert c.client_id == "pod-7.a_b"
    c.limiter("pcr", (2, 60), algorithm="fixed_window", per_client=True).acquire("u", 2)
    c.close()
    c = ratelimit.Client(server.url, client_id="pod-7.a_b")
    try:
        assert not c.limiter("pcr", (2, 60), algorithm="fixed_window", per_client=True).acquire("u").allowed
    finally:
        c.close()
    fresh = ratelimit.Client(server.url)
    try:
        assert fresh.limiter("pcr", (2, 60), algorithm="fixed_window", per_client=True).acquire("u").allowed
    finally:
        fresh.close()
    for bad in ("has space", "x" * 65, "brace{"):
        with pytest.raises(ratelimit.InvalidArgument, match="client_id"):
            ratelimit.Client(server.url, client_id=bad)
    with pytest.raises(ratelimit.InvalidArgument, match="client_id"):
        ratelimit.Client(server.url, client_id="")
    with pytest.raises(TypeError):
        ratelimit.Client(server.url, client_id=7)


def test_per_client_stored_spec(server, raw):
    a = ratelimit.Client(server.url, client_id="one")
    b = ratelimit.Client(server.url, client_id="two")
    try:
        a.configure("pcs", (1, 60), algorithm="fixed_window", per_client=True)
        assert a.limiter("pcs").acquire("u") and not a.limiter("pcs").acquire("u")
        assert b.limiter("pcs").acquire("u")
        assert sorted(k.decode() for k in raw.keys("rl:{pcs*")) == [
            "rl:{pcs:u%Pone}:fixed_window", "rl:{pcs:u%Ptwo}:fixed_window"]
    finally:
        a.close()
        b.close()


def test_config_refresh_option(server):
    with pytest.raises(ratelimit.InvalidArgument, match="config_refresh"):
        ratelimit.Client(server.url, config_refresh=0)
    ratelimit.Client(server.url, config_refresh=2.5).close()


def test_aio_stored_spec_and_configure(server, raw):
    async def main():
        c = await aio.AsyncClient.connect(server.url, client_id="aio-1", config_refresh=0.1)
        try:
            assert c.client_id == "aio-1"
            assert await c.configure("acf", (2, 60), algorithm="fixed_window")
            assert (await c.get_config("acf")).algorithm == "fixed_window"
            lim = c.limiter("acf")
            rs = [await lim.acquire("u") for _ in range(3)]
            assert [r.allowed for r in rs] == [True, True, False]
            assert await c.delete_config("acf")
            assert await c.get_config("acf") is None
        finally:
            await c.close()
    asyncio.run(main())


def test_aio_stored_spec_during_an_outage(fresh_server):
    url = fresh_server.url
    setup = ratelimit.Client(url)
    setup.configure("aout", "2/minute")
    setup.close()

    async def main():
        c = await aio.AsyncClient.connect(url, on_redis_error="allow", connect_timeout=0.2, timeout=0.2)
        try:
            lim = c.limiter("aout")
            fresh_server.stop()
            await asyncio.sleep(1.1)  # past the config cache
            r = await lim.acquire("u")
            assert r.fallback and r.allowed
        finally:
            await c.close()
    asyncio.run(main())
