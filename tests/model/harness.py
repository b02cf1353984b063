"""Runs limiter requests through a binding on a real Redis and through the
model side by side, and compares every result field and what happened to
every key.

Keys expire on the explicit clock, not on the wall clock: after each step
the harness reads the TTL each script set (PEXPIRETIME, between two TIME
readings that bracket the call), checks it against the model, then moves
the key's expiry to PARKED, far in the future; before a step it deletes the
keys whose TTL ran out by that step's `now_ms`. So results never depend on
how fast the machine runs the test, a key the step left alone still expires
at PARKED, and a key a script left without any TTL shows. One race is left:
a key written with a TTL of a few ms can expire for real before it is
parked; then the step is run again from its state before (DUMP / RESTORE),
which a stalled machine may need a few times.

A step (also the format of sequences.json):
  {"op": acquire|peek|reserve|acquire_up_to|refund|reset, "id", "now_ms",
   "permits", "max_wait_ms", "spec": index into the sequence's specs,
   "expire": [keys deleted before it], "expect": {the eight fields} or
   "expect_error": "invalid", "keys": {key: TTL ms | "kept" | "absent"}}
Leases (test_model_leases.py, through the script directly): op lease (permits =
want, max_wait_ms = validity; expect() adds "lease", the model's records)
and give_back (permits = unused, "lease" = those records)."""
import collections
import time
from typing import Any, Callable, Dict, List, Optional

import redis

import lease_model
import limiter_model as m

PREFIX, NAME = "rl", "model"
MAX_RATES = 3
RACE_RETRIES = 30
PARKED = 32503680000000  # ms since the epoch (the year 3000): the expiry of a key between steps
RACES = collections.Counter()  # how often the race above happened, by attempt
FIELDS = ("allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms", "wait_ms", "granted", "rate_index")


def id_keys(algorithm: str, id: str) -> List[str]:
    return [m.key_of(PREFIX, NAME, id, algorithm, i) for i in range(MAX_RATES)]


def expect(model: m.Model, spec: m.Spec, step: Dict[str, Any]) -> Dict[str, Any]:
    """The model's answer to one step, in the sequence file's format. Raises
    AssertionError when a key's TTL would end before its state is fresh."""
    now = step["now_ms"]
    early = model.early_expiries(now)
    assert not early, f"TTL ran out before the state was fresh (docs: no key expires before its state does): {early}"
    out: Dict[str, Any] = {"expire": model.expire(now)}
    if step["op"] == "reset":
        written = model.reset(spec, step["id"], now)
    elif step["op"] == "lease":
        out["expect"], written, out["lease"] = lease_model.lease(model, spec, step["id"], step["permits"],
                                                                 step["max_wait_ms"], now)
    elif step["op"] == "give_back":
        out["expect"], written, out["applied"] = lease_model.give_back(model, spec, step["id"], step["lease"],
                                                                       step["permits"], now)
    else:
        try:
            out["expect"], written = model.step(spec, step["id"], step["op"], step["permits"], now,
                                                step.get("max_wait_ms", 0))
        except m.Invalid:
            out["expect_error"], written = "invalid", {}
    keys = {}
    for k in id_keys(spec.algorithm, step["id"]):
        if k in written:
            keys[k] = "absent" if written[k] is None else written[k]
        else:
            keys[k] = "kept" if k in model.keys else "absent"
    out["keys"] = keys
    return out


class Book:
    """The bookkeeping on the real Redis around each call."""

    def __init__(self, port: int):
        self.r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)

    def flush(self):
        self.r.flushall()

    def before(self, expired: List[str], keys: List[str]):
        """Deletes what expired; returns the keys' state (DUMP) and a time
        at or before the call (ms)."""
        p = self.r.pipeline(transaction=False)
        if expired:
            p.delete(*expired)
        for k in keys:
            p.dump(k)
        p.time()
        out = p.execute()
        sec, us = out[-1]
        return dict(zip(keys, out[-1 - len(keys):-1])), sec * 1000 + us // 1000

    def after(self, keys: List[str]):
        """A time at or after the call, each key's absolute expiry (-1 none,
        -2 no key), then every key is parked (the harness expires it); and a
        time after that."""
        p = self.r.pipeline(transaction=False)
        p.time()
        for k in keys:
            p.execute_command("PEXPIRETIME", k)
        for k in keys:
            p.pexpireat(k, PARKED)
        p.time()
        out = p.execute()
        expiry = dict(zip(keys, out[1:1 + len(keys)]))
        for k, parked in zip(keys, out[1 + len(keys):-1]):
            if expiry[k] >= 0 and not parked:
                expiry[k] = -2  # it expired between the two: as good as gone
        (sec, us), (sec2, us2) = out[0], out[-1]
        return sec * 1000 + us // 1000, expiry, sec2 * 1000 + us2 // 1000

    def restore(self, dumps: Dict[str, Optional[bytes]]):
        p = self.r.pipeline(transaction=False)
        for k, d in dumps.items():
            p.delete(k)
            if d is not None:
                p.restore(k, PARKED, d, absttl=True)
        p.execute()


Call = Callable[[m.Spec, Dict[str, Any]], Any]  # the result dict, "invalid", or None (reset)


