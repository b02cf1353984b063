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

import atexit
import functools
import inspect
import os
import weakref
from typing import Any, Callable, Iterable, List, Optional, Tuple, TypeVar, Union

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

F = TypeVar("F", bound=Callable[..., Any])
Seconds = Union[int, float]
Text = Union[str, bytes]
OneRate = Union[str, Tuple[int, Seconds]]
# one rate, "10/second;1000/hour", or several rates enforced together
Rate = Union[OneRate, List[OneRate], Tuple[OneRate, ...]]
FilePath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

# A wait with no timeout runs as successive waits of this length: the core
# takes a finite timeout, and a day is far beyond any useful single wait.
_FOREVER_SLICE = 86400.0


def _exceeded(result: Result, message: str, limiter: Any = None) -> RateLimitExceeded:
    exc = RateLimitExceeded(message)
    exc.retry_after = result.retry_after
    exc.result = result
    exc.limiter = limiter  # for a 429 handler's headers (ratelimit.contrib.exceeded_headers)
    return exc


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


def _reserved(name: str, permits: int, max_wait: Seconds, result: Result) -> float:
    """reserve()'s answer from its Result: the seconds to wait, or
    RateLimitExceeded when nothing was booked (shared with ratelimit.aio)."""
    if not result.allowed:
        retry = result.retry_after
        raise _exceeded(result, "%s: cannot book %d permit(s) within %.3f s (retry after %.3f s)"
                        % (name, permits, float(max_wait), retry if retry is not None else 0.0))
    return result.wait


def _key_function(key: Union[Callable[..., Text], Text, None],
                  func: Callable[..., Any]) -> Callable[[Tuple[Any, ...], Any], Text]:
    """How limit() finds a call's id: (args, kwargs) -> id. A callable key
    gets the decorated function's arguments that it names, by name (shared
    with ratelimit.aio)."""
    if key is None or not callable(key):
        fixed = "*" if key is None else key
        return lambda args, kwargs: fixed
    sig = inspect.signature(func)
    func_params = sig.parameters
    var_kw = next((p.name for p in func_params.values() if p.kind is p.VAR_KEYWORD), None)
    wanted = []
    takes_all = False
    for p in inspect.signature(key).parameters.values():
        if p.kind is p.VAR_KEYWORD:
            takes_all = True
        elif p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL):
            raise TypeError("limit(key=...): the key's parameters are passed by name; %r cannot be" % p.name)
        elif p.name in func_params and func_params[p.name].kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            wanted.append(p.name)
        elif var_kw is not None:
            wanted.append(p.name)  # may come in the function's **kwargs
        elif p.default is p.empty:
            raise TypeError("limit(key=...): the key's parameter %r is not a parameter of %s%s"
                            % (p.name, getattr(func, "__qualname__", func), sig))

    def identity(args: Tuple[Any, ...], kwargs: Any) -> Text:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        if var_kw is not None:
            given.update(given.pop(var_kw, {}))
        if takes_all:
            return key(**given)
        return key(**{name: given[name] for name in wanted if name in given})
    return identity


def _init_exceeded(self: RateLimitExceeded, retry_after: Optional[float] = None, *args: Any) -> None:
    """RateLimitExceeded(retry_after=None, message=None): the message defaults
    to one naming retry_after."""
    if isinstance(retry_after, str) and not args:
        message, retry_after = retry_after, None
    else:
        message = args[0] if args else (
            "rate limit exceeded" if retry_after is None
            else "rate limit exceeded; retry after %.3f s" % retry_after)
    Exception.__init__(self, message)
    self.retry_after = retry_after
    self.result = None
    self.limiter = None


# the class is made in C (module state); its constructor is easier here
setattr(RateLimitExceeded, "__init__", _init_exceeded)
setattr(RateLimitExceeded, "retry_after", None)
setattr(RateLimitExceeded, "result", None)
setattr(RateLimitExceeded, "limiter", None)


