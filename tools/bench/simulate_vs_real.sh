#!/usr/bin/env bash
# purine simulate against reality on this machine (issue 24, check (a)): calibrate op times from
# the fastest of `rounds` traced 1-rank runs (of 1, 2 and 4 micro-batches: the shapes of a
# rank's, a location's of 2 and a pipeline's micro-batch), then for 1 and 2 ranks (mpirun) and
# each reduction, 2 locations in one process, a 2-stage 1F1B pipeline and one of 4 stages
# interleaved over 2 locations print the simulation's img/s (and bubble) beside the measured one
# and the error. Measured runs are separate from the traced one (tracing costs time), each the
# best of `rounds`; img/s are global, after the first 10 iterations (purine train's --summary).
#
# A shared machine's speed drifts by more than the 10% target within minutes (one rank: 1,643
# to 1,846 img/s in one session), and the calibration runs first. So each round of a row also
# runs its calibration's layout untraced just before, and the last columns compare speed-ups
# over it: predicted layout / predicted calibration layout against the median over the rounds
# of measured layout / the calibration layout measured beside it ("paired").
#
# Usage: tools/bench/simulate_vs_real.sh [iters=60] [rounds=2] [model=convnet] [threads=1]
#        [reductions="ring ps mpi"] [cluster=tools/sim/clusters/this_machine.pbtxt]
#        [ranks="1 2"]
# Check (b), where 16 cores are at hand: ranks="4 8" with tools/sim/clusters/host_16_cores.pbtxt
# (mpirun binds each rank to a core there: PURINE_MPIRUN_ARGS="--bind-to core").
# Environment: PURINE_BIN (default build/tools/purine), PURINE_MPIRUN_ARGS (extra mpirun args),
# RANK_SPEED (purine simulate --rank-speed: how fast a rank computes beside others on its node,
# e.g. from tools/bench/weak_scaling.sh's "rank speed" line of the same session): each row then
# also predicts with it, in two more columns. WAKE_US (purine simulate --wake-us=COST:LATENCY,
# from build/tools/bench_dispatcher's hand-over line): every prediction uses it.
# On a shared machine run it under the build lock: flock /tmp/purine-build.lock tools/bench/...
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-60}
rounds=${2:-2}
model=${3:-convnet}
threads=${4:-1}
reductions=${5:-ring ps mpi}
cluster=${6:-tools/sim/clusters/this_machine.pbtxt}
ranks_list=${7:-1 2}
purine=${PURINE_BIN:-build/tools/purine}
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "error: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
mpirun_args=(--oversubscribe)
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# shellcheck disable=SC2206  # word splitting of the extra arguments is intended
[ -n "${PURINE_MPIRUN_ARGS:-}" ] && mpirun_args+=(${PURINE_MPIRUN_ARGS})

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }

# train RANKS ARGS...: one untraced training run; prints its img/s (the summary in $work).
train() {
  local ranks=$1
  shift
  local args=(train --model="$model" "$@" --max-iters="$iters" --noevaluate
    --summary="$work/summary.json")
  if [ "$ranks" = 1 ]; then
    "$purine" "${args[@]}" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
  else
    mpirun "${mpirun_args[@]}" -np "$ranks" "$purine" "${args[@]}" >"$work/log" 2>&1 ||
      { cat "$work/log" >&2; exit 1; }
  fi
  field images_per_sec "$work/summary.json"
}

# measure CALIBRATION RANKS ARGS...: the best img/s of `rounds` training runs (and, for a
# pipeline, the bubble of that best run in $work/bubble); in $work/paired the median over the
# rounds of each run's img/s over that of the CALIBRATION layout (one rank) run just before it.
measure() {
  local calibration=$1 ranks=$2 best=0 ips reference
  shift 2
  echo 0 >"$work/bubble"
  : >"$work/ratios"
  for _ in $(seq "$rounds"); do
    if [ "$ranks $*" = "1 $calibration" ]; then  # the calibration layout is its own reference
      ips=$(train 1 "$@")
      reference=$ips
    else
      # shellcheck disable=SC2086  # the calibration's flags, split into words
      reference=$(train 1 $calibration)
      ips=$(train "$ranks" "$@")
    fi
    echo "$ips $reference" >>"$work/ratios"
    if python3 -c "import sys; sys.exit(0 if $ips > $best else 1)"; then
      best=$ips
      bubble=$(field pipeline_bubble "$work/summary.json")
      echo "${bubble:-0}" >"$work/bubble"
    fi
  done
  python3 -c "
import statistics, sys
print(statistics.median(float(a) / float(b) for a, b in map(str.split, sys.stdin)))" \
    <"$work/ratios" >"$work/paired"
  echo "$best"
}

# predict TRACE RANKS ARGS...: the simulation's img/s calibrated on TRACE (its bubble, for a
# pipeline, in $work/sim_bubble).
predict() {
  local trace=$1 ranks=$2 bind=()
  shift 2
  # mpirun binds each of up to 2 ranks to a core of its own unless told otherwise (the rank's
  # data and comm threads then share its compute thread's core): so does their simulation.
  if [ "$ranks" = 2 ] && [[ "${PURINE_MPIRUN_ARGS:-}" != *bind-to* ]]; then
    bind=(--cores-per-rank=1)
  fi
  "$purine" simulate --model="$model" "$@" --ranks="$ranks" --cluster="$cluster" "${bind[@]}" \
    --calibrate="$trace" ${WAKE_US:+--wake-us="$WAKE_US"} >"$work/sim.txt" 2>&1 ||
    { cat "$work/sim.txt" >&2; exit 1; }
  local bubble
  bubble=$(sed -n 's/.*bubble \([0-9.]*\).*/\1/p' "$work/sim.txt" | head -1)
  echo "${bubble:-0}" >"$work/sim_bubble"
  sed -n 's/.*ms, \([0-9.]*\) img\/s.*/\1/p' "$work/sim.txt" | head -1
}

