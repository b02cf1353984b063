#!/usr/bin/env bash
# Installs what building and testing ratelimit needs, only when missing, then
# hiredis >= 1.0 with TLS (scripts/hiredis.sh: on Debian bookworm built from
# trixie's source package into build/deps/hiredis) unless the job is no-TLS,
# and Toxiproxy for the fault tests (built with Go into build/deps/toxiproxy).
# Usage: scripts/deps.sh [demo] [c] [python] [java] [notls]   (no component:
# all but demo; notls or RL_TLS=0: the system hiredis only). demo: only what
# scripts/demo.sh needs (a compiler, CMake, Ninja, hiredis, redis-server; no
# TLS, no test tools).
set -euo pipefail
cd "$(dirname "$0")/.."
want=()
tls=1
case "${RL_TLS:-1}" in 0|off|OFF|no|false) tls=0 ;; esac
for a in "$@"; do
  case "$a" in
    notls) tls=0 ;;
    *) want+=("$a") ;;
  esac
done
[ ${#want[@]} -eq 0 ] && want=(c python java)

pkgs=()
add() { case " ${pkgs[*]} " in *" $1 "*) ;; *) pkgs+=("$1") ;; esac; }
need() { command -v "$1" >/dev/null 2>&1 || add "$2"; }
# building the library and running it: the demo needs no more
need redis-server redis-server
need cmake cmake
need ninja ninja-build
need pkg-config pkg-config
need cc gcc
need gcc gcc
# gcc without its recommends cannot link (no crt1.o, no libc headers)
[ -f /usr/include/stdio.h ] || add libc6-dev
[ -f /usr/include/hiredis/hiredis.h ] || add libhiredis-dev
if [ "${want[*]}" = demo ]; then
  tls=0
else
  # the tests: TLS and Sentinel servers, trixie's hiredis source, the vectors' JSON
  need redis-sentinel redis-sentinel
  need openssl openssl
  need make make
  # Redis 8.0's build (scripts/servers.sh) compiles fast_float, C++
  need g++ g++
  need dpkg-source dpkg-dev
  # dist.sh's checks of the macOS natives (Mach-O)
  need llvm-objdump llvm
  # tests/topology's checks look for its servers' processes
  need pgrep procps
  [ -f /usr/include/openssl/ssl.h ] || add libssl-dev
  [ -f /usr/include/cjson/cJSON.h ] || add libcjson-dev
fi
for w in "${want[@]}"; do
  case "$w" in
    c) need valgrind valgrind
       # libFuzzer and the sanitizer runtimes (scripts/fuzz.sh) of the clang
       # on PATH: a clang without them is a clang without its recommends
       if ! command -v clang >/dev/null 2>&1; then
         add clang; add libclang-rt-dev
       elif [ -z "$(find "$(clang -print-resource-dir)" -name 'libclang_rt.fuzzer*.a' 2>/dev/null)" ]; then
         add "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
       fi ;;
    python) need python3 python3
       # pip comes from the venvs (ensurepip): no script runs the system's pip
       python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || add python3-venv
       # the wheels compile against the interpreter's headers
       python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_path("include") + "/Python.h"))' \
         >/dev/null 2>&1 || add python3-dev ;;
    java) need javac openjdk-17-jdk-headless; need mvn maven ;;
  esac
done
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
need_sudo() {
  [ -z "$sudo" ] || command -v sudo >/dev/null 2>&1 ||
    { echo "deps.sh: to install $*: run as root, or install sudo (apt-get install sudo, as root)" >&2; exit 1; }
}
if [ ${#pkgs[@]} -gt 0 ]; then
  need_sudo "${pkgs[*]}"
  echo "installing: ${pkgs[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
if [ "$tls" = 1 ]; then
  scripts/hiredis.sh
fi
# the fault tests' proxy (core/tests/test_faults.c, test_faults.py,
# FaultsTest.java): Toxiproxy, built from the Go module proxy into
# build/deps/toxiproxy (the tests look there, or at $RL_TOXIPROXY_SERVER)
toxiproxy_version=v2.12.0
toxiproxy=build/deps/toxiproxy/toxiproxy-server
# Toxiproxy needs Go >= 1.23 (its go.mod): a go on PATH, in /usr/local/go or /usr/lib/go-*
# (Debian's golang-1.xx-go) if one is recent enough; else that older go (or
# Debian's golang-go, installed when there is none: 1.19 on Debian 12, 1.22
# on Ubuntu 24.04) fetches the Go toolchain, itself a module
# (golang.org/toolchain), through the machine's GOPROXY into its module cache
# (go env GOMODCACHE, ~/go/pkg/mod by default), checked against the checksum
# database like any module.
go_min=1.23
go_toolchain=1.23.12
# "1.19" (nothing for a go that does not run: it is passed over)
go_version() { { GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null || true; } | sed -n 's/^go\([0-9]*\.[0-9]*\).*/\1/p'; }
go_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
find_go() {
  local g v best=""
  for g in $(command -v go) /usr/local/go/bin/go $(ls -d /usr/lib/go-*/bin/go 2>/dev/null | sort -rV); do
    [ -x "$g" ] || continue
    v=$(go_version "$g")
    [ -n "$v" ] || continue
    if go_at_least "$v" $go_min; then echo "$g"; return; fi
    [ -n "$best" ] || best=$g
  done
  echo "$best"
}
if [ "${want[*]}" != demo ] && { [ ! -x "$toxiproxy" ] || [ "$(cat "$toxiproxy.version" 2>/dev/null)" != "$toxiproxy_version" ]; }; then
  go=$(find_go)
  if [ -z "$go" ]; then
    need_sudo golang-go
    echo "installing: golang-go (to fetch Go $go_toolchain, which Toxiproxy needs)"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends golang-go >/dev/null
    go=$(find_go)
  fi
  if ! go_at_least "$(go_version "$go")" $go_min; then
    module="golang.org/toolchain@v0.0.1-go$go_toolchain.$("$go" env GOOS)-$("$go" env GOARCH)"
    echo "fetching Go $go_toolchain ($module) with $go ($(go_version "$go")) from $("$go" env GOPROXY)"
    # outside any module (GOFLAGS=-mod=mod would need one)
    dir=$(cd / && GOFLAGS= "$go" mod download -json "$module" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
    [ -n "$dir" ] && [ -f "$dir/bin/go" ] || { echo "deps.sh: fetching $module failed" >&2; exit 1; }
    # module zips keep no file modes: make the commands executable, as go's own toolchain switch does
    chmod +x "$dir"/bin/* "$dir"/pkg/tool/*/* 2>/dev/null || true
    go=$dir/bin/go
  fi
  echo "building toxiproxy-server $toxiproxy_version with $go into $toxiproxy"
  gobin=$(mktemp -d)
  (cd / && GOBIN=$gobin GOFLAGS=-buildvcs=false GOTOOLCHAIN=local "$go" install \
    "github.com/Shopify/toxiproxy/v2/cmd/server@$toxiproxy_version")
  mkdir -p "$(dirname "$toxiproxy")"
  mv "$gobin/server" "$toxiproxy"
  rm -rf "$gobin"
  echo "$toxiproxy_version" >"$toxiproxy.version"
fi
