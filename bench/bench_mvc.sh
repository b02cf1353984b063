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
# RL_BENCH_VIRTUAL=1 compares threads instead of builds (issue 42): this
# checkout's binding in two apps, one with spring.threads.virtual.enabled=true
# ("vthreads") and one on Tomcat's platform threads ("platform"), each also
# deciding with Bucket4j (/bucket4j: its Lettuce compare-and-swap proxy
# manager, as bench_java.sh has it); rounds report vthreads / platform per
# path and, in each app, /acquire and /starter over /bucket4j. It needs Java
# 21+ (JAVA_HOME: Maven and the apps run on it) and pins Redis to one CPU and
# the apps with wrk to another (RL_BENCH_REDIS_CPU, RL_BENCH_APP_CPU).
# Usage: bench/bench_mvc.sh [seconds per row] [rounds] [connections]
#   RL_BENCH_BEFORE=<commit> (empty: after alone), RL_BENCH_BEFORE_DIR=<its worktree>
#   RL_BENCH_VIRTUAL=1, RL_BENCH_PATHS="none acquire ...", RL_BENCH_REDIS_CPU=0 RL_BENCH_APP_CPU=1
#   e.g. bench/bench_mvc.sh 10 5 64
#   JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64 RL_BENCH_VIRTUAL=1 bench/bench_mvc.sh 5 5 64
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-3}
connections=${3:-64}
virtual=${RL_BENCH_VIRTUAL:-}
before=${RL_BENCH_BEFORE-fe77e02}
[[ -z $virtual ]] || before=
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
# the apps run on the JDK Maven runs on (exec:exec starts `java` from PATH)
[[ -z ${JAVA_HOME:-} ]] || PATH=$JAVA_HOME/bin:$PATH
mvn -B -q -f bindings/java install -DskipTests
builds=(after)
versions=(0.1.0-SNAPSHOT)
threads=(false)
if [[ -n $virtual ]]; then
  builds=(vthreads platform)
  versions=(0.1.0-SNAPSHOT 0.1.0-SNAPSHOT)
  threads=(true false)
fi
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
  threads+=(false)
fi
# pinned (issue 42's runs): Redis on one CPU, both apps and wrk on another
redis_cpu=${RL_BENCH_REDIS_CPU:-${virtual:+0}}
app_cpu=${RL_BENCH_APP_CPU:-${virtual:+1}}
pin_redis=() pin_app=()
[[ -z $redis_cpu ]] || pin_redis=(taskset -c "$redis_cpu")
[[ -z $app_cpu ]] || pin_app=(taskset -c "$app_cpu")
mvn -B -q -f bench/java/mvc compile

