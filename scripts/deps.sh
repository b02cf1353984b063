#!/usr/bin/env bash
# Installs what building and testing ratelimit needs, only when missing.
# Usage: scripts/deps.sh [c] [python] [java]   (no argument: everything)
set -euo pipefail
want=("$@")
[ ${#want[@]} -eq 0 ] && want=(c python java)

pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }
need redis-server redis-server
need cmake cmake
need ninja ninja-build
need pkg-config pkg-config
need cc gcc
need make make
[ -f /usr/include/hiredis/hiredis.h ] || pkgs+=(libhiredis-dev)
[ -f /usr/include/cjson/cJSON.h ] || pkgs+=(libcjson-dev)
for w in "${want[@]}"; do
  case "$w" in
    c) need clang clang; need valgrind valgrind ;;
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
