"""Explicit batches: acquire_many of 64 decisions (rl_execute_each) in batch
calls (max_batch 16, the default) against one call each (max_batch 1),
alternating for 7 rounds of 2 s on one Redis of its own: decisions/s, Redis
CPU per decision (INFO cpu) and EVALSHA calls per decision.
Usage: python bench/bench_batch.py [port]   (ratelimit and redis-py installed)"""
import subprocess
import sys
import time

import redis

import ratelimit

port = int(sys.argv[1]) if len(sys.argv) > 1 else 6497
srv = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
                       stdout=subprocess.DEVNULL)
time.sleep(0.5)
raw = redis.Redis(port=port)


def cpu():
    i = raw.info("cpu")
    return i["used_cpu_user"] + i["used_cpu_sys"]


def calls():
    return raw.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)


url = "redis://127.0.0.1:%d" % port
res = {1: [], 16: []}
try:
    clients = {mb: ratelimit.Client(url, max_batch=mb) for mb in (16, 1)}
    ids = ["u%d" % i for i in range(64)]
    for r in range(7):
        for mb in ((16, 1) if r % 2 == 0 else (1, 16)):
            lim = clients[mb].limiter("explicit", "1000000000/hour", algorithm="gcra")
            lim.acquire_many(ids)
            c0, k0, t0, n = cpu(), calls(), time.monotonic(), 0
            while time.monotonic() - t0 < 2.0:
                lim.acquire_many(ids)
                n += 64
            dt = time.monotonic() - t0
            res[mb].append((n / dt, (cpu() - c0) / n * 1e6, (calls() - k0) / n))
    for mb in (16, 1):
        def med(k):
            return sorted(x[k] for x in res[mb])[len(res[mb]) // 2]
        print("max_batch %2d: median %.0f decisions/s, Redis CPU %.2f us/decision, %.3f EVALSHA/decision"
              % (mb, med(0), med(1), med(2)))
    ratio = sorted(a[1] / b[1] for a, b in zip(res[16], res[1]))
    rate = sorted(a[0] / b[0] for a, b in zip(res[16], res[1]))
    print("16 / 1 per round, median: Redis CPU per decision %.3fx, decisions/s %.3fx"
          % (ratio[len(ratio) // 2], rate[len(rate) // 2]))
    for c in clients.values():
        c.close()
finally:
    srv.terminate()
