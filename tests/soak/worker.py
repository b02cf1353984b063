"""The Python side of the soak (scripts/soak.sh runs it through soak.py).

    worker.py URL SECONDS LOGDIR

For SECONDS: sync and asyncio decisions on every algorithm and op (the
checked limiters of limiters.txt and others: several rates, reserve,
refund, reset, batches, blocking acquires, per-client and stored specs,
fail-open and fail-closed clients), the semaphore, lock and delay queue;
threads started and stopped, clients opened and closed, os.fork() children
using the parent's clients. What the orchestrator checks goes to
LOGDIR/py-<pid>.log (one file per process, children included):

    A name id t0 t1 permits reset_ms an admission of a checked limiter
    H S|L name t_acquired t_release fencing_token released
    P message t0 delay_ms            a push that succeeded
    D message t1                     a delivery
    E t kind                         a Redis failure or a fallback decision

t0 / t1: epoch ms just before / after the call (the redis-server is local:
its TIME is this clock). Prints Q0 / Q1 (fds, allocated blocks, threads at
a quiescent point: nothing open, before and after the run) and STATS.
Exit status 1 when anything unexpected happened: an exception that is not a
Redis failure or a denial, a thread that did not stop, a failed child.
"""
import asyncio
import collections
import ctypes
import gc
import itertools
import os
import random
import sys
import threading
import time
import traceback

import ratelimit
from ratelimit import aio

HERE = os.path.dirname(os.path.abspath(__file__))
URL, SECONDS, LOGDIR = sys.argv[1], float(sys.argv[2]), sys.argv[3]
IDS = ("a", "b")
BUCKETS = ("token_bucket", "leaky_bucket", "gcra")
# what the orchestrator's faults cause: not failures of the library
EXPECTED = (ratelimit.ConnectionError, ratelimit.Timeout, ratelimit.Backlog, ratelimit.RedisError)
SEQ = itertools.count()
stop = threading.Event()
SHARED_CLIENT = [None]  # a client to store the spec again with (the warm-up's, then the main one)


def now():
    return time.time() * 1000.0


def load_checked():
    out = []
    with open(os.path.join(HERE, "limiters.txt")) as f:
        for line in f:
            fields = line.split("#")[0].split()
            if not fields:
                continue
            name, algorithm, text = fields
            rates, bursts = [], []
            for rate in text.split(";"):
                parts = [int(x) for x in rate.split("/")]
                rates.append((parts[0], parts[1] / 1000.0))
                bursts.append(parts[2] if len(parts) > 2 else None)
            out.append((name, algorithm, rates, bursts if any(bursts) else None))
    return out


CHECKED = load_checked()


class Proc:
    """One process's log file, counters and lock. A forked child makes its
    own: a lock another thread held at fork time is never released there."""

    def __init__(self):
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.file = open(os.path.join(LOGDIR, "py-%d.log" % self.pid), "w")
        self.counts = collections.Counter()
        self.messages = set()
        self.unexpected = 0


_proc = None
_inherited = []


def proc():
    global _proc
    if _proc is None or _proc.pid != os.getpid():
        # keep the parent's: freeing it would flush the parent's buffered lines
        # into the parent's file a second time
        _inherited.append(_proc)
        _proc = Proc()
    return _proc


def count(key, n=1):
    p = proc()
    with p.lock:
        p.counts[key] += n


def write(line):
    p = proc()
    with p.lock:
        p.file.write(line)


def say(text):
    # os.write, not print: a forked child may not take stdout's lock
    os.write(2, ("worker.py[%d]: %s\n" % (os.getpid(), text)).encode())


def failure(e):
    count("redis_failure")
    write("E %.1f %s\n" % (now(), type(e).__name__))
    p = proc()
    with p.lock:
        if len(p.messages) < 20:
            p.messages.add("%s: %s" % (type(e).__name__, str(e)[:100]))


