"""Flask extension.

    from flask import Flask
    from ratelimit.contrib.flask import RateLimit

    app = Flask(__name__)
    limiter = RateLimit(app, url="redis://127.0.0.1:6379/0")   # or RATELIMIT_URL in app.config

    @app.get("/sms")
    @limiter.limit("10/minute", key="user")
    def sms(): ...

A denied request raises werkzeug's TooManyRequests (429; an
app.errorhandler(429) can shape the body); the headers are written on every
response by an after_request hook. See docs/frameworks.md.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, List, Optional, Tuple, TypeVar, Union

import flask
from werkzeug.exceptions import TooManyRequests

import ratelimit

from ._common import HEADER_NAMES, Decision, RequestView, Rule, Settings, resolve_options, response_headers

__all__ = ["RateLimit"]

F = TypeVar("F", bound=Callable[..., Any])


class FlaskView(RequestView):
    """flask.request as the built-in keys see it."""

    __slots__ = ()

    def peer(self) -> Optional[str]:
        return self.request.remote_addr

    def header(self, name: str) -> Optional[str]:
        values = self.request.headers.getlist(name)
        return ", ".join(values) if values else None

    def user_id(self) -> Optional[str]:
        # Flask has no users of its own: Flask-Login's current_user when installed
        try:
            from flask_login import current_user
        except ImportError:
            return None
        if current_user is None or not current_user.is_authenticated:
            return None
        return str(current_user.get_id())


def _decisions() -> List[Decision]:
    got = flask.g.get("_ratelimit_decisions")
    if got is None:
        got = flask.g._ratelimit_decisions = []
    return got


class RateLimit:
    """The extension: RateLimit(app, url=...) or RateLimit(url=...) then
    init_app(app). Each option not given is read from app.config
    (RATELIMIT_URL, RATELIMIT_DEFAULT, RATELIMIT_KEY, RATELIMIT_HEADERS,
    RATELIMIT_ON_REDIS_ERROR, RATELIMIT_TRUSTED_PROXIES, RATELIMIT_LEASE, ...; see
    docs/frameworks.md). `default` limits every request (before_request);
    limit() decorates views. Uses the blocking client (one per process,
    opened on first use; with allow/deny while Redis is down too)."""

    def __init__(self, app: Optional[flask.Flask] = None, **options: Any) -> None:
        resolve_options(options, lambda name, default: default)  # unknown names fail here, not at init_app
        self._given = options
        self.settings: Optional[Settings] = None
        self._client: Optional[ratelimit.Client] = None
        self._lock = threading.Lock()
        if app is not None:
            self.init_app(app)

    def init_app(self, app: flask.Flask) -> None:
        options = resolve_options(self._given, app.config.get)
        if not options["url"]:
            raise ratelimit.InvalidArgument("RateLimit needs url= or RATELIMIT_URL in app.config")
        self.settings = Settings(**options)
        app.extensions["ratelimit"] = self
        if self.settings.rule is not None:
            app.before_request(self._check_default)
        app.after_request(self._write_headers)

    @property
    def client(self) -> ratelimit.Client:
        """The Redis client, opened on first use."""
        if self._client is None:
            with self._lock:
                if self._client is None:
                    s = self._settings()
                    self._client = ratelimit.Client(s.url, **s.client_options)
        return self._client

    def close(self) -> None:
        """Close the client (the next request opens a new one)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def limit(self, rate: Union[str, Tuple[int, float]], key: Any = "remote_addr", *, name: Optional[str] = None,
              algorithm: str = "gcra", burst: Optional[int] = None, cost: int = 1,
              lease: Optional[float] = None) -> Callable[[F], F]:
        """Decorator for a view (put it under @app.route). key:
        "remote_addr", "user", "header:<Name>", a Key, or a callable given
        flask.request (or nothing, if it takes no parameter) returning the id
        or None (exempt). name: default the view's dotted path. lease:
        seconds, as for Client.limiter (None: off)."""
        rule = Rule(rate, key, name=name, algorithm=algorithm, burst=burst, cost=cost, lease=lease)

        def decorate(view: F) -> F:
            view_name = "%s.%s" % (view.__module__, view.__qualname__)

            @functools.wraps(view)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                self._check([rule], view_name)
                return view(*args, **kwargs)
            return wrapper  # type: ignore[return-value]
        return decorate

    def _settings(self) -> Settings:
        if self.settings is None:
            raise RuntimeError("RateLimit.init_app(app) was not called")
        return self.settings

    def _check(self, rules: List[Rule], view_name: str) -> None:
        s = self._settings()
        view = FlaskView(flask.request, s.trusted_proxies)
        if s.check(self.client, view, rules, view_name, _decisions()) is not None:
            raise TooManyRequests()

    def _check_default(self) -> None:
        rule = self._settings().rule
        assert rule is not None
        self._check([rule], "default")

    def _write_headers(self, response: flask.Response) -> flask.Response:
        decisions = flask.g.get("_ratelimit_decisions")
        if decisions:
            for name in HEADER_NAMES:
                response.headers.pop(name, None)
            for name, value in response_headers(decisions, self._settings().headers):
                response.headers[name] = value
        return response
