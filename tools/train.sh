#!/usr/bin/env bash
# Sets up, builds and trains the default model (convnet_bn) on Fashion-MNIST. Extra arguments go
# to `purine train`, e.g. tools/train.sh --model=mlp --epochs=1.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/build.sh
exec build/tools/purine train "$@"
