"""LimiterConfig: a limiter's spec as Python sees it."""
from __future__ import annotations

from typing import Any, Iterable, Optional, Tuple


class LimiterConfig:
    """A limiter's spec, immutable: what Client.get_config() returns and
    Limiter.config says.

    algorithm: its name; rates: a tuple of (limit, period_seconds), the
    first rate first (several are enforced together, all or nothing);
    bursts: one per rate, None where the burst is the limit; initial_tokens:
    None (a new entity starts full), 0 (empty) or n; per_client: True when
    each client (Client.client_id) has a quota of its own. str() gives the
    core's text, e.g. "gcra 10/second;1000/hour burst 20 per_client".
    """

    __slots__ = ("algorithm", "rates", "bursts", "initial_tokens", "per_client", "_text")

    def __init__(self, algorithm: str, rates: Iterable[Tuple[int, float]], bursts: Iterable[Optional[int]],
                 initial_tokens: Optional[int], per_client: bool, text: str) -> None:
        set_ = object.__setattr__
        set_(self, "algorithm", algorithm)
        set_(self, "rates", tuple(tuple(r) for r in rates))
        set_(self, "bursts", tuple(bursts))
        set_(self, "initial_tokens", initial_tokens)
        set_(self, "per_client", bool(per_client))
        set_(self, "_text", text)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("LimiterConfig is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("LimiterConfig is immutable")

    def _key(self) -> Tuple[Any, ...]:
        return (self.algorithm, self.rates, self.bursts, self.initial_tokens, self.per_client)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LimiterConfig):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return "LimiterConfig(algorithm=%r, rates=%r, bursts=%r, initial_tokens=%r, per_client=%r)" % self._key()
