#!/usr/bin/env bash
# The allreduce benchmark on 2, 3 and 4 local ranks in one go: runs build/tools/bench_allreduce
# once per world size (see its header for the columns), then prints the issue's verdict per world
# size: the graph-composed ring at least 0.9x MPI_Allreduce's bandwidth at every size from 1 MB.
# It times only those two (--variants=false): the diagnostic columns run four more methods, each
# with buffers and threads of its own, between a ring call and the next, and on a small machine
# that churn lowers the ring's ratio by about a tenth. Pass --variants=true to see them anyway.
#
# Usage: tools/bench/allreduce.sh [max_bytes=67108864] [reps=15] [ranks="2 3 4"]
# Environment: PURINE_BENCH (default build/tools/bench_allreduce), PURINE_MPIRUN_ARGS (extra
# mpirun arguments). Extra bench flags may follow on the command line after the three above.
set -euo pipefail
cd "$(dirname "$0")/../.."
max_bytes=${1:-67108864}
reps=${2:-15}
ranks=${3:-2 3 4}
shift $(($# < 3 ? $# : 3))
bench=${PURINE_BENCH:-build/tools/bench_allreduce}
[ -x "$bench" ] || { echo "error: $bench not built; run tools/build.sh" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "error: mpirun not found (apt-get install openmpi-bin)" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
mpirun_args=(--oversubscribe)
# shellcheck disable=SC2206  # word splitting of the extra arguments is intended
[ -n "${PURINE_MPIRUN_ARGS:-}" ] && mpirun_args+=(${PURINE_MPIRUN_ARGS})
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for n in $ranks; do
  echo "== $n ranks"
  mpirun "${mpirun_args[@]}" -np "$n" "$bench" --max_bytes="$max_bytes" --reps="$reps" \
    --variants=false "$@" |
    tee "$work/$n.txt"
  echo
done
echo "target: ring/MPI >= 0.9x at every size from 1 MB"
for n in $ranks; do
  # Table rows: "<value> <unit> <ring ms> <ring GB/s> <MPI ms> <MPI GB/s> <ratio>x ...".
  awk -v n="$n" '
    $2 == "MB" && $7 ~ /x$/ {
      ratio = substr($7, 1, length($7) - 1) + 0
      if (ratio < 0.9) missed = missed sprintf(" %s MB (%.2fx)", $1, ratio)
      sizes++
    }
    END {
      if (!sizes) { printf "%d ranks: no size of 1 MB or more measured\n", n; exit }
      if (missed) printf "%d ranks: missed at%s\n", n, missed
      else printf "%d ranks: met at all %d sizes from 1 MB\n", n, sizes
    }' "$work/$n.txt"
done
