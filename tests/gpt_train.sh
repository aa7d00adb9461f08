#!/usr/bin/env bash
# tests/gpt_train.sh — the demo's path on a tiny config: torc-tokens makes byte-level token files
# from the repository's own docs, torc-train --model gpt trains on them (loss falls, val loss and a
# sample print, the FLOP and memory formulas hold), resuming is exact (6 steps == 3 + checkpoint +
# resume + 3, the checkpoints byte-identical, generator and data position included), every bad
# flag, config and file is refused before the first step with nothing written, a diverging run
# stops naming the step and keeps its last good checkpoint, and torc-generate samples from the
# checkpoint. Under mpirun (when it and the mpi plugin are there): 2 processes against 1, and
# --deterministic's checkpoints the same bits on 1, 2 and 4 processes with dropout, --grad-accum
# and bf16. Usage: gpt_train.sh TORC_TRAIN TORC_TOKENS TORC_GENERATE SOURCE_DIR
set -euo pipefail
train=$1 tokens=$2 generate=$3 src=$4
dir=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/gpt_train_test_XXXXXX")
trap 'rm -rf "$dir"' EXIT

"$tokens" --out-dir "$dir/data" "$src/docs/semantics.md" "$src/docs/data.md" >/dev/null
tiny=(--data "$dir/data/train.bin" --val-data "$dir/data/val.bin" --n-layer 1 --n-head 2 --n-embd 32
      --block-size 32 --batch 4 --eval-batches 2 --sample-tokens 40 --lr 3e-3 --warmup 2)
has() { grep -qF -- "$2" "$1" || { cat "$1"; echo "$1 lacks '$2'"; exit 1; }; }

# Trains: the loss falls from ln(256) = 5.5; the summary's formulas hold.
"$train" "${tiny[@]}" --steps 30 --log-every 10 >"$dir/run.log"
has "$dir/run.log" "GPT(n_layer=1, n_head=2, n_embd=32, block_size=32, vocab_size=256 padded to 256)"
has "$dir/run.log" "val loss"
has "$dir/run.log" "---- sample (40 tokens"
has "$dir/run.log" "vocabulary's padding multiply nothing) ="
grep -q "multiply nothing) = .*: exact" "$dir/run.log" || { cat "$dir/run.log"; echo "matmul FLOPs differ from the formula"; exit 1; }
[ "$(grep -c 'as counted)' "$dir/run.log")" = 4 ] || { cat "$dir/run.log"; echo "memory differs from 4N / 4N / 8N or the activations' formula"; exit 1; }
line=$(grep -E '^  loss ' "$dir/run.log")
awk -v f="$(awk '{print $2}' <<<"$line")" -v l="$(awk '{print $8}' <<<"$line")" \
  'BEGIN { if (!(f > 5.3 && f < 5.8 && l < f - 1.0)) { print "loss " f " -> " l ": did not fall"; exit 1 } }'
grep -qE '^step +10/30 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| norm [0-9.]+ \| [0-9]+ tok/s \| MFU ' "$dir/run.log" ||
  { cat "$dir/run.log"; echo "no progress line"; exit 1; }
# A padded vocabulary (300 -> 384): the training head multiplies wte's 300 rows, not its 384, and the
# formula says so; the kept activations' formula holds there too.
"$train" "${tiny[@]}" --vocab-size 300 --steps 2 --sample-tokens 0 >"$dir/pad.log"
has "$dir/pad.log" "vocab_size=300 padded to 384"
grep -q "multiply nothing) = .*: exact" "$dir/pad.log" || { cat "$dir/pad.log"; echo "padded vocabulary: matmul FLOPs differ"; exit 1; }
has "$dir/pad.log" "for backward: the formula's, as counted)"

# Exact resume, with grad accumulation and dropout drawing from the generator.
more=(--grad-accum 2 --dropout 0.1)
"$train" "${tiny[@]}" "${more[@]}" --steps 6 --checkpoint "$dir/straight.st" >/dev/null
"$train" "${tiny[@]}" "${more[@]}" --steps 3 --checkpoint "$dir/half.st" >/dev/null
"$train" "${tiny[@]}" "${more[@]}" --steps 6 --resume "$dir/half.st" --checkpoint "$dir/resumed.st" >"$dir/resume.log"
has "$dir/resume.log" "resumed from $dir/half.st at step 3"
cmp "$dir/straight.st" "$dir/resumed.st" || { echo "resumed run differs from the straight one"; exit 1; }

# f16 autocast: the GradScaler's state is in the checkpoint, so its resume is exact too; bf16 trains.
"$train" "${tiny[@]}" --autocast f16 --steps 4 --checkpoint "$dir/f16a.st" >/dev/null
"$train" "${tiny[@]}" --autocast f16 --steps 2 --checkpoint "$dir/f16h.st" >/dev/null
"$train" "${tiny[@]}" --autocast f16 --steps 4 --resume "$dir/f16h.st" --checkpoint "$dir/f16b.st" >"$dir/f16.log"
has "$dir/f16.log" "dynamic loss scaling"
cmp "$dir/f16a.st" "$dir/f16b.st" || { echo "f16: resumed run differs from the straight one"; exit 1; }
"$train" "${tiny[@]}" --autocast bf16 --steps 3 >"$dir/bf16.log"
has "$dir/bf16.log" "autocast bfloat16"

