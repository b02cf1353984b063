"""The Python side of the cross-language tests; same command line as
c_worker.c and Worker.java (see c_worker.c), plus:

    worker.py URL follow NAME ID CONFIG_REFRESH_S TIMEOUT_S TARGET_LIMIT

acquires one permit of NAME's stored spec (client.limiter(NAME), no rate)
for ID every 10 ms, printing "epoch_ms limit allowed" per call, until it has
seen TARGET_LIMIT and then a denial, or TIMEOUT_S passed."""
import sys
import threading
import time

import ratelimit


def main(argv):
    url, command = argv[1], argv[2]
    client = ratelimit.Client(url, timeout=5.0, pool_size=16)
    if command == "scripts":
        for name, sha in ratelimit.scripts():
            print(name, sha)
        return
    if command == "follow":
        follow(url, *argv[3:])
        return
    algorithm, limit, period_ms, name, id = argv[3], int(argv[4]), int(argv[5]), argv[6], argv[7]
    lim = client.limiter(name, (limit, period_ms / 1000), algorithm=algorithm)
    if command == "burst":
        threads, calls = int(argv[8]), int(argv[9])
        admitted = []

        def run():
            admitted.append(sum(1 for _ in range(calls) if lim.acquire(id).allowed))

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        print(sum(admitted))
    elif command == "step":
        op, permits = argv[8], int(argv[9])
        r = lim.peek(id, permits) if op == "peek" else lim.acquire(id, permits)
        retry = -1 if r.retry_after is None else round(r.retry_after * 1000)
        print(int(r.allowed), r.remaining, retry, round(r.reset_after * 1000))
    else:
        sys.exit(f"unknown command {command}")


def follow(url, name, id, refresh, timeout, target):
    client = ratelimit.Client(url, timeout=5.0, config_refresh=float(refresh))
    lim = client.limiter(name)  # the spec stored in Redis
    seen_target = False
    deadline = time.monotonic() + float(timeout)
    while time.monotonic() < deadline:
        r = lim.acquire(id)
        print(int(time.time() * 1000), r.limit, int(r.allowed), flush=True)
        seen_target = seen_target or r.limit == int(target)
        if seen_target and not r.allowed:
            return
        time.sleep(0.01)


if __name__ == "__main__":
    main(sys.argv)
