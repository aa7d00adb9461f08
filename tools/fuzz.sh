#!/bin/bash
# tools/fuzz.sh [SECONDS] [HARNESS...] — runs torc's libFuzzer harnesses (tests/fuzz/fuzz_*.c)
# long: builds them in build-fuzz/ (clang, coverage instrumentation, ASan + UBSan; FUZZ_BUILD=dir
# picks another tree), writes each harness's seed corpus with torc into build-fuzz/corpus/<name>
# (kept and grown across runs), then fuzzes each for SECONDS (default 600), FUZZ_JOBS of them at
# once (default 1). Prints the executions of each harness; exits non-zero on any finding, whose
# reproducer is left as build-fuzz/<name>-crash-* (rerun: build-fuzz/bin/<name> FILE).
set -u
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
build=${FUZZ_BUILD:-build-fuzz}
jobs=${FUZZ_JOBS:-1}
clang=$(command -v clang || command -v clang-14) || { echo "fuzz.sh: clang is needed (libFuzzer)"; exit 1; }
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$clang" -DTORC_FUZZ=ON -DTORC_SANITIZE=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
      -DTORC_WITH_ONEDNN=OFF -DTORC_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target torc_fuzzers -j2 >/dev/null || { echo "fuzz.sh: the build failed"; exit 1; }
if [ $# -eq 0 ]; then
    set -- $(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
fi
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
run_one() {
    local name=$1 corpus=$build/corpus/$1
    mkdir -p "$corpus"
    TORC_FUZZ_SEEDS="$corpus" "$build/bin/$name"
    "$build/bin/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/$name-" "$corpus" >"$build/$name.log" 2>&1
    local rc=$?
    echo "$name: $(sed -n 's/^stat::number_of_executed_units: *//p' "$build/$name.log") executions in ${seconds}s," \
         "$(grep -c '' <(ls "$corpus")) corpus files, $([ $rc -eq 0 ] && echo 'no finding' || echo "FINDING (exit $rc, see $build/$name.log)")"
    return $rc
}
status=0 running=0
for name in "$@"; do
    run_one "$name" &
    running=$((running + 1))
    if [ $running -ge "$jobs" ]; then
        wait -n || status=1
        running=$((running - 1))
    fi
done
while [ $running -gt 0 ]; do
    wait -n || status=1
    running=$((running - 1))
done
exit $status
