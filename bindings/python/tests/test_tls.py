"""rediss:// against real TLS servers: the CA in the URL or as ssl_ca_certs,
a wrong CA, a certificate for another host name, client certificates.

The tls_env fixture skips these tests when this build has no TLS; the last
test covers that build instead."""
import asyncio
import re
import ssl
import sys
import uuid

import pytest

import ratelimit
from ratelimit import aio


def name():
    return "tls-" + uuid.uuid4().hex[:12]


def check_works(client):
    lim = client.limiter(name(), "3/10s", algorithm="fixed_window")
    assert [bool(lim.acquire("u")) for _ in range(4)] == [True, True, True, False]
    r = lim.peek("u")
    assert not r and r.remaining == 0 and not r.fallback
    assert lim.peek("other").remaining == 3  # peek consumed nothing
    assert lim.acquire("other").remaining == 2


def connection_error(**kwargs):
    with pytest.raises(ratelimit.ConnectionError) as info:
        ratelimit.Client(**kwargs).close()
    assert info.value.code == ratelimit._ratelimit.ERR_CONNECTION
    return str(info.value)


def test_ca_in_the_url(tls_env):
    assert "ssl_ca_certs=" in tls_env.url
    with ratelimit.Client(tls_env.url) as client:
        check_works(client)


@pytest.mark.parametrize("as_type", [str, lambda p: p, bytes])
def test_ca_as_keyword(tls_env, as_type):
    ca = as_type(str(tls_env.ca).encode()) if as_type is bytes else as_type(tls_env.ca)
    with ratelimit.Client(tls_env.base_url, ssl_ca_certs=ca, ssl_cert_reqs="required") as client:
        check_works(client)


def test_keyword_overrides_the_url(tls_env):
    wrong = "%s?ssl_ca_certs=%s" % (tls_env.base_url, tls_env.other_ca)
    with ratelimit.Client(wrong, ssl_ca_certs=str(tls_env.ca)) as client:
        check_works(client)
    assert "certificate verify failed" in connection_error(url=wrong)


def test_wrong_ca_is_a_certificate_error(tls_env):
    message = connection_error(url=tls_env.base_url, ssl_ca_certs=str(tls_env.other_ca))
    assert "certificate verify failed" in message, message
    # the URL's own option says the same
    message = connection_error(url="%s?ssl_ca_certs=%s" % (tls_env.base_url, tls_env.other_ca))
    assert "certificate verify failed" in message, message


@pytest.mark.parametrize("policy", ["allow", "deny"])
def test_wrong_ca_fails_to_open_under_every_policy(tls_env, policy):
    # a server certificate the client refuses is a misconfiguration, not an
    # outage (docs/deployment.md): no on_redis_error policy opens the client
    with pytest.raises(ratelimit.ConnectionError, match="certificate verify failed"):
        ratelimit.Client(tls_env.base_url, ssl_ca_certs=str(tls_env.other_ca), on_redis_error=policy)


def by_name(url):
    return url.replace("://127.0.0.1:", "://localhost:")


def test_host_name_is_checked(tls_env):
    # the bad-host server's certificate names wrong.example only
    message = connection_error(url=tls_env.badhost_url, ssl_ca_certs=str(tls_env.ca))
    assert re.search("certificate verify failed: (IP address|hostname) mismatch", message), message
    if tls_env.host != "127.0.0.1":
        return
    message = connection_error(url=by_name(tls_env.badhost_url), ssl_ca_certs=str(tls_env.ca))
    assert "certificate verify failed: hostname mismatch" in message, message
    # the good one's names localhost and 127.0.0.1
    with ratelimit.Client(by_name(tls_env.base_url), ssl_ca_certs=str(tls_env.ca)) as client:
        check_works(client)


@pytest.mark.parametrize("how", ["keyword", "url", "ssl.CERT_NONE", "upper case"])
def test_cert_reqs_none_accepts_any_certificate(tls_env, how):
    url, kwargs = tls_env.badhost_url, {}
    if how == "keyword":
        kwargs = dict(ssl_cert_reqs="none")
    elif how == "url":
        url += "?ssl_cert_reqs=none"
    elif how == "ssl.CERT_NONE":
        kwargs = dict(ssl_cert_reqs=ssl.CERT_NONE)
    else:
        kwargs = dict(ssl_cert_reqs="NONE")
    with ratelimit.Client(url, **kwargs) as client:
        check_works(client)


