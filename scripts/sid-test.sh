#!/usr/bin/env bash
# Runs the cp314 and cp315 wheels from dist/ (scripts/dist.sh) in Debian sid's
# own CPython 3.14 and 3.15 (scripts/sid.sh's roots), installed as a user
# installs them: pip --only-binary=:all: --no-index, no compiler in the root.
#   x86_64 (chroot, the host's network): 3.15 runs the whole Python suite and
#     the conformance vectors; 3.14 the smoke test (has_tls, tls_version, the
#     vectors and the TLS tests)
#   aarch64 (qemu-user, as scripts/arm64-test.sh): each wheel imported and
#     deciding over a verified TLS connection (3 calls, 2 admitted). Not the
#     vectors: their key steps read TTLs of 200 ms in Redis's real time, which
#     emulated CPython 3.15 on a loaded 2-core machine outlasted (3-6 of 46
#     failed, twice); scripts/arm64-test.sh runs them on cp311
# Servers: redis-servers the suite starts in the root (sid's), and TLS,
# Sentinel and Cluster from RL_TEST_* (scripts/test.sh), else started here.
# scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${RL_DIST_CACHE:-$HOME/.cache/ratelimit-dist}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
. scripts/sid.sh
. scripts/dist-lib.sh # quietly
for v in 3.14 3.15; do
  for arch in x86_64 aarch64; do
    ls dist/*-cp${v/./}-cp${v/./}-manylinux*"$arch"*.whl >/dev/null 2>&1 ||
      { echo "sid-test.sh: no cp${v/./} $arch wheel in dist/: RL_DIST_PYTHONS=\"3.14 3.15\" scripts/dist.sh" >&2; exit 1; }
  done
done
command -v qemu-aarch64-static >/dev/null 2>&1 ||
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null; }
sid=$(sid_root amd64)
arm=$(sid_root arm64)

if [ -z "${RL_TEST_TLS_URL:-}" ]; then
  topology=$root/build/topology-sid
  python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true
  eval "$(python3 tests/topology/topology.py up "$topology" -q)"
  trap 'python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true' EXIT
fi

# what the wheel is, seen from outside the source tree
check='
import platform, sys, ratelimit
assert "site-packages" in ratelimit.__file__, ratelimit.__file__
assert ratelimit.has_tls() is True
assert ratelimit.tls_version().startswith("OpenSSL 3."), ratelimit.tls_version()
print("CPython %s (%s), %s: %s, %s" % (platform.python_version(), sys.executable, platform.machine(),
                                     ratelimit.__file__, ratelimit.tls_version()))
'
for v in 3.15 3.14; do
  echo "== x86_64: the cp${v/./} wheel in Debian sid's python$v"
  venv=build/venv-sid-$v
  rm -rf "$venv"
  sid_run "$sid" "python$v" -m venv "$venv"
  quietly sid_run "$sid" "$venv/bin/pip" install --only-binary=:all: --no-index --find-links dist ratelimit-core
  files=(tests/vectors/test_vectors.py bindings/python/tests/test_tls.py)
  extra=()
  if [ "$v" = 3.15 ]; then
    files=(tests/vectors/test_vectors.py bindings/python/tests)
    extra=(uvloop fastapi uvicorn httpx flask django prometheus_client hypothesis)
  fi
  # the tests' own dependencies, from PyPI, binaries only (the root has no compiler)
  quietly sid_run "$sid" "$venv/bin/pip" install --only-binary=:all: pytest redis "${extra[@]}"
  (cd / && sid_run "$sid" "$root/$venv/bin/python" -c "$check")
  # from the root: the package sits in bindings/python, so only the venv's is importable
  sid_run "$sid" "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "${files[@]}"
done

# the wheels, unpacked as pip installs them
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
pipvenv=$root/build/arm64-pip
[ -x "$pipvenv/bin/pip" ] || python3 -m venv "$pipvenv"
for v in 3.15 3.14; do
  echo "== aarch64 (qemu-user): the cp${v/./} wheel in Debian sid's arm64 python$v"
  site=$root/build/arm64-sid-site-$v
  rm -rf "$site"
  quietly "$pipvenv/bin/pip" install --upgrade --target "$site" --platform manylinux2014_aarch64 --python-version "$v" \
    --only-binary=:all: --no-index --find-links dist --no-deps ratelimit-core
  (cd / && PYTHONPATH=$site qemu-aarch64-static -L "$arm" "$arm/usr/bin/python$v" - "$RL_TEST_TLS_URL" <<EOF
import sys
$(sed 's/"site-packages"/"arm64-sid-site"/' <<<"$check")
assert platform.machine() == "aarch64", platform.machine()
lim = ratelimit.Client(sys.argv[1]).limiter("sid-arm64-tls-$v", "2/minute")
lim.reset("u")
assert [bool(lim.acquire("u")) for _ in range(3)] == [True, True, False]
print("aarch64, TLS: 2 of 3 admitted")
EOF
  )
done
echo "sid: the cp314 and cp315 wheels pass"
