"""The shared parts: keys, the header format, and ratelimit.testing."""
import socket
import subprocess
import sys
import textwrap

import pytest

import ratelimit
from ratelimit.contrib import _common
from ratelimit.contrib._common import Decision, RequestView, Rule, as_key, ceil_seconds, response_headers
from ratelimit.testing import RedisServer, RedisServerNotFound, redis_server


class View(RequestView):
    """A request made of a peer, a header dict and a user id."""

    __slots__ = ("_peer", "_headers", "_user")

    def __init__(self, peer="10.0.0.9", headers=None, user=None, trusted_proxies=0):
        super().__init__({"peer": peer}, trusted_proxies)
        self._peer, self._headers, self._user = peer, {k.lower(): v for k, v in (headers or {}).items()}, user

    def peer(self):
        return self._peer

    def header(self, name):
        return self._headers.get(name)

    def user_id(self):
        return self._user


@pytest.mark.parametrize("trusted,xff,expected", [
    (0, "1.1.1.1", "10.0.0.9"),                      # never trusted by default
    (1, "1.1.1.1", "1.1.1.1"),
    (1, "6.6.6.6, 1.1.1.1", "1.1.1.1"),              # the client wrote 6.6.6.6 itself
    (2, "6.6.6.6, 1.1.1.1, 10.0.0.2", "1.1.1.1"),
    (2, "1.1.1.1", "10.0.0.9"),                      # fewer hops than proxies: the peer
    (1, None, "10.0.0.9"),
    (1, " 2001:db8::1 ", "2001:db8::1"),
])
def test_client_address(trusted, xff, expected):
    view = View(headers={"X-Forwarded-For": xff} if xff else {}, trusted_proxies=trusted)
    assert as_key("remote_addr")(view) == expected


def test_masked_url():
    assert _common.masked_url("redis://:s3cret@h:6379/0") == "redis://:***@h:6379/0"
    assert _common.masked_url("rediss://user:p@ss@h/0") == "rediss://user:***@h/0"
    assert _common.masked_url("redis://h:6379/0") == "redis://h:6379/0"
    # the core's redaction: what follows a secret option may be the rest of it
    assert _common.masked_url("redis+sentinel://:pw@h1:26379,h2:26379/m/0?sentinel_password=x&db=1") == (
        "redis+sentinel://:***@h1:26379,h2:26379/m/0?sentinel_password=***")
    assert _common.masked_url(None) == "the default URL"


def test_outage_logging(caplog):
    """One warning when decisions start falling back, one when Redis decides again; none per request."""
    settings = _common.Settings("redis://:pw@127.0.0.1:1/0", on_redis_error="deny")
    caplog.set_level("INFO", logger="ratelimit.contrib")
    for fallback in (False, True, True, True, False, False, True, False):
        settings.decided(decision("x", 1, 0.0, fallback=fallback))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4 and all("redis://:***@127.0.0.1:1/0" in line and "pw" not in line for line in lines)
    assert "refuses every request" in lines[0] and "reachable again" in lines[1]


def test_keys():
    assert as_key("header:X-Api-Key")(View(headers={"x-api-key": "k1"})) == "header:k1"
    assert as_key("header:X-Api-Key")(View()) == "10.0.0.9"
    assert as_key("user")(View(user="42")) == "user:42"
    assert as_key("user")(View(peer=None)) == "unknown"
    assert as_key(lambda request: request["peer"] + "!")(View()) == "10.0.0.9!"
    assert as_key(lambda: "all")(View()) == "all"
    with pytest.raises(ratelimit.InvalidArgument, match="header"):
        as_key("header:")
    with pytest.raises(ratelimit.InvalidArgument, match="remote_addr"):
        as_key("ip_address")
    with pytest.raises(TypeError):
        as_key(42)
    assert _common.checked_id(as_key("user"), 7) == "7"
    assert _common.checked_id(as_key("user"), "") is None
    with pytest.raises(TypeError, match="returned float"):
        _common.checked_id(as_key("user"), 1.5)


