"""The exceptions (classes made by the C extension, in its module state) and
how a denial becomes RateLimitExceeded."""
from __future__ import annotations

from typing import Any, Optional

from ._ratelimit import RateLimitExceeded, Result


def _exceeded(result: Result, message: str, limiter: Any = None) -> RateLimitExceeded:
    exc = RateLimitExceeded(message)
    exc.retry_after = result.retry_after
    exc.result = result
    exc.limiter = limiter  # for a 429 handler's headers (ratelimit.contrib.exceeded_headers)
    return exc


def _init_exceeded(self: RateLimitExceeded, retry_after: Optional[float] = None, *args: Any) -> None:
    """RateLimitExceeded(retry_after=None, message=None): the message defaults
    to one naming retry_after."""
    if isinstance(retry_after, str) and not args:
        message, retry_after = retry_after, None
    else:
        message = args[0] if args else (
            "rate limit exceeded" if retry_after is None
            else "rate limit exceeded; retry after %.3f s" % retry_after)
    Exception.__init__(self, message)
    self.retry_after = retry_after
    self.result = None
    self.limiter = None


# the class is made in C (module state); its constructor is easier here
setattr(RateLimitExceeded, "__init__", _init_exceeded)
setattr(RateLimitExceeded, "retry_after", None)
setattr(RateLimitExceeded, "result", None)
setattr(RateLimitExceeded, "limiter", None)