# Data parallel under mpirun: 2 processes train the global batch 1 process trains, the same loss
# up to the order of the gradients' sums.
mpi=false
if command -v mpirun >/dev/null && [ -e "$(dirname "$train")/../lib/torc/libtorc_comm_mpi.so" ]; then
  mpi=true
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_base_warn_component_unused=0
  # Under the sanitizers, as tests/mpi.sh: Open MPI's components stay mapped and stacks are unwound
  # in full, so every frame keeps its library's name, and Open MPI's own allocations (kept until
  # exit) are not reported.
  run() {
    local np=$1; shift
    OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1 \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:fast_unwind_on_malloc=0}" \
    LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/mpi_lsan.supp:print_suppressions=0" \
    timeout 120 mpirun -np "$np" --oversubscribe --bind-to none "$train" "$@"
  }
  run 2 "${tiny[@]}" --steps 8 --sample-tokens 0 >"$dir/mpi.log"
  "$train" "${tiny[@]}" --steps 8 --sample-tokens 0 >"$dir/one.log"
  has "$dir/mpi.log" "data parallel: 2 processes, 2 rows each"
  [ "$(grep -E '^  loss ' "$dir/mpi.log")" = "$(grep -E '^  loss ' "$dir/one.log")" ] ||
    { grep -E '^  loss ' "$dir/mpi.log" "$dir/one.log"; echo "2 processes' loss differs from 1's"; exit 1; }

  # --deterministic: the checkpoint after 4 steps is the same bits on 1, 2 and 4 processes, with
  # dropout (each micro-batch's masks from its own (seed, step, micro-batch) key) and --grad-accum 2
  # (4 x 2 micro-batches of 1 row a step), and under bf16 autocast; saved by 2 processes at step 2
  # and resumed by 1, the same bits again.
  plain=("${tiny[@]}" --dropout 0.1 --grad-accum 2 --sample-tokens 0 --log-every 1)
  det=("${plain[@]}" --deterministic)
  nps="1 2 4"; [ -z "${ASAN_OPTIONS:-}" ] || nps="1 2"  # 4 slow processes on 2 cores under the sanitizers
  for np in $nps; do
    run "$np" "${det[@]}" --steps 4 --checkpoint "$dir/det.$np.st" >"$dir/det.$np.log"
    cmp "$dir/det.1.st" "$dir/det.$np.st" ||
      { grep -h "^  loss" "$dir"/det.*.log; echo "deterministic GPT on $np processes differs from 1"; exit 1; }
    [ "$(grep -oE '^step .* \| norm [0-9.]+' "$dir/det.$np.log")" = "$(grep -oE '^step .* \| norm [0-9.]+' "$dir/det.1.log")" ] ||
      { grep -h "^step" "$dir"/det.*.log; echo "deterministic GPT on $np processes prints another loss than 1"; exit 1; }
  done
  has "$dir/det.2.log" "data parallel: 2 processes, 2 rows each of every batch, deterministic"
  has "$dir/det.2.log" "micro-batches: 4 of 1 rows, 2 a process in each round of --grad-accum"
  for np in 1 2; do
    run "$np" "${det[@]}" --autocast bf16 --steps 3 --checkpoint "$dir/bf16.$np.st" >/dev/null
  done
  cmp "$dir/bf16.1.st" "$dir/bf16.2.st" || { echo "deterministic GPT under bf16 on 2 processes differs from 1"; exit 1; }
  run 2 "${det[@]}" --steps 2 --checkpoint "$dir/det.half.st" >/dev/null
  run 1 "${det[@]}" --steps 4 --resume "$dir/det.half.st" --checkpoint "$dir/det.resumed.st" >/dev/null
  cmp "$dir/det.1.st" "$dir/det.resumed.st" || { echo "deterministic: saved on 2 processes, resumed on 1, differs"; exit 1; }
  # Plain DDP gives each micro-batch its own dropout masks too (its ranks used to share the
  # generator and repeat each other's): on 2 processes it runs the micro-batches that
  # --deterministic --micro-batches 2 runs there, with the same masks, and its sums come to the same
  # bits (each rank's two halves added, the ranks averaged; the tree adds the pairs, divides by 4).
  run 2 "${plain[@]}" --steps 3 --checkpoint "$dir/plain.st" >/dev/null
  run 2 "${det[@]}" --micro-batches 2 --steps 3 --checkpoint "$dir/det.m2.st" >/dev/null
  cmp "$dir/plain.st" "$dir/det.m2.st" || { echo "plain DDP with dropout differs from deterministic --micro-batches 2"; exit 1; }
  # A rank started with another --dropout (or --seed, --grad-accum, --autocast) is refused by name
  # before the first step, instead of training another model in the same job.
  set +e
  msg=$(OMPI_MCA_mca_base_component_disable_dlclose=1 timeout 60 mpirun --oversubscribe --bind-to none \
        -np 1 "$train" "${tiny[@]}" --steps 1 : -np 1 "$train" "${tiny[@]}" --steps 1 --dropout 0.1 2>&1)
  rc=$?; set -e
  [ $rc -ne 0 ] && grep -qF "the ranks disagree on --dropout: rank 0 has 0, rank 1 has 0.1" <<<"$msg" ||
    { echo "$msg"; echo "ranks with different --dropout: exit status $rc, not refused by name"; exit 1; }
