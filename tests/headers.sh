#!/usr/bin/env bash
# tests/headers.sh INCLUDE_DIR CC [CXX ...] — every public header (INCLUDE_DIR/torc/*.h) compiles
# alone as C11 with CC and as C++11 with each CXX (plugins are often C++: NCCL's, vendors'), with
# -Wall -Wextra -pedantic -Werror; then tests/headers_use.cpp, which expands the headers' macros a
# C++ plugin uses, compiles with each CXX. A CXX given as "" (not found) is reported and skipped;
# with none at all the test is skipped (exit 77). ctest "headers" (tests/headers.cmake).
set -uo pipefail
inc=$1 cc=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 cxxs=()
for cxx in "$@"; do [ -n "$cxx" ] && cxxs+=("$cxx"); done
compile() {  # compile COMPILER FLAGS... FILE: on failure, says so with the compiler's output
  if ! out=$("$@" -fsyntax-only -Wall -Wextra -pedantic -Werror -I "$inc" 2>&1); then
    echo "FAILED: $*"
    echo "$out" | head -20
    fail=1
  fi
}
for h in "$inc"/torc/*.h; do
  name=$(basename "$h")
  printf '#include <torc/%s>\n' "$name" >"$tmp/$name.c"
  printf '#include <torc/%s>\n' "$name" >"$tmp/$name.cpp"
  compile "$cc" -std=c11 "$tmp/$name.c"
  for cxx in "${cxxs[@]}"; do compile "$cxx" -std=c++11 "$tmp/$name.cpp"; done
done
for cxx in "${cxxs[@]}"; do compile "$cxx" -std=c++11 "$here/headers_use.cpp"; done
n=$(ls "$inc"/torc/*.h | wc -l)
[ "$fail" = 0 ] || exit 1
if [ ${#cxxs[@]} -eq 0 ]; then
  echo "no C++ compiler found (g++, clang++): only C was checked"
  exit 77
fi
echo "$n headers compile as C11 ($cc) and C++11 (${cxxs[*]}); headers_use.cpp compiles"
