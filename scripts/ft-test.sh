#!/usr/bin/env bash
# Runs the cp313t wheel from dist/ (scripts/dist.sh) in a free-threaded
# CPython 3.13 built from Debian trixie's source (scripts/ft-python.sh, cached
# outside the clone), installed as a user installs it: pip
# --only-binary=:all: --no-index. Then:
#   - the import leaves the GIL off (a fresh interpreter, PYTHON_GIL unset,
#     warnings as errors);
#   - the whole Python suite (the web frameworks' tests included) and the
#     conformance vectors, the GIL off throughout (test_freethreading.py
#     checks it is still off around its tests): the threaded tests run on
#     every core at once.
# uvloop has no free-threaded wheel: its variants skip. The test servers come
# from RL_TEST_* (scripts/test.sh starts them) or are started here.
# scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ls dist/*-cp313-cp313t-manylinux*x86_64*.whl >/dev/null 2>&1 ||
  { echo "ft-test.sh: no cp313t x86_64 wheel in dist/: RL_DIST_PYTHONS=3.13t scripts/dist.sh x86_64" >&2; exit 1; }
py=$(scripts/ft-python.sh)

if [ -z "${RL_TEST_TLS_URL:-}" ]; then
  topology=$root/build/topology-ft
  python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true
  eval "$(python3 tests/topology/topology.py up "$topology" -q)"
  trap 'python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true' EXIT
fi

venv=build/venv-ft
rm -rf "$venv"
"$py" -m venv "$venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1
"$venv/bin/pip" install -q --only-binary=:all: --no-index --find-links dist ratelimit-core
# the tests' own dependencies, from PyPI, as binaries (pure Python but pydantic-core)
"$venv/bin/pip" install -q --only-binary=:all: pytest redis hypothesis prometheus_client \
  fastapi uvicorn httpx flask django
unset PYTHON_GIL
(cd / && "$root/$venv/bin/python" -W error - "$root/$venv" <<'EOF'
import sys, sysconfig
import ratelimit, ratelimit.aio
venv = sys.argv[1]
assert sysconfig.get_config_var("Py_GIL_DISABLED"), "not a free-threaded interpreter"
assert ratelimit.__file__.startswith(venv), ratelimit.__file__
assert not sys._is_gil_enabled(), "importing ratelimit enabled the GIL"
assert ratelimit.has_tls() is True
assert ratelimit.tls_version().startswith("OpenSSL 3."), ratelimit.tls_version()
print("CPython %s (free-threaded, GIL off after import): %s, %s"
      % (sys.version.split()[0], ratelimit._ratelimit.__file__, ratelimit.tls_version()))
EOF
)
# from the root: the package sits in bindings/python, so only the venv's is importable
"$venv/bin/python" -m pytest -q -p no:cacheprovider -rs tests/vectors/test_vectors.py bindings/python/tests
echo "ft: the cp313t wheel passes on free-threaded CPython $("$venv/bin/python" -c 'import platform; print(platform.python_version())')"
