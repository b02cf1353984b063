#!/usr/bin/env bash
# The soak: the Python and Java bindings against one throwaway redis-server
# for SECONDS (default 600) with faults injected; fails on drift (RSS, fds,
# Redis memory, keys left), any over-admission, or anything unexpected.
# What runs and what is checked: tests/soak/soak.py. Needs the Python venv
# with ratelimit installed and the jar (built by scripts/test.sh):
#   scripts/soak.sh [SECONDS]         RL_PYTHON, RL_JAR override them
# The logs stay in a temporary directory when it fails (RL_SOAK_KEEP=1: always).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
python=${RL_PYTHON:-build/venv/bin/python}
jar=${RL_JAR:-$(ls bindings/java/core/target/ratelimit-*.jar 2>/dev/null | grep -v -e sources -e javadoc -e tests | head -n 1)}
[ -x "$python" ] || { echo "soak: no Python at '$python' (set RL_PYTHON)" >&2; exit 2; }
[ -f "$jar" ] || { echo "soak: no ratelimit jar (set RL_JAR)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/rl-soak.XXXXXX")
javac -d "$work/classes" -cp "$jar" tests/soak/SoakWorker.java
status=0
"$python" tests/soak/soak.py "$seconds" --jar "$jar" --classes "$work/classes" --workdir "$work" || status=$?
if [ "$status" = 0 ] && [ -z "${RL_SOAK_KEEP:-}" ]; then
  rm -rf "$work"
fi
exit "$status"
