"""ratelimit's Python binding against the `limits` library (redis-py storage)
on the same Redis, in the same run: calls per second for one thread, and the
ratio. Usage: python bench/bench_python.py [seconds]  (REDIS_URL or a local
redis-server on a free port). Needs: pip install . limits redis

--threads N [seconds] [rounds]: the same pairs from N threads on one
client each side (ours: overlapping calls share batch calls in the core),
rounds interleaved, with the scripts Redis ran per decision.
RL_BENCH_ALGORITHMS="gcra fixed_window": only those rows; gcra is set
against `limits`' fixed window (it has no GCRA; that is its cheapest).
The header says whether the interpreter is free-threaded and the GIL on.

--leases [seconds] [rounds]: one hot key (gcra, a limit no run reaches)
with and without a lease (0.05 s), one thread and 8 threads: decisions/s,
the ratio, and the scripts Redis ran per decision (its commandstats).
Needs only ratelimit."""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import sysconfig
import threading
import time

import ratelimit

LEASES = sys.argv[1:2] == ["--leases"]
THREADS = int(sys.argv[2]) if sys.argv[1:2] == ["--threads"] else 0
ARGS = sys.argv[2:] if LEASES else sys.argv[3:] if THREADS else sys.argv[1:]
SECONDS = float(ARGS[0]) if ARGS else 2.0
ROUNDS = int(ARGS[1]) if len(ARGS) > 1 else 3


def rate(call):
    n, end = 0, time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        call(n)
        n += 1
    return n / SECONDS


def pairs():
    import limits.strategies
    every = [
        ("fixed_window", limits.strategies.FixedWindowRateLimiter),
        ("sliding_window", limits.strategies.SlidingWindowCounterRateLimiter),
        ("sliding_log", limits.strategies.MovingWindowRateLimiter),
        ("gcra", limits.strategies.FixedWindowRateLimiter),
    ]
    wanted = os.environ.get("RL_BENCH_ALGORITHMS", "fixed_window sliding_window sliding_log").split()
    return [p for p in every if p[0] in wanted]


def build():
    """Which CPython this is: a GIL build, or free-threaded with the GIL on or off."""
    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "GIL build"
    return "free-threaded, GIL %s" % ("on" if sys._is_gil_enabled() else "off")


def main(url):
    import limits
    import limits.storage

    client = ratelimit.Client(url)
    storage = limits.storage.storage_from_string(url)
    item = limits.parse("1000000000/hour")
    print(f"{'algorithm':16} {'ratelimit':>12} {'limits':>12}  ratio")
    for ours, theirs in pairs():
        lim = client.limiter("bench-py", "1000000/hour", algorithm=ours)
        peer = theirs(storage)
        a = rate(lambda n: lim.acquire("u%d" % (n % 100)))
        b = rate(lambda n: peer.hit(item, "bench-" + ours, "u%d" % (n % 100)))
        print(f"{ours:16} {a:10.0f}/s {b:10.0f}/s  {a / b:.2f}x")


def script_calls(client):
    """Scripts Redis ran since CONFIG RESETSTAT."""
    text = client._command(["INFO", "commandstats"]).decode()
    return sum(int(line.split("calls=")[1].split(",")[0]) for line in text.splitlines()
               if line.split(":")[0] in ("cmdstat_evalsha", "cmdstat_eval"))


def decide_for(lim, threads, acquire=None):
    """threads calling acquire(k) (default: lim.acquire on one key) back to
    back for SECONDS: decisions."""
    counts, end = [0] * threads, time.perf_counter() + SECONDS

    def work(k):
        n, call = 0, acquire or (lambda k: lim.acquire("all"))
        while time.perf_counter() < end:
            call(k)
            n += 1
        counts[k] = n
    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts)


def threaded(url):
    import limits
    import limits.storage

    client = ratelimit.Client(url)
    storage = limits.storage.storage_from_string(url)
    item = limits.parse("1000000000/hour")
    got = {}
    for r in range(ROUNDS):
        for ours, theirs in pairs():
            lim = client.limiter("bench-py-threads-" + ours, "100000000/hour", algorithm=ours)
            peer = theirs(storage)
            for side, call in (("ratelimit", lambda k: lim.acquire("t%d" % k)),
                               ("limits", lambda k: peer.hit(item, "bench-threads-" + ours, "t%d" % k))):
                client._command(["CONFIG", "RESETSTAT"])
                n = decide_for(None, THREADS, call)
                per = script_calls(client) / n
                got.setdefault((ours, side), []).append(n / SECONDS)
                got.setdefault((ours, side, "scripts"), []).append(per)
                print("round %d  %-14s %-9s %10.0f/s  %.3f scripts/decision"
                      % (r + 1, ours, side, n / SECONDS, per), file=sys.stderr)
    client.close()
    print("Python %s (%s), %d threads, %d round(s) of %.1f s per row, medians\n"
          % (sys.version.split()[0], build(), THREADS, ROUNDS, SECONDS))
    print("| algorithm | ratelimit | limits | ratio | ratelimit's scripts per decision |")
    print("|---|---:|---:|---:|---:|")
    for ours, _ in pairs():
        a, b = (statistics.median(got[(ours, side)]) for side in ("ratelimit", "limits"))
        print("| %s | %s/s | %s/s | %.2fx | %.2f |" % (ours, format(int(a), ","), format(int(b), ","), a / b,
                                                       statistics.median(got[(ours, "ratelimit", "scripts")])))


def leases(url):
    client = ratelimit.Client(url)
    got = {}
    for r in range(ROUNDS):
        for threads in (1, 8):
            for lease in (None, 0.05):
                # a fresh name per row: a block never outlives its row
                lim = client.limiter("bench-lease-%d-%d-%s" % (r, threads, lease), "1000000000/hour",
                                     algorithm="gcra", lease=lease)
                client._command(["CONFIG", "RESETSTAT"])
                n = decide_for(lim, threads)
                lim.close()
                scripts = script_calls(client)
                got.setdefault((threads, lease), []).append((n / SECONDS, scripts / n))
                print("round %d  %d thread(s)  lease %-5s %10.0f/s  %.4f scripts/decision"
                      % (r + 1, threads, lease, n / SECONDS, scripts / n), file=sys.stderr)
    client.close()
    print("Python %s, %d round(s) of %.1f s per row, median shown\n" % (sys.version.split()[0], ROUNDS, SECONDS))
    print("| threads | lease | decisions/s | scripts per decision | vs no lease |")
    print("|---:|---|---:|---:|---:|")
    for threads in (1, 8):
        base = statistics.median(g[0] for g in got[(threads, None)])
        for lease in (None, 0.05):
            rate = statistics.median(g[0] for g in got[(threads, lease)])
            per = statistics.median(g[1] for g in got[(threads, lease)])
            print("| %d | %s | %s | %.2g (1 per %.0f) | %.1fx |"
                  % (threads, "%g s" % lease if lease else "none", format(int(rate), ","), per,
                     1 / per if per else float("inf"), rate / base))


if __name__ == "__main__":
    run = leases if LEASES else threaded if THREADS else main
    url = os.environ.get("REDIS_URL")
    if url:
        run(url)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen([shutil.which("redis-server"), "--port", str(port), "--save", "",
                                   "--appendonly", "no"], stdout=subprocess.DEVNULL)
        time.sleep(0.3)
        try:
            run(f"redis://127.0.0.1:{port}")
        finally:
            server.terminate()
            server.wait()
