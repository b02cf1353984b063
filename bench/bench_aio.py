"""ratelimit.aio against redis.asyncio running our own lua/limit.lua by EVALSHA
(the least any asyncio Python client pays for the same decision), on the
same Redis in the same run: decisions/s and p50/p99 latency with 1 task and
with 64 concurrent tasks, and the ratio. For context, the old design (the
blocking call in a thread pool, what ratelimit.aio did before the async
core) is measured too.

Usage: python bench/bench_aio.py [seconds] [--rounds N] [--uvloop] [--leases]
--leases: instead, ratelimit.aio on one hot key (gcra, a limit never
reached) with and without a lease (0.05 s), 1 and 64 tasks: decisions/s,
the ratio, and the scripts Redis ran per decision. REDIS_URL names a server, else a local redis-server on a free port is
started. The peer (redis-py, with its hiredis parser) is installed with pip
into this interpreter when missing; --uvloop adds rows on uvloop (installed
the same way). Rows alternate within each round; figures are the median
over the rounds."""
import argparse
import asyncio
import concurrent.futures
import functools
import importlib
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time

import ratelimit
from ratelimit import aio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RATE = (1_000_000_000, 3600.0)  # never denies: every call costs the full script
IDS = 100


def ensure(module, *packages):
    try:
        return importlib.import_module(module)
    except ImportError:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *packages])
        importlib.invalidate_caches()
        return importlib.import_module(module)


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(p / 100.0 * (len(sorted_values) - 1)))))
    return sorted_values[k]


async def measure(call, tasks, seconds):
    """tasks coroutines calling call(i) back to back for seconds: (decisions/s, p50 us, p99 us)."""
    pc = time.perf_counter
    for i in range(min(tasks, 64) * 4):  # warm up: connections, script cache
        await call(i)
    latencies = []
    stop = pc() + seconds

    async def worker(k):
        i = k
        record = latencies.append
        while pc() < stop:
            t = pc()
            await call(i)
            record(pc() - t)
            i += tasks
    start = pc()
    await asyncio.gather(*(worker(k) for k in range(tasks)))
    elapsed = pc() - start
    latencies.sort()
    return len(latencies) / elapsed, percentile(latencies, 50) * 1e6, percentile(latencies, 99) * 1e6


class Ours:
    name = "ratelimit.aio"

    def __init__(self, url):
        self.url = url

    async def open(self):
        self.client = await aio.AsyncClient.connect(self.url)
        self.lim = self.client.limiter("bench-aio", RATE, algorithm="gcra")
        self.ids = ["u%d" % i for i in range(IDS)]

    async def call(self, i):
        return await self.lim.acquire(self.ids[i % IDS])

    async def close(self):
        await self.client.close()


class Hot:
    """ratelimit.aio on one key, with or without a lease."""

    def __init__(self, url, lease):
        self.url = url
        self.lease = lease
        self.name = "ratelimit.aio, lease %s" % ("%g s" % lease if lease else "none")

    async def open(self):
        self.client = await aio.AsyncClient.connect(self.url)
        self.lim = self.client.limiter("bench-hot-%s-%d" % (self.lease, id(self)), RATE, algorithm="gcra",
                                       lease=self.lease)
        self.decisions = 0
        self.client.sync._command(["CONFIG", "RESETSTAT"])

    async def call(self, i):
        self.decisions += 1
        return await self.lim.acquire("all")

    async def close(self):
        text = self.client.sync._command(["INFO", "commandstats"]).decode()
        self.scripts = sum(int(line.split("calls=")[1].split(",")[0]) for line in text.splitlines()
                           if line.split(":")[0] in ("cmdstat_evalsha", "cmdstat_eval"))
        await self.client.close()


class ThreadPool:
    name = "blocking call in a thread pool (old aio)"

    def __init__(self, url):
        self.url = url

    async def open(self):
        self.client = ratelimit.Client(self.url)
        self.lim = self.client.limiter("bench-pool", RATE, algorithm="gcra")
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=32)
        self.ids = ["u%d" % i for i in range(IDS)]
        self.loop = asyncio.get_running_loop()

    async def call(self, i):
        return await self.loop.run_in_executor(self.pool, self.lim.acquire, self.ids[i % IDS])

    async def close(self):
        self.pool.shutdown()
        self.client.close()


def embedded_script(name):
    """lua/<name>.lua with its --@include lines expanded, as the build embeds it."""
    with open(os.path.join(ROOT, "lua", name + ".lua"), "rb") as f:
        text = f.read()
    for path in re.findall(rb"--@include (\S+)\n", text):
        with open(os.path.join(ROOT, "lua", path.decode()), "rb") as f:
            text = text.replace(b"--@include " + path + b"\n", f.read())
    return text


class Peer:
    """redis.asyncio: EVALSHA of the very script ratelimit runs, with the
    same key and arguments, the reply turned into a tuple."""
    name = "redis.asyncio + EVALSHA limit.lua"

    def __init__(self, url, redis_asyncio):
        self.url = url
        self.redis = redis_asyncio

    async def open(self):
        self.r = self.redis.Redis.from_url(self.url)
        self.sha = await self.r.script_load(embedded_script("limit"))
        ours = dict(ratelimit.scripts())["limit"]
        if self.sha != ours:
            raise SystemExit("lua/limit.lua (%s) is not the script this ratelimit build runs (%s)" % (self.sha, ours))
        limit, period = RATE
        # the short form, as the core sends it: algorithm, then op, permits, limit, period_ms, burst
        # packed as five little-endian int64, complemented (docs/semantics.md)
        self.args = ("gcra", struct.pack("<5q", *(~n for n in (0, 1, limit, int(period * 1000), limit))))
        self.keys = ["rl:{bench-peer:u%d}:gcra" % i for i in range(IDS)]

    async def call(self, i):
        allowed, limit, remaining, retry_after, reset_after, wait, _granted, _index = await self.r.evalsha(
            self.sha, 1, self.keys[i % IDS], *self.args)
        return allowed == 1, limit, remaining, retry_after, reset_after, wait

    async def close(self):
        await self.r.aclose() if hasattr(self.r, "aclose") else await self.r.close()


