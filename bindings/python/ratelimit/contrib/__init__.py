"""Web framework integrations, each an optional extra:

- ratelimit.contrib.asgi: ASGI middleware (Starlette, FastAPI): pip install ratelimit-core[fastapi]
- ratelimit.contrib.fastapi: Depends(RateLimit("10/minute", key=...))
- ratelimit.contrib.flask: RateLimit(app, url=...), @limiter.limit(...): [flask]
- ratelimit.contrib.django: middleware and @limit(...), settings RATELIMIT_*: [django]

Keys are shared by all: "remote_addr" / remote_address() (X-Forwarded-For
only with trusted_proxies), "header:<Name>" / header(name), "user" / user(),
or a callable given the framework's request. The headers and the
on_redis_error policy are the same everywhere: docs/frameworks.md;
exceeded_headers(exc) gives them to a 429 handler of your own.
"""
from ._common import Key, exceeded_headers, header, remote_address, user

__all__ = ["Key", "exceeded_headers", "header", "remote_address", "user"]
