"""A reference model of every rate-limiting algorithm, in plain Python (no
Redis), written from docs/semantics.md.

State is kept as the documentation describes it (token_bucket levels are
tokens x period, gcra is a TAT in microseconds...), so the arithmetic is
the same exact integer arithmetic. The answers that are durations are
derived from their definitions instead of restating the scripts' formulas:
retry_after is the first millisecond at which the same request would pass,
reset_after the first at which the limiter is back to fresh, a reserve's
wait the first at which the permits are there; each found by a search over
the model's own future (all of them are monotonic in time). So a closed
form in the Lua that is off by one shows up here.

Time: `now` is an explicit clock in ms, as the conformance vectors use it.
Redis keys expire on the explicit clock too: the test harness deletes a key
once `now` is past the expiry the model predicts (and checks that the
script set that TTL), so nothing depends on how fast the test runs."""
import dataclasses
import math
from fractions import Fraction
from typing import Any, Dict, List, Optional, Tuple

ACQUIRE, PEEK, RESERVE, UP_TO, REFUND = "acquire", "peek", "reserve", "acquire_up_to", "refund"
ALGORITHMS = ["fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra"]
BUCKETS = ["token_bucket", "leaky_bucket", "gcra"]  # reserve and initial tokens
HORIZON_MS = 10 ** 13  # further than any duration a search may have to find


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def first_ms(passes, horizon=HORIZON_MS) -> int:
    """The least d in [0, horizon] with passes(d), for a monotonic passes."""
    if passes(0):
        return 0
    if not passes(horizon):
        raise AssertionError("model: nothing passes within the horizon")
    lo, hi = 0, horizon  # passes(lo) False, passes(hi) True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclasses.dataclass(frozen=True)
class Rate:
    limit: int
    period: int  # ms
    burst: int   # 0: the limit (token_bucket, gcra)

    def capacity(self, algorithm: str) -> int:
        if algorithm in ("token_bucket", "gcra") and self.burst:
            return self.burst
        return self.limit


# ---- one rate: the algorithms ---------------------------------------------------------------
# Each algorithm works on a "view": its state brought to the time of a call,
# under the rate of that call. new() is an entity Redis holds nothing for;
# load() reads stored state (converting it when the rate changed); save()
# gives what is stored (None: the key is deleted); ttl() the key's TTL in ms.


class FixedWindow:
    """At most limit permits per window; a window opens at the first permit
    taken after the previous one closed."""

    name = "fixed_window"

    @staticmethod
    def new(rate, now, initial):
        return {"now": now, "rate": rate, "start": now, "count": 0}, False

    @staticmethod
    def load(stored, rate, now):
        start, count = stored
        if now >= start + rate.period:  # that window closed
            start, count = now, 0
        return {"now": now, "rate": rate, "start": start, "count": count}

    @staticmethod
    def remaining(v):
        return max(0, v["rate"].limit - v["count"])

    @staticmethod
    def admits(v, n):
        return v["count"] + n <= v["rate"].limit

    @staticmethod
    def take(v, n):
        return dict(v, count=v["count"] + n)

    @staticmethod
    def give(v, n):
        return dict(v, count=max(0, v["count"] - n))

    @staticmethod
    def fresh(v):
        return v["count"] == 0

    @staticmethod
    def save(v):
        return (v["start"], v["count"]) if v["count"] > 0 else None

    @staticmethod
    def ttl(v):  # the end of the window
        return v["start"] + v["rate"].period - v["now"]


