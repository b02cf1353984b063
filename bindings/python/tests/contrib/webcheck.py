"""Assertions shared by the framework tests: the exact headers of
docs/frameworks.md, and the Redis-down policy."""
import re

STATE = re.compile(r'^"(?P<name>[^"]+)";r=(?P<r>\d+);t=(?P<t>\d+)$')


def check_headers(headers, name, quota, window, remaining, reset_max, retry_after_max=None):
    """The exact rate-limit headers of one decision (docs/frameworks.md):
    the reset and Retry-After are whole seconds counting down, so they are
    checked within (reset_max - 2, reset_max]."""
    assert headers["ratelimit-policy"] == '"%s";q=%d;w=%d' % (name, quota, window)
    m = STATE.match(headers["ratelimit"])
    assert m, headers["ratelimit"]
    assert m["name"] == name and int(m["r"]) == remaining
    assert reset_max - 2 < int(m["t"]) <= reset_max
    assert headers["ratelimit-limit"] == str(quota)
    assert headers["ratelimit-remaining"] == str(remaining)
    assert headers["ratelimit-reset"] == m["t"]
    if retry_after_max is None:
        assert "retry-after" not in headers
    else:
        assert retry_after_max - 2 < int(headers["retry-after"]) <= retry_after_max


def no_rate_limit_headers(headers):
    return not any(h in headers for h in ("ratelimit", "ratelimit-policy", "ratelimit-limit",
                                          "ratelimit-remaining", "ratelimit-reset"))


def check_redis_down(get, policy, paths=("/items/1", "/items/2", "/items/3", "/free")):
    """With Redis down every request is decided by the policy, never a 500:
    allow -> 200, deny -> 429 with Retry-After: 1; no counts are known, so
    no rate-limit fields."""
    for p in paths:
        r = get(p)
        assert no_rate_limit_headers(r.headers)
        if policy == "allow":
            assert r.status_code == 200 and "retry-after" not in r.headers
        else:
            assert r.status_code == 429 and r.headers["retry-after"] == "1"


def check_outage_logged(get, server, caplog, path="/items/1"):
    """Redis paused under on_redis_error="allow": requests pass (limiting is
    off), and logger "ratelimit.contrib" says so once, naming the URL, and
    once more when Redis decides again."""
    import logging
    import time

    caplog.set_level(logging.INFO, logger="ratelimit.contrib")
    assert "ratelimit-remaining" in get(path).headers  # Redis decided
    server.pause()
    try:
        for _ in range(3):
            r = get(path)
            assert r.status_code == 200 and no_rate_limit_headers(r.headers)
    finally:
        server.resume()
    deadline = time.monotonic() + 10  # the client reconnects within its reconnect backoff
    while "ratelimit-remaining" not in get(path).headers:
        assert time.monotonic() < deadline, "Redis did not decide again"
        time.sleep(0.05)
    lines = [r.getMessage() for r in caplog.records if r.name == "ratelimit.contrib"]
    assert len(lines) == 2, lines
    assert "Redis unreachable for rate limiting (%s)" % server.url in lines[0], lines
    assert "on_redis_error=allow allows every request" in lines[0], lines
    assert "Redis reachable again" in lines[1], lines
    assert all(r.levelname == "WARNING" for r in caplog.records if r.name == "ratelimit.contrib")


def check_leased(get, url, path, n=300):
    """n requests on path, whose limits have a lease (generous rates): every
    one passes, and Redis runs far fewer scripts than decisions (the rest
    were decided from the leases)."""
    import redis

    r = redis.Redis.from_url(url)
    get(path)  # the client opens, the limiters are made
    r.config_resetstat()
    for _ in range(n):
        assert get(path).status_code == 200
    scripts = sum(v["calls"] for k, v in r.info("commandstats").items()
                  if k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_evalsha_ro", "cmdstat_eval_ro"))
    r.close()
    assert scripts <= n / 5, scripts
