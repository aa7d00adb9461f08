#!/usr/bin/env bash
# tools/cuda_resource_check.sh — compiles the CUDA backend's kernels with ptxas resource usage
# for every target architecture and fails if any kernel spills registers to local memory.
# usage: cuda_resource_check.sh NVCC SOURCE_DIR "ARCHS" KERNEL.cu...   (ARCHS like "80;89;90")
# Stack frames without spills are fine: CUDA's own sin/cos slow path keeps a small local array.
set -euo pipefail
nvcc=$1
src=$2
archs=${3//;/ }
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gencode=()
for a in $archs; do
  a=${a%-real}
  a=${a%-virtual}
  gencode+=("-gencode=arch=compute_$a,code=sm_$a")
done
pids=()
for f in "$@"; do
  name=$(basename "$f" .cu)
  "$nvcc" -std=c++17 -I"$src/core/include" -I"$src/backends/cuda" "${gencode[@]}" --resource-usage \
    -c "$src/backends/cuda/$f" -o "$work/$name.o" >"$work/$name.log" 2>&1 &
  pids+=($!)
  # at most two compilers at a time (CI has two cores)
  if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done
status=0
kernels=0
for f in "$@"; do
  name=$(basename "$f" .cu)
  if ! grep -q "Function properties" "$work/$name.log"; then
    echo "cuda_resource_check: $f did not compile:"; cat "$work/$name.log"; exit 1
  fi
  # ptxas prints: "Compiling entry function 'K' for 'sm_90'", then "Function properties for K",
  # then "N bytes stack frame, S bytes spill stores, L bytes spill loads", then "Used R registers".
  out=$(awk -v file="$f" '
    /Compiling entry function/ { match($0, /for .sm_[0-9a-z]+/); arch = substr($0, RSTART + 5, RLENGTH - 5) }
    /Function properties for/ { fn = $NF }
    /bytes spill stores/ {
      stores = $5; loads = $9; stack = $1
      getline nxt
      regs = "?"
      if (match(nxt, /Used [0-9]+ registers/)) regs = substr(nxt, RSTART + 5, RLENGTH - 15)
      if (fn ~ /^_Z/ || fn ~ /kernel|finish|mask_|ew_/) {
        printf "%s %s %s regs=%s stack=%s spill_stores=%s spill_loads=%s\n", (stores + loads > 0 ? "SPILL" : "ok"), file, arch, regs, stack, stores, loads
        printf "   %s\n", fn
      } else if (stores + loads > 0) {
        printf "SPILL %s %s (library function %s)\n", file, arch, fn
      }
    }' "$work/$name.log")
  echo "$out"
  kernels=$((kernels + $(echo "$out" | grep -c '^ok\|^SPILL' || true)))
  if echo "$out" | grep -q '^SPILL'; then status=1; fi
done
if [ "$status" -ne 0 ]; then
  echo "cuda_resource_check: register spills (see SPILL lines above)"
  exit 1
fi
echo "cuda_resource_check: $kernels kernel builds, no register spills"
