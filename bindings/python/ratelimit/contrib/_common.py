"""What every framework adapter shares: keys, rules, decisions, the
rate-limit response headers and the on_redis_error policy.

An adapter wraps its framework's request in a RequestView (peer address,
headers, authenticated user) so built-in keys work the same everywhere, and
turns the Decisions of a request into headers with response_headers().
The header format is written down in docs/frameworks.md (the Spring
starter emits the same)."""
from __future__ import annotations

import inspect
import logging
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import ratelimit
from ratelimit import InvalidArgument, RateLimitError

# every integration logs here: a Redis outage (one warning when decisions
# start falling back to on_redis_error, one when Redis decides again) and
# errors the policy decided
log = logging.getLogger("ratelimit.contrib")

__all__ = ["Key", "Rule", "Decision", "RequestView", "Settings", "remote_address", "header", "user",
           "response_headers", "exceeded_headers", "denied", "ceil_seconds"]

# what a denial the limiter could not get from Redis tells the client to wait
FALLBACK_RETRY_AFTER = 1.0


# ---- request view -------------------------------------------------------------

class RequestView:
    """A framework's request as the built-in keys see it. Adapters subclass
    it; `request` is what key callables receive."""

    __slots__ = ("request", "trusted_proxies")

    def __init__(self, request: Any, trusted_proxies: int) -> None:
        self.request = request
        self.trusted_proxies = trusted_proxies

    def peer(self) -> Optional[str]:
        """The address of the connection's other end (None if unknown)."""
        raise NotImplementedError

    def header(self, name: str) -> Optional[str]:
        """Every value of header `name` joined by ", " (None if absent)."""
        raise NotImplementedError

    def user_id(self) -> Optional[str]:
        """The authenticated user's id (None for an anonymous request)."""
        raise NotImplementedError

    def client_address(self) -> str:
        """The client's address: the peer, or with N trusted proxies the Nth
        X-Forwarded-For entry from the right (the one the outermost trusted
        proxy appended). Fewer entries than proxies: the request did not come
        through them all, so the peer is used; so is it by default (N = 0),
        because anyone can write X-Forwarded-For."""
        n = self.trusted_proxies
        if n:
            forwarded = self.header("x-forwarded-for")
            if forwarded:
                hops = [h.strip() for h in forwarded.split(",")]
                if len(hops) >= n and hops[-n]:
                    return hops[-n]
        return self.peer() or "unknown"


# ---- keys ---------------------------------------------------------------------

KeyResult = Union[str, bytes, int, None]


class Key:
    """Picks the id a request is limited under; None exempts the request."""

    def __call__(self, view: RequestView) -> Any:
        raise NotImplementedError


class _RemoteAddress(Key):
    def __call__(self, view: RequestView) -> str:
        return view.client_address()

    def __repr__(self) -> str:
        return "remote_address()"


class _Header(Key):
    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name or any(c in name for c in " \t:\r\n"):
            raise InvalidArgument("header key: a header name like 'X-Api-Key' is needed, not %r" % (name,))
        self.name = name.lower()

    def __call__(self, view: RequestView) -> str:
        value = view.header(self.name)
        # prefixed: a header value chosen by the client can never be an address
        return "header:" + value if value else view.client_address()

    def __repr__(self) -> str:
        return "header(%r)" % self.name


class _User(Key):
    def __call__(self, view: RequestView) -> str:
        uid = view.user_id()
        return "user:" + uid if uid else view.client_address()

    def __repr__(self) -> str:
        return "user()"


class _Callable(Key):
    """A user's function: given the framework's request, or nothing when it
    takes no parameter (Flask-Limiter's convention)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        try:
            params = inspect.signature(func).parameters.values()
            required = [p for p in params if p.default is p.empty
                        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            self.takes_request = bool(required) or any(p.kind == p.VAR_POSITIONAL for p in params)
        except (TypeError, ValueError):  # a builtin without a signature
            self.takes_request = True

    def __call__(self, view: RequestView) -> Any:
        return self.func(view.request) if self.takes_request else self.func()

    def __repr__(self) -> str:
        return "key(%r)" % (self.func,)


def remote_address() -> Key:
    """The client's address (see RequestView.client_address)."""
    return _RemoteAddress()


def header(name: str) -> Key:
    """'header:' + the value of header `name`; requests without it are
    limited by remote address."""
    return _Header(name)


