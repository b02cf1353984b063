# Sourced by scripts/dist.sh and scripts/windows-test.sh: what both builds
# of the binaries do alike. Debian source packages are downloaded by apt
# (signature and hashes checked) into $cache/src, shared by every build that
# compiles them. Needs $cache and $sudo.

# chatter goes to a log shown only when the command fails
quietly() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    tail -n 60 "$log"
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# apt-get installs the packages named, if any (as root, else with sudo;
# needs $sudo)
apt_install() {
  [ $# -gt 0 ] || return 0
  [ -z "$sudo" ] || command -v sudo >/dev/null 2>&1 ||
    { echo "$(basename "$0"): to install $*: run as root, or install sudo" >&2; exit 1; }
  echo "installing: $*"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# the first suite that serves package: downloads into $cache/src, prints the .dsc
fetch() { # package suite...
  local package=$1 suite dsc
  shift
  for suite in "$@"; do
    dsc=$(apt-get source -qq --print-uris "$package/$suite" 2>/dev/null | awk '/\.dsc /{print $2; exit}')
    [ -n "$dsc" ] || continue
    if [ ! -f "$cache/src/$dsc" ]; then
      (cd "$cache/src" && apt-get source -qq --download-only "$package/$suite" >/dev/null 2>&1) || {
        echo "$(basename "$0"): $package/$suite ($dsc) cannot be downloaded; trying the next suite" >&2
        continue
      }
    fi
    echo "$cache/src/$dsc"
    return 0
  done
  echo "$(basename "$0"): no source package of $package could be downloaded ($*)" >&2
  return 1
}

# unpacks a .dsc into a fresh directory (apt has verified the files)
unpack() { rm -rf "$2"; dpkg-source -q --no-check -x "$1" "$2" >/dev/null; }
