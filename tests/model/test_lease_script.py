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


# ---- issue 32: a give-back finds its own booking or nothing (each of these over-admitted before) ----

def admitted(limit, k, spec, now, permits):
    """How many of `permits` single acquires at now pass."""
    return sum(limit.call(k, spec, "acquire", 1, now)[0] for _ in range(permits))


def test_a_fixed_window_give_back_under_an_older_spec_keeps_the_window(limit):
    """A holds a lease under 100/3 s; the spec becomes 100/60 s and B fills
    the window; A's give-back must not rewrite the period or end the window
    at 3 s (which let 197 in within 3.3 s)."""
    old, new = (m.Spec("fixed_window", (m.Rate(100, p, 0),)) for p in (3000, 60000))
    k = keys(old)
    r = limit.call(k, old, "lease", 40, T0, 1000)
    assert r[6] == 40
    assert limit.call(k, new, "acquire", 60, T0 + 10)[0] == 1
    assert limit.call(k, old, "give_back", 40, T0 + 20, 0, r[8:])[6] == 40
    assert limit.r.hget(k[0], "period") == b"60000"
    assert limit.r.pttl(k[0]) > 50_000
    assert admitted(limit, k, new, T0 + 3500, 41) == 40


@pytest.mark.parametrize("algorithm", m.ALGORITHMS)
def test_a_give_back_after_a_reset_and_a_look_alike_write_takes_nothing(limit, algorithm):
    """The lease's booking is deleted by a reset; an acquire of the block's
    size at the booking's time writes the very state the lease wrote (the
    buckets' level and ts, gcra's TAT, the windows' start and count): the
    give-back must see that it is not its own."""
    spec = m.Spec(algorithm, (m.Rate(10, 1000, 0),))
    k = keys(spec)
    r = limit.call(k, spec, "lease", 5, T0, 1000)
    block, valid = r[6], r[5]
    assert block == 5
    limit.r.delete(*k)
    at = T0 if algorithm in ("fixed_window", "sliding_window") else T0 + valid
    assert limit.call(k, spec, "acquire", block, at)[0] == 1
    g = limit.call(k, spec, "give_back", block, at, 0, r[8:])
    assert g[6] == 0, g
    # the acquire's 5 stay counted: at most 5 more now (the lease's unused block never counted after the reset)
    assert admitted(limit, k, spec, at, 10) == 5


@pytest.mark.parametrize("algorithm", ["token_bucket", "leaky_bucket", "gcra"])
def test_a_give_back_under_a_later_write_in_its_last_ms_takes_nothing(limit, algorithm):
    """Any write in the booking's last ms stores its ts; a refund and an
    acquire there can restore the level too. Only the booking's id tells."""
    spec = m.Spec(algorithm, (m.Rate(10, 1000, 0),))
    k = keys(spec)
    r = limit.call(k, spec, "lease", 5, T0, 1000)
    end = T0 + r[5]
    assert limit.call(k, spec, "acquire", 1, end)[0] == 1
    limit.call(k, spec, "refund", 1, end)
    assert limit.call(k, spec, "give_back", 5, end, 0, r[8:])[6] == 0


def test_a_sliding_log_refund_takes_the_oldest_permits(limit):
    """X takes 25 and refunds them after Y took 75: taking back the newest
    (Y's) left X's in the log, and 50 more passed once X's slid out: 125 in
    one period. The oldest go: Y's 75 stay counted."""
    spec = m.Spec("sliding_log", (m.Rate(100, 1000, 0),))
    k = keys(spec)
    assert limit.call(k, spec, "acquire", 25, T0)[0] == 1
    assert limit.call(k, spec, "acquire", 75, T0 + 500)[0] == 1
    assert limit.call(k, spec, "refund", 25, T0 + 600)[6] == 25
    assert admitted(limit, k, spec, T0 + 1001, 30) == 25