class LimiterConfig:
    """A limiter's spec, immutable: what Client.get_config() returns and
    Limiter.config says.

    algorithm: its name; rates: a tuple of (limit, period_seconds), the
    first rate first (several are enforced together, all or nothing);
    bursts: one per rate, None where the burst is the limit; initial_tokens:
    None (a new entity starts full), 0 (empty) or n; per_client: True when
    each client (Client.client_id) has a quota of its own. str() gives the
    core's text, e.g. "gcra 10/second;1000/hour burst 20 per_client".
    """

    __slots__ = ("algorithm", "rates", "bursts", "initial_tokens", "per_client", "_text")

    def __init__(self, algorithm: str, rates: Iterable[Tuple[int, float]], bursts: Iterable[Optional[int]],
                 initial_tokens: Optional[int], per_client: bool, text: str) -> None:
        set_ = object.__setattr__
        set_(self, "algorithm", algorithm)
        set_(self, "rates", tuple(tuple(r) for r in rates))
        set_(self, "bursts", tuple(bursts))
        set_(self, "initial_tokens", initial_tokens)
        set_(self, "per_client", bool(per_client))
        set_(self, "_text", text)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LimiterConfig is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("LimiterConfig is immutable")

    def _key(self) -> Tuple[Any, ...]:
        return (self.algorithm, self.rates, self.bursts, self.initial_tokens, self.per_client)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LimiterConfig):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return "LimiterConfig(algorithm=%r, rates=%r, bursts=%r, initial_tokens=%r, per_client=%r)" % self._key()


class Limiter(_ratelimit.Limiter):
    """A named rate limit applied per id (user, IP, API key...).

    Made by Client.limiter(name, rate, algorithm=..., burst=...). Methods:
    acquire(), acquire_at_most(), peek(), refund(), reset(),
    acquire_many(), reserve(), and the limit() decorator. Each decision is
    one atomic script run by Redis, so any number of threads and processes
    share the limit exactly.

    Properties: name, algorithm, rate (the first rate's (limit,
    period_seconds)), period, burst, rates, bursts, initial_tokens,
    per_client, config (a LimiterConfig), stored (made with rate=None: the
    spec stored in Redis, read through the client's cache), lease (seconds,
    or None), client.

    With a lease, close() (or the end of a with block) gives this client's
    unused leased permits on the name back to Redis.
    """

    __slots__ = ()

    def __enter__(self) -> "Limiter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def config(self) -> LimiterConfig:
        """The spec calls use now, as a LimiterConfig (for a stored spec:
        as this client sees it, at most config_refresh old)."""
        return LimiterConfig(*self._spec())

    @property
    def rates(self) -> Tuple[Tuple[int, float], ...]:
        """Every rate as (limit, period_seconds), the first rate first."""
        return self.config.rates

    @property
    def bursts(self) -> Tuple[Optional[int], ...]:
        """One burst per rate (None: the limit)."""
        return self.config.bursts

    @property
    def initial_tokens(self) -> Optional[int]:
        """None: a new entity starts full; 0: empty; n: with n permits."""
        return self.config.initial_tokens

    @property
    def per_client(self) -> bool:
        """True when each client has a quota of its own (Client.client_id)."""
        return self.config.per_client

    def reserve(self, id: Text, permits: int = 1, *, max_wait: Seconds = 0.0,
                now: Optional[Seconds] = None) -> float:
        """Book the next slot for id and return how long to wait for it.

        For token_bucket, leaky_bucket and gcra: the permits are booked even
        if they only become available later (up to max_wait seconds ahead);
        the caller then sleeps the returned number of seconds (0.0: go now)
        and proceeds without asking again. Raises RateLimitExceeded (with
        retry_after) if the slot lies beyond max_wait; nothing is booked then.
        """
        return _reserved(self.name, permits, max_wait, self._reserve(id, permits, max_wait=max_wait, now=now))

    def limit(self, key: Union[Callable[..., Text], Text, None] = None, *, permits: int = 1,
              timeout: Optional[Seconds] = None) -> Callable[[F], F]:
        """Decorator: acquire before each call, raise RateLimitExceeded if denied.

        key: a fixed id; None limits all calls together under the id "*";
        or a callable returning the id, given by name the decorated
        function's arguments it names and nothing else:
        ``key=lambda request: request.user`` on ``def view(request,
        item_id)`` receives ``request`` only (a key with ``**kwargs`` gets
        them all). A parameter of the key that the function lacks is a
        TypeError at decoration.
        timeout: seconds to wait for permits before giving up.
        Coroutine functions are supported; the blocking call then runs in
        the event loop's default executor.
        """
        def decorate(func: F) -> F:
            identity = _key_function(key, func)

            def check(ident: Text) -> None:
                result = self.acquire(ident, permits, timeout=timeout)
                if not result.allowed:
                    raise _exceeded(result, "%s: rate limit exceeded for %r; retry after %.3f s"
                                    % (self.name, ident, result.retry_after or 0.0), self)

            if inspect.iscoroutinefunction(func):
                @functools.wraps(func)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    import asyncio
                    ident = identity(args, kwargs)
                    await asyncio.get_running_loop().run_in_executor(None, check, ident)
                    return await func(*args, **kwargs)
                return async_wrapper  # type: ignore[return-value]

            @functools.wraps(func)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                check(identity(args, kwargs))
                return func(*args, **kwargs)
            return wrapper  # type: ignore[return-value]
        return decorate


