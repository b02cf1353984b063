"""Client.stats() and the prometheus_client collector, against a real Redis:
exact counts after known sequences (allowed, denied, fallback, errors; bad
arguments not counted), on the blocking and asyncio paths, and the
collector's exposition parsed back."""
import asyncio
import math
import subprocess
import sys
import threading

import pytest

import ratelimit
from ratelimit import aio


def counts(stats, name):
    s = stats[name]
    return s["allowed"], s["denied"], s["fallback"], s["errors"]


def test_stats_counts_a_known_sequence(client, raw):
    assert client.stats() == {}
    lim = client.limiter("m-seq", "3/hour", algorithm="fixed_window")
    results = [lim.acquire("u") for _ in range(5)]
    assert [bool(r) for r in results] == [True, True, True, False, False]
    assert not lim.peek("u")  # a peek is a decision too
    with pytest.raises(ratelimit.InvalidArgument):
        lim.acquire("u", permits=0)  # never reaches Redis: not counted
    raw.rpush(client.limiter("m-seq", "3/hour", algorithm="fixed_window").key("broken"), "x")
    with pytest.raises(ratelimit.RedisError):
        lim.acquire("broken")  # WRONGTYPE: an error
    client.limiter("m-other", "1/hour").acquire_many([("a", 1), ("a", 1)])

    stats = client.stats()
    assert set(stats) == {"m-seq", "m-other"}
    assert counts(stats, "m-seq") == (3, 3, 0, 1)
    assert counts(stats, "m-other") == (1, 1, 0, 0)
    s = stats["m-seq"]
    buckets = s["latency_buckets"]
    assert sum(n for _, n in buckets) == 7
    assert [b for b, _ in buckets][:3] == [8e-6, 16e-6, 32e-6]
    assert buckets[-1][0] == math.inf
    assert all(a < b for (a, _), (b, _) in zip(buckets, buckets[1:]))
    assert 0 < s["latency_sum"] < 60


def test_fallback_and_errors_when_redis_is_down(dead_port):
    url = "redis://127.0.0.1:%d/0" % dead_port
    for policy in ("allow", "deny"):
        with ratelimit.Client(url, on_redis_error=policy, connect_timeout=0.2) as c:
            lim = c.limiter("m-down", "10/s")
            for _ in range(3):
                assert lim.acquire("u").fallback
            assert counts(c.stats(), "m-down") == (0, 0, 3, 0)


def test_timeouts_are_errors_with_their_latency(fresh_server):
    c = ratelimit.Client(fresh_server.url, timeout=0.3)
    lim = c.limiter("m-slow", "10/s")
    assert lim.acquire("u")
    fresh_server.pause()
    try:
        with pytest.raises(ratelimit.Timeout):
            lim.acquire("u")
    finally:
        fresh_server.resume()
    s = c.stats()["m-slow"]
    assert counts(c.stats(), "m-slow") == (1, 0, 0, 1)
    assert s["latency_sum"] >= 0.3
    # the slow one lies above 0.262144 s
    assert sum(n for bound, n in s["latency_buckets"] if bound > 0.26) == 1
    c.close()


def test_asyncio_decisions_are_counted(server, raw):
    async def main():
        c = await aio.AsyncClient.connect(server.url, timeout=30.0)
        try:
            lim = c.limiter("m-aio", "2/hour", algorithm="fixed_window")
            rs = await asyncio.gather(*[lim.acquire("u") for _ in range(5)])
            assert sum(bool(r) for r in rs) == 2
            return c.sync.stats()
        finally:
            await c.close()

    assert counts(asyncio.run(main()), "m-aio") == (2, 3, 0, 0)


def test_threads_totals_exact(client):
    lim = client.limiter("m-threads", "100/hour", algorithm="fixed_window")

    def run():
        for _ in range(40):
            lim.acquire("u")

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts(client.stats(), "m-threads") == (100, 140, 0, 0)


def test_closed_client_has_no_stats(server):
    c = ratelimit.Client(server.url)
    c.close()
    with pytest.raises(ratelimit.ClientClosed):
        c.stats()


