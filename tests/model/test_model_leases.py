"""Model-checked leases (issue 25; docs/semantics.md, Leases): Hypothesis
mixes leases and give-backs by several clients with acquires, peeks,
reserves, acquire-up-tos, refunds, resets, rate changes and time jumps, on
real Redis through the script itself (lua/limit.lua as the build embeds it,
explicit clock), and checks that

  (a) the script answers as the model (lease_model.py): every reply field
      and every key's TTL;
  (b) the admissions hold the algorithm's bound in real time
      (admissions.py), where each client admits the permits it used from
      its block at times of its own choosing anywhere between the grant and
      when it stopped (all at the grant, all at the end of the validity,
      or anything between: the check counts each where it hurts most),
      then gives the rest back, or never does.

Time only moves forward here (real time). Budget: RL_LEASE_EXAMPLES
examples per algorithm of up to RL_LEASE_STEPS steps (default 20 x 50, about 25 s).
Debugging: RL_LEASE_TRACE=1 prints every step (with -s), RL_LEASE_NO_SHRINK=1
reports the first failure as found (shrinking one takes minutes).

Checked to catch a planted bug at the default budget (most runs): a
token_bucket lease booked at the grant instead of at its validity's end,
and a fixed_window lease valid past its window."""
import collections
import os
import pathlib
import sys

import pytest
import redis
from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import harness  # noqa: E402
import limiter_model as m  # noqa: E402
import script  # noqa: E402
from admissions import Admissions  # noqa: E402
from test_model import T0, Server, changed, specs  # noqa: E402

EXAMPLES = int(os.environ.get("RL_LEASE_EXAMPLES", "20"))
STEPS = int(os.environ.get("RL_LEASE_STEPS", "50"))
CLIENTS = ["c1", "c2", "c3"]
OPS = ["lease"] * 3 + ["give_back"] * 3 + ["acquire"] * 2 + ["acquire_up_to", "drain", "peek", "refund", "reserve", "reset"]
PHASES = [Phase.generate] if os.environ.get("RL_LEASE_NO_SHRINK") else list(Phase)
RAN = collections.Counter()
TRACE = os.environ.get("RL_LEASE_TRACE")


class ScriptCalls:
    """harness's `call`: each step straight through the script, in one
    transaction with the reading that harness.Book.after makes (the TTLs,
    then the keys parked), so that a key written with a TTL of 1 ms cannot
    expire before it is read, however loaded the machine."""

    def __init__(self, r):
        self.r, self.limit, self.handles, self.after = r, script.Limit(r), None, None

    def __call__(self, spec, step):
        every = harness.id_keys(spec.algorithm, step["id"])
        keys = every[:len(spec.rates)]
        p = self.r.pipeline(transaction=True)
        if step["op"] == "reset":
            p.delete(*keys)
        else:
            args = self.limit.args(spec, step["op"], step["permits"], step["now_ms"], step.get("max_wait_ms", 0),
                                   step.get("handles"))
            if step["op"] == "lease":
                args.append(os.urandom(8).hex())  # the booking id, as the core sends
            p.evalsha(self.limit.sha, len(keys), *keys, *args)
        p.time()
        for k in every:
            p.execute_command("PEXPIRETIME", k)
        for k in every:
            p.pexpireat(k, harness.PARKED)
        p.time()
        out = p.execute()
        expiry = dict(zip(every, out[2:2 + len(every)]))
        for k, parked in zip(every, out[2 + len(every):-1]):
            if expiry[k] >= 0 and not parked:
                expiry[k] = -2
        (sec, us), (sec2, us2) = out[1], out[-1]
        self.after = sec * 1000 + us // 1000, expiry, sec2 * 1000 + us2 // 1000
        if step["op"] == "reset":
            return None
        reply = [x.decode() if isinstance(x, bytes) else x for x in out[0]]
        if step["op"] == "lease" and reply[0]:
            self.handles, server_ms = reply[8:-1], reply[-1]
            assert server_ms == step["now_ms"] if step["now_ms"] else abs(server_ms - self.after[0]) < 1000
        return dict(zip(harness.FIELDS, [bool(reply[0])] + reply[1:8]))


