#!/usr/bin/env bash
# musl (Alpine): the core's C test suite built as static musl executables by
# Zig against the musl OpenSSL and hiredis scripts/dist.sh built (its cache),
# run here: x86_64 natively, aarch64 under qemu-user (ctest's emulator), to
# the servers scripts/test.sh started (RL_TEST_*) and the ones the tests
# start. The cp313 musllinux wheel (x86_64) runs the conformance vectors and
# the TLS tests in the musl CPython it was built by. Then the jar's
# linux-musl-x86_64 native is loaded by musl's own dynamic loader (Debian's
# musl package: a dlopen probe, every symbol bound now), as a musl JVM would
# load it; no musl JVM can be had here.
# Usage: scripts/musl-test.sh [x86_64] [aarch64]   (default: both; after dist.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${RL_DIST_CACHE:-$HOME/.cache/ratelimit-dist}
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(x86_64 aarch64)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
pkgs=()
command -v qemu-aarch64-static >/dev/null 2>&1 || pkgs+=(qemu-user-static)
command -v musl-gcc >/dev/null 2>&1 || pkgs+=(musl-tools)
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "installing: ${pkgs[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
. scripts/dist-lib.sh # quietly
newest() { ls -d "$@" 2>/dev/null | sort -V | tail -n 1; }

for arch in "${archs[@]}"; do
  openssl=$(newest "$cache"/openssl-*-"$arch"-musl)
  hiredis=$(newest "$cache"/hiredis-*-"$arch"-musl)
  if [ ! -x "$cache/bin/$arch-musl-cc" ] || [ -z "$openssl" ] || [ -z "$hiredis" ]; then
    echo "musl-test.sh: no musl OpenSSL/hiredis for $arch in $cache: run scripts/dist.sh $arch first" >&2
    exit 1
  fi
  # the core builds with -fexceptions (a C++ caller unwinds through it): a static
  # executable links Zig's libunwind itself
  emulator=() qemu=()
  [ "$arch" = "$(uname -m)" ] || qemu=("qemu-$arch-static")
  [ "$arch" = "$(uname -m)" ] || emulator=(-DCMAKE_CROSSCOMPILING_EMULATOR=qemu-$arch-static -DCMAKE_SYSTEM_NAME=Linux
    -DCMAKE_SYSTEM_PROCESSOR="$arch")
  build=build-musl-$arch
  echo "musl $arch: the C core's tests ($(basename "$openssl"), $(basename "$hiredis"))"
  quietly cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER="$cache/bin/$arch-musl-cc" \
    -DCMAKE_AR="$cache/bin/ar" -DCMAKE_RANLIB="$cache/bin/ranlib" "${emulator[@]}" \
    -DRL_HIREDIS_PREFIX="$hiredis" -DOPENSSL_ROOT_DIR="$openssl" -DOPENSSL_USE_STATIC_LIBS=TRUE \
    -DCMAKE_EXE_LINKER_FLAGS=-lunwind
  grep -q 'RL_HAVE_TLS' "$build/build.ninja" || { echo "musl-test.sh: $build without TLS" >&2; exit 1; }
  quietly cmake --build "$build" -j 2
  # every test executable is a static musl one (nothing of glibc's)
  for t in "$build"/core/tests/test_*; do
    file -b "$t" | grep -q 'statically linked' || { echo "musl-test.sh: $t is not static: $(file -b "$t")" >&2; exit 1; }
  done
  # lease_clock preloads a clock shim into the host's (glibc) redis-server:
  # the host build's shim (scripts/test.sh's build/), not a musl one
  ctest --test-dir "$build" --output-on-failure -j 2 -E '^lease_clock$'
  shim=$root/build/core/tests/libserver_clock_shift.so
  [ -f "$shim" ] || { echo "musl-test.sh: no $shim: build the host's core first (cmake --build build)" >&2; exit 1; }
  "${qemu[@]}" "$build/core/tests/test_lease_clock" "$shim"
done

# the musllinux wheel in the musl CPython it was built by (scripts/musl-python.sh),
# installed by its pip with no compiler and no index; the tests' own
# dependencies (pure Python) through this machine's pip, that pip having no TLS
case " ${archs[*]} " in *" x86_64 "*)
  wheel=$(ls dist/*-cp313-cp313-musllinux_1_2_x86_64.whl 2>/dev/null | head -n 1)
  [ -n "$wheel" ] || { echo "musl-test.sh: no cp313 musllinux x86_64 wheel in dist/: run scripts/dist.sh first" >&2; exit 1; }
  musl_py=$(scripts/musl-python.sh)
  venv=build/venv-musl
  house=build/musl-wheelhouse
  rm -rf "$venv"
  [ -d "$house" ] || quietly "$cache/tools/bin/pip" download -q --only-binary=:all: --platform musllinux_1_2_x86_64 \
    --python-version 3.13 --implementation cp --abi cp313 -d "$house" pytest redis
  quietly "$musl_py/bin/python3" -m venv "$venv"
  quietly "$venv/bin/pip" install --only-binary=:all: --no-index --find-links dist --find-links "$house" \
    ratelimit-core pytest redis
  (cd / && "$root/$venv/bin/python" -c '
import platform, ratelimit
assert "site-packages" in ratelimit.__file__ and ratelimit.has_tls(), ratelimit.__file__
assert platform.libc_ver()[0] != "glibc", platform.libc_ver()
print("musl CPython %s: %s, %s" % (platform.python_version(), ratelimit.__file__, ratelimit.tls_version()))')
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs tests/vectors/test_vectors.py bindings/python/tests/test_tls.py
  ;;
esac

# the jar's musl native under musl's loader
jar=$(ls dist/ratelimit-*.jar 2>/dev/null | grep -v -e sources -e javadoc | head -n 1)
case " ${archs[*]} " in *" x86_64 "*)
  probe=build-musl-x86_64/dlopen_probe
  printf '%s\n' '#include <dlfcn.h>' '#include <stdio.h>' \
    'int main(int argc, char **argv) {' \
    '    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);' \
    '    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }' \
    '    return !(argc == 2 && dlsym(h, "JNI_OnLoad") && dlsym(h, "JNI_OnUnload"));' \
    '}' >"$probe.c"
  musl-gcc -O2 -o "$probe" "$probe.c"
  readelf -l "$probe" | grep -q 'interpreter: /lib/ld-musl-x86_64.so.1' ||
    { echo "musl-test.sh: $probe is not a dynamic musl program" >&2; exit 1; }
  rm -rf "$probe.d" && mkdir -p "$probe.d"
  (cd "$probe.d" && unzip -q "$root/$jar" native/linux-musl-x86_64/libratelimit_jni.so)
  "$probe" "$probe.d/native/linux-musl-x86_64/libratelimit_jni.so"
  echo "musl x86_64: the jar's native loads under musl's dynamic loader, every symbol bound (RTLD_NOW)"
  ;;
esac