class _Held:
    """What a permit and a held lock share: a lease that can be renewed, a
    release that happens once, and a with block that releases on exit."""

    __slots__ = ("_owner", "id", "fencing_token", "lease", "released")

    def __init__(self, owner: Any, id: str, fencing_token: int, lease: float) -> None:
        self._owner = owner
        self.id = id
        self.fencing_token = fencing_token
        self.lease = lease
        self.released = False

    def _renew(self, lease: Optional[Seconds], call: Callable[[str, str, Seconds], bool]) -> bool:
        if lease is None:
            lease = self._owner.lease
        ok = call(self._owner.name, self.id, lease)
        if ok:
            self.lease = float(lease)
        return ok

    def _release(self, call: Callable[[str, str], bool]) -> bool:
        if self.released:
            return False
        self.released = True
        return call(self._owner.name, self.id)

    def release(self) -> bool:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class Permit(_Held):
    """A semaphore permit; a context manager that releases it on exit.

    id: the permit's unique id; fencing_token: strictly increasing per
    semaphore name (pass it to the resource you guard so it can refuse a
    holder whose lease already expired); lease: seconds the permit lasts
    unless refreshed.
    """

    __slots__ = ()

    def __init__(self, semaphore: "Semaphore", id: str, fencing_token: int, lease: float) -> None:
        super().__init__(semaphore, id, fencing_token, lease)

    @property
    def semaphore(self) -> "Semaphore":
        """The semaphore this permit belongs to."""
        return self._owner  # type: ignore[no-any-return]

    def refresh(self, lease: Optional[Seconds] = None) -> bool:
        """Extend the lease to lease seconds from now (default: the
        semaphore's lease). False if the permit had already expired."""
        return self._renew(lease, self.semaphore.client._semaphore_refresh)

    def release(self) -> bool:
        """Give the permit back. False if it had expired (or was released)."""
        return self._release(self.semaphore.client._semaphore_release)

    def __enter__(self) -> "Permit":
        return self

    def __repr__(self) -> str:
        return "<Permit %s of %r fencing_token=%d>" % (self.id, self.semaphore.name, self.fencing_token)


