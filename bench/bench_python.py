"""ratelimit's Python binding against the `limits` library (redis-py storage)
on the same Redis, in the same run: calls per second for one thread, and the
ratio. Usage: python bench/bench_python.py [seconds]  (REDIS_URL or a local
redis-server on a free port). Needs: pip install . limits redis"""
import os
import shutil
import socket
import subprocess
import sys
import time

import limits
import limits.storage
import limits.strategies

import ratelimit

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0


def rate(call):
    n, end = 0, time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        call(n)
        n += 1
    return n / SECONDS


def main(url):
    client = ratelimit.Client(url)
    storage = limits.storage.storage_from_string(url)
    item = limits.parse("1000000000/hour")
    pairs = [
        ("fixed_window", limits.strategies.FixedWindowRateLimiter),
        ("sliding_window", limits.strategies.SlidingWindowCounterRateLimiter),
        ("sliding_log", limits.strategies.MovingWindowRateLimiter),
    ]
    print(f"{'algorithm':16} {'ratelimit':>12} {'limits':>12}  ratio")
    for ours, theirs in pairs:
        lim = client.limiter("bench-py", "1000000/hour", algorithm=ours)
        peer = theirs(storage)
        a = rate(lambda n: lim.acquire("u%d" % (n % 100)))
        b = rate(lambda n: peer.hit(item, "bench-" + ours, "u%d" % (n % 100)))
        print(f"{ours:16} {a:10.0f}/s {b:10.0f}/s  {a / b:.2f}x")


if __name__ == "__main__":
    url = os.environ.get("REDIS_URL")
    if url:
        main(url)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--save", "",
                                   "--appendonly", "no"], stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        try:
            main(f"redis://127.0.0.1:{port}")
        finally:
            server.terminate()
            server.wait()