class Book(harness.Book):
    def __init__(self, port, calls):
        super().__init__(port)
        self.calls = calls

    def after(self, keys):
        t1, expiry, t2 = self.calls.after
        return t1, {k: expiry[k] for k in keys}, t2


@pytest.fixture(scope="module")
def redis_server():
    server = Server()
    try:
        calls = ScriptCalls(redis.Redis(port=server.port, socket_timeout=10))
        yield Book(server.port, calls), calls
    finally:
        server.stop()


class LeaseMachine(RuleBasedStateMachine):
    """One limiter name of one algorithm, two ids, three clients that each
    hold at most one lease per id."""
    book = calls = algorithm = None

    @initialize(data=st.data())
    def start(self, data):
        self.spec = data.draw(specs(self.algorithm), label="spec")
        self.now = T0 + data.draw(st.integers(0, 10 ** 6), label="start")
        self.model = m.Model(harness.PREFIX, harness.NAME)
        self.admissions = Admissions(self.algorithm)
        self.leases = {}  # (client, id) -> what the client holds
        self.ends = set()  # where clients stop using blocks, and where validities end
        self.book.flush()

    def run(self, spec, step):
        step["now_ms"] = self.now
        want = harness.expect(self.model, spec, step)
        where = f"{self.algorithm}, spec {spec}"
        result = harness.run_step(self.book, self.calls, spec, step, want, where)
        if TRACE:
            print("TRACE", self.now, step["op"], step["id"], step.get("permits"), spec.rates,
                  result and [result[f] for f in harness.FIELDS], want["keys"])
        if result is not None:
            RAN[(self.algorithm, step["op"], "allowed" if result["allowed"] else "denied")] += 1
        return want, result

    @rule(data=st.data())
    def step(self, data):
        period = data.draw(st.sampled_from([r.period for r in self.spec.rates]), label="period of")
        ends = sorted(t for t in self.ends if t >= self.now)
        jump = [st.just(0), st.integers(1, 3), st.integers(1, period),
                st.integers(-2, 2).map(lambda d: max(0, period + d)), st.integers(period, 3 * period)]
        if ends:  # to where a lease's client stops, or its validity ends (the adversary's favourite times)
            jump += [st.sampled_from(ends).map(lambda t: t - self.now)] * 3
        self.now += data.draw(st.one_of(jump), label="ms")
        # a change while a block is out is where a booking read under another rate shows
        if data.draw(st.integers(0, 3 if self.leases else 14), label="rate change") == 0:
            self.spec = data.draw(changed(self.algorithm, self.spec), label="new spec")
        op = data.draw(st.sampled_from(OPS), label="op")
        if op == "drain":
            # the adversary: when a lease's client may admit its last permits, take all there is
            if ends:
                self.now = max(self.now, data.draw(st.sampled_from(ends), label="drain at"))
            op = "acquire_up_to"
        client = data.draw(st.sampled_from(CLIENTS), label="client")
        id = data.draw(st.sampled_from(["a", "a", "a", "b"]), label="id")
        held = self.leases.get((client, id))
        if op == "lease" and held is None:
            self.lease(data, client, id)
        elif op in ("lease", "give_back") and held is not None:
            if self.now >= held["end"]:  # a client gives back once it stopped using the block
                self.give_back(client, id, held)
        elif op == "reset":
            self.run(self.spec, {"op": "reset", "id": id})
            self.admissions.record(self.spec, {"op": "reset", "id": id, "now_ms": self.now}, None)
        elif op not in ("lease", "give_back"):
            if op == "reserve" and self.algorithm not in m.BUCKETS:
                op = "acquire"
            capacity = self.spec.capacity()
            permits = data.draw(st.integers(1, 2 * capacity + 1) if op == "acquire_up_to" else
                                st.one_of(st.integers(1, capacity), st.integers(1, min(3, capacity))), label="permits")
            max_wait = data.draw(st.integers(0, 2 * period), label="max_wait") if op == "reserve" else 0
            self.ordinary(id, op, permits, max_wait)

    def ordinary(self, id, op, permits, max_wait=0):
        step = {"op": op, "id": id, "permits": permits, "max_wait_ms": max_wait}
        _, result = self.run(self.spec, step)
        self.admissions.record(self.spec, step, result)

    def lease(self, data, client, id):
        want = data.draw(st.one_of(st.integers(1, 4), st.integers(1, 2 * self.spec.capacity() + 1)), label="want")
        valid = data.draw(st.one_of(st.integers(1, 10), st.sampled_from([r.period for r in self.spec.rates]),
                                    st.just(3_600_000)), label="validity")
        spec, step = self.spec, {"op": "lease", "id": id, "permits": want, "max_wait_ms": valid}
        want_, result = self.run(spec, step)
        if not result["allowed"]:
            return
        handles = self.calls.handles
        assert len(handles) == len(spec.rates) and all(
            h.isascii() and " " not in h and 0 < len(h) <= 120 for h in handles), handles
        block, v_eff, g = result["granted"], result["wait_ms"], self.now
        # the client's plan: how many it uses, and until when (its admissions lie in [g, end])
        used = data.draw(st.one_of(st.just(block), st.just(0), st.integers(0, block)), label="used")
        end = g + data.draw(st.one_of(st.just(0), st.just(v_eff), st.integers(0, v_eff)), label="until")
        logged = [g + min(valid, r.period // 2) for r in spec.rates]  # where sliding_log logs the block
        if TRACE:
            print("TRACE   lease plan: used", used, "in", [g, end], "valid", v_eff)
        calls = self.admissions.record_lease(spec, id, g, end, used, logged)
        self.ends |= {end, g + v_eff}
        if data.draw(st.integers(0, 4), label="never gives back") > 0:
            self.leases[(client, id)] = {"spec": spec, "records": want_["lease"], "handles": handles,
                                         "block": block, "used": used, "g": g, "end": end, "valid": v_eff,
                                         "calls": calls}
        then = data.draw(st.sampled_from(["nothing", "give back", "drain at the end", "drain when valid ends",
                                          "look-alike"]), label="then")
        if then == "look-alike" and (client, id) in self.leases:
            # a reset, then an acquire of the block where it rebuilds what the lease wrote (the windows: the
            # same ms; the others: the booking's ts), then the give-back: it must find its booking gone
            self.run(spec, {"op": "reset", "id": id})
            self.admissions.record(spec, {"op": "reset", "id": id, "now_ms": self.now}, None)
            if self.algorithm not in ("fixed_window", "sliding_window"):
                self.now = g + v_eff
            self.ordinary(id, "acquire", block)
            self.now = max(self.now, end)
            self.give_back(client, id, self.leases[(client, id)])
        elif then == "give back" and (client, id) in self.leases:
            self.now = end  # the client stops and gives the rest back at once
            self.give_back(client, id, self.leases[(client, id)])
        elif then.startswith("drain"):
            drain = end if then == "drain at the end" else g + v_eff
            # the adversary: someone takes all there is when the client may admit its last permits
            self.now = drain
            self.ordinary(id, "acquire_up_to", 2 * self.spec.capacity() + 1)

    def give_back(self, client, id, held):
        del self.leases[(client, id)]
        step = {"op": "give_back", "id": id, "permits": held["block"] - held["used"],
                "handles": held["handles"], "lease": held["records"]}
        want, result = self.run(held["spec"], step)
        self.admissions.record_give_back(held["spec"], self.now, held["calls"], want["applied"])
        if step["permits"]:
            RAN[(self.algorithm, "given back" if want["applied"][0] else "not on top")] += 1


@pytest.mark.parametrize("algorithm", m.ALGORITHMS)
def test_leases_match_the_model_and_never_over_admit(redis_server, algorithm):
    LeaseMachine.book, LeaseMachine.calls = redis_server
    LeaseMachine.algorithm = algorithm
    run_state_machine_as_test(LeaseMachine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None, phases=PHASES,
        suppress_health_check=list(HealthCheck)))
    if EXAMPLES < 10:
        return
    ran = {k[1:]: n for k, n in RAN.items() if k[0] == algorithm}
    assert ran.get(("lease", "allowed")) and ran.get(("lease", "denied")), ran
    assert ran.get(("given back",)) and ran.get(("not on top",)), ran

