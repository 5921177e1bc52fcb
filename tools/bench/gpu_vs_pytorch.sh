#!/usr/bin/env bash
# GPU training throughput, Purine against PyTorch on the same GPU in the same run: convnet on
# synthetic 1x28x28 data and GoogLeNet (inception v1, batch 128) on synthetic 3x224x224 data,
# one GPU, FP32 (TF32 off in both). Prints images/s and the ratio per model; the target is at
# least 1.0x. Each runs twice, alternating, and keeps its best.
# Usage: tools/bench/gpu_vs_pytorch.sh [iters=60] [googlenet batch=128]
# Environment: PURINE_BIN (default build/tools/purine), PYTHON (default python3, with a CUDA
# PyTorch).
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-60}
gbatch=${2:-128}
purine=${PURINE_BIN:-build/tools/purine}
python=${PYTHON:-python3}
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" | head -1; }

printf "%-10s %6s %14s %14s %7s\n" model batch purine_img/s pytorch_img/s ratio
for spec in "convnet 64 1x28x28:10" "googlenet $gbatch 3x224x224:1000"; do
  read -r model batch data <<<"$spec"
  best_purine=0 best_torch=0
  for round in 1 2; do
    "$purine" train --model="$model" --device=0 --data="synthetic:$data" --batch="$batch" \
      --max-iters="$iters" --noevaluate --summary="$summary" >/dev/null
    p=$(field images_per_sec <"$summary")
    t=$("$python" tools/bench/pytorch_gpu_peer.py --model "$model" --batch "$batch" \
      --iters "$iters" | field images_per_sec)
    best_purine=$(awk -v a="$best_purine" -v b="$p" 'BEGIN { print (a > b ? a : b) }')
    best_torch=$(awk -v a="$best_torch" -v b="$t" 'BEGIN { print (a > b ? a : b) }')
  done
  ratio=$(awk -v a="$best_purine" -v b="$best_torch" 'BEGIN { printf "%.2f", a / b }')
  printf "%-10s %6d %14.0f %14.0f %7s\n" "$model" "$batch" "$best_purine" "$best_torch" "${ratio}x"
done
