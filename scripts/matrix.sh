#!/usr/bin/env bash
# The servers users run: the conformance vectors (C runner), the C cost test
# (worst inputs under SLOWLOG), the Python suite with the vectors, and a Java
# smoke test (VectorsTest), against each of Debian's redis-server (7.0),
# Redis 8.0 and Valkey 9.1 (prepared by scripts/servers.sh, cached outside the
# clone in ~/.cache/ratelimit-servers). Prints a table; exits non-zero if any cell failed.
#
# Every runner starts its own throwaway server as `redis-server` from PATH:
# for each server a directory with a `redis-server` symlink to its binary is
# put first on PATH. Expects what scripts/test.sh builds first: the CMake
# build in $RL_BUILD_DIR (default build), the package installed in
# $RL_VENV (default build/venv, with pytest) and the Java project built
# (mvn install). Skips the Java column when there is no bindings/java/core/target.
# The TLS, Sentinel and Cluster suites (test_tls, test_deployments, C
# topology) are not part of the matrix: they run against Debian's Redis.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${RL_BUILD_DIR:-build}
venv=${RL_VENV:-build/venv}
case $build in /*) ;; *) build=$root/$build ;; esac
case $venv in /*) ;; *) venv=$root/$venv ;; esac
logs=$build/matrix
mkdir -p "$logs"

servers=$(scripts/servers.sh) || { echo "matrix.sh: scripts/servers.sh failed" >&2; exit 1; }

for f in "$build/tests/vectors/run_vectors" "$build/core/tests/test_cost" "$venv/bin/python"; do
  [ -x "$f" ] || { echo "matrix.sh: $f is missing (build and install first, as scripts/test.sh does)" >&2; exit 1; }
done
java=0
if command -v mvn >/dev/null 2>&1 && [ -d bindings/java/core/target/classes ]; then java=1; fi

# the version a server reports once started on a free loopback port
probe() {
  "$venv/bin/python" - "$1" <<'EOF'
import socket, subprocess, sys, time
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
p = subprocess.Popen([sys.argv[1], "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=2)
            break
        except OSError:
            time.sleep(0.02)
    c.sendall(b"INFO server\r\n")
    data = b""
    while b"\r\n\r\n" not in data[data.find(b"\r\n") + 2:] and len(data) < 65536:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    info = dict(l.split(":", 1) for l in data.decode().split("\r\n") if ":" in l)
    name = info.get("server_name", "redis")
    version = info.get("valkey_version") or info.get("redis_version")
    print(name, version)
finally:
    p.terminate()
    p.wait()
EOF
}

# one cell: runs the command with its output in a log, prints the verdict
cell() {
  local log=$1
  shift
  local start=$SECONDS
  if "$@" >"$log" 2>&1; then
    local summary
    summary=$(grep -Eo '[0-9]+ passed(, [0-9]+ failed)?|Tests run: [0-9]+, Failures: 0' "$log" | tail -n 1)
    echo "ok ${summary:+($summary) }$((SECONDS - start))s"
  else
    echo "FAILED (see $log)"
    return 1
  fi
}

rows=()
failed=0
while read -r tag version bin; do
  [ -n "$tag" ] || continue
  dir=$logs/$tag
  rm -rf "$dir"
  mkdir -p "$dir/bin"
  ln -s "$bin" "$dir/bin/redis-server"
  started=$(probe "$bin") || started="did not start"
  echo "==> $tag: $started ($bin)" >&2
  export PATH="$dir/bin:$PATH"
  # the suites start their own servers, never the shared topology ones
  for v in $(env | sed -n 's/^\(RL_TEST_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
  # RL_MATRIX_DEFAULT_RAN (scripts/test.sh): Debian's server, the one on
  # PATH, ran every cell in earlier steps (ctest's vectors and cost, the
  # Python step's whole suite, the Java step's VectorsTest): not again
  default_ran=
  [ "$tag" = redis7 ] && [ -n "${RL_MATRIX_DEFAULT_RAN:-}" ] && default_ran=1
  if [ -n "$default_ran" ]; then
    vectors="ok (ctest)"
    cost="ok (ctest)"
  else
    vectors=$(cell "$dir/vectors.log" "$build/tests/vectors/run_vectors" "$root"/tests/vectors/*.json) || failed=1
    cost=$(cell "$dir/cost.log" "$build/core/tests/test_cost") || failed=1
  fi
  # the framework, CLI and fault suites do not depend on the server's version
  if [ -n "$default_ran" ]; then
    python="ok (the Python step)"
  else
    python=$(cd "$dir" && cell "$dir/python.log" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
               "$root/bindings/python/tests" "$root/tests/vectors/test_vectors.py" \
               --ignore="$root/bindings/python/tests/test_tls.py" \
               --ignore="$root/bindings/python/tests/test_deployments.py" \
               --ignore="$root/bindings/python/tests/contrib" \
               --ignore="$root/bindings/python/tests/test_cli.py" \
               --ignore="$root/bindings/python/tests/test_faults.py") || failed=1
  fi
  if [ -n "$default_ran" ]; then
    javacell="ok (the Java step)"
  elif [ $java = 1 ]; then
    javacell=$(cell "$dir/java.log" mvn -B -q -f "$root/bindings/java" -pl core surefire:test -Dtest=VectorsTest \
                 -Dsurefire.failIfNoSpecifiedTests=false -DtrimStackTrace=true) || failed=1
    report=$root/bindings/java/core/target/surefire-reports/TEST-io.ratelimit.VectorsTest.xml
    if [ -f "$report" ]; then
      counts=$(sed -n 's/.*<testsuite [^>]*tests="\([0-9]*\)"[^>]*failures="\([0-9]*\)".*/\1 tests, \2 failed/p' \
               "$report" | head -n 1)
      [ -n "$counts" ] && javacell="${javacell/ok /ok ($counts) }"
    fi
  else
    javacell="not run (no built bindings/java)"
  fi
  PATH=${PATH#"$dir/bin:"}
  rows+=("| $started | $vectors | $cost | $python | $javacell |")
done <<<"$servers"

echo
echo "| server | C vectors | C cost (SLOWLOG) | Python suite + vectors | Java VectorsTest |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed
