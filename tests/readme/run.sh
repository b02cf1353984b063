#!/usr/bin/env bash
# Runs every C, Python and Java code block of README.md and docs/errors.md as
# a program against a throwaway redis-server (so the docs cannot rot), then
# the examples in examples/. A block that is intentionally a fragment carries
# "<!-- fragment: NAME -->" on the line before its fence and must be listed
# in FRAGMENTS below: keep them rare.
# Expects what scripts/test.sh builds: the C library installed in
# build/install (RL_PREFIX), build/venv (RL_PYTHON), the Java jar (RL_JAR)
# and build/rl_demo (RL_DEMO).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
FRAGMENTS="spring-handler"
prefix=${RL_PREFIX:-$root/build/install}
python=${RL_PYTHON:-$root/build/venv/bin/python}
demo=${RL_DEMO:-$root/build/rl_demo}
jar=${RL_JAR:-$(ls "$root"/bindings/java/core/target/ratelimit-*.jar 2>/dev/null |
  grep -v -e sources -e javadoc -e tests | head -n 1)}

work=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null || true; wait $redis_pid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
export REDIS_URL="redis://127.0.0.1:$port/0"

ran=0
fail() { echo "FAILED: $*" >&2; exit 1; }
run() { # where, command...: the program's output is shown only when it fails
  local where=$1; shift
  if ! "$@" >"$work/out" 2>&1; then cat "$work/out" >&2; fail "$where"; fi
  ran=$((ran + 1))
}

while read -r kind path where; do
  redis-cli -p "$port" flushall >/dev/null
  case "$kind" in
    fragment)
      case " $FRAGMENTS " in *" $path "*) echo "  fragment $path ($where): not run" ;;
        *) fail "$where: fragment '$path' is not in tests/readme/run.sh's FRAGMENTS (make it a program)" ;; esac ;;
    c)
      cc -std=c11 -Wall -Wextra -Werror -I"$prefix/include" "$path" -L"$prefix/lib" -lratelimit \
        -Wl,-rpath,"$prefix/lib" -o "${path%.c}" || fail "$where does not compile"
      run "$where" "${path%.c}" ;;
    python) run "$where" "$python" "$path" ;;
    java) run "$where" java -cp "$jar" "$path" ;;
  esac
  [ "$kind" = fragment ] || echo "  ok $where ($kind)"
done < <(python3 tests/readme/extract.py "$work" "127.0.0.1:$port" README.md docs/errors.md)

example() { # name, command...
  redis-cli -p "$port" flushall >/dev/null
  run "$@"
  echo "  ok $1"
}
example examples/demo.c "$demo"
example examples/demo.py "$python" examples/demo.py
example examples/Demo.java java -cp "$jar" examples/Demo.java
echo "$ran programs ran"
