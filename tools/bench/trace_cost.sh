#!/usr/bin/env bash
# The cost of --trace: training images/s of `purine train` with and without a streamed trace,
# in alternating runs (so both see the same machine), as the ratio traced / untraced of the
# median runs. Also prints the trace file's size and the events it holds.
#
# Usage: tools/bench/trace_cost.sh [iters=300] [rounds=3] [model=convnet] [threads=2]
# Environment: PURINE_BIN (default build/tools/purine).
set -euo pipefail
cd "$(dirname "$0")/../.."
iters=${1:-300}
rounds=${2:-3}
model=${3:-convnet}
threads=${4:-2}
purine=${PURINE_BIN:-build/tools/purine}
[ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
field() { sed -n "s/.*\"$1\": *\([0-9.e+-]*\).*/\1/p" "$2" | head -1; }
median() { python3 -c "import sys,statistics; print(statistics.median(float(x) for x in sys.stdin.read().split()))" <"$1"; }

run() {  # run NAME [EXTRA FLAG]: appends the run's images/s to $work/NAME
  local name=$1
  shift
  "$purine" train --model="$model" --max-iters="$iters" --threads="$threads" --noevaluate \
    --summary="$work/summary.json" "$@" >"$work/log" 2>&1 ||
    { cat "$work/log" >&2; echo "error: run $name failed" >&2; exit 1; }
  field images_per_sec "$work/summary.json" >>"$work/$name"
}

echo "model $model, $iters iterations, $threads threads, $rounds rounds (images/s, alternating)"
for ((r = 0; r < rounds; ++r)); do
  run plain
  run traced --trace="$work/trace.json"
done
plain=$(median "$work/plain")
traced=$(median "$work/traced")
events=$(grep -c '"ph":"X"' "$work/trace.json")
printf 'untraced: %s\n' "$(tr '\n' ' ' <"$work/plain")"
printf 'traced:   %s\n' "$(tr '\n' ' ' <"$work/traced")"
printf 'median untraced %.1f, traced %.1f images/s: traced/untraced %.3f\n' "$plain" "$traced" \
  "$(python3 -c "print($traced / $plain)")"
printf 'trace file: %s events, %s bytes\n' "$events" "$(stat -c %s "$work/trace.json")"