port=${BENCH_PORT:-6399}
http_port=${BENCH_HTTP_PORT:-8391} # the after app; before's is the next one
"${pin_redis[@]}" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
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
  "${pin_app[@]}" setsid mvn -B -q -f bench/java/mvc exec:exec -Dbench.ratelimit.version="${versions[k]}" \
    -Dbench.url="redis://127.0.0.1:$port" -Dbench.port=$((http_port + k)) -Dbench.label="${builds[k]}" \
    -Dbench.virtual="${threads[k]}" \
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
redis_cpu_s() { redis-cli -p "$port" INFO cpu | awk -F: '/^used_cpu_(user|sys):/ { t += $2 } END { printf "%.6f\n", t }'; }
# one row: wrk on build $1's path $2 for $3 seconds; prints req/s, p99 (ms),
# script calls per request and Redis's CPU per request (us)
row() {
  local out s0 c0
  s0=$(scripts)
  c0=$(redis_cpu_s)
  out=$("${pin_app[@]}" wrk -t2 -c"$connections" -d"${3}s" --timeout 30s --latency "http://127.0.0.1:$((http_port + $1))/$2")
  if grep -q 'Non-2xx\|Socket errors' <<<"$out"; then
    echo "${builds[$1]} /$2: $(grep 'Non-2xx\|Socket errors' <<<"$out" | tr '\n' ' ')" >&2
    exit 1
  fi
  awk -v s0="$s0" -v s1="$(scripts)" -v c0="$c0" -v c1="$(redis_cpu_s)" '
    /^ +99%/ { p99 = $2; if (p99 ~ /us$/) p99 /= 1000; else if (p99 ~ /ms$/) p99 += 0; else p99 *= 1000 }
    / requests in / { n = $1 }
    /^Requests\/sec:/ { rps = $2 }
    END { printf "%.0f %.2f %.3f %.2f\n", rps, p99, (s1 - s0) / n, (c1 - c0) * 1e6 / n }' <<<"$out"
}
if [[ -n $virtual ]]; then paths=(none acquire starter bucket4j); else paths=(none acquire starter); fi
[[ -z ${RL_BENCH_PATHS:-} ]] || read -r -a paths <<<"$RL_BENCH_PATHS"
# warm-up: JIT (Spring's request path wants more than a short row), connections
for k in "${!builds[@]}"; do for p in "${paths[@]}"; do row "$k" "$p" $((seconds > 10 ? seconds : 10)) >/dev/null; done; done
pinning=unpinned
[[ -z $redis_cpu$app_cpu ]] || pinning="Redis on CPU ${redis_cpu:-any}, apps and wrk on CPU ${app_cpu:-any}"
echo "Spring MVC under wrk -t2 -c$connections, ${seconds} s per row, $rounds rounds; builds: ${builds[*]}" \
  "(${versions[*]}; virtual threads: ${threads[*]}); $(nproc) cores, client and both apps on this machine, $pinning;" \
  "$(java -version 2>&1 | head -1)"
# what each app's decisions are compared against within the app (a peer in the same run)
peer=
[[ " ${paths[*]} " != *" bucket4j "* ]] || peer=bucket4j
ratio() { awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN { printf "%.3f", a / b }'; }
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
    if ((${#builds[@]} > 1)); then
      q=$(ratio "${got[0,$p]}" "${got[1,$p]}")
      line+=" / ${got[1,$p]%% *} = $q |"
      ratios+="$p,$q "
    fi
  done
  if [[ -n $peer ]]; then
    for k in "${!builds[@]}"; do
      for p in acquire starter; do
        [[ -n ${got[$k,$p]:-} ]] || continue
        q=$(ratio "${got[$k,$p]}" "${got[$k,$peer]}")
        line+=" ${builds[k]} /$p / /$peer = $q |"
        ratios+="${builds[k]}:$p,$q "
      done
    done
  fi
  echo "$line"
done
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.3f %.3f %.3f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[1], v[NR] }'; }
echo
echo "| build | path | req/s (median) | p99 (ms) | script calls per request | Redis CPU per request (us) |"
echo "|---|---|---:|---:|---:|---:|"
for k in "${!builds[@]}"; do
  for p in "${paths[@]}"; do
    read -r -a runs <<<"${per[$k,$p]}"
    m=()
    for f in 1 2 3 4; do m+=("$(printf '%s\n' "${runs[@]}" | cut -d, -f$f | median | cut -d' ' -f1)"); done
    printf '| %s | /%s | %.0f | %.2f | %.2f | %.1f |\n' "${builds[k]}" "$p" "${m[0]}" "${m[1]}" "${m[2]}" "${m[3]}"
  done
done
# one "what,ratio" a word
summary() { read -r m lo hi < <(printf '%s\n' $ratios | grep "^$1," | cut -d, -f2 | median); echo "$2: median ${m}x, min ${lo}x, max ${hi}x over $rounds rounds"; }
echo
if ((${#builds[@]} > 1)); then
  against=${builds[1]}
  [[ -z $before ]] || against="before ($short)"
  for p in "${paths[@]}"; do summary "$p" "/$p ${builds[0]} / $against"; done
fi
if [[ -n $peer ]]; then
  for k in "${!builds[@]}"; do
    for p in acquire starter; do
      [[ " ${paths[*]} " != *" $p "* ]] || summary "${builds[k]}:$p" "${builds[k]} /$p / ${builds[k]} /$peer"
    done
  done
fi
