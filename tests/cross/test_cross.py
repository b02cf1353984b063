"""Python, Java and C processes sharing one limiter on one Redis: one limit,
the same keys, the same scripts. Needs RL_JAR (the ratelimit jar) and
RL_C_WORKER (build/tests/cross/c_worker); tests/run.sh sets both."""
import concurrent.futures
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent
ALGORITHMS = ["fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra"]


@pytest.fixture(scope="module")
def url(redis_port):
    return f"redis://127.0.0.1:{redis_port}"


def commands():
    jar, c_worker = os.environ.get("RL_JAR"), os.environ.get("RL_C_WORKER")
    assert jar and pathlib.Path(jar).is_file(), "set RL_JAR to the built ratelimit jar"
    assert c_worker and pathlib.Path(c_worker).is_file(), "set RL_C_WORKER to build/tests/cross/c_worker"
    return {
        "python": [sys.executable, str(HERE / "worker.py")],
        "java": ["java", "-cp", jar, str(HERE / "Worker.java")],
        "c": [c_worker],
    }


def run(lang, url, *args):
    out = subprocess.run(commands()[lang] + [url, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{lang} worker failed: {out.stderr}"
    return out.stdout.split()


def redis(url, *args):
    port = url.rsplit(":", 1)[1]
    return subprocess.run(["redis-cli", "-p", port, *args], capture_output=True, text=True,
                          check=True).stdout.split()


def test_same_scripts_everywhere(url):
    shas = {lang: run(lang, url, "scripts") for lang in ("python", "java", "c")}
    assert shas["python"] == shas["java"] == shas["c"]
    assert len(shas["c"]) == 8  # limit, config, semaphore, delay_queue: name and sha each


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_consumption_shows_in_every_language(url, algorithm):
    redis(url, "FLUSHALL")
    spec = (algorithm, 10, 86400000, f"cross-{algorithm}", "user-42")  # a day: no window boundary mid-test
    allowed, remaining, *_ = run("python", url, "step", *spec, "acquire", 3)
    assert (allowed, remaining) == ("1", "7")
    allowed, remaining, *_ = run("java", url, "step", *spec, "peek", 1)
    assert (allowed, remaining) == ("1", "7")
    allowed, remaining, *_ = run("c", url, "step", *spec, "acquire", 2)
    assert (allowed, remaining) == ("1", "5")
    allowed, remaining, *_ = run("java", url, "step", *spec, "acquire", 5)
    assert (allowed, remaining) == ("1", "0")
    allowed, remaining, retry, _ = run("python", url, "step", *spec, "peek", 1)
    assert (allowed, remaining) == ("0", "0") and int(retry) > 0
    allowed, *_ = run("c", url, "step", *spec, "acquire", 1)
    assert allowed == "0"
    # one key, the same one whichever language wrote it
    assert redis(url, "KEYS", "*") == [f"rl:{{cross-{algorithm}:user-42}}:{algorithm}"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_mixed_concurrent_load_admits_exactly_the_limit(url, algorithm):
    redis(url, "FLUSHALL")
    spec = (algorithm, 300, 86400000, f"mixed-{algorithm}", "shared")
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(run, lang, url, "burst", *spec, 8, 60) for lang in ("python", "java", "c")]
        admitted = [int(f.result()[0]) for f in futures]
    assert sum(admitted) == 300, admitted


def test_same_keys_whichever_language(url):
    seen = {}
    for lang in ("python", "java", "c"):
        redis(url, "FLUSHALL")
        for algorithm in ALGORITHMS:
            run(lang, url, "step", algorithm, 5, 1000 * 60, "keys", "user:1", "acquire", 1)
        seen[lang] = sorted(redis(url, "--scan"))
    assert seen["python"] == seen["java"] == seen["c"]
    assert len(seen["c"]) == len(ALGORITHMS)


def test_a_rate_java_stores_reaches_a_running_python_process(url):
    """Java changes a stored spec (client.configure); a Python process already
    running on client.limiter(name), no rate, obeys the new rate within its
    config_refresh, the bound the core documents, and the count made under
    the old rate carries over."""
    redis(url, "FLUSHALL")
    name, refresh_s, slack_ms = "live-config", 0.5, 400
    day = 86400000
    run("java", url, "configure", "fixed_window", 2, day, name)
    follower = subprocess.Popen(commands()["python"] + [url, "follow", name, "u", str(refresh_s), "60", "10"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = []
        for line in follower.stdout:  # until the old rate (2 a day) denies
            seen.append(tuple(map(int, line.split())))
            if seen[-1][1:] == (2, 0):
                break
        assert seen and seen[-1][1:] == (2, 0), f"the follower never hit the old rate: {seen}"
        changed_ms = int(run("java", url, "configure", "fixed_window", 10, day, name)[0])
        out, err = follower.communicate(timeout=90)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    seen += [tuple(map(int, line.split())) for line in out.split("\n") if line]
    first_new = min(t for t, limit, _ in seen if limit == 10)
    assert first_new - changed_ms <= refresh_s * 1000 + slack_ms, (first_new - changed_ms, seen[-5:])
    assert sum(allowed for _, limit, allowed in seen if limit == 2) == 2
    assert sum(allowed for _, _, allowed in seen) == 10, "the window kept its count across the change"
    assert seen[-1][1:] == (10, 0)
    assert redis(url, "PTTL", f"rl:config:{name}") == ["-1"]
