"""The ratelimit command line tool, run as a subprocess (python -m ratelimit,
and the console script) against real Redis servers."""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import pytest

import ratelimit


def run(url, *args, env=None, timeout=60):
    """(exit code, stdout, stderr) of `python -m ratelimit --url url args...`."""
    cmd = [sys.executable, "-m", "ratelimit"] + (["--url", url] if url else []) + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def js(url, *args):
    code, out, err = run(url, "--json", *args)
    return code, [json.loads(line) for line in out.splitlines()], err


def test_help_documents_the_exit_codes():
    code, out, _ = run(None, "--help")
    assert code == 0
    for line in ("0  done", "1  not found", "2  usage", "3  Redis", "REDIS_URL"):
        assert line in out


def test_console_script_is_installed():
    # where pip put it: the venv's bin/ratelimit, or Scripts\ratelimit.exe on Windows
    script = shutil.which("ratelimit", path=sysconfig.get_path("scripts")) or shutil.which("ratelimit")
    assert script
    p = subprocess.run([script, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "usage: ratelimit" in p.stdout


def test_config_set_get_delete(server, raw):
    url = server.url
    code, out, err = run(url, "config", "set", "api", "10/second;1000/hour", "--burst", "20",
                         "--algorithm", "token_bucket", "--per-client")
    assert code == 0 and out == "api: stored token_bucket 10/second burst 20;1000/hour per_client\n", err
    code, docs, _ = js(url, "config", "get", "api")
    assert code == 0 and docs == [{"algorithm": "token_bucket", "rates": [[10, 1.0], [1000, 3600.0]],
                                   "bursts": [20, None], "initial_tokens": None, "per_client": True,
                                   "text": "token_bucket 10/second burst 20;1000/hour per_client"}]
    # --json after the command too; --if-absent keeps what is stored (exit 1)
    code, docs, _ = js(url, "config", "set", "api", "1/second", "--if-absent")
    assert code == 1 and docs[0]["set"] is False and docs[0]["spec"]["rates"] == [[10, 1.0], [1000, 3600.0]]
    code, out, _ = run(url, "config", "get", "api")
    assert code == 0 and out == "api: token_bucket 10/second burst 20;1000/hour per_client\n"
    # what the tool stores, a client uses
    c = ratelimit.Client(url)
    try:
        assert c.limiter("api").per_client
    finally:
        c.close()
    assert run(url, "config", "delete", "api")[0] == 0
    code, out, _ = run(url, "config", "delete", "api")
    assert code == 1 and "no spec was stored" in out
    code, out, _ = run(url, "config", "get", "api")
    assert code == 1 and out == "no spec is stored for 'api'\n"
    code, docs, _ = js(url, "config", "get", "api")
    assert code == 1 and docs == [None]


def test_ls_show_reset(server, raw):
    url = server.url
    c = ratelimit.Client(url, client_id="web-1")
    try:
        # hours: neither the window nor the refill moves while the test runs
        # (a python start per command: seconds each under Wine)
        c.configure("sms", "5/hour", algorithm="fixed_window")
        c.limiter("sms").acquire("user:42", 2)
        # windows that outlast the test: a 1 s one could expire before `ls` reads it
        c.limiter("two", "3/10 seconds;10/minute", algorithm="sliding_window").acquire("a b")
        c.limiter("mine", (4, 3600), algorithm="token_bucket", per_client=True).acquire("x")
        c.semaphore("db", 2, 30).try_acquire()
    finally:
        c.close()
    code, docs, err = js(url, "ls")
    assert code == 0, err
    got = {(e["kind"], e["name"], e.get("id"), e.get("rate"), e.get("client")) for e in docs[0]}
    assert got == {("config", "sms", None, None, None), ("state", "sms", "user:42", 1, None),
                   ("state", "two", "a b", 1, None), ("state", "two", "a b", 2, None),
                   ("state", "mine", "x", 1, "web-1")}
    assert all(e["pttl"] > 0 for e in docs[0] if e["kind"] == "state")
    assert [e["pttl"] for e in docs[0] if e["kind"] == "config"] == [-1]
    code, docs, _ = js(url, "ls", "--all")
    assert any(e["kind"] == "semaphore" and e["name"] == "db" for e in docs[0])
    code, out, _ = run(url, "ls", "t*")
    assert code == 0 and "two" in out and "sms" not in out and "a b" in out
    assert run(url, "ls", "nothing*")[0] == 1

    # show: the stored spec, a peek, the raw fields
    code, docs, err = js(url, "show", "sms", "user:42")
    assert code == 0, err
    d = docs[0]
    assert d["spec"] == "fixed_window 5/hour" and d["peek"]["remaining"] == 3 and d["peek"]["limit"] == 5
    assert d["keys"][0]["key"] == "rl:{sms:user:42}:fixed_window" and d["keys"][0]["fields"]["count"] == "2"
    code, out, _ = run(url, "show", "sms", "user:42")
    assert code == 0 and "remaining 3 of 5" in out and "rl:{sms:user:42}:fixed_window (hash" in out
    # a spec given on the command line; two rates, two keys
    code, docs, _ = js(url, "show", "two", "a b", "--rate", "3/second;10/minute", "--algorithm", "sliding_window")
    assert code == 0 and [k["key"] for k in docs[0]["keys"]] == [
        "rl:{two:a%20b}:sliding_window", "rl:{two:a%20b}:sliding_window:2"]
    # per-client state is seen as that client
    code, docs, _ = js(url, "--client-id", "web-1", "show", "mine", "x", "--rate", "4/hour",
                       "--algorithm", "token_bucket", "--per-client")
    assert code == 0 and docs[0]["peek"]["remaining"] == 3
    # a given spec that disagrees with the stored one: usage error naming both
    code, out, err = run(url, "show", "sms", "u", "--rate", "9/minute")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "fixed_window 5/hour" in err
    # no spec stored nor given, no state
    code, _, err = run(url, "show", "unknown", "u")
    assert code == 1 and "give --rate" in err and len(err.splitlines()) == 1
    # a denied peek exits 1
    c = ratelimit.Client(url)
    c.limiter("sms").acquire("full", 5)
    c.close()
    code, docs, _ = js(url, "show", "sms", "full")
    assert code == 1 and docs[0]["peek"]["allowed"] is False and docs[0]["peek"]["retry_after"] > 0

    code, docs, _ = js(url, "reset", "sms", "user:42")
    assert code == 0 and docs == [{"name": "sms", "id": "user:42", "deleted": 1,
                                   "keys": ["rl:{sms:user:42}:fixed_window"]}]
    assert not raw.exists("rl:{sms:user:42}:fixed_window")
    code, out, _ = run(url, "reset", "sms", "user:42")
    assert code == 0 and out == "sms / user:42: reset (there was no state)\n"


def test_show_and_reset_find_the_state_without_a_spec(server, raw):
    """Limiters made with a rate in code (the web integrations, client.limiter(name, rate)) store no spec: show
    and reset work from the entity's keys, and take the algorithm from them."""
    url = server.url
    c = ratelimit.Client(url)
    try:
        c.limiter("fw", "3/minute", algorithm="fixed_window").acquire("u1")
        # each window outlasts a python start (seconds under Wine): both keys live
        c.limiter("two", "3/minute;10/hour", algorithm="sliding_log").acquire("u1")
        c.limiter("both", "3/minute", algorithm="gcra").acquire("u1")
        c.limiter("both", "3/minute", algorithm="token_bucket").acquire("u1")
    finally:
        c.close()
    # no spec, no --rate: the keys, whatever algorithm made them
    code, out, err = run(url, "show", "fw", "u1")
    assert code == 0, err
    assert out.splitlines()[0] == "fw / u1: fixed_window (no spec stored: give --rate for remaining and retry times)"
    assert "rl:{fw:u1}:fixed_window (hash" in out and "'count': '1'" in out
    code, docs, _ = js(url, "show", "two", "u1")
    assert code == 0 and [k["key"] for k in docs[0]["keys"]] == [
        "rl:{two:u1}:sliding_log", "rl:{two:u1}:sliding_log:2"] and docs[0]["peek"] is None
    # --rate without --algorithm: the algorithm of the state, and the rate as users write it
    code, docs, err = js(url, "show", "fw", "u1", "--rate", "3/minute")
    assert code == 0, err
    assert docs[0]["spec"] == "fixed_window 3/minute" and docs[0]["peek"]["remaining"] == 2
    # two algorithms' state under one name: which one is asked
    code, _, err = run(url, "show", "both", "u1", "--rate", "3/minute")
    assert code == 2 and "gcra, token_bucket" in err and "--algorithm" in err
    # an algorithm the entity has no state of, while it has another's: not found, naming it
    code, out, err = run(url, "reset", "fw", "u1", "--rate", "3/minute", "--algorithm", "gcra")
    assert code == 1 and "no gcra state" in err and "--algorithm fixed_window" in err
    assert raw.exists("rl:{fw:u1}:fixed_window")
    # the case: --rate, no --algorithm, a fixed_window key: deleted
    code, out, err = run(url, "reset", "fw", "u1", "--rate", "3/minute")
    assert code == 0 and out == "fw / u1: reset (1 key deleted: rl:{fw:u1}:fixed_window)\n", err
    assert not raw.exists("rl:{fw:u1}:fixed_window")
    # no spec, no --rate: every rate's key
    code, out, err = run(url, "reset", "two", "u1")
    assert code == 0 and "2 keys deleted" in out, err
    assert not raw.exists("rl:{two:u1}:sliding_log") and not raw.exists("rl:{two:u1}:sliding_log:2")
    # a later rate's key outlives the first's (10/hour vs 3/second): still found
    raw.hset("rl:{two:u2}:sliding_log:2", "x", "1")
    code, docs, _ = js(url, "reset", "two", "u2")
    assert code == 0 and docs[0]["keys"] == ["rl:{two:u2}:sliding_log:2"]
    # --algorithm alone picks among several algorithms' state
    code, out, err = run(url, "reset", "both", "u1", "--algorithm", "token_bucket")
    assert code == 0 and "rl:{both:u1}:token_bucket" in out, err
    assert raw.exists("rl:{both:u1}:gcra") and not raw.exists("rl:{both:u1}:token_bucket")
    # nothing at all
    code, _, err = run(url, "show", "nothing", "u1")
    assert code == 1 and "no state" in err and "give --rate" in err and len(err.splitlines()) == 1


def test_prefix_and_redis_url_env(server, raw):
    c = ratelimit.Client(server.url, prefix="other")
    c.limiter("p", "5/minute").acquire("u")
    c.close()
    env = dict(os.environ, REDIS_URL=server.url)
    code, out, _ = run(None, "ls", env=env)
    assert code == 1  # nothing under rl
    code, out, _ = run(None, "--prefix", "other", "ls", env=env)
    assert code == 0 and "other:{p:u}:gcra" in out


def test_watch(server, raw):
    c = ratelimit.Client(server.url)
    # 5 a second into a bucket of 50: empty, it takes longer to refill than
    # a python start takes (seconds under Wine)
    c.limiter("w", "50/10s", algorithm="token_bucket").acquire("u", 50)
    c.close()
    code, docs, err = js(server.url, "watch", "w", "u", "--rate", "50/10s", "--algorithm", "token_bucket",
                         "--interval", "0.3", "--count", "3")
    assert code == 0, err
    assert len(docs) == 3
    remaining = [d["peek"]["remaining"] for d in docs]
    assert remaining[0] < 50 and remaining[-1] >= remaining[0] + 2 and remaining == sorted(remaining)  # it refills
    assert docs[2]["time"] - docs[0]["time"] >= 0.55
    code, out, _ = run(server.url, "watch", "w", "u", "--rate", "50/10s", "--algorithm", "token_bucket",
                       "--interval", "0.05", "--count", "2")
    assert code == 0 and len(out.splitlines()) == 2 and all("remaining" in line for line in out.splitlines())


def test_bench(server, raw):
    code, docs, err = js(None, "bench", server.url, "--seconds", "0.5", "--threads", "2")
    assert code == 0, err
    d = docs[0]
    assert d["decisions"] > 50 and d["per_second"] > 100 and d["threads"] == 2
    assert raw.keys("rl:{ratelimit-bench:*") == []  # cleaned up
    code, out, _ = run(None, "bench", server.url, "--seconds", "0.2")
    assert code == 0 and "decisions/s" in out


def test_exit_codes_and_one_line_errors(server, dead_port):
    dead = "redis://127.0.0.1:%d/0" % dead_port
    for args in (("ls",), ("config", "get", "x"), ("show", "a", "b", "--rate", "1/s"), ("bench", dead)):
        code, out, err = run(dead, *args)
        assert code == 3, (args, err)
        assert out == "" and len(err.splitlines()) == 1 and err.startswith("ratelimit: ") and "Traceback" not in err
    for args in (("frob",), ("show", "a"), ("config",), ("ls", "--bogus"), ("bench",)):
        code, out, err = run(server.url, *args)
        assert code == 2 and len(err.splitlines()) == 1 and "--help" in err, (args, err)
    for args in (("config", "set", "x", "ten/second"), ("show", "x", "u", "--rate", "1/s", "--algorithm", "nope"),
                 ("config", "set", "x", "1/s", "--algorithm", "fixed_window", "--initial-tokens", "2")):
        code, out, err = run(server.url, *args)
        assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (args, err)
    code, out, err = run("redis://127.0.0.1:1:2:3", "ls")
    assert code == 2 and len(err.splitlines()) == 1


def test_ls_on_a_cluster(cluster_url):
    c = ratelimit.Client(cluster_url)
    names = ["cl-%d" % i for i in range(30)]  # spread over every master
    try:
        for n in names:
            c.limiter(n, "5/minute").acquire("u")
        assert len(c._masters()) >= 2
    finally:
        code, docs, err = js(cluster_url, "ls", "cl-*")
        for n in names:
            c.limiter(n, "5/minute").reset("u")
        c.close()
    assert code == 0, err
    assert sorted(e["name"] for e in docs[0]) == sorted(names)


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket", "leaky_bucket"])
def test_show_lists_the_leases_the_state_shows(server, raw, algorithm):
    """A leased block is booked as of the end of its validity: show says so
    while a client holds it, and not once it was given back."""
    url = server.url
    with ratelimit.Client(url) as c:
        lim = c.limiter("hot", "1000/minute", algorithm=algorithm, lease=20.0)
        assert all(lim.acquire("u1") for _ in range(20))
        code, docs, err = js(url, "show", "hot", "u1", "--rate", "1000/minute", "--algorithm", algorithm)
        assert code == 0, err
        leased = docs[0]["keys"][0]["leased"]
        assert 0 < leased["ahead_ms"] <= 20000
        if algorithm == "sliding_log":
            assert 1 <= leased["permits"] <= 20
        code, out, _ = run(url, "show", "hot", "u1", "--rate", "1000/minute", "--algorithm", algorithm)
        assert "    leased: " in out and "from now" in out
        lim.close()  # given back: nothing booked ahead any more
        code, docs, _ = js(url, "show", "hot", "u1", "--rate", "1000/minute", "--algorithm", algorithm)
        assert code == 0 and "leased" not in docs[0]["keys"][0]
