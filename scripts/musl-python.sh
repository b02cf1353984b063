#!/usr/bin/env bash
# A musl CPython (x86_64), as Alpine's: Debian trixie's python3.13 source
# package (CPython's own release tarball) built with Debian's musl-gcc,
# dynamically linked to musl (/lib/ld-musl-x86_64.so.1, Debian's musl), with
# zlib (Debian bookworm's source, static) for pip and OpenSSL (dist.sh's musl
# build) for ssl, as an Alpine CPython has them; its headers, pyconfig.h
# written by configure under musl, are what the musllinux wheels build
# against (scripts/dist.sh), and it runs them (scripts/musl-test.sh).
# Cached in ~/.cache/ratelimit-dist/cpython-<version>-musl-x86_64 (RL_DIST_CACHE);
# prints that prefix. Minutes, once.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${RL_DIST_CACHE:-$HOME/.cache/ratelimit-dist}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
pkgs=()
command -v musl-gcc >/dev/null 2>&1 || pkgs+=(musl-tools)
command -v dpkg-source >/dev/null 2>&1 || pkgs+=(dpkg-dev)
command -v make >/dev/null 2>&1 || pkgs+=(make)
if [ ${#pkgs[@]} -gt 0 ]; then
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
. scripts/trixie-src.sh
trixie_sources python3.13
bookworm_sources zlib
mkdir -p "$cache/src"
. scripts/dist-lib.sh # fetch
if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$cache/src"; fi
python_dsc=$(fetch python3.13 trixie)
zlib_dsc=$(fetch zlib bookworm)
version=$(sed -n 's/^Version: \([0-9.]*\).*/\1/p' "$python_dsc")
out=$cache/cpython-$version-musl-x86_64
# its ssl module: OpenSSL as scripts/dist.sh built it for musl (static, the wheels' own)
openssl=$(ls -d "$cache"/openssl-*-x86_64-musl 2>/dev/null | sort -V | tail -n 1)
[ -f "$openssl/lib/libssl.a" ] ||
  { echo "musl-python.sh: no musl OpenSSL in $cache: run scripts/dist.sh x86_64 first" >&2; exit 1; }
if [ -x "$out/bin/python3" ] && [ "$(cat "$out/ready" 2>/dev/null)" = "$openssl" ]; then
  echo "$out"
  exit 0
fi
work=$(mktemp -d "$cache/work/musl-python.XXXXXX")
log=$work/build.log
echo "building CPython $version with musl (minutes, once; cached in $out)" >&2
# pkg-config sees zlib's only: the host's libraries (liblzma, libffi...) are glibc's.
# musl-gcc wraps Debian's gcc, which names glibc's multiarch; musl's gcc (Alpine's) names none
printf '#!/bin/sh\n[ "$1" = --print-multiarch ] && exit 0\nexec musl-gcc "$@"\n' >"$work/cc"
chmod +x "$work/cc"
# CPython's own sources as released (--skip-patches: none of Debian's), as Alpine builds them
build() {
  dpkg-source -q --no-check -x "$zlib_dsc" "$work/zlib" &&
    (cd "$work/zlib" && CC="$work/cc" CFLAGS="-O2 -fPIC" ./configure --static --prefix="$work/zlib-out" &&
      make -j2 install) &&
    dpkg-source -q --no-check --skip-patches -x "$python_dsc" "$work/python" &&
    rm -rf "$out" &&
    cd "$work/python" &&
    PKG_CONFIG_LIBDIR="$work/zlib-out/lib/pkgconfig" \
      ./configure CC="$work/cc" CPPFLAGS="-I$work/zlib-out/include" \
      LDFLAGS="-L$work/zlib-out/lib -Wl,-rpath,$out/lib" \
      --prefix="$out" --enable-shared --disable-test-modules --with-ensurepip=install \
      --with-openssl="$openssl" --with-openssl-rpath=no &&
    make -j2 &&
    make install
}
build >"$log" 2>&1 || { tail -n 80 "$log" >&2; echo "musl-python.sh: the build failed, full log: $log" >&2; exit 1; }
"$out/bin/python3" -c 'import zlib, ssl, ensurepip, pip' ||
  { echo "musl-python.sh: $out lacks zlib, ssl or pip (log: $log)" >&2; exit 1; }
readelf -l "$out/bin/python3" | grep -q 'interpreter: /lib/ld-musl-x86_64.so.1' ||
  { echo "musl-python.sh: $out/bin/python3 is not a musl program" >&2; exit 1; }
echo "$openssl" >"$out/ready"
rm -rf "$work"
echo "$out"
