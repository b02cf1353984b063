"""Leases never over-admit, live (issue 25): Python and Java processes, some
leasing (different lease lengths) and some not, hammer ONE key of each
algorithm for 3 s (three periods or more) at three times its rate. Every admission is
stamped with CLOCK_MONOTONIC read before and after the call (Python
time.monotonic_ns, Java System.nanoTime: the same clock, checked below) and
the admissions are held to the algorithm's own bound (docs/semantics.md),
counting in each interval only those certainly inside it:

  gcra, token_bucket  burst + rate x t in any interval t
  leaky_bucket        capacity + rate x t in any interval t
  sliding_log         limit in any interval of period
  fixed_window        limit in each window the key had (its start polled)
  sliding_window      limit in each aligned window

Also: leasing processes decided locally (Result.local, and Redis ran no more
scripts than the decisions not made locally plus one give-back per lease),
the others never did, and the key admitted >= 90% of what the limit allows
(printed per algorithm with -s). Needs RL_JAR (tests/run.sh sets it)."""
import bisect
import os
import pathlib
import queue
import subprocess
import sys
import threading
import time

import pytest
import redis as redis_py


HERE = pathlib.Path(__file__).parent
MS = 1_000_000  # ns
RUN = 3000 * MS
MARGIN = 20 * MS  # a run ends this long before its last period does
SATURATION = 3  # offered calls: this many times the rate
#             limit, period ms, burst (0: the limit)
RATES = {"gcra": (2000, 1000, 200),
         "token_bucket": (2000, 1000, 200),
         "leaky_bucket": (200, 100, 0),
         "sliding_log": (500, 1000, 0),
         "fixed_window": (500, 1000, 0),
         "sliding_window": (500, 1000, 0)}
# language, lease ms (0: none), threads
PROCESSES = [("python", 50, 2), ("python", 200, 1), ("python", 0, 1), ("java", 20, 2), ("java", 0, 1)]
MIN_UTILIZATION = 0.9
STARVED_UTILIZATION = 0.75  # when the machine starves the workers (see the test)