def unexpected(what):
    p = proc()
    with p.lock:
        p.unexpected += 1
        n = p.unexpected
    if n <= 20:
        say("UNEXPECTED: " + what)


def lost_config(e, client):
    """A restart without saving lost the stored spec: store it again (the
    report counts these; only such restarts explain them)."""
    if "no configuration is stored for limiter 'soak-stored'" not in str(e):
        return False
    count("config_restored")
    client.configure("soak-stored", "10/1000ms", algorithm="gcra", if_absent=True)
    return True


def invalid(e):
    try:
        if lost_config(e, SHARED_CLIENT[0]):
            return
    except EXPECTED as again:
        failure(again)
        return
    unexpected("".join(traceback.format_exception(e)))


def guard(fn, *args):
    try:
        return fn(*args)
    except ratelimit.NotAcquired:
        count("not_acquired")  # a reservation too far off, a busy semaphore or lock
    except EXPECTED as e:
        failure(e)
    except ratelimit.InvalidArgument as e:
        invalid(e)
    except Exception:
        unexpected(traceback.format_exc())


async def aguard(fn, *args):
    try:
        return await fn(*args)
    except ratelimit.NotAcquired:
        count("not_acquired")
    except EXPECTED as e:
        failure(e)
    except ratelimit.InvalidArgument as e:
        invalid(e)
    except Exception:
        unexpected(traceback.format_exc())


def decided(r, name=None, id_=None, t0=0.0, t1=0.0):
    """Counts a decision; logs it when it consumed permits of a checked
    limiter (name given). Fallbacks are the policy's, not Redis's: never
    admissions."""
    count("decisions")
    if r.fallback:
        count("fallback")
        write("E %.1f fallback\n" % (t1 or now()))
    elif r.allowed:
        count("admitted")
        if name is not None:
            write("A %s %s %.1f %.1f %d %d\n" % (name, id_, t0, t1, r.granted, round(r.reset_after * 1000)))
    else:
        count("denied")


# ---- limiters --------------------------------------------------------------------

def stored_limiter(client):
    try:
        return client.limiter("soak-stored")
    except ratelimit.InvalidArgument as e:
        if not lost_config(e, client):
            raise
        return client.limiter("soak-stored")


def checked_limiters(client):
    return [(name, client.limiter(name, rates, algorithm=algorithm, burst=bursts))
            for name, algorithm, rates, bursts in CHECKED]


def other_limiters(client):
    lims = []
    for alg in ratelimit.ALGORITHMS:
        burst = 15 if alg in ("token_bucket", "gcra") else None
        lims.append((alg, client.limiter("soak-x-py-" + alg, "10/1000ms", algorithm=alg, burst=burst)))
        lims.append((alg, client.limiter("soak-xm-py-" + alg, "5/500ms;20/2000ms", algorithm=alg)))
    for alg in BUCKETS:
        lims.append((alg, client.limiter("soak-xi-py-" + alg, "10/1000ms", algorithm=alg, initial_tokens=0)))
    for alg in ("fixed_window", "gcra"):
        lims.append((alg, client.limiter("soak-xp-py-" + alg, "10/1000ms", algorithm=alg, per_client=True)))
    lims.append(("gcra", stored_limiter(client)))
    return lims


# ---- sync operations ---------------------------------------------------------------

def checked_op(lims, rng):
    name, lim = rng.choice(lims)
    id_ = rng.choice(IDS)
    k = rng.random()
    t0 = now()
    if k < 0.4:
        r = lim.acquire(id_, rng.choice((1, 1, 1, 2)))
    elif k < 0.55:
        r = lim.acquire_at_most(id_, 3)
    elif k < 0.7:
        decided(lim.peek(id_))  # consumes nothing
        return
    elif k < 0.85:
        rs = lim.acquire_many([(i, 1) for i in IDS])
        t1 = now()
        for i, r in zip(IDS, rs):
            decided(r, name, i, t0, t1)
        return
    else:
        r = lim.acquire(id_, 1, timeout=0.2)
    decided(r, name, id_, t0, now())


