"""Django middleware and decorator, through Django's test client (the sync
path) and an async view."""
import django
import pytest
from webcheck import check_headers, check_leased, check_redis_down, no_rate_limit_headers
from django.conf import settings

if not settings.configured:
    settings.configure(
        DEBUG=False, SECRET_KEY="test", ALLOWED_HOSTS=["testserver"], ROOT_URLCONF=__name__,
        INSTALLED_APPS=[], MIDDLEWARE=[__name__ + ".fake_auth", "ratelimit.contrib.django.RateLimitMiddleware"],
        RATELIMIT_URL="redis://127.0.0.1:1/0")
    django.setup()

from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.urls import path  # noqa: E402

import ratelimit  # noqa: E402
from ratelimit.contrib.django import limit  # noqa: E402
from ratelimit.testing import RedisServer  # noqa: E402


class User:
    is_authenticated = True

    def __init__(self, pk):
        self.pk = pk


def fake_auth(get_response):
    """Stands in for AuthenticationMiddleware: X-Test-User names the user."""
    def middleware(request):
        pk = request.headers.get("X-Test-User")
        if pk:
            request.user = User(int(pk))
        return get_response(request)
    return middleware


@limit("2/minute", name="items", algorithm="fixed_window")
def item(request, item_id):
    return JsonResponse({"item_id": item_id})


@limit("1/minute", key="user", name="per-user", algorithm="fixed_window")
def per_user(request):
    return HttpResponse("ok")


@limit("1/minute", key="header:X-Api-Key", name="async-keyed", algorithm="fixed_window")
async def async_view(request):
    return HttpResponse("async")


def free(request):
    return HttpResponse("free")


@limit("100000/minute", name="hot", lease=5.0)
def hot(request):
    return HttpResponse("ok")


urlpatterns = [
    path("items/<int:item_id>", item),
    path("user", per_user),
    path("async", async_view),
    path("free", free),
    path("hot", hot),
]


def test_200s_then_429_with_exact_headers(ratelimit_redis_url):
    with override_settings(RATELIMIT_URL=ratelimit_redis_url):
        http = Client()
        r = http.get("/items/7")
        assert r.status_code == 200 and r.json() == {"item_id": 7}
        check_headers(r.headers, "items", quota=2, window=60, remaining=1, reset_max=60)
        r = http.get("/items/8")
        check_headers(r.headers, "items", quota=2, window=60, remaining=0, reset_max=60)
        r = http.get("/items/9")
        assert r.status_code == 429 and r.content == b"Too Many Requests\n"
        check_headers(r.headers, "items", quota=2, window=60, remaining=0, reset_max=60, retry_after_max=60)
        r = http.get("/free")
        assert r.status_code == 200 and no_rate_limit_headers(r.headers)


def test_user_key_isolation(ratelimit_redis_url):
    with override_settings(RATELIMIT_URL=ratelimit_redis_url, RATELIMIT_HEADERS=False):
        http = Client()
        r = http.get("/user", HTTP_X_TEST_USER="1")
        assert r.status_code == 200 and no_rate_limit_headers(r.headers)  # RATELIMIT_HEADERS=False
        r = http.get("/user", HTTP_X_TEST_USER="1")
        assert r.status_code == 429
        check_headers(r.headers, "per-user", quota=1, window=60, remaining=0, reset_max=60, retry_after_max=60)
        assert http.get("/user", HTTP_X_TEST_USER="2").status_code == 200
        assert http.get("/user").status_code == 200  # anonymous: by address
        lim = ratelimit.Client(ratelimit_redis_url).limiter("per-user", (1, 60.0), algorithm="fixed_window")
        assert [lim.peek(i).remaining for i in ("user:1", "user:2", "127.0.0.1", "user:3")] == [0, 0, 0, 1]


def test_async_view(ratelimit_redis_url):
    with override_settings(RATELIMIT_URL=ratelimit_redis_url):
        http = Client()
        r = http.get("/async", HTTP_X_API_KEY="k1")
        assert r.status_code == 200 and r.content == b"async"
        check_headers(r.headers, "async-keyed", quota=1, window=60, remaining=0, reset_max=60)
        assert http.get("/async", HTTP_X_API_KEY="k1").status_code == 429
        assert http.get("/async", HTTP_X_API_KEY="k2").status_code == 200


def test_default_limit_with_trusted_proxies(ratelimit_redis_url):
    with override_settings(RATELIMIT_URL=ratelimit_redis_url, RATELIMIT_DEFAULT="2/minute", RATELIMIT_NAME="site",
                           RATELIMIT_ALGORITHM="fixed_window", RATELIMIT_TRUSTED_PROXIES=1):
        http = Client()
        one = {"HTTP_X_FORWARDED_FOR": "198.51.100.1, 203.0.113.1"}
        r = http.get("/items/1", **one)
        # both decisions: the policy lists both, the trio shows the one with the least left
        assert r.status_code == 200
        assert r.headers["RateLimit-Policy"] == '"site";q=2;w=60, "items";q=2;w=60'
        assert r.headers["RateLimit"].startswith('"site";r=1;t=') and '"items";r=1;t=' in r.headers["RateLimit"]
        assert http.get("/free", **one).status_code == 200
        r = http.get("/free", **one)
        assert r.status_code == 429
        check_headers(r.headers, "site", quota=2, window=60, remaining=0, reset_max=60, retry_after_max=60)
        assert http.get("/free", HTTP_X_FORWARDED_FOR="198.51.100.1, 203.0.113.2").status_code == 200


@pytest.mark.parametrize("policy", ["allow", "deny"])
def test_redis_down_never_500(down_url, policy):
    with override_settings(RATELIMIT_URL=down_url, RATELIMIT_ON_REDIS_ERROR=policy, RATELIMIT_DEFAULT="9/minute",
                           RATELIMIT_TIMEOUT=0.2, RATELIMIT_CONNECT_TIMEOUT=0.2):
        check_redis_down(Client().get, policy)


def test_redis_dies_while_serving():
    with RedisServer() as server, override_settings(RATELIMIT_URL=server.url, RATELIMIT_TIMEOUT=0.3,
                                                    RATELIMIT_CONNECT_TIMEOUT=0.3):
        http = Client()
        assert http.get("/items/1").status_code == 200
        server.stop()
        r = http.get("/items/2")  # on_redis_error defaults to allow
        assert r.status_code == 200 and no_rate_limit_headers(r.headers)


def test_bad_settings_are_clear_errors():
    with override_settings(RATELIMIT_ON_REDIS_ERROR="raise"):
        with pytest.raises(ratelimit.InvalidArgument, match="on_redis_error"):
            Client().get("/free")
    with override_settings(RATELIMIT_URL=""):
        with pytest.raises(ratelimit.InvalidArgument, match="RATELIMIT_URL"):
            Client().get("/free")


def test_lease_per_limit_and_for_the_default(ratelimit_redis_url):
    with override_settings(RATELIMIT_URL=ratelimit_redis_url, RATELIMIT_DEFAULT="100000/minute",
                           RATELIMIT_LEASE=5.0):
        check_leased(Client().get, ratelimit_redis_url, "/hot")
        from ratelimit.contrib.django import _integration
        stats = _integration().client.stats()
        assert stats["default"]["local_allowed"] > 0 and stats["hot"]["local_allowed"] > 0


def test_bad_lease_is_refused_where_configured():
    with pytest.raises(ratelimit.InvalidArgument, match="lease must be in"):
        limit("1/minute", lease=float("nan"))
    with override_settings(RATELIMIT_LEASE="50ms"):
        with pytest.raises(TypeError, match="lease must be a number of seconds"):
            Client().get("/free")
