#!/usr/bin/env bash
# GPU training throughput, Purine against PyTorch on the same GPU in the same run: mlp and
# convnet (batch 64, synthetic 1x28x28 data), GoogLeNet (inception v1) and ResNet-50 (batch 128,
# synthetic 3x224x224 data) on one GPU, in FP32 and then with TF32 on both sides (`--math=tf32`, PyTorch's
# allow_tf32). PyTorch runs three ways: eager as it is, with cudnn.benchmark, and with its step
# captured in a CUDA graph (tools/bench/pytorch_gpu_peer.py); Purine three ways: launching op by
# op (--nocuda-graph), as it is, its iterations replayed from CUDA graphs, and with --run-ahead
# (each replay launched while the one before still runs). Each run is made twice, alternating,
# keeping the best; the ratios are Purine's best way over each PyTorch setting, then
# --cuda-graph over op by op and --run-ahead over --cuda-graph. Then, from a trace of Purine's
# runs op by op (FP32 and TF32; GoogLeNet FP32 only), where an iteration's time goes
# (tools/bench/trace_gaps.py: the host's gap between iterations, each stream's busy share, the
# longest ops), beside PyTorch's kernels per step in its CUDA graph for mlp and convnet
# (pytorch_gpu_peer.py --kernels), and mlp on this machine's CPU (when mlp is among MODELS).
# Usage: [MODELS="mlp convnet googlenet resnet50"] tools/bench/gpu_vs_pytorch.sh [iters=60]
#   [batch of googlenet and resnet50=128]
# Environment: PURINE_BIN (default build/tools/purine), PYTHON (default python3, with a CUDA
# PyTorch); to fit a short lease: ROUNDS (default 2), MATHS (default "fp32 tf32"), TORCH_MODES
# (default "eager benchmark graph"), RUN_TIMEOUT (seconds per run, default 600; a run past it
# counts as failed), KEEP (a folder to keep the traces in).
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-60}
gbatch=${2:-128}
purine=${PURINE_BIN:-build/tools/purine}
python=${PYTHON:-python3}
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
rounds=${ROUNDS:-2}
maths=${MATHS:-fp32 tf32}
modes=" ${TORCH_MODES:-eager benchmark graph} "
limit=${RUN_TIMEOUT:-600}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" | head -1; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
specs=()
for model in ${MODELS:-mlp convnet googlenet resnet50}; do
  case $model in
    mlp | convnet) specs+=("$model 64 1x28x28:10") ;;
    googlenet | resnet50) specs+=("$model $gbatch 3x224x224:1000") ;;
    *)
      echo "error: no GPU benchmark of model '$model' (mlp, convnet, googlenet, resnet50)" >&2
      exit 1
      ;;
  esac
done

purine_run() {  # MODEL BATCH DATA MATH [FLAGS...]: images/s
  local model=$1 batch=$2 data=$3 math=$4
  shift 4
  timeout "$limit" "$purine" train --model="$model" --device=0 --data="synthetic:$data" --batch="$batch" \
    --max-iters="$iters" --noevaluate --math="$math" --summary="$work/summary.json" "$@" \
    >"$work/log" 2>&1 || { cat "$work/log" >&2; echo "error: purine $model failed" >&2; return 1; }
  field images_per_sec <"$work/summary.json"
}

torch_run() {  # MODEL BATCH MODE MATH: images/s, or 0 when PyTorch fails or is not asked for
  [[ $modes == *" $3 "* ]] || { echo 0; return; }
  local flags=(--model "$1" --batch "$2" --iters "$iters" --mode "$3")
  [ "$4" = tf32 ] && flags+=(--tf32)
  timeout "$limit" "$python" tools/bench/pytorch_gpu_peer.py "${flags[@]}" 2>"$work/torch.err" |
    field images_per_sec || { tail -3 "$work/torch.err" >&2; echo 0; }
}

printf "%-9s %5s %4s %11s %11s %11s %11s %11s %11s %7s %7s %7s %7s %7s\n" model batch math \
  purine purine_cg purine_ra torch_eager torch_bench torch_graph /eager /bench /graph cg/op ra/cg