class Semaphore:
    """A fair (FIFO) distributed counting semaphore with expiring leases.

    Made by Client.semaphore(name, permits, lease). At most `permits`
    holders at once across all processes; a permit not released or
    refreshed within `lease` seconds expires, so a crashed holder cannot
    block the others forever.
    """

    def __init__(self, client: "Client", name: str, permits: int, lease: Seconds) -> None:
        self.client = client
        self.name = name
        self.permits = permits
        self.lease = lease

    def acquire(self, timeout: Optional[Seconds] = None, *,
                cancel: Optional[Callable[[], bool]] = None) -> Permit:
        """Wait up to timeout seconds (None: indefinitely) for a permit.

        Returns a Permit (use it in a with block to release it). Raises
        AcquireTimeout (a NotAcquired, not a RedisFailure) if none was
        granted in time. Waiters are served in arrival order; Ctrl-C or a
        true cancel() stops the wait.
        """
        while True:
            got = self.client._semaphore_acquire(self.name, self.permits, self.lease,
                                                 _FOREVER_SLICE if timeout is None else timeout, cancel)
            if got is not None:
                return Permit(self, *got)
            if timeout is not None:
                raise self._timed_out(timeout)

    def _timed_out(self, timeout: Seconds) -> AcquireTimeout:
        # shared with ratelimit.aio
        return AcquireTimeout("semaphore %r: no permit within %s s (all %d taken)" % (self.name, timeout, self.permits))

    def try_acquire(self) -> Optional[Permit]:
        """A permit if one is free right now, else None (no waiting)."""
        got = self.client._semaphore_acquire(self.name, self.permits, self.lease, 0)
        return Permit(self, *got) if got is not None else None

    def available(self) -> int:
        """Permits free right now (permits minus live holders)."""
        return self.client._semaphore_available(self.name, self.permits)

    def holders(self) -> int:
        """Live (unexpired) holders right now."""
        return self.client._semaphore_holders(self.name)

    def __repr__(self) -> str:
        return "<Semaphore %r permits=%d lease=%s>" % (self.name, self.permits, self.lease)


class HeldLock(_Held):
    """A held lock; a context manager that releases it on exit.

    token (also id): the owner token (only its holder can release or
    extend); fencing_token: strictly increasing per lock name; lease: seconds.
    """

    __slots__ = ()

    def __init__(self, lock: "Lock", token: str, fencing_token: int, lease: float) -> None:
        super().__init__(lock, token, fencing_token, lease)

    @property
    def lock(self) -> "Lock":
        """The lock this hold belongs to."""
        return self._owner  # type: ignore[no-any-return]

    @property
    def token(self) -> str:
        """The owner token (same as id)."""
        return self.id

    def extend(self, lease: Optional[Seconds] = None) -> bool:
        """Make the lease end lease seconds from now (default: the lock's
        lease). False if the lock was lost (lease expired)."""
        return self._renew(lease, self.lock.client._lock_extend)

    def release(self) -> bool:
        """Unlock. False if the lease had already expired."""
        return self._release(self.lock.client._lock_release)

    def __enter__(self) -> "HeldLock":
        return self

    def __repr__(self) -> str:
        return "<HeldLock %r fencing_token=%d>" % (self.lock.name, self.fencing_token)


class Lock:
    """A distributed mutual-exclusion lock with owner and fencing tokens.

    Made by Client.lock(name, lease). The lease (seconds) bounds how long a
    crashed holder keeps it; extend it for long work.
    """

    def __init__(self, client: "Client", name: str, lease: Seconds) -> None:
        self.client = client
        self.name = name
        self.lease = lease

    def acquire(self, timeout: Optional[Seconds] = None, *,
                cancel: Optional[Callable[[], bool]] = None) -> HeldLock:
        """Wait up to timeout seconds (None: indefinitely) for the lock.
        Returns a HeldLock (a context manager); raises AcquireTimeout (a
        NotAcquired, not a RedisFailure) if it stayed held by another owner."""
        while True:
            got = self.client._lock_acquire(self.name, self.lease,
                                            _FOREVER_SLICE if timeout is None else timeout, cancel)
            if got is not None:
                return HeldLock(self, *got)
            if timeout is not None:
                raise self._timed_out(timeout)

    def _timed_out(self, timeout: Seconds) -> AcquireTimeout:
        # shared with ratelimit.aio
        return AcquireTimeout("lock %r: not acquired within %s s (held by another owner)" % (self.name, timeout))

    def try_acquire(self) -> Optional[HeldLock]:
        """The lock if it is free right now, else None."""
        got = self.client._lock_acquire(self.name, self.lease, 0)
        return HeldLock(self, *got) if got is not None else None

    def __repr__(self) -> str:
        return "<Lock %r lease=%s>" % (self.name, self.lease)


