"""ASGI middleware (Starlette, FastAPI and any ASGI app) on ratelimit.aio:
decisions run on the core's asynchronous path, never blocking the loop.

    from ratelimit.contrib.asgi import RateLimitMiddleware
    app.add_middleware(RateLimitMiddleware, url="redis://127.0.0.1:6379/0",
                       default="100/minute", key="remote_addr")

The middleware owns the client (opened on the first request, closed at
lifespan shutdown), applies the `default` limit to every HTTP request,
answers a denied one with 429 itself, and writes the rate-limit headers of
every decision made for the request (its own and those of
ratelimit.contrib.fastapi.RateLimit dependencies) on the response.
WebSocket connections pass through unlimited. See docs/frameworks.md.
"""
from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any, Awaitable, Callable, List, MutableMapping, Optional

from starlette.requests import Request

from ratelimit import InvalidArgument, RateLimitError, aio

from ._common import HEADER_NAMES, Decision, RequestView, Rule, Settings, checked_id, response_headers

__all__ = ["RateLimitMiddleware", "view_name"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

SCOPE_KEY = "ratelimit"


class AsgiView(RequestView):
    """A Starlette Request as the built-in keys see it."""

    __slots__ = ()

    def peer(self) -> Optional[str]:
        client = self.request.scope.get("client")
        return client[0] if client else None

    def header(self, name: str) -> Optional[str]:
        values = self.request.headers.getlist(name)
        return ", ".join(values) if values else None

    def user_id(self) -> Optional[str]:
        # Starlette's AuthenticationMiddleware puts the user in the scope
        u = self.request.scope.get("user")
        if u is None or not getattr(u, "is_authenticated", False):
            return None
        return str(getattr(u, "identity", None) or u.display_name)


def view_name(scope: Scope) -> str:
    """The default limiter name of a route: its endpoint's dotted path (the
    route's path when there is no endpoint)."""
    endpoint = scope.get("endpoint")
    if endpoint is not None:
        return "%s.%s" % (getattr(endpoint, "__module__", "?"), getattr(endpoint, "__qualname__", endpoint))
    route = scope.get("route")
    return getattr(route, "path", None) or scope.get("path", "?")


class RequestState:
    """One HTTP request's decisions, shared by the middleware and the
    dependencies through scope["ratelimit"]."""

    __slots__ = ("middleware", "decisions")

    def __init__(self, middleware: "RateLimitMiddleware") -> None:
        self.middleware = middleware
        self.decisions: List[Decision] = []

    @property
    def settings(self) -> Settings:
        return self.middleware.settings

    async def check(self, request: Request, rule: Rule, name: str) -> Optional[Decision]:
        """Apply one rule; the denial, or None when allowed or exempt."""
        m = self.middleware
        key = rule.key
        value = key(AsgiView(request, m.settings.trusted_proxies))
        if inspect.isawaitable(value):  # async key functions are fine here
            value = await value
        ident = checked_id(key, value)
        if ident is None:
            return None
        name = rule.name or name
        try:
            client = await m.client()
            result = await m.settings.limiter(client, name, rule).acquire(ident, rule.cost)
            d = m.settings.decided(Decision.of(name, rule, result))
        except InvalidArgument as e:
            if m._client is None:
                raise  # the URL or an option is wrong: a configuration error
            d = m.settings.failed(name, rule, e)
        except RateLimitError as e:
            d = m.settings.failed(name, rule, e)
        self.decisions.append(d)
        return None if d.allowed else d

    def headers(self) -> List[tuple]:
        return response_headers(self.decisions, self.settings.headers)


class RateLimitMiddleware:
    """Rate limiting for an ASGI app.

    url: the Redis URL (or client: an aio.AsyncClient of yours, not closed
        by the middleware).
    default: a rate ("100/minute") applied to every HTTP request, with
        key, name ("default"), algorithm ("gcra") and burst; None: only the
        routes' RateLimit dependencies limit.
    key: "remote_addr", "user", "header:<Name>", a Key from
        ratelimit.contrib, or a callable given the starlette Request (sync
        or async) returning the id, or None to exempt the request.
    headers: write the rate-limit headers on allowed responses too (a 429
        always has them).
    on_redis_error: "allow" (default) or "deny" (429, Retry-After: 1) when
        Redis is down or fails; a request is never failed with a 500.
    trusted_proxies: how many reverse proxies in front of the app append
        to X-Forwarded-For (0: the header is ignored).
    prefix, timeout, connect_timeout: passed to the client.
    lease: seconds (e.g. 0.05) for the default limit: decisions from
        leased blocks of permits, not a round trip each (for a hot limit
        such as one app-wide rate); None (default): off. Route limits
        (RateLimit dependencies) take their own.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], *, url: Optional[str] = None,
                 client: Optional[aio.AsyncClient] = None, default: Optional[str] = None, key: Any = "remote_addr",
                 name: str = "default", algorithm: str = "gcra", burst: Optional[int] = None,
                 headers: bool = True, on_redis_error: str = "allow", trusted_proxies: int = 0,
                 prefix: Optional[str] = None, timeout: Optional[float] = None,
                 connect_timeout: Optional[float] = None, lease: Optional[float] = None) -> None:
        if (url is None) == (client is None):
            raise InvalidArgument("RateLimitMiddleware needs url= or client= (one of them)")
        self.app = app
        self.settings = Settings(url, default=default, key=key, name=name, algorithm=algorithm, burst=burst,
                                 headers=headers, on_redis_error=on_redis_error, trusted_proxies=trusted_proxies,
                                 prefix=prefix, timeout=timeout, connect_timeout=connect_timeout, lease=lease)
        self._client = client
        self._owns_client = client is None
        self._opening: Optional[asyncio.Lock] = None

    async def client(self) -> aio.AsyncClient:
        """The client, opened on first use off the event loop (with allow or
        deny it opens while Redis is down)."""
        if self._client is None:
            if self._opening is None:
                self._opening = asyncio.Lock()
            async with self._opening:
                if self._client is None:
                    self._client = await aio.AsyncClient.connect(self.settings.url,
                                                                 **self.settings.client_options)
        return self._client

    async def aclose(self) -> None:
        """Close the client if the middleware opened it."""
        client, self._client = self._client, (None if self._owns_client else self._client)
        if self._owns_client and client is not None:
            await client.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._lifespan_send(send))
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = scope[SCOPE_KEY] = RequestState(self)
        rule = self.settings.rule
        if rule is not None:
            refused = await state.check(Request(scope, receive), rule, "default")
            if refused is not None:
                await self._too_many(state, send)
                return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and state.decisions:
                ours = state.headers()
                if ours:
                    # replaced, not appended: a dependency's 429 already carries them
                    message["headers"] = [(k, v) for k, v in message.get("headers", [])
                                          if k.lower().decode("latin-1") not in HEADER_NAMES] + \
                                         [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in ours]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _too_many(self, state: RequestState, send: Send) -> None:
        body = json.dumps({"detail": "Too Many Requests"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in state.headers()]
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _lifespan_send(self, send: Send) -> Send:
        async def lifespan_send(message: Message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                await self.aclose()
            await send(message)
        return lifespan_send
