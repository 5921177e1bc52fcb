#!/usr/bin/env bash
# purine simulate on the Purine paper's cluster (issue 24, check (c)): GoogLeNet at batch 128 per
# GPU, workstations of 3 GPUs on 10 Gigabit Ethernet (tools/sim/clusters/paper_titan_10gbe.pbtxt).
#  1. Calibrate: the GPUs' speed is fitted once, on the paper's 1-GPU figure (112.2 img/s) with
#     the paper's layout, and that speed is kept for everything below.
#  2. The paper's layout (a parameter server on rank 0's CPU, one rank per GPU) on 1 to 12 GPUs:
#     prediction beside the paper's figure where the paper gives one, and the error.
#  3. Other layouts on a cluster of the same workstations grown to `max_gpus`: img/s and
#     efficiency (img/s / (GPUs x 112.2)) at each size, and the largest size tried at which each
#     stays at or above 90%. Layouts: ps and ring (one rank per GPU), ring-node (one rank per
#     workstation, its 3 GPUs data-parallel replicas, all reduced by ring), hybrid (one rank per
#     workstation: its 3 GPUs a 3-stage 1F1B pipeline, the workstations data parallel by ring),
#     hybrid-zbh1 (the same under the ZB-H1 schedule), hybrid-v2 (the same with 12 micro-batches
#     and 2 stages per GPU, interleaved), hybrid-zbh1-v2 (interleaved under ZB-H1), pipeline (one
#     rank per GPU, every GPU a stage, 4 micro-batches per stage).
# Simulating a ring over N ranks costs O(N^2) transfers per bucket: 48 GPUs by machine steps
# (what --ring-steps=auto picks on these workstations) take about 2 minutes and 5 GB of memory;
# keep max_gpus at 48 on small machines (the whole script took 4m52s on 2 cores before the
# hybrid-zbh1 row was added, 2026-11-27).
#
# Usage: tools/bench/simulate_paper.sh [max_gpus=48]
#   [layouts="ps ring ring-node hybrid hybrid-zbh1 hybrid-v2 hybrid-zbh1-v2 pipeline"]
# Environment: PURINE_BIN (default build/tools/purine); SIM_FLAGS, flags added to every layout's
# simulation in step 3 (e.g. SIM_FLAGS=--ring-steps=ring).
set -euo pipefail
cd "$(dirname "$0")/../.."
max_gpus=${1:-48}
layouts=${2:-ps ring ring-node hybrid hybrid-zbh1 hybrid-v2 hybrid-zbh1-v2 pipeline}
purine=${PURINE_BIN:-build/tools/purine}
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
paper_cluster=tools/sim/clusters/paper_titan_10gbe.pbtxt
one_gpu=112.2  # the paper's Table 1, GoogLeNet on one GPU
declare -A paper=([1]=112.2 [12]=1383.7)  # the figures of Table 1 this project has on record

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The paper's GPUs launched op by op: no CUDA graphs.
model=(--model=googlenet --data=synthetic:3x224x224:1000 --classes=1000 --nocuda-graph)

# simulate CLUSTER ARGS...: the simulated img/s (and the run's output in $work/out).
simulate() {
  local cluster=$1
  shift
  "$purine" simulate --cluster="$cluster" "${model[@]}" "$@" >"$work/out" 2>&1 ||
    { cat "$work/out" >&2; exit 1; }
  sed -n 's/^  step [0-9.]* ms, \([0-9.]*\) img\/s.*/\1/p' "$work/out" | head -1
}

# 1. The fitted speed factor, applied to the cluster file's GPU peak and bandwidth (what
# --fit-images-per-second scales), the workstations then counted `nodes` times.
simulate "$paper_cluster" --batch=128 --device=0 --parallel=data --reduce=ps \
  --fit-images-per-second="$one_gpu" >/dev/null
