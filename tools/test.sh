#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest; GPU tests skip without a device).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
