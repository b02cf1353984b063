"""Two builds of the Python binding (say the shipped manylinux wheel and a
source build) on the same Redis, in the same run: decisions/s on the blocking
path (one thread) and on the asyncio path (64 tasks), and the ratio B/A.
Each round runs every row in a fresh interpreter of each build, alternating;
figures are the median over the rounds.

Usage: python3 tests/topology/topology.py run build/bench --only standalone --
         python bench/bench_builds.py PYTHON_A PYTHON_B [seconds] [--rounds N]
(each PYTHON an interpreter with ratelimit installed; or REDIS_URL names the
server)."""
import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import asyncio, json, sys, time
import ratelimit
from ratelimit import aio
url, seconds, path = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rate = (1_000_000_000, 3600.0)  # never denies: every call costs the full script
ids = ["u%d" % i for i in range(100)]

def blocking():
    lim = ratelimit.Client(url).limiter("bench-builds", rate, algorithm="gcra")
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        lim.acquire(ids[n % 100])
        n += 1
    return n / seconds

async def asyncio_64():
    client = await aio.AsyncClient.connect(url)
    lim = client.limiter("bench-builds", rate, algorithm="gcra")
    done, end = 0, time.perf_counter() + seconds
    async def worker(k):
        nonlocal done
        i = k
        while time.perf_counter() < end:
            await lim.acquire(ids[i % 100])
            i += 64
            done += 1
    await asyncio.gather(*(worker(k) for k in range(64)))
    await client.close()
    return done / seconds

rate_s = blocking() if path == "blocking" else asyncio.run(asyncio_64())
print(json.dumps({"rate": rate_s, "tls": ratelimit.tls_version()}))
"""


def run(python, url, seconds, path):
    out = subprocess.run([python, "-c", CHILD, url, str(seconds), path], check=True, capture_output=True,
                         text=True, cwd="/").stdout
    return json.loads(out)


def main(args, url):
    rows = {}
    for _ in range(args.rounds):
        for path in ("blocking", "asyncio"):
            for build in ("A", "B"):
                python = args.python_a if build == "A" else args.python_b
                r = run(python, url, args.seconds, path)
                rows.setdefault((path, build), []).append(r["rate"])
                rows.setdefault(("tls", build), r["tls"])
    print(f"A: {args.python_a} ({rows[('tls', 'A')]})\nB: {args.python_b} ({rows[('tls', 'B')]})")
    print(f"{'path':22} {'A':>12} {'B':>12}  B/A   (median of {args.rounds} rounds, {args.seconds:g} s each)")
    for path, label in (("blocking", "blocking, 1 thread"), ("asyncio", "asyncio, 64 tasks")):
        a = statistics.median(rows[(path, "A")])
        b = statistics.median(rows[(path, "B")])
        print(f"{label:22} {a:10.0f}/s {b:10.0f}/s  {b / a:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("python_a")
    parser.add_argument("python_b")
    parser.add_argument("seconds", type=float, nargs="?", default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    url = os.environ.get("REDIS_URL") or os.environ.get("RL_TEST_REDIS_URL")
    if not url:
        sys.exit("REDIS_URL names the server, or run under: python3 tests/topology/topology.py run build/bench "
                 "--only standalone -- python bench/bench_builds.py ...")
    main(args, url)
