#!/usr/bin/env bash
# tests/train.sh — torc-train end to end: the default run's loss falls by orders of magnitude,
# each optimizer runs at its own default lr unless --lr is given (sgd at torc-train's, where its
# own diverges) and SGD converges at it, lr and MFU print plainly, resuming is exact for every
# optimizer plugin (10 steps == 5 + checkpoint + resume + 5, the final checkpoint files
# byte-identical), --micro-batches accumulates, and bad flags fail with a message.
set -euo pipefail
train=$1
dir=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/train_test_XXXXXX")
trap 'rm -rf "$dir"' EXIT

# fell LOG FACTOR: the summary's loss fell by more than FACTOR
fell() {
  local line first last
  line=$(grep -E '^  loss ' "$1") || { cat "$1"; echo "no loss line"; exit 1; }
  first=$(awk '{print $2}' <<<"$line") last=$(awk '{print $8}' <<<"$line")
  awk -v f="$first" -v l="$last" -v k="$2" -v n="$1" \
    'BEGIN { if (!(l < f / k)) { print n ": loss did not fall " k "x: " f " -> " l; exit 1 } }'
}
# The default run (adam at its default lr 0.001, 300 steps): 1e4 -> 2.5 on the reference.
out=$("$train" | tee "$dir/default.log")
fell "$dir/default.log" 1000
for what in "parameters" "optimizer state" "activations" "FLOPs" "achieved" "MFU"; do
  grep -q "$what" <<<"$out" || { echo "summary lacks '$what'"; exit 1; }
done

# The learning rate: the plugin's own default unless --lr (or --hp lr=) is given, read back from
# the optimizer and printed in the fewest digits that read back (0.0003, not 0.00029999999999999997).
header() { "$train" --steps 1 "$@" | head -1; }
has() {  # has TEXT WANT
  grep -qF -- "$2" <<<"$1" || { echo "'$1' lacks '$2'"; exit 1; }
}
has "$(header)" "adam (lr=0.001, adam's default)"
has "$(header --optim adamw)" "adamw (lr=0.001, adamw's default)"
has "$(header --optim adagrad)" "adagrad (lr=0.01, adagrad's default)"
has "$(header --optim rmsprop)" "rmsprop (lr=0.01, rmsprop's default)"
has "$(header --lr 0.0003 --hp amsgrad=true)" "adam (lr=0.0003 amsgrad=true) on"
has "$(header --optim sgd --hp lr=0.0002)" "sgd (lr=0.0002) on"
# SGD's own 0.001 (PyTorch's) diverges on the Cruncher: torc-train's 1e-4 converges, 1e4 -> 6e-11.
has "$(header --optim sgd)" "sgd (lr=0.0001, torc-train's default for sgd: its own 0.001 diverges on the Cruncher)"
"$train" --optim sgd >"$dir/sgd.log"
fell "$dir/sgd.log" 1e9
# The MFU line names the device once (it read "reference: reference backend: no promise").
mfu=$(grep -E '^  MFU ' "$dir/default.log")
[ "$mfu" = "  MFU               unknown: reference promises no FLOP/s for float32" ] || { echo "MFU line: '$mfu'"; exit 1; }

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
# After --resume the first line shows the checkpoint's hyperparameters, not --lr's.
has "$("$train" "${common[@]}" --lr 0.5 --optim adamw --steps 6 --resume "$dir/half.st" | head -1)" "adamw (lr=0.003) on"

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
# A truncated checkpoint: the message is the reader's, with no hint at --init-from, which fails alike.
head -c 1000 "$dir/half.st" >"$dir/truncated.st"
expect_fail "truncated" "${common[@]}" --resume "$dir/truncated.st"
if grep -q -- "--init-from" <<<"$msg"; then echo "a truncated checkpoint points to --init-from: $msg"; exit 1; fi
expect_fail "truncated" "${common[@]}" --init-from "$dir/truncated.st"
echo "torc-train: all checks passed"
