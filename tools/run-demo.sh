#!/usr/bin/env bash
# tools/run-demo.sh — README's first command: install what is missing, build (Release), run
# the main job: torc-train, the course's Cruncher training loop on the default backend.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DTORC_BUILD_TESTS=OFF >/dev/null
cmake --build build-release -j"$(nproc)"
exec ./build-release/bin/torc-train "$@"
