#!/usr/bin/env bash
# tests/train_init_from.sh — torc-train --init-from starts a run from weights alone, written by
# Python's safetensors (no optimizer state, step or generator in the file): with weights that
# already solve the task (identity layers, final = arange(D)) the very first loss is 0 on the
# reference backend, so the weights were used; --resume on such a file points to --init-from.
# A file in nn.Linear's (out, in) layout is refused where its shapes tell (final.weight (1, D)),
# saying that torc-train reads (in, out).
set -euo pipefail
train=$1
dir=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/init_from_test_XXXXXX")
trap 'rm -rf "$dir"' EXIT
python3 - "$dir" <<'PY'
import sys
import numpy as np
from safetensors.numpy import save_file
d = sys.argv[1]
save_file({"layers.0.weight": np.eye(4, dtype=np.float32),
           "final.weight": np.arange(4, dtype=np.float32).reshape(4, 1)}, f"{d}/solved.safetensors")
save_file({"layers.0.weight": np.eye(4, dtype=np.float32),
           "final.weight": np.zeros((1, 4), dtype=np.float32)}, f"{d}/wrong_shape.safetensors")
PY
out=$(TORC_BACKEND=reference "$train" --dim 4 --layers 1 --steps 3 --init-from "$dir/solved.safetensors" --checkpoint "$dir/after.st")
grep -q "weights from $dir/solved.safetensors" <<<"$out" || { echo "no 'weights from' line: $out"; exit 1; }
grep -qE '^  loss +0\.000000e\+00 at the first step' <<<"$out" || { echo "the first loss is not 0: the weights were not used"; echo "$out"; exit 1; }
# Without --init-from the same run starts from random weights.
if TORC_BACKEND=reference "$train" --dim 4 --layers 1 --steps 1 | grep -qE '^  loss +0\.000000e\+00'; then
  echo "a random start gave loss 0: the check above proves nothing"; exit 1
fi
# The run it started resumes as usual.
"$train" --dim 4 --layers 1 --steps 5 --resume "$dir/after.st" >/dev/null

expect_fail() {
  local want=$1; shift
  if msg=$("$train" "$@" 2>&1 >/dev/null); then echo "torc-train $* succeeded"; exit 1; fi
  grep -qF -- "$want" <<<"$msg" || { echo "torc-train $*: '$msg' lacks '$want'"; exit 1; }
}
expect_fail "size mismatch for final.weight: copying a param with shape [1, 4] from checkpoint, the shape in current model is [4, 1]" \
  --dim 4 --layers 1 --init-from "$dir/wrong_shape.safetensors"
layout="final.weight [1, 4] is nn.Linear's (out, in) layout: torc-train reads every weight as (in, out), y = x @ W; save each nn.Linear weight transposed (weight.T), the square ones too"
expect_fail "$layout" --dim 4 --layers 1 --init-from "$dir/wrong_shape.safetensors"
expect_fail "$layout" --dim 4 --layers 1 --resume "$dir/wrong_shape.safetensors"
# The help says which layout is read.
"$train" --help | tr -s ' \n' ' ' | grep -qF "Weights are read as (in, out), y = x @ W: transpose nn.Linear's (out, in) weights" ||
  { echo "--help does not say which layout --init-from reads"; exit 1; }
expect_fail "Missing key(s) in state_dict: \"layers.1.weight\"" --dim 4 --layers 2 --init-from "$dir/solved.safetensors"
expect_fail "(the file holds weights alone: start from them with --init-from)" --dim 4 --layers 1 --resume "$dir/solved.safetensors"
expect_fail "--init-from and --resume exclude each other" --init-from "$dir/solved.safetensors" --resume "$dir/after.st"
echo "init-from: a Python-written weights file starts a run"
