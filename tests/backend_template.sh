#!/usr/bin/env bash
# tests/backend_template.sh — the out-of-tree backend workflow from an installed torc: install to a
# temporary prefix, scaffold with torc-backend-new, build with find_package(torc), then check the
# backend with torc-xcheck (its own ops, which it must run itself, and every op, the rest falling
# back to the reference) and train on it with torc-train. Also: the scaffold's file is the one
# docs/writing-a-backend.md prints, and the plugin refuses an unknown init option by name.
set -euo pipefail
build=$1 sanitize=${2:-OFF}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/backend_template_test_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset TORC_PLUGIN_PATH TORC_BACKEND TORC_MYBE_STATS TORC_MYBE2_STATS
prefix=$tmp/prefix
die() { echo "backend_template: $*" >&2; exit 1; }
# A sanitized libtorc needs its users built the same way (the ASan runtime must come first).
case $sanitize in ON|on|1|TRUE|true) export CFLAGS="-fsanitize=address,undefined" LDFLAGS="-fsanitize=address,undefined" ;; esac
export CFLAGS="${CFLAGS:-} -Werror"  # the template builds without a warning

# ---- the doc prints the template ----
# The ```c block of docs/writing-a-backend.md that starts with "// tiny.c:" is the template file.
doc_block=$(awk '/^```c$/ { inb = 1; buf = ""; next } /^```$/ && inb { if (buf ~ /^\/\/ tiny\.c:/) { printf "%s", buf; exit } inb = 0; next }
                 inb { buf = buf $0 "\n" }' "$src/docs/writing-a-backend.md")
[ -n "$doc_block" ] || die "docs/writing-a-backend.md has no c block starting with '// tiny.c:'"
diff <(printf '%s\n' "$doc_block") "$src/tools/backend-template/tiny.c" >"$tmp/doc.diff" ||
  { cat "$tmp/doc.diff" >&2; die "docs/writing-a-backend.md's tiny.c differs from tools/backend-template/tiny.c (above)"; }

# ---- scaffold ----
cmake --install "$build" --prefix "$prefix" >/dev/null
new=$prefix/bin/torc-backend-new
"$new" mybe "$tmp/be" >/dev/null
[ -f "$tmp/be/mybe.c" ] && [ -f "$tmp/be/CMakeLists.txt" ] || die "torc-backend-new wrote no mybe.c / CMakeLists.txt"
if grep -n "tiny\|TINY" "$tmp/be/mybe.c" "$tmp/be/CMakeLists.txt"; then die "the template's name is left in the scaffold (above)"; fi
if "$new" mybe "$tmp/be" 2>/dev/null; then die "scaffolded over a non-empty dir"; fi
if "$new" Bad-Name "$tmp/other" 2>/dev/null; then die "accepted a bad name"; fi
err=$("$new" reference "$tmp/other" 2>&1) && die "accepted the name 'reference'"
grep -q "taken" <<<"$err" || die "refusing 'reference' did not say why: $err"
[ ! -e "$tmp/other" ] || die "a refused call created $tmp/other"
# --help: usage on stdout, status 0; a wrong call: usage on stderr, status 2.
help=$("$new" --help 2>/dev/null)
grep -q "^usage: torc-backend-new NAME DIR" <<<"$help" || die "--help printed no usage on stdout"
set +e
"$new" onlyone >/dev/null 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || die "a wrong call exited $rc, not 2"

# ---- build out of tree, into a directory of our own ----
cmake -S "$tmp/be" -B "$tmp/be/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DTORC_BACKEND_INSTALL_DIR="$tmp/own" >/dev/null
cmake --build "$tmp/be/build" >/dev/null
cmake --install "$tmp/be/build" >/dev/null
so=$tmp/own/libtorc_mybe.so
[ -f "$so" ] && [ ! -e "$prefix/lib/torc/libtorc_mybe.so" ] || die "TORC_BACKEND_INSTALL_DIR was not used"
# The plugin links no libtorc (it sees only the op descriptors of <torc/backend.h>).
if ldd "$so" | grep -q libtorc; then die "the plugin links libtorc"; fi
xcheck=$prefix/bin/torc-xcheck
if "$xcheck" --backend mybe --op fill >/dev/null 2>&1; then die "found 'mybe' without TORC_PLUGIN_PATH"; fi
export TORC_PLUGIN_PATH=$tmp/own

# ---- torc-xcheck over its own ops: it must run them itself ----
# --csv: op,dtype,family,mode,status,... per case. Every f32 / f64 case of the four ops runs
# natively ("native"), except the mixed-dtype families, which the template declines; the other
# dtypes fall back to the reference. The counter (TORC_MYBE_STATS) must show each op ran.
TORC_MYBE_STATS=1 "$xcheck" --backend mybe --op fill,add,mul,matmul --csv >"$tmp/own.csv" 2>"$tmp/own.err" ||
  { grep -v ",ok," "$tmp/own.csv" >&2; cat "$tmp/own.err" >&2; die "torc-xcheck --op fill,add,mul,matmul failed"; }
awk -F, 'NR > 1 {
    mine = ($2 == "f32" || $2 == "f64") && $3 !~ /^mixed/ && $4 != "frontend"
    if ($5 != "ok") { print "failed: " $0; bad = 1 }
    if (mine && $4 != "native") { print "not run by mybe: " $0; bad = 1 }
    if (mine) n[$1]++
    if (!mine && $4 == "native") { print "native outside f32/f64: " $0; bad = 1 }
  } END {
    split("fill add mul matmul", ops, " ")
    for (i = 1; i <= 4; i++) if (n[ops[i]] < 10) { print ops[i] ": only " n[ops[i]] + 0 " native f32/f64 cases"; bad = 1 }
    exit bad
  }' "$tmp/own.csv" || die "torc-xcheck's report says mybe did not run its own ops (above)"
