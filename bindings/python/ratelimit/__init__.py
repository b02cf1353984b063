"""Distributed rate limiting and concurrency control on Redis.

Every decision is one atomic Lua script run by Redis; this package is a thin
binding of the C core, which validates arguments, builds keys and runs the
scripts. Times are seconds (floats) here.

    import ratelimit
    client = ratelimit.Client("redis://127.0.0.1:6379/0")
    sms = client.limiter("sms", "10/minute", algorithm="gcra")
    if sms.acquire("user-42"):
        send()

    with client.semaphore("db", permits=10, lease=30.0).acquire(timeout=5.0) as permit:
        ...
    with client.lock("nightly-job", lease=10.0).acquire(timeout=1.0) as held:
        ...
    q = client.delay_queue("jobs"); q.push("m1", delay=5.0); q.pop(max=10, timeout=2.0)

See ratelimit.aio for the asyncio flavour.
"""
from __future__ import annotations

from typing import Any

from . import _ratelimit
from ._ratelimit import (
    ALGORITHMS,
    AcquireTimeout,
    Backlog,
    Cancelled,
    ClientClosed,
    ConnectionError,
    InvalidArgument,
    NotAcquired,
    ProtocolError,
    RateLimitError,
    RateLimitExceeded,
    RedisError,
    RedisFailure,
    Result,
    Timeout,
    has_tls,
    parse_rate,
    scripts,
    tls_version,
)
from ._types import F, FilePath, OneRate, Rate, Seconds, Text
from .client import Client, _open_clients  # noqa: F401  (_open_clients: the leases given back at exit)
from .config import LimiterConfig
from .limiter import Limiter
from .primitives import DelayQueue, HeldLock, Lock, Permit, Semaphore

__all__ = [
    "ALGORITHMS",
    "AcquireTimeout",
    "Backlog",
    "Cancelled",
    "Client",
    "ClientClosed",
    "ConnectionError",
    "DelayQueue",
    "HeldLock",
    "InvalidArgument",
    "Limiter",
    "LimiterConfig",
    "Lock",
    "NotAcquired",
    "Permit",
    "ProtocolError",
    "RateLimitError",
    "RateLimitExceeded",
    "RedisError",
    "RedisFailure",
    "Result",
    "Semaphore",
    "Timeout",
    "has_tls",
    "parse_rate",
    "scripts",
    "tls_version",
]

__version__ = "%d.%d.%d" % (
    _ratelimit.VERSION_NUMBER // 10000,
    _ratelimit.VERSION_NUMBER // 100 % 100,
    _ratelimit.VERSION_NUMBER % 100,
)

# defined in modules by concern, public here: reprs and pickles say ratelimit.X
for _public in (LimiterConfig, Limiter, Permit, Semaphore, HeldLock, Lock, DelayQueue, Client, F):
    _public.__module__ = __name__
del _public


def __getattr__(name: str) -> Any:
    # `import ratelimit` then `ratelimit.aio`, without importing asyncio for
    # programs that never use it
    if name == "aio":
        import importlib

        return importlib.import_module(".aio", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