fi

# Sampling from the checkpoint: text for a byte-level model, the same text for the same seed.
a=$("$generate" --checkpoint "$dir/straight.st" --prompt "The " --tokens 30 --seed 5)
b=$("$generate" --checkpoint "$dir/straight.st" --prompt "The " --tokens 30 --seed 5)
[ "$a" = "$b" ] && [ "${a:0:4}" = "The " ] || { echo "torc-generate: '$a' / '$b'"; exit 1; }
if "$generate" --checkpoint "$dir/straight.st" --tokens -1 2>/dev/null; then echo "--tokens -1 accepted"; exit 1; fi
set +e; "$generate" --tokens 3 2>/dev/null; rc=$?; set -e
[ $rc = 2 ] || { echo "torc-generate without --checkpoint: exit $rc, expected 2"; exit 1; }

# Refusals before the first step, nothing written.
expect_fail() {
  local want=$1; shift
  rm -f "$dir/none.st"
  if msg=$("$train" "$@" --checkpoint "$dir/none.st" 2>&1 >/dev/null); then echo "torc-train $* succeeded"; exit 1; fi
  grep -qF -- "$want" <<<"$msg" || { echo "torc-train $*: '$msg' lacks '$want'"; exit 1; }
  [ ! -e "$dir/none.st" ] || { echo "torc-train $*: wrote a checkpoint"; exit 1; }
}
expect_fail "--n-embd 30 must be divisible by --n-head 4" "${tiny[@]}" --n-embd 30 --n-head 4
expect_fail "--block-size 100000 needs at least 100001" "${tiny[@]}" --block-size 100000
expect_fail "which --vocab-size 100 does not have" "${tiny[@]}" --vocab-size 100
expect_fail "the checkpoint's n_embd is 32, this run's --n-embd is 64" "${tiny[@]}" --n-embd 64 --resume "$dir/half.st"
expect_fail "--dim is the Cruncher's" "${tiny[@]}" --dim 8
expect_fail "--n-layer needs --model gpt" --model cruncher --n-layer 2
expect_fail "--model gpt needs --data" --model gpt
expect_fail "--eval-every and --eval-batches need --val-data" --data "$dir/data/train.bin" --eval-every 5
if msg=$("$train" "${tiny[@]}" --checkpoint "$dir/nosuchdir/x.st" 2>&1 >/dev/null); then echo "unwritable checkpoint accepted"; exit 1; fi
grep -qF "cannot write in $dir/nosuchdir" <<<"$msg" || { echo "unwritable checkpoint: '$msg'"; exit 1; }
expect_fail "--data: " --data "$dir/nosuch.bin"
expect_fail "--deterministic needs data parallel (--dist auto, mpi or nccl)" "${tiny[@]}" --deterministic --dist off
if $mpi; then
  expect_fail "--deterministic: --grad-accum 3 must be a power of two" "${tiny[@]}" --deterministic --grad-accum 3
  expect_fail "--deterministic: --micro-batches 8 must be a multiple of the 1 processes and divide --batch 4" \
    "${tiny[@]}" --deterministic --micro-batches 8
  expect_fail "--micro-batches 8 must be a multiple of the 1 process and divide --batch 4" "${tiny[@]}" --micro-batches 8
fi
head -c 1500 "$dir/data/train.bin" >"$dir/short.bin"
expect_fail "short.bin" --data "$dir/short.bin"

# A diverging run stops with the step number; the checkpoint keeps the last finite step.
if msg=$("$train" "${tiny[@]}" --steps 50 --lr 1e30 --grad-clip 0 --every 1 --checkpoint "$dir/div.st" 2>&1 >/dev/null); then
  echo "lr 1e30 trained 50 steps"; exit 1
fi
grep -qE "the loss is (nan|inf|-nan) at step [0-9]+: stopped; .*div.st keeps the last good step" <<<"$msg" ||
  { echo "divergence: '$msg'"; exit 1; }
stopped=$(sed -E 's/.* at step ([0-9]+):.*/\1/' <<<"$msg")
"$generate" --checkpoint "$dir/div.st" --tokens 1 >/dev/null
python3 - "$dir/div.st" "$((stopped - 1))" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]
step = json.loads(b[8:8 + n])['__metadata__']['step']
sys.exit(0 if step == sys.argv[2] else print("checkpoint at step", step, "expected", sys.argv[2]) or 1)
PY
echo "gpt_train: all checks passed"
