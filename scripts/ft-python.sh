#!/usr/bin/env bash
# Prints the path of a free-threaded CPython 3.13 (python3.13t, built with
# --disable-gil), building it first when missing: CPython's own release
# tarball as Debian trixie's python3.13 source package carries it (fetched and
# verified by apt; Debian's patches are not applied), installed into
# $RL_DIST_CACHE/cpython-<version>t-<arch> (default ~/.cache/ratelimit-dist)
# and reused while that source version is the one apt serves. Debian ships
# no free-threaded interpreter. Lean, to fit CI's budget: no PGO or LTO, no
# test modules, none of its own tests; -j2. About 6-10 minutes on two cores
# the first time. Needs root or sudo for apt.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RL_DIST_CACHE:-$HOME/.cache/ratelimit-dist}
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
. scripts/dist-lib.sh # quietly
. scripts/trixie-src.sh
trixie_sources python3.13 >&2
# the orig tarball is CPython's release (python3.13_3.13.5.orig.tar.xz)
orig=$(apt-get source -qq --print-uris python3.13/trixie | awk '/\.orig\.tar\.xz /{print $2; exit}')
[ -n "$orig" ] || { echo "ft-python.sh: no python3.13 source package for trixie" >&2; exit 1; }
version=${orig#python3.13_}
version=${version%.orig.tar.xz}
prefix=$cache/cpython-${version}t-$(uname -m)
if [ "$(cat "$prefix/ready" 2>/dev/null)" != "$orig" ]; then
  echo "ft-python.sh: building free-threaded CPython $version into $prefix (minutes, once)" >&2
  # what its build needs for pip and the suite: ssl and zlib (pip), ctypes' libffi
  pkgs=()
  for p in xz-utils libssl-dev zlib1g-dev libffi-dev; do
    dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p")
  done
  if [ ${#pkgs[@]} -gt 0 ]; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  fi
  mkdir -p "$cache/src"
  # as root apt downloads as _apt: let it write there
  if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$cache/src"; fi
  # apt checks the .dsc's signature and every file's hash
  [ -f "$cache/src/$orig" ] ||
    (cd "$cache/src" && quietly apt-get source --download-only python3.13/trixie)
  work=$cache/work/cpython-${version}t
  rm -rf "$work" "$prefix"
  mkdir -p "$work"
  tar -xJf "$cache/src/$orig" -C "$work" --strip-components=1
  (cd "$work" &&
    quietly ./configure --disable-gil --prefix="$prefix" --disable-test-modules --with-ensurepip=no &&
    quietly make -j2 &&
    quietly make install)
  rm -rf "$work"
  "$prefix/bin/python3.13t" -c 'import sys, ssl, zlib; assert not sys._is_gil_enabled()'
  echo "$orig" >"$prefix/ready"
fi
echo "$prefix/bin/python3.13t"
