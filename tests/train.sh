#!/usr/bin/env bash
# tests/train.sh — torc-train end to end: the default run's loss falls by orders of magnitude,
# resuming is exact for every optimizer plugin (10 steps == 5 + checkpoint + resume + 5, the
# final checkpoint files byte-identical), --micro-batches accumulates, and bad flags fail with a message.
set -euo pipefail
train=$1
dir=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/train_test_XXXXXX")
trap 'rm -rf "$dir"' EXIT

out=$("$train" --steps 150 | tee "$dir/default.log")
line=$(grep -E '^  loss ' "$dir/default.log")
first=$(echo "$line" | awk '{print $2}')
last=$(echo "$line" | awk '{print $8}')
awk -v f="$first" -v l="$last" 'BEGIN { if (!(l < f / 1000)) { print "loss did not fall: " f " -> " l; exit 1 } }'
for what in "parameters" "optimizer state" "activations" "FLOPs" "achieved" "MFU"; do
  grep -q "$what" <<<"$out" || { echo "summary lacks '$what'"; exit 1; }
done

common=(--dim 8 --layers 1 --batch 4 --lr 0.003 --seed 3)
for opt in sgd adagrad rmsprop adam adamw; do
  hp=()
  case $opt in
    sgd) hp=(--hp momentum=0.9 --hp nesterov=true) ;;
    rmsprop) hp=(--hp centered=true --hp momentum=0.5) ;;
    adam) hp=(--hp amsgrad=true) ;;
  esac
  "$train" "${common[@]}" "${hp[@]}" --optim $opt --steps 10 --checkpoint "$dir/straight.st" >/dev/null
  "$train" "${common[@]}" "${hp[@]}" --optim $opt --steps 5 --checkpoint "$dir/half.st" --every 5 >/dev/null
  "$train" "${common[@]}" --lr 0.5 --optim $opt --steps 10 --resume "$dir/half.st" --checkpoint "$dir/resumed.st" >/dev/null
  cmp "$dir/straight.st" "$dir/resumed.st" || { echo "$opt: resumed run differs from the straight one"; exit 1; }
  echo "$opt: 10 steps == 5 + resume + 5, bit for bit"
done

# --micro-batches in one process: 4 backward passes of 16 rows accumulated into one step, the same
# weights as the batch of 64 within 1e-5 and a lower activation peak (the flag was ignored).
acc=(--dim 64 --layers 2 --batch 64 --steps 8 --log-every 8)
"$train" "${acc[@]}" --checkpoint "$dir/big.st" >"$dir/big.log"
"$train" "${acc[@]}" --micro-batches 4 --checkpoint "$dir/acc.st" >"$dir/acc.log"
python3 - "$dir/big.st" "$dir/acc.st" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k != '__metadata__' and v['dtype'] == 'F32':
            s, e = v['data_offsets']; out[k] = struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
d = max(abs(x - y) / (1 + abs(y)) for k in a for x, y in zip(a[k], b[k]))
sys.exit(print("micro-batches: accumulated weights differ from the large batch's by", d) or (0 if d <= 1e-5 else 1))
PY
grep -q "micro-batches: 4 of 16 rows, 4 a process" "$dir/acc.log" || { cat "$dir/acc.log"; echo "no micro-batch line"; exit 1; }
peak() { grep -E "^    activations " "$1" | sed -E 's|.* / ||'; }
[ "$(peak "$dir/acc.log")" != "$(peak "$dir/big.log")" ] || { echo "activation peak unchanged by --micro-batches"; exit 1; }

# Errors: a message and a non-zero status.
expect_fail() {
  local want=$1; shift
  if msg=$("$train" "$@" 2>&1 >/dev/null); then echo "torc-train $* succeeded"; exit 1; fi
  grep -q -- "$want" <<<"$msg" || { echo "torc-train $*: '$msg' lacks '$want'"; exit 1; }
}
expect_fail "unknown option '--nope'" --nope 1
expect_fail "optimizer 'nosuch' could not be loaded" --optim nosuch
expect_fail "Invalid learning rate: -1.0" --lr -1
expect_fail "unknown hyperparameter 'bogus'" --hp bogus=1
expect_fail "--every needs --checkpoint" --every 3
expect_fail "size mismatch for layers.0.weight" --dim 16 --resume "$dir/half.st"
echo "torc-train: all checks passed"
