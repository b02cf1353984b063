"""Fixtures for the web framework tests: a throwaway redis-server from
ratelimit.testing (the plugin users get), an app served by uvicorn on a
loopback port, and a URL where no Redis listens."""
import re
import socket
import threading
import time

import pytest

from ratelimit.testing import ratelimit_redis, ratelimit_redis_url  # noqa: F401  (fixtures)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def down_url():
    """A Redis URL nothing listens on."""
    return "redis://127.0.0.1:%d/0" % free_port()


class Served:
    """An ASGI app run by uvicorn in a thread; base is its http:// URL."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        # proxy_headers off: uvicorn would otherwise take X-Forwarded-For from
        # a loopback peer itself, and the tests check the middleware's handling
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="on", proxy_headers=False))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        self.base = "http://127.0.0.1:%d" % self.port

    def stop(self):
        self.server.should_exit = True
        self.thread.join(20)
        assert not self.thread.is_alive(), "uvicorn did not stop"


@pytest.fixture
def serve():
    """serve(app) -> Served; every server is stopped (lifespan shutdown
    included) when the test ends."""
    servers = []

    def start(app):
        servers.append(Served(app))
        return servers[-1]
    yield start
    for s in servers:
        s.stop()


POLICY = re.compile(r'^"(?P<name>[^"]+)";q=(?P<q>\d+);w=(?P<w>\d+)$')
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