def user() -> Key:
    """'user:' + the authenticated user's id; anonymous requests are limited
    by remote address."""
    return _User()


def as_key(key: Any) -> Key:
    """A Key from what an integration accepts: a Key, "remote_addr",
    "user", "header:<Name>", or a callable."""
    if isinstance(key, Key):
        return key
    if isinstance(key, str):
        if key in ("remote_addr", "ip"):
            return _RemoteAddress()
        if key == "user":
            return _User()
        if key.startswith("header:"):
            return _Header(key[len("header:"):])
        raise InvalidArgument("key %r: expected 'remote_addr', 'user', 'header:<Name>', a Key or a callable" % key)
    if callable(key):
        return _Callable(key)
    raise TypeError("key must be a str, a ratelimit.contrib Key or a callable, not %s" % type(key).__name__)


def checked_id(key: Key, value: Any) -> Optional[str]:
    """A key's answer as an id, or None (exempt)."""
    if value is None or isinstance(value, str):
        return value or None  # "" exempts too: the core refuses an empty id
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError("%r returned %s: a key returns str, bytes, int or None" % (key, type(value).__name__))


# ---- rules and decisions ------------------------------------------------------

class Rule:
    """One limit applied to requests: `rate` per key, under limiter `name`
    (None: the adapter names it after the view); lease: seconds (None: off),
    as for Client.limiter: for hot limits, decisions from leased blocks."""

    __slots__ = ("rate", "limit", "period", "key", "name", "algorithm", "burst", "cost", "lease")

    def __init__(self, rate: Union[str, Tuple[int, float]], key: Any = "remote_addr", *,
                 name: Optional[str] = None, algorithm: str = "gcra", burst: Optional[int] = None,
                 cost: int = 1, lease: Optional[float] = None) -> None:
        if isinstance(rate, str):
            self.limit, self.period = ratelimit.parse_rate(rate)
        else:
            self.limit, self.period = rate
        if name is not None and (not isinstance(name, str) or not name):
            raise InvalidArgument("name must be a non-empty str, not %r" % (name,))
        if algorithm not in ratelimit.ALGORITHMS:
            raise InvalidArgument("algorithm %r: expected one of %s" % (algorithm, ", ".join(ratelimit.ALGORITHMS)))
        if not isinstance(cost, int) or isinstance(cost, bool) or cost < 1:
            raise InvalidArgument("cost must be a positive int, not %r" % (cost,))
        check_lease(lease)
        self.rate = rate
        self.key = as_key(key)
        self.name = name
        self.algorithm = algorithm
        self.burst = burst
        self.cost = cost
        self.lease = lease

    def __repr__(self) -> str:
        return "Rule(%r, key=%r, name=%r%s)" % (self.rate, self.key, self.name,
                                               "" if self.lease is None else ", lease=%r" % (self.lease,))


def check_lease(lease: Any) -> None:
    """A bad lease fails where the rule is configured (as Client.limiter
    words it), not at the first request, when the limiter is made."""
    ratelimit._ratelimit._check_lease(lease)


class Decision:
    """What one rule decided for one request, as the headers need it."""

    __slots__ = ("name", "quota", "window", "allowed", "limit", "remaining", "reset_after", "retry_after",
                 "fallback")

    def __init__(self, name: str, rule: Rule, allowed: bool, limit: int, remaining: int,
                 reset_after: float, retry_after: Optional[float], fallback: bool) -> None:
        self.name = name
        self.quota = rule.limit
        self.window = rule.period
        self.allowed = allowed
        self.limit = limit
        self.remaining = remaining
        self.reset_after = reset_after
        self.retry_after = retry_after
        self.fallback = fallback

    @classmethod
    def of(cls, name: str, rule: Rule, result: Any) -> "Decision":
        # retry_after is read only when denied (allowed: -1.0 today, None soon)
        return cls(name, rule, bool(result.allowed), result.limit, result.remaining, result.reset_after,
                   None if result.allowed else result.retry_after, bool(result.fallback))

    def __repr__(self) -> str:
        return "Decision(%r, allowed=%s, remaining=%d%s)" % (self.name, self.allowed, self.remaining,
                                                             ", fallback" if self.fallback else "")


