#!/usr/bin/env bash
# Installs the Debian packages Purine needs to build, test, train and benchmark.
# Idempotent: packages already present are left alone; safe to run repeatedly.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  ccache  # tools/build.sh: rebuilds and fresh clones reuse the objects of unchanged files
  libgoogle-glog-dev libgflags-dev
  libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin
  libopenblas-dev libopenblas0-pthread
  libdnnl-dev
  libonnx-dev python3-onnx  # purine export --onnx, and its test (tools/onnx_check.py)
  catch2
  libtbb-dev
  zlib1g-dev
  libpng-dev  # purine predict: PNG images (--image, --write-samples), required by CMake
  dataset-fashion-mnist
  graphviz  # purine graph --format=svg|png
  clang libclang-rt-14-dev libomp-14-dev  # tools/check_threads.sh: -Wthread-safety, TSan
)
# The PyTorch peer is only needed by the CPU benchmark: PURINE_SETUP_BENCH=1 adds it.
if [ "${PURINE_SETUP_BENCH:-0}" = "1" ]; then
  packages+=(python3-torch python3-numpy)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
