"""The asyncio flavour of ratelimit.

    from ratelimit import aio
    client = await aio.AsyncClient.connect("redis://127.0.0.1:6379/0")
    sms = client.limiter("sms", "10/minute")
    if await sms.acquire("user-42"):
        ...
    async with client.semaphore("db", permits=10, lease=30.0).acquire(timeout=5.0) as permit:
        ...

Each call runs the blocking C call in a thread pool, so the event loop is
never blocked. Waits (acquire with a timeout, semaphores, locks, queue pops)
stop promptly when their task is cancelled: the C wait polls a cancel flag.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from typing import Any, Awaitable, Callable, Generator, Generic, Iterable, List, Optional, Tuple, TypeVar, Union

import ratelimit as _sync
from ratelimit import (  # noqa: F401  (re-exported for convenience)
    Cancelled,
    ClientClosed,
    ConnectionError,
    InvalidArgument,
    RateLimitError,
    RateLimitExceeded,
    Result,
    Timeout,
)

__all__ = ["AsyncClient", "AsyncDelayQueue", "AsyncHeldLock", "AsyncLimiter", "AsyncLock",
           "AsyncPermit", "AsyncSemaphore"]

T = TypeVar("T")
Seconds = Union[int, float]
Text = Union[str, bytes]


class _Runner:
    """Runs blocking calls in an executor, with a cancel flag for waits."""

    def __init__(self, executor: Optional[concurrent.futures.Executor]) -> None:
        self.executor = executor

    async def call(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(func, *args, **kwargs))

    async def wait(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """func takes cancel=; cancelling the awaiting task sets the flag so
        the thread stops waiting within ~100 ms instead of running on."""
        flag = threading.Event()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.executor, functools.partial(func, *args, cancel=flag.is_set, **kwargs))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            flag.set()
            # let the thread finish so nothing it acquired leaks unseen
            try:
                result = await future
            except BaseException:
                raise asyncio.CancelledError() from None
            await loop.run_in_executor(self.executor, _release_quietly, result)
            raise


def _release_quietly(result: Any) -> None:
    release = getattr(result, "release", None)
    if callable(release):
        try:
            release()
        except Exception:
            pass


class _AwaitableContext(Generic[T]):
    """Awaitable returning T, or usable as `async with ... as t` (released on exit)."""

    def __init__(self, coro: Awaitable[T]) -> None:
        self._coro = coro
        self._value: Optional[T] = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._coro.__await__()

    async def __aenter__(self) -> T:
        self._value = await self._coro
        return self._value

    async def __aexit__(self, *exc: Any) -> None:
        if self._value is not None:
            await self._value.release()  # type: ignore[attr-defined]


class AsyncLimiter:
    """The async face of ratelimit.Limiter (same arguments, awaitable)."""

    def __init__(self, limiter: _sync.Limiter, runner: _Runner) -> None:
        self.sync = limiter
        self._run = runner

    name = property(lambda self: self.sync.name, doc="The limiter's name.")
    algorithm = property(lambda self: self.sync.algorithm, doc="The algorithm's name.")
    rate = property(lambda self: self.sync.rate, doc="(limit, period_seconds).")
    period = property(lambda self: self.sync.period, doc="The period in seconds.")
    burst = property(lambda self: self.sync.burst, doc="token_bucket/gcra capacity, or None.")

    async def acquire(self, id: Text, permits: int = 1, *, timeout: Optional[Seconds] = None,
                      now: Optional[Seconds] = None) -> Result:
        """See Limiter.acquire; a timeout waits without blocking the loop."""
        if timeout:
            return await self._run.wait(self.sync.acquire, id, permits, timeout=timeout, now=now)
        return await self._run.call(self.sync.acquire, id, permits, now=now)

    async def peek(self, id: Text, permits: int = 1, *, now: Optional[Seconds] = None) -> Result:
        """See Limiter.peek."""
        return await self._run.call(self.sync.peek, id, permits, now=now)

    async def reset(self, id: Text) -> None:
        """See Limiter.reset."""
        await self._run.call(self.sync.reset, id)

    async def acquire_many(self, requests: Iterable[Union[Text, Tuple[Text, int]]], *,
                           now: Optional[Seconds] = None) -> List[Result]:
        """See Limiter.acquire_many (one round trip)."""
        return await self._run.call(self.sync.acquire_many, list(requests), now=now)

    async def reserve(self, id: Text, permits: int = 1, *, max_wait: Seconds = 0.0,
                      now: Optional[Seconds] = None) -> float:
        """See Limiter.reserve; returns the seconds to wait (await
        asyncio.sleep(it) before acting)."""
        return await self._run.call(self.sync.reserve, id, permits, max_wait=max_wait, now=now)

    def key(self, id: Text) -> str:
        """The Redis key holding id's state."""
        return self.sync.key(id)

    def limit(self, key: Union[Callable[..., Text], Text, None] = None, *, permits: int = 1,
                    timeout: Optional[Seconds] = None) -> Callable[[Callable[..., Awaitable[T]]],
                                                                Callable[..., Awaitable[T]]]:
        """Decorator for coroutine functions: acquire before each call and
        raise RateLimitExceeded when denied (see Limiter.limit)."""
        def decorate(func: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
            @functools.wraps(func)
            async def wrapper(*args: Any, **kwargs: Any) -> T:
                ident = "*" if key is None else key(*args, **kwargs) if callable(key) else key
                result = await self.acquire(ident, permits, timeout=timeout)
                if not result.allowed:
                    raise _sync._exceeded(result, "%s: rate limit exceeded for %r; retry after %.3f s"
                                          % (self.name, ident, result.retry_after or 0.0))
                return await func(*args, **kwargs)
            return wrapper
        return decorate

    def __repr__(self) -> str:
        return "<Async%s>" % repr(self.sync)[1:-1]


class AsyncPermit:
    """An async semaphore permit (see ratelimit.Permit)."""

    def __init__(self, permit: _sync.Permit, runner: _Runner) -> None:
        self.sync = permit
        self._run = runner

    id = property(lambda self: self.sync.id, doc="The permit's unique id.")
    fencing_token = property(lambda self: self.sync.fencing_token, doc="Strictly increasing per name.")
    lease = property(lambda self: self.sync.lease, doc="The lease in seconds.")

    async def refresh(self, lease: Optional[Seconds] = None) -> bool:
        """See Permit.refresh."""
        return await self._run.call(self.sync.refresh, lease)

    async def release(self) -> bool:
        """See Permit.release."""
        return await self._run.call(self.sync.release)

    async def __aenter__(self) -> "AsyncPermit":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()

    def __repr__(self) -> str:
        return "<Async%s>" % repr(self.sync)[1:-1]


class AsyncSemaphore:
    """The async face of ratelimit.Semaphore."""

    def __init__(self, semaphore: _sync.Semaphore, runner: _Runner) -> None:
        self.sync = semaphore
        self._run = runner

    def acquire(self, timeout: Optional[Seconds] = None) -> "_AwaitableContext[AsyncPermit]":
        """Await a permit (raises Timeout), or `async with sem.acquire(...) as permit:`."""
        async def go() -> AsyncPermit:
            return AsyncPermit(await self._run.wait(self.sync.acquire, timeout), self._run)
        return _AwaitableContext(go())

    async def try_acquire(self) -> Optional[AsyncPermit]:
        """A permit if one is free right now, else None."""
        permit = await self._run.call(self.sync.try_acquire)
        return AsyncPermit(permit, self._run) if permit is not None else None

    async def available(self) -> int:
        """Permits free right now."""
        return await self._run.call(self.sync.available)

    async def holders(self) -> int:
        """Live holders right now."""
        return await self._run.call(self.sync.holders)


class AsyncHeldLock:
    """An async held lock (see ratelimit.HeldLock)."""

    def __init__(self, held: _sync.HeldLock, runner: _Runner) -> None:
        self.sync = held
        self._run = runner

    token = property(lambda self: self.sync.token, doc="The owner token.")
    fencing_token = property(lambda self: self.sync.fencing_token, doc="Strictly increasing per name.")
    lease = property(lambda self: self.sync.lease, doc="The lease in seconds.")

    async def extend(self, lease: Optional[Seconds] = None) -> bool:
        """See HeldLock.extend."""
        return await self._run.call(self.sync.extend, lease)

    async def release(self) -> bool:
        """See HeldLock.release."""
        return await self._run.call(self.sync.release)

    async def __aenter__(self) -> "AsyncHeldLock":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


class AsyncLock:
    """The async face of ratelimit.Lock."""

    def __init__(self, lock: _sync.Lock, runner: _Runner) -> None:
        self.sync = lock
        self._run = runner

    def acquire(self, timeout: Optional[Seconds] = None) -> "_AwaitableContext[AsyncHeldLock]":
        """Await the lock (raises Timeout), or `async with lock.acquire(...) as held:`."""
        async def go() -> AsyncHeldLock:
            return AsyncHeldLock(await self._run.wait(self.sync.acquire, timeout), self._run)
        return _AwaitableContext(go())

    async def try_acquire(self) -> Optional[AsyncHeldLock]:
        """The lock if it is free right now, else None."""
        held = await self._run.call(self.sync.try_acquire)
        return AsyncHeldLock(held, self._run) if held is not None else None


class AsyncDelayQueue:
    """The async face of ratelimit.DelayQueue."""

    def __init__(self, queue: _sync.DelayQueue, runner: _Runner) -> None:
        self.sync = queue
        self._run = runner

    async def push(self, message: Text, delay: Seconds = 0.0) -> bool:
        """See DelayQueue.push."""
        return await self._run.call(self.sync.push, message, delay)

    async def pop_ready(self, max: int = 1) -> List[Any]:
        """See DelayQueue.pop_ready."""
        return await self._run.call(self.sync.pop_ready, max)

    async def pop(self, max: int = 1, timeout: Optional[Seconds] = None) -> List[Any]:
        """See DelayQueue.pop; waits without blocking the loop."""
        return await self._run.wait(self.sync.pop, max, timeout)

    async def size(self) -> int:
        """See DelayQueue.size."""
        return await self._run.call(self.sync.size)

    async def remove(self, message: Text) -> bool:
        """See DelayQueue.remove."""
        return await self._run.call(self.sync.remove, message)


class AsyncClient:
    """The asyncio client: same options as ratelimit.Client (URLs for one
    server, TLS, Sentinel and Cluster; the ssl_* options; reconnect_max).

    Prefer ``await AsyncClient.connect(url, ...)``, which connects in the
    executor; AsyncClient(url, ...) connects at once (blocking briefly).
    executor: where blocking calls run (default: a pool of this client's
    own, so long waits cannot starve the loop's default executor).
    """

    def __init__(self, url: str, *, executor: Optional[concurrent.futures.Executor] = None,
                 prefix: Optional[str] = None, timeout: Optional[Seconds] = None,
                 connect_timeout: Optional[Seconds] = None, pool_size: Optional[int] = None,
                 on_redis_error: Optional[str] = None, ssl_ca_certs: Optional[_sync.FilePath] = None,
                 ssl_certfile: Optional[_sync.FilePath] = None, ssl_keyfile: Optional[_sync.FilePath] = None,
                 ssl_cert_reqs: Union[str, int, None] = None, reconnect_max: Optional[Seconds] = None) -> None:
        self._own_executor = executor is None
        if executor is None:
            executor = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="ratelimit")
        self.executor = executor
        try:
            self.sync = _sync.Client(url, prefix=prefix, timeout=timeout, connect_timeout=connect_timeout,
                                     pool_size=pool_size, on_redis_error=on_redis_error,
                                     ssl_ca_certs=ssl_ca_certs, ssl_certfile=ssl_certfile,
                                     ssl_keyfile=ssl_keyfile, ssl_cert_reqs=ssl_cert_reqs,
                                     reconnect_max=reconnect_max)
        except BaseException:
            if self._own_executor:
                executor.shutdown(wait=False)
            raise
        self._run = _Runner(executor)

    @classmethod
    async def connect(cls, url: str, *, executor: Optional[concurrent.futures.Executor] = None,
                      prefix: Optional[str] = None, timeout: Optional[Seconds] = None,
                      connect_timeout: Optional[Seconds] = None, pool_size: Optional[int] = None,
                      on_redis_error: Optional[str] = None, ssl_ca_certs: Optional[_sync.FilePath] = None,
                      ssl_certfile: Optional[_sync.FilePath] = None, ssl_keyfile: Optional[_sync.FilePath] = None,
                      ssl_cert_reqs: Union[str, int, None] = None,
                      reconnect_max: Optional[Seconds] = None) -> "AsyncClient":
        """Make an AsyncClient without blocking the event loop (the options
        are Client's)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(
            cls, url, executor=executor, prefix=prefix, timeout=timeout, connect_timeout=connect_timeout,
            pool_size=pool_size, on_redis_error=on_redis_error, ssl_ca_certs=ssl_ca_certs,
            ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, ssl_cert_reqs=ssl_cert_reqs,
            reconnect_max=reconnect_max))

    @property
    def prefix(self) -> Optional[str]:
        """The key prefix in use."""
        return self.sync.prefix

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self.sync.closed

    def limiter(self, name: str, rate: Union[str, Tuple[int, Seconds]], *, algorithm: str = "gcra",
                burst: Optional[int] = None) -> AsyncLimiter:
        """See Client.limiter."""
        return AsyncLimiter(self.sync.limiter(name, rate, algorithm=algorithm, burst=burst), self._run)

    def semaphore(self, name: str, permits: int, lease: Seconds) -> AsyncSemaphore:
        """See Client.semaphore."""
        return AsyncSemaphore(self.sync.semaphore(name, permits, lease), self._run)

    def lock(self, name: str, lease: Seconds) -> AsyncLock:
        """See Client.lock."""
        return AsyncLock(self.sync.lock(name, lease), self._run)

    def delay_queue(self, name: str, *, decode: bool = True) -> AsyncDelayQueue:
        """See Client.delay_queue."""
        return AsyncDelayQueue(self.sync.delay_queue(name, decode=decode), self._run)

    async def close(self) -> None:
        """Close the connections (and this client's own executor)."""
        self.sync.close()
        if self._own_executor:
            self.executor.shutdown(wait=False)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return "<ratelimit.aio.AsyncClient prefix=%r%s>" % (self.prefix, " closed" if self.closed else "")
