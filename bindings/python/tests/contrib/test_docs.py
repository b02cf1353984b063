"""The apps of docs/frameworks.md, run as written (pointed at the test's
Redis): each answers the 11th request of a 10/minute limit with a 429 that
carries Retry-After and the rate-limit fields of "Headers"."""
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from webcheck import check_headers

DOC = Path(__file__).resolve().parents[4] / "docs" / "frameworks.md"


def block(marker):
    """The Python block of docs/frameworks.md containing marker."""
    found = [b for b in re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M) if marker in b]
    assert len(found) == 1, "docs/frameworks.md: %d Python blocks contain %r" % (len(found), marker)
    return found[0]


def load(tmp_path, name, marker, url):
    path = tmp_path / (name + ".py")
    path.write_text(block(marker).replace("redis://127.0.0.1:6379/0", url))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def eleventh(get, path):
    """The 11th response; the first ten pass."""
    for i in range(10):
        assert get(path).status_code == 200, i
    r = get(path)
    assert r.status_code == 429
    return r


def check_429(headers, name):
    check_headers(headers, name, quota=10, window=60, remaining=0, reset_max=60, retry_after_max=6)


def test_decorating_a_function_sends_the_headers(tmp_path, serve, ratelimit_redis_url):
    app = load(tmp_path, "docs_decorated", "exceeded_headers(exc)", ratelimit_redis_url).app
    with httpx.Client(base_url=serve(app).base) as http:
        r = eleventh(http.get, "/items/1")
    assert r.json() == {"detail": "Too Many Requests"}
    check_429(r.headers, "items")


def test_fastapi_app(tmp_path, serve, ratelimit_redis_url):
    app = load(tmp_path, "docs_fastapi", "RateLimitMiddleware, url=", ratelimit_redis_url).app
    with httpx.Client(base_url=serve(app).base) as http:
        r = eleventh(http.get, "/items/1")
    # the default limit's member first, then the route's, which denied
    assert r.headers["ratelimit-policy"] == '"default";q=100;w=60, "docs_fastapi.read_item";q=10;w=60'
    assert r.headers["retry-after"] and r.headers["ratelimit-remaining"] == "0"


def test_flask_app(tmp_path, ratelimit_redis_url):
    module = load(tmp_path, "docs_flask", "from ratelimit.contrib.flask import", ratelimit_redis_url)
    r = eleventh(module.app.test_client().get, "/sms")
    assert r.headers["ratelimit-policy"] == '"default";q=100;w=60, "docs_flask.sms";q=10;w=60'
    assert r.headers["retry-after"] and r.headers["ratelimit-remaining"] == "0"
    module.limiter.close()


def test_django_one_file_app(tmp_path, ratelimit_redis_url):
    # its own process: settings.configure() happens once per process
    path = tmp_path / "docs_django.py"
    path.write_text(block("execute_from_command_line").replace("redis://127.0.0.1:6379/0", ratelimit_redis_url))
    script = ("import sys, json; sys.path.insert(0, %r); import docs_django, django; django.setup()\n"
              "from django.test import Client\n"
              "c = Client(); codes = [c.get('/').status_code for _ in range(10)]; r = c.get('/')\n"
              "print(json.dumps([codes, r.status_code, {k.lower(): v for k, v in r.items()}]))" % str(tmp_path))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    codes, status, headers = json.loads(p.stdout.splitlines()[-1])
    assert codes == [200] * 10 and status == 429
    check_429(headers, "docs_django.index")
