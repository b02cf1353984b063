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
    assert len(shas["c"]) >= 16  # 8+ scripts, name and sha each


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
