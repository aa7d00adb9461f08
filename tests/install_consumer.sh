#!/usr/bin/env bash
# tests/install_consumer.sh — an installed torc is usable from any prefix: cmake --install into a
# temporary prefix, move the tree elsewhere (so nothing can depend on the configure-time or
# install-time path), then build and run a tiny consumer through pkg-config and through CMake's
# find_package(torc).
set -euo pipefail
build=$1 sanitize=${2:-OFF}
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
