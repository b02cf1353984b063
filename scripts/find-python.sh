#!/usr/bin/env bash
# Prints the path of a CPython X.Y interpreter (pyenv's newest X.Y.*, else
# pythonX.Y on PATH); exits 1 when this machine has none.
# Usage: scripts/find-python.sh 3.11
set -euo pipefail
v=$1
dir=$({ ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v".* 2>/dev/null || true; } | sort -V | tail -n 1)
if [ -n "$dir" ] && [ -x "$dir/bin/python" ]; then
  echo "$dir/bin/python"
else
  command -v "python$v"
fi