class SlidingLog:
    """At most limit permits in any interval of period; a permit taken at t
    counts during [t, t + period). Stored: the calls [(t, permits, total)]
    oldest first (total: the permits taken through the call), the edge (the
    largest now - period of the admitted calls: a permit at or before it
    never counts again), and what refunds took back: the permits with totals
    in (from, to], or None. The live count is a difference of totals,
    starting at `to` while the oldest live call's first permit is in that
    range; once an older call is live again, the permits taken back count
    again (docs: stricter)."""

    name = "sliding_log"

    @staticmethod
    def new(rate, now, initial):
        return SlidingLog.load(((), None, None), rate, now), False

    @staticmethod
    def load(stored, rate, now):
        calls, edge, back = stored
        cut = now - rate.period if edge is None else max(now - rate.period, edge)
        live = [c for c in calls if c[0] > cut]
        return {"now": now, "rate": rate, "calls": list(calls), "edge": edge, "back": back, "live": live}

    @staticmethod
    def _counted(v):
        """(the live count, whether it starts at the taken-back range's end)"""
        live, back = v["live"], v["back"]
        if not live:
            return 0, False
        base = live[0][2] - live[0][1]
        if back and back[0] <= base < back[1]:
            return live[-1][2] - back[1], True
        return live[-1][2] - base, False

    @staticmethod
    def count(v):
        return SlidingLog._counted(v)[0]

    @staticmethod
    def remaining(v):
        return max(0, v["rate"].limit - SlidingLog.count(v))

    @staticmethod
    def admits(v, n):
        return SlidingLog.count(v) + n <= v["rate"].limit

    @staticmethod
    def stale(v):
        """Whether the taken-back range is behind the oldest live call (or there is none): an
        admission drops it."""
        live, back = v["live"], v["back"]
        return back is not None and (not live or live[0][2] - live[0][1] >= back[1])

    @staticmethod
    def take(v, n):
        now, calls = v["now"], v["calls"]
        # a clock that went back logs the call at the newest call's time
        at = max(now, calls[-1][0]) if calls else now
        call = (at, n, calls[-1][2] + n if calls else n)
        edge = now - v["rate"].period if v["edge"] is None else max(v["edge"], now - v["rate"].period)
        calls = [c for c in calls if c[0] > edge] + [call]
        back = None if SlidingLog.stale(v) else v["back"]
        return {"now": now, "rate": v["rate"], "calls": calls, "edge": edge, "back": back,
                "live": v["live"] + [call]}

    @staticmethod
    def give(v, n):
        """Takes back the oldest live permits (taking the newest would move
        others' admissions earlier): the taken-back range grows by them, or
        starts at the oldest live call's first permit. No call changes, and
        no TTL is set ("rearmed": None)."""
        count, active = SlidingLog._counted(v)
        left = min(n, count)
        if left == 0:
            return dict(v, rearmed=None)
        newest = v["live"][-1][2]
        start = v["back"][0] if active else newest - count
        return dict(v, back=(start, newest - count + left), rearmed=None)

    @staticmethod
    def fresh(v):
        return SlidingLog.count(v) == 0

    @staticmethod
    def save(v):
        return (tuple(v["calls"]), v["edge"], v["back"]) if v["calls"] else None

    @staticmethod
    def ttl(v):  # the newest call + period
        return v["calls"][-1][0] + v["rate"].period - v["now"]


