"""One process of the lease tests (tests/cross/test_leases.py) and the fleet
benchmark (bench/fleet.py); LeaseWorker.java is the same in Java.

    lease_worker.py URL THREADS

Prints "ready" once connected, then reads commands from stdin:

    clock
        prints CLOCK_MONOTONIC in ns (the harness checks that every
        language reads the same clock)
    run ALGORITHM LIMIT PERIOD_MS BURST LEASE_MS NAME START_NS END_NS RATE RECORD
        THREADS threads acquire one permit of NAME (id "hot", BURST 0: the
        default, LEASE_MS 0: no lease) from START_NS to END_NS (monotonic),
        RATE calls per second in all (0: as fast as they can); with RECORD 1
        prints "a LO HI LOCAL" per admission (monotonic ns read before and
        after the call, LOCAL 1 if decided from the lease), then
        "done CALLS ADMITTED LOCAL_ADMITTED DENIED LOCAL_DENIED"."""
import sys
import threading
import time

import ratelimit


def hammer(lim, start, end, interval, record, out, counts):
    calls = admitted = local_admitted = local_denied = 0
    while time.monotonic_ns() < start:
        time.sleep(0.0002)
    due = start
    while True:
        lo = time.monotonic_ns()
        if lo >= end:
            break
        if interval:
            if lo < due:
                time.sleep((due - lo) / 1e9)
                continue
            due = max(due, lo - 10_000_000)  # a stall is not made up in one burst
        r = lim.acquire("hot")
        hi = time.monotonic_ns()
        calls += 1
        due += interval
        if r.allowed:
            admitted += 1
            local_admitted += r.local
            if record:
                out.append(f"a {lo} {hi} {int(r.local)}")
        else:
            local_denied += r.local
    counts.append((calls, admitted, local_admitted, calls - admitted, local_denied))


def run(client, threads, algorithm, limit, period_ms, burst, lease_ms, name, start, end, rate, record):
    options = {"lease": lease_ms / 1000} if lease_ms else {}
    lim = client.limiter(name, (limit, period_ms / 1000), algorithm=algorithm, burst=burst or None, **options)
    interval = threads * 1_000_000_000 // rate if rate else 0
    outs, counts = [[] for _ in range(threads)], []
    workers = [threading.Thread(target=hammer, args=(lim, start, end, interval, record, outs[i], counts))
               for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if lease_ms:
        lim.close()  # gives the lease back
    for out in outs:
        if out:
            print("\n".join(out))
    print("done", *(sum(c[i] for c in counts) for i in range(5)), flush=True)


def main(argv):
    url, threads = argv[1], int(argv[2])
    client = ratelimit.Client(url, timeout=5.0, pool_size=16)
    warm = client.limiter("warm-up", (1000000, 1))
    for _ in range(100):
        warm.acquire("w")
    print("ready", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "clock":
            print(time.monotonic_ns(), flush=True)
        elif command == "run":
            algorithm, name = args[0], args[5]
            limit, period_ms, burst, lease_ms = map(int, args[1:5])
            start, end, rate, record = map(int, args[6:10])
            run(client, threads, algorithm, limit, period_ms, burst, lease_ms, name, start, end, rate, record)
        else:
            sys.exit(f"unknown command {command}")
    client.close()


if __name__ == "__main__":
    main(sys.argv)
