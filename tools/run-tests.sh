#!/usr/bin/env bash
# tools/run-tests.sh — README's second command (and CI's): install what is missing, build and
# run the whole Check suite through ctest, check the core suites under valgrind, then run the
# suite again under AddressSanitizer + UBSan (its ctest summary closes the output).
# GPU tests carry the ctest label "gpu" and skip (exit 77) when no CUDA device exists.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
jobs=$(nproc)
echo "== build (RelWithDebInfo) and test"
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTORC_WERROR=ON >/dev/null
cmake --build build-test -j"$jobs"
(cd build-test && ctest --output-on-failure -j"$jobs")
echo "== clang build (Release, warnings as errors; tools/build-matrix.sh builds every type under both)"
CC=clang cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Release -DTORC_WERROR=ON -DTORC_WITH_CUDA=OFF >/dev/null
cmake --build build-clang -j"$jobs" >build-clang/build.log 2>&1 || { grep -E "error|Error" build-clang/build.log | head -n 40; exit 1; }
echo "== valgrind: the core suites leak nothing (reference backend, no fork)"
for t in tensor view; do
  CK_FORK=no TORC_BACKEND=reference TORC_TEST_PLUGIN_DIR="$PWD/build-test/tests/plugins" \
    TORC_TEST_DATA="$PWD/tests/golden" \
    valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=1 \
    "build-test/bin/test_$t" >"build-test/valgrind-$t.log" 2>&1 ||
    { tail -n 40 "build-test/valgrind-$t.log"; echo "valgrind: test_$t FAILED"; exit 1; }
done
echo "valgrind: no leaks in the core suites"
echo "== build with AddressSanitizer + UBSan and test (the register-spill check ran above)"
# (label xcheck runs here too: torc-xcheck's --sweep tests put each operand in a buffer that ends
# at its last element, so a kernel reading past one fails under ASan even when its values are right)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTORC_SANITIZE=ON -DTORC_WERROR=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --output-on-failure -j"$jobs" -LE "gpu|bench|build|isa")
