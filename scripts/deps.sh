#!/usr/bin/env bash
# Installs what building and testing ratelimit needs, only when missing, then
# hiredis >= 1.0 with TLS (scripts/hiredis.sh: on Debian bookworm built from
# trixie's source package into build/deps/hiredis) unless the job is no-TLS.
# Usage: scripts/deps.sh [c] [python] [java] [notls]   (no component: all;
# notls or RL_TLS=0: the system hiredis only)
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
need() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }
need redis-server redis-server
need redis-sentinel redis-sentinel
need openssl openssl
need cmake cmake
need ninja ninja-build
need pkg-config pkg-config
need cc gcc
need make make
need dpkg-source dpkg-dev
[ -f /usr/include/hiredis/hiredis.h ] || pkgs+=(libhiredis-dev)
[ -f /usr/include/openssl/ssl.h ] || pkgs+=(libssl-dev)
[ -f /usr/include/cjson/cJSON.h ] || pkgs+=(libcjson-dev)
for w in "${want[@]}"; do
  case "$w" in
    c) need clang clang; need valgrind valgrind
       # libFuzzer and the sanitizer runtimes (scripts/fuzz.sh)
       ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
         pkgs+=(libclang-rt-14-dev) ;;
    python) need python3 python3; python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv python3-dev) ;;
    java) need javac openjdk-17-jdk-headless; need mvn maven ;;
  esac
done
if [ ${#pkgs[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${pkgs[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${pkgs[@]}"
fi
if [ "$tls" = 1 ]; then
  scripts/hiredis.sh
fi
