"""FastAPI and the ASGI middleware, served by uvicorn on a loopback port."""
import asyncio
import contextlib

import httpx
import pytest
from webcheck import check_headers, check_leased, check_outage_logged, check_redis_down, no_rate_limit_headers
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

import ratelimit
from ratelimit import aio
from ratelimit.contrib import header
from ratelimit.contrib.fastapi import RateLimit, RateLimitMiddleware
from ratelimit.testing import RedisServer


def items_app(url, **options):
    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, url=url, **options)

    @app.get("/items/{item_id}", dependencies=[Depends(RateLimit("2/minute", name="items",
                                                                   algorithm="fixed_window"))])
    async def read_item(item_id: int, q: str = ""):
        return {"item_id": item_id, "q": q}

    @app.get("/keyed", dependencies=[Depends(RateLimit("2/minute", key=header("X-Api-Key"), name="keyed",
                                                       algorithm="fixed_window"))])
    async def keyed():
        return {"ok": True}

    @app.get("/free")
    async def free():
        return {"ok": True}
    return app


def test_dependency_200s_then_429_with_exact_headers(ratelimit_redis_url, serve):
    base = serve(items_app(ratelimit_redis_url)).base
    with httpx.Client(base_url=base) as http:
        r = http.get("/items/7", params={"q": "x"})
        assert r.status_code == 200 and r.json() == {"item_id": 7, "q": "x"}
        check_headers(r.headers, "items", quota=2, window=60, remaining=1, reset_max=60)
        r = http.get("/items/8")
        assert r.status_code == 200
        check_headers(r.headers, "items", quota=2, window=60, remaining=0, reset_max=60)
        r = http.get("/items/9")
        assert r.status_code == 429 and r.json() == {"detail": "Too Many Requests"}
        check_headers(r.headers, "items", quota=2, window=60, remaining=0, reset_max=60, retry_after_max=60)
        # headers exactly once each, even though the middleware rewrites them
        assert len(r.headers.get_list("retry-after")) == 1 and len(r.headers.get_list("ratelimit")) == 1
        r = http.get("/free")
        assert r.status_code == 200 and no_rate_limit_headers(r.headers)


def test_per_key_isolation(ratelimit_redis_url, serve):
    base = serve(items_app(ratelimit_redis_url)).base
    with httpx.Client(base_url=base) as http:
        a = {"X-Api-Key": "key-a"}
        assert [http.get("/keyed", headers=a).status_code for _ in range(3)] == [200, 200, 429]
        r = http.get("/keyed", headers={"X-Api-Key": "key-b"})
        assert r.status_code == 200
        check_headers(r.headers, "keyed", quota=2, window=60, remaining=1, reset_max=60)
        # without the header: limited by address, apart from both keys
        assert http.get("/keyed").status_code == 200
    raw = ratelimit.Client(ratelimit_redis_url)
    lim = raw.limiter("keyed", (2, 60.0), algorithm="fixed_window")
    assert lim.peek("header:key-a").remaining == 0
    assert lim.peek("header:key-b").remaining == 1
    assert lim.peek("127.0.0.1").remaining == 1
    raw.close()


