#!/usr/bin/env bash
# tests/device_fallback.sh TORC_TRAIN PLUGIN_DIR TORC_XCHECK — torc-train's Cruncher on the fake
# device backend (declines every op): without TORC_DEVICE_FALLBACK it stops at its first op with
# an error naming the variable; with TORC_DEVICE_FALLBACK=1 every op runs on the host through the
# fallback, the losses are the reference backend's, and the summary counts the ops per opcode.
# torc-xcheck on it: declined ops are 'unsupported' (not failed) without the variable, checked
# as 'fallback' with it.
set -uo pipefail
train=$1
export TORC_PLUGIN_PATH=$2
xcheck=$3
fail() { echo "FAIL: $*"; exit 1; }
args=(--steps 4 --dim 8 --layers 2 --batch 16 --seed 3)

out=$(env -u TORC_DEVICE_FALLBACK "$train" --backend fakedev "${args[@]}" 2>&1) && fail "ran without the fallback: $out"
grep -q "TORC_DEVICE_FALLBACK=1" <<<"$out" || fail "the error does not name the variable: $out"

out=$(TORC_DEVICE_FALLBACK=1 "$train" --backend fakedev "${args[@]}" 2>&1) || fail "torc-train failed: $out"
echo "$out"
line=$(grep -E '^  fallback +[0-9]+ ops ran on the host \(' <<<"$out") || fail "no fallback line in the summary"
grep -qE '\brandn [0-9]+' <<<"$line" || fail "randn not counted: $line"
grep -qE '\bmatmul [0-9]+' <<<"$line" || fail "matmul not counted: $line"
# The total is the sum of the per-op counts.
total=$(sed -E 's/^ *fallback +([0-9]+) ops.*/\1/' <<<"$line")
sum=$(sed -E 's/.*\((.*);.*/\1/' <<<"$line" | tr ',' '\n' | awk '{s += $NF} END {print s}')
[ "$total" = "$sum" ] || fail "total $total != sum of the counts $sum: $line"

ref=$("$train" --backend reference "${args[@]}" 2>&1) || fail "torc-train on the reference failed: $ref"
grep -q fallback <<<"$ref" && fail "a fallback line on the reference backend: $ref"
[ "$(grep -E '^step|^  loss ' <<<"$out" | sed -E 's/  [0-9.]+ steps\/s//')" = \
  "$(grep -E '^step|^  loss ' <<<"$ref" | sed -E 's/  [0-9.]+ steps\/s//')" ] || fail "losses differ from the reference's"

ops=add,mul,matmul,randn,sum,copy
out=$(env -u TORC_DEVICE_FALLBACK "$xcheck" --backend fakedev --op $ops --dtype f32,bf16 --api 2>&1) || fail "xcheck without the fallback: $out"
grep -qE '^matmul +f32 +unsupported .* ok$' <<<"$out" || fail "matmul is not reported unsupported: $out"
grep -q fallback <<<"$(grep -E '^(add|mul|matmul|randn|sum|copy) ' <<<"$out")" && fail "a fallback row without the variable: $out"
out=$(TORC_DEVICE_FALLBACK=1 "$xcheck" --backend fakedev --op $ops --dtype f32,bf16 --api 2>&1) || fail "xcheck with the fallback: $out"
grep -qE '^matmul +f32 +fallback .* ok$' <<<"$out" || fail "matmul is not checked through the fallback: $out"
echo "PASS"
