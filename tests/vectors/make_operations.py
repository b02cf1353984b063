"""Writes the step sequences of operations.json (rate changes, acquire up to
n, refunds, initial tokens, several rates, per-client quotas, stored specs)
without expected results; the C runner records them (RL_VECTORS_RECORD=1),
they are reviewed, and committed. Steps that carry an "expect" here are the
documented anchors: checked, never recorded.

    python3 make_operations.py > ops-skeleton.json
    RL_VECTORS_RECORD=1 build/tests/vectors/run_vectors ops-skeleton.json > operations.json"""
import json

T0 = 1700000000000
ALGORITHMS = ["fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra"]
BUCKETS = ["token_bucket", "leaky_bucket", "gcra"]


def spec(algorithm, limit, period, burst=0, name="ops", **extra):
    s = {"name": name, "algorithm": algorithm, "limit": limit, "period_ms": period, "burst": burst}
    s.update(extra)
    return s


def step(op, t, permits=1, id="u", **extra):
    s = {"op": op, "id": id, "now_ms": T0 + t}
    if op != "reset":
        s["permits"] = permits
    s.update(extra)
    return s


def keys():
    return {"op": "keys"}


def full(allowed, limit, remaining, retry, reset, wait=0, granted=0, rate_index=0):
    return {"allowed": allowed, "limit": limit, "remaining": remaining, "retry_after_ms": retry,
            "reset_after_ms": reset, "wait_ms": wait, "granted": granted, "rate_index": rate_index}


cases = []
for a in ALGORITHMS:
    base = spec(a, 10, 2000)
    lowered = spec(a, 5, 5000)
    raised = spec(a, 20, 2000)
    cases.append({"name": a + ": rate lowered, then raised, mid-window", "spec": base, "steps": [
        step("acquire", 0, 8),
        # docs/semantics.md: remaining is never negative, whatever the rate did
        step("peek", 100, spec=lowered),
        step("acquire", 100, spec=lowered),
        step("peek", 200, spec=raised),
        step("acquire", 200, 5, spec=raised),
        step("acquire", 300, 8, spec=raised),
        keys(),
    ]})
    cases.append({"name": a + ": acquire up to n, refund", "spec": spec(a, 5, 1000), "steps": [
        step("acquire", 0, 3),
        step("acquire_up_to", 10, 5),
        step("acquire_up_to", 20, 5),
        step("refund", 30, 2),
        step("peek", 30),
        step("acquire", 40, 2),
        step("acquire", 50),
        step("refund", 60, 5),
        step("peek", 60, 5),
        step("acquire_up_to", 70, 100),
        keys(),
    ]})
    cases.append({"name": a + ": two rates, all or nothing", "spec": spec(a, 3, 1000, more=[{"limit": 5, "period_ms": 10000, "burst": 0}]), "steps": [
        step("acquire", 0),
        step("acquire", 10),
        step("acquire", 20),
        step("acquire", 30),  # the first rate denies; the second must not consume
        step("peek", 30),
        step("acquire", 1000),
        step("acquire", 1010),
        step("acquire", 2500),  # the second rate (5 per 10 s) denies
        step("acquire_up_to", 2600, 4),
        step("refund", 2700, 1),
        step("peek", 2700),
        keys(),
        step("reset", 2800),
        keys(),
    ]})

