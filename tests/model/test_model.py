"""Model-checked semantics (issue 12): Hypothesis drives random sequences of
acquire / peek / reserve / acquire-up-to / refund / reset, rate changes and
time jumps (explicit `now`) through the real library on real Redis and
through the reference model (limiter_model.py) side by side. Every result
field and every key's TTL must agree, and the admissions must keep the
invariant of admissions.py (checked from the results alone).

With RL_JAR set (tests/run.sh sets it) the same steps also run through the
Java binding (ModelWorker.java) on a redis-server of its own, and must give
the same answers.

Budget: RL_MODEL_EXAMPLES examples per algorithm of up to RL_MODEL_STEPS
steps (default 25 x 60, about 30-50 s in all); a long run (docs/reliability.md
has its figures):
    RL_JAR=bindings/java/core/target/ratelimit-0.1.0-SNAPSHOT.jar RL_MODEL_EXAMPLES=400 \
      RL_MODEL_PRIMITIVE_EXAMPLES=300 build/venv/bin/python -m pytest -q tests/model"""
import collections
import dataclasses
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import harness  # noqa: E402
import limiter_model as m  # noqa: E402
from admissions import Admissions  # noqa: E402

HERE = pathlib.Path(__file__).parent
T0 = 1_700_000_000_000
EXAMPLES = int(os.environ.get("RL_MODEL_EXAMPLES", "25"))  # per algorithm
STEPS = int(os.environ.get("RL_MODEL_STEPS", "60"))
PERIODS = [1, 2, 7, 10, 100, 250, 999, 1000, 1001, 3000, 60000]
RAN = collections.Counter()  # what the examples did: each kind must have happened
OPS = ["acquire"] * 4 + ["peek"] * 2 + ["acquire_up_to"] * 2 + ["refund", "reserve", "reserve", "reset"]
LIMITS = [1, 2, 3, 5, 10, 16, 100, 1000]


