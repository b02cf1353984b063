#!/usr/bin/env bash
# Builds the C library and runs the demo (examples/demo.c). Starts a local
# redis-server unless REDIS_URL is set. Installs only what the demo needs
# (scripts/deps.sh demo), and builds in build-demo so that scripts/test.sh's
# build/ keeps its own configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh demo
# build chatter is shown only when the build fails
quietly() {
  local log
  log=$(mktemp)
  "$@" >"$log" 2>&1 || { cat "$log"; rm -f "$log"; return 1; }
  rm -f "$log"
}
# hiredis 1.2 with TLS when scripts/hiredis.sh built it, else the system's (no TLS: the demo needs none)
tls=OFF
[ -d build/deps/hiredis ] && tls=ON
# no -Werror: a newer compiler than the tests' may warn (scripts/test.sh keeps it)
quietly cmake -S . -B build-demo -G Ninja -DRL_BUILD_TESTS=OFF -DRL_TLS=$tls -DRL_WERROR=OFF
quietly cmake --build build-demo --target rl_demo
exec build-demo/rl_demo
