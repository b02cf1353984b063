#!/usr/bin/env bash
# Builds the C library and runs the demo. Starts a local redis-server unless
# REDIS_URL is set.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh c
cmake -S . -B build -G Ninja -DRL_BUILD_TESTS=OFF >/dev/null
cmake --build build --target rl_demo >/dev/null
exec build/rl_demo
