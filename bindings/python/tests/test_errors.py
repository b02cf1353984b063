"""Every bad input raises at once, names the parameter, and writes nothing."""
from pathlib import Path

import pytest

import ratelimit
from ratelimit import InvalidArgument


@pytest.fixture
def lim(client):
    return client.limiter("ok", "10/minute", algorithm="token_bucket")


def check(raw, exc, words, func, *args, **kwargs):
    with pytest.raises(exc) as info:
        func(*args, **kwargs)
    message = str(info.value)
    for word in words.split():
        assert word in message, message
    if isinstance(info.value, ratelimit.RateLimitError):
        assert info.value.code == ratelimit._ratelimit.ERR_INVALID
    assert raw.dbsize() == 0


def test_exception_hierarchy():
    assert issubclass(InvalidArgument, ValueError) and issubclass(InvalidArgument, ratelimit.RateLimitError)
    assert issubclass(ratelimit.ConnectionError, ConnectionError)
    assert issubclass(ratelimit.Timeout, TimeoutError)
    assert issubclass(ratelimit.AcquireTimeout, TimeoutError)
    for name in ("ConnectionError", "Timeout", "RedisError", "ProtocolError", "Cancelled", "ClientClosed",
                 "RateLimitExceeded", "AcquireTimeout", "RedisFailure", "NotAcquired"):
        assert issubclass(getattr(ratelimit, name), ratelimit.RateLimitError)
    # the table in docs/errors.md: a handler for Redis failures never catches
    # a denial or a busy lock, and the other way round
    failures = ("ConnectionError", "Timeout", "ProtocolError", "RedisError", "ClientClosed")
    answers = ("RateLimitExceeded", "AcquireTimeout")
    for name in failures:
        assert issubclass(getattr(ratelimit, name), ratelimit.RedisFailure), name
        assert not issubclass(getattr(ratelimit, name), ratelimit.NotAcquired), name
    for name in answers:
        assert issubclass(getattr(ratelimit, name), ratelimit.NotAcquired), name
        assert not issubclass(getattr(ratelimit, name), ratelimit.RedisFailure), name
    for name in ("InvalidArgument", "Cancelled"):
        assert not issubclass(getattr(ratelimit, name), (ratelimit.RedisFailure, ratelimit.NotAcquired)), name
    from ratelimit import aio
    for name in failures + answers + ("RedisFailure", "NotAcquired"):
        assert getattr(aio, name) is getattr(ratelimit, name)
    e = ratelimit.RateLimitExceeded(2.5)
    assert e.retry_after == 2.5 and "2.500" in str(e) and e.code == 0


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(url="http://127.0.0.1"), InvalidArgument, "redis://"),
    (dict(url=""), InvalidArgument, "empty"),
    (dict(url=5), TypeError, "url"),
    (dict(timeout=-1), InvalidArgument, "timeout"),
    (dict(timeout=0), InvalidArgument, "timeout 0.001 seconds"),
    (dict(connect_timeout=0.0001), InvalidArgument, "connect_timeout 0.001 seconds"),
    (dict(timeout="1"), TypeError, "timeout"),
    (dict(connect_timeout=float("nan")), InvalidArgument, "connect_timeout"),
    (dict(pool_size=0), InvalidArgument, "pool_size 1..1024"),
    (dict(pool_size=2**40), InvalidArgument, "pool_size 1..1024"),
    (dict(pool_size=2.0), TypeError, "pool_size"),
    (dict(on_redis_error="maybe"), InvalidArgument, "on_redis_error"),
    (dict(on_redis_error=1), TypeError, "on_redis_error"),
    (dict(prefix=""), InvalidArgument, "key_prefix"),
    (dict(prefix=b"rl"), TypeError, "prefix"),
    (dict(ssl_cert_reqs="optional"), InvalidArgument, "ssl_cert_reqs 'optional' supported"),
    (dict(ssl_cert_reqs="maybe"), InvalidArgument, "ssl_cert_reqs 'required' 'none'"),
    (dict(ssl_cert_reqs=1), InvalidArgument, "ssl_cert_reqs CERT_OPTIONAL"),
    (dict(ssl_cert_reqs=7), InvalidArgument, "ssl_cert_reqs"),
    (dict(ssl_cert_reqs=True), TypeError, "ssl_cert_reqs"),
    (dict(ssl_cert_reqs=2.0), TypeError, "ssl_cert_reqs"),
    (dict(ssl_ca_certs=5), TypeError, "ssl_ca_certs path"),
    (dict(ssl_certfile=True), TypeError, "ssl_certfile"),
    (dict(ssl_keyfile=["k"]), TypeError, "ssl_keyfile"),
    (dict(ssl_ca_certs="a\0b"), InvalidArgument, "ssl_ca_certs NUL"),
    (dict(ssl_ca_certs=""), InvalidArgument, "TLS empty"),
    (dict(ssl_ca_certs="/etc/ssl/ca.pem"), InvalidArgument, "TLS rediss://"),
    (dict(ssl_cert_reqs="none"), InvalidArgument, "TLS rediss://"),
    (dict(reconnect_max=-1), InvalidArgument, "reconnect_max"),
    (dict(reconnect_max=0), InvalidArgument, "reconnect_max"),
    (dict(reconnect_max=0.0001), InvalidArgument, "reconnect_max"),
    (dict(reconnect_max=float("inf")), InvalidArgument, "reconnect_max"),
    (dict(reconnect_max=1000.0), InvalidArgument, "reconnect_max"),
    (dict(reconnect_max=1e12), InvalidArgument, "reconnect_max"),
    (dict(reconnect_max="1"), TypeError, "reconnect_max"),
])
def test_bad_client_options(server, raw, kwargs, exc, words):
    kwargs.setdefault("url", server.url)
    check(raw, exc, words, ratelimit.Client, **kwargs)


