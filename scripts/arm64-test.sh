#!/usr/bin/env bash
# Runs the aarch64 wheel and jar from dist/ (scripts/dist.sh) on arm64 Debian
# under qemu-user-static: the conformance vectors through the wheel, a
# verified TLS connection from the wheel and from the jar (its Demo), to
# redis-servers on the host's loopback. scripts/test.sh runs it (about 30 s
# once the root is cached).
#
# The arm64 root: `debootstrap --foreign --arch=arm64` downloads Debian
# bookworm's arm64 python3 and openjdk-17-jre-headless with what they need
# (apt-verified) and every package is unpacked; binaries run through
# `qemu-aarch64-static -L <root>` (no binfmt registration, no chroot).
# Cached in ~/.cache/ratelimit-dist/arm64-root (RL_DIST_CACHE).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${RL_DIST_CACHE:-$HOME/.cache/ratelimit-dist}
arm=$cache/arm64-root
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
pkgs=()
command -v debootstrap >/dev/null 2>&1 || pkgs+=(debootstrap)
command -v qemu-aarch64-static >/dev/null 2>&1 || pkgs+=(qemu-user-static)
command -v unzip >/dev/null 2>&1 || pkgs+=(unzip)
# pip comes from a venv (below): Debian's python3 has none without python3-pip
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || pkgs+=(python3-venv)
if [ ${#pkgs[@]} -gt 0 ]; then
  [ -z "$sudo" ] || command -v sudo >/dev/null 2>&1 ||
    { echo "arm64-test.sh: to install ${pkgs[*]}: run as root, or install sudo" >&2; exit 1; }
  echo "installing: ${pkgs[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi

wheel=$(ls dist/*cp311-cp311-manylinux*aarch64*.whl 2>/dev/null | head -n 1)
jar=$(ls dist/ratelimit-*.jar 2>/dev/null | head -n 1)
# the listing first: grep -q stopping early would fail unzip's write (SIGPIPE), hence the pipeline
if [ -z "$wheel" ] || [ -z "$jar" ] || ! grep -q native/linux-aarch64/ <<<"$(unzip -l "$jar")"; then
  echo "arm64-test.sh: no aarch64 wheel (cp311) or jar in dist/: run scripts/dist.sh aarch64 first" >&2
  exit 1
fi

if [ ! -f "$arm/ready" ]; then
  echo "arm64-test: building the arm64 root in $arm (minutes, once)"
  $sudo rm -rf "$arm"
  $sudo debootstrap --foreign --arch=arm64 --variant=minbase \
    --include=python3,openjdk-17-jre-headless bookworm "$arm" http://deb.debian.org/debian >/dev/null
  for deb in "$arm"/var/cache/apt/archives/*.deb; do $sudo dpkg-deb -x "$deb" "$arm"; done
  $sudo touch "$arm/ready"
fi
run() { qemu-aarch64-static -L "$arm" "$@"; }
java=$(ls -d "$arm"/usr/lib/jvm/java-17-openjdk-arm64 | head -n 1)/bin/java

# the wheel and the tests' pure-Python dependencies, unpacked as pip installs them
site=$root/build/arm64-site
rm -rf "$site"
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
pipvenv=$root/build/arm64-pip
[ -x "$pipvenv/bin/pip" ] || python3 -m venv "$pipvenv"
"$pipvenv/bin/pip" install -q --target "$site" --only-binary=:all: pytest redis
"$pipvenv/bin/pip" install -q --upgrade --target "$site" --platform manylinux2014_aarch64 --python-version 3.11 \
  --only-binary=:all: --no-index --find-links dist --no-deps ratelimit-core

# the TLS server: scripts/test.sh's (RL_TEST_TLS_URL), else one started here
if [ -z "${RL_TEST_TLS_URL:-}" ]; then
  topology=$root/build/topology-arm64
  python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true
  eval "$(python3 tests/topology/topology.py up "$topology" --only tls -q)"
  trap 'python3 tests/topology/topology.py down "$topology" >/dev/null 2>&1 || true' EXIT
fi

echo "== wheel ($(basename "$wheel")) on arm64 CPython: TLS"
(cd / && PYTHONPATH=$site run "$arm/usr/bin/python3" - "$RL_TEST_TLS_URL" <<'EOF'
import platform, sys, ratelimit
assert platform.machine() == "aarch64", platform.machine()
assert ratelimit.has_tls() and ratelimit.tls_version().startswith("OpenSSL 3."), ratelimit.tls_version()
lim = ratelimit.Client(sys.argv[1]).limiter("arm64-tls", "2/minute")
assert [bool(lim.acquire("u")) for _ in range(3)] == [True, True, False]
print("aarch64, %s, TLS: 2 of 3 admitted" % ratelimit.tls_version())
EOF
)
echo "== wheel on arm64 CPython: the conformance vectors"
PYTHONPATH=$site run "$arm/usr/bin/python3" -m pytest -q -p no:cacheprovider tests/vectors/test_vectors.py

echo "== jar ($(basename "$jar")) on arm64 OpenJDK 17: the demo over TLS"
out=$(cd / && run "$java" -cp "$root/$jar" io.ratelimit.Demo "$RL_TEST_TLS_URL" 2>&1) || { echo "$out"; exit 1; }
echo "$out"
grep -q 'native library from jar:/native/linux-aarch64/libratelimit_jni.so' <<<"$out"
grep -q 'admitted 3 of 5' <<<"$out"
grep -q 'TLS: OpenSSL 3.' <<<"$out"
echo "arm64: wheel and jar pass"
