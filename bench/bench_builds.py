"""Two builds of the Python binding (say the shipped manylinux wheel and a
source build) on the same Redis, in the same run: decisions/s on the blocking
path (one thread) and on the asyncio path (64 tasks), and the ratio B/A.
Each round runs every row in a fresh interpreter of each build, alternating;
figures are the median over the rounds. --instructions counts instructions
per decision with callgrind instead (repeatable on a shared machine).

Usage: python3 tests/topology/topology.py run build/bench --only standalone --
         python bench/bench_builds.py PYTHON_A PYTHON_B [seconds] [--rounds N]
(each PYTHON an interpreter with ratelimit installed; or REDIS_URL names the
server)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

CHILD = r"""
import asyncio, json, sys, time
import ratelimit
from ratelimit import aio
url, budget, path = sys.argv[1], sys.argv[2], sys.argv[3]
# "2.0": run for 2 seconds; "n=3000": exactly 3000 decisions (for instruction counts)
count = int(budget[2:]) if budget.startswith("n=") else None
seconds = 0 if count else float(budget)

def more(n):
    return n < count if count else time.perf_counter() < end
rate = (1_000_000_000, 3600.0)  # never denies: every call costs the full script
ids = ["u%d" % i for i in range(100)]

def blocking():
    global end
    lim = ratelimit.Client(url).limiter("bench-builds", rate, algorithm="gcra")
    n, end = 0, time.perf_counter() + seconds
    while more(n):
        lim.acquire(ids[n % 100])
        n += 1
    return n / seconds if seconds else n

async def asyncio_64():
    global end
    client = await aio.AsyncClient.connect(url)
    lim = client.limiter("bench-builds", rate, algorithm="gcra")
    done, end = 0, time.perf_counter() + seconds
    async def worker(k):
        nonlocal done
        i = k
        while more(done):
            done += 1
            await lim.acquire(ids[i % 100])
            i += 64
    await asyncio.gather(*(worker(k) for k in range(64)))
    await client.close()
    return done / seconds if seconds else done

rate_s = blocking() if path == "blocking" else asyncio.run(asyncio_64())
print(json.dumps({"rate": rate_s, "tls": ratelimit.tls_version()}))
"""


def run(python, url, seconds, path):
    out = subprocess.run([os.path.abspath(python), "-c", CHILD, url, str(seconds), path], check=True, capture_output=True,
                         text=True, cwd="/").stdout
    return json.loads(out)


def instructions(python, url, path, n):
    """Instructions the whole process executes for n decisions (callgrind: the
    same count whatever else the machine does)."""
    err = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          os.path.abspath(python), "-c", CHILD, url, "n=%d" % n, path],
                         check=True, capture_output=True, text=True, cwd="/").stderr
    return int(re.search(r"Collected : (\d+)", err).group(1))


def main_instructions(args, url):
    print(f"A: {args.python_a}\nB: {args.python_b}")
    print(f"{'path':22} {'A':>12} {'B':>12}  B/A   (instructions per decision: (I(3000) - I(1000)) / 2000)")
    for path, label in (("blocking", "blocking, 1 thread"), ("asyncio", "asyncio, 64 tasks")):
        per = [(instructions(p, url, path, 3000) - instructions(p, url, path, 1000)) / 2000
               for p in (args.python_a, args.python_b)]
        print(f"{label:22} {per[0]:12.0f} {per[1]:12.0f}  {per[1] / per[0]:.3f}")


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
    parser.add_argument("--instructions", action="store_true", help="count instructions (valgrind) instead of timing")
    args = parser.parse_args()
    url = os.environ.get("REDIS_URL") or os.environ.get("RL_TEST_REDIS_URL")
    if not url:
        sys.exit("REDIS_URL names the server, or run under: python3 tests/topology/topology.py run build/bench "
                 "--only standalone -- python bench/bench_builds.py ...")
    (main_instructions if args.instructions else main)(args, url)