@pytest.mark.parametrize("args, kwargs, exc, words", [
    (("x", "10/fortnight"), {}, InvalidArgument, "unit"),
    (("x", "0/second"), {}, InvalidArgument, "positive"),
    (("x", 10), {}, TypeError, "rate"),
    (("x", (10,)), {}, TypeError, "rate"),
    (("x", (10, "1s")), {}, TypeError, "period"),
    (("x", (10, -1.0)), {}, InvalidArgument, "period"),
    (("x", "10/s"), dict(algorithm="nope"), InvalidArgument, "algorithm"),
    (("x", "10/s"), dict(algorithm=3), TypeError, "algorithm"),
    (("x", "10/s"), dict(burst=1.5), TypeError, "burst"),
    ((1, "10/s"), {}, TypeError, "name"),
    (("", "10/s"), {}, InvalidArgument, "name"),
])
def test_bad_limiter_construction(client, raw, args, kwargs, exc, words):
    check(raw, exc, words, client.limiter, *args, **kwargs)


@pytest.mark.parametrize("rate, kwargs, words", [
    ((0, 1.0), dict(algorithm="fixed_window"), "limit"),
    ((10, 0.0), dict(algorithm="fixed_window"), "period must be in 0.001.. seconds (got 0)"),
    ("10/s", dict(algorithm="fixed_window", burst=5), "burst"),
    ("10/s", dict(algorithm="gcra", burst=-1), "burst"),
    ("2000000000000000/s", dict(algorithm="sliding_log"), "sliding_log"),
])
def test_bad_spec_is_refused_when_the_limiter_is_made(client, raw, rate, kwargs, words):
    check(raw, InvalidArgument, words, client.limiter, "spec", rate, **kwargs)


@pytest.mark.parametrize("method, args, kwargs, exc, words", [
    ("acquire", ("",), {}, InvalidArgument, "id"),
    ("acquire", (None,), {}, TypeError, "id"),
    ("acquire", (42,), {}, TypeError, "id"),
    ("acquire", ("a\0b",), {}, InvalidArgument, "id NUL"),
    ("acquire", ("x" * (2 ** 20 + 1),), {}, InvalidArgument, "id"),  # ids up to 1 MiB (RL_ID_MAX)
    ("acquire", ("u", 0), {}, InvalidArgument, "permits"),
    ("acquire", ("u", 11), {}, InvalidArgument, "permits"),
    ("acquire", ("u", "1"), {}, TypeError, "permits"),
    ("acquire", ("u", 1.0), {}, TypeError, "permits"),
    ("acquire", ("u", 2 ** 70), {}, InvalidArgument, "permits"),
    ("acquire", ("u",), dict(timeout=-0.5), InvalidArgument, "timeout"),
    ("acquire", ("u",), dict(timeout="soon"), TypeError, "timeout"),
    ("acquire", ("u",), dict(cancel=5), TypeError, "cancel"),
    ("acquire", ("u",), dict(now=-1), InvalidArgument, "now"),
    ("acquire", ("u",), dict(now=1e12), InvalidArgument, "now is too large (max 2251799813.685 seconds, got 1000000000000)"),
    ("peek", ("u", -3), {}, InvalidArgument, "permits"),
    ("reset", ("",), {}, InvalidArgument, "id"),
    ("reset", (b"",), {}, InvalidArgument, "id"),
    ("key", (3,), {}, TypeError, "id"),
    ("reserve", ("u",), dict(max_wait=-1), InvalidArgument, "max_wait"),
    ("reserve", ("u", 0), {}, InvalidArgument, "permits"),
    ("acquire_many", ([("a", 1), ("", 1)],), {}, InvalidArgument, "request 1 id"),
    ("acquire_many", ([("a", 1), ("b", 0)],), {}, InvalidArgument, "request 1 permits"),
    ("acquire_many", ([("a", 1, 2)],), {}, TypeError, "requests[0]"),
    ("acquire_many", ("abc",), {}, TypeError, "requests"),
    ("acquire_many", (5,), {}, TypeError, "requests"),
])
def test_bad_limiter_calls(lim, raw, method, args, kwargs, exc, words):
    check(raw, exc, words, getattr(lim, method), *args, **kwargs)


