#!/bin/sh
# tools/onednn_amx_check.sh — proves that the oneDNN backend runs bf16 matmul on AMX tiles on a CPU
# that has AMX-BF16: by default torc's own AMX GEMM (backends/cpu_onednn/matmul_amx.c) takes it,
# so oneDNN logs no matmul (ONEDNN_VERBOSE); with TORC_ONEDNN_AMX_GEMM=0 oneDNN's matmul primitive
# runs it, and every run must be an avx512_core_amx kernel.
# usage: tools/onednn_amx_check.sh [path/to/onednn_matmul_bench] [n=512]
set -eu
bench=${1:-${TORC_BUILD_DIR:-build}/bin/onednn_matmul_bench}
n=${2:-512}
if ! grep -qw amx_bf16 /proc/cpuinfo; then
    echo "onednn_amx_check: skipped: this CPU has no AMX-BF16 (/proc/cpuinfo), nothing to prove here"
    exit 77
fi
log=$(ONEDNN_VERBOSE=1 "$bench" "$n" 1 bf16 bf16f32 2>&1) || {
    printf '%s\n' "$log"
    exit 1
}
printf '%s\n' "$log" | grep -E 'exec,cpu,matmul|GFLOP' || true
if printf '%s\n' "$log" | grep -q 'exec,cpu,matmul'; then
    echo "onednn_amx_check: FAIL, bf16 matmul ran on oneDNN's primitive, not torc's AMX GEMM" >&2
    exit 1
fi
log=$(TORC_ONEDNN_AMX_GEMM=0 ONEDNN_VERBOSE=1 "$bench" "$n" 1 bf16 bf16f32 2>&1) || {
    printf '%s\n' "$log"
    exit 1
}
printf '%s\n' "$log" | grep -E 'exec,cpu,matmul|GFLOP' || true
bad=$(printf '%s\n' "$log" | grep 'exec,cpu,matmul' | grep -v 'avx512_core_amx' || true)
runs=$(printf '%s\n' "$log" | grep -c 'exec,cpu,matmul' || true)
if [ "$runs" -gt 0 ] && [ -z "$bad" ]; then
    echo "onednn_amx_check: OK, torc's AMX GEMM ran bf16 matmul; with TORC_ONEDNN_AMX_GEMM=0 every" \
         "one ($runs runs) ran an avx512_core_amx oneDNN kernel"
    exit 0
fi
echo "onednn_amx_check: FAIL, with TORC_ONEDNN_AMX_GEMM=0 bf16 matmul did not run on AMX" >&2
exit 1
