#!/usr/bin/env bash
# tests/threads.sh PROBE TRAIN — a host backend's results do not depend on its thread count: the
# probe's ops (tests/threads_probe.c: long-K GEMMs, GEMVs, reductions, softmax, layer_norm, a
# model's gradients) and a torc-train checkpoint (Adam, D = 128, its loss reduced in f32 GEMMs of
# every shape a Linear layer makes) are written at TORC_NUM_THREADS=1 and 2 and compared byte for
# byte (with no cap also at 3 threads). First with no ISA cap, then under each cap below the CPU's own level that it reaches
# (ONEDNN_MAX_CPU_ISA and TORC_MAX_CPU_ISA together, as tools/isa-matrix.sh sets them): the AVX2
# family's GEMMs, the AVX-512 ones, AMX. TORC_BACKEND picks the backend (onednn from threads.cmake).
# TORC_THREADS_LEVELS (space-separated, "none" for no cap, LEVEL,VAR=VALUE with one more variable)
# overrides the levels run.
set -uo pipefail
probe=$1 train=$2
dir=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/threads_test_XXXXXX")
trap 'rm -rf "$dir"' EXIT
export TORC_BACKEND=${TORC_BACKEND:-onednn}
unset TORC_ONEDNN_FMA_GEMM TORC_ONEDNN_MIN_WORK ONEDNN_MAX_CPU_ISA TORC_MAX_CPU_ISA

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
declare -A needs=([SSE41]="sse4_1" [AVX2]="avx2 fma" [AVX512_CORE]="avx512f avx512dq avx512bw avx512vl"
                  [AVX512_CORE_BF16]="avx512f avx512dq avx512bw avx512vl avx512_bf16"
                  [AVX512_CORE_AMX]="avx512f avx512dq avx512bw avx512vl avx512_bf16 amx_bf16 amx_tile")
has() { for f in ${needs[$1]}; do [[ $flags == *" $f "* ]] || return 1; done; }
levels=${TORC_THREADS_LEVELS:-}
if [ -z "$levels" ]; then
  levels=none
  top=""
  for l in SSE41 AVX2 AVX512_CORE AVX512_CORE_BF16 AVX512_CORE_AMX; do has "$l" && top=$l; done
  for l in SSE41 AVX2 AVX512_CORE AVX512_CORE_BF16 AVX512_CORE_AMX; do
    if has "$l" && [ "$l" != "$top" ]; then levels="$levels $l"; fi
  done
  # The paths another CPU of a level takes, forced here: AMD's AVX2 family runs large f32 GEMMs on
  # the FMA GEMM (TORC_ONEDNN_FMA_GEMM=all: every f32 GEMM there); without torc's AMX GEMM, bf16
  # runs on oneDNN's matmul primitive, in pieces (Zen 4's path; TORC_ONEDNN_AMX_GEMM=0).
  has AVX2 && levels="$levels AVX2,TORC_ONEDNN_FMA_GEMM=all"
  has AVX512_CORE_AMX && levels="$levels none,TORC_ONEDNN_AMX_GEMM=0"
fi
echo "threads: levels: $levels on$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"

fail=0
# run LEVEL THREADS: the probe's files and a checkpoint under $dir/LEVEL-THREADS. The one-thread run
# also checks the probe's matmuls against the reference backend (THREADS_PROBE_CHECK).
run() {
  local level=$1 n=$2 out=$dir/$1-$2
  mkdir -p "$out"
  local caps=() cap=${level%%,*}
  [ "$cap" = none ] || caps=(ONEDNN_MAX_CPU_ISA="$cap" TORC_MAX_CPU_ISA="$cap")
  [ "$cap" = "$level" ] || caps+=("${level#*,}")
  if ! env "${caps[@]}" TORC_NUM_THREADS="$n" THREADS_PROBE_CHECK=$([ "$n" = 1 ] && echo 1 || echo 0) \
       "$probe" "$out" >"$out.log" 2>&1; then
    echo "threads: the probe failed under $level with $n threads:"; cat "$out.log"; fail=1; return 1
  fi
  if ! env "${caps[@]}" TORC_NUM_THREADS="$n" "$train" --dim 128 --batch 64 --steps 12 --seed 5 \
       --checkpoint "$out/train.st" >"$out.train.log" 2>&1; then
    echo "threads: torc-train failed under $level with $n threads:"; cat "$out.train.log"; fail=1; return 1
  fi
}

for level in $levels; do
  # 2 threads everywhere; 3 as well with no cap (oneDNN's AMX matmul split K at 3 threads, not at 2).
  counts="2"
  [ "$level" = none ] && counts="2 3"
  run "$level" 1 || continue
  a=$dir/$level-1 bad=0 n=0
  for t in $counts; do
    run "$level" "$t" || { bad=1; continue; }
    b=$dir/$level-$t
    for f in "$a"/*.bin "$a"/train.st; do
      name=$(basename "$f")
      n=$((n + 1))
      if ! cmp -s "$f" "$b/$name"; then
        diff=$(cmp -l "$f" "$b/$name" 2>/dev/null | wc -l)
        echo "threads: $level: ${name%.*} differs between 1 and $t threads ($diff bytes of $(stat -c %s "$f"))"
        bad=1
      fi
    done
    rm -rf "$b"
  done
  [ "$n" -ge 200 ] || { echo "threads: $level: only $n results compared"; bad=1; }
  if [ $bad = 0 ]; then echo "threads: $level: $(ls "$a"/*.bin | wc -l) results and a checkpoint identical at 1 and $counts threads"
  else fail=1; fi
  rm -rf "$a"
done
[ $fail = 0 ] && echo "threads: all identical" || echo "threads: FAILED"
exit $fail
