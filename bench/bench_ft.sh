#!/usr/bin/env bash
# Python, 8 threads, against `limits` (redis-py storage) with and without the
# GIL, one run, one redis-server: bench/bench_python.py --threads 8 (the same
# harness every time) on
#   - the free-threaded CPython 3.13 (scripts/ft-python.sh), GIL off;
#   - the same interpreter with PYTHON_GIL=1 (the GIL back on);
#   - a GIL build of CPython 3.13 (scripts/find-python.sh 3.13).
# Each interpreter gets a venv (build/bench-ft-*) with this checkout's binding
# built from source (pip install .: the same compiler and flags for all) and
# `limits` + redis from PyPI.
# Each round's figures go to build/bench-ft-rounds.log, the medians to stdout.
# Usage: bench/bench_ft.sh [seconds] [rounds]
#   RL_BENCH_ALGORITHMS   rows (default gcra; gcra is set against limits' fixed window)
#   RL_BENCH_REDIS_CPU=k  redis-server pinned to CPU k (taskset); the Python side
#                         is never pinned (free threading is about using the cores)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-2}
rounds=${2:-3}
export RL_BENCH_ALGORITHMS=${RL_BENCH_ALGORITHMS:-gcra}
ft=$(scripts/ft-python.sh)
gil=$(scripts/find-python.sh 3.13)
for side in ft gil; do
  venv=build/bench-ft-$side
  py=$ft
  [ "$side" = gil ] && py=$gil
  if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q limits redis
  fi
  "$venv/bin/pip" install -q --force-reinstall --no-deps .
done
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
${RL_BENCH_REDIS_CPU:+taskset -c "$RL_BENCH_REDIS_CPU"} redis-server --port "$port" --bind 127.0.0.1 --save '' \
  --appendonly no --daemonize yes --pidfile "$PWD/build/bench-ft-redis.pid" >/dev/null
trap 'kill "$(cat build/bench-ft-redis.pid)" 2>/dev/null || true' EXIT
sleep 0.3
export REDIS_URL=redis://127.0.0.1:$port
: >build/bench-ft-rounds.log
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), redis-server $(redis-server --version | grep -o 'v=[0-9.]*')${RL_BENCH_REDIS_CPU:+ on CPU $RL_BENCH_REDIS_CPU}, at $(git rev-parse --short HEAD)"
for run in "ft 0" "ft 1" "gil -"; do
  read -r side gil_env <<<"$run"
  echo
  if [ "$gil_env" = - ]; then
    env -u PYTHON_GIL "build/bench-ft-$side/bin/python" bench/bench_python.py --threads 8 "$seconds" "$rounds" 2>>build/bench-ft-rounds.log
  else
    PYTHON_GIL=$gil_env "build/bench-ft-$side/bin/python" bench/bench_python.py --threads 8 "$seconds" "$rounds" 2>>build/bench-ft-rounds.log
  fi
done
