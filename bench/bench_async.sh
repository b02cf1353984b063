#!/usr/bin/env bash
# The C async core against its physical limit, in one run on one Redis:
# rl_bench_async (blocking vs rl_submit) and redis-benchmark running the same
# gcra script (-c 1; -c 50; -P 16 -c 4).
# Usage: bench/bench_async.sh [seconds]   (after building build/rl_bench_async)
set -euo pipefail
cd "$(dirname "$0")/.."
port=${BENCH_PORT:-6398}
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "/tmp/rl-bench-$port.pid" >/dev/null
trap 'kill $(cat /tmp/rl-bench-$port.pid) 2>/dev/null || true' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
REDIS_URL=redis://127.0.0.1:$port build/rl_bench_async "${1:-3}"
sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat lua/gcra.lua)")
for opts in "-c 1" "-c 50" "-P 16 -c 4"; do
  # shellcheck disable=SC2086
  rps=$(redis-benchmark -p "$port" -n 300000 $opts -r 100000 --csv \
        EVALSHA "$sha" 1 'bench:rb:{__rand_int__}' 0 1000000000 1000 1000000000 1 0 0 |
        tail -n 1 | cut -d, -f2 | tr -d '"')
  printf '%-34s %10.0f decisions/s\n' "redis-benchmark $opts (same script)" "$rps"
done
