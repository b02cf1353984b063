"""Prometheus metrics of a ratelimit client (optional: needs prometheus_client).

    from prometheus_client import REGISTRY
    from ratelimit.metrics import RateLimitCollector

    REGISTRY.register(RateLimitCollector(client))

Each scrape reads the core's counters (Client.stats(): no lock, no round
trip) and exposes, per limiter name:

    ratelimit_decisions_total{limiter, outcome}  outcome: allowed, denied,
        fallback (Redis unreachable, the on_redis_error policy decided) or
        error (the call raised; invalid arguments are not counted)
    ratelimit_decision_seconds{limiter}          histogram of each decision's
        latency (powers of two from 8 us to 8.4 s)
    ratelimit_local_decisions_total{limiter, outcome}  outcome: allowed or
        denied: the part of those decisions made from a lease, without a
        round trip
    ratelimit_lease_calls_total{limiter}         script calls that took or
        gave back a leased block

Names beyond the core's limit (1024 per client) share limiter="".
Importing this module never needs prometheus_client; making a collector
does.
"""
from __future__ import annotations

from typing import Any, Iterator, List, Tuple

from ._ratelimit import ClientClosed

__all__ = ["RateLimitCollector", "OUTCOMES", "LOCAL_OUTCOMES"]

# outcome label -> key of Client.stats()
OUTCOMES: Tuple[Tuple[str, str], ...] = (
    ("allowed", "allowed"), ("denied", "denied"), ("fallback", "fallback"), ("error", "errors"))
LOCAL_OUTCOMES: Tuple[Tuple[str, str], ...] = (("allowed", "local_allowed"), ("denied", "local_denied"))


def _families() -> Any:
    try:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
    except ImportError as e:  # pragma: no cover - the message is the point
        raise ImportError("ratelimit.metrics.RateLimitCollector needs prometheus_client "
                          "(pip install prometheus_client)") from e
    return CounterMetricFamily, HistogramMetricFamily


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class RateLimitCollector:
    """A prometheus_client collector of a Client's (or AsyncClient's)
    decisions; register it with REGISTRY.register(RateLimitCollector(client)).

    A closed client yields no samples (its counters went with it)."""

    def __init__(self, client: Any) -> None:
        _families()  # fail here, not at the first scrape, without prometheus_client
        self._client = client

    def _stats(self) -> dict:
        if self._client.closed:
            return {}
        stats = getattr(self._client, "stats", None)
        if stats is None:  # an AsyncClient: its blocking client holds the counters
            stats = self._client.sync.stats
        try:
            return stats()
        except ClientClosed:
            return {}  # closed meanwhile

    def describe(self) -> List[Any]:
        return list(self._collect({}))

    def collect(self) -> Iterator[Any]:
        return self._collect(self._stats())

    def _collect(self, stats: dict) -> Iterator[Any]:
        Counter, Histogram = _families()
        decisions = Counter("ratelimit_decisions", "Rate-limit decisions by limiter name and outcome",
                            labels=["limiter", "outcome"])
        latency = Histogram("ratelimit_decision_seconds", "Latency of rate-limit decisions",
                            labels=["limiter"])
        local = Counter("ratelimit_local_decisions", "Of the decisions, those made from a lease without a round trip",
                        labels=["limiter", "outcome"])
        lease_calls = Counter("ratelimit_lease_calls", "Script calls that took or gave back a leased block",
                              labels=["limiter"])
        for name in sorted(stats):
            s = stats[name]
            for label, key in OUTCOMES:
                decisions.add_metric([name, label], s[key])
            for label, key in LOCAL_OUTCOMES:
                local.add_metric([name, label], s[key])
            lease_calls.add_metric([name], s["lease_calls"])
            total = 0
            buckets = []
            for bound, count in s["latency_buckets"]:
                total += count
                buckets.append((_le(bound), total))
            latency.add_metric([name], buckets, s["latency_sum"])
        yield decisions
        yield latency
        yield local
        yield lease_calls
