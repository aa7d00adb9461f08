#!/usr/bin/env bash
# tools/isa-matrix.sh LEVEL BUILD_DIR [suites|xcheck] — runs the onednn backend's suites or
# torc-xcheck (every op, TORC_ONEDNN_MIN_WORK=0, values, --grad and the --sweep layout sweeps)
# with both ISA caps set to LEVEL (ONEDNN_MAX_CPU_ISA for oneDNN's kernels, TORC_MAX_CPU_ISA for
# torc's own loops), so the paths a smaller CPU takes run here too. LEVEL: SSE41, AVX2, AVX512_CORE, AVX512_CORE_BF16,
# AVX512_CORE_AMX. Exits 77 (ctest: skipped) with the reason when this CPU lacks LEVEL.
set -uo pipefail
level=$1 build=$2 what=${3:-suites}
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
# The CPU features each level needs (each level includes the ones before it).
levels=(SSE41 AVX2 AVX512_CORE AVX512_CORE_BF16 AVX512_CORE_AMX)
declare -A needs=([SSE41]="sse4_1" [AVX2]="avx2 fma" [AVX512_CORE]="avx512f avx512dq avx512bw avx512vl"
                  [AVX512_CORE_BF16]="avx512f avx512dq avx512bw avx512vl avx512_bf16"
                  [AVX512_CORE_AMX]="avx512f avx512dq avx512bw avx512vl avx512_bf16 amx_bf16 amx_tile")
missing() { for f in ${needs[$1]}; do [[ $flags == *" $f "* ]] || { echo "$f"; return; }; done; }
[ -n "${needs[$level]:-}" ] || { echo "isa-matrix: unknown level '$level'" >&2; exit 2; }
m=$(missing "$level")
[ -z "$m" ] || { echo "isa-matrix: skipped: this CPU lacks $m, which $level needs"; exit 77; }
# The CPU's own highest level is what the uncapped suites already ran: no second pass.
top=""
for l in "${levels[@]}"; do [ -z "$(missing "$l")" ] && top=$l; done
if [ "$level" = "$top" ] && [ "${TORC_ISA_MATRIX_ALL:-0}" != 1 ]; then
  echo "isa-matrix: skipped: $level is this CPU's own level, which the uncapped suites ran (TORC_ISA_MATRIX_ALL=1 runs it anyway)"
  exit 77
fi
export ONEDNN_MAX_CPU_ISA=$level TORC_MAX_CPU_ISA=$level TORC_ONEDNN_MIN_WORK=0
echo "isa-matrix: $what with ONEDNN_MAX_CPU_ISA=TORC_MAX_CPU_ISA=$level on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
rc=0
if [ "$what" = suites ]; then
  # test_max_dim and test_layer_norm run their goldens on onednn too (its own loops; they must hold
  # under every cap); test_autocast its fused matmuls (the FMA GEMM's rounding, or the casts where
  # a level declines them) bit for bit against explicit casts; test_gpt the GPT-2 against PyTorch's
  # logits, gradients and 50-step trajectory.
  export TORC_TEST_DATA=${TORC_TEST_DATA:-$(cd "$(dirname "$0")/.." && pwd)/tests/golden}
  for t in onednn_backend_test onednn_pointwise_test onednn_amx_test test_max_dim test_layer_norm test_adam \
           test_autocast test_gpt; do
    "$build/bin/$t" >"$build/isa-$level-$t.log" 2>&1
    r=$?
    tail -n 3 "$build/isa-$level-$t.log"
    case $r in 0|77) ;; *) echo "isa-matrix: $t FAILED under $level (log: $build/isa-$level-$t.log)"; rc=1 ;; esac
  done
else
  # with the layout sweeps (--sweep), and the matmuls' sweep once more on the FMA GEMM's tiles at
  # every size (by default GEMMs under 1M multiply-adds take its small path)
  "$build/bin/torc-xcheck" --backend onednn --check --grad --sweep --quiet || rc=1
  TORC_ONEDNN_FMA_GEMM=all "$build/bin/torc-xcheck" --backend onednn --op matmul,matmul_rounded --sweep --quiet || rc=1
fi
exit $rc
