#!/usr/bin/env bash
# Spring MVC (Tomcat, a thread per request) under wrk: requests per second of
# one app (bench/java/mvc) with no decision (/none), the blocking acquire in
# its handler (/acquire) and the starter's @RateLimited (/starter), each for
# this checkout's binding ("after") and for the binding as it was at an older
# commit ("before", default fe77e02: before issue 35's engine work), the two
# apps running side by side on one Redis. Every row is wrk with a fixed number
# of connections for the same seconds; each round runs every path on both
# builds back to back (the first path rotating, the first build alternating)
# and reports after / before per path (neighbours in time: the machine's load
# moves both). The median, min and max of those ratios over the rounds close
# the run, with each row's median req/s, p99 and Redis's script calls per
# request (under 1 when the core batches decisions). /none is the control:
# the same code in both apps, so its ratio's spread is the run's noise.
# The older binding is built in its own worktree (git worktree add, never a
# checkout here; kept for the next run) and installed under the Maven version
# 0.1.0-before-<short hash>, leaving this checkout's 0.1.0-SNAPSHOT be.
# Usage: bench/bench_mvc.sh [seconds per row] [rounds] [connections]
#   RL_BENCH_BEFORE=<commit> (empty: after alone), RL_BENCH_BEFORE_DIR=<its worktree>
#   e.g. bench/bench_mvc.sh 10 5 64
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-3}
connections=${3:-64}
before=${RL_BENCH_BEFORE-fe77e02}
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
mvn -B -q -f bindings/java install -DskipTests
builds=(after)
versions=(0.1.0-SNAPSHOT)
if [[ -n $before ]]; then
  short=$(git rev-parse --short "$before^{commit}")
  dir=${RL_BENCH_BEFORE_DIR:-/tmp/rl-mvc-before-$short}
  [[ -d $dir ]] || git worktree add --detach "$dir" "$short"
  [[ $(git -C "$dir" rev-parse --short HEAD) == "$short" ]] || { echo "$dir is not at $short" >&2; exit 1; }
  version=0.1.0-before-$short
  sed -i "s/0\.1\.0-SNAPSHOT/$version/" "$dir"/bindings/java/{,core/,spring-boot-starter/}pom.xml
  mvn -B -q -f "$dir/bindings/java" install -DskipTests
  builds+=(before)
  versions+=("$version")
fi
mvn -B -q -f bench/java/mvc compile

port=${BENCH_PORT:-6399}
http_port=${BENCH_HTTP_PORT:-8391} # the after app; before's is the next one
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "/tmp/rl-bench-$port.pid" >/dev/null
apps=()
# shellcheck disable=SC2317 # run by the trap
stop() {
  kill "$(cat "/tmp/rl-bench-$port.pid")" 2>/dev/null || true
  for app in "${apps[@]}"; do kill -- "-$app" 2>/dev/null || true; done
}
trap stop EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done

# each app in a session of its own (setsid): its group (mvn and the JVM) ends with the run
for k in "${!builds[@]}"; do
  setsid mvn -B -q -f bench/java/mvc exec:exec -Dbench.ratelimit.version="${versions[k]}" \
    -Dbench.url="redis://127.0.0.1:$port" -Dbench.port=$((http_port + k)) -Dbench.label="${builds[k]}" \
    >"/tmp/rl-bench-mvc-${builds[k]}.log" 2>&1 &
  apps+=($!)
done
for k in "${!builds[@]}"; do
  for ((t = 0; t < 600; t++)); do
    curl -fs "http://127.0.0.1:$((http_port + k))/none" >/dev/null && break
    kill -0 "${apps[k]}" 2>/dev/null || { cat "/tmp/rl-bench-mvc-${builds[k]}.log" >&2; exit 1; }
    sleep 0.1
  done
done

scripts() { redis-cli -p "$port" INFO commandstats | awk -F'[=,:]' '/^cmdstat_eval(sha)?:/ { n += $3 } END { print n + 0 }'; }
# one row: wrk on build $1's path $2 for $3 seconds; prints req/s, p99 (ms) and script calls per request
row() {
  local out s0
  s0=$(scripts)
  out=$(wrk -t2 -c"$connections" -d"${3}s" --timeout 30s --latency "http://127.0.0.1:$((http_port + $1))/$2")
  if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
    echo "${builds[$1]} /$2: $(grep 'Non-2xx\|Socket errors' <<<"$out" | tr '\n' ' ')" >&2
    exit 1
  fi
  awk -v s0="$s0" -v s1="$(scripts)" '
    /^ +99%/ { p99 = $2; if (p99 ~ /us$/) p99 /= 1000; else if (p99 ~ /ms$/) p99 += 0; else p99 *= 1000 }
    / requests in / { n = $1 }
    /^Requests\/sec:/ { rps = $2 }
    END { printf "%.0f %.2f %.3f\n", rps, p99, (s1 - s0) / n }' <<<"$out"
}
paths=(none acquire starter)
# warm-up: JIT (Spring's request path wants more than a short row), connections
for k in "${!builds[@]}"; do for p in "${paths[@]}"; do row "$k" "$p" $((seconds > 10 ? seconds : 10)) >/dev/null; done; done
echo "Spring MVC under wrk -t2 -c$connections, ${seconds} s per row, $rounds rounds; builds: ${builds[*]}" \
  "(${versions[*]}); $(nproc) cores, client and both apps on this machine"
declare -A got per
ratios=
for ((r = 0; r < rounds; r++)); do
  for ((i = 0; i < ${#paths[@]}; i++)); do
    p=${paths[(r + i) % ${#paths[@]}]}
    for ((j = 0; j < ${#builds[@]}; j++)); do
      k=$(((r + j) % ${#builds[@]}))
      got[$k,$p]=$(row "$k" "$p" "$seconds")
      per[$k,$p]+="${got[$k,$p]// /,} "
    done
  done
  line="round $((r + 1)):"
  for p in "${paths[@]}"; do
    line+=" /$p ${got[0,$p]%% *}"
    if [[ -n $before ]]; then
      q=$(awk -v a="${got[0,$p]%% *}" -v b="${got[1,$p]%% *}" 'BEGIN { printf "%.3f", a / b }')
      line+=" / ${got[1,$p]%% *} = $q |"
      ratios+="$p,$q "
    fi
  done
  echo "$line"
done
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.3f %.3f %.3f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'; }
echo
echo "| build | path | req/s (median) | p99 (ms) | script calls per request |"
echo "|---|---|---:|---:|---:|"
for k in "${!builds[@]}"; do
  for p in "${paths[@]}"; do
    read -r -a runs <<<"${per[$k,$p]}"
    m=()
    for f in 1 2 3; do m+=("$(printf '%s\n' "${runs[@]}" | cut -d, -f$f | median | cut -d' ' -f1)"); done
    printf '| %s | /%s | %.0f | %.2f | %.2f |\n' "${builds[k]}" "$p" "${m[0]}" "${m[1]}" "${m[2]}"
  done
done
if [[ -n $before ]]; then
  echo
  for p in "${paths[@]}"; do
    # shellcheck disable=SC2086 # one "path,ratio" a word
    read -r m lo hi < <(printf '%s\n' $ratios | grep "^$p," | cut -d, -f2 | median)
    echo "/$p after / before ($short): median ${m}x, min ${lo}x, max ${hi}x over $rounds rounds"
  done
fi