ran_counts() {  # "mybe: ran fill 22 add 40 ..." -> checks each named op ran at least once
  local line
  line=$(grep "^mybe: ran" "$1") || die "no 'mybe: ran' line from TORC_MYBE_STATS=1 in $1"
  shift
  for op in "$@"; do
    grep -Eq " $op [1-9][0-9]*( |$)" <<<"$line" || die "mybe ran no $op: '$line'"
  done
}
ran_counts "$tmp/own.err" fill add mul matmul

# ---- torc-xcheck over every op: the declined ones fall back to the reference on its memory ----
TORC_MYBE_STATS=1 "$xcheck" --backend mybe --csv >"$tmp/all.csv" 2>"$tmp/all.err" ||
  { grep -v ',ok,' "$tmp/all.csv" >&2; cat "$tmp/all.err" >&2; die "torc-xcheck over every op failed"; }
awk -F, 'NR > 1 {
    if ($5 != "ok") { print "failed: " $0; bad = 1 }
    if ($4 == "native" && $1 != "fill" && $1 != "add" && $1 != "mul" && $1 != "matmul") { print "claimed: " $0; bad = 1 }
    if ($4 == "fallback") fb++
  } END { if (fb < 100) { print "only " fb + 0 " fallback cases"; bad = 1 } exit bad }' "$tmp/all.csv" ||
  die "torc-xcheck over every op (above)"
ran_counts "$tmp/all.err" fill add mul matmul

# ---- torc-train on it ----
out=$(TORC_MYBE_STATS=1 "$prefix/bin/torc-train" --backend mybe --steps 30 --lr 0.01 2>"$tmp/train.err")
grep -q "on mybe (mybe host backend)" <<<"$out" || die "torc-train did not run on mybe: $out"
line=$(grep -E '^  loss ' <<<"$out")
first=$(awk '{print $2}' <<<"$line") last=$(awk '{print $8}' <<<"$line")
awk -v f="$first" -v l="$last" 'BEGIN { if (!(l < f / 2)) { print "loss did not fall on mybe: " f " -> " l; exit 1 } }'
ran_counts "$tmp/train.err" matmul
TORC_BACKEND=mybe "$prefix/bin/torc-train" --steps 2 | grep -q " on mybe " || die "TORC_BACKEND=mybe was not used"

# ---- init's options, from a find_package(torc) application ----
mkdir -p "$tmp/app"
cat >"$tmp/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(app LANGUAGES C)
find_package(torc REQUIRED)
add_executable(app main.c)
target_link_libraries(app PRIVATE torc::torc)
set_target_properties(app PROPERTIES BUILD_RPATH "${TORC_PLUGIN_DIR}/..")
CM
cat >"$tmp/app/main.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <torc/torc.h>
int main(void) {
    const char *bad[] = {"speed=11", NULL}, *good[] = {"stats=1", NULL};
    if (torc_backend_load("mybe", bad) == TORC_OK || !strstr(torc_last_error(), "speed=11")) {
        fprintf(stderr, "an unknown option was not refused by name: %s\n", torc_last_error());
        return 1;
    }
    if (torc_backend_load("mybe", good) != TORC_OK) {
        fprintf(stderr, "stats=1 refused: %s\n", torc_last_error());
        return 1;
    }
    torc_device *dev = torc_device_get("mybe");
    if (!dev) return fprintf(stderr, "%s\n", torc_last_error()), 1;
    torc_set_default_device(dev);
    torc_scope_push();
    torc_tensor *a = torc_full(TORC_SHAPE(2, 3), 2.0, TORC_DTYPE_F32), *b = torc_full(TORC_SHAPE(3, 2), 0.5, TORC_DTYPE_F32);
    torc_tensor *c = a && b ? torc_matmul(a, b) : NULL;
    double v = 0;
    if (!c || torc_item(torc_select(torc_select(c, 0, 1), 0, 1), &v)) return fprintf(stderr, "%s\n", torc_last_error()), 1;
    printf("matmul on mybe: %g\n", v);
    torc_scope_pop();
    torc_set_default_device(NULL);
    return v == 3.0 ? 0 : 1;
}
C
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
"$tmp/app/build/app" 2>"$tmp/app.err" || { cat "$tmp/app.err" >&2; die "the options app failed"; }
ran_counts "$tmp/app.err" matmul

# ---- the default install: next to torc's own backends, found without TORC_PLUGIN_PATH ----
unset TORC_PLUGIN_PATH
"$new" mybe2 "$tmp/be2" >/dev/null
cmake -S "$tmp/be2" -B "$tmp/be2/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/be2/build" >/dev/null
cmake --install "$tmp/be2/build" >/dev/null
[ -f "$prefix/lib/torc/libtorc_mybe2.so" ] || die "mybe2 not installed into $prefix/lib/torc"
"$xcheck" --backend mybe2 --op matmul --dtype f32 --quiet >/dev/null || die "torc-xcheck --backend mybe2 failed"
echo "backend template: scaffolded, built out of tree, ran fill/add/mul/matmul itself under torc-xcheck, the rest on the reference, trained"
