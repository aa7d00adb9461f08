#!/usr/bin/env bash
# tests/mpi.sh PART MPI_TEST TORC_TRAIN — one part of the data-parallel tests, run with mpirun (see
# tests/mpi.cmake). Exits 77 with a reason when mpirun (Open MPI) is missing.
set -euo pipefail
part=$1 bin=$2 train=${3:-}
command -v mpirun >/dev/null || { echo "SKIP: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One thread per rank, shared memory and loopback only; quiet about the missing InfiniBand.
export TORC_NUM_THREADS=1 OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_btl=self,vader,tcp
# Under the sanitizers: Open MPI's components stay mapped and stacks are unwound in full, so
# that every frame keeps its library's name, and Open MPI's own allocations are not reported.
export OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1
[ -z "${ASAN_OPTIONS:-}" ] || export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$0")" && pwd)/mpi_lsan.supp:print_suppressions=0"
run() { local np=$1; shift; timeout 60 mpirun -np "$np" --oversubscribe --bind-to none "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Max |a - b| over the numbers of two result files (loss curve and parameters), relative.
maxdiff() {
  python3 - "$1" "$2" <<'PY'
import sys
a = [l.split() for l in open(sys.argv[1])]; b = [l.split() for l in open(sys.argv[2])]
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
d = max(abs(float.fromhex(x[-1]) - float.fromhex(y[-1])) / (1 + abs(float.fromhex(y[-1]))) for x, y in zip(a, b))
print(d)
PY
}

# Max relative difference of two safetensors files' float32 tensors (the same names).
stdiff() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); out = {}
    for k, v in h.items():
        if k != '__metadata__' and v['dtype'] == 'F32':
            s, e = v['data_offsets']; out[k] = struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys() and a, (sorted(a), sorted(b))
print(max(abs(x - y) / (1 + abs(y)) for k in a for x, y in zip(a[k], b[k])))
PY
}

# A torc-train summary's memory peak of LABEL (grads, activations) in bytes (to a tenth of its unit).
peak_bytes() {
  grep -E "^    $2 " "$1" | sed -E 's|.* / ||' | awk '{ u = $2 == "B" ? 1 : $2 == "KiB" ? 1024 : $2 == "MiB" ? 1048576 : 1073741824; printf "%d\n", $1 * u }'
}

case $part in
collectives)
  run 2 "$bin" collectives
  run 3 "$bin" collectives ;;
ddp)  # 2 ranks x B/2 against 1 rank x B, SGD and Adam, 20 steps: within 1e-5; an unused parameter
  for opt in sgd adam; do
    run 1 "$bin" train --optim $opt --steps 20 --batch 32 --out "$tmp/one.$opt"
    run 2 "$bin" train --optim $opt --steps 20 --batch 32 --out "$tmp/two.$opt"
    d=$(maxdiff "$tmp/one.$opt" "$tmp/two.$opt")
    echo "$opt: 2 ranks vs 1 rank, max relative difference $d"
    python3 -c "import sys; sys.exit(0 if $d <= 1e-5 else 1)" || { echo "FAIL: $opt differs by $d > 1e-5"; exit 1; }
  done
  run 2 "$bin" train --optim sgd --steps 3 --batch 32 --unused ;;
deterministic)  # bit-identical loss curve and parameters for 1, 2 and 4 ranks
  for opt in sgd adam; do
    for np in 1 2 4; do run $np "$bin" train --optim $opt --steps 20 --batch 32 --deterministic --out "$tmp/det.$opt.$np"; done
    cmp "$tmp/det.$opt.1" "$tmp/det.$opt.2" && cmp "$tmp/det.$opt.1" "$tmp/det.$opt.4" ||
      { echo "FAIL: deterministic $opt runs differ across process counts"; exit 1; }
    echo "$opt: 1, 2 and 4 ranks bit-identical ($(wc -l < "$tmp/det.$opt.1") values)"
  done ;;
checkpoint)  # saved by 2 ranks at step 10, resumed on 1: the same as the 2-rank run to step 20
  run 2 "$bin" train --optim adam --steps 20 --batch 32 --deterministic --save "$tmp/ck.safetensors" --save-at 10 --out "$tmp/full"
  run 1 "$bin" train --optim adam --steps 20 --batch 32 --deterministic --resume "$tmp/ck.safetensors" --out "$tmp/resumed"
  grep '^param' "$tmp/full" > "$tmp/full.p"; grep '^param' "$tmp/resumed" > "$tmp/resumed.p"
  cmp "$tmp/full.p" "$tmp/resumed.p" || { echo "FAIL: resumed on 1 rank differs from the 2-rank run"; exit 1; }
  grep '^loss 1[1-9]\|^loss 20' "$tmp/full" > "$tmp/full.l"; grep '^loss' "$tmp/resumed" > "$tmp/resumed.l"
  cmp "$tmp/full.l" "$tmp/resumed.l" || { echo "FAIL: resumed loss curve differs"; exit 1; }
  echo "checkpoint from 2 ranks resumed on 1: bit-identical to the 2-rank run" ;;
