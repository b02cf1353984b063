#!/usr/bin/env bash
# Prints the path of a CPython X.Y interpreter (pyenv's newest X.Y.*, else
# pythonX.Y on PATH) that can make a venv with pip and has its headers (the
# wheels compile against them); exits 1 when this machine has none, naming
# the Debian package an interpreter on PATH lacks.
# Usage: scripts/find-python.sh 3.11
set -euo pipefail
v=$1
dir=$({ ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v".* 2>/dev/null || true; } | sort -V | tail -n 1)
if [ -n "$dir" ] && [ -x "$dir/bin/python" ]; then
  py=$dir/bin/python
else
  py=$(command -v "python$v") || exit 1
fi
if ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  echo "find-python.sh: $py cannot make a venv with pip (Debian: apt-get install python$v-venv)" >&2
  exit 1
fi
if ! "$py" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_path("include") + "/Python.h"))'; then
  echo "find-python.sh: $py has no Python.h (Debian: apt-get install python$v-dev)" >&2
  exit 1
fi
echo "$py"
