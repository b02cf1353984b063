"""max_batch: plain decisions ready together go in one script call (the C
core's batches, docs/reliability.md "Batches"): the option is checked, exact
counts hold with batching on, batching happens (fewer EVALSHA calls than
decisions) and max_batch=1 turns it off."""
import asyncio

import pytest

import ratelimit
from ratelimit import aio

NOW = 1_700_000_000.0


def evalsha_calls(raw):
    return raw.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


def test_max_batch_is_checked(server):
    for bad in (0, -1, 101):
        with pytest.raises(ratelimit.InvalidArgument, match="max_batch must be in 1..100"):
            ratelimit.Client(server.url, max_batch=bad)
    with pytest.raises(TypeError):
        ratelimit.Client(server.url, max_batch="16")
    ratelimit.Client(server.url, max_batch=100).close()


@pytest.mark.parametrize("max_batch", [None, 1])
@pytest.mark.parametrize("algorithm", ratelimit.ALGORITHMS)
def test_asyncio_batches_exactly(server, raw, algorithm, max_batch):
    async def main():
        async with aio.AsyncClient(server.url, timeout=10.0, max_batch=max_batch) as client:
            lim = client.limiter("pybatch-" + algorithm, "500/hour", algorithm=algorithm)
            await lim.acquire("warm", now=NOW)  # connected, script loaded
            before = evalsha_calls(raw)
            results = await asyncio.gather(*(lim.acquire("k%d" % (i % 4), now=NOW) for i in range(4000)))
            calls = evalsha_calls(raw) - before
            assert sum(bool(r) for r in results) == 4 * 500
            for k in range(4):
                assert (await lim.peek("k%d" % k, now=NOW)).remaining == 0
            return calls
    calls = asyncio.run(main())
    if max_batch == 1:
        assert calls == 4000
    else:
        assert calls < 4000 / 2


def test_acquire_many_is_one_call_per_batch(server, raw):
    with ratelimit.Client(server.url) as client, ratelimit.Client(server.url, max_batch=1) as single:
        for c, expected in ((client, 3), (single, 40)):
            lim = c.limiter("pybatch-many-%d" % expected, "30/hour", algorithm="gcra")
            lim.acquire("warm")
            before = evalsha_calls(raw)
            rs = lim.acquire_many(["u%d" % (i % 2) for i in range(40)], now=NOW)
            assert evalsha_calls(raw) - before == expected
            assert sum(bool(r) for r in rs) == 40
