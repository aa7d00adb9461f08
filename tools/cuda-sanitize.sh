#!/usr/bin/env bash
# tools/cuda-sanitize.sh — the CUDA GPU suite (tests/cuda_gpu_test.c) under compute-sanitizer:
# memcheck (out-of-bounds and misaligned device accesses, leaks of device memory), racecheck
# (shared-memory hazards), synccheck (barriers in divergent code). One command:
#
#   tools/cuda-sanitize.sh [build-dir]        (default: build)
#
# Exit status: 0 clean, 1 a tool reported an error or a test failed, 77 nothing to check here
# (no compute-sanitizer in the toolkit, no suite built, or no CUDA device), with the reason.
# memcheck runs the suite's device, ops_vs_reference and shared_memory_ops cases; racecheck and
# synccheck, which look at shared memory and barriers, the device and shared_memory_ops cases (over
# all of ops_vs_reference racecheck ran past 4 minutes on an H200). The cases that only measure or
# need 40 GiB (performance, beyond_2_31) are left out. Set TORC_SANITIZE_TOOLS to run fewer tools
# (e.g. "memcheck").
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) ;; *) build=$here/$build ;; esac
suite=$build/bin/cuda_gpu_test

san=$(command -v compute-sanitizer || true)
for d in "${CUDA_HOME:-}" /usr/local/cuda; do
    [ -z "$san" ] && [ -n "$d" ] && [ -x "$d/bin/compute-sanitizer" ] && san=$d/bin/compute-sanitizer
done
if [ -z "$san" ]; then
    echo "SKIP: compute-sanitizer not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin)"
    exit 77
fi
if [ ! -x "$suite" ]; then
    echo "SKIP: $suite not built (configure with CUDA on and build target cuda_gpu_test)"
    exit 77
fi

export TORC_BUILD_DIR=$build TORC_SOURCE_DIR=$here TORC_TEST_DATA=$here/tests/golden
# Is there a device at all? The suite itself says (exit 77 and why) before any test runs.
probe=$(CK_RUN_CASE=none "$suite" 2>&1)
if [ $? -eq 77 ]; then
    echo "SKIP: $probe"
    exit 77
fi

status=0
for tool in ${TORC_SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    # The suite provokes CUDA API errors on purpose (allocations past the device's memory) and
    # asserts the backend's status for each: the tools are here for device-side errors.
    extra=(--report-api-errors no)
    [ "$tool" = memcheck ] && extra+=(--leak-check full)
    cases="device shared_memory_ops"
    [ "$tool" = memcheck ] && cases="device ops_vs_reference shared_memory_ops"
    for case in $cases; do
        echo "== compute-sanitizer --tool $tool: cuda_gpu_test ($case)"
        if ! CK_RUN_CASE=$case "$san" --tool "$tool" "${extra[@]}" --error-exitcode 1 \
                --print-limit 20 "$suite"; then
            echo "FAILED: $tool on $case"
            status=1
        fi
    done
    echo "== compute-sanitizer --tool $tool: cuda_gpu_test --device1"
    "$san" --tool "$tool" "${extra[@]}" --error-exitcode 1 "$suite" --device1
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
        echo "FAILED: $tool on --device1"
        status=1
    fi
done
[ $status -eq 0 ] && echo "compute-sanitizer: no errors"
exit $status
