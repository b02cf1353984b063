"""The shared conformance vectors, run through the Python binding. The C
runner (run_vectors.c) and the Java one (VectorsTest) read the same files."""
import json
import pathlib
import sys
import time

import pytest

import ratelimit

HERE = pathlib.Path(__file__).parent
# keys read over a socket of its own, not redis-cli: a Windows Python under Wine cannot run it
sys.path.insert(0, str(HERE.parent / "topology"))
from resp_client import call  # noqa: E402

FILES = sorted(p for p in HERE.glob("*.json") if "skeleton" not in p.name)
ERRORS = {ratelimit.InvalidArgument: "invalid", ratelimit.ConnectionError: "connection",
          ratelimit.Timeout: "timeout", ratelimit.RedisError: "redis"}


def ms(seconds):
    return round(seconds * 1000)


def retry_ms(r):
    # Python says None where C says -1 (allowed): compare the C value
    assert (r.retry_after is None) == r.allowed, r
    return -1 if r.retry_after is None else ms(r.retry_after)


def limiter_args(spec):
    """A vector spec (the C fields) as Client.limiter / configure take it."""
    rates = [spec] + spec.get("more", [])
    initial = spec.get("initial_tokens", 0)  # C: 0 full, -1 empty; Python: None full, 0 empty
    return ([(r["limit"], r["period_ms"] / 1000) for r in rates],
            {"algorithm": spec["algorithm"], "burst": [r["burst"] or None for r in rates],
             "initial_tokens": None if initial == 0 else 0 if initial == -1 else initial,
             "per_client": spec.get("scope") == "per_client"})


def spec_of(config):
    """A LimiterConfig as the vectors write a stored spec (no name; more,
    initial_tokens and scope left out when empty, full and overall)."""
    (limit, period), *more = config.rates
    out = {"algorithm": config.algorithm, "limit": limit, "period_ms": ms(period), "burst": config.bursts[0] or 0}
    if more:
        out["more"] = [{"limit": lim, "period_ms": ms(p), "burst": b or 0}
                       for (lim, p), b in zip(more, config.bursts[1:])]
    if config.initial_tokens is not None:
        out["initial_tokens"] = -1 if config.initial_tokens == 0 else config.initial_tokens
    if config.per_client:
        out["scope"] = "per_client"
    return out


def config_step(client, step):
    op = step["op"]
    if op == "config_set":
        rates, kw = limiter_args(step["spec"])
        return {"set": client.configure(step["name"], rates, if_absent=step.get("if_absent", False), **kw)}
    if op == "config_get":
        config = client.get_config(step["name"])
        return {"found": False} if config is None else {"found": True, "spec": spec_of(config)}
    return {"deleted": client.delete_config(step["name"])}


def limiter_step(client, spec, step, all_fields):
    op = step["op"]
    spec = step.get("spec", spec)  # a step's own spec replaces the case's (a rate change)
    if step.get("stored"):
        lim = client.limiter(spec["name"])
    else:
        rates, kw = limiter_args(spec)
        lim = client.limiter(spec["name"], rates, **kw)
    now = step.get("now_ms", 0) / 1000 or None
    if op == "reset":
        lim.reset(step["id"])
        return None
    if op == "acquire":
        r = lim.acquire(step["id"], step["permits"], now=now)
    elif op == "peek":
        r = lim.peek(step["id"], step["permits"], now=now)
    elif op == "acquire_up_to":
        r = lim.acquire_at_most(step["id"], step["permits"], now=now)
    elif op == "refund":
        r = lim.refund(step["id"], step["permits"], now=now)
    else:
        r = lim._reserve(step["id"], step["permits"], max_wait=step["max_wait_ms"] / 1000, now=now)
    out = {"allowed": r.allowed, "limit": r.limit, "remaining": r.remaining, "retry_after_ms": retry_ms(r),
           "reset_after_ms": ms(r.reset_after), "wait_ms": ms(r.wait)}
    if all_fields:
        out.update(granted=r.granted, rate_index=r.rate_index)
    return out


