"""Fixtures: real redis-server processes on free loopback ports (no mocks)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

import ratelimit

REDIS_SERVER = shutil.which("redis-server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One throwaway redis-server; stop() kills it, pause()/resume() use
    SIGSTOP/SIGCONT to make it a slow (unresponsive) server."""

    def __init__(self):
        if not REDIS_SERVER:
            pytest.fail("redis-server is not installed (apt-get install redis-server): these tests need a real Redis")
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rl-redis-")
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.02)
        self.url = "redis://127.0.0.1:%d/0" % self.port

    def raw(self):
        import redis
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            self.resume()
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server():
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def fresh_server():
    """A server of the test's own, for tests that pause or kill it."""
    s = RedisServer()
    yield s
    s.stop()


@pytest.fixture
def raw(server):
    r = server.raw()
    r.flushall()
    yield r
    r.close()


@pytest.fixture
def client(server, raw):
    c = ratelimit.Client(server.url, timeout=2.0)
    yield c
    c.close()
