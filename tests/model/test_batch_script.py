"""limit.lua's batch form (several decisions in one script call) against the
same decisions made one call each: the same replies and the same state, for
random mixes of algorithms, rates, ops and entities; an error fails only
its own decision."""
import pathlib
import sys

import pytest
import redis
from hypothesis import HealthCheck, given, settings, strategies as st

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import limiter_model as m  # noqa: E402
import script  # noqa: E402

T0 = 1_700_000_000_000
BATCHED_OPS = ["acquire", "peek", "reserve", "acquire_up_to", "refund"]


def keys(prefix, spec, id):
    return [m.key_of(prefix, "batch", id, spec.algorithm, i) for i in range(len(spec.rates))]


def batch(limit, decisions, prefix, repeat=True):
    """decisions: (id, spec, op, permits, now_ms, max_wait_ms); one EVALSHA,
    each decision as the core sends it: "*" and its short form where it has
    one, else its key count and its arguments in full. repeat: a decision
    whose arguments are the one before's but for permits is sent as "=",
    permits (packed after a short form); else each as it is."""
    all_keys, argv, before = [], ["batch", len(decisions)], None
    for id, spec, op, permits, now_ms, max_wait in decisions:
        k = keys(prefix, spec, id)
        all_keys += k
        short = script.Limit.short_args(spec, op, permits, now_ms, max_wait)
        if short:
            args = ["*"] + short
            packed = short[1]
            but_permits, permits_arg = ("*", short[0], packed[:8] + packed[16:]), packed[8:16]
        else:
            args = [len(k)] + script.Limit.args(spec, op, permits, now_ms, max_wait)
            but_permits, permits_arg = [str(a) for i, a in enumerate(args) if i != 4], permits
        if repeat and but_permits == before:
            argv += ["=", permits_arg]
        else:
            argv += args
        before = but_permits
    return limit.r.evalsha(limit.sha, len(all_keys), *all_keys, *argv)


def single(limit, prefix, decision):
    """one decision alone, as the core sends it (the short form where it has one)"""
    id, spec, op, permits, now_ms, max_wait = decision
    args = (script.Limit.short_args(spec, op, permits, now_ms, max_wait)
            or script.Limit.args(spec, op, permits, now_ms, max_wait))
    return limit.r.evalsha(limit.sha, len(spec.rates), *keys(prefix, spec, id), *args)


rates = st.sampled_from([m.Rate(3, 1000, 0), m.Rate(10, 100, 0), m.Rate(5, 60000, 8), m.Rate(1, 7, 0)])
decision = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(m.ALGORITHMS),
                     st.lists(rates, min_size=1, max_size=2, unique=True), st.sampled_from(BATCHED_OPS),
                     st.integers(1, 4), st.one_of(st.just(0), st.integers(0, 50)), st.sampled_from([0, 30, 500]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(decision, st.booleans()), min_size=1, max_size=24), st.booleans())
def test_a_batch_decides_as_its_decisions_one_by_one(limit, drawn, repeat):
    """like_before: the decision before's call but for id and permits (a
    limiter's decisions for several ids, which the batch sends as "=")."""
    limit.r.flushall()
    decisions, now = [], T0
    for (id, algorithm, rs, op, permits, step, max_wait), like_before in drawn:
        if like_before and decisions:
            _, spec, op, _, _, max_wait = decisions[-1]
            algorithm, rs, step = spec.algorithm, spec.rates, 0
        now += step
        spec = m.Spec(algorithm, tuple(rs))
        if script.core_refuses(spec, op, permits):
            continue
        decisions.append((id, spec, op, permits, now, max_wait))
    if not decisions:
        return
    replies = batch(limit, decisions, "x", repeat)
    assert len(replies) == len(decisions)
    for d, got in zip(decisions, replies):
        id, spec, op, permits, now_ms, max_wait = d
        assert got == single(limit, "y", d), d
    for d in decisions:
        for kx, ky in zip(keys("x", d[1], d[0]), keys("y", d[1], d[0])):
            x, y = limit.r.dump(kx), limit.r.dump(ky)
            # TTLs run on the real clock: a short one may end between the two runs
            if x is None or y is None:
                assert max(limit.r.pttl(kx), limit.r.pttl(ky)) < 2000, (kx, d)
            else:
                assert x == y, (kx, d)


HOUR = 3_600_000
slow_rates = st.sampled_from([m.Rate(3, HOUR, 0), m.Rate(10, HOUR, 0), m.Rate(5, HOUR, 8)])
server_decision = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(m.ALGORITHMS),
                            st.lists(slow_rates, min_size=1, max_size=2, unique=True),
                            st.sampled_from(BATCHED_OPS), st.integers(1, 4))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(server_decision, st.booleans(), st.booleans()), min_size=1, max_size=24))
def test_short_forms_in_a_batch_decide_as_one_by_one(limit, drawn):
    """Under the server's clock (the core's usual call): short forms ("*"),
    their repeats (permits packed) and full forms mixed in one batch decide
    as one call each. Rates are per hour, so the ms between the two runs
    move no count; durations may differ by that much."""
    limit.r.flushall()
    decisions = []
    for (id, algorithm, rs, op, permits), one_rate, like_before in drawn:
        if like_before and decisions:
            _, spec, op, _, _, _ = decisions[-1]
        else:
            spec = m.Spec(algorithm, tuple(rs[:1] if one_rate else rs))
        if script.core_refuses(spec, op, permits):
            continue
        decisions.append((id, spec, op, permits, 0, 0))
    if not decisions:
        return
    replies = batch(limit, decisions, "x")
    for d, got in zip(decisions, replies):
        script.assert_alike(got, single(limit, "y", d), d)
    for d in decisions:
        for kx, ky in zip(keys("x", d[1], d[0]), keys("y", d[1], d[0])):
            assert limit.r.exists(kx) == limit.r.exists(ky), (kx, d)


def test_an_error_fails_only_its_own_decision(limit):
    limit.r.flushall()
    spec = m.Spec("gcra", (m.Rate(10, 1000, 0),))
    limit.r.set(keys("x", spec, "broken")[0], "not a number")
    limit.r.lpush(keys("x", spec, "list")[0], "wrong type")
    out = batch(limit, [("ok1", spec, "acquire", 1, T0, 0), ("list", spec, "acquire", 1, T0, 0),
                        ("ok2", spec, "acquire", 2, T0, 0)], "x")
    assert out[0][:3] == [1, 10, 9] and out[2][:3] == [1, 10, 8]
    assert isinstance(out[1], redis.ResponseError) and "WRONGTYPE" in str(out[1])
    assert limit.r.exists(*keys("x", spec, "ok1"), *keys("x", spec, "ok2")) == 2


def test_a_lease_call_is_no_batch_decision(limit):
    limit.r.flushall()
    spec = m.Spec("token_bucket", (m.Rate(10, 1000, 0),))
    out = batch(limit, [("u", spec, "lease", 2, T0, 50), ("v", spec, "acquire", 1, T0, 0)], "x")
    assert isinstance(out[0], redis.ResponseError) and "lease" in str(out[0])
    assert out[1][:3] == [1, 10, 9]
    assert limit.r.exists(*keys("x", spec, "u")) == 0


def test_server_time_is_read_once_for_the_whole_batch(limit):
    limit.r.flushall()
    spec = m.Spec("fixed_window", (m.Rate(100, 60000, 0),))
    out = batch(limit, [("u", spec, "acquire", 1, 0, 0) for _ in range(50)], "x")
    assert [r[2] for r in out] == list(range(99, 49, -1))
    # one window: every decision saw the same instant
    assert {r[4] for r in out} == {out[0][4]}