def primitive_step(client, step, saved):
    op = step["op"]
    name = step.get("name", step.get("queue"))
    permit_id = saved.get(step.get("permit"), step.get("permit"))
    if op in ("semaphore_acquire", "lock_acquire"):
        if op == "semaphore_acquire":
            got = client.semaphore(name, step["permits_max"], step["lease_ms"] / 1000).try_acquire()
        else:
            got = client.lock(name, step["lease_ms"] / 1000).try_acquire()
        if got and "save_as" in step:
            saved[step["save_as"]] = got.id
        return {"acquired": got is not None}
    sem = client.semaphore(name or "x", step.get("permits_max", 1) or 1, 1.0) if name else None
    if op in ("semaphore_release", "semaphore_refresh"):
        permit = ratelimit.Permit(client.semaphore(name, 1, 1.0), permit_id, 0, 1.0)
        done = permit.release() if op == "semaphore_release" else permit.refresh(step["lease_ms"] / 1000)
        return {"done": done}
    if op in ("lock_release", "lock_extend"):
        held = ratelimit.HeldLock(client.lock(name, 1.0), permit_id, 0, 1.0)
        return {"done": held.release() if op == "lock_release" else held.extend(step["lease_ms"] / 1000)}
    if op == "semaphore_holders":
        return {"count": sem.holders()}
    if op == "semaphore_available":
        return {"count": client.semaphore(name, step["permits_max"], 1.0).available()}
    q = client.delay_queue(name)
    if op == "queue_push":
        return {"added": q.push(step["message"], delay=step["delay_ms"] / 1000)}
    if op == "queue_pop_ready":
        return {"messages": q.pop_ready(max=step["max"])}
    if op == "queue_size":
        return {"count": q.size()}
    if op == "queue_remove":
        return {"done": q.remove(step["message"])}
    raise AssertionError(f"unknown op {op}")


def keys_step(port, step, where):
    names = sorted(call(port, "KEYS", "*"))
    expect = step["expect_keys"]
    assert names == [k["key"] for k in expect], where
    for k in expect:
        assert call(port, "TYPE", k["key"]) == k["type"], where
        pttl = call(port, "PTTL", k["key"])
        assert k["pttl_min"] <= pttl <= k["pttl_max"], f"{where}: {k['key']} PTTL {pttl}"
        # stored specs live until deleted; everything else expires
        assert pttl >= 0 or ":config:" in k["key"], f"{where}: {k['key']} has no TTL"


def cases():
    for path in FILES:
        doc = json.loads(path.read_text())
        for i, case in enumerate(doc["cases"]):
            yield pytest.param(doc, case, id=f"{path.stem}-{i}")


@pytest.mark.parametrize("doc,case", list(cases()))
def test_vector(redis_port, doc, case):
    call(redis_port, "FLUSHALL")
    all_fields = doc.get("fields") == "all"
    client = ratelimit.Client(f"redis://127.0.0.1:{redis_port}", prefix=doc["prefix"], timeout=5.0,
                              client_id=doc.get("client_id"))
    saved = {}
    try:
        for i, step in enumerate(case["steps"]):
            where = f"{case['name']} step {i} ({step['op']})"
            if step["op"] == "keys":
                keys_step(redis_port, step, where)
                continue
            if step["op"] == "sleep":
                time.sleep(step["ms"] / 1000)
                continue
            try:
                if step["op"].startswith("config_"):
                    actual = config_step(client, step)
                elif "spec" in case:
                    actual = limiter_step(client, case["spec"], step, all_fields)
                else:
                    actual = primitive_step(client, step, saved)
            except ratelimit.RateLimitError as e:
                kind = next((v for k, v in ERRORS.items() if isinstance(e, k)), "other")
                assert step.get("expect_error") == kind, f"{where}: raised {e!r}"
                continue
            assert "expect_error" not in step, f"{where}: expected error {step['expect_error']}, got {actual}"
            if "expect" in step:
                assert actual == step["expect"], where
    finally:
        client.close()


def test_enough_steps():
    total = sum(len(c["steps"]) for p in FILES for c in json.loads(p.read_text())["cases"])
    assert total >= 150
