"""A win_amd64 wheel in a Windows CPython (scripts/windows-test.sh python,
under Wine): imported from that interpreter's site-packages, it decides
exactly against a redis-server, plain and over TLS, and refuses a server
signed by another CA.
Usage: python windows-wheel-check.py PLAIN_PORT TLS_PORT CERT_DIR"""
import sys
import sysconfig

import ratelimit

plain, tls, certs = sys.argv[1:]
site = sysconfig.get_paths()["platlib"]
assert ratelimit._ratelimit.__file__.lower().startswith(site.lower()), (ratelimit._ratelimit.__file__, site)
assert ratelimit.tls_version().startswith("OpenSSL 3."), ratelimit.tls_version()
for url in ("redis://127.0.0.1:%s" % plain, "rediss://127.0.0.1:%s?ssl_ca_certs=%s/ca.crt" % (tls, certs)):
    with ratelimit.Client(url) as client:
        limiter = client.limiter("windows-cp3%d" % sys.version_info[1], (3, 60))
        admitted = sum(bool(limiter.acquire(url)) for _ in range(5))
        print("  %s: admitted %d of 5" % (url.split("?")[0], admitted))
        assert admitted == 3, admitted
try:
    with ratelimit.Client("rediss://127.0.0.1:%s?ssl_ca_certs=%s/other-ca.crt" % (tls, certs)) as client:
        client.limiter("other-ca", (1, 1)).acquire("x")
    raise SystemExit("a server signed by another CA was trusted")
except ratelimit.ConnectionError as e:
    assert "certificate verify failed" in str(e), e
    print("  rediss, a server signed by another CA: refused (%s)" % e)
print("  CPython %s: %s, %s" % (sys.version.split()[0], ratelimit._ratelimit.__file__, ratelimit.tls_version()))
