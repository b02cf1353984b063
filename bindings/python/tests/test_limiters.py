"""Every algorithm through the Python API. Most tests pass an explicit clock
(now=, seconds) so the expected numbers are exact; a few use Redis TIME."""
import time

import pytest

import ratelimit

T0 = 1_700_000_000.0  # a multiple of every period used below


def test_fixed_window(client, raw):
    lim = client.limiter("fw", "3/10s", algorithm="fixed_window")
    got = [lim.acquire("u", now=T0 + i) for i in range(4)]
    assert [r.allowed for r in got] == [True, True, True, False]
    assert [r.remaining for r in got] == [2, 1, 0, 0]
    assert got[0].retry_after is None and got[0].limit == 3
    assert got[3].retry_after == pytest.approx(7.0)  # the window opened at T0
    assert not lim.acquire("u", now=T0 + 9.999)
    assert lim.acquire("u", now=T0 + 10.0).remaining == 2
    assert lim.acquire("other", now=T0 + 3).allowed  # ids are independent
    assert raw.exists(lim.key("u"))


def test_sliding_log(client):
    lim = client.limiter("sl", "3/10s", algorithm="sliding_log")
    for i in range(3):
        assert lim.acquire("u", now=T0 + i)
    r = lim.acquire("u", now=T0 + 3)
    assert not r and r.retry_after == pytest.approx(7.0)  # the first permit slides out at T0+10
    assert not lim.acquire("u", now=T0 + 9.999)
    assert lim.acquire("u", now=T0 + 10.001)
    assert not lim.acquire("u", now=T0 + 10.5)  # permits from T0+1, T0+2 and T0+10 are live


def test_sliding_window(client):
    lim = client.limiter("sw", (10, 10.0), algorithm="sliding_window")
    assert lim.acquire("u", 10, now=T0)
    assert not lim.acquire("u", now=T0 + 5)
    # next window, half way: the previous window weighs 10 * 0.5 = 5
    r = lim.acquire("u", 5, now=T0 + 15)
    assert r and r.remaining == 0
    assert not lim.acquire("u", now=T0 + 15)


def test_token_bucket(client):
    lim = client.limiter("tb", "10/second", algorithm="token_bucket", burst=5)
    assert lim.burst == 5
    got = [lim.acquire("u", now=T0) for _ in range(6)]
    assert [r.allowed for r in got] == [True] * 5 + [False]
    assert got[0].limit == 5 and got[4].remaining == 0
    assert got[5].retry_after == pytest.approx(0.1)
    assert lim.acquire("u", now=T0 + 0.1)
    assert not lim.acquire("u", now=T0 + 0.1)
    assert lim.acquire("u", 5, now=T0 + 10)  # refilled to the burst, not beyond
    assert not lim.acquire("u", now=T0 + 10)


def test_leaky_bucket(client):
    lim = client.limiter("lb", "5/second", algorithm="leaky_bucket")  # capacity 5, drains in 1 s
    got = [lim.acquire("u", now=T0) for _ in range(6)]
    assert [r.allowed for r in got] == [True] * 5 + [False]
    assert got[5].retry_after == pytest.approx(0.2)
    assert got[4].reset_after == pytest.approx(1.0)
    assert lim.acquire("u", now=T0 + 0.2)
    assert not lim.acquire("u", now=T0 + 0.2)


def test_gcra(client):
    lim = client.limiter("gcra", "10/second", algorithm="gcra", burst=5)
    got = [lim.acquire("u", now=T0) for _ in range(6)]
    assert [r.allowed for r in got] == [True] * 5 + [False]
    assert got[5].retry_after == pytest.approx(0.1)
    assert lim.acquire("u", now=T0 + 0.1)


@pytest.mark.parametrize("algorithm", ratelimit.ALGORITHMS)
def test_redis_clock_peek_reset(client, raw, algorithm):
    lim = client.limiter("clock-" + algorithm, "4/minute", algorithm=algorithm)
    assert lim.algorithm == algorithm and lim.rate == (4, 60.0) and lim.period == 60.0
    before = lim.peek("u")
    assert before and before.remaining == 4
    assert raw.dbsize() == 0  # peek writes nothing
    admitted = sum(bool(lim.acquire("u")) for _ in range(6))
    assert admitted == 4
    denied = lim.acquire("u")
    assert not denied and denied.retry_after > 0 and not denied.fallback
    assert not lim.peek("u")
    lim.reset("u")
    assert not raw.exists(lim.key("u"))
    assert lim.acquire("u").remaining == 3