# every integration's options: constructor arguments, else the framework's
# config (RATELIMIT_<NAME> in Flask's app.config or Django's settings), else these
OPTIONS: Dict[str, Any] = {
    "url": None, "default": None, "key": "remote_addr", "name": "default", "algorithm": "gcra", "burst": None,
    "headers": True, "on_redis_error": "allow", "trusted_proxies": 0, "prefix": None, "timeout": None,
    "connect_timeout": None, "lease": None,
}


def resolve_options(given: Dict[str, Any], config: Callable[[str, Any], Any]) -> Dict[str, Any]:
    """given (None: not given) over config("RATELIMIT_<NAME>", default)."""
    unknown = set(given) - set(OPTIONS)
    if unknown:
        raise TypeError("unknown option(s): %s" % ", ".join(sorted(unknown)))
    return {name: given[name] if given.get(name) is not None else config("RATELIMIT_" + name.upper(), default)
            for name, default in OPTIONS.items()}


class Settings:
    """An integration's options (see OPTIONS), validated once: the default
    rule, what the client is opened with, and its limiters (one per name and
    rule, made on first use)."""

    def __init__(self, url: Optional[str] = None, *, default: Optional[str] = None, key: Any = "remote_addr",
                 name: str = "default", algorithm: str = "gcra", burst: Optional[int] = None, headers: bool = True,
                 on_redis_error: str = "allow", trusted_proxies: int = 0, prefix: Optional[str] = None,
                 timeout: Optional[float] = None, connect_timeout: Optional[float] = None,
                 lease: Optional[float] = None) -> None:
        if on_redis_error not in ("allow", "deny"):
            raise InvalidArgument("on_redis_error %r: a web integration takes 'allow' (fail open) or 'deny' "
                                  "(fail closed: 429); it never fails a request with a 500" % (on_redis_error,))
        if not isinstance(trusted_proxies, int) or isinstance(trusted_proxies, bool) or trusted_proxies < 0:
            raise InvalidArgument("trusted_proxies must be an int >= 0, not %r" % (trusted_proxies,))
        self.url = url
        check_lease(lease)  # also without a default: a wrong setting never waits to be noticed
        self.rule = Rule(default, key, name=name, algorithm=algorithm, burst=burst, lease=lease) if default else None
        self.on_redis_error = on_redis_error
        self.headers = bool(headers)
        self.trusted_proxies = trusted_proxies
        self.client_options = {"prefix": prefix, "timeout": timeout, "connect_timeout": connect_timeout,
                               "on_redis_error": on_redis_error}
        self._limiters: Dict[Tuple[str, Rule], Any] = {}
        self._outage_since: Optional[float] = None  # monotonic time of the first fallback of an outage
        self._outage_lock = threading.Lock()

    def limiter(self, client: Any, name: str, rule: Rule) -> Any:
        """client.limiter(...) for this name and rule, cached (the cache is
        small: one entry per decorated view)."""
        slot = (name, rule)
        lim = self._limiters.get(slot)
        if lim is None:
            lim = self._limiters[slot] = client.limiter(name, (rule.limit, rule.period), algorithm=rule.algorithm,
                                                        burst=rule.burst, lease=rule.lease)
        return lim

    def decided(self, d: Decision) -> Decision:
        """Notes an outage: the first decision the policy made instead of
        Redis logs one warning, the first one Redis makes after it another
        (limiting is off under "allow", every request refused under "deny":
        neither may go unnoticed, nor flood the log)."""
        if d.fallback != (self._outage_since is not None):
            with self._outage_lock:
                if d.fallback and self._outage_since is None:
                    self._outage_since = time.monotonic()
                    log.warning("Redis unreachable for rate limiting (%s), until it answers again (first at "
                                "limiter %r): on_redis_error=%s %s every request", masked_url(self.url), d.name,
                                self.on_redis_error, "allows" if self.on_redis_error == "allow" else "refuses")
                elif not d.fallback and self._outage_since is not None:
                    log.warning("Redis reachable again for rate limiting (%s) after %.1f s", masked_url(self.url),
                                time.monotonic() - self._outage_since)
                    self._outage_since = None
        return d

    def failed(self, name: str, rule: Rule, error: BaseException) -> Decision:
        """The decision when the limiter raised instead of answering: the
        policy decides (the client's own fallback covers an unreachable Redis;
        this covers the rest, e.g. a Redis error reply or a bad id)."""
        log.warning("rate limit %r: %s: %s; on_redis_error=%s decides", name, type(error).__name__, error,
                    self.on_redis_error)
        allow = self.on_redis_error == "allow"
        return Decision(name, rule, allow, rule.limit, 0, 0.0, None if allow else FALLBACK_RETRY_AFTER, True)


    def check(self, client: Any, view: RequestView, rules: Iterable[Rule], view_name: str,
              decisions: List[Decision]) -> Optional[Decision]:
        """Apply rules in order (blocking client), appending to decisions;
        stops at, and returns, the first denial (later limits are not
        consumed)."""
        for rule in rules:
            ident = checked_id(rule.key, rule.key(view))
            if ident is None:
                continue
            name = rule.name or view_name
            try:
                d = self.decided(Decision.of(name, rule, self.limiter(client, name, rule).acquire(ident, rule.cost)))
            except RateLimitError as e:
                d = self.failed(name, rule, e)
            decisions.append(d)
            if not d.allowed:
                return d
        return None


