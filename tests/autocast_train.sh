#!/usr/bin/env bash
# tests/autocast_train.sh — torc-train --autocast end to end on the course's linear task: after
# 200 steps the loss of bf16, f16 and fp8 training (f32 master weights) stays within 2% of f32
# training on the course's task (D = 16, linear); on torc-train's deeper default model bf16 and
# f16 stay within 2%, fp8 within 25% (see below); f16 resumes exactly (the GradScaler's state is in the
# checkpoint); bad flags fail with a message.
set -euo pipefail
train=$1
dir=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/autocast_train_XXXXXX")
trap 'rm -rf "$dir"' EXIT

# lr 0.001 keeps the run on its way down at step 200 (the loss falls ~50x, to ~180): with the
# default lr 0.01 f32 reaches 1e-4, far below what 16-bit activations of outputs ~100 can
# resolve (bf16's spacing there is 0.5), so a relative comparison would only measure that floor.
common=(--steps 200 --lr 0.001 --seed 0)
final_loss() { grep -E '^  loss ' "$1" | awk '{print $8}'; }
"$train" "${common[@]}" >"$dir/f32.log"
ref=$(final_loss "$dir/f32.log")
within() {  # name loss tolerance
  awk -v n="$1" -v l="$2" -v r="$ref" -v t="$3" 'BEGIN {
    d = (l - r) / r; if (d < 0) d = -d
    printf "%s: loss %s vs f32 %s (%.2f%%, limit %g%%)\n", n, l, r, 100 * d, 100 * t
    if (!(d <= t)) exit 1 }'
}
"$train" "${common[@]}" --autocast bf16 >"$dir/bf16.log"
grep -q "autocast bfloat16, float32 master weights" "$dir/bf16.log"
within bf16 "$(final_loss "$dir/bf16.log")" 0.02
# f16 with dynamic loss scaling. This task's gradients are ~100x larger than a typical
# network's, so PyTorch's initial scale 65536 overflows f16 and the scaler skips the first
# steps while it backs off (as it should); starting at 32 no step is skipped.
"$train" "${common[@]}" --autocast f16 --loss-scale 32 >"$dir/f16.log"
grep -q "0 of 200 steps skipped" "$dir/f16.log"
within f16 "$(final_loss "$dir/f16.log")" 0.02
"$train" "${common[@]}" --autocast f16 >"$dir/f16_default.log"
grep -qE "grad scaler +scale [0-9]+ at the end, [1-9][0-9]* of 200 steps skipped" "$dir/f16_default.log"
# fp8 (e4m3 weights and inputs, e5m2 gradients) is not within 2% here: with D = 32 a weight
# moves by ~0.5% per step, below e4m3's 6% resolution, and each of the few products per output
# carries its rounding, so the run trails f32 (~19% higher loss at step 200) while still
# learning the task. The check bounds that gap and asserts the loss fell > 40x.
"$train" "${common[@]}" --autocast fp8 >"$dir/fp8.log"
within fp8 "$(final_loss "$dir/fp8.log")" 0.25
awk -v l="$(final_loss "$dir/fp8.log")" -v f="$(grep -E '^  loss ' "$dir/fp8.log" | awk '{print $2}')" \
  'BEGIN { if (!(l < f / 40)) { print "fp8: loss did not fall: " f " -> " l; exit 1 } }'

# The course's own linear task (lecture 2: D = 16, a plain linear model, B = 4, lr 0.01), where
# each output is one product sum over 16 inputs: the whole loss curve (every 10th step, same
# batches) of bf16, f16 and fp8 training stays within 2% of f32's.
course=(--steps 200 --dim 16 --layers 0 --batch 4 --lr 0.01 --seed 0 --log-every 10)
curve() { grep -E '^step ' "$1" | awk '{print $4}'; }
"$train" "${course[@]}" >"$dir/course_f32.log"
curve_within() {  # name log: the largest gap over the curve must be <= 2%
  paste <(curve "$dir/course_f32.log") <(curve "$2") | awk -v n="$1" '
    { d = ($2 - $1) / $1; if (d < 0) d = -d; if (d > m) m = d; k++ }
    END { printf "course task, %s: %d points, largest gap to f32 %.2f%% (limit 2%%)\n", n, k, 100 * m
          if (k != 20 || !(m <= 0.02)) exit 1 }'
}
"$train" "${course[@]}" --autocast bf16 >"$dir/course_bf16.log"
curve_within bf16 "$dir/course_bf16.log"
"$train" "${course[@]}" --autocast f16 --loss-scale 32 >"$dir/course_f16.log"
curve_within f16 "$dir/course_f16.log"
"$train" "${course[@]}" --autocast fp8 >"$dir/course_fp8.log"
curve_within fp8 "$dir/course_fp8.log"

# f16 resumes bit for bit: 10 steps == 5 + checkpoint + resume + 5 (the scale and growth
# tracker travel in the checkpoint).
small=(--dim 8 --layers 1 --batch 4 --lr 0.003 --seed 3 --autocast f16)
"$train" "${small[@]}" --steps 10 --checkpoint "$dir/straight.st" >/dev/null
"$train" "${small[@]}" --steps 5 --checkpoint "$dir/half.st" >/dev/null
"$train" "${small[@]}" --steps 10 --resume "$dir/half.st" --checkpoint "$dir/resumed.st" >/dev/null
cmp "$dir/straight.st" "$dir/resumed.st" || { echo "f16: resumed run differs from the straight one"; exit 1; }
echo "f16: 10 steps == 5 + resume + 5, bit for bit"

expect_fail() {
  local want=$1; shift
  if msg=$("$train" "$@" 2>&1 >/dev/null); then echo "torc-train $* succeeded"; exit 1; fi
  grep -q -- "$want" <<<"$msg" || { echo "torc-train $*: '$msg' lacks '$want'"; exit 1; }
}
expect_fail "--autocast expects bf16, f16, fp8 or off, got 'f64'" --autocast f64
expect_fail "--loss-scale expects a positive number" --loss-scale -1
echo "torc-train --autocast: all checks passed"
