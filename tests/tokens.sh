#!/usr/bin/env bash
# tests/tokens.sh TORC_TOKENS — torc-tokens on a small tree: the exact bytes of train.bin and
# val.bin (byte 0 before each file, each file's tail from a line start in val), the walk's order
# and what it skips (.git, binary and empty files, links to directories), the same output twice,
# --format bin holding the same tokens without the header, and errors that leave nothing
# written: a missing input, bad flags, an empty val split, an unreadable file (not as root).
set -euo pipefail
tool=$1
dir=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/tokens_test_XXXXXX")
trap 'chmod -R u+rwx "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

t=$dir/tree
mkdir -p "$t/b/deep" "$t/a" "$t/.git" "$t/a/.git"
printf 'first line\nsecond line\nthird line\nfourth\n' >"$t/b/one.txt"   # 41 bytes: cut 37, back to 34 ("fourth")
printf 'zeta\n' >"$t/b/deep/z.txt"                                       # 5 bytes: 0.5 of a byte to val, so none
printf 'alpha beta gamma\ndelta\n' >"$t/a/x.md"                          # 23 bytes: cut 21, inside the last line: back to 17
printf 'ignored\n' >"$t/.git/config"
printf 'ignored\n' >"$t/a/.git/HEAD"
printf 'bin\0ary\n' >"$t/b/blob.dat"
: >"$t/b/empty.txt"
ln -s ../a "$t/b/link"

out=$("$tool" --out-dir "$dir/out" --val-fraction 0.1 --verbose "$t")
echo "$out"
grep -q "torc-tokens: 3 files, 69 B (skipped: 1 binary, 1 empty, 1 other)" <<<"$out" || fail "summary"
# The walk's order is byte order of names, skipped files listed where they were met.
order=$(grep -E '^  (take|skip)' <<<"$out" | awk '{print $2}' | sed "s|$t/||" | tr '\n' ' ')
[ "$order" = "a/x.md b/blob.dat b/deep/z.txt b/empty.txt b/link b/one.txt " ] || fail "walk order: '$order'"

python3 - "$dir/out" <<'PY'
import struct, sys
d = sys.argv[1]
def shard(name):
    b = open(f"{d}/{name}", "rb").read()
    magic, version, count = struct.unpack_from("<3i", b, 0)
    assert (magic, version) == (20240520, 1), (magic, version)
    assert len(b) == 1024 + 2 * count, (len(b), count)
    assert b[12:1024] == bytes(1012), "header padding"
    toks = struct.unpack_from(f"<{count}H", b, 1024)
    assert max(toks) < 256
    return bytes(toks)
train, val = shard("train.bin"), shard("val.bin")
want_train = b"\0alpha beta gamma\n" + b"\0zeta\n" + b"\0first line\nsecond line\nthird line\n"
want_val = b"\0delta\n" + b"\0fourth\n"
assert train == want_train, train
assert val == want_val, val
PY
grep -q "out/train.bin: 59 tokens (llm.c shard, vocab 256)" <<<"$out" || fail "train count line"
grep -q "out/val.bin: 15 tokens (llm.c shard, vocab 256)" <<<"$out" || fail "val count line"

# The same inputs give the same bytes; --format bin is the same tokens without the header; the
# tree may hold the output directory (its token files are binary, so skipped).
"$tool" --out-dir "$dir/out2" "$t" >/dev/null
cmp "$dir/out/train.bin" "$dir/out2/train.bin" || fail "not deterministic"
"$tool" --out-dir "$t/b/out" --format bin "$t" >/dev/null
"$tool" --out-dir "$t/b/out" --format bin "$t" >/dev/null   # again, with the first run's outputs in the tree
cmp <(tail -c +1025 "$dir/out/train.bin") "$t/b/out/train.bin" || fail "--format bin differs from the shard's tokens"
cmp <(tail -c +1025 "$dir/out/val.bin") "$t/b/out/val.bin" || fail "--format bin val differs"
rm -rf "$t/b/out"
# numpy reads what torc-tokens wrote (when it is installed: tools/install-deps.sh puts it there).
if python3 -c 'import numpy' 2>/dev/null; then
  python3 - "$dir/out" <<'PY'
import sys, numpy as np
d = sys.argv[1]
h = np.fromfile(f"{d}/train.bin", dtype=np.int32, count=256)
t = np.memmap(f"{d}/train.bin", dtype=np.uint16, mode="r", offset=1024)
assert h[0] == 20240520 and h[2] == len(t) == 59
assert bytes(t.astype(np.uint8)).startswith(b"\0alpha")
PY
fi

# ---- errors: a message, exit 1 (2 for usage), nothing written ----
expect() {
  local rc=$1 want=$2; shift 2
  set +e
  msg=$("$tool" "$@" 2>&1 >/dev/null)
  got=$?
  set -e
  [ "$got" = "$rc" ] || fail "torc-tokens $*: exit $got, not $rc ($msg)"
  grep -qF -- "$want" <<<"$msg" || fail "torc-tokens $*: '$msg' lacks '$want'"
}
sum=$(md5sum "$dir/out/train.bin" "$dir/out/val.bin")
expect 1 "cannot read input '$dir/missing': No such file or directory" --out-dir "$dir/out" "$t" "$dir/missing"
expect 1 "the val split is empty: the inputs are too short for --val-fraction 0.001" --out-dir "$dir/out" --val-fraction 0.001 "$t/b/one.txt"
expect 1 "no text files in the inputs (1 binary, 0 empty, 0 other skipped)" --out-dir "$dir/out" "$t/b/blob.dat"
[ "$(md5sum "$dir/out/train.bin" "$dir/out/val.bin")" = "$sum" ] || fail "an error changed the earlier output"
ls "$dir/out" | grep -q tmp && fail "a temporary was left"
expect 1 "the val split is empty" --out-dir "$dir/new/deeper" --val-fraction 0.001 "$t/b/one.txt"
[ ! -e "$dir/new" ] || fail "an error left the directories it made"
expect 2 "--val-fraction '0' is not a number between 0 and 1" --out-dir "$dir/x" --val-fraction 0 "$t"
expect 2 "--val-fraction '1.5' is not a number between 0 and 1" --out-dir "$dir/x" --val-fraction 1.5 "$t"
expect 2 "--format 'npy' is not llmc or bin" --out-dir "$dir/x" --format npy "$t"
expect 2 "--out-dir DIR is required" "$t"
expect 2 "no INPUT files or directories" --out-dir "$dir/x"
expect 2 "unknown flag '--bogus'" --out-dir "$dir/x" --bogus "$t"
[ ! -e "$dir/x" ] || fail "a usage error made the output directory"
if [ "$(id -u)" != 0 ]; then  # root reads anything
  chmod 000 "$t/b/one.txt"
  expect 1 "cannot read '$t/b/one.txt': Permission denied" --out-dir "$dir/out" "$t"
  chmod 644 "$t/b/one.txt"
fi
help=$("$tool" --help)
grep -q -- "--val-fraction" <<<"$help" || fail "--help"
echo "tokens_tool: ok"
