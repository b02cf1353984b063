"""The admission invariant, independent of the model: from the requests and
the results alone, count the permits each rate admitted and hold them to
what docs/semantics.md promises for the algorithm.

  fixed_window    at most limit per window; a window opens at the first
                  permit taken after the previous one closed (it keeps its
                  start across a rate change and ends at start + period, or
                  when its key's TTL, set at the last write, runs out)
  sliding_log     at most limit live permits in any interval of period
                  (with the edge and the clock-going-back rules; a refund
                  takes back the oldest live permits; the log is gone once
                  its TTL, set by an admission, runs out: a refund sets
                  none)
  sliding_window  at most limit per aligned window (the estimate weighs
                  the previous one in on top)
  token_bucket    at most burst + d x limit / period in any d ms (counted at
                  the time a reserve booked)
  gcra            at most burst + d / emission interval in any d ms (same)
  leaky_bucket    at most capacity + d x capacity / period poured in any d ms

Leased permits (docs/semantics.md, Leases) are admitted by their client at
times it chooses: each is known only to lie in [lo, hi] (the grant, and
when the client stopped), and counts in every window or interval it may
lie in, so the bound holds for every placement at once.

Refunds give permits back: a refund inside an interval counts against what
was admitted in it (as much as it asked for; clamped to what the window
holds where the docs say so). Every tracker carries its count across a
rate change, as the docs say each algorithm keeps its state (the buckets:
with the refill each stretch between calls had, Bucket below), but for
sliding_window under a new period, whose aligned windows start over; a
reset starts everything over."""
from fractions import Fraction


class FixedWindow:
    def __init__(self):
        self.start = self.net = self.key_end = None
        self.leased = []  # (hi, permits, rate): may still be admitted until hi

    def admit(self, t, rate, n, latest):
        if self.start is None or t >= self.start + rate.period or latest > self.key_end:
            # a new window, with the leased permits that may lie in it (a lease is held to the rate it
            # was granted under: after a rate change, until it ends, its permits come on top)
            self.start, self.net = t, sum(k for hi, k, r in self.leased if hi >= t and r == rate)
        self.net += n
        self.key_end = self.start + rate.period  # the TTL of this write
        assert self.net <= rate.limit, f"{self.net} permits in the window opened at {self.start}, limit {rate.limit}"

    def admit_within(self, lo, hi, rate, n, latest):
        self.admit(lo, rate, n, latest)
        self.leased.append([hi, n, rate])

    def refund(self, t, rate, n, latest):
        if self.start is None:
            return
        if t >= self.start + rate.period or latest > self.key_end:
            self.start = None  # the window had closed: the refund deletes it
            return
        self.net = max(0, self.net - n)
        self.key_end = self.start + rate.period
        for lease in reversed(self.leased):  # it may give back leased permits too: the newest first
            back = min(n, lease[1])
            lease[1] -= back
            n -= back
        if self.net == 0:
            self.start = None


class SlidingLog:
    def __init__(self):
        # calls: [logged time, permits] or, for a lease, [logged time, permits, lo, hi]
        self.calls, self.edge, self.key_end = [], None, None

    def cut(self, t, rate):
        return t - rate.period if self.edge is None else max(t - rate.period, self.edge)

    def live(self, t, rate):
        """The calls the log still counts at t (refunds take back the oldest of them)."""
        return [c for c in self.calls if c[0] > self.cut(t, rate)]

    def admit(self, t, rate, n, latest, leased=None):
        if self.key_end is not None and latest > self.key_end:
            self.calls, self.edge = [], None
        at = max([t] + [c[0] for c in self.calls])  # a clock that went back logs at the newest time
        if leased:
            at = max(at, leased[2])  # the block is logged at the end of its validity
        self.edge = t - rate.period if self.edge is None else max(self.edge, t - rate.period)
        call = [at, n] + (leased[:2] if leased else [])
        self.calls.append(call)
        self.key_end = at + rate.period
        # the permits that lie (a lease's: may lie) in (t - period, t]
        cut = self.cut(t, rate)
        live = sum(c[1] for c in self.calls if (c[2] <= t and c[3] > cut if len(c) > 2 else c[0] > cut))
        assert live <= rate.limit, f"{live} permits live at {t} within {rate.period} ms, limit {rate.limit}"
        return call

    def admit_within(self, lo, hi, rate, n, latest, logged):
        return self.admit(lo, rate, n, latest, leased=[lo, hi, logged])

    def give_back(self, t, rate, call):
        """The lease's block, on top, is logged again with what was used at
        the latest time it may have been (not before the call below it)."""
        kept = [c for c in self.calls if c is not call]  # a refund may have taken it out already
        used = call[1] if len(kept) < len(self.calls) else 0
        self.calls = kept
        if used:
            call[0] = max([min(t, call[0])] + [c[0] for c in self.calls[-1:]])
            self.calls.append(call)
            self.key_end = call[0] + rate.period

    def refund(self, t, rate, n, latest):
        if self.key_end is not None and latest > self.key_end:
            self.calls, self.edge = [], None
        # the oldest live permits go back, as in the script (which sets no TTL: the key_end stands)
        for c in self.live(t, rate):
            back = min(n, c[1])
            c[1] -= back
            n -= back
        self.calls = [c for c in self.calls if c[1] > 0]