async def one_row(make, tasks, seconds):
    row = make()
    await row.open()
    try:
        got = await measure(row.call, tasks, seconds)
    finally:
        await row.close()
    if isinstance(row, Hot):  # scripts per decision (the warm-up's too)
        got += (row.scripts / row.decisions,)
    return got


def run_row(make, tasks, seconds, loop_kind):
    if loop_kind == "uvloop":
        import uvloop
        loop = uvloop.new_event_loop()
        try:
            return loop.run_until_complete(one_row(make, tasks, seconds))
        finally:
            loop.close()
    return asyncio.run(one_row(make, tasks, seconds))


def run_rounds(makers, seconds, rounds, loops):
    """{(row, loop, tasks): [measure's figures per round]}, the rows alternating within each round."""
    results = {}
    for r in range(rounds):
        for loop_kind in loops:
            for tasks in (1, 64):
                for row, make in makers.items():
                    got = run_row(make, tasks, seconds, loop_kind)
                    results.setdefault((row, loop_kind, tasks), []).append(got)
                    print("round %d  %-42s %-7s %2d task(s): %8.0f/s  p50 %6.0f us  p99 %6.0f us%s"
                          % (r + 1, row, loop_kind, tasks, *got[:3],
                             "  %.4f scripts/decision" % got[3] if len(got) > 3 else ""), file=sys.stderr)
    return results


def main_leases(url, seconds, rounds, loops):
    results = run_rounds({lease: functools.partial(Hot, url, lease) for lease in (None, 0.05)},
                         seconds, rounds, loops)
    print()
    print("Python %s%s, %d round(s) of %.1f s per row, median shown"
          % (sys.version.split()[0],
             ", uvloop %s" % importlib.import_module("uvloop").__version__ if "uvloop" in loops else "",
             rounds, seconds))
    print()
    print("| loop | tasks | lease | decisions/s | p50 | p99 | scripts per decision | vs no lease |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for loop_kind in loops:
        for tasks in (1, 64):
            base = statistics.median(g[0] for g in results[(None, loop_kind, tasks)])
            for lease in (None, 0.05):
                got = results[(lease, loop_kind, tasks)]
                rate, p50, p99, per = (statistics.median(g[k] for g in got) for k in range(4))
                print("| %s | %d | %s | %s | %.0f us | %.0f us | %.2g (1 per %.0f) | %.1fx |"
                      % (loop_kind, tasks, "%g s" % lease if lease else "none", format(int(rate), ","), p50, p99,
                         per, 1 / per if per else float("inf"), rate / base))


def main(url, seconds, rounds, loops):
    redis_asyncio = ensure("redis.asyncio", "redis")
    ensure("hiredis", "hiredis")  # the peer's fastest reply parser
    import redis
    try:
        import hiredis  # noqa: F401
        parser = "hiredis parser"
    except ImportError:
        parser = "pure-Python parser"
    rows = [Ours, Peer, ThreadPool]
    makers = {Ours: lambda: Ours(url), Peer: lambda: Peer(url, redis_asyncio), ThreadPool: lambda: ThreadPool(url)}
    results = run_rounds({cls.name: makers[cls] for cls in rows}, seconds, rounds, loops)
    print()
    print("Python %s, redis-py %s (%s)%s, %d round(s) of %.1f s per row, median shown"
          % (sys.version.split()[0], redis.__version__, parser,
             ", uvloop %s" % importlib.import_module("uvloop").__version__ if "uvloop" in loops else "",
             rounds, seconds))
    print()
    print("| client | loop | tasks | decisions/s | p50 | p99 | vs redis.asyncio |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for loop_kind in loops:
        for tasks in (1, 64):
            peer = statistics.median(g[0] for g in results[(Peer.name, loop_kind, tasks)])
            for cls in rows:
                got = results[(cls.name, loop_kind, tasks)]
                rate = statistics.median(g[0] for g in got)
                p50 = statistics.median(g[1] for g in got)
                p99 = statistics.median(g[2] for g in got)
                print("| %s | %s | %d | %s | %.0f us | %.0f us | %.2fx |"
                      % (cls.name, loop_kind, tasks, format(int(rate), ","), p50, p99, rate / peer))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seconds", nargs="?", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--uvloop", action="store_true", help="also run every row on uvloop")
    parser.add_argument("--leases", action="store_true", help="one hot key with and without a lease")
    args = parser.parse_args()
    loops = ["asyncio"]
    if args.uvloop:
        ensure("uvloop", "uvloop")
        loops.append("uvloop")
    run = main_leases if args.leases else main
    url = os.environ.get("REDIS_URL")
    if url:
        run(url, args.seconds, args.rounds, loops)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        try:
            run("redis://127.0.0.1:%d/0" % port, args.seconds, args.rounds, loops)
        finally:
            server.terminate()
            server.wait()
