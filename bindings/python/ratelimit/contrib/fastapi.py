"""FastAPI: a dependency per route limit, on the ASGI middleware.

    from fastapi import Depends, FastAPI
    from ratelimit.contrib.fastapi import RateLimit, RateLimitMiddleware

    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, url="redis://127.0.0.1:6379/0")

    @app.get("/items/{item_id}", dependencies=[Depends(RateLimit("10/minute", key="remote_addr"))])
    async def read_item(item_id: int): ...

A denied request raises HTTPException(429) with Retry-After and the
rate-limit headers; the middleware (which owns the Redis client) writes the
headers on allowed responses. See docs/frameworks.md.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from fastapi import HTTPException, Request

from ._common import Rule
from .asgi import SCOPE_KEY, RateLimitMiddleware, view_name

__all__ = ["RateLimit", "RateLimitMiddleware"]


class RateLimit:
    """A dependency: `Depends(RateLimit("10/minute", key=...))`.

    rate: "10/minute", "5 per 30 seconds"... or (limit, period_seconds).
    key: "remote_addr" (default), "user", "header:<Name>", a Key from
        ratelimit.contrib, or a callable given the Request (sync or async)
        returning the id (None exempts the request). It receives the
        Request only, never the endpoint's parameters.
    name: the limiter's name (Redis keys, the RateLimit-Policy entry);
        default: the endpoint's dotted path, so each route has its own
        limit. Give routes one name to share a limit.
    algorithm, burst, lease: as for Client.limiter; cost: permits per request.
    """

    def __init__(self, rate: Union[str, Tuple[int, float]], key: Any = "remote_addr", *,
                 name: Optional[str] = None, algorithm: str = "gcra", burst: Optional[int] = None,
                 cost: int = 1, lease: Optional[float] = None) -> None:
        self.rule = Rule(rate, key, name=name, algorithm=algorithm, burst=burst, cost=cost, lease=lease)

    async def __call__(self, request: Request) -> None:
        state = request.scope.get(SCOPE_KEY)
        if state is None:
            raise RuntimeError("RateLimit needs the middleware: "
                               "app.add_middleware(RateLimitMiddleware, url='redis://...')")
        refused = await state.check(request, self.rule, view_name(request.scope))
        if refused is not None:
            raise HTTPException(429, "Too Many Requests", headers=dict(state.headers()))

    def __repr__(self) -> str:
        return "RateLimit(%r)" % (self.rule,)