def test_cert_reqs_required_overrides_none_in_the_url(tls_env):
    message = connection_error(url=tls_env.badhost_url + "?ssl_cert_reqs=none", ssl_ca_certs=str(tls_env.ca),
                               ssl_cert_reqs=ssl.CERT_REQUIRED)
    assert re.search("certificate verify failed: (IP address|hostname) mismatch", message), message


def test_client_certificate(tls_env):
    with ratelimit.Client(tls_env.clientauth_url, ssl_ca_certs=tls_env.ca, ssl_certfile=tls_env.client_cert,
                          ssl_keyfile=tls_env.client_key) as client:
        check_works(client)
    url = "%s?ssl_ca_certs=%s&ssl_certfile=%s&ssl_keyfile=%s" % (
        tls_env.clientauth_url, tls_env.ca, tls_env.client_cert, tls_env.client_key)
    with ratelimit.Client(url) as client:
        check_works(client)


def test_no_client_certificate_is_refused(tls_env):
    message = connection_error(url=tls_env.clientauth_url, ssl_ca_certs=str(tls_env.ca))
    assert message


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(ssl_ca_certs="/nonexistent/ca.pem"), ratelimit.InvalidArgument, "CA /nonexistent/ca.pem"),
    (dict(ssl_certfile="/nonexistent/c.pem"), ratelimit.InvalidArgument, "certificate /nonexistent/c.pem"),
    (dict(ssl_keyfile="KEY"), ratelimit.InvalidArgument, "ssl_keyfile ssl_certfile"),
])
def test_bad_tls_files(tls_env, kwargs, exc, words):
    if "ssl_keyfile" in kwargs:
        kwargs["ssl_keyfile"] = str(tls_env.client_key)
    with pytest.raises(exc) as info:
        ratelimit.Client(tls_env.url, **kwargs)
    for word in words.split():
        assert word in str(info.value), str(info.value)


# Without ssl_ca_certs the Windows build checks servers against the ROOT
# store's roots (Wine 8 makes that store, in memory, of the host's CA files
# and keeps no root a test adds: that an added root verifies is not tested)
@pytest.mark.skipif(sys.platform != "win32", reason="Windows' ROOT certificate store")
def test_without_ssl_ca_certs_windows_checks_its_root_store(tls_env, monkeypatch):
    for var in ("SSL_CERT_FILE", "SSL_CERT_DIR"):  # these come first
        monkeypatch.delenv(var, raising=False)
    message = connection_error(url=tls_env.base_url)
    assert "certificate verify failed" in message and "the Windows certificate store (ROOT)" in message, message


def test_async_client_over_tls(tls_env):
    async def main():
        async with await aio.AsyncClient.connect(tls_env.base_url, ssl_ca_certs=tls_env.ca,
                                                 ssl_cert_reqs="required", reconnect_max=0.5) as client:
            lim = client.limiter(name(), "2/10s", algorithm="gcra")
            assert [bool(await lim.acquire("u")) for _ in range(3)] == [True, True, False]
        with pytest.raises(ratelimit.ConnectionError, match="certificate verify failed"):
            await aio.AsyncClient.connect(tls_env.base_url, ssl_ca_certs=tls_env.other_ca)
    asyncio.run(main())


@pytest.mark.skipif(ratelimit.has_tls(), reason="this build has TLS: the no-TLS error cannot happen")
@pytest.mark.parametrize("url", ["rediss://127.0.0.1:6380/0", "rediss+cluster://127.0.0.1:7000",
                                 "rediss+sentinel://127.0.0.1:26379/mymaster"])
@pytest.mark.parametrize("policy", ["raise", "allow"])
def test_rediss_without_tls_is_a_clear_error(url, policy):
    assert ratelimit.has_tls() is False
    with pytest.raises(ratelimit.InvalidArgument) as info:
        ratelimit.Client(url, on_redis_error=policy, ssl_ca_certs="/etc/ssl/certs/ca-certificates.crt")
    assert "TLS" in str(info.value) and "rediss://" in str(info.value), str(info.value)
    # the way out: the wheels, scripts/hiredis.sh, or not RL_TLS=0
    for fix in ("wheels", "scripts/hiredis.sh", "RL_TLS"):
        assert fix in str(info.value), str(info.value)
    assert info.value.code == ratelimit._ratelimit.ERR_INVALID


def test_has_tls_is_a_bool():
    assert ratelimit.has_tls() in (True, False)
    assert "has_tls" in ratelimit.__all__


def test_tls_version_names_the_openssl_inside():
    version = ratelimit.tls_version()
    if ratelimit.has_tls():
        assert re.match(r"OpenSSL \d+\.\d+\.\d+", version), version
    else:
        assert version is None
    assert "tls_version" in ratelimit.__all__
