#!/usr/bin/env bash
# tools/build-matrix.sh [DIR] — configures and builds torc, tests included, in every CMake build
# type (Debug, Release, RelWithDebInfo, MinSizeRel) under gcc and under clang, warnings as errors
# (TORC_WERROR=ON), each in DIR/<compiler>-<type> (default /tmp/torc-build-matrix). The CUDA
# backend builds in the gcc Release cell only (nvcc's host compiler is gcc; it takes minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/torc-build-matrix}
jobs=$(nproc)
for cc in gcc clang; do
  command -v "$cc" >/dev/null || { echo "build-matrix: $cc not found, skipped"; continue; }
  for type in Debug Release RelWithDebInfo MinSizeRel; do
    cuda=OFF
    [ "$cc" = gcc ] && [ "$type" = Release ] && cuda=ON
    dir="$out/$cc-$type"
    echo "== $cc $type (CUDA $cuda)"
    CC=$cc cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=$type -DTORC_WERROR=ON -DTORC_WITH_CUDA=$cuda >/dev/null
    cmake --build "$dir" -j"$jobs" >"$dir/build.log" 2>&1 || { tail -n 30 "$dir/build.log"; echo "build-matrix: $cc $type FAILED"; exit 1; }
  done
done
echo "build-matrix: every build type built under gcc and clang"
