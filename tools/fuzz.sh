#!/usr/bin/env bash
# tools/fuzz.sh [SECONDS] [NAME...] — runs torc's libFuzzer harnesses (tests/fuzz/fuzz_<NAME>.c)
# for SECONDS each (default 600), one after the other, and prints each one's executions.
# The fuzz build is a clang build of all of torc with ASan, UBSan and coverage in $TORC_FUZZ_BUILD
# (default build-fuzz; $CC, default clang, picks the compiler); each harness's seed corpus is
# written by its fuzz_<NAME>_seeds program, and what the fuzzer adds to it is kept between runs
# in $TORC_FUZZ_BUILD/corpus/fuzz_<NAME>. A finding stops the run (exit 1) and leaves its input
# in $TORC_FUZZ_BUILD/crash-*.
#   tools/fuzz.sh --build-only   configures and builds only (ctest's fuzz_build fixture)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${TORC_FUZZ_BUILD:-$src/build-fuzz}
cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER="${CC:-clang}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTORC_FUZZ=ON -DTORC_SANITIZE=ON -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
  -DTORC_WITH_CUDA=OFF -DTORC_WITH_ONEDNN=OFF >/dev/null
cmake --build "$build" --target torc_fuzzers -j"${JOBS:-2}" >/dev/null
[[ "${1:-}" == --build-only ]] && exit 0

seconds=${1:-600}
shift || true
names=("$@")
if [[ ${#names[@]} -eq 0 ]]; then
  for f in "$src"/tests/fuzz/fuzz_*.c; do n=$(basename "$f" .c); names+=("${n#fuzz_}"); done
fi
printf '%-16s %14s %10s\n' harness executions exec/s
for n in "${names[@]}"; do
  corpus=$build/corpus/fuzz_$n
  mkdir -p "$corpus"
  "$build/bin/fuzz_${n}_seeds" "$corpus" >/dev/null
  log=$build/fuzz_$n.log
  if ! "$build/bin/fuzz_$n" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/" \
      "$corpus" >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz_$n: finding (input saved as $build/crash-* or leak-*/timeout-*; log $log)" >&2
    exit 1
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  printf '%-16s %14s %10s\n' "$n" "$execs" "$rate"
done
