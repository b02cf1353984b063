"""The script's lease ops (5 LEASE, 6 GIVE_BACK; docs/semantics.md, Leases)
called directly, explicit clock: the reply's layout, the block and validity
rules, give back on top and not on top, a denial as an acquire of one's.
test_model_leases.py checks them against the model and the admission bound."""
import pathlib
import re
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import limiter_model as m  # noqa: E402
import script  # noqa: E402

T0 = 1_700_000_000_000
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def flush(limit):
    limit.r.flushall()


def keys(spec, id="u"):
    return [m.key_of("rl", "lease", id, spec.algorithm, i) for i in range(len(spec.rates))]


def test_the_assembled_script_is_the_one_the_build_embeds():
    generated = ROOT / "build" / "generated" / "rl_scripts.c"
    if not generated.exists():
        pytest.skip("no CMake build in build/")
    sha = re.search(r'\{"limit", "([0-9a-f]{40})"', generated.read_text()).group(1)
    assert script.sha1() == sha


@pytest.mark.parametrize("algorithm", m.ALGORITHMS)
def test_a_lease_given_back_whole_at_once(limit, algorithm):
    spec = m.Spec(algorithm, (m.Rate(100, 1000, 0),))
    k = keys(spec)
    r = limit.call(k, spec, "lease", 10, T0, 40)
    # a full bucket cannot bank the refill of the block's validity (40 ms x 100/s)
    left = 86 if algorithm in m.BUCKETS else 90
    assert r[:5] == [1, 100, left, -1, r[4]] and r[5:8] == [40, 10, 0] and len(r) == 9, r
    assert 0 <= r[5] <= 40 and r[4] >= 1
    assert len(r[8]) <= 120 and " " not in r[8]
    assert limit.r.exists(*k) == 1
    g = limit.call(k, spec, "give_back", 10, T0, 0, [r[8]])
    if algorithm == "gcra":
        # a TAT cannot prove nothing else happened since: the validity stays booked (40 ms x 100/s)
        assert g == [1, 100, 96, -1, 40, 0, 10, 0]
        return
    assert g == [1, 100, 100, -1, 0, 0, 10, 0]
    assert limit.r.exists(*k) == 0


@pytest.mark.parametrize("algorithm", m.ALGORITHMS)
def test_a_block_is_at_most_half_of_what_is_left_and_one_near_the_limit(limit, algorithm):
    spec = m.Spec(algorithm, (m.Rate(10, 60000, 0),))
    k = keys(spec)
    left = 10
    while left > 0:
        r = limit.call(k, spec, "lease", 100, T0, 10)
        assert r[0] == 1 and r[6] == max(1, left // 2), (left, r)
        left = r[2]
    denied = limit.call(k, spec, "lease", 100, T0, 10)
    assert denied[0] == 0 and len(denied) == 8
    assert denied == limit.call(k, spec, "acquire", 1, T0)


@pytest.mark.parametrize("algorithm,valid", [("fixed_window", 999), ("sliding_window", 999 - T0 % 1000),
                                             ("sliding_log", 500), ("token_bucket", 500), ("leaky_bucket", 500),
                                             ("gcra", 500)])
def test_validity_is_clamped(limit, algorithm, valid):
    spec = m.Spec(algorithm, (m.Rate(100, 1000, 0),))
    assert limit.call(keys(spec), spec, "lease", 1, T0, 3_600_000)[5] == valid


@pytest.mark.parametrize("algorithm", m.ALGORITHMS)
def test_several_rates_one_handle_each_and_the_least_validity(limit, algorithm):
    spec = m.Spec(algorithm, (m.Rate(100, 1000, 0), m.Rate(1000, 100, 0)))
    k = keys(spec)
    r = limit.call(k, spec, "lease", 20, T0, 3_600_000)
    assert r[0] == 1 and r[6] == 20 and len(r) == 10
    alone = [m.Spec(algorithm, (rate,)) for rate in spec.rates]
    assert r[5] == min(limit.call(keys(s, f"v{i}"), s, "lease", 20, T0, 3_600_000)[5] for i, s in enumerate(alone))
    assert limit.call(k, spec, "give_back", 20, T0 + 1, 0, r[8:])[6] == 20


@pytest.mark.parametrize("algorithm", ["token_bucket", "leaky_bucket", "gcra", "sliding_log"])
def test_no_give_back_once_another_call_booked_on_top(limit, algorithm):
    spec = m.Spec(algorithm, (m.Rate(100, 1000, 0),))
    k = keys(spec)
    r = limit.call(k, spec, "lease", 10, T0, 100)
    assert limit.call(k, spec, "acquire", 1, T0 + 1)[0] == 1
    before = limit.r.dump(k[0])
    g = limit.call(k, spec, "give_back", 10, T0 + 2, 0, [r[8]])
    assert g[6] == 0 and limit.r.dump(k[0]) == before


@pytest.mark.parametrize("algorithm", ["token_bucket", "leaky_bucket", "gcra"])
def test_others_cannot_spend_what_a_bucket_block_may_still_take(limit, algorithm):
    # full bucket of 10, 10/s; a block of 5 valid 100 ms: at the grant the
    # others see 5 left, not 5 + what refills before the block's end
    spec = m.Spec(algorithm, (m.Rate(10, 1000, 0),))
    k = keys(spec)
    r = limit.call(k, spec, "lease", 5, T0, 100)
    assert r[6] == 5 and r[5] == 100
    assert limit.call(k, spec, "peek", 1, T0)[2] == 5 - 1  # and the refill of the block's 100 ms (1 permit)
    assert limit.call(k, spec, "peek", 1, T0 + 100)[2] == 5