class DelayQueue:
    """A queue of messages delivered after a delay, each to one consumer.

    Made by Client.delay_queue(name). A message is its own id: pushing one
    already queued changes nothing, so producers may retry. Messages are
    returned as str (UTF-8; undecodable bytes survive as surrogate escapes
    and push back unchanged), or as bytes with decode=False. push() and
    remove() accept str or bytes.
    """

    def __init__(self, client: "Client", name: str, decode: bool = True) -> None:
        self.client = client
        self.name = name
        self.decode = decode

    def _out(self, items: List[bytes]) -> List[Any]:
        if not self.decode:
            return items
        return [m.decode("utf-8", "surrogateescape") for m in items]

    def push(self, message: Text, delay: Seconds = 0.0) -> bool:
        """Schedule message for delivery after delay seconds. False if it
        was already queued (then it keeps its original due time)."""
        return self.client._queue_push(self.name, message, delay)

    def pop_ready(self, max: int = 1) -> List[Any]:
        """Take up to max messages that are due now (maybe none)."""
        return self._out(self.client._queue_pop_ready(self.name, max))

    def pop(self, max: int = 1, timeout: Optional[Seconds] = None, *,
            cancel: Optional[Callable[[], bool]] = None) -> List[Any]:
        """Like pop_ready, but wait up to timeout seconds (None:
        indefinitely) for a message to become due; [] on timeout. The wait
        blocks in Redis (pub/sub), no polling."""
        while True:
            got = self.client._queue_pop_wait(self.name, max,
                                              _FOREVER_SLICE if timeout is None else timeout, cancel)
            if got or timeout is not None:
                return self._out(got)

    def size(self) -> int:
        """Messages queued, due or not."""
        return self.client._queue_size(self.name)

    def remove(self, message: Text) -> bool:
        """Drop a queued message. False if it was not queued."""
        return self.client._queue_remove(self.name, message)

    def __repr__(self) -> str:
        return "<DelayQueue %r>" % (self.name,)


