"""Limiter: a named rate limit (the C type) with the decorator, reserve()
and config; helpers the asyncio limiter shares."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional, Tuple, Union

from . import _ratelimit
from ._ratelimit import Result
from ._types import F, Seconds, Text
from .config import LimiterConfig
from .errors import _exceeded


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