for math in $maths; do
  for spec in "${specs[@]}"; do
    read -r model batch data <<<"$spec"
    p=0 cg=0 ra=0 eager=0 bench=0 graph=0
    for ((round = 0; round < rounds; ++round)); do
      p=$(best "$p" "$(purine_run "$model" "$batch" "$data" "$math" --nocuda-graph || echo 0)")
      cg=$(best "$cg" "$(purine_run "$model" "$batch" "$data" "$math" || echo 0)")
      sed -n 's/^CUDA graphs /  CUDA graphs /p' "$work/log" >"$work/cg_state"
      ra=$(best "$ra" "$(purine_run "$model" "$batch" "$data" "$math" --run-ahead || echo 0)")
      sed -n 's/^CUDA graphs /  --run-ahead: CUDA graphs /p' "$work/log" >>"$work/cg_state"
      eager=$(best "$eager" "$(torch_run "$model" "$batch" eager "$math")")
      bench=$(best "$bench" "$(torch_run "$model" "$batch" benchmark "$math")")
      graph=$(best "$graph" "$(torch_run "$model" "$batch" graph "$math")")
    done
    top=$(best "$(best "$p" "$cg")" "$ra")
    printf "%-9s %5d %4s %11.0f %11.0f %11.0f %11.0f %11.0f %11.0f %7s %7s %7s %7s %7s\n" "$model" \
      "$batch" "$math" "$p" "$cg" "$ra" "$eager" "$bench" "$graph" "$(ratio "$top" "$eager")" \
      "$(ratio "$top" "$bench")" "$(ratio "$top" "$graph")" "$(ratio "$cg" "$p")" \
      "$(ratio "$ra" "$cg")"
    cat "$work/cg_state"
  done
done

torch_kernels() {  # MODEL BATCH MATH: PyTorch's GPU work per step in its CUDA graph
  local flags=(--model "$1" --batch "$2" --iters 30 --mode graph --kernels 20)
  [ "$3" = tf32 ] && flags+=(--tf32)
  echo "  PyTorch, its step in a CUDA graph:"
  timeout "$limit" "$python" tools/bench/pytorch_gpu_peer.py "${flags[@]}" 2>&1 | grep -v '^{' |
    sed 's/^/    /' || true
}

echo
echo "Where Purine's iteration goes, op by op (--nocuda-graph; trace of $iters iterations), and"
echo "for the small models PyTorch's kernels (torch.profiler): kernel time or launch gaps?"
for math in $maths; do
  for spec in "${specs[@]}"; do
    read -r model batch data <<<"$spec"
    # The large models' kernels are long: FP32 only.
    case $model in googlenet | resnet50) [ "$math" != fp32 ] && continue ;; esac
    purine_run "$model" "$batch" "$data" "$math" --nocuda-graph --trace="$work/trace.json" \
      >/dev/null || continue
    echo "$model, batch $batch, $math:"
    "$python" tools/bench/trace_gaps.py "$work/trace.json" --skip=10 --top=8 | sed 's/^/  /'
    [ -z "${KEEP:-}" ] || cp "$work/trace.json" "$KEEP/trace-$model-$math.json"
    case $model in mlp | convnet) torch_kernels "$model" "$batch" "$math" ;; esac
  done
done

[[ " ${specs[*]} " == *" mlp "* ]] || exit 0
echo
cpu=$("$purine" train --model=mlp --batch=64 --data=synthetic:1x28x28:10 \
  --max-iters=$((iters * 20)) --noevaluate --threads="$(nproc)" --summary="$work/summary.json" \
  >/dev/null 2>&1 && field images_per_sec <"$work/summary.json")
gpu=$(purine_run mlp 64 1x28x28:10 fp32)
echo "mlp, batch 64: GPU $gpu img/s, this machine's CPU ($(nproc) threads) $cpu img/s: $(ratio "$gpu" "$cpu")"
