#!/usr/bin/env bash
# Checks the OpenMP pragmas of the C++ sources for a clause that silently costs speed: an `if`
# without a directive name on a combined construct with `simd` (`parallel for simd if (n > m)`)
# applies to `simd` too, and GCC then compiles the loop's serial case unvectorized, so every
# call below the threshold runs scalar (operators/cpu/threading.hpp). Write `if (parallel : ...)`.
#   tools/check_openmp.sh [repository root, default: this script's repository]
# Prints every violation as file:line and exits 1 when there is one, else prints a summary.
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"

status=0
checked=0
while IFS= read -r -d '' file; do
  # One pragma per line, continuation lines joined onto it; each reported by its first line.
  while IFS=$'\t' read -r line pragma; do
    checked=$((checked + 1))
    if [[ $pragma =~ [[:space:]]simd([[:space:]]|$) && $pragma =~ [[:space:]]if[[:space:]]*\( &&
      ! $pragma =~ [[:space:]]if[[:space:]]*\([[:space:]]*parallel[[:space:]]*: ]]; then
      echo "$file:$line: 'if' on a combined simd construct also disables simd; write if (parallel : ...)"
      status=1
    fi
  done < <(awk '
    pragma != "" { pragma = pragma " " $0 }
    pragma == "" && /^[[:space:]]*#[[:space:]]*pragma[[:space:]]+omp/ { start = FNR; pragma = $0 }
    pragma != "" && !/\\$/ { print start "\t" pragma; pragma = "" }' "$file")
done < <(find base operators dispatcher purine graphs models train tools tests \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) -print0)

[ $status -eq 0 ] && echo "openmp: $checked pragmas checked, none with a bare 'if' on simd"
exit $status