# row NAME TRACE CALIBRATION RANKS ARGS...: prediction, measurement and error side by side, then
# the speed-ups over the CALIBRATION layout (the flags TRACE was run with), predicted and paired.
row() {
  local name=$1 trace=$2 calibration=$3 ranks=$4 p m pc
  shift 4
  # shellcheck disable=SC2086
  pc=$(predict "$trace" 1 $calibration)
  p=$(predict "$trace" "$ranks" "$@")
  local ps=0  # with RANK_SPEED
  [ -z "${RANK_SPEED:-}" ] || ps=$(predict "$trace" "$ranks" "$@" --rank-speed="$RANK_SPEED")
  m=$(measure "$calibration" "$ranks" "$@")
  python3 -c "
import sys
name, n, p, m, pb, mb, ps, pc, paired = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:10])
bubble = f'{pb:9.3f} {mb:9.3f}' if mb > 0 else f'{\"-\":>9} {\"-\":>9}'
speedup = f'  {p / pc:9.3f} {paired:9.3f} {100 * (p / pc - paired) / paired:+7.1f}%'
shared = f'  {ps:11.1f} {100 * (ps - m) / m:+7.1f}%' if ps > 0 else ''
print(f'{name:<22} {n:>5} {p:11.1f} {m:11.1f} {100 * (p - m) / m:+7.1f}%  {bubble}{speedup}{shared}')" \
    "$name" "$ranks" "$p" "$m" "$(cat "$work/sim_bubble" 2>/dev/null || echo 0)" \
    "$(cat "$work/bubble")" "$ps" "$pc" "$(cat "$work/paired")"
}

echo "model $model, --threads=$threads per replica, $iters iterations, best of $rounds; cluster" \
  "$cluster${RANK_SPEED:+, --rank-speed=$RANK_SPEED}${WAKE_US:+, --wake-us=$WAKE_US}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
# calibrate OUT ARGS...: a traced 1-rank run, the fastest of `rounds` (a shared machine slows
# some runs down; the trace should time the ops, not the neighbours).
calibrate() {
  local out=$1 best=0 ips
  shift
  for _ in $(seq "$rounds"); do
    "$purine" train --model="$model" "$@" --max-iters="$iters" --noevaluate \
      --trace="$work/candidate.json" --summary="$work/summary.json" >"$work/log" 2>&1 ||
      { cat "$work/log" >&2; exit 1; }
    ips=$(field images_per_sec "$work/summary.json")
    if python3 -c "import sys; sys.exit(0 if $ips > $best else 1)"; then
      best=$ips
      mv "$work/candidate.json" "$out"
    fi
  done
}
# Calibration runs: one location, one rank; with 2 micro-batches for 2 locations (a location's
# share of the batch: its ops' shapes); and with 4 for the pipeline.
# The calibration layouts (flags without spaces: they are split into words).
full="--threads=$threads --parallel=data --reduce=ring"
half="$full --micro-batches=2"
micro="$full --micro-batches=4"
# shellcheck disable=SC2086
{
  calibrate "$work/trace.json" $full
  calibrate "$work/trace_half.json" $half
  calibrate "$work/trace_micro.json" $micro
}
printf "%-22s %5s %11s %11s %8s  %9s %9s  %9s %9s %8s" layout ranks predicted/s measured/s error \
  "bubble p" "bubble m" "speed-up p" "paired m" error
[ -z "${RANK_SPEED:-}" ] && echo || printf "  %11s %8s\n" "with speed" error
dp=(--parallel=data --threads="$threads")
for reduce in $reductions; do
  for ranks in $ranks_list; do
    [ "$reduce" = mpi ] && [ "$ranks" = 1 ] && continue  # one rank has nothing to reduce
    if [ "$reduce" = ring ] && [ "$ranks" = 1 ]; then  # the calibration layout, untraced
      # shellcheck disable=SC2086
      row "data --reduce=ring" "$work/trace.json" "$full" 1 $full
    else
      row "data --reduce=$reduce" "$work/trace.json" "$full" "$ranks" "${dp[@]}" --reduce="$reduce"
    fi
  done
done
row "data --locations=2" "$work/trace_half.json" "$half" 1 --parallel=data --locations=2 \
  --threads=$((2 * threads))
row "pipeline 2 stages 1f1b" "$work/trace_micro.json" "$micro" 1 --parallel=pipeline --stages=2 \
  --micro-batches=4 --schedule=1f1b --threads=$((2 * threads))
# Interleaved: 4 stages over the 2 locations (models with at least 4 layers with parameters).
row "pipeline 4 on 2, 1f1b" "$work/trace_micro.json" "$micro" 1 --parallel=pipeline --stages=2 \
  --virtual-stages=2 --micro-batches=4 --schedule=1f1b --threads=$((2 * threads))
echo "(img/s, global; predicted by purine simulate --calibrate on a traced 1-rank run (one with" \
  "--micro-batches=2 for 2 locations, 4 for the pipeline), measured by purine train, mpirun -np N for N ranks;" \
  "bubble: 1 - the busiest stage's work / the iteration; speed-up: over the row's calibration" \
  "layout on one rank, predicted from its trace, and measured paired (median of each round's" \
  "run over the calibration layout's run just before it)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
