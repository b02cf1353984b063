"""A throwaway redis-server for your own tests.

    from ratelimit.testing import redis_server

    with redis_server() as server:          # a free loopback port, no persistence
        client = ratelimit.Client(server.url)
        ...                                  # stopped and its directory removed on exit

As a pytest plugin (`pytest_plugins = ["ratelimit.testing"]` in conftest.py):
`ratelimit_redis` is one server for the session, `ratelimit_redis_url` its
URL with the database emptied before each test.

The server binary is $RATELIMIT_REDIS_SERVER, else redis-server, else
valkey-server on PATH; RedisServerNotFound says how to install one.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator, List, Optional

__all__ = ["RedisServer", "RedisServerNotFound", "find_redis_server", "redis_server"]


class RedisServerNotFound(RuntimeError):
    """No redis-server (or valkey-server) binary could be found."""


def find_redis_server(executable: Optional[str] = None) -> str:
    """The path of the server binary to run (see the module docstring)."""
    names = [executable] if executable else [os.environ.get("RATELIMIT_REDIS_SERVER") or "redis-server",
                                              "valkey-server"]
    for name in names:
        path = shutil.which(name) if name else None
        if path:
            return path
    raise RedisServerNotFound(
        "%s not found on PATH: install Redis (Debian/Ubuntu: apt-get install redis-server; macOS: brew install "
        "redis) or set RATELIMIT_REDIS_SERVER to the binary" % " or ".join(n for n in names if n))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command(port: int, *args: str, timeout: float = 1.0) -> bytes:
    """Send one inline command, return the first reply line (enough for
    PING and FLUSHALL)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(" ".join(args).encode() + b"\r\n")
        reply = b""
        while not reply.endswith(b"\r\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        return reply.strip()


class RedisServer:
    """A redis-server on 127.0.0.1, no persistence, in a temporary
    directory. url, host, port; flushall(); pause() / resume() (SIGSTOP /
    SIGCONT: a server that stops answering); stop() (idempotent)."""

    host = "127.0.0.1"

    def __init__(self, executable: Optional[str] = None, port: Optional[int] = None,
                 args: Optional[List[str]] = None, startup_timeout: float = 10.0) -> None:
        self.executable = find_redis_server(executable)
        self.dir = tempfile.mkdtemp(prefix="ratelimit-redis-")
        self.proc: Optional[subprocess.Popen] = None
        try:
            # a free port can be taken between the probe and the bind: try again
            for attempt in range(3):
                self.port = port or _free_port()
                if self._start(list(args or []), startup_timeout):
                    break
                if port or attempt == 2:
                    raise RuntimeError("%s did not start on port %d (see %s)"
                                       % (self.executable, self.port, os.path.join(self.dir, "redis.log")))
        except BaseException:
            self.stop()
            raise
        self.url = "redis://%s:%d/0" % (self.host, self.port)

    def _start(self, args: List[str], timeout: float) -> bool:
        self.proc = subprocess.Popen(
            [self.executable, "--port", str(self.port), "--bind", self.host, "--save", "", "--appendonly", "no",
             "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log")] + args,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if _command(self.port, "PING", timeout=0.5) == b"+PONG":
                    return True
            except OSError:
                pass
            time.sleep(0.02)
        self.proc.kill()
        self.proc.wait()
        return False

    def flushall(self) -> None:
        """Delete every key."""
        reply = _command(self.port, "FLUSHALL", timeout=5.0)
        if reply != b"+OK":
            raise RuntimeError("FLUSHALL answered %r" % reply)

    def pause(self) -> None:
        """Freeze the server (it keeps its connections, answers nothing)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """Kill the server and remove its directory."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "RedisServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return "<RedisServer %s>" % self.url


@contextmanager
def redis_server(executable: Optional[str] = None, port: Optional[int] = None,
                 args: Optional[List[str]] = None) -> Iterator[RedisServer]:
    """A RedisServer for the with block (see RedisServer)."""
    server = RedisServer(executable, port, args)
    try:
        yield server
    finally:
        server.stop()


try:
    import pytest
except ImportError:  # the plugin's fixtures need pytest; the rest does not
    pytest = None  # type: ignore[assignment]

if pytest is not None:
    @pytest.fixture(scope="session")
    def ratelimit_redis() -> Iterator[RedisServer]:
        """One throwaway redis-server for the test session."""
        with redis_server() as server:
            yield server

    @pytest.fixture
    def ratelimit_redis_url(ratelimit_redis: RedisServer) -> str:
        """The session server's URL, its keys deleted before the test."""
        ratelimit_redis.flushall()
        return ratelimit_redis.url
