#!/usr/bin/env bash
# The C async core against its physical limit, in one run on one Redis:
# rl_bench_async (blocking vs rl_submit) and redis-benchmark running the same
# script with the same arguments (-c 1; -c 50; -P 16 -c 4); then ROUNDS rounds
# of rl_submit with 64 in flight (batch calls of up to 16 decisions, the
# default, and max_batch 1: one call each) against redis-benchmark -P 16 -c 4
# (the single form), the first rotating, with the ratio of each round
# (neighbours in time: the load of the machine moves both) and, per decision,
# the client's CPU, Redis's CPU (INFO cpu) and its time in scripts (INFO
# commandstats usec).
# Usage: bench/bench_async.sh [seconds] [rounds]   (after building build/rl_bench_async)
#        RL_BENCH_ASYNC_BEFORE=path/to/another/rl_bench_async: a third contender in the rounds
#        RL_BENCH_BLOCKING=N: the rounds are blocking rl_acquire from N threads (and from 1)
#          against redis-benchmark -c N, rl_submit with 64 in flight beside them
#        RL_BENCH_REDIS_CPU=k: redis-server pinned to CPU k (taskset); pin this script elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
port=${BENCH_PORT:-6398}
seconds=${1:-3}
rounds=${2:-5}
${RL_BENCH_REDIS_CPU:+taskset -c "$RL_BENCH_REDIS_CPU"} redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "/tmp/rl-bench-$port.pid" >/dev/null
monitor=
trap 'kill $(cat /tmp/rl-bench-$port.pid) $monitor 2>/dev/null || true' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
url=redis://127.0.0.1:$port
bin=${RL_BENCH_ASYNC:-build/rl_bench_async} # another build of it: RL_BENCH_ASYNC=path
[[ -n ${RL_BENCH_BLOCKING:-} ]] || REDIS_URL=$url "$bin" "$seconds"