def test_reserve_needs_a_queueing_algorithm(client, raw):
    lim = client.limiter("fw", "10/s", algorithm="fixed_window")
    check(raw, InvalidArgument, "reserve fixed_window", lim.reserve, "u", max_wait=1.0)


@pytest.mark.parametrize("make, words", [
    (lambda c, url: c.limiter("x", "10/s", algorithm="gcra", burst=2 ** 50), "burst is too large for this rate (max"),
    (lambda c, url: c.limiter("x", "10/s", algorithm="sliding_window").peek("u", 11), "permits (11) exceed what the sliding_window limiter can hold (10)"),
    (lambda c, url: c.limiter("x", (10, 1e10), algorithm="fixed_window"), "period is too large (max 3153600000 seconds"),
    (lambda c, url: c.limiter("x", "99999999999999999999/s"), "too large (max 4503599627370496)"),
    (lambda c, url: c.limiter("x", "10/s", algorithm="gcra").reserve("u", max_wait=1e10), "max_wait is too large"),
    (lambda c, url: c.semaphore("s", permits=2, lease=1e13).try_acquire(), "lease is too large (max"),
    (lambda c, url: c.delay_queue("q").push("m", delay=1e13), "delay is too large (max"),
    (lambda c, url: ratelimit.Client(url, reconnect_max=1000.0), "reconnect_max is too large (max 600 seconds, got 1000)"),
])
def test_messages_speak_seconds_and_python_names(client, raw, server, make, words):
    """A caller who passed seconds hears seconds and the names it used, not
    the C API's period_ms / timeout_ms / microseconds."""
    with pytest.raises(InvalidArgument) as info:
        make(client, server.url)
    message = str(info.value)
    assert words in message, message
    assert "_ms" not in message and "(us)" not in message and "whole number" not in message, message
    assert raw.dbsize() == 0


@pytest.mark.parametrize("text", [
    "10/s", "3/500ms", "5 per 30 seconds", "4503599627370496/s", "4503599627370497/s",
    "99999999999999999999/s", "1/36500 days", "1/36501 days", "0/s", "10/fortnight", "10",
    "100000000/1ms",
])
def test_parse_rate_accepts_exactly_what_limiter_accepts(client, text):
    def outcome(call):
        try:
            call()
            return None
        except InvalidArgument as e:
            return str(e)
    parsed = outcome(lambda: ratelimit.parse_rate(text))
    made = outcome(lambda: client.limiter("x", text))
    assert (parsed is None) == (made is None), (text, parsed, made)
    assert parsed == made


def test_bad_primitive_calls(client, raw):
    check(raw, InvalidArgument, "permits", client.semaphore("s", permits=0, lease=1.0).acquire, 1.0)
    check(raw, InvalidArgument, "permits", client.semaphore("s", permits=0, lease=1.0).available)
    check(raw, TypeError, "permits", client.semaphore("s", permits="2", lease=1.0).try_acquire)
    check(raw, InvalidArgument, "lease", client.semaphore("s", permits=2, lease=0).acquire, 1.0)
    check(raw, InvalidArgument, "lease", client.semaphore("s", permits=2, lease=-1.0).try_acquire)
    check(raw, InvalidArgument, "timeout", client.semaphore("s", permits=2, lease=1.0).acquire, -1)
    check(raw, InvalidArgument, "name", client.semaphore("", permits=2, lease=1.0).acquire, 1.0)
    check(raw, TypeError, "name", client.semaphore, 7, 2, 1.0)
    check(raw, InvalidArgument, "lease", client.lock("l", lease=0).acquire, 1.0)
    check(raw, TypeError, "lease", client.lock("l", lease="10s").acquire, 1.0)
    check(raw, InvalidArgument, "name", client.lock("", lease=1.0).try_acquire)
    q = client.delay_queue("q")
    check(raw, InvalidArgument, "message", q.push, "")
    check(raw, TypeError, "message", q.push, 5)
    check(raw, InvalidArgument, "delay", q.push, "m", delay=-1)
    check(raw, InvalidArgument, "max", q.pop_ready, max=0)
    check(raw, InvalidArgument, "max", q.pop, max=-1, timeout=0.1)
    check(raw, TypeError, "max", q.pop_ready, max="3")
    check(raw, InvalidArgument, "queue", client.delay_queue("").push, "m")
    check(raw, InvalidArgument, "message", q.remove, b"")


