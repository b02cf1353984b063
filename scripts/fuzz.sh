#!/usr/bin/env bash
# Fuzzes the parsers (fuzz/: URLs, rate strings, spec validation and key
# tags, every reply decoder) with libFuzzer under ASan + UBSan: configures
# build-fuzz with clang and RL_FUZZ=ON, builds, and runs each target for
# SECONDS (default 30) on a copy of its seed corpus (fuzz/corpus/<target>).
# Fails on any crash, leak, timeout or broken invariant, and keeps the run
# (log, corpus, the input that did it) in build-fuzz/run-<target>.XXXXXX;
# passing runs are removed. Several runs may share build-fuzz at once.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_url fuzz_rate fuzz_spec fuzz_reply)
build=build-fuzz
# hiredis 1.x (build/deps/hiredis): 0.14's reader has no element cap, so a
# bare array header makes it calloc gigabytes in fuzz_reply (hiredis's OOM)
[ -d build/deps/hiredis ] || scripts/hiredis.sh

mkdir -p $build
(
  flock 9
  cmake -S . -B $build -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRL_FUZZ=ON \
    -DRL_BUILD_TESTS=OFF -DRL_BUILD_EXAMPLES=OFF -DRL_BUILD_BENCH=OFF >/dev/null
  cmake --build $build --target fuzz
) 9>"$build/.fuzz.lock"

failed=0
for t in "${targets[@]}"; do
  run=$(mktemp -d "$build/run-$t.XXXXXX")
  mkdir "$run/corpus"
  cp fuzz/corpus/$t/* "$run/corpus/"
  dict=()
  [ -f fuzz/$t.dict ] && dict=(-dict=fuzz/$t.dict)
  # -timeout: one input taking 10 s is a hang; leaks count (detect_leaks)
  if ASAN_OPTIONS=detect_leaks=1 $build/$t "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$run/" "$run/corpus" >"$run/log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$run/log")
    cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$run/log" | tail -1)
    echo "$t: ${seconds} s, ${execs} execs (${rate}/s), ${cov}: no crash"
    rm -rf "$run"
  else
    tail -40 "$run/log"
    echo "$t: FAILED (log $run/log; input: $(ls "$run" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | head -1))"
    failed=1
  fi
done
exit $failed
