import ratelimit


def test_acquire_counts_down_then_denies(client, raw):
    lim = client.limiter("sms", "3/minute", algorithm="fixed_window")
    results = [lim.acquire("user-42") for _ in range(4)]
    assert [bool(r) for r in results] == [True, True, True, False]
    assert [r.remaining for r in results[:3]] == [2, 1, 0]
    assert results[0].retry_after is None
    assert 59.0 < results[3].retry_after <= 60.0
    assert raw.exists(lim.key("user-42"))
    assert lim.key("user-42") == "rl:{sms:user-42}:fixed_window"


def test_version_and_scripts():
    assert ratelimit.__version__.count(".") == 2
    names = [n for n, _ in ratelimit.scripts()]
    assert "gcra" in names and "semaphore" in names
    assert ratelimit.ALGORITHMS == ("fixed_window", "sliding_log", "sliding_window",
                                    "token_bucket", "leaky_bucket", "gcra")