def other_op(lims, rng):
    alg, lim = rng.choice(lims)
    id_ = "u%d" % rng.randrange(30)
    k = rng.random()
    if k < 0.3:
        decided(lim.acquire(id_, rng.randint(1, 3)))
    elif k < 0.4:
        decided(lim.peek(id_))
    elif k < 0.55 and alg in BUCKETS and not lim.stored:
        lim.reserve(id_, 1, max_wait=0.1)
        count("decisions")
    elif k < 0.7:
        decided(lim.acquire_at_most(id_, 5))
    elif k < 0.8:
        decided(lim.refund(id_, 2))
    elif k < 0.85:
        lim.reset(id_)
    elif k < 0.95:
        for r in lim.acquire_many([("u%d" % rng.randrange(30), 1) for _ in range(4)]):
            decided(r)
    else:
        decided(lim.acquire(id_, 1, timeout=0.1))


def hold(kind, name, acquire, rng):
    """Takes a permit or the lock, holds it briefly, releases it; logs the
    holding (released 0 when the release failed or found it expired)."""
    held = acquire()
    if held is None:
        count("not_acquired")  # try_acquire: busy
        return
    t_acq = now()
    ok = False
    try:
        time.sleep(rng.uniform(0.002, 0.02))
        t_rel = now()
        ok = held.release()
    finally:
        write("H %s %s %.1f %.1f %d %d\n" % (kind, name, t_acq, t_rel if ok else t_acq, held.fencing_token, ok))


def primitive_op(client, rng, wait=0.5):
    k = rng.random()
    if k < 0.5:
        sem = client.semaphore("soak-sem", permits=3, lease=2.0)
        hold("S", "soak-sem", lambda: sem.acquire(timeout=wait) if wait else sem.try_acquire(), rng)
    else:
        lock = client.lock("soak-lock", lease=2.0)
        hold("L", "soak-lock", lambda: lock.acquire(timeout=wait) if wait else lock.try_acquire(), rng)


def queue_op(client, rng):
    q = client.delay_queue("soak-q")
    for _ in range(rng.randint(1, 3)):
        msg = "py%d-%d" % (os.getpid(), next(SEQ))
        delay = rng.randrange(0, 300)
        t0 = now()
        if q.push(msg, delay=delay / 1000.0):
            write("P %s %.1f %d\n" % (msg, t0, delay))
    got = q.pop(max=10, timeout=0.2)
    t1 = now()
    for m in got:
        write("D %s %.1f\n" % (m, t1))


def churn_thread(shared, seed):
    """A short-lived thread: on the shared client or on one of its own
    (any on_redis_error policy), closed when it ends."""
    rng = random.Random(seed)
    until = time.monotonic() + rng.uniform(0.5, 2.0)
    own = None
    try:
        if rng.random() < 0.5:
            own = ratelimit.Client(URL, pool_size=2, on_redis_error=rng.choice(("raise", "raise", "allow", "deny")))
            count("clients_opened")
        client = own or shared
        checked, others = checked_limiters(client), other_limiters(client)
        while time.monotonic() < until and not stop.is_set():
            k = rng.random()
            if k < 0.5:
                guard(checked_op, checked, rng)
            elif k < 0.95:
                guard(other_op, others, rng)
            else:
                guard(primitive_op, client, rng, 0)
            time.sleep(rng.uniform(0, 0.006))
    except EXPECTED as e:
        failure(e)  # opening or making limiters during an outage
    except Exception:
        unexpected(traceback.format_exc())
    finally:
        if own is not None:
            own.close()


def primitives_thread(client, seed):
    rng = random.Random(seed)
    while not stop.is_set():
        guard(primitive_op, client, rng)
        guard(queue_op, client, rng)


# ---- asyncio ---------------------------------------------------------------------------