def test_middleware_default_limit_and_trusted_proxies(ratelimit_redis_url, serve):
    app = items_app(ratelimit_redis_url, default="1/minute", algorithm="fixed_window", name="site",
                    trusted_proxies=1, headers=False)
    with httpx.Client(base_url=serve(app).base) as http:
        one = {"X-Forwarded-For": "198.51.100.1, 203.0.113.1"}  # the proxy appended 203.0.113.1
        r = http.get("/free", headers=one)
        assert r.status_code == 200 and no_rate_limit_headers(r.headers)  # headers=False
        r = http.get("/free", headers=one)
        assert r.status_code == 429 and r.json() == {"detail": "Too Many Requests"}
        assert r.headers["content-type"] == "application/json"
        check_headers(r.headers, "site", quota=1, window=60, remaining=0, reset_max=60, retry_after_max=60)
        # another client behind the same proxy; the spoofable left part is not the key
        assert http.get("/free", headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.2"}).status_code == 200


def test_forwarded_for_is_ignored_without_trusted_proxies(ratelimit_redis_url, serve):
    app = items_app(ratelimit_redis_url, default="1/minute", algorithm="fixed_window", name="site")
    with httpx.Client(base_url=serve(app).base) as http:
        assert http.get("/free", headers={"X-Forwarded-For": "203.0.113.1"}).status_code == 200
        r = http.get("/free", headers={"X-Forwarded-For": "203.0.113.2"})
        assert r.status_code == 429  # both are 127.0.0.1
    lim = ratelimit.Client(ratelimit_redis_url).limiter("site", (1, 60.0), algorithm="fixed_window")
    assert lim.peek("127.0.0.1").remaining == 0 and lim.peek("203.0.113.1").remaining == 1


def test_an_outage_is_logged_once_and_its_end_too(serve, caplog):
    with RedisServer() as server:
        base = serve(items_app(server.url, on_redis_error="allow", timeout=0.3, connect_timeout=0.3)).base
        with httpx.Client(base_url=base) as http:
            check_outage_logged(http.get, server, caplog)


@pytest.mark.parametrize("policy", ["allow", "deny"])
def test_redis_down_at_start_never_500(down_url, serve, policy):
    app = items_app(down_url, on_redis_error=policy, default="100/minute", timeout=0.2, connect_timeout=0.2)
    with httpx.Client(base_url=serve(app).base, timeout=10) as http:
        check_redis_down(http.get, policy)


def test_redis_dies_while_serving(serve):
    server = RedisServer()
    try:
        app = items_app(server.url, on_redis_error="allow", timeout=0.3, connect_timeout=0.3)
        with httpx.Client(base_url=serve(app).base, timeout=10) as http:
            assert http.get("/items/1").status_code == 200
            assert http.get("/items/2").status_code == 200
            assert http.get("/items/3").status_code == 429
            server.stop()
            r = http.get("/items/4")  # fails open now
            assert r.status_code == 200 and no_rate_limit_headers(r.headers)
    finally:
        server.stop()


def test_async_key_and_exemption(ratelimit_redis_url, serve):
    async def key(request):
        return None if request.headers.get("x-internal") == "yes" else request.headers.get("x-user", "anon")

    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, url=ratelimit_redis_url)

    @app.get("/x", dependencies=[Depends(RateLimit("1/minute", key=key, algorithm="fixed_window"))])
    async def x():
        return "x"

    with httpx.Client(base_url=serve(app).base) as http:
        assert http.get("/x", headers={"x-user": "u1"}).status_code == 200
        assert http.get("/x", headers={"x-user": "u1"}).status_code == 429
        r = http.get("/x", headers={"x-user": "u1", "x-internal": "yes"})
        assert r.status_code == 200 and no_rate_limit_headers(r.headers)  # exempt: no decision
    # the default name is the endpoint's dotted path
    lim = ratelimit.Client(ratelimit_redis_url).limiter(
        "test_fastapi.test_async_key_and_exemption.<locals>.x", (1, 60.0), algorithm="fixed_window")
    assert lim.peek("u1").remaining == 0


def test_dependency_without_middleware_is_a_clear_error():
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""})
    with pytest.raises(RuntimeError, match="RateLimitMiddleware"):
        asyncio.run(RateLimit("1/minute")(request))


def test_limit_decorator_on_an_endpoint_with_more_parameters(ratelimit_redis_url, serve):
    """The issue's TypeError: the key gets only the arguments it names, so
    the decorator works on an endpoint with path and query parameters."""
    client = aio.AsyncClient(ratelimit_redis_url)
    lim = client.limiter("deco", "1/minute", algorithm="fixed_window")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await client.close()

    app = FastAPI(lifespan=lifespan)

    @app.exception_handler(ratelimit.RateLimitExceeded)
    async def too_many(request, exc):
        return JSONResponse({"detail": "slow down"}, status_code=429)

    @app.get("/items/{item_id}")
    @lim.limit(key=lambda request: request.headers["x-user"])
    async def read_item(item_id: int, request: Request, q: str = ""):
        return {"item_id": item_id, "q": q}

    with httpx.Client(base_url=serve(app).base) as http:
        r = http.get("/items/5", params={"q": "z"}, headers={"x-user": "ann"})
        assert r.status_code == 200 and r.json() == {"item_id": 5, "q": "z"}
        assert http.get("/items/6", headers={"x-user": "ann"}).status_code == 429
        assert http.get("/items/6", headers={"x-user": "bob"}).status_code == 200


def test_lease_per_dependency_and_for_the_default(ratelimit_redis_url, serve):
    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, url=ratelimit_redis_url, default="100000/minute", lease=5.0)

    @app.get("/hot", dependencies=[Depends(RateLimit("100000/minute", name="hot", lease=5.0))])
    async def hot():
        return {"ok": True}

    with httpx.Client(base_url=serve(app).base) as http:
        check_leased(http.get, ratelimit_redis_url, "/hot")


def test_bad_lease_is_refused_where_configured(ratelimit_redis_url):
    with pytest.raises(ratelimit.InvalidArgument, match="lease must be in"):
        RateLimit("1/minute", lease=7200)
    with pytest.raises(ratelimit.InvalidArgument, match="lease must be in"):
        RateLimitMiddleware(FastAPI(), url=ratelimit_redis_url, default="1/minute", lease=0)