failure)  # the last rank is killed at step 5: the others exit non-zero with a message within 10 s
  start=$(date +%s.%N)
  set +e
  TORC_COMM_TIMEOUT=8 timeout 30 mpirun -np 2 --oversubscribe --bind-to none "$bin" train --steps 100000 --batch 32 --die-at 5 > "$tmp/log" 2>&1
  rc=$?
  set -e
  took=$(python3 -c "import time; print(round(time.time() - $start, 2))")
  cat "$tmp/log"
  [ $rc -ne 0 ] || { echo "FAIL: the job exited 0 after a rank died"; exit 1; }
  [ $rc -ne 124 ] || { echo "FAIL: the job hung (killed by timeout)"; exit 1; }
  grep -qi "rank 1" "$tmp/log" || { echo "FAIL: no message naming rank 1"; exit 1; }
  python3 -c "import sys; sys.exit(0 if $took < 10 else 1)" || { echo "FAIL: took $took s (limit 10 s)"; exit 1; }
  echo "a killed rank ended the job in $took s with exit status $rc"
  # The last rank stops calling collectives but stays alive: rank 0's wait times out (3 s), it
  # names itself and the cause, and its abort ends the job.
  start=$(date +%s.%N)
  set +e
  TORC_COMM_TIMEOUT=3 timeout 30 mpirun -np 2 --oversubscribe --bind-to none -x TORC_COMM_TIMEOUT "$bin" train --steps 100000 --batch 32 --hang-at 5 > "$tmp/log" 2>&1
  rc=$?
  set -e
  took=$(python3 -c "import time; print(round(time.time() - $start, 2))")
  cat "$tmp/log"
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: exit status $rc for a hung rank"; exit 1; }
  grep -q "rank 0: .* did not finish within 3 s: another rank has died, failed or stopped" "$tmp/log" ||
    { echo "FAIL: no timeout message from rank 0"; exit 1; }
  python3 -c "import sys; sys.exit(0 if $took < 10 else 1)" || { echo "FAIL: took $took s (limit 10 s)"; exit 1; }
  echo "a hung rank ended the job in $took s with exit status $rc" ;;
netns)  bash "$(dirname "$0")/mpi_netns.sh" "$bin" "$tmp" ;;
mismatch)  # collectives whose count, kind, root or dtype differ, and torc_ddp_new with other bucket
           # caps or models: refused on every rank naming the difference, nothing written (under
           # ASan too: a peer's larger count used to overflow a bucket buffer)
  run 2 "$bin" mismatch
  run 3 "$bin" mismatch ;;
