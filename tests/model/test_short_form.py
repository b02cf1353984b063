"""limit.lua's short form (ARGV = algorithm, then op, permits, limit,
period_ms, burst packed: the core's usual call, with the server's clock, no
max wait and no initial tokens) decides as the full form with now_ms 0,
max_wait_ms 0 and initial -1: the same replies, step by step, for random
sequences of every op it takes on every algorithm. The rates are slow (per
hour), so the few ms between the two calls of a step move no count;
durations may differ by that much."""
import pathlib
import sys

from hypothesis import HealthCheck, given, settings, strategies as st

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import limiter_model as m  # noqa: E402
import script  # noqa: E402

HOUR = 3_600_000
SHORT_OPS = ["acquire", "peek", "reserve", "refund"]  # reserve with no max wait


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(m.ALGORITHMS), st.integers(1, 6),
       st.lists(st.tuples(st.sampled_from(SHORT_OPS), st.integers(1, 3)), min_size=1, max_size=12))
def test_the_short_form_decides_as_the_full_form(limit, algorithm, rate_limit, steps):
    limit.r.flushall()
    spec = m.Spec(algorithm, (m.Rate(rate_limit, HOUR, 0),))
    short_key, full_key = f"rl:{{s:{algorithm}}}:{algorithm}", f"rl:{{f:{algorithm}}}:{algorithm}"
    for op, permits in steps:
        if script.core_refuses(spec, op, permits):
            continue
        got = limit.r.evalsha(limit.sha, 1, short_key, *script.Limit.short_args(spec, op, permits))
        want = limit.r.evalsha(limit.sha, 1, full_key, *script.Limit.args(spec, op, permits, 0, 0))
        where = (algorithm, rate_limit, op, permits, steps)
        script.assert_alike(got, want, where)
        assert limit.r.exists(short_key) == limit.r.exists(full_key), where
