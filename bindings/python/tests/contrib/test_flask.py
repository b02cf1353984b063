"""The Flask extension, through Flask's test client (the sync path)."""
import pytest
from webcheck import check_headers, check_leased, check_outage_logged, check_redis_down, no_rate_limit_headers
from flask import Flask, jsonify

import ratelimit
from ratelimit.contrib.flask import RateLimit
from ratelimit.testing import RedisServer


def make_app(url=None, **options):
    app = Flask(__name__)
    if url:
        app.config["RATELIMIT_URL"] = url
    limiter = RateLimit(app, **options)

    @app.get("/items/<int:item_id>")
    @limiter.limit("2/minute", name="items", algorithm="fixed_window")
    def item(item_id):
        return jsonify(item_id=item_id)

    @app.get("/keyed")
    @limiter.limit("2/minute", key="header:X-Api-Key", name="keyed", algorithm="fixed_window")
    def keyed():
        return "ok"

    @app.get("/flask-style")
    @limiter.limit("1/minute", key=lambda: "everyone", algorithm="fixed_window")  # Flask-Limiter's zero-arg key
    def flask_style():
        return "ok"

    @app.get("/free")
    def free():
        return "free"
    return app, limiter


def test_200s_then_429_with_exact_headers(ratelimit_redis_url):
    app, limiter = make_app(ratelimit_redis_url)
    http = app.test_client()
    r = http.get("/items/7")
    assert r.status_code == 200 and r.get_json() == {"item_id": 7}
    check_headers(r.headers, "items", quota=2, window=60, remaining=1, reset_max=60)
    r = http.get("/items/8")
    check_headers(r.headers, "items", quota=2, window=60, remaining=0, reset_max=60)
    r = http.get("/items/9")
    assert r.status_code == 429 and b"Too Many Requests" in r.data
    check_headers(r.headers, "items", quota=2, window=60, remaining=0, reset_max=60, retry_after_max=60)
    assert len(r.headers.getlist("Retry-After")) == 1
    r = http.get("/free")
    assert r.status_code == 200 and no_rate_limit_headers(r.headers)
    limiter.close()


def test_per_key_isolation_and_zero_argument_keys(ratelimit_redis_url):
    app, limiter = make_app(ratelimit_redis_url)
    http = app.test_client()
    a = {"X-Api-Key": "key-a"}
    assert [http.get("/keyed", headers=a).status_code for _ in range(3)] == [200, 200, 429]
    assert http.get("/keyed", headers={"X-Api-Key": "key-b"}).status_code == 200
    assert http.get("/keyed").status_code == 200  # by address
    assert [http.get("/flask-style").status_code for _ in range(2)] == [200, 429]
    lim = limiter.client.limiter("keyed", (2, 60.0), algorithm="fixed_window")
    assert (lim.peek("header:key-a").remaining, lim.peek("header:key-b").remaining,
            lim.peek("127.0.0.1").remaining) == (0, 1, 1)
    limiter.close()


def test_default_limit_config_and_trusted_proxies(ratelimit_redis_url):
    app = Flask(__name__)
    app.config.update(RATELIMIT_URL=ratelimit_redis_url, RATELIMIT_DEFAULT="1/minute", RATELIMIT_NAME="site",
                      RATELIMIT_ALGORITHM="fixed_window", RATELIMIT_TRUSTED_PROXIES=1, RATELIMIT_HEADERS=False)
    limiter = RateLimit()
    limiter.init_app(app)

    @app.get("/")
    def index():
        return "ok"

    @app.errorhandler(429)
    def too_many(e):
        return jsonify(error="slow down"), 429

    http = app.test_client()
    one = {"X-Forwarded-For": "198.51.100.1, 203.0.113.1"}
    r = http.get("/", headers=one)
    assert r.status_code == 200 and no_rate_limit_headers(r.headers)  # RATELIMIT_HEADERS=False
    r = http.get("/", headers=one)
    assert r.status_code == 429 and r.get_json() == {"error": "slow down"}  # the app's handler, our headers
    check_headers(r.headers, "site", quota=1, window=60, remaining=0, reset_max=60, retry_after_max=60)
    assert http.get("/", headers={"X-Forwarded-For": "198.51.100.1, 203.0.113.2"}).status_code == 200
    limiter.close()


@pytest.mark.parametrize("policy", ["allow", "deny"])
def test_redis_down_never_500(down_url, policy):
    app, limiter = make_app(down_url, on_redis_error=policy, default="100/minute", timeout=0.2,
                            connect_timeout=0.2)
    check_redis_down(app.test_client().get, policy)
    limiter.close()


def test_an_outage_is_logged_once_and_its_end_too(caplog):
    with RedisServer() as server:
        app, limiter = make_app(server.url, on_redis_error="allow", timeout=0.3, connect_timeout=0.3)
        check_outage_logged(app.test_client().get, server, caplog)
        limiter.close()


def test_redis_dies_while_serving():
    with RedisServer() as server:
        app, limiter = make_app(server.url, on_redis_error="deny", timeout=0.3, connect_timeout=0.3)
        http = app.test_client()
        assert http.get("/items/1").status_code == 200
        server.stop()
        r = http.get("/items/2")  # fails closed now
        assert r.status_code == 429 and r.headers["Retry-After"] == "1" and no_rate_limit_headers(r.headers)
        limiter.close()


def test_configuration_errors():
    with pytest.raises(ratelimit.InvalidArgument, match="RATELIMIT_URL"):
        RateLimit(Flask(__name__))
    with pytest.raises(ratelimit.InvalidArgument, match="on_redis_error"):
        RateLimit(Flask(__name__), url="redis://127.0.0.1:1/0", on_redis_error="raise")
    with pytest.raises(TypeError, match="unknown option"):
        RateLimit(url="redis://127.0.0.1:1/0", urll="x")
    with pytest.raises(ratelimit.InvalidArgument, match="key"):
        RateLimit(url="redis://127.0.0.1:1/0").limit("1/minute", key="cookie")
    with pytest.raises(ratelimit.InvalidArgument):
        RateLimit(url="redis://127.0.0.1:1/0").limit("ten a minute")


def test_lease_per_limit_and_for_the_default(ratelimit_redis_url):
    app = Flask(__name__)
    app.config.update(RATELIMIT_URL=ratelimit_redis_url, RATELIMIT_DEFAULT="100000/minute", RATELIMIT_LEASE=5.0)
    limiter = RateLimit(app)

    @app.get("/hot")
    @limiter.limit("100000/minute", name="hot", lease=5.0)
    def hot():
        return "ok"

    check_leased(app.test_client().get, ratelimit_redis_url, "/hot")
    stats = limiter.client.stats()
    assert stats["default"]["local_allowed"] > 0 and stats["hot"]["local_allowed"] > 0
    limiter.close()


def test_bad_lease_is_refused_where_configured(ratelimit_redis_url):
    limiter = RateLimit(url=ratelimit_redis_url)
    with pytest.raises(ratelimit.InvalidArgument, match="lease must be in"):
        limiter.limit("1/minute", lease=0)
    app = Flask(__name__)
    app.config.update(RATELIMIT_URL=ratelimit_redis_url, RATELIMIT_LEASE=-1.0)
    with pytest.raises(ratelimit.InvalidArgument, match="lease must be in"):
        RateLimit(app)
