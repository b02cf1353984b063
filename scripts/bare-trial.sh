#!/usr/bin/env bash
# The README's "Try it" as a new user meets it: a default Debian 12 root
# (debootstrap bookworm) plus only what the README names, git and
# ca-certificates, a clean clone of REF, then scripts/demo.sh and
# scripts/test.sh inside it (as root, so they use apt-get without sudo).
# Everything else they need they must install themselves.
#
# Usage (as root): scripts/bare-trial.sh [REF] [DIR]
#   REF  what to clone from this repository (default HEAD)
#   DIR  the root to build, outside the clone (default /var/tmp/rl-bare; a
#        directory this script made before is removed first)
# Log: DIR.log (everything, with timings; DIR.again.log for RL_BARE_AGAIN);
# exit status: test.sh's.
# Env: RL_BARE_SUITE=noble: Ubuntu 24.04 instead (main and universe, as an
# Ubuntu install has them; DIR default /var/tmp/rl-bare-noble);
# RL_BARE_MIRROR (default http://deb.debian.org/debian, for noble
# http://archive.ubuntu.com/ubuntu); RL_BARE_DEMO_ONLY=1
# stops after demo.sh (a quick check of the root itself); RL_BARE_AGAIN=1
# runs scripts/test.sh in DIR as a trial left it (at REF when one is given,
# as a user's git pull): after a demo-only trial that is the first run,
# after a full one the second, which reuses what the first installed and
# cached.
#
# The root shares the host's network (the tests bind loopback ports only)
# and kernel; /proc, /sys and /dev are bound into it. Services are not
# started inside it (policy-rc.d), as on a machine where redis-server's
# package would start one on 6379 the host may be using.
set -euo pipefail
# in braces: bash reads it all before running, so a checkout changing under a long trial is harmless
{
cd "$(dirname "$0")/.."
repo=$PWD
ref=${1:-HEAD}
suite=${RL_BARE_SUITE:-bookworm}
case "$suite" in
  bookworm) dir=${2:-/var/tmp/rl-bare}; mirror=${RL_BARE_MIRROR:-http://deb.debian.org/debian} ;;
  noble) dir=${2:-/var/tmp/rl-bare-noble}; mirror=${RL_BARE_MIRROR:-http://archive.ubuntu.com/ubuntu} ;;
  *) echo "bare-trial.sh: RL_BARE_SUITE is bookworm or noble" >&2; exit 2 ;;
esac
again=${RL_BARE_AGAIN:-0}
log=$dir.log
[ "$again" = 1 ] && log=$dir.again.log
marker=.rl-bare-trial
# what the README asks for, nothing more
packages=git,ca-certificates

