"""Leases in the reference model (docs/semantics.md, Leases): the script's
op 5 LEASE and op 6 GIVE_BACK, stated from the rules rather than from the
script's formulas wherever the model's own primitives can say them:

  grant      a peek of 1 must pass on every rate (else the reply is an
             acquire of 1's denial); the block is min(want, max(1, half of
             the least remaining))
  booking    the block counts as taken at the latest time it may really be
             admitted, g + validity: the buckets take it from their state
             that much later (so nobody spends the refill of the validity),
             and a caller under another rate reads it back as taken at g;
             sliding_log logs it there; the windows count it in the window
             of g, and the validity ends at that window's last ms
  give back  only while the booking is still on top (the state holds the
             lease's id: the buckets' and gcra's while no other write came
             after it, the windows' while the window and period last and no
             later lease booked; equal values prove nothing); then the
             unused permits come off it, and (token_bucket, leaky_bucket,
             sliding_log, whose state says when it was written) the used
             ones count as taken at the latest time they may have been,
             min(now, g + validity), from the state before the grant

A lease is a list of records, one per rate, that only this model reads."""
from typing import Any, Dict, List, Optional

import limiter_model as m


class LeasedCall(tuple):
    """sliding_log's (t, permits, total) for a lease's block: told apart from an
    equal call by identity, as the script tells members apart by total."""


def validity(alg, v, valid: int) -> int:
    """The validity a rate grants: at most half the time to refill (drain)
    a full bucket, or of the period; the windows end it at their last ms."""
    rate = v["rate"]
    if alg is m.FixedWindow:
        return min(valid, v["start"] + rate.period - 1 - v["now"])
    if alg is m.SlidingWindow:
        return min(valid, rate.period - max(0, v["now"] - v["start"]) - 1)
    if alg is m.TokenBucket:
        return min(valid, m.TokenBucket.full(v) // (2 * rate.limit))
    if alg is m.Gcra:
        return min(valid, m.Gcra.tolerance(v) // 2000)
    return min(valid, rate.period // 2)  # sliding_log, leaky_bucket


def book(alg, v, n: int, valid: int):
    """(the view the lease writes, the record)."""
    now = v["now"]
    if alg in (m.FixedWindow, m.SlidingWindow):
        return alg.take(v, n), {"start": v["start"]}
    if alg is m.SlidingLog:
        taken = m.SlidingLog.take(v, n)  # the edge, the total and what slid out, as any call
        call = LeasedCall((max(now + valid, taken["calls"][-1][0]), n, taken["calls"][-1][2]))
        booked = dict(taken, calls=taken["calls"][:-1] + [call], live=taken["live"][:-1] + [call])
        return booked, {"call": call}
    booked = alg.take(m.later(alg, v, valid), n)
    if alg in (m.TokenBucket, m.LeakyBucket):
        booked["grant"] = ((v["rate"].limit, now, alg.take(v, n)["level" if alg is m.TokenBucket else "water"]),)
    return booked, {"state": alg.save(booked), "before": v, "g": now, "block": n, "end": now + valid}


def take_back(alg, v, stored, record, u: int, rate, now: int):
    """(view, given) after giving back u, or None when the booking is not
    on top."""
    if stored is None or (alg is not m.SlidingLog and stored.booking is not record["booking"]):
        return None
    if alg is m.FixedWindow:
        if v["start"] == record["start"] and v["count"] >= u:
            return alg.give(v, u), u
        return None
    if alg is m.SlidingWindow:
        if stored.state[3] != rate.period:
            return None
        if v["start"] == record["start"]:
            given = min(v["cur"], u)
            return dict(v, cur=v["cur"] - given), given
        if v["start"] == record["start"] + rate.period:
            given = min(v["prev"], u)
            return dict(v, prev=v["prev"] - given), given
        return None
    if alg is m.SlidingLog:
        call = record["call"]
        back = v["back"]
        if not v["calls"] or v["calls"][-1] is not call or u > call[1] \
                or now >= call[0] + rate.period or (back and back[1] > call[2] - call[1]):
            return None  # not on top, or a refund took permits of its call
        used, calls = call[1] - u, v["calls"][:-1]
        at = max([min(now, call[0])] + [c[0] for c in calls[-1:]])
        if used:
            calls = calls + [(at, used, calls[-1][2] + used if calls else used)]
        view = m.SlidingLog.load((tuple(calls), v["edge"], back if calls else None), rate, now)
        view["rearmed"] = at if used else None  # a ZREM alone sets no TTL
        return view, u
    if alg is m.Gcra:
        # a TAT alone cannot tell a refund and an acquire in between from nothing: the unused permits
        # come off the top, the used ones are not re-timed
        if stored.state != record["state"] or record["state"][1] != m.Gcra.interval(rate) \
                or u > record["block"]:
            return None
        return alg.give(v, u), u
    same_rate = not m.booked_elsewhere(record["state"], rate)
    if stored.state != record["state"] or not same_rate or u > record["block"] \
            or now < record["g"]:
        return None
    at = min(now, record["end"])
    w = m.later(alg, record["before"], at - record["g"])
    return m.later(alg, alg.take(w, record["block"] - u), now - at), u


def lease(model: m.Model, spec: m.Spec, id: str, want: int, valid: int, now: int):
    """(result with the eight fields, {key: ttl or None}, records or None
    when denied)."""
    alg = m.ALGORITHM[spec.algorithm]
    views = []
    for i, rate in enumerate(spec.rates):
        k = model.key(spec, id, i)
        views.append(alg.load(model.keys[k].state, rate, now) if k in model.keys
                     else alg.new(rate, now, spec.initial_tokens)[0])
    if not all(alg.admits(v, 1) for v in views):
        result, written = model.step(spec, id, m.ACQUIRE, 1, now)
        return result, written, None
    model.calls.append((now, spec))
    block = min(want, max(1, min(alg.remaining(v) for v in views) // 2))
    written: Dict[str, Optional[int]] = {}
    records: List[Dict[str, Any]] = []
    valids, after = [], []
    for i, v in enumerate(views):
        valids.append(validity(alg, v, valid))
        booked, record = book(alg, v, block, valids[-1])
        record["booking"] = object()  # the script's booking id: unique
        records.append(record)
        k = model.key(spec, id, i)
        expires = booked["now"] + alg.ttl(booked)
        model.keys[k] = m.Stored(alg.save(booked), expires, i, alg.name, v["rate"], record["booking"])
        written[k] = expires - now
        after.append(m.later(alg, booked, now - booked["now"]))  # as the others see it now
    result = model._combine(spec, alg, [(True, v, 0, -1) for v in after], block)
    result["wait_ms"] = min(valids)
    return result, written, records


def give_back(model: m.Model, spec: m.Spec, id: str, records: List[Dict[str, Any]], u: int, now: int):
    """(result, {key: ttl or None}, per rate: whether it gave back): each
    rate on its own."""
    alg = m.ALGORITHM[spec.algorithm]
    model.calls.append((now, spec))
    written: Dict[str, Optional[int]] = {}
    replies, given0, applied = [], 0, []
    for i, rate in enumerate(spec.rates):
        k = model.key(spec, id, i)
        stored = model.keys.get(k)
        v = alg.load(stored.state, rate, now) if stored else alg.new(rate, now, spec.initial_tokens)[0]
        out = take_back(alg, v, stored, records[i], u, rate, now)
        given = 0
        if out and alg is m.FixedWindow:  # the count alone: never the window's period or end
            v, given = out
            if v["count"]:
                model.keys[k] = m.Stored((v["start"], v["count"]), stored.expires, i, alg.name, stored.rate,
                                         stored.booking)
            else:
                del model.keys[k]
                written[k] = None
        elif out:
            v, given = out
            model._write(k, i, alg, v, written, refund=alg is m.SlidingLog)
        replies.append((True, v, 0, -1))
        applied.append(out is not None)
        if i == 0:
            given0 = given
    return model._combine(spec, alg, replies, given0), written, applied
