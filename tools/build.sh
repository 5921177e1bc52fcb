#!/usr/bin/env bash
# Installs the dependencies (tools/setup.sh) and builds Purine into build/ (Release).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
