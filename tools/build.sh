#!/usr/bin/env bash
# Installs the dependencies (tools/setup.sh) and builds Purine into build/ (Release). Compiles
# through ccache when present (setup installs it), with paths taken relative to this checkout,
# so a rebuild, or a fresh clone elsewhere on the same machine, reuses the objects of files that
# did not change.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
launcher=$(command -v ccache || true)
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" \
  -DCMAKE_CUDA_COMPILER_LAUNCHER="$launcher" >/dev/null
cmake --build build -j"$(nproc)"
