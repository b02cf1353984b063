"""Client: the connection pool every limiter and primitive is made by, and
the exit hook that gives leases back."""
from __future__ import annotations

import atexit
import weakref
from typing import Any, List, Optional, Union

from . import _ratelimit
from ._types import FilePath, Rate, Seconds
from .config import LimiterConfig
from .limiter import Limiter
from .primitives import DelayQueue, Lock, Semaphore


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
