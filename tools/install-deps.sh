#!/usr/bin/env bash
# tools/install-deps.sh — installs what torc needs on Debian 12 (run as root), only what is
# missing: compilers, CMake, Check, oneDNN, OpenBLAS and BLIS, Open MPI (the mpi comm plugin and
# the "mpi" tests; iproute2 for their two-namespace network test), and the small Python packages
# the tests use. The CUDA toolkit is optional: when /usr/local/cuda exists the CUDA backend is built too.
set -euo pipefail
# clang + libclang-rt-14-dev (libFuzzer, sanitizer runtimes): the fuzz smoke (tests/fuzz).
# libopenblas0-openmp: the onednn backend's f32 GEMM on AVX2-only CPUs (dlopen'ed, never linked;
# the OpenMP build, which shares libgomp's threads with oneDNN); libblis4-openmp: a torc-bench --peer
# reference. Both come with runtime kernel dispatch (Haswell/Zen/SkylakeX...).
pkgs=(build-essential cmake pkg-config check libdnnl-dev libopenmpi-dev openmpi-bin iproute2 python3 python3-pip valgrind
      clang libclang-rt-14-dev libopenblas0-openmp libblis4-openmp)
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
