"""The event loops the asyncio tests run on: asyncio's own (a
ProactorEventLoop on Windows), a loop without add_reader as Windows' is
(ratelimit.aio then selects on its queue in a thread), and uvloop when it is
installed."""
import asyncio
import sys
import threading

import pytest

try:
    import uvloop
except ImportError:  # optional: the tests run on asyncio's own loop anyway
    uvloop = None


class NoReaderLoop(asyncio.SelectorEventLoop):
    """A loop that cannot watch a descriptor, as ProactorEventLoop cannot."""

    def add_reader(self, fd, callback, *args):
        raise NotImplementedError

    def remove_reader(self, fd):
        raise NotImplementedError


LOOPS = ["asyncio", "no_add_reader",
         pytest.param("uvloop", marks=pytest.mark.skipif(uvloop is None, reason="uvloop not installed"))]


def run(coro, kind="asyncio"):
    if kind == "asyncio":
        return asyncio.run(coro)
    loop = uvloop.new_event_loop() if kind == "uvloop" else NoReaderLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def takes_reader(kind):
    """Whether the loop of that kind watches descriptors (add_reader)."""
    return kind != "no_add_reader" and not (kind == "asyncio" and sys.platform == "win32")


def watchers():
    """The threads ratelimit.aio watches queues with on loops without add_reader."""
    return [t for t in threading.enumerate() if t.name == "ratelimit-aio-watch"]
