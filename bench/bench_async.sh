#!/usr/bin/env bash
# The C async core against its physical limit, in one run on one Redis:
# rl_bench_async (blocking vs rl_submit) and redis-benchmark running the same
# script with the same arguments (-c 1; -c 50; -P 16 -c 4); then ROUNDS rounds
# of rl_submit with 64 in flight against redis-benchmark -P 16 -c 4, which goes
# first alternating, with the ratio of each round (neighbours in time: the
# load of the machine moves both).
# Usage: bench/bench_async.sh [seconds] [rounds]   (after building build/rl_bench_async)
set -euo pipefail
cd "$(dirname "$0")/.."
port=${BENCH_PORT:-6398}
seconds=${1:-3}
rounds=${2:-5}
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "/tmp/rl-bench-$port.pid" >/dev/null
monitor=
trap 'kill $(cat /tmp/rl-bench-$port.pid) $monitor 2>/dev/null || true' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
url=redis://127.0.0.1:$port
REDIS_URL=$url build/rl_bench_async "$seconds"

# the command rl_submit sends, as Redis saw it (MONITOR), replayed by redis-benchmark
log=$(mktemp)
redis-cli -p "$port" MONITOR >"$log" &
monitor=$!
sleep 0.2
REDIS_URL=$url build/rl_bench_async count 1 0 1
sleep 0.2
kill "$monitor"
monitor=
line=$(grep -m1 '"EVALSHA"' "$log")
rm -f "$log"
eval "cmd=(${line#*] })" # the quoted arguments after "<time> [db addr] "
echo "same command: ${cmd[*]}"

bench() { # decisions/s of redis-benchmark with options $1 sending n commands
  # shellcheck disable=SC2086
  redis-benchmark -p "$port" -n "$2" $1 --csv "${cmd[@]}" | tail -n 1 | cut -d, -f2 | tr -d '"'
}
for opts in "-c 1" "-c 50" "-P 16 -c 4"; do
  printf '%-34s %10.0f decisions/s\n' "redis-benchmark $opts (same command)" "$(bench "$opts" 300000)"
done

echo "rl_submit 64 in flight / redis-benchmark -P 16 -c 4, ${seconds} s each, $rounds rounds:"
n=300000
ratios=()
for ((r = 1; r <= rounds; r++)); do
  if ((r % 2)); then
    ours=$(REDIS_URL=$url build/rl_bench_async submit 64 "$seconds")
    theirs=$(bench "-P 16 -c 4" "$n")
  else
    theirs=$(bench "-P 16 -c 4" "$n")
    ours=$(REDIS_URL=$url build/rl_bench_async submit 64 "$seconds")
  fi
  n=$(awk -v t="$theirs" -v s="$seconds" 'BEGIN { printf "%d", t * s }') # about as long as ours
  ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')
  ratios+=("$ratio")
  printf 'round %d: rl_submit %8.0f/s  redis-benchmark %8.0f/s  ratio %s\n' "$r" "$ours" "$theirs" "$ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n |
  awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
         printf "ratio: median %.3f, min %.3f, max %.3f over %d rounds\n", m, v[1], v[NR], NR }'
