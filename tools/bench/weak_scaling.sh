#!/usr/bin/env bash
# Weak scaling of data-parallel `purine train` against the machine's own ceiling, in one run.
# For each N ranks (1 thread each, `batch` images per rank):
#   ceiling  N independent one-rank runs at once, run k pinned to core k, no communication:
#            their images/s added up (what N cores give with nothing to exchange);
#   layouts  mpirun -np N --bind-to core purine train --parallel=data --reduce=R, for each R
#            (R:S adds --ring-steps=S: "ring:ring" is the ring reduction by the ring's steps);
# and prints each layout's images/s with its share of the ceiling (the issue's target: at least
# 90% at 8 ranks with ring), then, with 1 among the ranks, each N's ceiling per rank over one
# rank's: "rank speed ... 2:0.94,4:0.96" (purine simulate --rank-speed). N larger than the cores this process may use is skipped. Each
# configuration runs `rounds` times, alternating, keeping its best.
#
# Usage: tools/bench/weak_scaling.sh [ranks="1 2 4 8"] [iters=80] [rounds=2] [model=convnet]
#   [batch=64] [reduces="ring ring:ring mpi"]
# Environment: PURINE_BIN (default build/tools/purine), PURINE_MPIRUN_ARGS (extra mpirun args),
# CORES_PER_RANK (default 1: every run, ceiling and layouts alike, gets that many cores of its
# own; with 2 a rank's communication thread need not share its core with the computing one),
# TRAIN_FLAGS (more flags for every purine train, e.g. --bucket-kb=4096), TRACE_DIR (after the
# table, one traced run of each layout of more than one rank, its ranks' files merged into one,
# REDUCE-N.json, where merge_traces is beside PURINE_BIN, and its exposed_comm.py table with the
# tasks that wait longest, --gaps).
set -euo pipefail
cd "$(dirname "$0")/../.."
ranks_list=${1:-1 2 4 8}
iters=${2:-80}
rounds=${3:-2}
model=${4:-convnet}
batch=${5:-64}
reduces=${6:-ring ring:ring mpi}
purine=${PURINE_BIN:-build/tools/purine}
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "error: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
command -v taskset >/dev/null || { echo "error: taskset not found (apt-get install util-linux)" >&2; exit 1; }
cores=$(nproc)
per_rank=${CORES_PER_RANK:-1}
mpirun_args=(--bind-to core)
[ "$per_rank" = 1 ] || mpirun_args+=(--map-by "slot:PE=$per_rank")
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# shellcheck disable=SC2206  # word splitting of the extra arguments is intended
[ -n "${PURINE_MPIRUN_ARGS:-}" ] && mpirun_args+=(${PURINE_MPIRUN_ARGS})
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(train --model="$model" --batch="$batch" --threads=1 --max-iters="$iters" --noevaluate)
# shellcheck disable=SC2206  # word splitting of the extra flags is intended
[ -n "${TRAIN_FLAGS:-}" ] && common+=(${TRAIN_FLAGS})
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }
best() { python3 -c "import sys; print(max(float(x) for x in sys.stdin.read().split()))" <"$1"; }

cores_of() { echo "$(($1 * per_rank))-$((($1 + 1) * per_rank - 1))"; }  # run K's cores

ceiling() {  # N: appends the summed images/s of N pinned independent runs to $work/ceiling_N
  local n=$1 pids=() total=0
  for k in $(seq 0 $((n - 1))); do
    taskset -c "$(cores_of "$k")" "$purine" "${common[@]}" --summary="$work/alone_$k.json" \
      >"$work/alone_$k.log" 2>&1 &
    pids+=($!)
  done
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || { cat "$work/alone_$k.log" >&2; echo "error: run $k of $n failed" >&2; exit 1; }
    total=$(python3 -c "print($total + $(field images_per_sec "$work/alone_$k.json"))")
  done
  echo "$total" >>"$work/ceiling_$n"
}

layout() {  # N REDUCE[:STEPS] [FLAGS...]: appends the images/s of N data-parallel ranks to $work/R_N
  local n=$1 name=$2 reduce=${2%%:*} steps=()
  [ "$name" = "$reduce" ] || steps=(--ring-steps="${name#*:}")
  shift 2
  if [ "$n" = 1 ]; then
    taskset -c "$(cores_of 0)" "$purine" "${common[@]}" --summary="$work/dp.json" "$@" \
      >"$work/dp.log" 2>&1
  else
    mpirun "${mpirun_args[@]}" -np "$n" "$purine" "${common[@]}" --parallel=data \
      --reduce="$reduce" "${steps[@]}" --summary="$work/dp.json" "$@" >"$work/dp.log" 2>&1
  fi || { cat "$work/dp.log" >&2; echo "error: $n ranks, $name failed" >&2; exit 1; }
  field images_per_sec "$work/dp.json" >>"$work/${name}_$n"
}

echo "model $model, batch $batch per rank, 1 thread and $per_rank core(s) per rank, $iters" \
  "iterations, best of $rounds; $cores cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%5s %10s" ranks ceiling
for r in $reduces; do printf " %10s %7s" "$r" "share"; done
echo
for n in $ranks_list; do
  if [ $((n * per_rank)) -gt "$cores" ]; then
    echo "$n ranks: skipped ($cores cores here)"
    continue
  fi
  for _ in $(seq "$rounds"); do
    ceiling "$n"
    for r in $reduces; do layout "$n" "$r"; done
  done
  c=$(best "$work/ceiling_$n")
  printf "%5d %10.1f" "$n" "$c"
  for r in $reduces; do
    v=$(best "$work/${r}_$n")
    printf " %10.1f %6.1f%%" "$v" "$(python3 -c "print(100 * $v / $c)")"
  done
  echo
done
echo "(images/s, global; share = layout / ceiling; target: ring at least 90% at 8 ranks)"
# A rank's compute speed beside N-1 others, relative to one alone: what purine simulate's
# --rank-speed (a cluster node's rank_speed) takes.
if [ -s "$work/ceiling_1" ]; then
  speeds=""
  for n in $ranks_list; do
    [ "$n" -gt 1 ] && [ -s "$work/ceiling_$n" ] || continue
    speeds="$speeds${speeds:+,}$n:$(python3 -c "print(f'{$(best "$work/ceiling_$n") / $n / $(best "$work/ceiling_1"):.3f}')")"
  done
  [ -z "$speeds" ] || echo "rank speed (ceiling per rank / one rank alone): $speeds"
fi
if [ -n "${TRACE_DIR:-}" ]; then
  mkdir -p "$TRACE_DIR"
  for n in $ranks_list; do
    [ "$n" -gt 1 ] && [ $((n * per_rank)) -le "$cores" ] || continue
    for r in $reduces; do
      trace="$TRACE_DIR/${r//:/_}-$n.json"  # a file name without ':' (ring:ring)
      layout "$n" "$r" --trace="$trace"
      echo "traced: $n ranks, --reduce=$r, $(tail -1 "$work/${r}_$n") img/s"
      merge="$(dirname "$purine")/merge_traces"
      if [ -x "$merge" ] && "$merge" "$trace" "$trace".rank* >/dev/null; then
        rm -f "$trace".rank*
      fi
      python3 tools/bench/exposed_comm.py "$trace" --skip=5 --gaps=5
    done
  done
fi