def run_step(book: Book, call: Call, spec: m.Spec, step: Dict[str, Any], want: Dict[str, Any], where: str):
    """Runs one step through a binding and checks it against `want`
    (expect()'s output). Returns the actual result."""
    keys = list(want["keys"])
    dumps, t0 = book.before(want.get("expire", []), keys)
    for attempt in range(RACE_RETRIES):
        actual = call(spec, step)
        t1, expiry, t2 = book.after(keys)
        # a key written with a TTL shorter than the call and its reading took may have expired for real
        raced = [k for k, w in want["keys"].items() if isinstance(w, int) and expiry[k] == -2 and w <= t2 - t0 + 1]
        if not raced:
            break
        RACES[attempt] += 1
        book.restore(dumps)
        time.sleep(min(0.05, 0.002 * attempt))  # let a stall pass
        _, t0 = book.before([], [])
    else:
        raise AssertionError(f"{where}: keys kept expiring before they could be read ({raced}): machine too slow?")
    if "expect_error" in want:
        assert actual == "invalid", f"{where}: expected an invalid-argument error, got {actual}"
    elif step["op"] != "reset":
        assert actual == want["expect"], f"{where}: {step}\n  got      {actual}\n  expected {want['expect']}"
    for k, w in want["keys"].items():
        got = expiry[k]
        if w == "absent":
            assert got == -2, f"{where}: key {k} should not exist (PEXPIRETIME {got})"
        elif w == "kept":
            assert got == PARKED, f"{where}: key {k} should be untouched (PEXPIRETIME {got}; -1: it has no TTL)"
        else:
            assert got >= 0, f"{where}: key {k} should be written with TTL {w} ms (PEXPIRETIME {got})"
            assert got - t1 <= w <= got - t0, f"{where}: key {k}: TTL {w} ms expected, set {got - t1}..{got - t0}"
    return actual


# ---- the bindings ------------------------------------------------------------------------


class PythonLimiters:
    """Requests through the Python binding (`import ratelimit`)."""

    def __init__(self, url: str):
        import ratelimit
        self.ratelimit = ratelimit
        self.client = ratelimit.Client(url, prefix=PREFIX, timeout=10.0)
        self.limiters: Dict[m.Spec, Any] = {}

    def close(self):
        self.client.close()

    def limiter(self, spec: m.Spec):
        if spec not in self.limiters:
            self.limiters[spec] = self.client.limiter(
                NAME, [(r.limit, r.period / 1000) for r in spec.rates], algorithm=spec.algorithm,
                burst=[r.burst or None for r in spec.rates], initial_tokens=spec.initial_tokens)
        return self.limiters[spec]

    def __call__(self, spec: m.Spec, step: Dict[str, Any]):
        lim, op, id, n, now = self.limiter(spec), step["op"], step["id"], step.get("permits"), step["now_ms"] / 1000
        try:
            if op == "reset":
                lim.reset(id)
                return None
            if op == "acquire":
                r = lim.acquire(id, n, now=now)
            elif op == "peek":
                r = lim.peek(id, n, now=now)
            elif op == "acquire_up_to":
                r = lim.acquire_at_most(id, n, now=now)
            elif op == "refund":
                r = lim.refund(id, n, now=now)
            else:
                r = lim._reserve(id, n, max_wait=step["max_wait_ms"] / 1000, now=now)
        except self.ratelimit.InvalidArgument:
            return "invalid"
        return {"allowed": r.allowed, "limit": r.limit, "remaining": r.remaining,
                "retry_after_ms": -1 if r.retry_after is None else round(r.retry_after * 1000),
                "reset_after_ms": round(r.reset_after * 1000), "wait_ms": round(r.wait * 1000),
                "granted": r.granted, "rate_index": r.rate_index}


def spec_words(spec: m.Spec) -> List[str]:
    """A spec as ModelWorker.java reads it: algorithm, initial tokens (-
    for full), the number of rates, then limit period burst of each."""
    words = [spec.algorithm, "-" if spec.initial_tokens is None else str(spec.initial_tokens), str(len(spec.rates))]
    for r in spec.rates:
        words += [str(r.limit), str(r.period), str(r.burst)]
    return words


class JavaLimiters:
    """Requests through the Java binding: tests/model/ModelWorker.java, one
    process, one request per line on its stdin, one answer per line."""

    def __init__(self, url: str, jar: str):
        import pathlib
        import subprocess
        worker = pathlib.Path(__file__).with_name("ModelWorker.java")
        self.proc = subprocess.Popen(["java", "-cp", jar, str(worker), url, PREFIX, NAME], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
                self.proc.wait()

    def __call__(self, spec: m.Spec, step: Dict[str, Any]):
        words = [step["op"], *spec_words(spec), step["id"], str(step.get("permits", 1)),
                 str(step.get("max_wait_ms", 0)), str(step["now_ms"])]
        self.proc.stdin.write(" ".join(words) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline().split()
        assert line, f"the Java worker stopped (exit {self.proc.poll()})"
        if line[0] == "invalid":
            return "invalid"
        if line[0] == "reset":
            return None
        assert line[0] == "ok", f"Java worker: {' '.join(line)}"
        v = [int(x) for x in line[1:]]
        return dict(zip(FIELDS, [bool(v[0])] + v[1:]))

