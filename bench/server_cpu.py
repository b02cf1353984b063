"""Redis CPU per decision, per algorithm and op, as a ratio to the floor.

Redis runs one script at a time, so the CPU a decision costs Redis caps
what one shard decides per second. The floor is the cheapest limiter that
uses the server's clock: one script doing TIME, GET, SET ... PX and
returning one array. Every row is measured through the Python binding (the
core's own keys and arguments, 64 calls in flight, pipelined), the floor
through redis-py with 64 pipelined; each is Redis's own account (INFO
commandstats: usec of EVALSHA per decision; and INFO cpu: Redis's whole CPU,
protocol included, per decision), in rounds that interleave every row with
the floor. The rows are one decision per script call (max_batch=1), but for
"batched": the client's default, several decisions ready together in one
call of the batch form. Read the ratios: the machine may be loaded, and the
spread (min-max over rounds) says how much.

Usage: python bench/server_cpu.py [--rounds 5] [--calls 2000] [redis-server ...]
  Starts each server given (default: redis-server on PATH, and the Redis 8.0
  and Valkey 9.1 of scripts/servers.sh when it has built them) on a free port.
Needs: pip install . redis
"""
import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

import redis

from ratelimit import aio

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLOOR = """local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], t[1], 'PX', ARGV[1])
return {t[1], t[2], v}"""
ALGORITHMS = ["gcra", "token_bucket", "fixed_window", "sliding_window", "leaky_bucket", "sliding_log"]
RESERVES = {"gcra", "token_bucket", "leaky_bucket"}
RATE = (1000000, 1)  # never denies: the admitted path, as in production
SECOND_RATE = (100000000, 60)
IDS = 1000
HOT_IDS = 8  # entities called many times a window ("acquire": 1000, a few calls each)
IN_FLIGHT = 64


def default_servers():
    """Debian's redis-server, and Redis 8.0 and Valkey 9.1 where scripts/servers.sh has built them."""
    found = [shutil.which("redis-server")]
    cache = os.environ.get("RL_SERVERS_CACHE", os.path.expanduser("~/.cache/ratelimit-servers"))
    found.append(os.path.join(cache, "redis8/redis-server"))
    for dirpath, _, files in os.walk(os.path.join(cache, "valkey-venv")):
        if "valkey-server" in files:
            found.append(os.path.join(dirpath, "valkey-server"))
            break
    return [s for s in found if s and os.access(s, os.X_OK)]


def script_usec(r, command):
    """(calls, usec) of `command` since the last CONFIG RESETSTAT."""
    stats = r.info("commandstats").get("cmdstat_" + command)
    return (stats["calls"], stats["usec"]) if stats else (0, 0)


async def rows(client, batched, name, algorithm):
    """(op, coroutine factory for call i) for each op measured."""
    one = client.limiter(f"{name}-{algorithm}", RATE, algorithm=algorithm)
    two = client.limiter(f"{name}-{algorithm}-2", [RATE, SECOND_RATE], algorithm=algorithm)
    stored_name = f"{name}-{algorithm}-stored"
    await client.configure(stored_name, RATE, algorithm=algorithm)
    stored = client.limiter(stored_name)
    out = [("acquire", lambda i: one.acquire(f"u{i % IDS}")),
           ("hot keys", lambda i: one.acquire(f"h{i % HOT_IDS}")),
           ("peek", lambda i: one.peek(f"u{i % IDS}"))]
    if algorithm in RESERVES:
        out.append(("reserve", lambda i: one.reserve(f"u{i % IDS}", max_wait=1.0)))
    out += [("two rates", lambda i: two.acquire(f"u{i % IDS}")),
            ("stored spec", lambda i: stored.acquire(f"u{i % IDS}"))]
    if batched:
        many = batched.limiter(f"{name}-{algorithm}-b", RATE, algorithm=algorithm)
        out.append(("batched", lambda i: many.acquire(f"u{i % IDS}")))
    return out


async def run_batch(call, start, k):
    await asyncio.gather(*(call(i) for i in range(start, start + k)))
    return k


async def run_floor(r, sha, start, k):
    pipe = r.pipeline(transaction=False)
    for i in range(start, start + k):
        pipe.evalsha(sha, 1, f"floor:u{i % IDS}", 1000)
    pipe.execute()
    return k


