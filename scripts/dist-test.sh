#!/usr/bin/env bash
# Tests the x86_64 wheels in dist/ as a user gets them: each into a fresh venv
# of CPython 3.9, 3.11 and 3.13 with --only-binary=:all: --no-index (no
# compile step can hide), then has_tls(), tls_version(), and the Python suite
# (TLS included) against the installed package, never the source tree.
# Usage: scripts/dist-test.sh [3.9 3.11 3.13]   (after scripts/dist.sh)
#   RL_DIST_FULL=3.11  the version that runs the whole suite, in build/venv (the
#                      venv the later suites of scripts/test.sh use); the others
#                      run the limiters, TLS, asyncio and errors files
# The test servers come from RL_TEST_* (scripts/test.sh starts them) or are
# started here. The jar: scripts/dist.sh with RL_DIST_JAVA_GOALS=verify runs
# the Java suite on the jar it ships.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
versions=("$@")
[ ${#versions[@]} -eq 0 ] && versions=(3.9 3.11 3.13)
full=${RL_DIST_FULL:-3.11}
ls dist/*manylinux*x86_64*.whl >/dev/null

if [ -z "${RL_TEST_TLS_PORT:-}" ]; then
  topology=$root/build/topology-dist
  python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true
  eval "$(python3 tests/topology/topology.py up "$topology" -q)"
  trap 'python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true' EXIT
fi

for v in "${versions[@]}"; do
  py=$("$root/scripts/find-python.sh" "$v") || { echo "dist-test.sh: no CPython $v (pyenv install $v)" >&2; exit 1; }
  venv=build/venv-dist-$v
  [ "$v" = "$full" ] && venv=build/venv
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --only-binary=:all: --no-index --find-links dist ratelimit-core
  # the tests' own dependencies, from PyPI
  extra=()
  [ "$v" = "$full" ] && extra=(uvloop fastapi uvicorn httpx flask django prometheus_client hypothesis)
  "$venv/bin/pip" install -q pytest redis "${extra[@]}"
  # outside the source tree: the installed wheel, with TLS and the OpenSSL it carries
  (cd / && "$root/$venv/bin/python" - "$root/$venv" <<'EOF'
import sys, ratelimit
venv = sys.argv[1]
assert ratelimit.__file__.startswith(venv), ratelimit.__file__
assert ratelimit.has_tls() is True
assert ratelimit.tls_version().startswith("OpenSSL 3."), ratelimit.tls_version()
print("CPython %d.%d: %s, %s" % (sys.version_info[:2] + (ratelimit.__file__, ratelimit.tls_version())))
EOF
  )
  files=(bindings/python/tests)
  [ "$v" = "$full" ] || files=(bindings/python/tests/test_{limiters,tls,aio,errors}.py)
  # from the root: the package sits in bindings/python, so only the venv's is importable
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${files[@]}"
done
