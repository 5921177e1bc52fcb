#!/usr/bin/env bash
# Test accuracy after training on the GPU against training on this machine's CPU: the model
# with the default recipe on Fashion-MNIST (standardized input, lr 0.01 poly to 0 at the last
# iteration, batch 64) for `iters` iterations and the same seeds, each seed once on the CPU and
# once on GPU 0, then both means and their difference.
# The GPU's convolutions and matrix products round differently from the CPU's, so the two runs
# of a seed part after the first iterations; what should agree is the band of accuracies over
# seeds, not each figure. Usage:
#   tools/bench/gpu_accuracy.sh [model=googlenet_small] [iters=400] [seeds="1 2"] [threads=cores]
# Environment: PURINE_BIN (default build/tools/purine), FLAGS (added to every run).
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-googlenet_small}
iters=${2:-400}
seeds=${3:-1 2}
threads=${4:-$(nproc)}
purine=${PURINE_BIN:-build/tools/purine}
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
if "$purine" devices | grep -q ': 0 GPUs'; then
  echo "error: no GPU here ($("$purine" devices)); this benchmark needs GPU 0" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" | head -1; }

run() {  # SEED WHERE...: "accuracy seconds"
  local seed=$1
  shift
  # shellcheck disable=SC2086
  "$purine" train --model="$model" --max-iters="$iters" --seed="$seed" --threads="$threads" \
    --summary="$work/summary.json" ${FLAGS:-} "$@" >"$work/log" 2>&1 ||
    { echo "error: purine train --model=$model $* (seed $seed) failed:" >&2; tail -5 "$work/log" >&2; exit 1; }
  echo "$(field test_accuracy <"$work/summary.json") $(field wall_seconds <"$work/summary.json")"
}

echo "$model, $iters iterations, default recipe, Fashion-MNIST; CPU with $threads threads, GPU 0"
printf '%-6s %-10s %-10s %-10s %-10s\n' seed cpu gpu "cpu s" "gpu s"
cpu_all="" gpu_all=""
for seed in $seeds; do
  read -r cpu cpu_s < <(run "$seed")
  read -r gpu gpu_s < <(run "$seed" --device=0)
  printf '%-6s %-10s %-10s %-10.1f %-10.1f\n' "$seed" "$cpu" "$gpu" "$cpu_s" "$gpu_s"
  cpu_all="$cpu_all $cpu" gpu_all="$gpu_all $gpu"
done
awk -v c="$cpu_all" -v g="$gpu_all" 'BEGIN {
  n = split(c, cs, " "); split(g, gs, " ")
  for (i = 1; i <= n; ++i) { sc += cs[i]; sg += gs[i]
    lo_c = (i == 1 || cs[i] < lo_c) ? cs[i] : lo_c; hi_c = (i == 1 || cs[i] > hi_c) ? cs[i] : hi_c }
  printf "mean: cpu %.4f (%.4f to %.4f), gpu %.4f; gpu - cpu %+.4f\n", sc / n, lo_c, hi_c, sg / n, (sg - sc) / n
}'
