#!/bin/sh
# tools/onednn_amx_check.sh — proves with ONEDNN_VERBOSE that the oneDNN backend runs bf16 matmul
# on AMX tiles (an avx512_core_amx kernel) on a CPU that has AMX-BF16.
# usage: tools/onednn_amx_check.sh [path/to/onednn_matmul_bench] [n=512]
set -eu
bench=${1:-${TORC_BUILD_DIR:-build}/bin/onednn_matmul_bench}
n=${2:-512}
if ! grep -qw amx_bf16 /proc/cpuinfo; then
    echo "onednn_amx_check: this CPU has no AMX-BF16, nothing to prove here"
    exit 0
fi
log=$(ONEDNN_VERBOSE=1 "$bench" "$n" 1 bf16 bf16f32 2>&1) || {
    printf '%s\n' "$log"
    exit 1
}
printf '%s\n' "$log" | grep -E 'exec,cpu,matmul|GFLOP' || true
bad=$(printf '%s\n' "$log" | grep 'exec,cpu,matmul' | grep -v 'avx512_core_amx' || true)
runs=$(printf '%s\n' "$log" | grep -c 'exec,cpu,matmul' || true)
if [ "$runs" -gt 0 ] && [ -z "$bad" ]; then
    echo "onednn_amx_check: OK, every bf16 matmul ($runs runs) ran an avx512_core_amx kernel"
    exit 0
fi
echo "onednn_amx_check: FAIL, bf16 matmul did not run on AMX" >&2
exit 1
