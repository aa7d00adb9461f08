#!/usr/bin/env bash
# tools/install-deps.sh — installs what torc needs on Debian 12 (run as root), only what is
# missing: compiler, CMake, Check, oneDNN, clang with libFuzzer (the fuzz harnesses), and the
# small Python packages the tests use.
# The CUDA toolkit is optional: when /usr/local/cuda exists the CUDA backend is built too.
set -euo pipefail
pkgs=(build-essential cmake pkg-config check libdnnl-dev clang libclang-rt-14-dev python3 python3-pip valgrind)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Python: safetensors and numpy for the checkpoint compatibility tests (never torch).
if ! python3 -c 'import safetensors, numpy' 2>/dev/null; then
  python3 -m pip install -q safetensors numpy 2>/dev/null ||
    python3 -m pip install -q --break-system-packages safetensors numpy
fi
