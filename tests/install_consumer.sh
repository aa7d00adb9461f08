#!/usr/bin/env bash
# tests/install_consumer.sh — an installed torc is usable from any prefix: cmake --install into a
# temporary prefix, move the tree elsewhere (so nothing can depend on the configure-time or
# install-time path), then build and run a tiny consumer through pkg-config and through CMake's
# find_package(torc), and build the README's C quickstart with the README's own pkg-config
# command and run it (a loader that cannot find libtorc.so.0 fails it).
# Usage: install_consumer.sh BUILD [SANITIZE] [README]
set -euo pipefail
build=$1 sanitize=${2:-OFF} readme=${3:-$(dirname "$0")/../README.md}
tmp=$(mktemp -d "${TORC_BUILD_DIR:-/tmp}/consumer_test_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset TORC_PLUGIN_PATH TORC_BACKEND PKG_CONFIG_PATH
# A sanitized libtorc needs its users built the same way (the ASan runtime must come first).
flags=
case $sanitize in ON|on|1|TRUE|true) flags="-fsanitize=address,undefined" ;; esac

cmake --install "$build" --prefix "$tmp/first" >/dev/null
mv "$tmp/first" "$tmp/moved"
prefix=$tmp/moved
pc=$(find "$prefix" -name torc.pc)
[ -n "$pc" ] || { echo "no torc.pc under $prefix"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")

cat >"$tmp/main.c" <<'C'
#include <stdio.h>
#include <torc/torc.h>
int main(void) {
    torc_tensor *a = torc_arange(0, 4, 1, TORC_DTYPE_F32);
    torc_tensor *s = a ? torc_sum(a, TORC_ALL_DIMS, false) : NULL;
    double v = -1;
    if (!s || torc_item(s, &v)) { fprintf(stderr, "%s\n", torc_last_error()); return 1; }
    printf("sum = %g\n", v);
    torc_release(s);
    torc_release(a);
    return v == 6.0 ? 0 : 1;
}
C

# 1. pkg-config: the flags must point into the moved prefix.
cflags=$(pkg-config --cflags torc) libs=$(pkg-config --libs torc) libdir=$(pkg-config --variable=libdir torc)
case "$cflags" in *"$prefix"*) ;; *) echo "pkg-config --cflags torc gives '$cflags', not a path under $prefix"; exit 1 ;; esac
[ -f "$libdir/libtorc.so" ] || { echo "pkg-config's libdir '$libdir' has no libtorc.so"; exit 1; }
cc $flags "$tmp/main.c" $cflags $libs -Wl,-rpath,"$libdir" -o "$tmp/app_pc"
"$tmp/app_pc"

# 1b. The README's way, verbatim: its C quickstart built by its `cc app.c $(pkg-config ...)` line
# (P replaced by the prefix, the compiler given the sanitizer flags), then run with no
# LD_LIBRARY_PATH. torc.pc gives no rpath (see core/torc.pc.in): the README's command must.
case "$(pkg-config --libs torc)" in *rpath*) echo "torc.pc now carries an rpath: update README.md's command and this test"; exit 1 ;; esac
mkdir -p "$tmp/readme"
awk '/^```c$/ { on = 1; next } on && /^```/ { exit } on' "$readme" >"$tmp/readme/app.c"
grep -q "int main" "$tmp/readme/app.c" || { echo "no C quickstart in $readme"; exit 1; }
# The shell block right after the C block: `export PKG_CONFIG_PATH=P/...` and `cc app.c ...`.
awk '/^```c$/ { c = 1 } c && /^```sh$/ { on = 1; next } on && /^```/ { exit } on' "$readme" >"$tmp/readme/build.sh"
grep -q '^export PKG_CONFIG_PATH=P/' "$tmp/readme/build.sh" && grep -q '^cc app.c ' "$tmp/readme/build.sh" ||
  { echo "README's build command is not 'export PKG_CONFIG_PATH=P/... / cc app.c ...':"; cat "$tmp/readme/build.sh"; exit 1; }
# (P/lib/pkgconfig is where torc.pc lies on Debian; GNUInstallDirs picks lib64 on some systems.)
# (Only a P/ that starts a word: the paths put in may hold "P/" themselves, as a mktemp name ending in P.)
sed -i -E -e "s#(^|[ =(])P/lib/pkgconfig#\1$(dirname "$pc")#" -e "s#(^|[ =(])P/#\1$prefix/#g" -e "s#^cc #cc $flags #" \
  "$tmp/readme/build.sh"
(cd "$tmp/readme" && unset LD_LIBRARY_PATH PKG_CONFIG_PATH && bash -e build.sh && ./app >/dev/null) ||
  { echo "the README's pkg-config command did not give a program that runs:"; cat "$tmp/readme/build.sh"; exit 1; }

# 2. find_package(torc) from the same prefix.
mkdir -p "$tmp/cm"
cp "$tmp/main.c" "$tmp/cm/main.c"
cat >"$tmp/cm/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(consumer LANGUAGES C)
find_package(torc REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE torc::torc)
CM
CFLAGS=$flags LDFLAGS=$flags cmake -S "$tmp/cm" -B "$tmp/cm/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/cm/build" >/dev/null
"$tmp/cm/build/consumer"
echo "consumer: built and ran through pkg-config and find_package from a moved prefix"