def test_permits_and_acquire_many(client, raw):
    lim = client.limiter("many", "10/minute", algorithm="fixed_window")
    assert lim.acquire("a", permits=7).remaining == 3
    assert not lim.acquire("a", 4)
    rs = lim.acquire_many([("a", 3), "b", ("c", 10), (b"d", 11 - 1)])
    assert [r.allowed for r in rs] == [True, True, True, True]
    assert [r.remaining for r in rs] == [0, 9, 0, 0]
    assert lim.acquire_many([]) == []
    assert not lim.acquire_many(["a"])[0]


def test_acquire_many_reports_each_outcome(server, client, raw):
    # victim's key holds another type: Redis refuses that request alone, and
    # what it decided for the others (consumed) is reported
    lim = client.limiter("each", "5/minute", algorithm="fixed_window")
    raw.lpush(lim.key("victim"), "x")
    outcomes = lim.acquire_many([("alice", 2), "victim", ("carol", 5)], return_exceptions=True)
    alice, victim, carol = outcomes
    assert isinstance(alice, ratelimit.Result) and alice.allowed and alice.remaining == 3 and not alice.fallback
    assert isinstance(victim, ratelimit.RedisError) and "WRONGTYPE" in str(victim)
    assert victim.code == ratelimit.RedisError.code and victim.results is None
    assert isinstance(carol, ratelimit.Result) and carol.allowed and carol.remaining == 0
    assert int(raw.hget(lim.key("alice"), "count")) == 2
    # without return_exceptions: the first failure raised, carrying the same list
    with pytest.raises(ratelimit.RedisError) as raised:
        lim.acquire_many([("alice", 2), "victim", ("carol", 5)])
    assert str(raised.value).startswith("request 1: ") and "WRONGTYPE" in str(raised.value)
    alice, victim, carol = raised.value.results
    assert alice.allowed and alice.remaining == 1
    assert isinstance(victim, ratelimit.RedisError)
    assert not carol.allowed
    assert int(raw.hget(lim.key("alice"), "count")) == 4
    # the on_error policy never decides for Redis's own errors
    with ratelimit.Client(server.url, on_redis_error="allow") as open_client:
        loose = open_client.limiter("each", "5/minute", algorithm="fixed_window")
        dave, victim = loose.acquire_many(["dave", "victim"], return_exceptions=True)
        assert dave.allowed and not dave.fallback and isinstance(victim, ratelimit.RedisError)
    # an invalid request: raised whatever was asked, nothing sent
    for return_exceptions in (False, True):
        with pytest.raises(ratelimit.InvalidArgument, match="request 1") as raised:
            lim.acquire_many(["erin", ("frank", 0)], return_exceptions=return_exceptions)
        assert [type(e) for e in raised.value.results] == [ratelimit.InvalidArgument] * 2
        assert str(raised.value.results[0]) == "not sent: request 1 is invalid"
    assert not raw.exists(lim.key("erin"))
    # all fine: the list of Results, as always
    raw.delete(lim.key("victim"))
    rs = lim.acquire_many(["victim", "erin"], return_exceptions=True)
    assert [(r.allowed, r.remaining) for r in rs] == [(True, 4), (True, 4)]
    assert lim.acquire_many([], return_exceptions=True) == []


@pytest.mark.parametrize("algorithm", ["token_bucket", "leaky_bucket", "gcra"])
def test_reserve(client, algorithm):
    lim = client.limiter("res-" + algorithm, "10/second", algorithm=algorithm)
    extra = 0 if algorithm == "leaky_bucket" else 2  # a leaky bucket's queue holds its capacity
    waits = [lim.reserve("u", max_wait=1.0, now=T0) for _ in range(10 + extra)]
    assert waits[0] == 0.0
    assert waits == sorted(waits)  # each booking queues behind the last
    assert waits[-1] == pytest.approx(0.9 if algorithm == "leaky_bucket" else 0.2)
    with pytest.raises(ratelimit.RateLimitExceeded) as info:
        lim.reserve("u", max_wait=0.05, now=T0)
    assert info.value.retry_after > 0 and info.value.result is not None
    assert info.value.code == 0


def test_reserve_sleep_then_go(client):
    lim = client.limiter("res-live", "20/second", algorithm="gcra", burst=1)
    start = time.monotonic()
    for _ in range(5):
        time.sleep(lim.reserve("u", max_wait=1.0))
    assert 0.15 <= time.monotonic() - start < 1.0  # 5 slots 50 ms apart