def test_closed_client(server, raw):
    c = ratelimit.Client(server.url)
    lim = c.limiter("x", "1/s")
    c.close()
    c.close()
    assert c.closed
    with pytest.raises(ratelimit.ClientClosed) as info:
        lim.acquire("u")
    assert info.value.code == ratelimit._ratelimit.ERR_CLOSED
    with ratelimit.Client(server.url) as c2:
        assert c2.limiter("x", "1/s").acquire("u")
    assert c2.closed


def test_good_client_options(server, raw):
    import datetime
    import pathlib
    # a path-like TLS option on a plain URL is refused like a str one
    check(raw, InvalidArgument, "rediss://", ratelimit.Client, server.url, ssl_certfile=pathlib.Path("/c.pem"))
    with ratelimit.Client(server.url, reconnect_max=datetime.timedelta(milliseconds=250), connect_timeout=0.5,
                          timeout=0.5) as c:
        assert c.limiter("x", "1/s").acquire("u")
    with ratelimit.Client(server.url, reconnect_max=600, ssl_ca_certs=None, ssl_certfile=None, ssl_keyfile=None,
                          ssl_cert_reqs=None) as c:
        assert c.limiter("y", "1/s").acquire("u")


# tests/vectors/url_secrets.txt (shared with C and Java): every password is
# S3cr<sep>Xy9z, every sentinel password T0p<sep>Qw8k; no half of one may show
# in an exception, its repr or traceback, or a log line.
SECRET_PARTS = ("S3cr", "Xy9z", "T0p", "Qw8k")
URLS_WITH_PASSWORDS = [line.split()[0] for line in
                       (Path(__file__).resolve().parents[3] / "tests" / "vectors" / "url_secrets.txt")
                       .read_text().splitlines() if line.strip() and not line.startswith("#")]


def _everything_said(error, caplog):
    import traceback
    # the three-argument form: CPython 3.9 has no other
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return "\n".join([str(error), repr(error), repr(error.args), trace, caplog.text])


@pytest.mark.parametrize("url", URLS_WITH_PASSWORDS)
def test_no_password_in_exceptions_or_logs(url, caplog):
    import asyncio
    import logging
    from ratelimit import aio
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ratelimit.RateLimitError) as info:
        ratelimit.Client(url, timeout=0.3, connect_timeout=0.3)
    said = _everything_said(info.value, caplog)
    assert not [p for p in SECRET_PARTS if p in said], said

    async def connect():
        await aio.AsyncClient.connect(url, timeout=0.3, connect_timeout=0.3)
    with pytest.raises(ratelimit.RateLimitError) as info:
        asyncio.run(connect())
    said = _everything_said(info.value, caplog)
    assert not [p for p in SECRET_PARTS if p in said], said


def test_no_password_in_a_working_clients_reprs_and_errors(fresh_server, caplog):
    import asyncio
    import logging
    from ratelimit import aio
    caplog.set_level(logging.DEBUG)
    fresh_server.raw().config_set("requirepass", "S3cr.Xy9z")
    url = "redis://:S3cr.Xy9z@127.0.0.1:%d/0" % fresh_server.port
    client = ratelimit.Client(url, timeout=0.3, on_redis_error="raise")
    aclient = aio.AsyncClient(url, timeout=0.3)
    lim = client.limiter("secret-repr", "10/s")
    said = [repr(client), str(client), repr(aclient), repr(lim), repr(lim.acquire("u"))]
    fresh_server.pause()
    try:
        with pytest.raises(ratelimit.RedisFailure) as info:
            lim.acquire("u")
        said.append(_everything_said(info.value, caplog))
    finally:
        fresh_server.resume()
    asyncio.run(aclient.close())
    client.close()
    said.append(repr(client))
    assert not [p for p in SECRET_PARTS if p in "\n".join(said)], said