# the token_bucket anchor: 10/2 s with 4 used, then called as 10/5 s:
# the 6 tokens are kept and refill at 2/s (2 s to full)
tb = spec("token_bucket", 10, 2000)
cases.append({"name": "token_bucket: a period change keeps the tokens", "spec": tb, "steps": [
    step("acquire", 0, 4),
    step("peek", 0, spec=spec("token_bucket", 10, 5000), expect=full(True, 10, 6, -1, 2000, granted=1)),
    step("acquire", 1000, 7, spec=spec("token_bucket", 10, 5000), expect=full(True, 10, 1, -1, 4500, granted=7)),
]})
# the lowered-rate anchor: 10/2 s with 8 used, then 5/5 s
cases.append({"name": "fixed_window: lowered below what is used, remaining stays 0", "spec": spec("fixed_window", 10, 2000), "steps": [
    step("acquire", 0, 8),
    step("peek", 100, spec=spec("fixed_window", 5, 5000), expect=full(False, 5, 0, 4900, 4900)),
]})
# sliding_log counts a difference of totals: a refund under 3/10 ms takes a member above an older one
# that had slid out, which lives again under 3/1 s, and the taken-back permit counts again (stricter):
# 3 counted, 2 held: 2 more fit once the call at 0 slides out, taking the gap with it (not at 990, when
# the totals reach what must go); a refund of 3 stops at the 2 (it ran past the last member: a script error)
cases.append({"name": "sliding_log: a permit taken back counts again while an older one lives again",
              "spec": spec("sliding_log", 3, 1000), "steps": [
    step("acquire", 0), step("acquire", 50), step("acquire", 50),
    step("refund", 50, spec=spec("sliding_log", 3, 10), expect=full(True, 3, 2, -1, 10, granted=1)),
    step("peek", 60, expect=full(False, 3, 0, 940, 990)),
    step("peek", 60, 2, expect=full(False, 3, 0, 940, 990)),
    step("refund", 60, 3, expect=full(True, 3, 3, -1, 0, granted=3)),
    # the calls stay (a refund writes only its marker) until their TTL, and count nothing
    keys(),
    step("acquire", 60, 3, expect=full(True, 3, 0, -1, 1000, granted=3)),
]})
# go-redis redis_rate's AllowAtMost test: 10/s, burst 10
cases.append({"name": "gcra: acquire up to n, as redis_rate AllowAtMost", "spec": spec("gcra", 10, 1000, 10), "steps": [
    step("acquire_up_to", 0, 1, expect=full(True, 10, 9, -1, 100, granted=1)),
    step("acquire_up_to", 0, 2, expect=full(True, 10, 7, -1, 300, granted=2)),
    step("acquire_up_to", 0, 10, expect=full(True, 10, 0, -1, 1000, granted=7)),
    step("acquire_up_to", 0, 10, expect=full(False, 10, 0, 100, 1000)),
]})
for a in BUCKETS:
    cases.append({"name": a + ": initial tokens", "spec": spec(a, 10, 1000, initial_tokens=2), "steps": [
        step("peek", 0),
        step("acquire", 0, 3),
        step("acquire", 0, 2),
        step("acquire", 0),
        keys(),
        step("peek", 0, id="empty", spec=spec(a, 10, 1000, initial_tokens=-1)),
        step("acquire", 100, id="empty", spec=spec(a, 10, 1000, initial_tokens=-1)),
        # denied, yet it fills from that first call on
        step("acquire", 250, id="empty", spec=spec(a, 10, 1000, initial_tokens=-1)),
        keys(),
    ]})
cases.append({"name": "per-client quotas: keys carry the client id", "spec": spec("gcra", 2, 1000, scope="per_client"), "steps": [
    step("acquire", 0),
    step("acquire", 0),
    step("acquire", 0),
    step("peek", 0, spec=spec("gcra", 2, 1000)),
    keys(),
]})
stored = spec("sliding_window", 4, 1000)
del stored["name"]
changed = spec("sliding_window", 2, 1000, more=[{"limit": 3, "period_ms": 60000, "burst": 0}])
del changed["name"]
cases.append({"name": "stored specs: set, use, change, delete", "spec": spec("sliding_window", 4, 1000, name="cfg"), "steps": [
    {"op": "config_get", "name": "cfg"},
    step("acquire", 0, stored=True, expect_error="invalid"),
    {"op": "config_set", "name": "cfg", "spec": stored},
    {"op": "config_get", "name": "cfg"},
    {"op": "config_set", "name": "cfg", "spec": changed, "if_absent": True},
    step("acquire", 0, 3, stored=True),
    step("peek", 0, stored=True),
    {"op": "config_set", "name": "cfg", "spec": changed},
    {"op": "config_get", "name": "cfg"},
    step("peek", 0, stored=True),
    step("acquire", 10, stored=True),
    keys(),
    step("reset", 20, stored=True),
    {"op": "config_delete", "name": "cfg"},
    {"op": "config_delete", "name": "cfg"},
    step("acquire", 30, stored=True, expect_error="invalid"),
    {"op": "config_set", "name": "cfg", "spec": spec("gcra", 0, 1000), "expect_error": "invalid"},
    keys(),
]})

doc = {
    "about": "Conformance vectors for operations (rate changes, acquire up to n, refunds, initial tokens, several rates, per-client quotas, stored specs); the same rules as limiters.json, plus: client_id is the client's identity, fields 'all' adds granted and rate_index to results, a step's own spec replaces the case's (a rate change), stored: true uses the stored spec, and keys holding stored specs (':config:') have no TTL. Regenerate: python3 make_operations.py > ops-skeleton.json, then RL_VECTORS_RECORD=1 run_vectors ops-skeleton.json > operations.json.",
    "prefix": "rl",
    "client_id": "vectors-client",
    "fields": "all",
    "cases": cases,
}
print(json.dumps(doc, indent=1))
