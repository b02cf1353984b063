"""fixed_window and sliding_window under the server's clock set a key's TTL
(the window's end) once per window: a later write in the same window under
the same period leaves it as it is (one call fewer), and a write that opens
a window, changes the period or finds a state an older version wrote (no
period field) sets it again. Under an explicit clock, which may jump, every
write sets it (the model tests and the vectors pin that)."""
import pathlib
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import limiter_model as m  # noqa: E402

HOUR = 3_600_000  # long enough that a test does not cross a window's end
SENTINEL = 32503680000000  # an expiry no script would set (the year 3000)


def spec(algorithm, period=HOUR):
    return m.Spec(algorithm, (m.Rate(1000, period, 0),))


def key(algorithm):
    return f"rl:{{ttl:{algorithm}}}:{algorithm}"


def acquire(limit, algorithm, period=HOUR, now_ms=0):
    reply = limit.call([key(algorithm)], spec(algorithm, period), "acquire", 1, now_ms)
    assert reply[0] == 1, reply
    return reply


def window_end(limit, algorithm, period):
    """The expiry the script sets: fixed_window's end, or sliding_window's next window's end."""
    start = int(limit.r.hget(key(algorithm), "start"))
    return start + period if algorithm == "fixed_window" else start + 2 * period


def expiry(limit, algorithm):
    return limit.r.execute_command("PEXPIRETIME", key(algorithm))


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window"])
def test_a_write_in_the_same_window_leaves_the_ttl(limit, algorithm):
    limit.r.flushall()
    # fixed_window: the window's first write on no key stores no period; the second stores it with the TTL
    for _ in range(2):
        acquire(limit, algorithm)
        assert abs(expiry(limit, algorithm) - window_end(limit, algorithm, HOUR)) <= 2
    limit.r.pexpireat(key(algorithm), SENTINEL)
    for _ in range(4):
        acquire(limit, algorithm)
    assert expiry(limit, algorithm) == SENTINEL  # no PEXPIRE
    counted = "count" if algorithm == "fixed_window" else "cur"
    assert int(limit.r.hget(key(algorithm), counted)) == 6


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window"])
def test_a_period_change_sets_the_ttl_again(limit, algorithm):
    limit.r.flushall()
    acquire(limit, algorithm)
    limit.r.pexpireat(key(algorithm), SENTINEL)
    acquire(limit, algorithm, period=2 * HOUR)
    assert abs(expiry(limit, algorithm) - window_end(limit, algorithm, 2 * HOUR)) <= 2
    assert int(limit.r.hget(key(algorithm), "period")) == 2 * HOUR


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window"])
def test_a_new_window_sets_the_ttl_again(limit, algorithm):
    limit.r.flushall()
    period = 40
    acquire(limit, algorithm, period)
    start = int(limit.r.hget(key(algorithm), "start"))
    limit.r.pexpireat(key(algorithm), SENTINEL)
    time.sleep(2 * period / 1000)
    acquire(limit, algorithm, period)
    assert int(limit.r.hget(key(algorithm), "start")) > start
    assert abs(expiry(limit, algorithm) - window_end(limit, algorithm, period)) <= 2


def test_a_state_an_older_version_wrote_gets_its_ttl_set(limit):
    """Versions before the period field wrote {start, count} alone."""
    limit.r.flushall()
    k = key("fixed_window")
    start = int(limit.r.time()[0]) * 1000
    limit.r.hset(k, mapping={"start": start, "count": 3})
    limit.r.pexpireat(k, SENTINEL)
    acquire(limit, "fixed_window")
    assert limit.r.hgetall(k) == {b"start": str(start).encode(), b"count": b"4", b"period": str(HOUR).encode()}
    assert abs(expiry(limit, "fixed_window") - (start + HOUR)) <= 2


@pytest.mark.parametrize("algorithm", ["fixed_window", "sliding_window"])
def test_an_explicit_clock_sets_the_ttl_at_every_write(limit, algorithm):
    limit.r.flushall()
    now = 1_700_000_000_000 - 1_700_000_000_000 % HOUR + 1000
    acquire(limit, algorithm, now_ms=now)
    limit.r.pexpireat(key(algorithm), SENTINEL)
    acquire(limit, algorithm, now_ms=now + 10)
    assert expiry(limit, algorithm) != SENTINEL