def redis_cpu(r):
    cpu = r.info("cpu")
    return cpu["used_cpu_user"] + cpu["used_cpu_sys"]


async def batch_usec(r, batch):
    """(script usec, Redis CPU usec) per decision of one batch of calls."""
    r.config_resetstat()
    cpu = redis_cpu(r)
    n = await batch
    cpu = redis_cpu(r) - cpu
    calls, usec = script_usec(r, "evalsha")
    if not 0 < calls <= n:
        raise RuntimeError(f"{calls} EVALSHA calls counted for {n} decisions")
    return usec / n, cpu * 1e6 / n


async def bench_server(binary, rounds, n):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = redis.Redis(port=port)
        for _ in range(200):
            try:
                info = r.info("server")
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        version = info.get("valkey_version") or info["redis_version"]
        label = f"{info.get('server_name') or 'redis'} {version}"
        url = f"redis://127.0.0.1:{port}"
        try:
            client = await aio.AsyncClient.connect(url, max_batch=1)
        except TypeError:  # a binding from before batch calls (a "before" column): no batched row
            client = await aio.AsyncClient.connect(url)
            batched = None
        else:
            batched = await aio.AsyncClient.connect(url)
        sha = r.script_load(FLOOR)
        cases = []
        for algorithm in ALGORITHMS:
            for op, call in await rows(client, batched, "bench-cpu", algorithm):
                cases.append((algorithm, op, call))
        # warm up: every key exists, every script is cached
        for start in range(0, IDS, IN_FLIGHT):
            await run_floor(r, sha, start, IN_FLIGHT)
            for _, _, call in cases:
                await run_batch(call, start, IN_FLIGHT)

        # per metric (0: script usec, 1: Redis CPU): the floor's per round, each row's and its ratio
        floors = ([], [])
        usecs = ({(a, o): [] for a, o, _ in cases}, {(a, o): [] for a, o, _ in cases})
        ratios = ({(a, o): [] for a, o, _ in cases}, {(a, o): [] for a, o, _ in cases})
        for _ in range(rounds):
            for algorithm in ALGORITHMS:
                # batch by batch, the floor beside each row: a batch the
                # scheduler preempted is an outlier the median drops
                floor, own = [], {(a, o): [] for a, o, _ in cases if a == algorithm}
                for start in range(0, n, IN_FLIGHT):
                    k = min(IN_FLIGHT, n - start)
                    floor.append(await batch_usec(r, run_floor(r, sha, start, k)))
                    for a, op, call in cases:
                        if a == algorithm:
                            own[a, op].append(await batch_usec(r, run_batch(call, start, k)))
                for m in (0, 1):
                    floors[m].append(statistics.median(f[m] for f in floor))
                    for key, values in own.items():
                        usecs[m][key].append(statistics.median(v[m] for v in values))
                        ratios[m][key].append(usecs[m][key][-1] / floors[m][-1])
        await client.close()
        if batched:
            await batched.close()
        return label, floors, usecs, ratios
    finally:
        server.terminate()
        server.wait()


def report(label, floors, usecs, ratios):
    print(f"\n{label}: floor {statistics.median(floors[0]):.2f} us of script, "
          f"{statistics.median(floors[1]):.2f} us of Redis CPU per call")
    print(f"{'algorithm':15} {'op':12} {'script us':>9} {'x floor':>8}  {'spread':10} "
          f"{'CPU us':>7} {'x floor':>8}  spread")
    for key, values in ratios[0].items():
        cpu = ratios[1][key]
        print(f"{key[0]:15} {key[1]:12} {statistics.median(usecs[0][key]):9.2f} "
              f"{statistics.median(values):7.2f}x  {min(values):.2f}-{max(values):.2f}  "
              f"{statistics.median(usecs[1][key]):7.2f} {statistics.median(cpu):7.2f}x  "
              f"{min(cpu):.2f}-{max(cpu):.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000, help="calls per row per round")
    parser.add_argument("servers", nargs="*", help="redis-server binaries (default: the matrix's)")
    args = parser.parse_args()
    servers = args.servers or default_servers()
    if not servers:
        sys.exit("server_cpu.py: no redis-server found")
    for binary in servers:
        report(*asyncio.run(bench_server(binary, args.rounds, args.calls)))


if __name__ == "__main__":
    main()