agree)  # torc-train ranks started with other options: refused on every rank, naming the first
        # setting that differs and both values, instead of training something else or hanging
  expect_refused() {  # WANT ARGS-OF-RANK-1...
    local want=$1 rc; shift
    set +e; timeout 60 mpirun --oversubscribe --bind-to none -np 1 "$train" "${args[@]}" : \
      -np 1 "$train" "${args[@]}" "$@" > "$tmp/agree.log" 2>&1; rc=$?; set -e
    if [ $rc -eq 0 ] || [ $rc -eq 124 ] || [ "$(grep -c -F -- "$want" "$tmp/agree.log")" != 2 ]; then
      cat "$tmp/agree.log"; echo "FAIL: rank 1 with $* (exit status $rc): not refused on both ranks with '$want'"; exit 1
    fi
  }
  args=(--dim 16 --layers 1 --batch 16 --steps 3)
  # Under the sanitizers (each refused job there takes about 6 s) the bucket cap, whose mismatch
  # overflowed a buffer, and two more; the rest only in the plain build.
  expect_refused "the ranks disagree on --bucket-cap-mb: rank 0 has 25, rank 1 has 0.001" --bucket-cap-mb 0.001
  expect_refused "the ranks disagree on --lr: rank 0 has 0.001, rank 1 has 0.02" --lr 0.02
  expect_refused "the ranks disagree on --steps: rank 0 has 3, rank 1 has 7" --steps 7
  if [ -z "${ASAN_OPTIONS:-}" ]; then
    expect_refused "the ranks disagree on --optim: rank 0 has adam, rank 1 has sgd" --optim sgd
    expect_refused "the ranks disagree on --seed: rank 0 has 0, rank 1 has 3" --seed 3
    expect_refused "the ranks disagree on --batch: rank 0 has 16, rank 1 has 32" --batch 32
    expect_refused "the ranks disagree on --micro-batches: rank 0 has 2, rank 1 has 8" --micro-batches 8
    expect_refused "the ranks disagree on --deterministic: rank 0 has off, rank 1 has on" --deterministic
    expect_refused "the ranks disagree on --hp betas: rank 0 has 0.9,0.999, rank 1 has 0.8,0.9" --hp betas=0.8,0.9
    if TORC_BACKEND= "$train" --backend onednn --steps 0 >/dev/null 2>&1; then
      expect_refused "the ranks disagree on --backend: rank 0 has reference, rank 1 has onednn" --backend onednn
    else
      echo "(--backend: no second host backend here, not checked)"
    fi
  fi
  # One rank with --dist off inside the job: refused at once (rank 0 waited in MPI_Init forever).
  set +e; timeout 30 mpirun --bind-to none -np 1 "$train" "${args[@]}" : -np 1 "$train" "${args[@]}" --dist off \
    > "$tmp/off.log" 2>&1; rc=$?; set -e
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -- "--dist off, but this process is one of 2 that mpirun started" "$tmp/off.log" ||
    { cat "$tmp/off.log"; echo "FAIL: --dist off inside mpirun -np 2 (exit status $rc)"; exit 1; }
  # TORC_COMM_TIMEOUT that is not a number: an error, not hang detection silently off.
  if TORC_COMM_TIMEOUT=abc "$train" "${args[@]}" --deterministic > "$tmp/timeout.log" 2>&1 ||
     ! grep -q "TORC_COMM_TIMEOUT must be a number of seconds from 0 to 1e9 (0: no limit), got 'abc'" "$tmp/timeout.log"; then
    cat "$tmp/timeout.log"; echo "FAIL: TORC_COMM_TIMEOUT=abc was accepted"; exit 1
  fi
  # Under mpirun (whose processes get a terminal of mpirun's even when its output is a file): plain
  # lines, no progress bar. A rank stopped mid-run: rank 0 times out and names itself once.
  TORC_COMM_TIMEOUT=2 timeout 60 mpirun -np 2 --bind-to none -x TORC_COMM_TIMEOUT "$train" --steps 100000000 \
    --log-every 1 > "$tmp/stop.log" 2>&1 & job=$!
  for _ in $(seq 100); do grep -q "^step 5/" "$tmp/stop.log" && break; sleep 0.1; done
  for launcher in $(pgrep -P $job); do  # timeout -> mpirun -> the ranks
    for pid in $(pgrep -P "$launcher"); do
      grep -qz "^OMPI_COMM_WORLD_RANK=1$" /proc/"$pid"/environ 2>/dev/null && kill -STOP "$pid"
    done
  done
  set +e; wait $job; rc=$?; set -e
  if [ $rc -eq 0 ] || [ $rc -eq 124 ] || grep -q $'\r' "$tmp/stop.log" || grep -q "rank 0: rank 0:" "$tmp/stop.log" ||
     ! grep -q "^torc-train: rank 0: .* did not finish within 2 s" "$tmp/stop.log"; then
    cat -A "$tmp/stop.log" | tail -20; echo "FAIL: a stopped rank (exit status $rc): progress bar, doubled 'rank 0:' or no timeout"; exit 1
  fi
  echo "ranks that disagree are refused naming the setting; --dist off and TORC_COMM_TIMEOUT=abc refused" ;;
fp8)  # --deterministic --autocast fp8: the amax history is reduced across ranks, so the checkpoint is
      # the same bits for 1, 2 and 4 processes
  args=(--dim 32 --layers 2 --batch 64 --steps 12 --deterministic --autocast fp8 --log-every 12)
  nps="1 2 4"; [ -z "${ASAN_OPTIONS:-}" ] || nps="1 2"  # 4 slow processes on 2 cores under the sanitizers
  for np in $nps; do
    run $np "$train" "${args[@]}" --checkpoint "$tmp/fp8.$np.st" > "$tmp/fp8.$np.log"
    cmp "$tmp/fp8.1.st" "$tmp/fp8.$np.st" ||
      { grep -h "^  loss" "$tmp"/fp8.*.log; echo "FAIL: deterministic fp8 on $np processes differs from 1"; exit 1; }
  done
  echo "deterministic fp8: $nps processes bit-identical ($(grep "^  loss" "$tmp/fp8.1.log"))" ;;
