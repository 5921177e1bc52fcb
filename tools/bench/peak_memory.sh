#!/usr/bin/env bash
# Peak memory of training: for each model, the peak resident size of a short `purine train`
# run (the kernel's count for the child process, as `/usr/bin/time -f %M` gives it) beside what
# Purine plans for activations, gradients and optimizer steps. Give two builds to compare them:
# PURINE_BIN=old/purine and PURINE_BIN_B=new/purine run one after the other per model.
#
# Usage: tools/bench/peak_memory.sh [models="mlp convnet_bn resnet20 googlenet"] [iters=5]
#        [extra flags for purine train...]
# Environment: PURINE_BIN (default build/tools/purine), PURINE_BIN_B (optional second build).
set -euo pipefail
cd "$(dirname "$0")/../.."
models=${1:-mlp convnet_bn resnet20 googlenet}
iters=${2:-5}
shift $(($# < 2 ? $# : 2))
builds=("${PURINE_BIN:-build/tools/purine}")
[ -n "${PURINE_BIN_B:-}" ] && builds+=("$PURINE_BIN_B")
for purine in "${builds[@]}"; do
  [ -x "$purine" ] || { echo "error: $purine not built; run tools/build.sh" >&2; exit 1; }
done

# peak PURINE MODEL [FLAGS...]: prints "PEAK_MB\tPLANNED" for one run (fails with the log).
peak() {
  python3 - "$@" <<'PY'
import re, resource, subprocess, sys
purine, model, *flags = sys.argv[1:]
run = subprocess.run([purine, "train", "--model=" + model, "--noevaluate"] + flags,
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if run.returncode != 0:
    sys.stderr.write(run.stdout)
    sys.exit("error: purine train --model=%s failed (exit %d)" % (model, run.returncode))
planned = re.search(r"memory for activations, gradients and optimizer steps: ([0-9.]+ [KMG]B)",
                    run.stdout)
# ru_maxrss of the waited-for children: kilobytes on Linux
print("%.1f\t%s" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  planned.group(1) if planned else "-"))
PY
}

printf "%-12s %-40s %14s %22s\n" model build "peak resident" "planned by Purine"
for model in $models; do
  for purine in "${builds[@]}"; do
    result=$(peak "$purine" "$model" --max-iters="$iters" "$@")
    printf "%-12s %-40s %11s MB %22s\n" "$model" "$purine" "${result%%$'\t'*}" "${result#*$'\t'}"
  done
done
