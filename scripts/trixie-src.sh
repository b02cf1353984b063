# Sourced by scripts/hiredis.sh, scripts/servers.sh and scripts/dist.sh: a deb-src entry for
# Debian trixie (source packages only, verified by apt), unless one is
# configured already, and an index that knows PACKAGE. Needs $sudo.
trixie_sources() {
  local package=$1 sources=/etc/apt/sources.list.d/ratelimit-trixie-src.sources configured
  configured=$(apt-get indextargets --no-release-info --format '$(RELEASE)' 'Created-By: Sources' 2>/dev/null || true)
  if ! grep -qx trixie <<<"$configured"; then
    # Ubuntu has not got Debian's signing keys by default (universe has them)
    if [ ! -f /usr/share/keyrings/debian-archive-keyring.gpg ]; then
      $sudo apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq debian-archive-keyring >/dev/null
    fi
    echo "adding the trixie deb-src entry: $sources" >&2
    printf '%s\n' \
      '# Added by ratelimit scripts (hiredis.sh, servers.sh): source packages only.' \
      'Types: deb-src' \
      'URIs: http://deb.debian.org/debian' \
      'Suites: trixie' \
      'Components: main' \
      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
      | $sudo tee "$sources" >/dev/null
  fi
  if ! apt-get source -qq --print-uris "$package/trixie" >/dev/null 2>&1; then
    $sudo apt-get update -qq
  fi
}

# The same for Debian bookworm and bookworm-security (scripts/dist.sh: OpenSSL).
bookworm_sources() {
  local package=$1 sources=/etc/apt/sources.list.d/ratelimit-bookworm-src.sources configured
  configured=$(apt-get indextargets --no-release-info --format '$(RELEASE)' 'Created-By: Sources' 2>/dev/null || true)
  if ! grep -qx bookworm <<<"$configured"; then
    echo "adding the bookworm deb-src entries: $sources" >&2
    printf '%s\n' \
      '# Added by ratelimit scripts (dist.sh): source packages only.' \
      'Types: deb-src' \
      'URIs: http://deb.debian.org/debian' \
      'Suites: bookworm bookworm-updates' \
      'Components: main' \
      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
      '' \
      'Types: deb-src' \
      'URIs: http://deb.debian.org/debian-security' \
      'Suites: bookworm-security' \
      'Components: main' \
      'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' \
      | $sudo tee "$sources" >/dev/null
  fi
  if ! apt-get source -qq --print-uris "$package/bookworm" >/dev/null 2>&1; then
    $sudo apt-get update -qq
  fi
}
