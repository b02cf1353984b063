"""Model-checked primitives (issue 12): the semaphore, the lock and the delay
queue use Redis time, so these sequences never depend on how fast anything
runs. Leases and delays are either long (nothing ends during an example),
zero, or short and then waited out until they have certainly ended (by the
wall clock, which is Redis's too: same machine); the model knows at every
step what must be true:

  semaphore / lock  a grant only below permits_max (so holders never exceed
                    it); fencing tokens strictly increase per name, even
                    after every key expired; releasing or refreshing an
                    unknown or expired permit answers False and touches no
                    other permit; holders() and available() are exact;
                    waiters are served in arrival order
  delay queue       a message is delivered once at most, never before it is
                    due, the earliest due first; a due message is delivered
                    when there is room; a duplicate push answers False;
                    size() and remove() are exact

Budget: RL_MODEL_PRIMITIVE_EXAMPLES (default 25, about 20 s) examples of each."""
import collections
import os
import pathlib
import sys
import threading
import time
import uuid

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, \
    run_state_machine_as_test

import ratelimit

sys.path.insert(0, str(pathlib.Path(__file__).parent))

from test_model import Server  # noqa: E402

EXAMPLES = int(os.environ.get("RL_MODEL_PRIMITIVE_EXAMPLES", "25"))
LONG = 3600.0    # s: never ends during an example
SHORT = 0.05     # s: then waited out
SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
RAN = collections.Counter()  # the scenarios that must have run at least once


@pytest.fixture(scope="module")
def client():
    server = Server()
    c = ratelimit.Client(server.url, timeout=10.0)
    yield c
    c.close()
    server.stop()


def ended(t_after, lease):
    """Sleeps until a lease granted by a call that returned at t_after has
    certainly ended (Redis keeps ms: one more for the rounding)."""
    time.sleep(max(0.0, t_after + lease + 0.002 - time.time()))


class SemaphoreMachine(RuleBasedStateMachine):
    """One semaphore and one lock, each with a model of its live holders."""
    client = None

    @initialize()
    def start(self):
        self.name = "sem-" + uuid.uuid4().hex[:8]
        self.live, self.gone = {}, set()  # semaphore permit id -> fencing token; ids released or expired
        self.lock_held, self.lock_gone = None, set()
        self.last_fence = {"sem": 0, "lock": 0}

    def fence(self, kind, token):
        assert token > self.last_fence[kind], f"{kind} fencing token {token} after {self.last_fence[kind]}"
        self.last_fence[kind] = token

    def sem(self, permits_max, lease=LONG):
        return self.client.semaphore(self.name, permits_max, lease)

    @rule(permits_max=st.integers(1, 4))
    def acquire(self, permits_max):
        got = self.sem(permits_max).try_acquire()
        assert (got is not None) == (len(self.live) < permits_max), (len(self.live), permits_max, got)
        if got:
            self.fence("sem", got.fencing_token)
            self.live[got.id] = got.fencing_token

    @rule(permits_max=st.integers(1, 4))
    def acquire_and_let_it_expire(self, permits_max):
        got = self.sem(permits_max, SHORT).try_acquire()
        t_after = time.time()
        assert (got is not None) == (len(self.live) < permits_max)
        if got:
            self.fence("sem", got.fencing_token)
            ended(t_after, SHORT)
            self.gone.add(got.id)
            RAN["a permit expired"] += 1

    @rule(data=st.data(), refresh=st.booleans())
    def release_or_refresh(self, data, refresh):
        pick = sorted(self.live) + sorted(self.gone) + ["never-granted-" + uuid.uuid4().hex]
        permit_id = data.draw(st.sampled_from(pick), label="permit")
        permit = ratelimit.Permit(self.sem(1), permit_id, 0, LONG)
        done = permit.refresh(LONG) if refresh else permit.release()
        assert done == (permit_id in self.live), (permit_id, refresh, done)
        if done and not refresh:
            del self.live[permit_id]
            self.gone.add(permit_id)

    @rule(permits_max=st.integers(1, 4))
    def counts(self, permits_max):
        assert self.sem(permits_max).holders() == len(self.live)
        assert self.sem(permits_max).available() == max(0, permits_max - len(self.live))

    @precondition(lambda self: 0 < len(self.live) <= 3)
    @rule(waiters=st.integers(1, 3))
    def waiters_served_in_arrival_order(self, waiters):
        """With every permit taken, waiters queue; each release serves the
        one that came first."""
        permits_max = len(self.live)
        queue_key = "rl:{%s}:semaphore:queue" % self.name
        granted, threads = [], []

        def wait(i):
            p = self.sem(permits_max).acquire(timeout=60)
            granted.append((i, p))
        for i in range(waiters):
            threads.append(threading.Thread(target=wait, args=(i,), daemon=True))
            threads[-1].start()
            deadline = time.monotonic() + 30
            while self.client._command(["ZCARD", queue_key], queue_key) != i + 1:  # queued, in this order
                assert time.monotonic() < deadline, f"waiter {i} never queued"
                time.sleep(0.005)
        for i in range(waiters):
            permit_id = sorted(self.live)[0]
            assert ratelimit.Permit(self.sem(permits_max), permit_id, 0, LONG).release()
            del self.live[permit_id]
            self.gone.add(permit_id)
            deadline = time.monotonic() + 30
            while len(granted) < i + 1:
                assert time.monotonic() < deadline, f"no waiter got the permit released ({i})"
                time.sleep(0.005)
            time.sleep(0.02)  # a second grant would show now
            assert [g[0] for g in granted] == list(range(i + 1)), f"served {[g[0] for g in granted]}"
            self.fence("sem", granted[i][1].fencing_token)
            self.live[granted[i][1].id] = granted[i][1].fencing_token
        for t in threads:
            t.join(10)
        RAN["waiters served in order"] += 1

    # ---- the lock: a semaphore of one, its own keys and fencing tokens -----------------

    def lock(self, lease=LONG):
        return self.client.lock(self.name, lease)

    @rule(short=st.booleans())
    def lock_acquire(self, short):
        got = self.lock(SHORT if short else LONG).try_acquire()
        t_after = time.time()
        assert (got is not None) == (self.lock_held is None)
        if got:
            self.fence("lock", got.fencing_token)
            if short:
                ended(t_after, SHORT)
                self.lock_gone.add(got.token)
                RAN["a lock expired"] += 1
            else:
                self.lock_held = got.token

    @rule(data=st.data(), extend=st.booleans())
    def lock_release_or_extend(self, data, extend):
        pick = ([self.lock_held] if self.lock_held else []) + sorted(self.lock_gone) + ["not-the-owner"]
        token = data.draw(st.sampled_from(pick), label="token")
        held = ratelimit.HeldLock(self.lock(), token, 0, LONG)
        done = held.extend(LONG) if extend else held.release()
        assert done == (token == self.lock_held)
        if done and not extend:
            self.lock_gone.add(token)
            self.lock_held = None

    @invariant()
    def lock_is_not_a_semaphore_permit(self):
        assert not (set(self.live) & self.lock_gone)

    def teardown(self):
        for permit_id in list(self.live):
            ratelimit.Permit(self.sem(1), permit_id, 0, LONG).release()
        if self.lock_held:
            ratelimit.HeldLock(self.lock(), self.lock_held, 0, LONG).release()


