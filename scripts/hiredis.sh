#!/usr/bin/env bash
# Provides hiredis >= 1.0 with hiredis_ssl (TLS) for the builds.
#
# - A system hiredis >= 1.0 with hiredis_ssl found by pkg-config (Debian
#   trixie, Ubuntu 24.04, Fedora, Homebrew): nothing to do.
# - Debian bookworm (hiredis 0.14.1, no TLS): builds hiredis from Debian's own
#   trixie source package (fetched, signature- and hash-checked by apt; only a
#   deb-src entry, never a trixie binary package) into build/deps/hiredis,
#   static -fPIC archives only, so whatever links it needs nothing from
#   build/ at run time. CMake and setup.py prefer that prefix when it exists.
# Cached: does nothing once build/deps/hiredis is complete. Runs as root or
# uses sudo for apt, like scripts/deps.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$PWD/build/deps/hiredis
libdir=$prefix/lib

if [ -f "$libdir/libhiredis_ssl.a" ] && [ -f "$libdir/pkgconfig/hiredis.pc" ] \
   && [ -f "$libdir/pkgconfig/hiredis_ssl.pc" ]; then
  echo "hiredis $(sed -n 's/^Version: //p' "$libdir/pkgconfig/hiredis.pc") with TLS: $prefix"
  exit 0
fi
if pkg-config --atleast-version=1.0 hiredis 2>/dev/null && pkg-config --exists hiredis_ssl 2>/dev/null; then
  echo "hiredis $(pkg-config --modversion hiredis) with TLS: system ($(pkg-config --variable=libdir hiredis))"
  exit 0
fi

os_id=$( . /etc/os-release 2>/dev/null && echo "${ID:-}")
if [ "$os_id" != debian ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "hiredis.sh: no hiredis >= 1.0 with hiredis_ssl found; install it (Ubuntu 24.04: apt-get install" \
       "libhiredis-dev libssl-dev; Fedora: dnf install hiredis-devel openssl-devel; macOS: brew install" \
       "hiredis openssl) or build without TLS (cmake -DRL_TLS=OFF, RL_TLS=0 pip install .)" >&2
  exit 1
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

# what building hiredis needs
pkgs=()
command -v dpkg-source >/dev/null 2>&1 || pkgs+=(dpkg-dev)
command -v make >/dev/null 2>&1 || pkgs+=(make)
command -v cc >/dev/null 2>&1 || pkgs+=(gcc)
[ -f /usr/include/openssl/ssl.h ] || pkgs+=(libssl-dev)
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "installing: ${pkgs[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null
fi

. scripts/trixie-src.sh
trixie_sources hiredis

work=$PWD/build/deps/hiredis-src
rm -rf "$work" "$prefix" "$prefix.stage"
mkdir -p "$work"
# as root apt downloads as _apt: let it write there (else it warns and downloads unsandboxed)
if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$work"; fi
(cd "$work" && apt-get source -qq --download-only hiredis/trixie >/dev/null)
dsc=$(ls "$work"/hiredis_*.dsc)
version=$(sed -n 's/^Version: //p' "$dsc")
echo "building hiredis $version (Debian trixie source) with TLS into $prefix"
# apt has verified the Release signature and the files' hashes
dpkg-source -q --no-check -x "$dsc" "$work/src" >/dev/null
log=$work/build.log
if ! { make -C "$work/src" -j"$(nproc 2>/dev/null || echo 2)" USE_SSL=1 PREFIX="$prefix" &&
       make -C "$work/src" install USE_SSL=1 PREFIX="$prefix" DESTDIR="$prefix.stage"; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "hiredis.sh: building hiredis failed, full log: $log" >&2
  exit 1
fi
# static archives only (Makefile builds them with -fPIC); no CMake files that
# would point at the removed shared libraries
rm -f "$prefix.stage$libdir"/*.so "$prefix.stage$libdir"/*.so.* "$prefix.stage$libdir"/*.dylib
rm -rf "$prefix.stage$libdir/cmake"
mv "$prefix.stage$prefix" "$prefix"
rm -rf "$prefix.stage" "$work"
echo "hiredis $(sed -n 's/^Version: //p' "$libdir/pkgconfig/hiredis.pc") with TLS: $prefix"