def masked_url(url: Optional[str]) -> str:
    """A Redis URL fit for a log, as the core's messages quote it (password
    and secret options masked); None: the client's default."""
    return ratelimit._ratelimit.redact_url(url) if url else "the default URL"


def denied(decisions: Sequence[Decision]) -> Optional[Decision]:
    """The decision that refused the request, if one did."""
    return next((d for d in decisions if not d.allowed), None)


# ---- headers ------------------------------------------------------------------

def ceil_seconds(seconds: float) -> int:
    """Whole seconds, rounded up (the values are whole milliseconds)."""
    ms = int(round(seconds * 1000))
    return max(0, (ms + 999) // 1000)


def _sf_string(name: str) -> str:
    # a Structured Field String: printable ASCII, with \ and " escaped
    text = "".join(c if " " <= c <= "~" else "?" for c in name)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def response_headers(decisions: Iterable[Decision], rate_limit_fields: bool = True) -> List[Tuple[str, str]]:
    """The headers for a response (docs/frameworks.md, "Headers"): Retry-After
    when a decision denied it; RateLimit-Policy and RateLimit (one list member
    per decision made with Redis) and RateLimit-Limit / -Remaining / -Reset
    (the denying decision, else the one with the least remaining) when
    rate_limit_fields or denied."""
    decisions = list(decisions)
    out: List[Tuple[str, str]] = []
    refused = denied(decisions)
    if refused is not None:
        out.append(("Retry-After", str(max(1, ceil_seconds(refused.retry_after or FALLBACK_RETRY_AFTER)))))
    if not (rate_limit_fields or refused is not None):
        return out
    known = [d for d in decisions if not d.fallback]  # a fallback knows no counts
    if not known:
        return out
    main = refused if refused is not None and not refused.fallback else min(known, key=lambda d: d.remaining)
    out.append(("RateLimit-Policy", ", ".join("%s;q=%d;w=%d" % (_sf_string(d.name), d.quota, ceil_seconds(d.window))
                                              for d in known)))
    out.append(("RateLimit", ", ".join("%s;r=%d;t=%d" % (_sf_string(d.name), d.remaining,
                                                         ceil_seconds(d.reset_after)) for d in known)))
    out.append(("RateLimit-Limit", str(main.limit)))
    out.append(("RateLimit-Remaining", str(main.remaining)))
    out.append(("RateLimit-Reset", str(ceil_seconds(main.reset_after))))
    return out


def exceeded_headers(exc: ratelimit.RateLimitExceeded) -> List[Tuple[str, str]]:
    """The headers of a 429 for a RateLimitExceeded raised by a limiter's
    limit() decorator (Limiter.limit, AsyncLimiter.limit): Retry-After and
    the rate-limit fields, as the integrations send them ("Headers" in
    docs/frameworks.md). For an exception of unknown origin: Retry-After."""
    lim, result = getattr(exc, "limiter", None), getattr(exc, "result", None)
    if lim is None or result is None:
        return [("Retry-After", str(max(1, ceil_seconds(exc.retry_after or FALLBACK_RETRY_AFTER))))]
    rule = Rule(lim.rate, name=lim.name, algorithm=lim.algorithm)
    return response_headers([Decision.of(lim.name, rule, result)])


HEADER_NAMES = ("retry-after", "ratelimit-policy", "ratelimit", "ratelimit-limit", "ratelimit-remaining",
                "ratelimit-reset")
