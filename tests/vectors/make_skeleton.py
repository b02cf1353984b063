"""Writes the step sequences of the conformance vectors (without expected
results) to stdout. The expectations are then recorded once by the C runner
(RL_VECTORS_RECORD=1), reviewed, and committed; from then on every runner
(C, Python, Java) must reproduce them exactly. Steps that carry an "expect"
here (the anchors' published numbers) are checked, never recorded."""
import json
import sys

T0 = 1700000000000
ALGORITHMS = ["fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra"]


def step(op, t=None, permits=1, id="u", **extra):
    s = {"op": op, "id": id}
    if t is not None:
        s["now_ms"] = T0 + t
    if op in ("acquire", "peek", "reserve"):
        s["permits"] = permits
    s.update(extra)
    return s


def keys():
    return {"op": "keys"}


def standard(algorithm, limit=5, period=1000, burst=0):
    spec = {"name": "vec", "algorithm": algorithm, "limit": limit, "period_ms": period, "burst": burst}
    steps = [
        step("peek", 0),
        step("acquire", 0),
        keys(),
        step("acquire", 10, 2),
        step("acquire", 20, 2),  # exact exhaustion
        step("acquire", 30),
        step("peek", 40),
        step("peek", 40, 3),
        step("acquire", period - 1),  # end of the first window
        step("acquire", period),  # start of the next
        step("acquire", period + 1, 2),
        step("acquire", period + period // 2, 3),
        step("acquire", period + period // 2, (burst or limit) + 1, expect_error="invalid"),
        step("acquire", period + period // 2, 0, expect_error="invalid"),
        keys(),
        step("reset"),
        keys(),
        step("acquire", period + period // 2, limit),
        step("acquire", 3 * period + 7),
        step("acquire", 10 * period, limit),
        step("acquire", 10 * period + 1),
        step("acquire", 10 * period + 1, id="other"),
        keys(),
    ]
    if algorithm in ("token_bucket", "leaky_bucket", "gcra"):
        steps += [
            step("reserve", 20 * period, 1, id="r", max_wait_ms=period),
            step("reserve", 20 * period, limit, id="r", max_wait_ms=period),
            step("reserve", 20 * period, 1, id="r", max_wait_ms=period),
            step("reserve", 20 * period, 1, id="r", max_wait_ms=2 * period),
            step("acquire", 20 * period, 1, id="r"),
            step("reserve", 21 * period, 2, id="r", max_wait_ms=0),
            keys(),
        ]
    else:
        steps.append(step("reserve", 20 * period, 1, id="r", max_wait_ms=period, expect_error="invalid"))
    return {"name": f"{algorithm} {limit}/{period}ms" + (f" burst {burst}" if burst else ""), "spec": spec,
            "steps": steps}


def cases():
    out = [standard(a) for a in ALGORITHMS]
    out.append(standard("token_bucket", 3, 1000, 3))  # refill 1/3 per second: exact
    out.append(standard("gcra", 3, 1000, 5))  # burst above the rate
    out.append(standard("leaky_bucket", 4, 2000))
    out.append(standard("sliding_window", 10, 60000))
    out.append({
        "name": "gcra: go-redis redis_rate PerSecond(10)",
        "source": "github.com/go-redis/redis_rate v10, rate_test.go TestAllow: Allow, AllowN 2, AllowN 7 at one instant",
        "spec": {"name": "redis_rate", "algorithm": "gcra", "limit": 10, "period_ms": 1000, "burst": 10},
        "steps": [
            step("acquire", 0, 1, id="test_id", expect={"allowed": True, "limit": 10, "remaining": 9,
                                                       "retry_after_ms": -1, "reset_after_ms": 100, "wait_ms": 0}),
            step("acquire", 0, 2, id="test_id", expect={"allowed": True, "limit": 10, "remaining": 7,
                                                       "retry_after_ms": -1, "reset_after_ms": 300, "wait_ms": 0}),
            step("acquire", 0, 7, id="test_id", expect={"allowed": True, "limit": 10, "remaining": 0,
                                                       "retry_after_ms": -1, "reset_after_ms": 1000, "wait_ms": 0}),
            step("acquire", 0, 1, id="test_id", expect={"allowed": False, "limit": 10, "remaining": 0,
                                                       "retry_after_ms": 100, "reset_after_ms": 1000, "wait_ms": 0}),
            step("acquire", 0, 1000, id="test_id", expect_error="invalid"),
        ],
    })
    out.append({
        "name": "gcra: redis-cell README example",
        "source": "github.com/brandur/redis-cell README: CL.THROTTLE user123 15 30 60 -> 0, 16, 15, -1, 2 "
                  "(max_burst 15 = our burst 16; 30 per 60 s)",
        "spec": {"name": "cell", "algorithm": "gcra", "limit": 30, "period_ms": 60000, "burst": 16},
        "steps": [
            step("acquire", 0, 1, id="user123", expect={"allowed": True, "limit": 16, "remaining": 15,
                                                        "retry_after_ms": -1, "reset_after_ms": 2000, "wait_ms": 0}),
            keys(),
        ],
    })
    return out


def p(op, **kw):
    return dict(op=op, **kw)


def primitive_cases():
    sem = dict(name="db")
    return [
        {"name": "semaphore: grant, deny, inspect, raise permits_max, release, refresh", "steps": [
            p("semaphore_acquire", **sem, permits_max=2, lease_ms=10000, save_as="p1"),
            p("semaphore_acquire", **sem, permits_max=2, lease_ms=10000, save_as="p2"),
            p("semaphore_acquire", **sem, permits_max=2, lease_ms=10000),
            p("semaphore_holders", **sem),
            p("semaphore_available", **sem, permits_max=2),
            p("semaphore_available", **sem, permits_max=3),
            p("semaphore_acquire", **sem, permits_max=3, lease_ms=10000, save_as="p3"),
            p("semaphore_release", **sem, permit="p1"),
            p("semaphore_release", **sem, permit="p1"),
            p("semaphore_release", **sem, permit="not-a-permit"),
            p("semaphore_refresh", **sem, permit="p2", lease_ms=20000),
            p("semaphore_refresh", **sem, permit="nope", lease_ms=20000),
            p("semaphore_holders", **sem),
            {"op": "keys"},
            p("semaphore_acquire", **sem, permits_max=0, lease_ms=1000, expect_error="invalid"),
            p("semaphore_acquire", **sem, permits_max=2, lease_ms=-1, expect_error="invalid"),
            p("semaphore_acquire", name="", permits_max=2, lease_ms=1000, expect_error="invalid"),
            p("semaphore_release", **sem, permits_max=2, permit="", expect_error="invalid"),
            p("semaphore_release", **sem, permit="p2"),
            p("semaphore_release", **sem, permit="p3"),
            {"op": "keys"},
        ]},
        {"name": "semaphore: a lease that runs out frees the permit", "steps": [
            p("semaphore_acquire", name="short", permits_max=1, lease_ms=50, save_as="s1"),
            p("semaphore_acquire", name="short", permits_max=1, lease_ms=50),
            p("sleep", ms=120),
            p("semaphore_acquire", name="short", permits_max=1, lease_ms=10000, save_as="s2"),
            p("semaphore_release", name="short", permit="s1"),
            p("semaphore_refresh", name="short", permit="s1", lease_ms=1000),
            p("semaphore_release", name="short", permit="s2"),
        ]},
        {"name": "lock: owner-only release and extend, expiry", "steps": [
            p("lock_acquire", name="job", lease_ms=10000, save_as="l1"),
            p("lock_acquire", name="job", lease_ms=10000, save_as="l2"),
            p("lock_release", name="job", permit="someone-else"),
            p("lock_extend", name="job", permit="someone-else", lease_ms=20000),
            p("lock_extend", name="job", permit="l1", lease_ms=20000),
            {"op": "keys"},
            p("lock_release", name="job", permit="l1"),
            p("lock_release", name="job", permit="l1"),
            p("lock_acquire", name="job", lease_ms=50, save_as="l3"),
            p("sleep", ms=120),
            p("lock_extend", name="job", permit="l3", lease_ms=1000),
            p("lock_acquire", name="job", lease_ms=1000, save_as="l4"),
            p("lock_acquire", name="job", lease_ms=0, expect_error="invalid"),
            p("lock_acquire", name="", lease_ms=1000, expect_error="invalid"),
        ]},
        {"name": "delay queue: dedupe, due order, remove", "steps": [
            p("queue_push", queue="jobs", message="m1", delay_ms=0),
            p("queue_push", queue="jobs", message="m1", delay_ms=0),
            p("queue_push", queue="jobs", message="m2", delay_ms=60000),
            p("queue_push", queue="jobs", message="m3", delay_ms=0),
            p("queue_size", queue="jobs"),
            {"op": "keys"},
            p("queue_pop_ready", queue="jobs", max=10),
            p("queue_pop_ready", queue="jobs", max=10),
            p("queue_remove", queue="jobs", message="m2"),
            p("queue_remove", queue="jobs", message="m2"),
            p("queue_size", queue="jobs"),
            {"op": "keys"},
            p("queue_push", queue="jobs", message="", delay_ms=0, expect_error="invalid"),
            p("queue_push", queue="jobs", message="m4", delay_ms=-1, expect_error="invalid"),
            p("queue_pop_ready", queue="jobs", max=0, expect_error="invalid"),
            p("queue_push", queue="", message="m5", delay_ms=0, expect_error="invalid"),
            {"op": "keys"},
        ]},
    ]


doc = {
    "about": "Conformance vectors: every runner (C: tests/vectors/run_vectors.c, Python: "
             "bindings/python/tests/test_vectors.py, Java: VectorsTest) flushes the database before each case, "
             "runs the steps with the client prefix below, and must get exactly these results and keys. "
             "now_ms is the explicit clock passed to the scripts. A 'keys' step lists every key in the database "
             "with its type and PTTL bounds. Regenerate on purpose: python3 make_skeleton.py > skeleton.json, "
             "then RL_VECTORS_RECORD=1 run_vectors skeleton.json > limiters.json (and --primitives for primitives.json). Primitive cases use Redis time (no spec): permit ids are random, so save_as names a permit for later steps.",
    "prefix": "rl",
    "cases": primitive_cases() if sys.argv[1:] == ["--primitives"] else cases(),
}
json.dump(doc, sys.stdout, indent=1)
