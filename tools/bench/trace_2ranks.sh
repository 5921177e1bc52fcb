#!/usr/bin/env bash
# A 2-rank data-parallel trace of `purine train`: runs a few iterations of convnet on 2 MPI ranks
# with --trace (each rank writes TRACE.rank<R>), merges the two files into one with
# build/tools/merge_traces, prints the exposed-communication table (exposed_comm.py) and where
# to open the merged trace: https://ui.perfetto.dev (Open trace file), one process per rank, one
# track per executor (main, data, comm).
#
# Usage: tools/bench/trace_2ranks.sh [out_dir=build/trace_2ranks] [reduce=ring] [iters=20]
#     [threads=1] [model=convnet]
# Environment: PURINE_BUILD (default build), PURINE_MPIRUN_ARGS (extra mpirun arguments).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${PURINE_BUILD:-build}
out=${1:-$build/trace_2ranks}
reduce=${2:-ring}
iters=${3:-20}
threads=${4:-1}
model=${5:-convnet}
for tool in purine merge_traces; do
  [ -x "$build/tools/$tool" ] || { echo "error: $build/tools/$tool not built; run tools/build.sh" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "error: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
mpirun_args=(--oversubscribe)
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# shellcheck disable=SC2206  # word splitting of the extra arguments is intended
[ -n "${PURINE_MPIRUN_ARGS:-}" ] && mpirun_args+=(${PURINE_MPIRUN_ARGS})

mkdir -p "$out"
trace="$out/$model-$reduce.json"
rm -f "$trace.rank0" "$trace.rank1"
log="$out/$model-$reduce.log"
# The progress line is rewritten in place on a terminal: keep the log, show its last line.
if ! mpirun "${mpirun_args[@]}" -np 2 "$build/tools/purine" train --model="$model" \
  --parallel=data --reduce="$reduce" --threads="$threads" --max-iters="$iters" --noevaluate \
  --trace="$trace" >"$log" 2>&1; then
  cat "$log" >&2
  echo "error: the 2-rank training run failed (log: $log)" >&2
  exit 1
fi
tr '\r' '\n' <"$log" | grep -v '^$' | tail -n 1
merged="$out/$model-$reduce-2ranks.json"
"$build/tools/merge_traces" "$merged" "$trace.rank0" "$trace.rank1"
echo
python3 tools/bench/exposed_comm.py "$trace.rank0" "$trace.rank1"
echo
echo "per-rank traces: $trace.rank0 $trace.rank1"
echo "merged trace:    $(cd "$(dirname "$merged")" && pwd)/$(basename "$merged")"
echo "open it in https://ui.perfetto.dev (Open trace file) or chrome://tracing"
