"""The Python side of the demo: a limiter, a denial and its retry time, a
lock with fencing tokens, and the two kinds of failure kept apart.

    REDIS_URL=redis://127.0.0.1:6379/0 python examples/demo.py
"""
import os

import ratelimit

url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
with ratelimit.Client(url) as client:
    sms = client.limiter("demo-sms", "3/second", algorithm="gcra")
    sms.reset("user-42")
    print("gcra, 3/second (one call every 333 ms, a burst of 3):")
    for i in range(1, 5):
        r = sms.acquire("user-42")
        if r:
            print(f"  call {i}: allowed   remaining {r.remaining}")  # r.retry_after is None here
        else:
            print(f"  call {i}: DENIED    retry after {r.retry_after:.3f} s (the next cell is due then)")

    lock = client.lock("demo-job", lease=10.0)
    with lock.acquire(timeout=1.0) as held:
        print(f"lock held, fencing token {held.fencing_token} (grows with every grant)")
        try:
            lock.acquire(timeout=0.2)
        except ratelimit.NotAcquired as busy:  # Redis answered: the lock is taken
            print(f"  a second acquire: {type(busy).__name__}: {busy}")
    with lock.try_acquire() as again:
        print("released; acquired again with fencing token", again.fencing_token)

try:
    ratelimit.Client("redis://127.0.0.1:1/0", connect_timeout=0.2)
except ratelimit.RedisFailure as down:  # Redis failed: never a denial or a busy lock
    print(f"nothing listens on port 1: {type(down).__name__}")
