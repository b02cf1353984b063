"""Fixtures for the web framework tests: a throwaway redis-server from
ratelimit.testing (the plugin users get), an app served by uvicorn on a
loopback port, and a URL where no Redis listens."""
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
