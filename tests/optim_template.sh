#!/usr/bin/env bash
# tests/optim_template.sh — the out-of-tree plugin workflow from an installed torc: install to a
# temporary prefix, scaffold with torc-optim-new, build with find_package(torc), install the
# plugin next to torc's, then (no environment variables) train with it by name and by path,
# and check its first update against the course's formula from a small find_package(torc) app.
set -euo pipefail
build=$1 sanitize=${2:-OFF}
tmp=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/template_test_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset TORC_PLUGIN_PATH TORC_BACKEND
prefix=$tmp/prefix
# A sanitized libtorc needs its users built the same way (the ASan runtime must come first).
case $sanitize in ON|on|1|TRUE|true) export CFLAGS="-fsanitize=address,undefined" LDFLAGS="-fsanitize=address,undefined" ;; esac

cmake --install "$build" --prefix "$prefix" >/dev/null
"$prefix/bin/torc-optim-new" myadagrad "$tmp/plugin"
[ -f "$tmp/plugin/myadagrad.c" ] && [ -f "$tmp/plugin/CMakeLists.txt" ]
if "$prefix/bin/torc-optim-new" myadagrad "$tmp/plugin" 2>/dev/null; then echo "scaffolded over a non-empty dir"; exit 1; fi
if "$prefix/bin/torc-optim-new" Bad-Name "$tmp/other" 2>/dev/null; then echo "accepted a bad name"; exit 1; fi
# --help: usage on stdout, status 0; a wrong call: usage on stderr, status 2.
help=$("$prefix/bin/torc-optim-new" --help 2>/dev/null)
grep -q "^usage: torc-optim-new NAME DIR" <<<"$help" || { echo "--help printed no usage on stdout"; exit 1; }
set +e
"$prefix/bin/torc-optim-new" onlyone >/dev/null 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || { echo "a wrong call exited $rc, not 2"; exit 1; }

cmake -S "$tmp/plugin" -B "$tmp/plugin/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/plugin/build" >/dev/null
cmake --install "$tmp/plugin/build" >/dev/null
[ -f "$prefix/lib/torc/libtorc_optim_myadagrad.so" ] || { echo "plugin not installed into $prefix/lib/torc"; exit 1; }
# The plugin links no libtorc (it gets torc's API as a table).
if ldd "$prefix/lib/torc/libtorc_optim_myadagrad.so" | grep -q libtorc; then echo "the plugin links libtorc"; exit 1; fi

# Train with it: by name from the installed plugin directory, then by path.
out=$("$prefix/bin/torc-train" --optim myadagrad --lr 0.5 --steps 200)
line=$(grep -E '^  loss ' <<<"$out")
first=$(awk '{print $2}' <<<"$line") last=$(awk '{print $8}' <<<"$line")
awk -v f="$first" -v l="$last" 'BEGIN { if (!(l < f / 100)) { print "loss did not fall with myadagrad: " f " -> " l; exit 1 } }'
grep -q "myadagrad" <<<"$out"
"$prefix/bin/torc-train" --optim "$tmp/plugin/build/libtorc_optim_myadagrad.so" --steps 5 >/dev/null

# Without write access to torc's plugin directory: install elsewhere, find it via TORC_PLUGIN_PATH
# (the README's route).
"$prefix/bin/torc-optim-new" mine "$tmp/mine" >/dev/null
cmake -S "$tmp/mine" -B "$tmp/mine/build" -DCMAKE_PREFIX_PATH="$prefix" -DTORC_OPTIM_INSTALL_DIR="$tmp/own" >/dev/null
cmake --build "$tmp/mine/build" >/dev/null
cmake --install "$tmp/mine/build" >/dev/null
[ -f "$tmp/own/libtorc_optim_mine.so" ] && [ ! -e "$prefix/lib/torc/libtorc_optim_mine.so" ] || { echo "TORC_OPTIM_INSTALL_DIR was not used"; exit 1; }
if "$prefix/bin/torc-train" --optim mine --steps 1 >/dev/null 2>&1; then echo "found 'mine' without TORC_PLUGIN_PATH"; exit 1; fi
TORC_PLUGIN_PATH="$tmp/own" "$prefix/bin/torc-train" --optim mine --steps 5 >/dev/null

# A find_package(torc) application: one step by hand.
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
#include <math.h>
#include <stdio.h>
#include <torc/torc.h>
int main(void) {
    torc_tensor *p = torc_full(TORC_SHAPE(2), 1.0, TORC_DTYPE_F32), *g = torc_full(TORC_SHAPE(2), 2.0, TORC_DTYPE_F32);
    torc_set_requires_grad(p, true);
    torc_set_grad(p, g);
    torc_optimizer *opt = torc_optimizer_new("myadagrad", 1, &p, "lr=0.1");
    if (!opt || torc_optimizer_step(opt)) { fprintf(stderr, "%s\n", torc_last_error()); return 1; }
    double v;
    torc_scope_push();
    torc_item(torc_select(p, 0, 0), &v);
    torc_scope_pop();
    const float want = 1.0f - (0.1f * 2.0f) / sqrtf(4.0f + 1e-5f);  // the course's formula
    printf("p = %.9g, course formula %.9g\n", v, (double)want);
    torc_optimizer_free(opt);
    torc_release(g);
    torc_release(p);
    return fabs(v - want) <= 1e-7 ? 0 : 1;
}
C
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
"$tmp/app/build/app"
echo "template: scaffolded, built out of tree, installed, found without environment, trained"