accumulate)  # --micro-batches without --deterministic: 2 ranks x 4 micro-batches of 8 rows, one
             # reduction, against 2 ranks x 32 rows: the same weights within 1e-5, less activation memory
  args=(--dim 64 --layers 2 --batch 64 --steps 8 --log-every 8)
  run 2 "$train" "${args[@]}" --checkpoint "$tmp/big.st" > "$tmp/big.log"
  run 2 "$train" "${args[@]}" --micro-batches 8 --checkpoint "$tmp/acc.st" > "$tmp/acc.log"
  d=$(stdiff "$tmp/big.st" "$tmp/acc.st")
  python3 -c "import sys; sys.exit(0 if $d <= 1e-5 else 1)" || { echo "FAIL: accumulated differs by $d > 1e-5"; exit 1; }
  grep -q "micro-batches: 8 of 8 rows, 4 a process" "$tmp/acc.log" || { cat "$tmp/acc.log"; echo "FAIL: no micro-batch banner"; exit 1; }
  a=$(peak_bytes "$tmp/big.log" activations) b=$(peak_bytes "$tmp/acc.log" activations)
  [ "$b" -lt "$a" ] || { echo "FAIL: activation peak $b with micro-batches, $a without"; exit 1; }
  echo "micro-batches accumulate: weights within $d of the large batch, activation peak $b < $a bytes" ;;
memory)  # deterministic mode's gradient memory is bounded whatever the world size: at most
         # (3 + log2(M / W)) x P plus W - 1 elements a bucket (it was (1 + W) x P for the gathers alone)
  args=(--dim 64 --layers 2 --batch 64 --steps 2 --deterministic --micro-batches 4)
  P=$(( (64 * 64 * 2 + 64) * 4 ))
  nps="1 2 4"; [ -z "${ASAN_OPTIONS:-}" ] || nps="1 4"
  for np in $nps; do
    run $np "$train" "${args[@]}" > "$tmp/mem.$np.log"
    g=$(peak_bytes "$tmp/mem.$np.log" grads)
    # one bucket here; + 52 bytes: the summary shows KiB to a tenth
    bound=$(python3 -c "import math; print(int((3 + math.log2(4 // $np)) * $P + ($np - 1) * 4 + 52))")
    [ "$g" -le "$bound" ] || { cat "$tmp/mem.$np.log"; echo "FAIL: $np processes: gradient peak $g bytes > bound $bound"; exit 1; }
    echo "$np processes: gradient peak $g bytes <= $bound"
  done ;;
train)  # mpirun -np 2 torc-train: deterministic checkpoints equal 1 process's byte for byte; the
        # summary reports the communication; a 2-process checkpoint resumes on 1 process
  args=(--dim 32 --layers 2 --batch 64 --log-every 10)
  "$train" "${args[@]}" --steps 20 --deterministic --checkpoint "$tmp/one.st" > "$tmp/one.log"
  run 2 "$train" "${args[@]}" --steps 20 --deterministic --checkpoint "$tmp/two.st" > "$tmp/two.log"
  cmp "$tmp/one.st" "$tmp/two.st" || { echo "FAIL: 2-process deterministic torc-train differs from 1 process"; exit 1; }
  grep -q "data parallel: 2 processes (mpi), 32 rows each per step, deterministic" "$tmp/two.log" ||
    { cat "$tmp/two.log"; echo "FAIL: no data-parallel banner"; exit 1; }
  run 2 "$train" "${args[@]}" --steps 10 --deterministic --checkpoint "$tmp/half.st" > /dev/null
  "$train" "${args[@]}" --steps 20 --deterministic --resume "$tmp/half.st" --checkpoint "$tmp/resumed.st" > /dev/null
  cmp "$tmp/one.st" "$tmp/resumed.st" || { echo "FAIL: 2-process checkpoint resumed on 1 process differs"; exit 1; }
  run 2 "$train" "${args[@]}" --steps 20 > "$tmp/plain.log"
  cat "$tmp/plain.log"
  for want in "all-reduced" "overlapped backward" "scaling eff."; do
    grep -q "$want" "$tmp/plain.log" || { echo "FAIL: summary lacks '$want'"; exit 1; }
  done
  set +e; run 2 "$train" "${args[@]}" --batch 63 --steps 1 > "$tmp/odd.log" 2>&1; rc=$?; set -e
  [ $rc -ne 0 ] && grep -q "must be divisible by the 2 processes" "$tmp/odd.log" ||
    { cat "$tmp/odd.log"; echo "FAIL: an indivisible global batch was not refused"; exit 1; }
  echo "torc-train under mpirun: deterministic = 1 process byte for byte, resumes across world sizes" ;;
*) echo "unknown part $part"; exit 2 ;;
esac