class DelayQueueMachine(RuleBasedStateMachine):
    """One queue; per message the span of ms its due time lies in."""
    client = None

    @initialize()
    def start(self):
        self.q = self.client.delay_queue("q-" + uuid.uuid4().hex[:8])
        self.queued = {}  # message -> (earliest, latest) due ms

    @staticmethod
    def ms():
        return int(time.time() * 1000)

    @rule(message=st.sampled_from("abcdefgh"), delay=st.sampled_from([0, 0, 0.03, 0.2, LONG]))
    def push(self, message, delay):
        before = self.ms()
        added = self.q.push(message, delay=delay)
        after = self.ms()
        assert added == (message not in self.queued), (message, added)
        if added:
            d = int(delay * 1000)
            self.queued[message] = (before + d, after + d)  # once delivered, it may be pushed again

    @rule(max=st.integers(1, 4))
    def pop_ready(self, max):
        before = self.ms()
        got = self.q.pop_ready(max=max)
        after = self.ms()
        assert len(got) == len(set(got)) <= max, got
        for message in got:
            assert message in self.queued, f"{message} delivered twice, or never pushed"
            assert self.queued[message][0] <= after, f"{message} delivered before it was due"
        left = {k: v for k, v in self.queued.items() if k not in got}
        certainly_due = {k for k, (_, latest) in left.items() if latest <= before}
        if len(got) < max:
            assert not certainly_due, f"due {sorted(certainly_due)} not delivered, room for {max - len(got)}"
        for message in got:  # the earliest first: nothing left was certainly due earlier
            earlier = {k for k, (_, latest) in left.items() if latest < self.queued[message][0]}
            assert not earlier, f"{message} delivered before the earlier {sorted(earlier)}"
        for message in got:
            del self.queued[message]
        RAN["pop_ready delivered %s" % ("none" if not got else "some")] += 1

    @rule()
    def time_passes(self):
        time.sleep(0.03)

    @rule(message=st.sampled_from("abcdefgh"))
    def remove(self, message):
        assert self.q.remove(message) == (message in self.queued)
        self.queued.pop(message, None)

    @invariant()
    def size_is_exact(self):
        if hasattr(self, "q"):
            assert self.q.size() == len(self.queued)


def test_semaphore_and_lock_keep_their_guarantees(client):
    SemaphoreMachine.client = client
    run_state_machine_as_test(SemaphoreMachine, settings=settings(max_examples=EXAMPLES, stateful_step_count=30,
                                                                  **SETTINGS))
    for scenario in ("waiters served in order", "a permit expired", "a lock expired"):
        assert RAN[scenario] > 0, f"no example had: {scenario}"


def test_delay_queue_keeps_its_guarantees(client):
    DelayQueueMachine.client = client
    run_state_machine_as_test(DelayQueueMachine, settings=settings(max_examples=EXAMPLES, stateful_step_count=30,
                                                                   **SETTINGS))
    assert RAN["pop_ready delivered some"] > 0 and RAN["pop_ready delivered none"] > 0, RAN
