#!/usr/bin/env bash
# tests/train_memory.sh — torc-train's memory figures follow the formulas from the first step on:
# with Adam over P float32 parameters, params = grads = 4P bytes and optimizer state = 8P (now
# and at peak), and the first step's activation peak equals a later step's (measured by
# resuming from a checkpoint of step 1, whose state loads as state): state made in step 1 is
# state from its creation, not an activation until step() returns; likewise a weight gradient made
# in backward; and the forward FLOPs are the model's (not the batch's synthetic target).
set -euo pipefail
train=$1
dir=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/train_memory_test_XXXXXX")
trap 'rm -rf "$dir"' EXIT
args=(--optim adam --dim 64 --layers 1 --batch 16)
P=$((64 * 64 + 64))
kib() { awk -v b="$1" 'BEGIN { printf "%.1f KiB", b / 1024 }'; }
figure() {  # figure LOG LABEL now|peak
  local line
  line=$(grep -E "^    $2 " "$1" | sed -E "s/^    $2 +//")
  if [ "$3" = now ]; then sed -E 's| / .*||' <<<"$line"; else sed -E 's|.* / ||' <<<"$line"; fi
}
"$train" "${args[@]}" --steps 1 --checkpoint "$dir/one.st" >"$dir/first.log"
"$train" "${args[@]}" --steps 3 --resume "$dir/one.st" >"$dir/later.log"
for log in first later; do
  f=$dir/$log.log
  for want in "params now $((4 * P))" "params peak $((4 * P))" "grads peak $((4 * P))" \
              "optimizer state now $((8 * P))" "optimizer state peak $((8 * P))"; do
    read -r -a w <<<"$want"
    label=${w[*]:0:${#w[@]}-2} which=${w[-2]} bytes=${w[-1]}
    got=$(figure "$f" "$label" "$which") expect=$(kib "$bytes")
    [ "$got" = "$expect" ] || { echo "$log run: $label $which is '$got', the formula gives '$expect'"; cat "$f"; exit 1; }
  done
done
a=$(figure "$dir/first.log" activations peak) b=$(figure "$dir/later.log" activations peak)
[ "$a" = "$b" ] || { echo "activation peak: step 1 $a, steps 2-3 $b"; cat "$dir/first.log" "$dir/later.log"; exit 1; }
echo "train memory: params, grads and state follow the formulas; activations on step 1 = later ($a)"

# A weight's gradient is gradient memory from its creation in backward, not an activation until
# it lands in .grad: at D = 256 and a batch of 16 (activations of 16 x 256), the activation peak
# stays below one D x D f32 gradient, 256.0 KiB (it held one, 321.1 KiB).
"$train" --optim sgd --dim 256 --layers 2 --batch 16 --steps 2 >"$dir/wide.log"
act=$(figure "$dir/wide.log" activations peak)
awk -v a="$act" 'BEGIN { split(a, f, " "); b = f[1] * (f[2] == "KiB" ? 1024 : f[2] == "MiB" ? 1048576 : 1);
                         exit !(b < 256 * 1024) }' ||
  { cat "$dir/wide.log"; echo "activation peak $act holds a 256 x 256 weight gradient"; exit 1; }
# The model's forward FLOPs leave out the synthetic target y = x @ arange(D): with no hidden layer
# (B = 4, D = 16) one step is x @ final.weight, 2 B D = 128, and mse_loss's 3 B = 12 (the target
# would add another 2 B D).
"$train" --dim 16 --layers 0 --batch 4 --steps 1 >"$dir/flops.log"
grep -q "FLOPs             forward 140 , backward" "$dir/flops.log" ||
  { grep FLOPs "$dir/flops.log"; echo "the forward FLOPs are not the model's 140"; exit 1; }
echo "train memory: weight gradients are not activations ($act peak); forward FLOPs are the model's"