async def achecked_op(lims, rng):
    name, lim = rng.choice(lims)
    id_ = rng.choice(IDS)
    k = rng.random()
    t0 = now()
    if k < 0.45:
        r = await lim.acquire(id_, rng.choice((1, 1, 1, 2)))
    elif k < 0.6:
        r = await lim.acquire_at_most(id_, 3)
    elif k < 0.75:
        decided(await lim.peek(id_))
        return
    elif k < 0.9:
        rs = await lim.acquire_many([(i, 1) for i in IDS])
        t1 = now()
        for i, r in zip(IDS, rs):
            decided(r, name, i, t0, t1)
        return
    else:
        r = await lim.acquire(id_, 1, timeout=0.2)  # retried on the loop
    decided(r, name, id_, t0, now())


async def aother_op(lims, rng):
    alg, lim = rng.choice(lims)
    id_ = "u%d" % rng.randrange(30)
    k = rng.random()
    if k < 0.35:
        decided(await lim.acquire(id_, rng.randint(1, 3)))
    elif k < 0.45:
        decided(await lim.peek(id_))
    elif k < 0.6 and alg in BUCKETS and not lim.stored:
        await lim.reserve(id_, 1, max_wait=0.1)
        count("decisions")
    elif k < 0.75:
        decided(await lim.acquire_at_most(id_, 5))
    elif k < 0.85:
        decided(await lim.refund(id_, 2))
    elif k < 0.88:
        await lim.reset(id_)
    else:
        for r in await lim.acquire_many([("u%d" % rng.randrange(30), 1) for _ in range(4)]):
            decided(r)


async def acancel_op(lims, client, rng):
    """A decision, or a wait for the semaphore, lock or queue, whose task is
    cancelled while in flight: its completion must be dropped, not kept (a
    grant or messages that raced the cancel go back)."""
    k = rng.random()
    if k < 0.5:
        _, lim = rng.choice(lims)
        aw = lim.acquire("u%d" % rng.randrange(30))
    elif k < 0.7:
        aw = client.semaphore("soak-sem", permits=3, lease=2.0).acquire(timeout=0.5)
    elif k < 0.9:
        aw = client.lock("soak-lock", lease=2.0).acquire(timeout=0.5)
    else:
        aw = client.delay_queue("soak-q").pop(max=10, timeout=0.5)
    task = asyncio.ensure_future(aw)
    await asyncio.sleep(rng.choice((0, 0, 0.001, 0.005)))
    task.cancel()
    try:
        got = await task
    except asyncio.CancelledError:
        count("cancelled")
        return
    # done before the cancel: a permit goes back, messages count as delivered
    if isinstance(got, list):
        t1 = now()
        for m in got:
            write("D %s %.1f\n" % (m, t1))
    elif hasattr(got, "release"):
        await got.release()
    else:
        decided(got)


async def aprimitive_op(client, rng):
    k = rng.random()
    if k < 0.35:
        permit = await client.semaphore("soak-sem", permits=3, lease=2.0).acquire(timeout=0.5)
        kind, name = "S", "soak-sem"
    elif k < 0.7:
        permit = await client.lock("soak-lock", lease=2.0).acquire(timeout=0.5)
        kind, name = "L", "soak-lock"
    else:
        q = client.delay_queue("soak-q")
        msg = "py%d-%d" % (os.getpid(), next(SEQ))
        delay = rng.randrange(0, 300)
        t0 = now()
        if await q.push(msg, delay=delay / 1000.0):
            write("P %s %.1f %d\n" % (msg, t0, delay))
        got = await q.pop(max=10, timeout=0.2)
        t1 = now()
        for m in got:
            write("D %s %.1f\n" % (m, t1))
        return
    t_acq = now()
    ok = False
    try:
        await asyncio.sleep(rng.uniform(0.002, 0.02))
        t_rel = now()
        ok = await permit.release()
    finally:
        write("H %s %s %.1f %.1f %d %d\n" % (kind, name, t_acq, t_rel if ok else t_acq, permit.fencing_token, ok))


