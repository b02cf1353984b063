#!/usr/bin/env bash
# Java: ratelimit (JNI; acquireAsync and blocking acquire) against Redisson's
# RRateLimiter (tryAcquireAsync / tryAcquire) and Bucket4j with Lettuce
# (AsyncBucketProxy / BucketProxy tryConsume), in one run on one Redis:
# 64 and 1 requests in flight, 1 and 8 blocking threads. Beside them in each
# group, "Lettuce running our script" (issue 35): Lettuce's sync (blocking
# groups) or async API on one shared connection sending, per decision, the
# EVALSHA our gcra limiter sends for that id (the loaded SHA, same keys and
# arguments; captured with MONITOR, its reply checked to admit as ours), so
# "ratelimit / this" is our binding against a plain good client running our
# Lua; select those rows alone with "our script". Then leases (issue
# 25): one hot key with and without LimiterConfig.lease(50 ms), blocking with
# 1 and 8 threads and async with 64 in flight (ratio, script calls per decision).
# Maven installs the binding (without its tests) and fetches Redisson,
# Bucket4j and Lettuce from Maven Central (bench/java/pom.xml).
# Usage: bench/bench_java.sh [seconds per row] [rounds] [only the rows whose "mode / library" holds this]
#   e.g. bench/bench_java.sh 3 3 "hot key" for the lease rows alone
set -euo pipefail
cd "$(dirname "$0")/.."
mvn -B -q -f bindings/java install -DskipTests
mvn -B -q -f bench/java compile
port=${BENCH_PORT:-6397}
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "/tmp/rl-bench-$port.pid" >/dev/null
trap 'kill $(cat /tmp/rl-bench-$port.pid) 2>/dev/null || true' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
mvn -B -q -f bench/java exec:exec -Dbench.url="redis://127.0.0.1:$port" \
  -Dbench.seconds="${1:-3}" -Dbench.rounds="${2:-3}" -Dbench.only="${3:-}"
