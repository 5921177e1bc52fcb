#!/usr/bin/env bash
# CPU training throughput, Purine against PyTorch (Debian python3-torch with OpenBLAS) in the
# same run: same networks, data, batch, optimizer and thread count. Prints images/s and the
# ratio per model (mlp, convnet, convnet_bn (purine train's default), resnet20 for RESNET_ITERS
# iterations, default 60, and GoogLeNet at 28x28 for GOOGLENET_ITERS iterations, default 40),
# then the machine's FMA peak and the models' share of it. Usage: [OPTIMIZER=sgd|adam] [MODELS="mlp convnet"] tools/bench/cpu_vs_pytorch.sh
# [iterations] [threads] [batch]. DATA=synthetic:CxHxW:CLASSES trains both on random images of that
# size instead of Fashion-MNIST (MODELS="resnet50" DATA=synthetic:3x224x224:1000: ImageNet's).
# Needs a build (tools/build.sh) and PURINE_SETUP_BENCH=1 bash tools/setup.sh for the peer.
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-300}
threads=${2:-2}
batch=${3:-64}
optimizer=${OPTIMIZER:-sgd}
models=${MODELS:-mlp convnet convnet_bn resnet20 googlenet}
data=${DATA:-/usr/share/datasets/fashion-mnist}
purine=build/tools/purine
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null ||
  { echo "error: PyTorch missing; run PURINE_SETUP_BENCH=1 bash tools/setup.sh" >&2; exit 1; }
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" | head -1; }

printf "%-10s %-9s %6s %7s %14s %14s %7s\n" model optimizer batch threads purine_img/s pytorch_img/s ratio
for model in $models; do
  n=$iters
  [ "$model" = googlenet ] && n=${GOOGLENET_ITERS:-40}
  [ "$model" = resnet20 ] && n=${RESNET_ITERS:-60}
  # Alternate the two twice and keep each one's best, so neither gets the quieter moment.
  best_purine=0 best_torch=0
  for round in 1 2; do
    "$purine" train --model="$model" --data="$data" --max-iters="$n" --batch="$batch" \
      --threads="$threads" --optimizer="$optimizer" --noevaluate --summary="$summary" >/dev/null
    p=$(field images_per_sec <"$summary")
    t=$(/usr/bin/python3 tools/bench/pytorch_peer.py --model "$model" --data "$data" --iters "$n" \
      --batch "$batch" --threads "$threads" --optimizer "$optimizer" | field images_per_sec)
    best_purine=$(python3 -c "print(max($best_purine, $p))")
    best_torch=$(python3 -c "print(max($best_torch, $t))")
  done
  ratio=$(python3 -c "print(f'{$best_purine / $best_torch:.2f}')")
  # Whole images/s, or three significant digits below 100 (ResNet-50 at 224x224: 3-5 img/s).
  rate() { python3 -c "v = $1; print(f'{v:.0f}' if v >= 100 else f'{v:.3g}')"; }
  printf "%-10s %-9s %6d %7d %14s %14s %7s\n" "$model" "$optimizer" "$batch" "$threads" \
    "$(rate "$best_purine")" "$(rate "$best_torch")" "${ratio}x"
done

# The same machine's measured FMA peak, and convnet's, resnet20's and GoogLeNet's training FLOP/s
# as a share of it (tools/bench/bench_peak_share.cpp).
echo
build/tools/bench_peak_share --models=convnet,resnet20,googlenet --batch="$batch" --threads="$threads"