# the command rl_submit sends, as Redis saw it (MONITOR), replayed by redis-benchmark
log=$(mktemp)
redis-cli -p "$port" MONITOR >"$log" &
monitor=$!
sleep 0.2
REDIS_URL=$url "$bin" count 1 0 1
sleep 0.2
kill "$monitor"
monitor=
# the quoted arguments after "<time> [db addr] ", escaped as MONITOR escapes
# them; all but the last (the short form's packed numbers: binary) as words,
# the last as bytes in a file for redis-benchmark -x
last_arg=$(mktemp)
trap 'kill $(cat /tmp/rl-bench-$port.pid) $monitor 2>/dev/null || true; rm -f "$last_arg"' EXIT
mapfile -t cmd < <(grep -m1 '"EVALSHA"' "$log" | python3 -c '
import codecs, re, sys
args = [codecs.escape_decode(a)[0] for a in re.findall(r"\"((?:[^\"\\]|\\.)*)\"", sys.stdin.read())]
if b"\0" not in args[-1]:  # redis-benchmark -x would cut it there
    open(sys.argv[1], "wb").write(args[-1])
    print("\n".join(a.decode() for a in args[:-1]))' "$last_arg")
rm -f "$log"
[[ ${#cmd[@]} -gt 0 ]] || { echo "no command to replay (a zero byte in its last argument?)" >&2; exit 1; }
echo "same command: ${cmd[*]} <$(od -An -tx1 "$last_arg" | tr -d ' \n')>"
echo "its reply: $(redis-cli -p "$port" -x "${cmd[@]}" <"$last_arg" | tr '\n' ' ')"

bench() { # decisions/s of redis-benchmark with options $1 sending n commands
  # shellcheck disable=SC2086
  redis-benchmark -p "$port" -n "$2" $1 --csv -x "${cmd[@]}" <"$last_arg" | tail -n 1 | cut -d, -f2 | tr -d '"'
}
[[ -n ${RL_BENCH_BLOCKING:-} ]] ||
for opts in "-c 1" "-c 50" "-P 16 -c 4"; do
  printf '%-34s %10.0f decisions/s\n' "redis-benchmark $opts (same command)" "$(bench "$opts" 300000)"
done

# client CPU per decision (user + sys, us) of redis-benchmark sending n commands
bench_cpu() {
  local t
  t=$(mktemp)
  # shellcheck disable=SC2086
  # shellcheck disable=SC2086
  rps=$(/usr/bin/time -f '%U %S' -o "$t" redis-benchmark -p "$port" -n "$1" $peer --csv -x "${cmd[@]}" <"$last_arg" |
        tail -n 1 | cut -d, -f2 | tr -d '"')
  awk -v r="$rps" -v n="$1" '{ printf "%s %.2f\n", r, ($1 + $2) / n * 1e6 }' "$t"
  rm -f "$t"
}
# Redis's CPU seconds (user + sys), and the EVALSHA calls it ran and their usec, so far
redis_cpu() { redis-cli -p "$port" INFO cpu | awk -F: '/^used_cpu_(user|sys):/ { s += $2 } END { print s }'; }
redis_calls() { redis-cli -p "$port" INFO commandstats | awk -F'[=,:]' '/^cmdstat_evalsha:/ { print $3, $5 }'; }
# rounds: each contender once, the first rotating; ratios to redis-benchmark of the same round
threads=${RL_BENCH_BLOCKING:-}
if [[ -n $threads ]]; then
  peer="-c $threads"
  names=(redis-benchmark "rl_acquire-$threads" rl_acquire-1 rl_submit)
  [[ -n ${RL_BENCH_ASYNC_BEFORE:-} ]] && names+=("rl_acquire-$threads-before" rl_acquire-1-before)
else
  peer="-P 16 -c 4"
  names=(redis-benchmark rl_submit rl_submit-max_batch-1)
  [[ -n ${RL_BENCH_ASYNC_BEFORE:-} ]] && names+=(rl_submit-before)
fi
echo "${threads:-64 in flight} ${threads:+threads} against redis-benchmark $peer, ${seconds} s each, $rounds rounds (decisions/s; per decision: client CPU, Redis CPU / Redis time in scripts, us):"
n=$((${threads:+30000}${threads:-300000})) # then as many as take the time of ours
batched=
declare -A ratio per
for ((r = 0; r < rounds; r++)); do
  declare -A got=()
  for ((k = 0; k < ${#names[@]}; k++)); do
    who=${names[(r + k) % ${#names[@]}]}
    before=$(redis_cpu) calls=$(redis_calls)
    case $who in
      redis-benchmark) # one call per decision: Redis's figures from INFO
        got[$who]=$(bench_cpu "$n")
        got[$who]+=" $(awk -v a="$before" -v b="$(redis_cpu)" -v m="$calls" -v n="$(redis_calls)" 'BEGIN {
          split(m, x, " "); split(n, y, " "); d = y[1] - x[1]; printf "%.2f %.2f", (b - a) / d * 1e6, (y[2] - x[2]) / d }')" ;;
      rl_submit) got[$who]=$(REDIS_URL=$url "$bin" submit 64 "$seconds") ;;
      rl_submit-max_batch-1) got[$who]=$(REDIS_URL=$url "$bin" submit 64 "$seconds" 1) ;;
      rl_submit-before) got[$who]=$(REDIS_URL=$url "$RL_BENCH_ASYNC_BEFORE" submit 64 "$seconds") ;;
      rl_acquire-*-before) got[$who]=$(REDIS_URL=$url "$RL_BENCH_ASYNC_BEFORE" blocking "$(cut -d- -f2 <<<"$who")" "$seconds") ;;
      rl_acquire-*) got[$who]=$(REDIS_URL=$url "$bin" blocking "${who#rl_acquire-}" "$seconds") ;;
    esac
  done
  read -r theirs theirs_cpu theirs_server theirs_script <<<"${got[redis-benchmark]}"
  n=$(awk -v t="$theirs" -v s="$seconds" 'BEGIN { printf "%d", t * s }') # about as long as ours
  line="round $((r + 1)): redis-benchmark $theirs/s ($theirs_cpu, $theirs_server / $theirs_script)"
  per[redis-benchmark]+="$theirs,$theirs_cpu,$theirs_server,$theirs_script "
  for who in "${names[@]:1}"; do
    read -r ours ours_cpu ours_server ours_script <<<"${got[$who]}"
    q=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')
    ratio[$who]+="$q "
    per[$who]+="$ours,$ours_cpu,$ours_server,${ours_script:-0} "
    line+=" | $who $ours/s ($ours_cpu, $ours_server / ${ours_script:-?}) ratio $q"
  done
  echo "$line"
  # batch calls against one call each, same round: decisions/s, Redis CPU, Redis in scripts
  [[ -n $threads ]] && continue
  read -r a _ a_server a_script <<<"${got[rl_submit]}"
  read -r b _ b_server b_script <<<"${got[rl_submit-max_batch-1]}"
  batched+="$(awk -v a="$a" -v b="$b" -v c="$a_server" -v d="$b_server" -v e="$a_script" -v f="$b_script" \
    'BEGIN { printf "%.3f,%.3f,%.3f", a / b, c / d, e / f }') "
done
for who in "${names[@]:1}"; do
  # shellcheck disable=SC2086
  printf '%s\n' ${ratio[$who]} | sort -n |
    awk -v who="$who" -v peer="$peer" '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
      printf "%s / redis-benchmark " peer ": median %.3f, min %.3f, max %.3f over %d rounds\n", who, m, v[1], v[NR], NR }'
done
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
read -r -a rows <<<"$batched"
m=()
for f in 1 2 3; do m+=("$(printf '%s\n' "${rows[@]}" | cut -d, -f$f | median)"); done
[[ -z $threads ]] && echo "rl_submit / rl_submit-max_batch-1, per round, median: decisions/s ${m[0]}x, Redis CPU per decision ${m[1]}x," \
  "Redis in scripts per decision ${m[2]}x"
# medians over the rounds, per contender: decisions/s, and per decision client CPU, Redis CPU, Redis time in scripts
for who in "${names[@]}"; do
  read -r -a rows <<<"${per[$who]}"
  m=()
  for f in 1 2 3 4; do m+=("$(printf '%s\n' "${rows[@]}" | cut -d, -f$f | median)"); done
  printf '%-24s median %9.0f decisions/s, per decision: client CPU %s us, Redis CPU %s us, Redis in scripts %s us\n' \
    "$who" "${m[0]}" "${m[1]}" "${m[2]}" "${m[3]}"
done
