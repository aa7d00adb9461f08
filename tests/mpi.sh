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