class SlidingWindow:
    def __init__(self):
        self.net = {}  # aligned window -> permits

    def admit(self, t, rate, n, latest):
        w = t // rate.period
        self.net[w] = self.net.get(w, 0) + n
        assert self.net[w] <= rate.limit, f"{self.net[w]} permits in window {w * rate.period}, limit {rate.limit}"

    def admit_within(self, lo, hi, rate, n, latest):
        for w in range(lo // rate.period, hi // rate.period + 1):
            self.admit(w * rate.period, rate, n, latest)

    def refund(self, t, rate, n, latest):
        w = t // rate.period
        self.net[w] = max(0, self.net.get(w, 0) - n)  # the current window first


class Bucket:
    """Permits admitted (+) and given back (-), each at a time known to lie
    in [lo, hi]; every interval that may hold the newest admission is held
    to its bound, counting the admissions that certainly lie inside it, the
    leased ones that may (the client picks their time), and the refunds
    that may.

    The bound carries across rate changes (docs/semantics.md, Rate
    changes: the tokens are kept, and refill at the new rate): the most any
    interval [a, b] may admit is the largest capacity in force plus the
    refill its calls could have credited, where the stretch between two
    writes refills at the faster of their two rates (the later call
    refills it at its own rate; a key written under the faster one may
    expire on that one's schedule, which is a refill at its rate).

    A token_bucket or leaky_bucket lease is held to the rate it was granted
    under (docs/semantics.md, Leases and the other ops): once a call under
    another rate (limit or period) has read its booking as taken at the
    grant, what its client admits comes on top of the new rate's bound, and
    it counts no more."""

    def __init__(self, algorithm):
        # (lo, hi, permits, leased: the grant's (limit, period) or False)
        self.algorithm, self.events = algorithm, []
        self.writes = []  # (time, rate) of every call that wrote the state, in time order
        self.capacity = 0  # the largest capacity of any rate in force so far

    def per_ms(self, rate):
        """The refill of one ms, in permits."""
        if self.algorithm == "gcra":
            return Fraction(1000, -(-rate.period * 1000 // rate.limit))
        return Fraction(rate.limit, rate.period)

    def wrote(self, t, rate):
        if self.algorithm in ("token_bucket", "leaky_bucket"):
            self.events = [e for e in self.events if not e[3] or e[3] == (rate.limit, rate.period) or t < e[0]]
        self.writes.append((t, rate))
        self.capacity = max(self.capacity, rate.capacity(self.algorithm) if self.algorithm != "leaky_bucket"
                            else rate.limit)

    def refill(self, a, b):
        """What [a, b] may refill: each stretch between writes at the faster
        of the rates either side of it; past the last write, at the fastest."""
        fastest = max(self.per_ms(r) for _, r in self.writes)
        total, x = Fraction(0), a
        for (t0, r0), (t1, r1) in zip(self.writes, self.writes[1:]):
            lo, hi = max(x, t0), min(b, t1)
            if hi > lo:
                total += (hi - lo) * max(self.per_ms(r0), self.per_ms(r1))
                x = hi
        if b > x:
            total += (b - x) * fastest
        return total

    def bound(self, a, b):
        """The most permits [a, b] may admit."""
        refill = self.refill(a, b)
        if self.algorithm == "gcra":
            return self.capacity + refill.__floor__()
        return self.capacity + refill

    @staticmethod
    def inside(event, a, b):
        s, e, k, leased = event
        if k > 0 and not leased:
            return a <= s and e <= b
        # a leased admission wherever it may be; a refund whenever it may (it can give back a slot booked ahead)
        return s <= b and e >= a

    def check(self, new):
        # the latest start and the earliest end that still count each event
        starts = sorted({e[1] if e[3] else e[0] for e in self.events})
        ends = sorted({e[0] if e[3] else e[1] for e in self.events})
        for a in starts:
            for b in ends:
                if a > b or not self.inside(new, a, b):
                    continue
                total = sum(e[2] for e in self.events if self.inside(e, a, b))
                assert total <= self.bound(a, b), f"{total} permits in [{a}, {b}], at most {self.bound(a, b)}"

    def admit(self, t, rate, n, wait=0, rates=1):
        self.wrote(t, rate)
        lo = hi = t
        if wait and self.algorithm != "leaky_bucket":
            # a reserve counts when its slot comes: wait_ms is rounded up to
            # a whole ms, and with several rates it is the longest one
            lo, hi = (t + wait - 1, t + wait) if rates == 1 else (t, t + wait)
        self.events.append((lo, hi, n, False))
        self.check(self.events[-1])

    def admit_within(self, lo, hi, rate, n, latest):
        self.wrote(lo, rate)
        self.events.append((lo, hi, n, (rate.limit, rate.period)))
        self.check(self.events[-1])

    def refund(self, t, rate, n, latest):
        self.wrote(t, rate)
        self.events.append((t, max([t] + [e[1] for e in self.events]), -n, False))


class Admissions:
    """Feed every step and its result; raises AssertionError on a breach."""

    def __init__(self, algorithm):
        self.algorithm = algorithm
        self.trackers = {}  # (id, rate index) -> (rate, tracker)
        self.latest = 0  # keys expire on the latest time seen (Redis's clock never goes back)

    def tracker(self, id, index, rate):
        key = (id, index)
        # sliding_window's windows are aligned to its period: a new period starts its count over
        kept = self.algorithm != "sliding_window" or key not in self.trackers \
            or self.trackers[key][0].period == rate.period
        if key not in self.trackers or not kept:
            new = {"fixed_window": FixedWindow, "sliding_log": SlidingLog,
                   "sliding_window": SlidingWindow}.get(self.algorithm)
            self.trackers[key] = (rate, new() if new else Bucket(self.algorithm))
        self.trackers[key] = (rate, self.trackers[key][1])
        return self.trackers[key][1]

    def record_lease(self, spec, id, lo, hi, used, logged):
        """A lease's `used` permits, each admitted by its client at some time
        in [lo, hi] (logged: when sliding_log logs the block); returns what
        record_give_back needs."""
        self.latest = max(self.latest, lo)
        calls = []
        for index, rate in enumerate(spec.rates):
            tr = self.tracker(id, index, rate)
            where = f"{self.algorithm} rate {index} ({rate.limit}/{rate.period} ms) id {id}, lease [{lo}, {hi}]"
            try:
                if isinstance(tr, SlidingLog):
                    calls.append((tr, tr.admit_within(lo, hi, rate, used, self.latest, logged[index])))
                else:
                    tr.admit_within(lo, hi, rate, used, self.latest)
                    calls.append((tr, None))
            except AssertionError as e:
                raise AssertionError(f"admission invariant: {where}: {e}") from None
        return calls

    def record_give_back(self, spec, t, calls, applied):
        for (tr, call), rate, done in zip(calls, spec.rates, applied):
            if not done or tr not in (t_ for _, t_ in self.trackers.values()):
                continue
            if isinstance(tr, SlidingLog):
                tr.give_back(t, rate, call)
            elif isinstance(tr, Bucket):
                tr.wrote(t, rate)  # it refilled the bucket to t at its rate

    def record(self, spec, step, result):
        op, id, t = step["op"], step["id"], step["now_ms"]
        self.latest = max(self.latest, t)
        if op == "reset":
            for index in range(len(spec.rates)):
                self.trackers.pop((id, index), None)
            return
        if not isinstance(result, dict) or not result["allowed"] or op == "peek":
            return
        for index, rate in enumerate(spec.rates):
            tr = self.tracker(id, index, rate)
            where = f"{self.algorithm} rate {index} ({rate.limit}/{rate.period} ms) id {id} at {t}"
            try:
                if op == "refund":
                    tr.refund(t, rate, result["granted"], self.latest)
                elif isinstance(tr, Bucket):
                    tr.admit(t, rate, result["granted"], result["wait_ms"], len(spec.rates))
                else:
                    tr.admit(t, rate, result["granted"], self.latest)
            except AssertionError as e:
                raise AssertionError(f"admission invariant: {where}: {e}") from None