factor=$(sed -n 's/^fitted: the cluster.s GPU speeds x\([0-9.e+-]*\) .*/\1/p' "$work/out")
echo "fitted on the paper's 1-GPU figure ($one_gpu img/s, --reduce=ps): GPU speeds x$factor"
cluster_of() {  # cluster_of NODES: the paper's workstations, NODES of them, at the fitted speed
  awk -v k="$factor" -v nodes="$1" '
    /^ *count:/ { sub(/count: *[0-9]+/, "count: " nodes) }
    /^ *gpu *\{/ {
      for (i = 1; i <= NF; ++i)
        if ($i == "peak_gflops:" || $i == "memory_gigabytes_per_second:") $(i + 1) = $(i + 1) * k
    }
    { print }' "$paper_cluster" >"$work/cluster_$1.pbtxt"
  echo "$work/cluster_$1.pbtxt"
}

# 2. The paper's layout against the paper.
echo
echo "the paper's layout: --parallel=data --reduce=ps (server on rank 0's CPU), 1 rank per GPU"
printf "%5s %12s %12s %8s\n" GPUs "predicted" "paper" "error"
paper_nodes=$(cluster_of 4)
for n in 1 2 3 6 9 12; do
  ips=$(simulate "$paper_nodes" --batch=128 --device=0 --parallel=data --reduce=ps --ranks="$n")
  if [ -n "${paper[$n]:-}" ]; then
    printf "%5d %12.1f %12.1f %+7.1f%%\n" "$n" "$ips" "${paper[$n]}" \
      "$(echo "100 * ($ips - ${paper[$n]}) / ${paper[$n]}" | bc -l)"
  else
    printf "%5d %12.1f %12s %8s\n" "$n" "$ips" "-" "-"
  fi
done

# 3. Each layout as the cluster grows.
sizes=()
for n in 1 2 3 6 12 24 48 96 192; do [ "$n" -le "$max_gpus" ] && sizes+=("$n"); done
big=$(cluster_of $(((max_gpus + 2) / 3)))
# layout_args LAYOUT GPUS: the flags of LAYOUT on GPUS GPUs, or nothing where it does not fit.
layout_args() {
  case $1 in
    ps | ring) echo "--batch=128 --device=0 --parallel=data --reduce=$1 --ranks=$2" ;;
    ring-node)
      [ $(($2 % 3)) -eq 0 ] || return 0
      echo "--batch=384 --devices=0,1,2 --parallel=data --reduce=ring --ranks=$(($2 / 3))" ;;
    hybrid | hybrid-zbh1 | hybrid-v2 | hybrid-zbh1-v2)
      [ $(($2 % 3)) -eq 0 ] || return 0
      local schedule=(--micro-batches=12 --schedule=1f1b)
      [ "$1" != hybrid-zbh1 ] || schedule=(--micro-batches=12 --schedule=zbh1)
      [ "$1" != hybrid-v2 ] || schedule=(--micro-batches=12 --virtual-stages=2)
      [ "$1" != hybrid-zbh1-v2 ] || schedule=(--micro-batches=12 --schedule=zbh1 --virtual-stages=2)
      echo "--batch=384 --devices=0,1,2 --parallel=hybrid --stages=3 ${schedule[*]} \
--ranks=$(($2 / 3))" ;;
    pipeline)
      [ "$2" -le 13 ] || return 0  # a stage per GPU: GoogLeNet has 13 layers with parameters
      echo "--batch=$((128 * $2)) --devices=0 --parallel=pipeline --stages=$2 \
--micro-batches=$((4 * $2)) --ranks=$2" ;;
  esac
}
echo
echo "img/s (efficiency against GPUs x $one_gpu) on the paper's workstations, up to $max_gpus GPUs"
for layout in $layouts; do
  largest=0 below=0
  line=$(printf "%-9s" "$layout")
  for n in "${sizes[@]}"; do
    args=$(layout_args "$layout" "$n")
    [ -n "$args" ] || continue
    # shellcheck disable=SC2086  # the flags are words
    ips=$(simulate "$big" $args ${SIM_FLAGS:-})
    eff=$(echo "100 * $ips / ($n * $one_gpu)" | bc -l)
    line+=$(printf "  %d GPUs %.0f (%.0f%%)" "$n" "$ips" "$eff")
    if [ "$(echo "$eff >= 90" | bc)" = 1 ]; then
      [ "$below" = 1 ] || largest=$n
    else
      below=1
    fi
  done
  echo "$line"
  echo "          the largest size before the first one below 90%: $largest GPUs"
done
