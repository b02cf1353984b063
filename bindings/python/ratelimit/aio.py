"""The asyncio flavour of ratelimit.

    from ratelimit import aio
    client = await aio.AsyncClient.connect("redis://127.0.0.1:6379/0")
    sms = client.limiter("sms", "10/minute")
    if await sms.acquire("user-42"):
        ...
    async with client.semaphore("db", permits=10, lease=30.0).acquire(timeout=5.0) as permit:
        ...

Everything that talks to Redis runs on the core's asynchronous path: no
executor, no thread per call. Rate-limit decisions (acquire, peek, reserve,
acquire_many, the limit() decorator), the semaphore's and the lock's
acquire, try_acquire, release, refresh and extend, and the delay queue's
push, pop and pop_ready are submitted to the client's I/O thread (which
pipelines everything submitted meanwhile into one write per server) and
complete into a queue of this event loop's; the loop watches the queue's
file descriptor (loop.add_reader, so uvloop works too; on a loop without it,
such as Windows' ProactorEventLoop, a thread of the loop's selects on it)
and resolves the futures of every completion that waits in one wake-up.
Errors are the blocking calls' exceptions, results the same objects;
on_redis_error holds per decision.

Waits hold no thread either: a semaphore or lock acquire and a pop wait in
the core, which tries again when a release or push is published (pub/sub)
and keeps the waiter's place in the semaphore's FIFO queue. An
AsyncLimiter.acquire with a timeout waits in the core too: its decisions
are retried retry_after apart on the core's timer (rl_submit_acquire_wait).

Cancelling a task (task.cancel(), asyncio.wait_for, asyncio.timeout) that
waits for a permit, the lock or messages stops the wait in the core and
gives back whatever it got: a permit granted meanwhile is released, the
waiter leaves the semaphore's queue, messages taken meanwhile are pushed
back (due at once). The task sees asyncio.CancelledError as usual.
Cancelling an AsyncLimiter.acquire with a timeout stops its retries; a
decision Redis made meanwhile stands.
Cancelling a task that awaits one round trip (a decision, a release,
refresh, extend or push) stops the wait, not the call: once submitted it may
already have run in Redis, and then it stays done (as with redis-py, a
cancelled command is not undone). Its completion is dropped when it arrives.

Only the stored-spec calls (AsyncClient.configure / get_config /
delete_config, start-up and admin calls) run the blocking call in an
executor (the event loop's default one, or AsyncClient's executor=), each
one round trip bounded by the command timeout; AsyncClient.connect opens
the client there too.

Closing the AsyncClient closes the C client: every call and wait still in
flight fails with ClientClosed.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import threading
from typing import (Any, Awaitable, Callable, Generator, Generic, Iterable, List, Literal, Optional, Tuple, TypeVar,
                    Union, overload)

import ratelimit as _sync
from ratelimit import _fdwatch, _ratelimit
from ratelimit.errors import _exceeded
from ratelimit.limiter import _key_function, _reserved
from ratelimit.primitives import _FOREVER_SLICE
from ratelimit import (  # noqa: F401  (re-exported for convenience)
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
)

__all__ = ["AsyncClient", "AsyncDelayQueue", "AsyncHeldLock", "AsyncLimiter", "AsyncLock",
           "AsyncPermit", "AsyncSemaphore"]

T = TypeVar("T")
Seconds = Union[int, float]
Text = Union[str, bytes]


# completions taken in one wake-up of the loop (more wait: it wakes again)
_TAKE = 1024

_ACQUIRE, _PEEK, _RESERVE, _UP_TO, _REFUND = 0, 1, 2, 3, 4
# Completions.submit_held's operations
_SEM_RELEASE, _SEM_REFRESH, _LOCK_RELEASE, _LOCK_EXTEND = 0, 1, 2, 3

_Completions = _ratelimit.Completions
# what a cancelled wait got, given back: called with the completion's value
GiveBack = Callable[[Any], None]

# rl_cancel(client, tag) stops the client's waits with that tag, whichever
# loop submitted them: each loop's tags start at its own multiple of this
_TAGS_PER_LOOP = 1 << 40


def _batch_outcomes(outcomes: List[Any], return_exceptions: bool) -> List[Any]:
    """What an asyncio batch returns, as Limiter.acquire_many does: the list
    of outcomes (a Result or that request's exception each), or the first
    failure raised, naming its request, with the list as .results."""
    if return_exceptions:
        return outcomes
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, BaseException):
            exc = type(outcome)("request %d: %s" % (i, outcome) if len(outcomes) > 1 else str(outcome))
            if hasattr(outcome, "code"):
                exc.code = outcome.code  # type: ignore[attr-defined]
            exc.results = outcomes  # type: ignore[attr-defined]
            raise exc
    return outcomes


class _LoopState:
    """One event loop's side of a client: a completion queue whose file
    descriptor the loop watches, and the futures of the calls in flight by
    tag. Used only on its loop's thread."""

    __slots__ = ("loop", "client", "queue", "futures", "give_backs", "next_tag", "closing", "fd", "watcher")

    def __init__(self, loop: asyncio.AbstractEventLoop, client: _sync.Client, first_tag: int) -> None:
        self.loop = loop
        self.client = client
        self.queue = _ratelimit.Completions()
        self.futures: "dict[int, asyncio.Future[Any]]" = {}
        # waits whose caller may cancel them: what to do with a late value
        self.give_backs: "dict[int, GiveBack]" = {}
        self.next_tag = first_tag
        self.closing = False
        self.fd = self.queue.fileno()
        self.watcher: Optional[_fdwatch.FdWatcher] = None
        try:
            try:
                loop.add_reader(self.fd, self.drain)
            except NotImplementedError:  # ProactorEventLoop (Windows' default)
                self.watcher = _fdwatch.FdWatcher(loop, self.fd, self.drain)
        except BaseException:
            self.queue.close()
            raise

    def submit(self, limiter: _sync.Limiter, op: int, id: Text, permits: Any, max_wait: Any,
               now: Any) -> "Tuple[int, asyncio.Future[Result]]":
        tag = self.next_tag
        self.queue.submit(tag, limiter, id, permits, op, max_wait, now)  # raises: nothing was queued
        self.next_tag = tag + 1
        future = self.futures[tag] = self.loop.create_future()
        return tag, future

    def start(self, submit: Callable[..., None], *args: Any) -> "Tuple[int, asyncio.Future[Any]]":
        """A primitive: submit is one of Completions' submit_* (unbound)."""
        tag = self.next_tag
        submit(self.queue, tag, self.client, *args)  # raises: nothing was queued
        self.next_tag = tag + 1
        future = self.futures[tag] = self.loop.create_future()
        return tag, future

    def start_quietly(self, submit: Callable[..., None], *args: Any) -> None:
        """A give-back nobody awaits: its completion is dropped. If it cannot
        be queued (the client closed), the lease's end or the message's
        loss is all that is left, as when a process dies."""
        try:
            submit(self.queue, self.next_tag, self.client, *args)
        except (RateLimitError, MemoryError):
            return
        self.next_tag += 1

    def cancel(self, tag: int) -> None:
        """Stops the wait of tag (its completion still comes: drain gives
        back what it got if the cancel came too late)."""
        try:
            self.queue.cancel(self.client, tag)
        except (RateLimitError, MemoryError):
            pass  # the wait runs to its end; drain gives back what it got

    def decide_leased(self, limiter: _sync.Limiter, op: int, id: Text, permits: Any,
                      now: Any) -> "Tuple[Any, Optional[Tuple[int, asyncio.Future[Result]]]]":
        """A decision of a limiter with a lease: (its Result, None) when the
        lease in hand decided it (no queue, no future, no loop wake-up), or
        when it completed inside submit; else (None, (tag, future)) as submit."""
        tag = self.next_tag
        got = self.queue.submit_now(tag, limiter, id, permits, op, None, now)  # raises: its error
        self.next_tag = tag + 1
        if type(got) is not list:
            return got, None
        mine = next((item for item in got if item[0] == tag), None)
        if mine is None:
            future = self.futures[tag] = self.loop.create_future()
        else:
            got.remove(mine)
        if got:
            self.resolve(got)
        if mine is None:
            return None, (tag, future)
        if mine[1]:
            raise mine[2]
        return mine[2], None

    def drain(self) -> None:
        """The reader: resolve the futures of the completions waiting (up to
        _TAKE per wake-up; the descriptor stays readable while more wait, so
        other callbacks run in between)."""
        self.resolve(self.queue.take(_TAKE))

    def resolve(self, completions: List[Tuple[int, int, Any]]) -> None:
        futures, give_backs = self.futures, self.give_backs
        for tag, status, value in completions:
            future = futures.pop(tag, None)
            give_back = give_backs.pop(tag, None) if give_backs else None
            if future is None:
                continue  # its task was cancelled: the completion is dropped
            if future.done():
                # cancelled by its task before the core saw rl_cancel (or
                # before it was asked): what it got goes back
                if give_back is not None and not status:
                    give_back(value)
            elif status:
                future.set_exception(value)  # type: ignore[arg-type]
            else:
                future.set_result(value)
        if self.closing and not futures:
            self.teardown()

    def shutdown(self) -> None:
        """After the client was closed: resolve what completed (ClientClosed),
        then stop watching once nothing is in flight."""
        self.closing = True
        if not self.loop.is_closed():
            self.drain()
        if not self.futures or self.loop.is_closed():
            self.teardown()

    def teardown(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
        elif not self.loop.is_closed():
            self.loop.remove_reader(self.fd)
        self.futures.clear()
        self.give_backs.clear()
        self.queue.close()  # freed once the C client cannot post to it any more


class _Runner:
    """Runs calls on the asynchronous core, one _LoopState per event loop,
    and the few without an asynchronous form in an executor."""

    def __init__(self, executor: Optional[concurrent.futures.Executor],
                 client: Optional[_sync.Client] = None) -> None:
        self.executor = executor
        self.client = client
        self.loops: "dict[asyncio.AbstractEventLoop, _LoopState]" = {}
        self.last: Optional[_LoopState] = None
        self.loop_serial = itertools.count()  # next() is atomic: loops may run in several threads
        # a loop's first call, from loops on several threads at once (without
        # a GIL too): one state per loop, old loops torn down once
        self.loops_lock = threading.Lock()

    def state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        st = self.last
        if st is not None and st.loop is loop:
            return st
        st = self.loops.get(loop)
        if st is None:
            with self.loops_lock:
                st = self.loops.get(loop)
                if st is None:
                    if self.client is None or self.client.closed:
                        raise ClientClosed("the client is closed")
                    for old in [s for s in self.loops.values() if s.loop.is_closed()]:
                        del self.loops[old.loop]  # an earlier asyncio.run()'s
                        old.teardown()
                    st = self.loops[loop] = _LoopState(loop, self.client, next(self.loop_serial) * _TAGS_PER_LOOP)
        self.last = st
        return st

    async def decide(self, limiter: _sync.Limiter, op: int, id: Text, permits: Any,
                     max_wait: Any, now: Any) -> Result:
        if (op == _ACQUIRE or op == _UP_TO) and limiter.lease is not None:
            got = self.leased(limiter, op, id, permits, now)
            return got if type(got) is Result else await got  # type: ignore[no-any-return]
        st = self.state()
        return await self.settle(st, *st.submit(limiter, op, id, permits, max_wait, now))

    def leased(self, limiter: _sync.Limiter, op: int, id: Text, permits: Any,
               now: Any) -> "Union[Result, Awaitable[Result]]":
        """A decision of a limiter with a lease: its Result when the lease
        decided it inside submit (the caller's task need not suspend), else
        an awaitable of it."""
        st = self.state()
        result, pending = st.decide_leased(limiter, op, id, permits, now)
        return result if pending is None else self.settle(st, *pending)

    async def settle(self, st: _LoopState, tag: int, future: "asyncio.Future[Any]") -> Any:
        """The future of a call submitted under tag (one round trip);
        cancelling the caller drops its completion (the call itself stands)."""
        try:
            return await future
        except asyncio.CancelledError:
            st.futures.pop(tag, None)
            raise

    async def decide_many(self, limiter: _sync.Limiter, requests: Any, now: Any,
                          return_exceptions: bool) -> List[Any]:
        st = self.state()
        tag = st.next_tag
        n = st.queue.submit_many(tag, limiter, requests, now)
        if isinstance(n, list):
            outcomes: List[Any] = n  # decided by the blocking path (see Completions.submit_many)
        else:
            st.next_tag = tag + n
            create, futures = st.loop.create_future, st.futures
            batch: "List[asyncio.Future[Result]]" = []
            for t in range(tag, tag + n):
                batch.append(create())
                futures[t] = batch[-1]
            if limiter.lease is not None:
                st.drain()  # the requests decided from the lease, as in decide()
            outcomes = []
            try:
                # each request completes on its own: one failing hides none of the others
                for future in batch:
                    try:
                        outcomes.append(await future)
                    except (RateLimitError, MemoryError) as e:
                        outcomes.append(e)
            except BaseException:
                for t in range(tag, tag + n):
                    futures.pop(t, None)
                for future in batch:  # their errors are this one's: no "never retrieved" warnings
                    if future.done() and not future.cancelled():
                        future.exception()
                raise
        return _batch_outcomes(outcomes, return_exceptions)

    async def round_trip(self, submit: Callable[..., None], *args: Any) -> Any:
        """A primitive that does not wait (release, refresh, extend, push):
        cancelling its task drops the completion, as for a decision."""
        st = self.state()
        return await self.settle(st, *st.start(submit, *args))

    async def wait(self, submit: Callable[..., None], give_back: Callable[[_LoopState, Any], None],
                   *args: Any) -> Any:
        """A wait in the core (acquire, pop). Cancelled, it asks the core to
        stop (rl_cancel: the core gives back what a try got meanwhile), and
        what completed anyway goes back through give_back(state, value)."""
        st = self.state()
        tag, future = st.start(submit, *args)
        st.give_backs[tag] = functools.partial(give_back, st)
        try:
            return await future
        except asyncio.CancelledError:
            if not future.done():
                future.cancel()
            if future.cancelled():  # drain gives back what still completes OK
                st.cancel(tag)
            elif future.exception() is None:  # completed just before the cancel reached the task
                give_back(st, future.result())
            raise

    def close(self) -> None:
        """The client was closed: every loop's state resolves what it still
        waits for (ClientClosed) and stops watching its queue."""
        with self.loops_lock:
            states, self.loops, self.last = list(self.loops.values()), {}, None
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for st in states:
            if st.loop is current or st.loop.is_closed():
                st.shutdown()
            else:
                try:
                    st.loop.call_soon_threadsafe(st.shutdown)
                except RuntimeError:  # closed meanwhile
                    st.teardown()

    async def call(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking call without an asynchronous form, in the executor."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(func, *args, **kwargs))


def _release_permit(st: _LoopState, got: Optional[Tuple[str, int, float]], *, name: str, lock: bool) -> None:
    if got is not None:
        st.start_quietly(_Completions.submit_held, _LOCK_RELEASE if lock else _SEM_RELEASE, name, got[0], None)


def _decision_stands(st: _LoopState, result: Result) -> None:
    """A decision made before the cancel reached the core is not undone."""


def _push_back(st: _LoopState, messages: List[bytes], *, queue: str) -> None:
    for message in messages:  # due at once, as the core pushes back
        st.start_quietly(_Completions.submit_push, queue, message, 0)


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
        self._leased = limiter.lease is not None

    name = property(lambda self: self.sync.name, doc="The limiter's name.")
    algorithm = property(lambda self: self.sync.algorithm, doc="The algorithm's name.")
    rate = property(lambda self: self.sync.rate, doc="(limit, period_seconds).")
    period = property(lambda self: self.sync.period, doc="The period in seconds.")
    burst = property(lambda self: self.sync.burst, doc="token_bucket/gcra capacity, or None.")
    rates = property(lambda self: self.sync.rates, doc="Every rate as (limit, period_seconds).")
    bursts = property(lambda self: self.sync.bursts, doc="One burst per rate (None: the limit).")
    initial_tokens = property(lambda self: self.sync.initial_tokens, doc="None: full; 0: empty; n.")
    per_client = property(lambda self: self.sync.per_client, doc="True: a quota per client.")
    config = property(lambda self: self.sync.config, doc="The spec as a LimiterConfig.")
    stored = property(lambda self: self.sync.stored, doc="True: the spec stored in Redis.")
    lease = property(lambda self: self.sync.lease, doc="Seconds a leased block stays valid; None: no lease.")

    async def close(self) -> None:
        """See Limiter.close: this client's leases on the name go back to
        Redis (in the executor: one round trip per lease). `async with`
        calls it on exit."""
        await self._run.call(self.sync.close)

    async def __aenter__(self) -> "AsyncLimiter":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def acquire(self, id: Text, permits: int = 1, *, timeout: Optional[Seconds] = None,
                      now: Optional[Seconds] = None) -> Result:
        """See Limiter.acquire. Without a timeout: one decision on the
        asynchronous core. With one, decisions until one passes or waiting
        cannot help, waiting retry_after in between in the core's I/O
        thread (rl_submit_acquire_wait: no thread, no timer on the loop). Cancelling the task does not undo a decision Redis already
        made (see the module's docstring). With a lease, a decision taken
        from the block in hand completes at once: the task does not suspend
        (as with any await that needs no I/O)."""
        if timeout:
            return await self._run.wait(_Completions.submit_wait, _decision_stands, self.sync, id, permits, timeout,
                                        now)
        if self._leased:  # one coroutine less on the hot path
            got = self._run.leased(self.sync, _ACQUIRE, id, permits, now)
            return got if type(got) is Result else await got  # type: ignore[no-any-return]
        return await self._run.decide(self.sync, _ACQUIRE, id, permits, None, now)

    async def peek(self, id: Text, permits: int = 1, *, now: Optional[Seconds] = None) -> Result:
        """See Limiter.peek."""
        return await self._run.decide(self.sync, _PEEK, id, permits, None, now)

    async def acquire_at_most(self, id: Text, permits: int, *, now: Optional[Seconds] = None) -> Result:
        """See Limiter.acquire_at_most (on the asynchronous core)."""
        return await self._run.decide(self.sync, _UP_TO, id, permits, None, now)

    async def refund(self, id: Text, permits: int = 1, *, now: Optional[Seconds] = None) -> Result:
        """See Limiter.refund (on the asynchronous core)."""
        return await self._run.decide(self.sync, _REFUND, id, permits, None, now)

    async def reset(self, id: Text) -> None:
        """See Limiter.reset."""
        await self._run.round_trip(_Completions.submit_reset, self.sync, id)

    @overload
    async def acquire_many(self, requests: Iterable[Union[Text, Tuple[Text, int]]], *,
                           now: Optional[Seconds] = None, return_exceptions: Literal[False] = False) -> List[Result]:
        ...

    @overload
    async def acquire_many(self, requests: Iterable[Union[Text, Tuple[Text, int]]], *,
                           now: Optional[Seconds] = None,
                           return_exceptions: bool) -> List[Union[Result, BaseException]]:
        ...

    async def acquire_many(self, requests: Iterable[Union[Text, Tuple[Text, int]]], *,
                           now: Optional[Seconds] = None, return_exceptions: bool = False) -> List[Any]:
        """See Limiter.acquire_many: validated as a whole first (one invalid
        request: InvalidArgument, nothing sent), then one decision per id on
        the asynchronous core, pipelined together. Each request has its own
        outcome: return_exceptions=True returns each failed request's
        exception in its place; otherwise the first failure is raised with
        the list as .results."""
        return await self._run.decide_many(self.sync, requests, now, return_exceptions)

    async def reserve(self, id: Text, permits: int = 1, *, max_wait: Seconds = 0.0,
                      now: Optional[Seconds] = None) -> float:
        """See Limiter.reserve; returns the seconds to wait (await
        asyncio.sleep(it) before acting)."""
        result = await self._run.decide(self.sync, _RESERVE, id, permits, max_wait, now)
        return _reserved(self.sync.name, permits, max_wait, result)

    def key(self, id: Text) -> str:
        """The Redis key holding id's state (of the first rate)."""
        return self.sync.key(id)

    def keys(self, id: Text) -> List[str]:
        """The Redis keys holding id's state, one per rate."""
        return self.sync.keys(id)

    def limit(self, key: Union[Callable[..., Text], Text, None] = None, *, permits: int = 1,
                    timeout: Optional[Seconds] = None) -> Callable[[Callable[..., Awaitable[T]]],
                                                                Callable[..., Awaitable[T]]]:
        """Decorator for coroutine functions: acquire before each call and
        raise RateLimitExceeded when denied (see Limiter.limit: a key callable
        gets the arguments it names, by name)."""
        def decorate(func: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
            identity = _key_function(key, func)

            @functools.wraps(func)
            async def wrapper(*args: Any, **kwargs: Any) -> T:
                ident = identity(args, kwargs)
                result = await self.acquire(ident, permits, timeout=timeout)
                if not result.allowed:
                    raise _exceeded(result, "%s: rate limit exceeded for %r; retry after %.3f s"
                                          % (self.name, ident, result.retry_after or 0.0), self)
                return await func(*args, **kwargs)
            return wrapper
        return decorate

    def __repr__(self) -> str:
        return "<Async%s>" % repr(self.sync)[1:-1]


async def _renew(held: Any, run: _Runner, op: int, lease: Optional[Seconds]) -> bool:
    """Permit.refresh / HeldLock.extend on the asynchronous core."""
    if lease is None:
        lease = held._owner.lease
    ok: bool = await run.round_trip(_Completions.submit_held, op, held._owner.name, held.id, lease)
    if ok:
        held.lease = float(lease)
    return ok


async def _release(held: Any, run: _Runner, op: int) -> bool:
    """Permit.release / HeldLock.release on the asynchronous core: once."""
    if held.released:
        return False
    held.released = True
    released: bool = await run.round_trip(_Completions.submit_held, op, held._owner.name, held.id, None)
    return released


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
        return await _renew(self.sync, self._run, _SEM_REFRESH, lease)

    async def release(self) -> bool:
        """See Permit.release."""
        return await _release(self.sync, self._run, _SEM_RELEASE)

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

    async def _acquire(self, timeout: Seconds) -> Optional[AsyncPermit]:
        sem = self.sync
        got = await self._run.wait(_Completions.submit_acquire,
                                   functools.partial(_release_permit, name=sem.name, lock=False),
                                   sem.name, sem.permits, sem.lease, timeout)
        return AsyncPermit(_sync.Permit(sem, *got), self._run) if got is not None else None

    def acquire(self, timeout: Optional[Seconds] = None) -> "_AwaitableContext[AsyncPermit]":
        """Await a permit (raises AcquireTimeout), or `async with sem.acquire(...) as permit:`.
        The wait holds no thread; cancelling it leaves no permit and no
        place in the queue behind."""
        async def go() -> AsyncPermit:
            while True:
                permit = await self._acquire(_FOREVER_SLICE if timeout is None else timeout)
                if permit is not None:
                    return permit
                if timeout is not None:
                    raise self.sync._timed_out(timeout)
        return _AwaitableContext(go())

    async def try_acquire(self) -> Optional[AsyncPermit]:
        """A permit if one is free right now, else None."""
        return await self._acquire(0)

    async def available(self) -> int:
        """Permits free right now."""
        available: int = await self._run.round_trip(_Completions.submit_count, 1, self.sync.name,
                                                    self.sync.permits)
        return available

    async def holders(self) -> int:
        """Live holders right now."""
        holders: int = await self._run.round_trip(_Completions.submit_count, 0, self.sync.name, None)
        return holders


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
        return await _renew(self.sync, self._run, _LOCK_EXTEND, lease)

    async def release(self) -> bool:
        """See HeldLock.release."""
        return await _release(self.sync, self._run, _LOCK_RELEASE)

    async def __aenter__(self) -> "AsyncHeldLock":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.release()


class AsyncLock:
    """The async face of ratelimit.Lock."""

    def __init__(self, lock: _sync.Lock, runner: _Runner) -> None:
        self.sync = lock
        self._run = runner

    async def _acquire(self, timeout: Seconds) -> Optional[AsyncHeldLock]:
        lock = self.sync
        got = await self._run.wait(_Completions.submit_acquire,
                                   functools.partial(_release_permit, name=lock.name, lock=True),
                                   lock.name, None, lock.lease, timeout)
        return AsyncHeldLock(_sync.HeldLock(lock, *got), self._run) if got is not None else None

    def acquire(self, timeout: Optional[Seconds] = None) -> "_AwaitableContext[AsyncHeldLock]":
        """Await the lock (raises AcquireTimeout), or `async with lock.acquire(...) as held:`.
        The wait holds no thread; cancelling it leaves the lock not held."""
        async def go() -> AsyncHeldLock:
            while True:
                held = await self._acquire(_FOREVER_SLICE if timeout is None else timeout)
                if held is not None:
                    return held
                if timeout is not None:
                    raise self.sync._timed_out(timeout)
        return _AwaitableContext(go())

    async def try_acquire(self) -> Optional[AsyncHeldLock]:
        """The lock if it is free right now, else None."""
        return await self._acquire(0)


class AsyncDelayQueue:
    """The async face of ratelimit.DelayQueue."""

    def __init__(self, queue: _sync.DelayQueue, runner: _Runner) -> None:
        self.sync = queue
        self._run = runner

    async def push(self, message: Text, delay: Seconds = 0.0) -> bool:
        """See DelayQueue.push."""
        added: bool = await self._run.round_trip(_Completions.submit_push, self.sync.name, message, delay)
        return added

    async def _pop(self, max: int, timeout: Optional[Seconds]) -> List[bytes]:
        got: List[bytes] = await self._run.wait(_Completions.submit_pop,
                                                functools.partial(_push_back, queue=self.sync.name),
                                                self.sync.name, max, timeout)
        return got

    async def pop_ready(self, max: int = 1) -> List[Any]:
        """See DelayQueue.pop_ready."""
        return self.sync._out(await self._pop(max, None))

    async def pop(self, max: int = 1, timeout: Optional[Seconds] = None) -> List[Any]:
        """See DelayQueue.pop. The wait holds no thread; cancelling it loses
        no message (what it took meanwhile is pushed back, due at once)."""
        while True:
            got = await self._pop(max, _FOREVER_SLICE if timeout is None else timeout)
            if got or timeout is not None:
                return self.sync._out(got)

    async def size(self) -> int:
        """See DelayQueue.size."""
        size: int = await self._run.round_trip(_Completions.submit_count, 2, self.sync.name, None)
        return size

    async def remove(self, message: Text) -> bool:
        """See DelayQueue.remove."""
        removed: bool = await self._run.round_trip(_Completions.submit_count, 3, self.sync.name, message)
        return removed


class AsyncClient:
    """The asyncio client: same options as ratelimit.Client (URLs for one
    server, TLS, Sentinel and Cluster; the ssl_* options; reconnect_max).

    Prefer ``await AsyncClient.connect(url, ...)``, which connects in the
    executor; AsyncClient(url, ...) connects at once (blocking briefly).
    executor: where the few calls without an asynchronous form run (see
    the module's docstring: one round trip each, never a wait); default:
    the event loop's default executor. Decisions, acquires, pops and the
    other primitives never use it.

    One client may serve several event loops (one after the other, or in
    different threads): each loop gets a completion queue of its own.
    """

    def __init__(self, url: str, *, executor: Optional[concurrent.futures.Executor] = None,
                 prefix: Optional[str] = None, timeout: Optional[Seconds] = None,
                 connect_timeout: Optional[Seconds] = None, pool_size: Optional[int] = None,
                 on_redis_error: Optional[str] = None, ssl_ca_certs: Optional[_sync.FilePath] = None,
                 ssl_certfile: Optional[_sync.FilePath] = None, ssl_keyfile: Optional[_sync.FilePath] = None,
                 ssl_cert_reqs: Union[str, int, None] = None, reconnect_max: Optional[Seconds] = None,
                 config_refresh: Optional[Seconds] = None, client_id: Optional[str] = None,
                 max_in_flight: Optional[int] = None, max_batch: Optional[int] = None) -> None:
        self.executor = executor
        self.sync = _sync.Client(url, prefix=prefix, timeout=timeout, connect_timeout=connect_timeout,
                                 pool_size=pool_size, on_redis_error=on_redis_error, ssl_ca_certs=ssl_ca_certs,
                                 ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, ssl_cert_reqs=ssl_cert_reqs,
                                 reconnect_max=reconnect_max, config_refresh=config_refresh, client_id=client_id,
                                 max_in_flight=max_in_flight, max_batch=max_batch)
        self._run = _Runner(executor, self.sync)

    @classmethod
    async def connect(cls, url: str, *, executor: Optional[concurrent.futures.Executor] = None,
                      prefix: Optional[str] = None, timeout: Optional[Seconds] = None,
                      connect_timeout: Optional[Seconds] = None, pool_size: Optional[int] = None,
                      on_redis_error: Optional[str] = None, ssl_ca_certs: Optional[_sync.FilePath] = None,
                      ssl_certfile: Optional[_sync.FilePath] = None, ssl_keyfile: Optional[_sync.FilePath] = None,
                      ssl_cert_reqs: Union[str, int, None] = None,
                      reconnect_max: Optional[Seconds] = None, config_refresh: Optional[Seconds] = None,
                      client_id: Optional[str] = None, max_in_flight: Optional[int] = None,
                      max_batch: Optional[int] = None) -> "AsyncClient":
        """Make an AsyncClient without blocking the event loop (the options
        are Client's)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, functools.partial(
            cls, url, executor=executor, prefix=prefix, timeout=timeout, connect_timeout=connect_timeout,
            pool_size=pool_size, on_redis_error=on_redis_error, ssl_ca_certs=ssl_ca_certs,
            ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, ssl_cert_reqs=ssl_cert_reqs,
            reconnect_max=reconnect_max, config_refresh=config_refresh, client_id=client_id,
            max_in_flight=max_in_flight, max_batch=max_batch))

    @property
    def prefix(self) -> Optional[str]:
        """The key prefix in use."""
        return self.sync.prefix

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self.sync.closed

    @property
    def client_id(self) -> Optional[str]:
        """This client's identity for per_client limiters (see Client.client_id)."""
        return self.sync.client_id

    def limiter(self, name: str, rate: Optional[_sync.Rate] = None, *, algorithm: Optional[str] = None,
                burst: Union[int, List[Optional[int]], None] = None, initial_tokens: Optional[int] = None,
                per_client: bool = False, lease: Optional[Seconds] = None) -> AsyncLimiter:
        """See Client.limiter (lease too: decisions from a leased block
        complete without a round trip, on the loop). Making one checks the
        spec stored in Redis for name (one round trip per name at most
        every config_refresh, on this thread); make limiters once, at
        start-up, not per request."""
        return AsyncLimiter(self.sync.limiter(name, rate, algorithm=algorithm, burst=burst,
                                              initial_tokens=initial_tokens, per_client=per_client, lease=lease),
                            self._run)

    async def configure(self, name: str, rate: _sync.Rate, *, algorithm: str = "gcra",
                        burst: Union[int, List[Optional[int]], None] = None, initial_tokens: Optional[int] = None,
                        per_client: bool = False, if_absent: bool = False) -> bool:
        """See Client.configure (in the executor: no asynchronous form)."""
        return await self._run.call(self.sync.configure, name, rate, algorithm=algorithm, burst=burst,
                                    initial_tokens=initial_tokens, per_client=per_client, if_absent=if_absent)

    async def get_config(self, name: str) -> Optional[_sync.LimiterConfig]:
        """See Client.get_config (in the executor: no asynchronous form)."""
        return await self._run.call(self.sync.get_config, name)

    async def delete_config(self, name: str) -> bool:
        """See Client.delete_config (in the executor: no asynchronous form)."""
        return await self._run.call(self.sync.delete_config, name)

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
        """Give every lease's unused permits back (one round trip each, on
        this thread, bounded by the timeout) and close the connections.
        Calls and waits still in flight fail with ClientClosed; the event
        loops stop watching this client's completion queues. An executor=
        passed in stays the caller's to shut down."""
        self.sync.close()
        self._run.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        return "<ratelimit.aio.AsyncClient prefix=%r%s>" % (self.prefix, " closed" if self.closed else "")
