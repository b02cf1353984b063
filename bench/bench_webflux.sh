#!/usr/bin/env bash
# WebFlux: requests per second of one app whose decision is the core's
# asynchronous call (acquireAsync, as the Spring starter does) against the
# blocking call on Reactor's boundedElastic scheduler, plus no decision and
# the starter's @RateLimited itself, in one run on one Redis.
# Maven installs the bindings (without their tests) and builds bench/java/webflux.
# Usage: bench/bench_webflux.sh [seconds per row] [rounds] [requests in flight]
set -euo pipefail
cd "$(dirname "$0")/.."
mvn -B -q -f bindings/java install -DskipTests
mvn -B -q -f bench/java/webflux compile
port=${BENCH_PORT:-6398}
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "/tmp/rl-bench-$port.pid" >/dev/null
trap 'kill $(cat /tmp/rl-bench-$port.pid) 2>/dev/null || true' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
mvn -B -q -f bench/java/webflux exec:exec -Dbench.url="redis://127.0.0.1:$port" \
  -Dbench.seconds="${1:-3}" -Dbench.rounds="${2:-3}" -Dbench.concurrency="${3:-64}"
