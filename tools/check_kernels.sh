#!/usr/bin/env bash
# Checks two conventions of the kernels (docs/OPERATORS.md) that no compiler enforces:
#   - a GPU kernel reads the attributes its operator parsed when it was made (params(), typed
#     accessors), never `op.attrs()` again with names and defaults of its own;
#   - no kernel checks contiguity itself: Operator::compute() refuses strided views before any
#     kernel runs (OperatorTraits::strided_on_cpu marks the CPU kernels that take them).
#   tools/check_kernels.sh [repository root, default: this script's repository]
# Prints every violation as file:line and exits 1 when there is one, else prints a summary.
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"

status=0
kernels=$(find operators/cpu operators/cuda \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' \
  -o -name '*.cuh' \) | sort)
while IFS=: read -r file line _; do
  [[ -z $file ]] && continue
  echo "$file:$line: a GPU kernel re-reads an attribute; read the operator's parsed params"
  status=1
done < <(grep -n -E '\battrs\(\)\s*\.\s*get' $(grep '^operators/cuda/' <<<"$kernels") || true)
while IFS=: read -r file line _; do
  [[ -z $file ]] && continue
  echo "$file:$line: a kernel checks contiguity; Operator::compute() already does"
  status=1
done < <(grep -n -E 'is_contiguous\(\)' $kernels | grep -v -E '^operators/cpu/(concat_split|copy)\.cpp:' || true)

[ $status -eq 0 ] && echo "kernels: $(echo "$kernels" | wc -l) files checked, no attribute re-read on a GPU, no own contiguity check"
exit $status