def test_a_sliding_log_refund_never_takes_a_lease_block_it_did_not_book(limit):
    """L's block is logged ahead, so it was always the newest: X's refund of
    25 removed it while L admitted all 25 from memory."""
    spec = m.Spec("sliding_log", (m.Rate(100, 1000, 0),))
    k = keys(spec)
    assert limit.call(k, spec, "acquire", 50, T0)[0] == 1  # X
    r = limit.call(k, spec, "lease", 25, T0 + 10, 400)  # L: logged at T0 + 410
    assert r[6] == 25
    limit.call(k, spec, "refund", 25, T0 + 20)  # X gives 25 of its 50 back
    # L admits its 25 from memory until T0 + 410: its block must stay logged
    assert admitted(limit, k, spec, T0 + 30, 60) == 100 - 25 - 25
    # X's slid out; L's 25 and the 50 just taken still count in (T0 + 1, T0 + 1001]
    assert admitted(limit, k, spec, T0 + 1001, 60) == 25


@pytest.mark.parametrize("algorithm", m.BUCKETS)
def test_a_lease_then_a_slower_rate_adds_no_permits(limit, algorithm):
    """Issue 41: 1000/s drained to 100, a lease of 1, the rate lowered to
    10/s with the capacity kept (leaky_bucket: 1000 per 100 s): a drain
    then gets what the bucket holds, not the refill of the lease's validity
    at the old rate; half a second after the lease ended, too. Held to the
    admission bound across the change (admissions.py)."""
    from admissions import Admissions
    fast = m.Spec(algorithm, (m.Rate(1000, 1000, 0),))
    slow = m.Spec(algorithm, ((m.Rate(1000, 100_000, 0),) if algorithm == "leaky_bucket"
                              else (m.Rate(10, 1000, 1000),)))
    k, admitted = keys(fast), Admissions(algorithm)

    def call(spec, op, permits, t, max_wait=0):
        r = limit.call(k, spec, op, permits, t, max_wait)
        step = {"op": op, "id": "u", "now_ms": t}
        if op == "lease":
            if r[0]:
                admitted.record_lease(spec, "u", t, t + r[5], r[6], [t + r[5]])
        else:
            admitted.record(spec, step, dict(zip(["allowed", "limit", "remaining", "retry_after_ms",
                                                  "reset_after_ms", "wait_ms", "granted", "rate_index"],
                                                 [bool(r[0])] + r[1:8])))
        return r

    assert call(fast, "acquire", 900, T0)[0] == 1
    lease = call(fast, "lease", 1, T0, 500)
    assert lease[:2] == [1, 1000] and lease[6] == 1 and lease[5] == 500
    # what is left (99) and the refill of 1 ms at either rate: never the 500 ms of the lease at 1000/s
    drained = call(slow, "acquire_up_to", 1000, T0 + 1)
    assert drained[0] == 1 and drained[6] <= 100, drained
    later = call(slow, "acquire_up_to", 1000, T0 + 1000)
    assert later[0] == 1 and later[6] <= 10, later  # 999 ms at 10/s


@pytest.mark.parametrize("algorithm", ["token_bucket", "leaky_bucket"])  # gcra keeps what is in use
def test_a_lease_ended_then_a_slower_rate_adds_no_permits(limit, algorithm):
    """The same, first asked 700 ms after the lease's grant (its validity
    over, no call in between): the booking is still read as taken at its
    grant, and its give-back under the old rate gives nothing back."""
    fast = m.Spec(algorithm, (m.Rate(1000, 1000, 0),))
    slow = m.Spec(algorithm, ((m.Rate(1000, 100_000, 0),) if algorithm == "leaky_bucket"
                              else (m.Rate(10, 1000, 1000),)))
    k = keys(fast)
    assert limit.call(k, fast, "acquire", 900, T0)[0] == 1
    lease = limit.call(k, fast, "lease", 1, T0, 500)
    assert lease[6] == 1
    assert limit.call(k, slow, "peek", 1, T0 + 700)[2] <= 99 + 7
    given = limit.call(k, slow, "give_back", 1, T0 + 700, 0, [lease[8]])
    assert given[6] == 0, given
    assert limit.call(k, slow, "acquire_up_to", 1000, T0 + 700)[6] <= 99 + 7