def test_blocking_acquire_waits_for_the_slot(client):
    lim = client.limiter("wait", "5/second", algorithm="gcra", burst=1)
    assert lim.acquire("u")
    start = time.monotonic()
    r = lim.acquire("u", timeout=2.0)
    took = time.monotonic() - start
    assert r and 0.1 <= took < 1.0
    # a slot beyond the timeout: returns the denied result without sleeping it
    # out (a long timeout, so that a stalled machine cannot look like one)
    slow = client.limiter("wait-slow", "1/minute", algorithm="fixed_window")
    assert slow.acquire("u")
    start = time.monotonic()
    r = slow.acquire("u", timeout=30.0)
    assert not r and time.monotonic() - start < 30.0


def test_decorator(client):
    lim = client.limiter("deco", "2/minute", algorithm="sliding_log")

    class Request:
        def __init__(self, user):
            self.user = user

    @lim.limit(key=lambda request: request.user)
    def handle(request):
        """Handles."""
        return "ok:" + request.user

    assert handle.__doc__ == "Handles." and handle.__name__ == "handle"
    assert handle(Request("ann")) == "ok:ann"
    assert handle(Request("ann")) == "ok:ann"
    with pytest.raises(ratelimit.RateLimitExceeded) as info:
        handle(Request("ann"))
    assert 50 < info.value.retry_after <= 60
    assert isinstance(info.value, ratelimit.RateLimitError)
    assert handle(Request("bob")) == "ok:bob"

    @lim.limit()
    def shared():
        return 1
    assert shared() + shared() == 2
    with pytest.raises(ratelimit.RateLimitExceeded):
        shared()


def test_result_and_limiter_repr(client):
    lim = client.limiter("repr", "1/minute")
    r = lim.acquire("u")
    assert "allowed=True" in repr(r) and "retry_after=None" in repr(r)
    assert "'repr'" in repr(lim) and "gcra" in repr(lim)
    assert isinstance(lim, ratelimit.Limiter)
    with pytest.raises(TypeError):
        ratelimit.Result()


def test_rate_parsing():
    assert ratelimit.parse_rate("10/s") == (10, 1.0)
    assert ratelimit.parse_rate("5 per 30 seconds") == (5, 30.0)
    assert ratelimit.parse_rate("3/500ms") == (3, 0.5)
    with pytest.raises(ratelimit.InvalidArgument, match="unit"):
        ratelimit.parse_rate("10/fortnight")


@pytest.mark.parametrize("algorithm", ratelimit.ALGORITHMS)
def test_retry_after_and_remaining_are_honest(client, algorithm):
    """Random traffic on an explicit clock: a denied request passes at
    now + retry_after, and `remaining` permits can really be taken."""
    import random
    rnd = random.Random(algorithm)
    for trial in range(6):
        limit = rnd.randint(1, 12)
        period = rnd.choice([1000, 3333, 60000])  # ms; long enough that no key expires mid-test
        burst = rnd.randint(1, 15) if algorithm in ("token_bucket", "gcra") and trial % 2 else None
        lim = client.limiter("honest-%d" % trial, (limit, period / 1000), algorithm=algorithm, burst=burst)
        capacity, now = burst or limit, 1_700_000_000_000
        for _ in range(40):
            now += rnd.choice([0, 0, 1, 3, period // 7 + 1, period // 2, period])
            permits = rnd.randint(1, capacity)
            r = lim.acquire("u", permits, now=now / 1000)
            if not r.allowed:
                assert r.retry_after > 0
                later = now + round(r.retry_after * 1000)
                assert lim.peek("u", permits, now=later / 1000), (limit, period, burst, r)
            elif r.remaining > 0:
                assert lim.peek("u", r.remaining, now=now / 1000)


def test_sliding_window_retry_after_on_a_nearly_full_previous_window(client):
    lim = client.limiter("sw-retry", "10000/second", algorithm="sliding_window")
    w0 = T0
    assert lim.acquire("u", 10000, now=w0)            # window 0 full
    assert lim.acquire("u", 1, now=w0 + 1.001)        # window 1: prev=10000, cur=1
    r = lim.acquire("u", 9995, now=w0 + 1.001)        # cannot fit before window 2
    assert not r
    assert r.retry_after > 0, r
    assert lim.peek("u", 9995, now=w0 + 1.001 + r.retry_after)
