# Debian sid roots for CPython 3.14 and 3.15: Debian's own binaries with their
# headers, the interpreters users get from a current distribution. Sourced by
# scripts/dist.sh (the cp314 and cp315 wheels are built by those interpreters,
# against their headers) and scripts/sid-test.sh (the wheels run there).
#   sid_root amd64   a root chroot runs (debootstrap): python3.14 and 3.15
#                    with -venv and headers, redis-server (the Python suite
#                    starts its own), cmake and pkgconf (setup.py's build)
#   sid_root arm64   unpacked only (debootstrap --foreign, as
#                    scripts/arm64-test.sh's bookworm root): qemu-user runs its
#                    python3.14 and 3.15; their aarch64 pyconfig.h
#   sid_run ROOT CMD runs CMD chrooted in the amd64 root, in the current
#                    directory, with the clone and the cache at the same paths
# Each root is built once into $cache/sid-root-<arch> (2-3 minutes) and kept
# while its package list stays the same. Needs root or sudo (debootstrap,
# mount, chroot); expects $root (the clone), $cache and $sudo set.
sid_pythons="3.14 3.15"

sid_root() { # amd64|arm64: prints the root's path, building it first if needed
  local arch=$1 dir=$cache/sid-root-$1 pkgs deb
  case "$arch" in
    amd64) pkgs=python3.14,python3.14-venv,libpython3.14-dev,python3.15,python3.15-venv,libpython3.15-dev
      pkgs+=,redis-server,cmake,pkgconf,ca-certificates ;;
    # the headers' package brings the interpreter and its standard library
    arm64) pkgs=libpython3.14-dev,python3.14,libpython3.15-dev,python3.15 ;;
    *) echo "sid.sh: unknown architecture $arch" >&2; return 2 ;;
  esac
  if [ "$(cat "$dir/ready" 2>/dev/null)" != "$pkgs" ]; then
    echo "sid: building the $arch Debian sid root in $dir (minutes, once)" >&2
    command -v debootstrap >/dev/null 2>&1 ||
      { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
    $sudo rm -rf "$dir"
    if [ "$arch" = amd64 ]; then
      $sudo debootstrap --variant=minbase --include="$pkgs" sid "$dir" http://deb.debian.org/debian >/dev/null
      $sudo chroot "$dir" apt-get clean
    else
      $sudo debootstrap --foreign --arch=arm64 --variant=minbase --include="$pkgs" sid "$dir" \
        http://deb.debian.org/debian >/dev/null
      for deb in "$dir"/var/cache/apt/archives/*.deb; do $sudo dpkg-deb -x "$deb" "$dir"; done
      $sudo rm -f "$dir"/var/cache/apt/archives/*.deb
    fi
    echo "$pkgs" | $sudo tee "$dir/ready" >/dev/null
  fi
  echo "$dir"
}

sid_run() { # root command...: in a mount namespace of its own, so the binds end with it
  local dir=$1 deps binds=("$root" "$cache") home=/root
  shift
  # as a user, a home in the cache: the root's /root is root's
  [ "$(id -u)" -eq 0 ] || { home=$cache/sid-home-$(id -u); mkdir -p "$home"; }
  # a worktree may link build/deps (Toxiproxy, hiredis) to another clone's
  deps=$(readlink -f "$root/build/deps" 2>/dev/null || true)
  case "$deps" in "" | "$root"/*) ;; *) binds+=("$deps") ;; esac
  $sudo unshare --mount --propagation private bash -euc '
    dir=$1 n=$2 user=$3 home=$4
    shift 4
    for b in "${@:1:$n}"; do mkdir -p "$dir$b" && mount --bind "$b" "$dir$b"; done
    shift "$n"
    mount -t proc proc "$dir/proc"
    mount -t tmpfs tmpfs "$dir/dev/shm"
    # the host'"'"'s resolver and CA bundle, for pip (a proxy'"'"'s CA may be added there)
    mount --bind /etc/resolv.conf "$dir/etc/resolv.conf"
    mount --bind /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
    exec chroot --userspec="$user" "$dir" /usr/bin/env -C "$PWD" HOME="$home" \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
  ' sid_run "$dir" "${#binds[@]}" "$(id -u):$(id -g)" "$home" "${binds[@]}" "$@"
}
