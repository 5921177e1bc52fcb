#!/usr/bin/env bash
# Gradient buckets in data-parallel training: images/s of `purine train --parallel=data` on N
# ranks with every gradient reduced alone (--bucket-kb=0) against the default buckets, per
# model, the same per-rank batch. Each configuration runs `rounds` times, alternating with the
# other, and keeps its best. Buckets pay a reduction's fixed cost (2(N-1) messages per rank and
# their ops) once per bucket instead of once per parameter: they matter most for networks with
# many small parameters and short steps, and more with more ranks.
#
# Usage: tools/bench/buckets.sh [ranks=3] [iters=60] [rounds=3] [models="mlp convnet"]
# Environment: PURINE_BIN (default build/tools/purine).
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks=${1:-3}
iters=${2:-60}
rounds=${3:-3}
models=${4:-mlp convnet}
purine=${PURINE_BIN:-build/tools/purine}
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "error: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The default bucket size, as the CLI's help states it (--helpfull exits non-zero).
default_kb=$({ "$purine" train --helpfull 2>/dev/null || true; } |
  sed -n '/-bucket_kb/,/default:/s/.*default: \([0-9]*\).*/\1/p' | head -1)
[ -n "$default_kb" ] || { echo "error: no --bucket_kb default in $purine's help" >&2; exit 1; }

# run MODEL BUCKET_KB: one training run; appends its images/s to $work/MODEL_BUCKET_KB.
run() {
  local model=$1 kb=$2 log="$work/run.log" summary="$work/run.json"
  rm -f "$summary"
  mpirun --oversubscribe -np "$ranks" "$purine" train --parallel=data --model="$model" \
    --batch=64 --max-iters="$iters" --noevaluate --threads=1 --bucket-kb="$kb" \
    --summary="$summary" >"$log" 2>&1 || { cat "$log" >&2; echo "error: $model --bucket-kb=$kb failed" >&2; exit 1; }
  sed -n 's/.*"images_per_sec": *\([0-9.e+-]*\).*/\1/p' "$summary" >>"$work/${model}_$kb"
}

echo "$ranks ranks x 1 thread, batch 64 per rank, $iters iterations, ring reduction, best of" \
  "$rounds rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "\n%-8s %14s %16s %8s\n" model "alone img/s" "buckets img/s" ratio
for model in $models; do
  for _ in $(seq "$rounds"); do
    run "$model" 0
    run "$model" "$default_kb"
  done
  python3 - "$model" "$work/${model}_0" "$work/${model}_$default_kb" <<'PY'
import sys
model, alone, fused = sys.argv[1], *(max(float(x) for x in open(f).read().split()) for f in sys.argv[2:])
print(f"{model:<8} {alone:14.1f} {fused:16.1f} {fused / alone:7.2f}x")
PY
done
echo "(buckets: --bucket-kb=$default_kb, the default; alone: --bucket-kb=0)"
