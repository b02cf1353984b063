"""Django middleware and view decorator.

    # settings.py
    RATELIMIT_URL = "redis://127.0.0.1:6379/0"
    RATELIMIT_DEFAULT = "100/minute"          # optional: every request
    MIDDLEWARE = [..., "ratelimit.contrib.django.RateLimitMiddleware"]

    # views.py
    from ratelimit.contrib.django import limit

    @limit("10/minute", key="user")
    def sms(request): ...

A denied request gets a 429 (text/plain "Too Many Requests") with
Retry-After and the rate-limit headers. The decorator works without the
middleware; with it, allowed responses carry the headers of every decision
made for the request. Settings are read once (an override_settings of a
RATELIMIT_* setting starts over). See docs/frameworks.md.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, List, Optional, Tuple, TypeVar, Union

# Django's own test for an async view: asyncio's is deprecated from 3.14 (gone in
# 3.16), inspect's misses asgiref's marker before 3.12
from asgiref.sync import iscoroutinefunction
from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.http import HttpRequest, HttpResponse

import ratelimit

from ._common import HEADER_NAMES, Decision, RequestView, Rule, Settings, resolve_options, response_headers

__all__ = ["RateLimitMiddleware", "limit"]

F = TypeVar("F", bound=Callable[..., Any])


class DjangoView(RequestView):
    """An HttpRequest as the built-in keys see it."""

    __slots__ = ()

    def peer(self) -> Optional[str]:
        return self.request.META.get("REMOTE_ADDR") or None

    def header(self, name: str) -> Optional[str]:
        # the WSGI / ASGI handlers already join repeated headers with ","
        return self.request.headers.get(name)

    def user_id(self) -> Optional[str]:
        u = getattr(self.request, "user", None)  # AuthenticationMiddleware's
        if u is None or not u.is_authenticated:
            return None
        return str(u.pk)


class _Integration:
    """The settings and the process's blocking client, made on first use."""

    def __init__(self) -> None:
        options = resolve_options({}, lambda name, default: getattr(django_settings, name, default))
        if not options["url"]:
            raise ratelimit.InvalidArgument("ratelimit.contrib.django needs RATELIMIT_URL in the settings")
        self.settings = Settings(**options)
        self.client = ratelimit.Client(options["url"], **self.settings.client_options)


_lock = threading.Lock()
_current: Optional[_Integration] = None


def _integration() -> _Integration:
    global _current
    if _current is None:
        with _lock:
            if _current is None:
                _current = _Integration()
    return _current


def _settings_changed(setting: str = "", **kwargs: Any) -> None:
    global _current
    if setting.startswith("RATELIMIT_"):
        with _lock:
            old, _current = _current, None
        if old is not None:
            old.client.close()


setting_changed.connect(_settings_changed)


def _decisions(request: HttpRequest) -> List[Decision]:
    got = getattr(request, "_ratelimit_decisions", None)
    if got is None:
        got = request._ratelimit_decisions = []  # type: ignore[attr-defined]
    return got


def _too_many() -> HttpResponse:
    return HttpResponse("Too Many Requests\n", status=429, content_type="text/plain; charset=utf-8")


def _with_headers(request: HttpRequest, response: HttpResponse, it: _Integration) -> HttpResponse:
    decisions = getattr(request, "_ratelimit_decisions", None)
    if decisions:
        for name in HEADER_NAMES:
            if name in response.headers:
                del response.headers[name]
        for name, value in response_headers(decisions, it.settings.headers):
            response.headers[name] = value
    return response


def _check(request: HttpRequest, rules: List[Rule], view_name: str) -> Tuple[_Integration, bool]:
    """(integration, allowed) after applying rules to request."""
    it = _integration()
    view = DjangoView(request, it.settings.trusted_proxies)
    refused = it.settings.check(it.client, view, rules, view_name, _decisions(request))
    return it, refused is None


class RateLimitMiddleware:
    """Applies RATELIMIT_DEFAULT (if set) to every request and writes the
    rate-limit headers on the response. Synchronous (Django adapts it for
    async stacks)."""

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        it = _integration()
        if it.settings.rule is not None:
            it, allowed = _check(request, [it.settings.rule], "default")
            if not allowed:
                return _with_headers(request, _too_many(), it)
        return _with_headers(request, self.get_response(request), it)


def limit(rate: Union[str, Tuple[int, float]], key: Any = "remote_addr", *, name: Optional[str] = None,
          algorithm: str = "gcra", burst: Optional[int] = None, cost: int = 1,
          lease: Optional[float] = None) -> Callable[[F], F]:
    """View decorator. key: "remote_addr", "user", "header:<Name>", a Key,
    or a callable given the HttpRequest returning the id or None (exempt).
    name: default the view's dotted path. lease: seconds, as for
    Client.limiter (None: off). Works on function views (request first)
    and async views (the blocking decision then runs in a thread)."""
    rule = Rule(rate, key, name=name, algorithm=algorithm, burst=burst, cost=cost, lease=lease)

    def decorate(view: F) -> F:
        view_name = "%s.%s" % (view.__module__, view.__qualname__)

        def before(request: HttpRequest) -> Tuple[_Integration, bool]:
            return _check(request, [rule], view_name)

        if iscoroutinefunction(view):
            from asgiref.sync import sync_to_async

            @functools.wraps(view)
            async def async_wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
                it, allowed = await sync_to_async(before, thread_sensitive=False)(request)
                response = await view(request, *args, **kwargs) if allowed else _too_many()
                return _with_headers(request, response, it)
            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            it, allowed = before(request)
            response = view(request, *args, **kwargs) if allowed else _too_many()
            return _with_headers(request, response, it)
        return wrapper  # type: ignore[return-value]
    return decorate
