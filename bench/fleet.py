"""Leases: a fleet on one key (issue 25). 8 processes, 4 Python and 4 Java
(tests/cross/lease_worker.py and LeaseWorker.java, 2 threads each), offer
~100,000 decisions/s in all on ONE gcra key of one redis-server, in rows
that interleave round by round:

  no lease / lease 50 ms      with the limit above the offered load
  no lease / lease 50 ms      saturated: the limit below the offered load

and measure Redis's CPU per admitted decision in the same run: INFO cpu
(the server process, user + sys: scripts, networking, everything) and INFO
commandstats (the usec Redis accounts to EVALSHA), each divided by the
decisions admitted in the row. Read the ratios (lease against no lease):
the machine may be loaded, and a row that cannot reach its offered load
says so in decisions/s.

Usage: build/venv/bin/python bench/fleet.py [--seconds 5] [--rounds 3] [--jar JAR]
Needs: pip install . redis pytest (the workers are driven by tests/cross/test_leases.py's
Worker); the jar (mvn -B -q -f bindings/java package -DskipTests).
"""
import argparse
import glob
import os
import socket
import statistics
import subprocess
import sys
import time

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "cross"))
from test_leases import Worker  # noqa: E402  (the harness the live test drives the same workers with)

OFFERED = 100_000  # decisions/s, in all
ABOVE, BELOW = (1_000_000, 1000, 0), (10_000, 1000, 1000)  # gcra limit, period ms, burst (0: the limit)
ROWS = [("no lease", 0, ABOVE), ("lease 50 ms", 50, ABOVE),
        ("no lease, saturated", 0, BELOW), ("lease 50 ms, saturated", 50, BELOW)]


def cpu_seconds(r):
    info = r.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def run_row(r, workers, name, lease_ms, rate, seconds):
    limit, period_ms, burst = rate
    r.config_resetstat()
    start = time.monotonic_ns() + 300_000_000
    end = start + int(seconds * 1e9)
    for w in workers:
        w.send(f"run gcra {limit} {period_ms} {burst} {lease_ms} {name} {start} {end} {OFFERED // len(workers)} 0")
    time.sleep(max(0.0, (start - time.monotonic_ns()) / 1e9 - 0.05))
    cpu = cpu_seconds(r)
    counts = [w.line(timeout=seconds + 60) for w in workers]
    cpu = cpu_seconds(r) - cpu
    assert all(c[0] == "done" for c in counts), counts
    calls, admitted, local_admitted, _, local_denied = (sum(int(c[i]) for c in counts) for i in range(1, 6))
    script = r.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
    return {"decisions": calls / seconds, "admitted": admitted / seconds,
            "local": (local_admitted + local_denied) / max(1, calls), "scripts": script["calls"] / seconds,
            "cpu_us": cpu * 1e6 / max(1, admitted), "script_us": script["usec"] / max(1, admitted)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jar", default=next(iter(sorted(
        j for j in glob.glob(os.path.join(ROOT, "bindings/java/core/target/ratelimit-*.jar"))
        if not j.endswith(("-tests.jar", "-sources.jar", "-javadoc.jar")))), None))
    args = parser.parse_args()
    if not args.jar:
        sys.exit("fleet.py: no jar (mvn -B -q -f bindings/java package -DskipTests, or --jar)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no"], stdout=subprocess.DEVNULL)
    workers = []
    try:
        r = redis.Redis(port=port)
        for _ in range(300):
            try:
                version = r.info("server")["redis_version"]
                break
            except redis.ConnectionError:
                time.sleep(0.02)
        url = f"redis://127.0.0.1:{port}"
        cross = os.path.join(ROOT, "tests", "cross")
        workers = [Worker([sys.executable, os.path.join(cross, "lease_worker.py"), url], "python", 0, 2)
                   for _ in range(4)]
        workers += [Worker(["java", "-cp", args.jar, os.path.join(cross, "LeaseWorker.java"), url], "java", 0, 2)
                    for _ in range(4)]
        for w in workers:
            assert w.line(timeout=120) == ["ready"], w
        results = {row[0]: [] for row in ROWS}
        for n in range(args.rounds):
            for label, lease_ms, rate in ROWS:
                results[label].append(run_row(r, workers, f"fleet-{n}-{lease_ms}-{rate[0]}", lease_ms, rate,
                                              args.seconds))
        report(version, args, results)
    finally:
        for w in workers:
            w.close()
        server.terminate()
        server.wait()


def report(version, args, results):
    med = {label: {k: statistics.median(x[k] for x in rows) for k in rows[0]} for label, rows in results.items()}
    print(f"redis {version}: 8 processes (4 Python, 4 Java, 2 threads each) offering {OFFERED:,}/s on one gcra "
          f"key; {args.seconds:g} s per row, median of {args.rounds} rounds")
    print("| run | limit (burst) | decisions/s | admitted/s | decided locally | scripts/s "
          "| Redis CPU us / admitted (spread) | EVALSHA us / admitted | Redis CPU, lease / no lease |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, lease_ms, rate in ROWS:
        m = med[label]
        base = med["no lease, saturated" if rate == BELOW else "no lease"]
        spread = [x["cpu_us"] for x in results[label]]
        print(f"| {label} | {rate[0]:,}/s ({rate[2] or rate[0]:,}) | {m['decisions']:,.0f} | {m['admitted']:,.0f} "
              f"| {m['local']:.1%} | {m['scripts']:,.0f} | {m['cpu_us']:.2f} ({min(spread):.2f}-{max(spread):.2f}) "
              f"| {m['script_us']:.2f} | {m['cpu_us'] / base['cpu_us']:.3f} |")


if __name__ == "__main__":
    main()
