#!/usr/bin/env bash
# tests/train_memory.sh — torc-train's memory figures follow the formulas from the first step on:
# with Adam over P float32 parameters, params = grads = 4P bytes and optimizer state = 8P (now
# and at peak), and the first step's activation peak equals a later step's (measured by
# resuming from a checkpoint of step 1, whose state loads as state): state made in step 1 is
# state from its creation, not an activation until step() returns.
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