# ---- the Prometheus collector ----------------------------------------------------


def test_collector_exposition(client):
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from ratelimit.metrics import RateLimitCollector

    lim = client.limiter("m-prom", "2/hour", algorithm="fixed_window")
    for _ in range(3):
        lim.acquire("u")
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(client))
    text = generate_latest(registry).decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def decisions(outcome):
        return samples[("ratelimit_decisions_total", (("limiter", "m-prom"), ("outcome", outcome)))]

    assert (decisions("allowed"), decisions("denied"), decisions("fallback"), decisions("error")) == (2, 1, 0, 0)
    assert samples[("ratelimit_decision_seconds_count", (("limiter", "m-prom"),))] == 3
    assert samples[("ratelimit_decision_seconds_bucket", (("le", "+Inf"), ("limiter", "m-prom")))] == 3
    assert samples[("ratelimit_decision_seconds_sum", (("limiter", "m-prom"),))] > 0
    # cumulative buckets, never decreasing
    les = sorted((float(dict(labels)["le"]), v) for (name, labels), v in samples.items()
                 if name == "ratelimit_decision_seconds_bucket")
    assert [v for _, v in les] == sorted(v for _, v in les)
    assert registry.get_sample_value("ratelimit_decisions_total",
                                     {"limiter": "m-prom", "outcome": "allowed"}) == 2
    # no lease: nothing decided locally, no lease script
    assert (samples[("ratelimit_local_decisions_total", (("limiter", "m-prom"), ("outcome", "allowed")))],
            samples[("ratelimit_local_decisions_total", (("limiter", "m-prom"), ("outcome", "denied")))],
            samples[("ratelimit_lease_calls_total", (("limiter", "m-prom"),))]) == (0, 0, 0)


def test_collector_counts_local_decisions(client):
    from prometheus_client import CollectorRegistry

    from ratelimit.metrics import RateLimitCollector

    lim = client.limiter("m-lease", "3/hour", algorithm="fixed_window", lease=1.0)
    results = [lim.acquire("u") for _ in range(6)]
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(client))

    def value(name, **labels):
        return registry.get_sample_value(name, dict(limiter="m-lease", **labels))

    assert value("ratelimit_decisions_total", outcome="allowed") == 3
    assert value("ratelimit_local_decisions_total", outcome="allowed") == sum(r.local for r in results if r)
    assert value("ratelimit_local_decisions_total", outcome="denied") == sum(r.local for r in results if not r) > 0
    assert value("ratelimit_lease_calls_total") == client.stats()["m-lease"]["lease_calls"] > 0


def test_collector_of_a_closed_client_is_empty(server):
    from prometheus_client import CollectorRegistry, generate_latest

    from ratelimit.metrics import RateLimitCollector

    c = ratelimit.Client(server.url)
    c.limiter("m-gone", "1/s").acquire("u")
    registry = CollectorRegistry()
    registry.register(RateLimitCollector(c))
    assert b'limiter="m-gone"' in generate_latest(registry)
    c.close()
    assert b'limiter="m-gone"' not in generate_latest(registry)


def test_metrics_module_imports_without_prometheus_client():
    # a fresh interpreter where prometheus_client cannot be imported
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "import ratelimit.metrics as m\n"
        "try:\n"
        "    m.RateLimitCollector(object())\n"
        "except ImportError as e:\n"
        "    print('ImportError', 'pip install prometheus_client' in str(e))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ImportError True"


def test_collector_of_an_async_client(server):
    from prometheus_client import CollectorRegistry

    from ratelimit.metrics import RateLimitCollector

    async def main():
        c = await aio.AsyncClient.connect(server.url, timeout=30.0)
        try:
            registry = CollectorRegistry()
            registry.register(RateLimitCollector(c))
            await c.limiter("m-aio-prom", "5/hour").acquire("u")
            return registry.get_sample_value("ratelimit_decisions_total",
                                             {"limiter": "m-aio-prom", "outcome": "allowed"})
        finally:
            await c.close()

    assert asyncio.run(main()) == 1