def decision(name, remaining, reset_after, allowed=True, retry_after=None, fallback=False, rate="10/minute"):
    rule = Rule(rate)
    return Decision(name, rule, allowed, rule.limit, remaining, reset_after, retry_after, fallback)


def test_header_format():
    d1 = decision("default", 87, 7.2)
    d2 = decision('a "b"\\c\u00e9', 3, 0.001, rate="3/500ms")
    assert response_headers([d1, d2]) == [
        ("RateLimit-Policy", '"default";q=10;w=60, "a \\"b\\"\\\\c?";q=3;w=1'),
        ("RateLimit", '"default";r=87;t=8, "a \\"b\\"\\\\c?";r=3;t=1'),
        ("RateLimit-Limit", "3"), ("RateLimit-Remaining", "3"), ("RateLimit-Reset", "1"),
    ]
    assert response_headers([d1], rate_limit_fields=False) == []
    refused = decision("x", 0, 59.001, allowed=False, retry_after=0.0)
    assert response_headers([d1, refused], rate_limit_fields=False)[0] == ("Retry-After", "1")  # at least 1
    assert dict(response_headers([d1, refused]))["RateLimit-Reset"] == "60"  # the denial is the main one
    # a fallback is counted nowhere
    assert response_headers([decision("x", 0, 0.0, allowed=False, retry_after=1.0, fallback=True)]) == [
        ("Retry-After", "1")]
    assert response_headers([decision("x", 0, 0.0, fallback=True)]) == []
    assert [ceil_seconds(s) for s in (0, 0.001, 1.0, 1.0004, 59.999, 60.0)] == [0, 1, 1, 1, 60, 60]


def test_settings_refuse_bad_options():
    with pytest.raises(ratelimit.InvalidArgument, match="trusted_proxies"):
        _common.Settings("redis://x", trusted_proxies=-1)
    with pytest.raises(ratelimit.InvalidArgument, match="algorithm"):
        Rule("1/s", algorithm="leaky")
    with pytest.raises(ratelimit.InvalidArgument, match="cost"):
        Rule("1/s", cost=0)


def test_redis_server_context_manager():
    with redis_server() as server:
        c = ratelimit.Client(server.url)
        assert c.limiter("t", "1/minute").acquire("u").allowed
        server.flushall()
        assert c.limiter("t", "1/minute").acquire("u").allowed  # flushed
        c.close()
        port = server.port
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


def test_missing_server_binary_is_a_clear_error():
    with pytest.raises(RedisServerNotFound, match="apt-get install redis-server"):
        RedisServer(executable="no-such-redis-server")


def test_pytest_plugin(tmp_path):
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["ratelimit.testing"]\n')
    (tmp_path / "test_app.py").write_text(textwrap.dedent("""
        import ratelimit

        def test_one(ratelimit_redis_url):
            lim = ratelimit.Client(ratelimit_redis_url).limiter("p", "1/minute")
            assert lim.acquire("u").allowed and not lim.acquire("u").allowed

        def test_two_starts_empty(ratelimit_redis_url, ratelimit_redis):
            assert ratelimit_redis.url == ratelimit_redis_url
            assert ratelimit.Client(ratelimit_redis_url).limiter("p", "1/minute").acquire("u").allowed
    """))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout + run.stderr


def test_exceeded_headers(ratelimit_redis_url):
    """A 429 handler of one's own gets the integrations' headers from the exception."""
    client = ratelimit.Client(ratelimit_redis_url)
    try:
        lim = client.limiter("own", "2/minute", algorithm="fixed_window")
        f = lim.limit("u")(lambda: "ok")
        f(), f()
        with pytest.raises(ratelimit.RateLimitExceeded) as e:
            f()
        assert e.value.limiter is lim
        h = dict(_common.exceeded_headers(e.value))
        assert h["RateLimit-Policy"] == '"own";q=2;w=60' and h["RateLimit-Remaining"] == "0"
        assert 58 < int(h["Retry-After"]) <= 60 and h["RateLimit"].startswith('"own";r=0;t=')
    finally:
        client.close()
    # raised by hand: all it knows is the retry
    assert _common.exceeded_headers(ratelimit.RateLimitExceeded(2.5)) == [("Retry-After", "3")]
