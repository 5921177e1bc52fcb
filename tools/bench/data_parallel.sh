#!/usr/bin/env bash
# Data-parallel scaling of `purine train`: the same per-replica batch on 2 MPI ranks against 1 rank,
# for each gradient reduction (ring, ps, mpi). Prints training images/s (global, from the
# --summary JSON, after the first 10 iterations) and two ratios:
#   2r x 1t / 1r x 1t   the issue's target: at least 1.8x (twice the threads, twice the images)
#   2r x 1t / 1r x 2t   the same total threads: what data parallelism gains over giving one
#                       process both threads
# and, as the machine's own ceiling for the first ratio, 1r x 2t / 1r x 1t: what a second core
# gives one process with no communication at all (shared caches and memory bandwidth cap it).
# For ring and ps it also runs the two replicas in one process, at two CPU locations with a
# thread each (--locations=2, "1r x 2l"), and prints 1r2l/1r2t (mpi joins ranks, not locations).
# Each configuration runs `rounds` times, alternating with the others, and keeps its best, so
# none gets the quieter moment alone. Short runs: no evaluation, `iters` iterations each.
#
# Usage: tools/bench/data_parallel.sh [iters=60] [rounds=2] [model=convnet] [batch=64 per replica]
# Environment: PURINE_BIN (default build/tools/purine), PURINE_MPIRUN_ARGS (extra mpirun
# arguments, e.g. "--bind-to none").
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-60}
rounds=${2:-2}
model=${3:-convnet}
batch=${4:-64}
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
common=(train --model="$model" --max-iters="$iters" --noevaluate)

field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }
# best FILE: the largest of the numbers in FILE (one per line); runs FILE: them on one line.
best() { python3 -c "import sys; print(max(float(x) for x in sys.stdin.read().split()))" <"$1"; }
runs() { tr '\n' ' ' <"$1"; }

# run NAME RANKS THREADS [REDUCE] [LOCATIONS]: one training run, `batch` images per replica;
# appends its images/s to $work/NAME.
run() {
  local name=$1 ranks=$2 threads=$3 reduce=${4:-ring} locations=${5:-1}
  local summary="$work/$name.json" log="$work/$name.log"
  local args=("${common[@]}" --batch=$((batch * locations)) --threads="$threads"
    --summary="$summary")
  rm -f "$summary"
  # One process runs without mpirun, which would bind it to a single core.
  if [ "$ranks" = 1 ]; then
    "$purine" "${args[@]}" --parallel=data --reduce="$reduce" --locations="$locations" >"$log" 2>&1 ||
      { cat "$log" >&2; echo "error: run $name failed" >&2; exit 1; }
  else
    mpirun "${mpirun_args[@]}" -np "$ranks" "$purine" "${args[@]}" --parallel=data \
      --reduce="$reduce" >"$log" 2>&1 ||
      { cat "$log" >&2; echo "error: run $name failed" >&2; exit 1; }
  fi
  field images_per_sec "$summary" >>"$work/$name"
}

echo "model $model, batch $batch per replica, $iters iterations, best of $rounds rounds;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq "$rounds"); do
  run 1r1t 1 1
  run 1r2t 1 2
  for reduce in ring ps mpi; do run "2r1t_$reduce" 2 1 "$reduce"; done
  for reduce in ring ps; do run "1r2l_$reduce" 1 2 "$reduce" 2; done
done

one=$(best "$work/1r1t")
two=$(best "$work/1r2t")
printf "\n%-7s %9s %9s %9s %11s %11s %9s %11s  %s\n" reduce "1r x 1t" "1r x 2t" "2r x 1t" \
  "2r1t/1r1t" "2r1t/1r2t" "1r x 2l" "1r2l/1r2t" "target 2r1t/1r1t >= 1.8x"
for reduce in ring ps mpi; do
  dp=$(best "$work/2r1t_$reduce")
  in_process=0
  [ -f "$work/1r2l_$reduce" ] && in_process=$(best "$work/1r2l_$reduce")
  python3 - "$reduce" "$one" "$two" "$dp" "$in_process" <<'EOF'
import sys
reduce, one, two, dp, local = sys.argv[1], *map(float, sys.argv[2:])
verdict = "met" if dp / one >= 1.8 else "missed"
loc = f"{local:9.1f} {local / two:10.2f}x" if local > 0 else f"{'-':>9} {'-':>11}"
print(f"{reduce:<7} {one:9.1f} {two:9.1f} {dp:9.1f} {dp / one:10.2f}x {dp / two:10.2f}x {loc}  {verdict}")
EOF
done
python3 -c "import sys; print(f'machine ceiling: 1r x 2t / 1r x 1t = {float(sys.argv[2]) / float(sys.argv[1]):.2f}x')" "$one" "$two"
echo "(images/s, global over replicas; 1r = one process, 2r = mpirun -np 2 --parallel=data," \
  "2l = --locations=2 in one process)"
echo "every run: 1r1t $(runs "$work/1r1t")| 1r2t $(runs "$work/1r2t")| ring" \
  "$(runs "$work/2r1t_ring")| ps $(runs "$work/2r1t_ps")| mpi $(runs "$work/2r1t_mpi")|" \
  "1r2l ring $(runs "$work/1r2l_ring")| 1r2l ps $(runs "$work/1r2l_ps")"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