class Worker:
    """One lease_worker.py / LeaseWorker.java process, driven line by line."""

    def __init__(self, command, lang, lease_ms, threads):
        self.lang, self.lease_ms, self.threads = lang, lease_ms, threads
        self.proc = subprocess.Popen(command + [str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def line(self, timeout=60):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"{self} said nothing for {timeout} s") from None
        if line is None:
            raise AssertionError(f"{self} exited: {self.proc.wait()}: {self.proc.stderr.read()}")
        return line.split()

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __str__(self):
        return f"{self.lang} worker (lease {self.lease_ms} ms, {self.threads} threads)"


@pytest.fixture(scope="module")
def url(redis_port):
    return f"redis://127.0.0.1:{redis_port}"


@pytest.fixture(scope="module")
def workers(url):
    jar = os.environ.get("RL_JAR")
    assert jar and pathlib.Path(jar).is_file(), "set RL_JAR to the built ratelimit jar"
    commands = {"python": [sys.executable, str(HERE / "lease_worker.py"), url],
                "java": ["java", "-cp", jar, str(HERE / "LeaseWorker.java"), url]}
    started = [Worker(commands[lang], lang, lease, threads) for lang, lease, threads in PROCESSES]
    try:
        for w in started:
            assert w.line(timeout=120) == ["ready"], w
        yield started
    finally:
        for w in started:
            w.close()


class Clock:
    """Redis time (the scripts' TIME: CLOCK_REALTIME) against CLOCK_MONOTONIC:
    the offset lies in [lo, hi] ns. Both clocks run at the same rate (NTP
    slews both), so only a step of the wall clock moves it: checked."""

    def __init__(self, r):
        self.r = r
        self.lo, self.hi = self.bracket()

    def bracket(self):
        best = None
        for _ in range(30):
            before = time.monotonic_ns()
            seconds, micros = self.r.time()
            after = time.monotonic_ns()
            redis_ns = (seconds * 1_000_000 + micros) * 1000
            b = (redis_ns - after, redis_ns + 1000 - before)
            if best is None or b[1] - b[0] < best[1] - best[0]:
                best = b
        return best

    def check_no_step(self):
        lo, hi = self.bracket()
        assert lo <= self.hi and self.lo <= hi, f"the wall clock stepped: offset {self.lo, self.hi} then {lo, hi}"
        self.lo, self.hi = min(lo, self.lo), max(hi, self.hi)

    def redis_ms_to_mono(self, ms):
        return ms * MS - (self.lo + self.hi) // 2


class SuffixMax:
    """v[0..n): add to every v[i:], the max of v[i:]; a lazy segment tree."""

    def __init__(self, values):
        self.n = n = len(values)
        self.top = [0.0] * (4 * n)
        self.add = [0.0] * (4 * n)
        self._build(1, 0, n, values)

    def _build(self, node, lo, hi, values):
        if hi - lo == 1:
            self.top[node] = values[lo]
            return
        mid = (lo + hi) // 2
        self._build(2 * node, lo, mid, values)
        self._build(2 * node + 1, mid, hi, values)
        self.top[node] = max(self.top[2 * node], self.top[2 * node + 1])

    def add_from(self, i, x, node=1, lo=0, hi=None):
        hi = self.n if hi is None else hi
        if hi <= i:
            return
        if lo >= i:
            self.top[node] += x
            self.add[node] += x
            return
        mid = (lo + hi) // 2
        self.add_from(i, x, 2 * node, lo, mid)
        self.add_from(i, x, 2 * node + 1, mid, hi)
        self.top[node] = max(self.top[2 * node], self.top[2 * node + 1]) + self.add[node]

    def max_from(self, i, node=1, lo=0, hi=None):
        hi = self.n if hi is None else hi
        if hi <= i:
            return float("-inf")
        if lo >= i:
            return self.top[node]
        mid = (lo + hi) // 2
        return max(self.max_from(i, 2 * node, lo, mid), self.max_from(i, 2 * node + 1, mid, hi)) + self.add[node]


def worst_interval(admissions, capacity, per_ns, slack_ns):
    """The interval [a, b] where the admissions certainly inside it (lo >= a,
    hi <= b) most exceed capacity + per_ns x (b - a + slack_ns): (excess, a,
    b, count); no breach while excess <= 0. a runs over every lo, b over
    every hi: f(b) = count(b) - per_ns x b is kept for every b as the
    admissions with lo >= a come in, latest lo first."""
    if not admissions:
        return float("-inf"), 0, 0, 0
    base = min(lo for lo, _ in admissions)  # small numbers: doubles stay exact enough
    admissions = [(lo - base, hi - base) for lo, hi in admissions]
    his = sorted({hi for _, hi in admissions})
    tree = SuffixMax([-per_ns * b for b in his])
    by_lo = sorted(admissions, reverse=True)
    worst, i = (float("-inf"), 0, 0, 0), 0
    while i < len(by_lo):
        a = by_lo[i][0]
        while i < len(by_lo) and by_lo[i][0] == a:
            tree.add_from(bisect.bisect_left(his, by_lo[i][1]), 1)
            i += 1
        first = bisect.bisect_left(his, a)
        best = tree.max_from(first)
        excess = best + per_ns * a - capacity - per_ns * slack_ns
        if excess > worst[0]:
            worst = (excess, a, None, None)
    if worst[2] is None:  # find b and the count for the message
        a = worst[1]
        inside = sorted(hi for lo, hi in admissions if lo >= a)
        b, n = max(((hi, k + 1) for k, hi in enumerate(inside)), key=lambda x: x[1] - per_ns * (x[0] - a))
        worst = (worst[0], a + base, b + base, n)
    return worst


def most_in_any(admissions, length):
    """The most admissions certainly inside any interval shorter than length ns."""
    by_lo = sorted(admissions)
    los = [lo for lo, _ in by_lo]
    most = (0, 0)
    for i, (a, _) in enumerate(by_lo):
        end = bisect.bisect_left(los, a + length, i)
        n = sum(1 for _, hi in by_lo[i:end] if hi < a + length)
        most = max(most, (n, a))
    return most


def check_bound(algorithm, admissions, clock, starts):
    """Raises AssertionError on an admission beyond the algorithm's bound;
    else says how close the admissions came to it."""
    limit, period_ms, burst = RATES[algorithm]
    period = period_ms * MS
    spans = [(lo, hi) for lo, hi, _ in admissions]
    if algorithm in ("gcra", "token_bucket", "leaky_bucket"):
        capacity = burst or limit
        if algorithm == "gcra":  # the emission interval in whole us; time in us
            per_ns, slack = 1 / (-(-period_ms * 1000 // limit) * 1000), 1000
        else:  # time in whole ms: two admissions d apart may be d + 1 ms apart on Redis's clock
            per_ns, slack = limit / period, MS
        excess, a, b, n = worst_interval(spans, capacity, per_ns, slack)
        assert excess <= 1e-9, (f"{algorithm}: {n} admissions within {(b - a) / MS:.3f} ms, "
                                f"bound {capacity} + {per_ns * (b - a + slack):.2f}")
        return f"closest: {n} admissions within {(b - a) / MS:.1f} ms, {-excess:.1f} under the bound"
    if algorithm == "sliding_log":
        # any two Redis ms stamps less than period apart: real times less than period - 1 ms apart
        n, a = most_in_any(spans, period - MS)
        assert n <= limit, f"sliding_log: {n} admissions within {period_ms - 1} ms from {a}, limit {limit}"
        return f"closest: {n} admissions within {period_ms - 1} ms"
    # windows on Redis's clock: an admission's Redis time is within [lo + clock.lo, hi + clock.hi]
    most = []
    for start in sorted(starts):
        a, b = start * MS, (start + period_ms) * MS
        n = sum(1 for lo, hi in spans if lo + clock.lo >= a and hi + clock.hi < b)
        assert n <= limit, f"{algorithm}: {n} admissions in the window [{start}, {start + period_ms}) ms, limit {limit}"
        most.append(n)
    return f"closest: windows of {' '.join(map(str, most))} admissions certainly inside"


def poll_window_starts(r, key, until, starts):
    """The starts a fixed_window key had, read every 2 ms (a window lasts a period)."""
    while time.monotonic_ns() < until:
        start = r.hget(key, "start")
        if start is not None:
            starts.add(int(start))
        time.sleep(0.002)


def test_every_language_reads_one_monotonic_clock(workers):
    for w in workers:
        for _ in range(3):
            before = time.monotonic_ns()
            w.send("clock")
            (value,) = w.line()
            after = time.monotonic_ns()
            assert before <= int(value) <= after, f"{w}: CLOCK_MONOTONIC {value} outside [{before}, {after}]"


def run_once(url, workers, algorithm, attempt):
    """One run of every worker on a fresh key: its admissions held to the
    bound and the local flags checked; returns (utilization, share of the
    offered calls the workers made, report)."""
    limit, period_ms, burst = RATES[algorithm]
    r = redis_py.Redis.from_url(url)
    r.flushall()
    clock = Clock(r)
    name = f"leases-{algorithm}-{attempt}"
    # start on a Redis-time multiple of the period: sliding_window's windows are aligned to it
    start_ms = (time.monotonic_ns() + clock.lo) // MS + 300
    start_ms += -start_ms % period_ms
    start = clock.redis_ms_to_mono(start_ms)
    end = start + RUN - MARGIN
    offered = SATURATION * limit * 1000 // period_ms  # calls per second, in all
    # sliding_window: the aligned windows; fixed_window: those its key had
    starts = set()
    if algorithm == "sliding_window":
        starts = {start_ms + k * period_ms for k in range(-1, RUN // MS // period_ms + 1)}
    poller = None
    if algorithm == "fixed_window":
        poller = threading.Thread(target=poll_window_starts, daemon=True,
                                  args=(redis_py.Redis.from_url(url), f"rl:{{{name}:hot}}:fixed_window",
                                        end + 100 * MS, starts))
        poller.start()
    r.config_resetstat()
    for w in workers:
        w.send(f"run {algorithm} {limit} {period_ms} {burst} {w.lease_ms} {name} {start} {end} "
               f"{offered // len(workers)} 1")
    admissions, counts = [], {}
    for w in workers:
        while (line := w.line())[0] == "a":
            admissions.append((int(line[1]), int(line[2]), int(line[3])))
        counts[w] = dict(zip(("calls", "admitted", "local_admitted", "denied", "local_denied"), map(int, line[1:])))
    scripts = r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
    if poller:
        poller.join()
    clock.check_no_step()

    closest = check_bound(algorithm, admissions, clock, starts)

    span = end - start
    if algorithm in ("gcra", "token_bucket", "leaky_bucket"):
        allowed = (burst or limit) + limit * span / (period_ms * MS)
    else:
        allowed = limit * RUN // (period_ms * MS)
    utilization = len(admissions) / allowed
    calls = sum(c["calls"] for c in counts.values())
    delivered = calls / (offered // len(workers) * len(workers) * span / 1e9)
    lines = [f"{algorithm}: admitted {len(admissions)} of {allowed:.0f} allowed ({utilization:.1%}); "
             f"{calls} decisions ({delivered:.0%} of those offered), {scripts} scripts; {closest}"]
    for w, c in counts.items():
        local = c["local_admitted"] + c["local_denied"]
        lines.append(f"  {w}: {c['calls']} calls, {c['admitted']} admitted ({c['local_admitted']} locally), "
                     f"{c['local_denied']} denied locally: {local / max(1, c['calls']):.0%} local")
    print("\n".join(lines))

    assert sum(c["admitted"] for c in counts.values()) == len(admissions)
    for w, c in counts.items():
        local = c["local_admitted"] + c["local_denied"]
        if w.lease_ms:
            assert local > 0, f"{w} never decided locally: {c}"
        else:
            assert local == 0, f"{w} never leases, yet decided locally: {c}"
    # a decision not made locally is a script; a lease adds one give-back at most (leases <= the
    # leasing processes' admissions from Redis)
    remote = sum(c["calls"] - c["local_admitted"] - c["local_denied"] for c in counts.values())
    leases = sum(c["admitted"] - c["local_admitted"] for w, c in counts.items() if w.lease_ms)
    assert remote <= scripts <= remote + leases + 10, (remote, leases, scripts)
    return utilization, delivered, lines[0]


@pytest.mark.parametrize("algorithm", list(RATES))
def test_leases_never_over_admit(url, workers, algorithm):
    """Every run is held to the bound. The key admits >= 90% of what the
    limit allows while the workers make the calls offered: a run in which a
    loaded machine starved them (under 90% of the calls made) is repeated,
    twice at most, and if none made them 75% is asserted."""
    runs = []
    for attempt in range(3):
        runs.append(run_once(url, workers, algorithm, attempt))
        if runs[-1][1] >= 0.9:
            assert runs[-1][0] >= MIN_UTILIZATION, runs[-1][2]
            return
    best = max(runs)
    print(f"{algorithm}: the workers never made 90% of the calls offered; best run: {best[2]}")
    assert best[0] >= STARVED_UTILIZATION, best[2]


def test_the_checks_catch_a_breach():
    """The bound checks fail on one admission too many, and pass without it."""
    clock = type("Clock", (), {"lo": 0, "hi": 1000})()
    us = 1000
    # gcra 2000/s burst 200 (0.5 ms apart): the burst at 0, then one every 0.5 ms for 1 s
    gcra = [(0, us, 0)] * 200 + [(k * 500 * us, k * 500 * us + us, 0) for k in range(1, 2001)]
    check_bound("gcra", gcra, clock, set())
    with pytest.raises(AssertionError, match="gcra: [0-9]+ admissions within"):
        check_bound("gcra", gcra + [(5 * us, 6 * us, 0)], clock, set())
    # token_bucket, the same on a ms clock (two stamps d apart may be d + 1 ms apart on Redis's
    # clock: 2 more allowed): 3 more is a breach
    check_bound("token_bucket", gcra + [(600 * MS, 600 * MS + us, 0)] * 2, clock, set())
    with pytest.raises(AssertionError, match="token_bucket"):
        check_bound("token_bucket", gcra + [(600 * MS, 600 * MS + us, 0)] * 3, clock, set())
    # sliding_log 500/s: 500 at 0, 500 at 1000 ms; one more at 998 ms is 501 within 999 ms
    log = [(0, us, 0)] * 500 + [(1000 * MS, 1000 * MS + us, 0)] * 500
    check_bound("sliding_log", log, clock, set())
    with pytest.raises(AssertionError, match="sliding_log: 501"):
        check_bound("sliding_log", log + [(998 * MS, 998 * MS + us, 0)], clock, set())
    # windows: the window at 0 holds 500; one more inside it breaks it, one outside all windows does not
    window = [(10 * MS, 10 * MS + us, 0)] * 500
    check_bound("fixed_window", window + [(1000 * MS, 1000 * MS + us, 0)], clock, {0})
    with pytest.raises(AssertionError, match="501 admissions in the window"):
        check_bound("fixed_window", window + [(999 * MS - 2 * us, 999 * MS - us, 0)], clock, {0})