class Server:
    """A throwaway redis-server on a free loopback port."""

    def __init__(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = tempfile.mkdtemp(prefix="rl-model-")
        self.proc = subprocess.Popen([shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.02)
        self.url = f"redis://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def bindings():
    """[(name, Book, call)]: Python always, Java when RL_JAR names the jar."""
    servers, out, closers = [], [], []
    try:
        servers.append(Server())
        python = harness.PythonLimiters(servers[-1].url)
        closers.append(python.close)
        out.append(("python", harness.Book(servers[-1].port), python))
        jar = os.environ.get("RL_JAR")
        if jar:
            assert pathlib.Path(jar).is_file(), f"RL_JAR={jar} is not a file"
            servers.append(Server())
            java = harness.JavaLimiters(servers[-1].url, jar)
            closers.append(java.close)
            out.append(("java", harness.Book(servers[-1].port), java))
        yield out
    finally:
        for close in closers:
            close()
        for s in servers:
            s.stop()


# ---- what Hypothesis draws -----------------------------------------------------------------


def rates(algorithm):
    limit = st.one_of(st.sampled_from(LIMITS), st.integers(1, 50))
    period = st.one_of(st.sampled_from(PERIODS), st.integers(1, 5000))

    @st.composite
    def rate(draw):
        lim = draw(limit)
        burst = 0
        if algorithm in ("token_bucket", "gcra") and draw(st.booleans()):
            burst = draw(st.integers(1, 2 * lim + 1))
        return m.Rate(lim, draw(period), burst)
    return rate()


@st.composite
def specs(draw, algorithm):
    rs = tuple(draw(st.lists(rates(algorithm), min_size=1, max_size=3)))
    initial = None
    if algorithm in m.BUCKETS and draw(st.integers(0, 9)) < 4:
        initial = draw(st.integers(0, max(r.capacity(algorithm) for r in rs) + 1))
    return m.Spec(algorithm, rs, initial)


def changed(algorithm, spec):
    """A new spec for the limiter: any other, or (as `configure` lowering a
    stored rate does) the same rates refilling slower or faster with the
    same capacity, where what a bucket carried across the change shows."""
    def scaled(factor):
        def rate(r):
            if algorithm in ("token_bucket", "gcra"):
                return m.Rate(max(1, int(r.limit * factor)), r.period, r.capacity(algorithm))
            return m.Rate(r.limit, max(1, int(r.period / factor)), r.burst)  # leaky_bucket: its capacity is its limit
        return dataclasses.replace(spec, rates=tuple(rate(r) for r in spec.rates))
    if algorithm not in m.BUCKETS:
        return specs(algorithm)
    return st.one_of(specs(algorithm), st.sampled_from([0.01, 0.1, 0.5, 2.0]).map(scaled))


class LimiterMachine(RuleBasedStateMachine):
    """One limiter name of one algorithm, two ids."""
    bindings, algorithm = [], None

    @initialize(data=st.data())
    def start(self, data):
        algorithm = self.algorithm
        self.spec = data.draw(specs(algorithm), label="spec")
        self.now = T0 + data.draw(st.integers(0, 10 ** 6), label="start")  # windows aligned differently
        self.model = m.Model(harness.PREFIX, harness.NAME)
        self.admissions = Admissions(algorithm)
        self.steps = []
        for _, book, _ in self.bindings:
            book.flush()

    def run(self, step):
        step["now_ms"] = self.now
        want = harness.expect(self.model, self.spec, step)
        where = f"step {len(self.steps)} of {self.algorithm}, spec {self.spec}"
        self.steps.append((self.spec, step))
        result = None
        for name, book, call in self.bindings:
            result = harness.run_step(book, call, self.spec, step, want, f"{name}: {where}")
        self.admissions.record(self.spec, step, result)
        outcome = "invalid" if result == "invalid" else "done" if result is None else \
            "allowed" if result["allowed"] else "denied"
        RAN[(self.algorithm, step["op"], outcome)] += 1

    @rule(data=st.data())
    def step(self, data):
        """Time passes (or not; for sliding_log it may go back), the rate may
        change, then one request. (One rule: Hypothesis switches whole rules
        off in some examples.)"""
        period = data.draw(st.sampled_from([r.period for r in self.spec.rates]), label="period of")
        self.now += data.draw(st.one_of(
            st.just(0), st.just(0), st.integers(1, 3), st.integers(1, period),
            st.integers(-2, 2).map(lambda d: max(0, period + d)),  # around a window edge
            st.integers(period, 3 * period)), label="ms")
        if self.algorithm == "sliding_log" and data.draw(st.integers(0, 9), label="clock back") == 0:
            # docs: sliding_log logs a call from a clock that went back at its newest call's time
            self.now = max(T0, self.now - data.draw(st.integers(1, 5000), label="ms back"))
        if data.draw(st.integers(0, 14), label="rate change") == 0:
            self.spec = data.draw(changed(self.algorithm, self.spec), label="new spec")
        op = data.draw(st.sampled_from(OPS), label="op")
        id = data.draw(st.sampled_from(["a", "b"]), label="id")
        if op == "reset":
            self.run({"op": "reset", "id": id})
            return
        if op == "reserve" and self.algorithm not in m.BUCKETS and data.draw(st.integers(0, 9), label="keep") > 0:
            op = "acquire"  # mostly; sometimes the refused reserve
        capacity = self.spec.capacity()
        if op == "acquire_up_to":
            permits = data.draw(st.integers(1, 2 * capacity + 1), label="permits")
        else:
            permits = data.draw(st.one_of(st.integers(1, capacity), st.integers(1, min(3, capacity)),
                                          st.just(capacity + 1)), label="permits")  # +1: refused
        max_wait = 0
        if op == "reserve":
            max_wait = data.draw(st.one_of(st.just(0), st.integers(1, 2 * self.spec.rates[0].period)), label="max_wait")
        self.run({"op": op, "id": id, "permits": permits, "max_wait_ms": max_wait})


@pytest.mark.parametrize("algorithm", m.ALGORITHMS)
def test_limiters_match_the_model(bindings, algorithm):
    LimiterMachine.bindings, LimiterMachine.algorithm = bindings, algorithm
    run_state_machine_as_test(LimiterMachine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
        suppress_health_check=list(HealthCheck)))
    if EXAMPLES < 15:
        return  # too few examples to be sure every op was both allowed and denied
    ran = {k[1:]: n for k, n in RAN.items() if k[0] == algorithm}
    for op in ("acquire", "peek", "acquire_up_to") + (("reserve",) if algorithm in m.BUCKETS else ()):
        for outcome in ("allowed", "denied"):
            assert ran.get((op, outcome)), f"no {op} was {outcome}: {ran}"
    assert ran.get(("refund", "allowed")) and ran.get(("reset", "done")) and ran.get(("acquire", "invalid")), ran


def test_recorded_sequences_replay(bindings):
    """sequences.json (what ModelReplayTest replays through Java) still holds
    for the model and for every binding here: regenerate it with
    make_sequences.py when the semantics change on purpose."""
    import make_sequences
    doc = json.loads((HERE / "sequences.json").read_text())
    assert (doc["prefix"], doc["name"]) == (harness.PREFIX, harness.NAME)
    steps = 0
    for i, seq in enumerate(doc["sequences"]):
        expected = json.loads(json.dumps(seq))
        for step in expected["steps"]:
            for k in ("expire", "expect", "expect_error", "keys"):
                step.pop(k, None)
        assert make_sequences.annotate(expected) == seq, f"sequence {i}: the model no longer says what was recorded"
        for name, book, call in bindings:
            make_sequences.run_sequence(book, call, seq, f"{name}: sequence {i} ({seq['algorithm']})")
        steps += len(seq["steps"])
    assert {s["algorithm"] for s in doc["sequences"]} == set(m.ALGORITHMS)
    assert steps >= 3000


def test_sliding_log_refund_keeps_the_ttl(bindings):
    """A refund takes back the oldest live permits and sets no TTL (it
    writes its marker into the key the calls keep), whether it takes a
    whole call or part of one: the log written under 10/1 ms still expires
    1 ms after it and 1/1001 ms admits at 1000 (docs/reliability.md: rate
    changes and TTLs). The invariant's tracker once took the newest permits
    back; the script once set the TTL again when it took a call in part."""
    machine = LimiterMachine()  # its steps and checks, without Hypothesis's draws
    machine.bindings, machine.algorithm = bindings, "sliding_log"
    fast, slow = (m.Spec("sliding_log", (m.Rate(limit, period, 0),)) for limit, period in ((10, 1), (1, 1001)))
    for first in (1, 2):  # the refund of 1 takes the first call whole, then in part
        machine.model, machine.admissions = m.Model(harness.PREFIX, harness.NAME), Admissions("sliding_log")
        machine.steps = []
        for _, book, _ in bindings:
            book.flush()
        for spec, op, permits, at in ((fast, "acquire", first, 0), (fast, "acquire", 10 - first, 0),
                                      (slow, "refund", 1, 0), (slow, "acquire", 1, 1000)):
            machine.spec, machine.now = spec, T0 + at
            machine.run({"op": op, "id": "a", "permits": permits, "max_wait_ms": 0})