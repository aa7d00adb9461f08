#!/usr/bin/env bash
# tools/gpu-check.sh — what a session lent a GPU runs, in one go, each step under a time limit and
# logged to a file of its own:
#   gpu.log       the GPU suite (tests/cuda_gpu_test.c) case by case but performance, then --fault
#                 and --device1 in processes of their own
#   xcheck.log    torc-xcheck --backend cuda: values, then gradients, against the reference
#   train.log     torc-train on cuda: f32 and bf16 autocast, 50 steps each
#   sanitize.log  tools/cuda-sanitize.sh: memcheck, racecheck, synccheck
#   perf.log      the suite's performance case (the CUDA targets), then torc-bench --backend cuda
#                 --quick, alone on the GPU
# The correctness steps run side by side (one GPU, many CPUs); the timed ones after them, alone.
# On an H200 the whole took about 5 minutes, the sanitizers longest (a lent GPU's session has 15
# minutes of device time: give the call a timeout that leaves some to spare).
#
#   tools/gpu-check.sh [build-dir] [log-dir]      (defaults: build, gpu-logs)
#
# The build needs -DTORC_WITH_CUDA=ON; it need not be made where it runs: bin/{cuda_gpu_test,
# torc-xcheck,torc-train,torc-bench} and lib/ (libtorc, lib/torc/ with cuda, reference, sgd and adam)
# of a Debian 12 build ran on an Ubuntu 24.04 GPU machine with LD_LIBRARY_PATH naming that lib/,
# a copy of libsubunit.so.0 and the directory of the machine's libcublas.so.13. Exit status: 0 every step passed, 1 one failed (each
# step's status is printed at the end), 77 no CUDA device.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
logs=${2:-gpu-logs}
case $build in /*) ;; *) build=$here/$build ;; esac
mkdir -p "$logs"
export TORC_BUILD_DIR=$build TORC_SOURCE_DIR=$here TORC_TEST_DATA=$here/tests/golden
suite=$build/bin/cuda_gpu_test
probe=$(CK_RUN_CASE=none "$suite" 2>&1)
if [ $? -eq 77 ]; then
    echo "$probe"
    exit 77
fi

declare -A status
step() {  # step NAME LOG SECONDS COMMAND...: runs COMMAND, appends to LOG, records its exit status
    local name=$1 log=$2 secs=$3
    shift 3
    echo "== $name" >>"$log"
    timeout --kill-after=10 "$secs" "$@" >>"$log" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && echo "TIMED OUT after $secs s: $name" >>"$log"
    echo "$name: exit $rc" >>"$log"
    echo "$rc" >"$logs/.rc.$name"
}

(
    for case in device ops_vs_reference shared_memory_ops beyond_2_31; do
        CK_RUN_CASE=$case step "$case" "$logs/gpu.log" 240 "$suite"
    done
    step fault "$logs/gpu.log" 60 "$suite" --fault
    step device1 "$logs/gpu.log" 60 "$suite" --device1
) &
(
    step xcheck "$logs/xcheck.log" 150 "$build/bin/torc-xcheck" --backend cuda --check --quiet
    step xcheck_grad "$logs/xcheck.log" 150 "$build/bin/torc-xcheck" --backend cuda --grad --quiet
) &
(
    step train_f32 "$logs/train.log" 60 "$build/bin/torc-train" --backend cuda --steps 50 --log-every 10
    step train_bf16 "$logs/train.log" 60 "$build/bin/torc-train" --backend cuda --steps 50 --autocast bf16 \
        --dim 256 --batch 256 --log-every 10
) &
step sanitize "$logs/sanitize.log" 420 \
    bash "$here/tools/cuda-sanitize.sh" "$build" &
wait

CK_RUN_CASE=performance step performance "$logs/perf.log" 120 "$suite"
step bench "$logs/perf.log" 150 "$build/bin/torc-bench" --backend cuda --quick

rc=0
for name in device ops_vs_reference shared_memory_ops beyond_2_31 fault device1 xcheck xcheck_grad train_f32 train_bf16 sanitize performance bench; do
    s=$(cat "$logs/.rc.$name" 2>/dev/null || echo "not run")
    echo "$name: $s"
    [ "$s" = 0 ] || rc=1
done
rm -f "$logs"/.rc.*
exit $rc