class SlidingWindow:
    """Windows aligned to multiples of period; the estimate is
    prev x (period - elapsed) / period + cur. A rate change counts the old
    estimate, rounded up, as taken in the new current window."""

    name = "sliding_window"

    @staticmethod
    def new(rate, now, initial):
        return SlidingWindow.load(None, rate, now), False

    @staticmethod
    def _advance(start, cur, prev, period, now):
        window = now - now % period
        if start is None or window > start + period:
            return window, 0, 0
        if window == start + period:
            return window, 0, cur
        return max(window, start), cur, prev  # a clock that went back stays in the stored window

    @staticmethod
    def load(stored, rate, now):
        start, cur, prev, period = stored if stored else (None, 0, 0, None)
        if start is not None and period != rate.period:
            start, cur, prev = SlidingWindow._advance(start, cur, prev, period, now)
            elapsed = max(0, now - start)
            estimate = Fraction(prev * (period - elapsed), period) + cur
            start, cur, prev = now - now % rate.period, -(-estimate.numerator // estimate.denominator), 0
        start, cur, prev = SlidingWindow._advance(start, cur, prev, rate.period, now)
        return {"now": now, "rate": rate, "start": start, "cur": cur, "prev": prev}

    @staticmethod
    def estimate(v):
        period = v["rate"].period
        elapsed = max(0, v["now"] - v["start"])
        return Fraction(v["prev"] * (period - elapsed), period) + v["cur"]

    @staticmethod
    def remaining(v):
        return max(0, (v["rate"].limit - SlidingWindow.estimate(v)).__floor__())

    @staticmethod
    def admits(v, n):
        return SlidingWindow.estimate(v) + n <= v["rate"].limit

    @staticmethod
    def take(v, n):
        return dict(v, cur=v["cur"] + n)

    @staticmethod
    def give(v, n):
        from_cur = min(v["cur"], n)  # the current window first, then the previous one
        return dict(v, cur=v["cur"] - from_cur, prev=max(0, v["prev"] - (n - from_cur)))

    @staticmethod
    def fresh(v):
        return SlidingWindow.estimate(v) == 0

    @staticmethod
    def save(v):
        if v["cur"] == 0 and v["prev"] == 0:
            return None
        return (v["start"], v["cur"], v["prev"], v["rate"].period)

    @staticmethod
    def ttl(v):  # the end of the next window
        return 2 * v["rate"].period - max(0, v["now"] - v["start"])


def booked_elsewhere(stored, rate):
    """Whether a bucket's state holds a lease's booking (a fourth element:
    (limit, grant ms, amount after the block at the grant)) made under
    another rate than this one (limit or period)."""
    return len(stored) > 3 and (stored[3][0], stored[2]) != (rate.limit, rate.period)


class TokenBucket:
    """Up to burst tokens, refilled with limit tokens per period. Stored:
    level = tokens x period, the time of the level, and that period."""

    name = "token_bucket"

    @staticmethod
    def new(rate, now, initial):
        burst = rate.capacity("token_bucket")
        if initial is not None and initial < burst:
            return {"now": now, "rate": rate, "level": initial * rate.period, "ts": now}, True
        return {"now": now, "rate": rate, "level": burst * rate.period, "ts": now}, False

    @staticmethod
    def load(stored, rate, now):
        level, ts, period = stored[:3]
        if booked_elsewhere(stored, rate):  # the block as taken at its grant, nothing of its validity refilled
            level, ts = stored[3][2], stored[3][1]
        full = rate.capacity("token_bucket") * rate.period
        if period != rate.period:  # the tokens are kept, rounded down, at most the new burst
            level = min(full, (level * rate.period) // period)
        if now > ts:
            level, ts = min(full, level + (now - ts) * rate.limit), now
        elif ts > now:  # booked ahead by a lease: the level that refills to it by ts
            level, ts = level - (ts - now) * rate.limit, now
        return {"now": now, "rate": rate, "level": min(level, full), "ts": ts}

    @staticmethod
    def full(v):
        return v["rate"].capacity("token_bucket") * v["rate"].period

    @staticmethod
    def remaining(v):
        return max(0, v["level"] // v["rate"].period)

    @staticmethod
    def admits(v, n):
        return v["level"] >= n * v["rate"].period

    @staticmethod
    def take(v, n):  # a reserve may take it below zero (a debt)
        return dict(v, level=v["level"] - n * v["rate"].period)

    @staticmethod
    def give(v, n):
        return dict(v, level=min(TokenBucket.full(v), v["level"] + n * v["rate"].period))

    @staticmethod
    def fresh(v):
        return v["level"] >= TokenBucket.full(v)

    @staticmethod
    def save(v):
        return None if TokenBucket.fresh(v) else (v["level"], v["ts"], v["rate"].period) + v.get("grant", ())

    @staticmethod
    def ttl(v):  # until full
        return ceil_div(TokenBucket.full(v) - v["level"], v["rate"].limit)


class LeakyBucket:
    """A bucket of capacity (= limit) permits that empties from full in
    period. Stored: water = permits x period, its time, that period."""

    name = "leaky_bucket"

    @staticmethod
    def new(rate, now, initial):
        if initial is not None and initial < rate.limit:
            return {"now": now, "rate": rate, "water": (rate.limit - initial) * rate.period, "ts": now}, True
        return {"now": now, "rate": rate, "water": 0, "ts": now}, False

    @staticmethod
    def load(stored, rate, now):
        water, ts, period = stored[:3]
        if booked_elsewhere(stored, rate):  # the block as poured at its grant, nothing of its validity drained
            water, ts = stored[3][2], stored[3][1]
        if period != rate.period:  # the permits in the bucket are kept, rounded up
            water = ceil_div(water * rate.period, period)
        if now > ts:
            water, ts = max(0, water - (now - ts) * rate.limit), now
        elif ts > now:  # booked ahead by a lease: the water that drains to it by ts
            water, ts = water + (ts - now) * rate.limit, now
        return {"now": now, "rate": rate, "water": water, "ts": ts}

    @staticmethod
    def remaining(v):
        return max(0, (v["rate"].limit * v["rate"].period - v["water"]) // v["rate"].period)

    @staticmethod
    def admits(v, n):
        return v["water"] + n * v["rate"].period <= v["rate"].limit * v["rate"].period

    @staticmethod
    def take(v, n):
        return dict(v, water=v["water"] + n * v["rate"].period)

    @staticmethod
    def give(v, n):
        return dict(v, water=max(0, v["water"] - n * v["rate"].period))

    @staticmethod
    def fresh(v):
        return v["water"] <= 0

    @staticmethod
    def save(v):
        return None if LeakyBucket.fresh(v) else (v["water"], v["ts"], v["rate"].period) + v.get("grant", ())

    @staticmethod
    def ttl(v):  # until empty
        return ceil_div(v["water"], v["rate"].limit)


class Gcra:
    """The theoretical arrival time (TAT, us) with the emission interval
    period/limit rounded up to a whole us; tolerance = burst x interval."""

    name = "gcra"

    @staticmethod
    def interval(rate):
        return ceil_div(rate.period * 1000, rate.limit)

    @staticmethod
    def new(rate, now, initial):
        burst, interval = rate.capacity("gcra"), Gcra.interval(rate)
        if initial is not None and initial < burst:
            return {"now": now, "rate": rate, "tat": now * 1000 + (burst - initial) * interval}, True
        return {"now": now, "rate": rate, "tat": now * 1000}, False

    @staticmethod
    def load(stored, rate, now):
        tat, stored_interval = stored
        now_us, interval = now * 1000, Gcra.interval(rate)
        if stored_interval != interval and tat > now_us:
            # the permits in use: the time booked ahead of now, in the new interval, rounded up
            # (exactly while the product fits a double exactly; beyond, as the script's doubles do)
            booked = tat - now_us
            if booked * interval < 2 ** 53:
                tat = now_us + ceil_div(booked * interval, stored_interval)
            else:
                tat = now_us + math.ceil(booked / stored_interval * interval)
        return {"now": now, "rate": rate, "tat": max(tat, now_us)}

    @staticmethod
    def tolerance(v):
        return v["rate"].capacity("gcra") * Gcra.interval(v["rate"])

    @staticmethod
    def remaining(v):
        return max(0, (v["now"] * 1000 - (v["tat"] - Gcra.tolerance(v))) // Gcra.interval(v["rate"]))

    @staticmethod
    def admits(v, n):
        return v["tat"] + n * Gcra.interval(v["rate"]) - Gcra.tolerance(v) <= v["now"] * 1000

    @staticmethod
    def take(v, n):
        return dict(v, tat=v["tat"] + n * Gcra.interval(v["rate"]))

    @staticmethod
    def give(v, n):  # the TAT moves back, never before now
        return dict(v, tat=max(v["now"] * 1000, v["tat"] - n * Gcra.interval(v["rate"])))

    @staticmethod
    def fresh(v):
        return v["tat"] <= v["now"] * 1000

    @staticmethod
    def save(v):
        return None if Gcra.fresh(v) else (v["tat"], Gcra.interval(v["rate"]))

    @staticmethod
    def ttl(v):
        return max(1, ceil_div(v["tat"] - v["now"] * 1000, 1000))


ALGORITHM = {"fixed_window": FixedWindow, "sliding_log": SlidingLog, "sliding_window": SlidingWindow,
             "token_bucket": TokenBucket, "leaky_bucket": LeakyBucket, "gcra": Gcra}


# ---- a limiter: several rates, the ops, the keys ------------------------------------------


@dataclasses.dataclass(frozen=True)
class Spec:
    algorithm: str
    rates: Tuple[Rate, ...]
    initial_tokens: Optional[int] = None  # None: a new entity starts full (Python's convention)

    def to_json(self) -> Dict[str, Any]:
        return {"algorithm": self.algorithm, "initial_tokens": self.initial_tokens,
                "rates": [[r.limit, r.period, r.burst] for r in self.rates]}

    @staticmethod
    def from_json(j) -> "Spec":
        return Spec(j["algorithm"], tuple(Rate(*r) for r in j["rates"]), j["initial_tokens"])

    def capacity(self) -> int:
        return min(r.capacity(self.algorithm) for r in self.rates)


def key_of(prefix: str, name: str, id: str, algorithm: str, index: int) -> str:
    """docs/semantics.md, Keys (for names and ids that need no escaping)."""
    return f"{prefix}:{{{name}:{id}}}:{algorithm}" + (f":{index + 1}" if index else "")


class Invalid(Exception):
    """The request is refused before anything is sent (RL_ERR_INVALID)."""


@dataclasses.dataclass
class Stored:
    state: Any
    expires: int    # explicit ms: the key is gone once now is past it
    index: int      # the rate it belongs to
    algorithm: str
    rate: Rate      # the rate it was written under
    booking: Any = None  # the lease whose id the state holds (a window's latest; a bucket's while on top)


class Model:
    """Every entity of one limiter name: per key, what is stored and when it
    expires. step() answers one request as the library must, and says what
    it did to each key: {key: ttl ms if written with a TTL, None if deleted}."""

    def __init__(self, prefix="rl", name="model"):
        self.prefix, self.name = prefix, name
        self.keys: Dict[str, Stored] = {}
        self.calls: List[Tuple[int, Spec]] = []  # (now, spec) of every call so far

    def expire(self, now: int) -> List[str]:
        """Drops the keys whose TTL ran out by now (Redis keeps a key while
        its time <= the expiry); returns them."""
        gone = sorted(k for k, s in self.keys.items() if now > s.expires)
        for k in gone:
            del self.keys[k]
        return gone

    def early_expiries(self, now: int) -> List[str]:
        """The keys gone by now whose state was not back to fresh when their
        TTL ran out (docs: the TTL is the time until the state would be
        fresh anyway). The TTL is set by each write, under the rate of that
        write, so this holds while that rate is still the one in force (the
        spec of the latest call by then); after a rate change the key
        expires on the old rate's schedule (reported in docs/reliability.md,
        "Model-checked semantics")."""
        early = []
        for k, s in self.keys.items():
            if now <= s.expires:
                continue
            spec = next((sp for t, sp in reversed(self.calls) if t <= s.expires), None)
            if spec is None or spec.algorithm != s.algorithm or spec.rates[s.index:s.index + 1] != (s.rate,):
                continue
            alg = ALGORITHM[s.algorithm]
            if not alg.fresh(alg.load(s.state, s.rate, s.expires + 1)):
                early.append(k)
        return sorted(early)

    def key(self, spec: Spec, id: str, index: int) -> str:
        return key_of(self.prefix, self.name, id, spec.algorithm, index)

    def reset(self, spec: Spec, id: str, now: int) -> Dict[str, Optional[int]]:
        self.calls.append((now, spec))
        written = {}
        for i in range(len(spec.rates)):
            k = self.key(spec, id, i)
            if self.keys.pop(k, None) is not None:
                written[k] = None
        return written

    def step(self, spec: Spec, id: str, op: str, permits: int, now: int, max_wait: int = 0):
        """(result dict of the eight fields, {key: ttl or None}) or raises Invalid."""
        alg = ALGORITHM[spec.algorithm]
        if op == RESERVE and spec.algorithm not in BUCKETS:
            raise Invalid("reserve needs token_bucket, leaky_bucket or gcra")
        if op != UP_TO and permits > spec.capacity():
            raise Invalid("requested permits exceed what the limiter can hold")
        if spec.initial_tokens is not None and spec.algorithm not in BUCKETS:
            raise Invalid("initial tokens apply to the buckets only")
        self.calls.append((now, spec))

        written: Dict[str, Optional[int]] = {}
        views = []
        for i, rate in enumerate(spec.rates):
            k = self.key(spec, id, i)
            if k in self.keys:
                views.append(alg.load(self.keys[k].state, rate, now))
                continue
            view, short = alg.new(rate, now, spec.initial_tokens)
            if short and op != PEEK:
                # an entity that starts short counts from its first call on, admitted or not
                self._write(k, i, alg, view, written)
            views.append(view)

        def decide(n, o):
            """Per rate: (admits, wait ms) of n permits under op o."""
            out = []
            for v in views:
                if o != RESERVE:
                    out.append((alg.admits(v, n), 0))
                elif spec.algorithm == "leaky_bucket":
                    # if the permits fit, they queue behind the water already in the bucket
                    out.append((alg.admits(v, n), first_ms(lambda d, v=v: alg.fresh(later(alg, v, d)))))
                else:
                    # the permits are taken now (a debt) and are there this much later
                    out.append((True, first_ms(lambda d, v=v: alg.admits(later(alg, v, d), n))))
            return out

        if op == REFUND:
            after = [alg.give(v, permits) for v in views]
            for i, v in enumerate(after):
                self._write(self.key(spec, id, i), i, alg, v, written, refund=True)
            return self._combine(spec, alg, [(True, after[i], 0, -1) for i in range(len(views))], permits), written

        if op == UP_TO:
            # as many as every rate has, at least one; denied as an acquire of one
            if all(alg.admits(v, 1) for v in views):
                permits, op = min(permits, min(alg.remaining(v) for v in views)), ACQUIRE
            else:
                permits, op = 1, ACQUIRE

        decisions = decide(permits, op)
        replies = []
        for (ok, wait), v in zip(decisions, views):
            if op == RESERVE:
                ok = ok and wait <= max_wait
            if ok:
                replies.append((True, v, wait, -1))
                continue

            # the same request, later: reserve within max_wait, else admitted now
            def passes(d, v=v):
                w = later(alg, v, d)
                if op != RESERVE:
                    return alg.admits(w, permits)
                if spec.algorithm == "leaky_bucket":
                    return alg.admits(w, permits) and first_ms(lambda e: alg.fresh(later(alg, w, e))) <= max_wait
                return first_ms(lambda e: alg.admits(later(alg, w, e), permits)) <= max_wait

            replies.append((False, v, 0, first_ms(passes)))
        allowed = all(r[0] for r in replies)
        if not allowed or op == PEEK:
            # nothing is consumed: every rate reports its state as it stays
            return self._combine(spec, alg, replies, permits if allowed else 0, denied=not allowed), written
        after = [(True, alg.take(v, permits), wait, -1) for (_, v, wait, _) in replies]
        for i, r in enumerate(after):
            self._write(self.key(spec, id, i), i, alg, r[1], written)
        return self._combine(spec, alg, after, permits), written

    def _write(self, k, index, alg, view, written, refund=False):
        state = alg.save(view)
        if state is None:
            if k in self.keys:
                del self.keys[k]
            written[k] = None
            return
        if refund and alg is SlidingLog and k in self.keys and view.get("rearmed") is None:
            # a refund that takes whole calls back sets no new TTL
            self.keys[k] = dataclasses.replace(self.keys[k], state=state)
            written.pop(k, None)
            return
        ttl = alg.ttl(view)
        booking = None  # a bucket's goes with any write; a window's stays while its window (period) does
        old = self.keys.get(k)
        if old is not None and old.booking is not None:
            if (alg is FixedWindow and state[0] == old.state[0]) or \
                    (alg is SlidingWindow and state[3] == old.state[3]):
                booking = old.booking
        if refund and alg is SlidingLog:  # a call taken back in part: the newest + period
            ttl = max(1, view["rearmed"] + view["rate"].period - view["now"])
        self.keys[k] = Stored(state, view["now"] + ttl, index, alg.name, view["rate"], booking)
        written[k] = ttl

    @staticmethod
    def _combine(spec, alg, replies, granted, denied=False):
        """replies: per rate (admits, view as it stays, wait, retry). The
        binding rate: when allowed the least remaining, when denied the
        denial with the longest retry_after (the first on a tie)."""
        remaining = [alg.remaining(v) for _, v, _, _ in replies]
        resets = [first_ms(lambda d, v=v: alg.fresh(later(alg, v, d))) for _, v, _, _ in replies]
        if denied:
            retry = max(r[3] for r in replies if not r[0])
            pick = next(i for i, r in enumerate(replies) if not r[0] and r[3] == retry)
        else:
            retry, pick = -1, remaining.index(min(remaining))
        return {"allowed": not denied, "limit": spec.rates[pick].capacity(spec.algorithm),
                "remaining": min(remaining), "retry_after_ms": retry, "reset_after_ms": max(resets),
                "wait_ms": 0 if denied else max(r[2] for r in replies), "granted": granted,
                "rate_index": pick}


def later(alg, view, d):
    """The view d ms later, nothing else happening (as it would be stored)."""
    t = view["now"] + d
    state = alg.save(view)
    if state is None:
        return alg.new(view["rate"], t, None)[0]
    return alg.load(state, view["rate"], t)
