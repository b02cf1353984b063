#!/usr/bin/env bash
# Cross-component tests: the conformance vectors through Python (C runs them
# in ctest, Java in its JUnit suite), the live cross-language tests, and the
# model check (Hypothesis; its steps also run through the Java worker), and
# the tests of tests/topology, the servers every suite's topology tests use.
# Expects scripts/test.sh to have built build/ (C), build/venv (Python) and
# the Java jar.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${RL_PYTHON:-build/venv/bin/python}
export RL_C_WORKER=${RL_C_WORKER:-$PWD/build/tests/cross/c_worker}
if [ -z "${RL_JAR:-}" ]; then
  RL_JAR=$(ls bindings/java/core/target/ratelimit-*.jar 2>/dev/null | grep -v -e sources -e javadoc -e tests | head -n 1)
  export RL_JAR=$PWD/$RL_JAR
fi
"$python" -m pytest -q -p no:cacheprovider tests/vectors/test_vectors.py tests/cross/test_cross.py tests/cross/test_leases.py tests/model \
  tests/topology/test_topology.py