class Client(_ratelimit.Client):
    """A connection pool to Redis, shared by all threads.

    url: where Redis is; the same strings in every binding:
        "redis://[[user]:password@]host[:port][/db]",
        "unix:///path.sock[?db=N]",
        "rediss://host:port/db[?ssl_cert_reqs=required|none&ssl_ca_certs=...
        &ssl_certfile=...&ssl_keyfile=...]" (TLS, see has_tls()),
        "redis+sentinel://h1:26379,h2:26379/service[/db][?sentinel_username=...
        &sentinel_password=...]",
        "redis+cluster://h1:7000,h2:7000" (and rediss+sentinel://,
        rediss+cluster:// for TLS).
        With on_redis_error="raise" (the default) one connection is made at
        once, so a bad URL, password, certificate or a dead server raises
        here; with "allow" or "deny" the client opens while Redis is down.
    prefix: the first part of every Redis key (core default "rl").
    timeout: seconds a Redis command may take (core default 1.0).
    connect_timeout: seconds to connect (core default 1.0).
    pool_size: connections per server shared by all threads (core default 8).
    on_redis_error: what a rate-limit decision does when Redis cannot be
        reached: "raise" (ConnectionError / Timeout; the default), "allow"
        (fail open) or "deny" (fail closed); the Result then has
        fallback=True.
    ssl_ca_certs, ssl_certfile, ssl_keyfile, ssl_cert_reqs: TLS options
        named as redis-py names them; each overrides the URL's option of the
        same name and needs a rediss:// URL. ssl_ca_certs: a PEM CA bundle
        (default: the system's trust store); ssl_certfile / ssl_keyfile: a
        client certificate and its key (PEM; the key defaults to the
        certificate file) for servers with tls-auth-clients; ssl_cert_reqs:
        "required" (check the chain and the host name; the default) or
        "none" (encrypt only), or ssl.CERT_REQUIRED / ssl.CERT_NONE.
    reconnect_max: while Redis is unreachable, reconnects back off
        exponentially (with jitter) up to this many seconds, and calls in
        between fail at once or are decided by on_redis_error (core
        default 1.0).
    config_refresh: seconds a spec stored in Redis (configure()) is cached
        per name before it is read again (core default 1.0): a change
        reaches this client within it.
    client_id: this client's identity for per_client limiters, 1..64 of
        [A-Za-z0-9._-] (e.g. a host or pod name, to keep its quotas across
        restarts); default: 32 random hex digits. See the client_id
        property.
    max_in_flight: requests in flight on one connection of the asynchronous
        core (ratelimit.aio), 1..1000000 (core default 1000). Past it a
        request waits, unsent, for room; while the server is behind (its
        oldest owed reply is older than timeout) it raises Backlog at once
        instead, as does one still unsent at its timeout: nothing was sent,
        nothing consumed. Blocking calls: while a server is behind it gets
        one call at a time, and a call that would be a second raises
        Backlog. on_redis_error decides a rate limit, as for a Timeout.
    max_batch: plain decisions (acquire, peek, reserve, up to, refund; no
        lease) for one server (one slot in a cluster) ready together go in
        one script call, up to this many, 1..100 (core default 16; 1: one
        call each). The asynchronous core batches what is queued at once and
        never waits for company; acquire_many batches its requests. Costs
        Redis less CPU per decision; a batch holds Redis for its length.

    Thread-safe, and fork-safe: a child process opens its own connections
    on first use (and leaves the parent's leases alone). Closing (close() or
    a with block) gives every lease's unused permits back to Redis and waits
    for no call: the connections go when the last running call returns. A
    client still open when the interpreter exits normally gives its leases
    back then (atexit); it is not closed, so daemon threads still using it
    are not failed.
    """

    __slots__ = ()

    def __init__(self, url: str, *, prefix: Optional[str] = None, timeout: Optional[Seconds] = None,
                 connect_timeout: Optional[Seconds] = None, pool_size: Optional[int] = None,
                 on_redis_error: Optional[str] = None, ssl_ca_certs: Optional[FilePath] = None,
                 ssl_certfile: Optional[FilePath] = None, ssl_keyfile: Optional[FilePath] = None,
                 ssl_cert_reqs: Union[str, int, None] = None, reconnect_max: Optional[Seconds] = None,
                 config_refresh: Optional[Seconds] = None, client_id: Optional[str] = None,
                 max_in_flight: Optional[int] = None, max_batch: Optional[int] = None) -> None:
        super().__init__(url, prefix=prefix, timeout=timeout, connect_timeout=connect_timeout,
                         pool_size=pool_size, on_redis_error=on_redis_error, ssl_ca_certs=ssl_ca_certs,
                         ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile, ssl_cert_reqs=ssl_cert_reqs,
                         reconnect_max=reconnect_max, config_refresh=config_refresh, client_id=client_id,
                         max_in_flight=max_in_flight, max_batch=max_batch)
        _open_clients.add(self)

    def limiter(self, name: str, rate: Optional[Rate] = None, *, algorithm: Optional[str] = None,
                burst: Union[int, List[Optional[int]], None] = None, initial_tokens: Optional[int] = None,
                per_client: bool = False, lease: Optional[Seconds] = None) -> Limiter:
        """A rate limiter named name.

        rate: "10/second", "100/minute", "5 per 30 seconds", "3/500ms",
            "2/week"... or (limit, period_seconds); several rates enforced
            together (a call passes only if every rate admits it, then each
            consumes): a list of those, or "10/second;1000/hour" as the
            limits library writes them (at most 8). None: every call uses
            the spec stored in Redis for name (configure()), read at most
            every config_refresh seconds, so a change reaches every client
            in every language; nothing stored raises InvalidArgument here
            (or, while Redis cannot be reached under on_redis_error
            "allow"/"deny", on the first call).
        algorithm: fixed_window, sliding_log, sliding_window, token_bucket,
            leaky_bucket or gcra (see ratelimit.ALGORITHMS); None: gcra.
        burst: token_bucket/gcra capacity (None: the limit); with several
            rates an int applies to the first rate, a list gives one per
            rate (None entries: the limit).
        initial_tokens: token_bucket, gcra, leaky_bucket: the permits an
            entity Redis holds nothing for starts with (Bucket4j's initial
            tokens); None: full, 0: none.
        per_client: True gives each client (client_id) a quota of its own
            for every id; False (default): one quota shared by all.
        lease: None (default) asks Redis for every decision. Seconds
            (0.001..3600, e.g. 0.05): acquire, acquire_at_most and
            acquire_many take permits from Redis in blocks valid that long
            and decide from this client's memory until a block is used or
            its validity ends (Result.local); unused permits go back when
            the lease ends, on close() of the limiter or the client, and at
            a normal interpreter exit. The limit stays exact whatever mix of
            clients shares the key (docs/semantics.md, "Leases"); for hot
            keys. Also with rate=None (the stored spec).

        With a rate, a spec stored in Redis for name must be the same one
        (else InvalidArgument naming both): a name never silently becomes
        two limiters. Either check costs one round trip per name at most
        every config_refresh seconds.
        """
        return Limiter(self, name, rate, algorithm=algorithm, burst=burst, initial_tokens=initial_tokens,
                       per_client=per_client, lease=lease)

    def configure(self, name: str, rate: Rate, *, algorithm: str = "gcra",
                  burst: Union[int, List[Optional[int]], None] = None, initial_tokens: Optional[int] = None,
                  per_client: bool = False, if_absent: bool = False) -> bool:
        """Store a limiter's spec in Redis under name (Redisson's setRate;
        with if_absent=True trySetRate): limiters made with rate=None, in
        any client and language, use it within their config_refresh.
        Arguments as limiter(). Entities keep their state across a change.
        Returns True when stored; False when if_absent and one already was
        (it stays)."""
        return self._config_set(name, rate, algorithm, burst, initial_tokens, per_client, if_absent)

    def get_config(self, name: str) -> Optional[LimiterConfig]:
        """The spec stored in Redis for name (read now, not cached), or None."""
        got = self._config_get(name)
        return LimiterConfig(*got) if got is not None else None

    def delete_config(self, name: str) -> bool:
        """Delete the spec stored for name. False if none was. Limiters made
        with rate=None then fail (InvalidArgument) once their cache expires."""
        return self._config_delete(name)

    def semaphore(self, name: str, permits: int, lease: Seconds) -> Semaphore:
        """A fair distributed semaphore of `permits` permits, each lasting
        `lease` seconds unless refreshed."""
        _check_name(name)
        return Semaphore(self, name, permits, lease)

    def lock(self, name: str, lease: Seconds) -> Lock:
        """A distributed lock whose holder keeps it at most `lease` seconds
        unless extended."""
        _check_name(name)
        return Lock(self, name, lease)

    def delay_queue(self, name: str, *, decode: bool = True) -> DelayQueue:
        """A delay queue named name (messages returned as str unless
        decode=False)."""
        _check_name(name)
        return DelayQueue(self, name, decode)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<ratelimit.Client prefix=%r%s>" % (self.prefix, " closed" if self.closed else "")


# Clients not yet collected: at a normal interpreter exit their leases are
# given back. They are not closed: a daemon thread still deciding then goes
# on (with new blocks, lost with the process: safe) instead of failing with
# ClientClosed. A forked child has only its own leases (the core drops the
# parent's in the child), so it never gives back the parent's.
_open_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


@atexit.register
def _give_back_at_exit() -> None:
    for client in list(_open_clients):
        client._give_back()


def _check_name(name: Any) -> None:
    # the core validates names on every call; this only catches a wrong type
    # at construction, naming the parameter
    if not isinstance(name, str):
        raise TypeError("name must be str, not %s" % type(name).__name__)



def __getattr__(name: str) -> Any:
    # `import ratelimit` then `ratelimit.aio`, without importing asyncio for
    # programs that never use it
    if name == "aio":
        import importlib

        return importlib.import_module(".aio", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
