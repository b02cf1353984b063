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