async def session(long_client, rng):
    """One event loop's life (asyncio.run): on the long-lived AsyncClient
    (which then serves loop after loop) or on a fresh one closed at the end."""
    client = long_client
    if client is None or rng.random() < 0.4:
        client = await aio.AsyncClient.connect(URL, pool_size=2,
                                               on_redis_error=rng.choice(("raise", "allow", "deny")))
        count("clients_opened")
    try:
        checked = [(name, client.limiter(name, rates, algorithm=alg, burst=bursts))
                   for name, alg, rates, bursts in CHECKED]
        others = [(alg, client.limiter("soak-xa-py-" + alg, "10/1000ms", algorithm=alg))
                  for alg in ratelimit.ALGORITHMS]
        others.append(("gcra", client.limiter("soak-xm-py-gcra", "5/500ms;20/2000ms")))
        until = time.monotonic() + rng.uniform(1.0, 3.0)

        async def decisions():
            while time.monotonic() < until and not stop.is_set():
                k = rng.random()
                if k < 0.5:
                    await aguard(achecked_op, checked, rng)
                elif k < 0.95:
                    await aguard(aother_op, others, rng)
                else:
                    await aguard(acancel_op, others, client, rng)
                await asyncio.sleep(rng.uniform(0, 0.008))

        async def primitives():
            while time.monotonic() < until and not stop.is_set():
                await aguard(aprimitive_op, client, rng)

        await asyncio.gather(*[decisions() for _ in range(4)], primitives())
    finally:
        if client is not long_client:
            await client.close()


class Shared:
    long_async = None  # the aio thread's long-lived AsyncClient; forked children use it too


def aio_thread(seed):
    rng = random.Random(seed)
    while not stop.is_set():
        try:
            if Shared.long_async is None:
                Shared.long_async = aio.AsyncClient(URL, pool_size=2)
                count("clients_opened")
        except EXPECTED as e:
            failure(e)
            time.sleep(0.2)
            continue
        try:
            asyncio.run(session(Shared.long_async, rng))
        except EXPECTED as e:
            failure(e)  # opening a fresh client or making limiters in an outage
        except Exception:
            unexpected(traceback.format_exc())
        count("event_loops")


# ---- fork -------------------------------------------------------------------------

def child(main, checked, seed):
    """A forked child: the parent's client, its limiters and its
    AsyncClient, used here without any set-up (the core reconnects)."""
    code = 0
    try:
        rng = random.Random(seed)
        for _ in range(30):
            guard(checked_op, checked, rng)
        guard(primitive_op, main, rng)
        long_async = Shared.long_async
        if long_async is not None and not long_async.closed:
            def limiters():
                return [(name, long_async.limiter(name, rates, algorithm=alg, burst=bursts))
                        for name, alg, rates, bursts in CHECKED]

            async def go():
                lims = guard(limiters)
                for _ in range(20 if lims else 0):
                    await aguard(achecked_op, lims, rng)
                await aguard(aprimitive_op, long_async, rng)
            asyncio.run(go())
        code = 1 if proc().unexpected else 0
    except BaseException:
        say("UNEXPECTED in a forked child: " + traceback.format_exc())
        code = 1
    finally:
        try:
            proc().file.close()
        finally:
            os._exit(code)


def fork_thread(main, checked, seed):
    rng = random.Random(seed)
    while not stop.wait(rng.uniform(1.5, 3.0)):
        pid = os.fork()
        if pid == 0:
            child(main, checked, seed + next(SEQ))
        count("forks")
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                if os.waitstatus_to_exitcode(status) != 0:
                    unexpected("forked child %d exited with %d" % (pid, os.waitstatus_to_exitcode(status)))
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                unexpected("forked child %d hung (killed after 30 s)" % pid)
                break
            time.sleep(0.02)


# ---- the run ------------------------------------------------------------------------

