#!/usr/bin/env bash
# purine simulate against reality on this machine (issue 24, check (a)): calibrate op times from
# a traced 1-rank run, then for 1 and 2 ranks (mpirun) and each reduction print the simulation's
# img/s beside the measured one and the error. Measured runs are separate from the traced one
# (tracing costs time), each the best of `rounds`; img/s are global, after the first 10
# iterations (purine train's --summary).
#
# Usage: tools/bench/simulate_vs_real.sh [iters=60] [rounds=2] [model=convnet] [threads=1]
#        [reductions="ring ps mpi"] [cluster=tools/sim/clusters/this_machine.pbtxt]
# Environment: PURINE_BIN (default build/tools/purine), PURINE_MPIRUN_ARGS (extra mpirun args).
# On a shared machine run it under the build lock: flock /tmp/purine-build.lock tools/bench/...
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-60}
rounds=${2:-2}
model=${3:-convnet}
threads=${4:-1}
reductions=${5:-ring ps mpi}
cluster=${6:-tools/sim/clusters/this_machine.pbtxt}
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
layout=(--model="$model" --threads="$threads" --parallel=data)
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }

# measure RANKS REDUCE: the best img/s of `rounds` training runs.
measure() {
  local ranks=$1 reduce=$2 best=0 ips
  for _ in $(seq "$rounds"); do
    local args=(train "${layout[@]}" --reduce="$reduce" --max-iters="$iters" --noevaluate
      --summary="$work/summary.json")
    if [ "$ranks" = 1 ]; then
      "$purine" "${args[@]}" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
    else
      mpirun "${mpirun_args[@]}" -np "$ranks" "$purine" "${args[@]}" >"$work/log" 2>&1 ||
        { cat "$work/log" >&2; exit 1; }
    fi
    ips=$(field images_per_sec "$work/summary.json")
    best=$(python3 -c "print(max($best, $ips))")
  done
  echo "$best"
}

# predict RANKS REDUCE: the simulation's img/s, calibrated on the 1-rank trace.
predict() {
  "$purine" simulate "${layout[@]}" --reduce="$2" --ranks="$1" --cluster="$cluster" \
    --calibrate="$work/trace.json" >"$work/sim.txt" 2>&1 || { cat "$work/sim.txt" >&2; exit 1; }
  sed -n 's/.*ms, \([0-9.]*\) img\/s.*/\1/p' "$work/sim.txt" | head -1
}

echo "model $model, --threads=$threads per rank, $iters iterations, best of $rounds; cluster" \
  "$cluster; load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$purine" train "${layout[@]}" --reduce=ring --max-iters="$iters" --noevaluate \
  --trace="$work/trace.json" >"$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
printf "%-7s %6s %14s %14s %8s\n" reduce ranks "predicted/s" "measured/s" error
for reduce in $reductions; do
  for ranks in 1 2; do
    [ "$reduce" = mpi ] && [ "$ranks" = 1 ] && continue  # one rank has nothing to reduce
    p=$(predict "$ranks" "$reduce")
    m=$(measure "$ranks" "$reduce")
    python3 -c "import sys; r, n, p, m = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]); print(f'{r:<7} {n:>6} {p:14.1f} {m:14.1f} {100 * (p - m) / m:+7.1f}%')" \
      "$reduce" "$ranks" "$p" "$m"
  done
done
echo "(img/s, global; predicted by purine simulate --calibrate on a traced 1-rank ring run," \
  "measured by purine train, mpirun -np 2 for 2 ranks)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
