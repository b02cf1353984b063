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
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
apt_install "${pkgs[@]}"

step "Zig $zig_version"
mkdir -p "$wcache/bin" "$wcache/work" "$cache/src"
# dist.sh's tools venv when it holds this Zig, else one of our own
zig=""
if [ "$(cut -d' ' -f1 "$cache/tools/versions" 2>/dev/null)" = "$zig_version" ]; then
  zig=$(ls "$cache"/tools/lib/python3*/site-packages/ziglang/zig 2>/dev/null | head -n 1)
fi
if [ -z "$zig" ]; then
  if [ "$(cat "$wcache/tools/versions" 2>/dev/null)" != "$zig_version" ]; then
    rm -rf "$wcache/tools"
    quietly python3 -m venv "$wcache/tools"
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
  # static, no apps, engines or loadable modules; no assembly (the C AES-GCM
  # is plenty for TLS to Redis, and the mingw64 perlasm would need its own
  # assembler checks); its default store dir stays Windows' (no /etc/ssl)
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

# What Windows must supply: its own DLLs only (the Universal C Runtime's
# api-ms-win-crt-* sets ship with Windows 10); winpthreads, hiredis and
# OpenSSL are linked in
for f in "$build/libratelimit.dll" "$build"/core/tests/*.exe; do
  bad=$(llvm-objdump -p "$f" | sed -n 's/^ *DLL Name: //p' | sed 's/\.dll$//I' |
    grep -Eivx 'kernel32|advapi32|user32|crypt32|ws2_32|bcrypt|api-ms-win-crt-[a-z]+-l1-1-0' || true)
  [ -z "$bad" ] || { echo "windows-test.sh: $f imports $(echo $bad) (not Windows' own)" >&2; exit 1; }
done
echo "  libratelimit.dll and the tests import Windows' own DLLs only:" \
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
