"""lua/limit.lua assembled as the builds embed it (cmake/embed_lua.cmake:
each "--@include <path>" line is replaced by that file, relative to lua/),
and called directly with EVALSHA: for the script ops no binding sends yet
(5 LEASE, 6 GIVE_BACK) and for checking the script against the model."""
import hashlib
import os
import pathlib
import re
import struct
from typing import List, Optional, Sequence

import limiter_model as m

LUA = pathlib.Path(__file__).resolve().parents[2] / "lua"
OPS = {"acquire": 0, "peek": 1, "reserve": 2, "acquire_up_to": 3, "refund": 4, "lease": 5, "give_back": 6}
DURATIONS = (3, 4, 5)  # a reply's retry_after_ms, reset_after_ms, wait_ms


def core_refuses(spec: m.Spec, op: str, permits: int) -> bool:
    """What the core refuses before sending (the model's Invalid), so never sent."""
    return (op == "reserve" and spec.algorithm not in m.BUCKETS) or (op != "acquire_up_to" and permits > spec.capacity())


def assert_alike(got: list, want: list, where, slack_ms: int = 50) -> None:
    """Two replies of one decision made a few ms apart under the server's
    clock: the same but for durations, which may differ by that much."""
    assert [g for i, g in enumerate(got) if i not in DURATIONS] == \
        [w for i, w in enumerate(want) if i not in DURATIONS], (where, got, want)
    assert all(abs(got[i] - want[i]) <= slack_ms for i in DURATIONS), (where, got, want)


def text(name: str = "limit") -> str:
    out = (LUA / f"{name}.lua").read_text()
    for line in re.findall(r"--@include [^\n]+", out):
        out = out.replace(line + "\n", (LUA / line[len("--@include "):]).read_text())
    return out


def sha1(name: str = "limit") -> str:
    return hashlib.sha1(text(name).encode()).hexdigest()


class Limit:
    """EVALSHA of the limit script on one redis-py connection."""

    def __init__(self, r):
        self.r = r
        self.sha = r.script_load(text())

    @staticmethod
    def args(spec: m.Spec, op: str, permits: int, now_ms: int, max_wait_ms: int = 0,
             handles: Optional[List[str]] = None) -> list:
        """ARGV as the C core builds it (rl_build_decision)."""
        initial = -1 if spec.initial_tokens is None else spec.initial_tokens
        args = [now_ms, spec.algorithm, OPS[op], permits, max_wait_ms, initial]
        for rate in spec.rates:
            args += [rate.limit, rate.period, rate.capacity(spec.algorithm)]
        return args + (handles or [])

    @staticmethod
    def short_args(spec: m.Spec, op: str, permits: int, now_ms: int = 0, max_wait_ms: int = 0) -> Optional[list]:
        """ARGV in the short form (algorithm, then op, permits, limit, period,
        burst packed as five little-endian int64, complemented), where the core sends it:
        one rate, the server's clock, no max wait, no initial tokens, ops 0-4
        but acquire up to; else None."""
        if (len(spec.rates) != 1 or now_ms != 0 or max_wait_ms != 0 or spec.initial_tokens is not None
                or op not in ("acquire", "peek", "reserve", "refund")):
            return None
        rate = spec.rates[0]
        numbers = (OPS[op], permits, rate.limit, rate.period, rate.capacity(spec.algorithm))
        return [spec.algorithm, struct.pack("<5q", *(~n for n in numbers))]

    def call(self, keys: Sequence[str], spec: m.Spec, op: str, permits: int, now_ms: int, max_wait_ms: int = 0,
             handles: Optional[List[str]] = None) -> list:
        """The reply; a lease's without its last element, the server's time,
        kept in server_ms. A lease sends a fresh booking id, as the core."""
        args = self.args(spec, op, permits, now_ms, max_wait_ms, handles)
        if op == "lease":
            args.append(os.urandom(8).hex())
        reply = [x.decode() if isinstance(x, bytes) else x for x in self.r.evalsha(self.sha, len(keys), *keys, *args)]
        if op == "lease" and reply[0] == 1:
            self.server_ms = reply.pop()
        return reply