class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def malloc_in_use():
    """Bytes malloc has handed out and not had back, over every arena
    (glibc's mallinfo2): native memory, whatever RSS fragmentation says."""
    try:
        f = ctypes.CDLL(None).mallinfo2
    except AttributeError:
        return -1  # not glibc >= 2.33
    f.restype = _Mallinfo2
    m = f()
    return m.uordblks + m.hblkhd


def quiescent(tag):
    """fds, allocated blocks, malloc'd bytes and threads with nothing open:
    the same before and after the run unless something leaked."""
    deadline = time.monotonic() + 10
    while threading.active_count() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)  # executor threads told to stop (shutdown(wait=False)) end on their own
    gc.collect()
    fds = len(os.listdir("/proc/self/fd")) - 1  # listdir's own
    names = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    print("%s fds=%d blocks=%d malloc=%d threads=%d %s" % (
        tag, fds, sys.getallocatedblocks(), malloc_in_use(), threading.active_count(), ",".join(names)), flush=True)


def warm_up(rng):
    """One of everything (a thread, a client opened and closed, a fork, an
    event loop on a long-lived and a fresh AsyncClient), so lazily made
    things exist before Q0."""
    with ratelimit.Client(URL, pool_size=2) as client:
        SHARED_CLIENT[0] = client
        client.configure("soak-stored", "10/1000ms", algorithm="gcra", if_absent=True)
        checked, others = checked_limiters(client), other_limiters(client)
        for _ in range(50):
            guard(checked_op, checked, rng)
            guard(other_op, others, rng)
        guard(primitive_op, client, rng)
        guard(queue_op, client, rng)
        t = threading.Thread(target=churn_thread, args=(client, 1))
        t.start()
        t.join()
        pid = os.fork()
        if pid == 0:
            child(client, checked, 2)
        os.waitpid(pid, 0)
    Shared.long_async = aio.AsyncClient(URL, pool_size=2)
    for _ in range(2):
        asyncio.run(session(Shared.long_async, rng))
    asyncio.run(Shared.long_async.close())
    Shared.long_async = None


def main():
    rng = random.Random(os.getpid())
    warm_up(rng)
    proc().counts.clear()
    quiescent("Q0")
    end = time.monotonic() + SECONDS
    main_client = ratelimit.Client(URL, pool_size=4)
    SHARED_CLIENT[0] = main_client
    count("clients_opened")
    checked = checked_limiters(main_client)
    threads = [threading.Thread(target=aio_thread, args=(rng.random(),), name="soak-aio"),
               threading.Thread(target=primitives_thread, args=(main_client, rng.random()), name="soak-primitives"),
               threading.Thread(target=fork_thread, args=(main_client, checked, rng.randrange(1 << 30)),
                                name="soak-fork")]
    for t in threads:
        t.start()
    churn = []
    while time.monotonic() < end:
        churn = [t for t in churn if t.is_alive()]
        while len(churn) < 3:
            t = threading.Thread(target=churn_thread, args=(main_client, rng.random()), name="soak-churn")
            t.start()
            count("threads_started")
            churn.append(t)
        time.sleep(0.05)
    stop.set()
    for t in threads + churn:
        t.join(60)
        if t.is_alive():
            frames = sys._current_frames()
            unexpected("thread %s did not stop:\n%s" % (t.name, "".join(traceback.format_stack(frames[t.ident]))))
    if Shared.long_async is not None:
        asyncio.run(Shared.long_async.close())
        Shared.long_async = None
    main_client.close()
    p = proc()
    p.file.flush()
    quiescent("Q1")  # the log file is open at Q0 too
    p.file.close()
    counts = dict(p.counts)
    print("STATS " + " ".join("%s=%d" % kv for kv in sorted(counts.items())), flush=True)
    for m in sorted(p.messages):
        print("ERROR_SAMPLE " + m, flush=True)
    print("UNEXPECTED %d" % p.unexpected, flush=True)
    # os._exit: a thread stuck in a call must not keep the process alive
    os._exit(1 if p.unexpected else 0)


if __name__ == "__main__":
    main()