[ "$(id -u)" -eq 0 ] || { echo "bare-trial.sh: run as root (debootstrap, chroot, mounts)" >&2; exit 1; }
case "$(realpath -m "$dir")" in
  / | "$repo" | "$repo"/*) echo "bare-trial.sh: DIR must be outside the clone and not /" >&2; exit 1 ;;
esac
commit=$(git rev-parse --verify "$ref^{commit}")

unmount() {
  local m
  # deepest first; --rbind mounts have submounts (/dev/pts, /dev/shm...)
  for m in $(awk -v d="$(realpath -m "$dir")/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
}
if [ "$again" = 1 ]; then
  [ -f "$dir/$marker" ] && [ -d "$dir/root/ratelimit" ] ||
    { echo "bare-trial.sh: RL_BARE_AGAIN=1: no trial root in $dir" >&2; exit 1; }
  unmount
elif [ -e "$dir" ]; then
  [ -f "$dir/$marker" ] || { echo "bare-trial.sh: $dir exists and was not made by this script" >&2; exit 1; }
  unmount
  rm -rf --one-file-system "$dir"
fi
trap unmount EXIT

command -v debootstrap >/dev/null 2>&1 || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

exec > >(tee "$log") 2>&1
start=$SECONDS
stamp() { printf '\n=== %s  [%dm%02ds]\n' "$*" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
mounts() {
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  mount --bind /proc "$dir/proc"
  mount --rbind /sys "$dir/sys"
  mount --rbind /dev "$dir/dev"
}
in_root() {
  chroot "$dir" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/ratelimit && $1"
}
if [ "$again" = 1 ]; then
  if [ $# -ge 1 ]; then
    git -C "$dir/root/ratelimit" fetch -q "$repo" "$ref"
    git -C "$dir/root/ratelimit" checkout -q --detach "$commit"
  fi
  echo "bare trial, test.sh again at $(git -C "$dir/root/ratelimit" rev-parse HEAD) in $dir, $(date -u '+%F %T') UTC"
  mounts
  stamp "scripts/test.sh (again)"
  status=0
  in_root scripts/test.sh || status=$?
  stamp "done: scripts/test.sh exited $status"
  exit $status
fi
echo "bare trial of $commit ($ref) in $dir, $(date -u '+%F %T') UTC"

stamp "debootstrap $suite + $packages"
mkdir -p "$dir"
touch "$dir/$marker"
if [ "$suite" = noble ]; then
  # Debian 12's debootstrap has no noble script (gutsy's serves every Ubuntu)
  # and Debian no Ubuntu keyring: ubuntu-keyring's deb from the mirror, of
  # which only the archive key whose fingerprint is written here is trusted
  key=F6ECB3762474EDA9D21B7022871920D1991BC93C   # Ubuntu Archive Automatic Signing Key (2018)
  kdir=$(mktemp -d)
  deb=$(python3 - "$mirror" <<'PY'
import gzip, re, sys, urllib.request
m = sys.argv[1]
idx = gzip.decompress(urllib.request.urlopen(m + "/dists/noble/main/binary-amd64/Packages.gz").read()).decode()
print(m + "/" + re.search(r"^Package: ubuntu-keyring\n(?:.+\n)*?Filename: (\S+)", idx, re.M).group(1))
PY
  )
  python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$deb" "$kdir/k.deb"
  dpkg-deb -x "$kdir/k.deb" "$kdir/x"
  gpg -q --homedir "$kdir" --no-default-keyring --keyring "$kdir/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" \
    --export "$key" >"$kdir/ubuntu.gpg"
  [ -s "$kdir/ubuntu.gpg" ] || { echo "bare-trial.sh: no key $key in $deb" >&2; exit 1; }
  debootstrap --keyring="$kdir/ubuntu.gpg" --components=main,universe --include="$packages" \
    noble "$dir" "$mirror" /usr/share/debootstrap/scripts/gutsy
  rm -rf "$kdir"
else
  debootstrap --include="$packages" bookworm "$dir" "$mirror"
fi
printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
chmod +x "$dir/usr/sbin/policy-rc.d"
mounts
# A network that intercepts TLS (as this workplace's does) signs with a CA of
# its own that only the host trusts: the root trusts the host's extra CAs too,
# as local CAs, so apt's hooks keep them (and put them in Java's cacerts).
python3 - /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt" \
  "$dir/usr/local/share/ca-certificates" <<'PY'
import re, sys, pathlib
pem = lambda p: re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", pathlib.Path(p).read_text(), re.S)
known = set(pem(sys.argv[2]))
for i, cert in enumerate(c for c in pem(sys.argv[1]) if c not in known):
    pathlib.Path(sys.argv[3], f"host-{i}.crt").write_text(cert + "\n")
PY
chroot "$dir" update-ca-certificates >/dev/null

stamp "clone $commit"
git clone -q --no-local "$repo" "$dir/root/ratelimit"
git -C "$dir/root/ratelimit" checkout -q --detach "$commit"

stamp "scripts/demo.sh"
in_root scripts/demo.sh
[ "${RL_BARE_DEMO_ONLY:-0}" = 1 ] && { stamp "done: demo.sh only"; exit 0; }
stamp "scripts/test.sh"
status=0
in_root scripts/test.sh || status=$?
stamp "done: scripts/test.sh exited $status"
exit $status
}
