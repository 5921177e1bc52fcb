#!/usr/bin/env bash
# Checks the layering of DESIGN.md: a folder includes only from itself and the folders below it.
#   tools/check_layering.sh [repository root, default: this script's repository]
# Order, bottom first (folders on one level are peers and include neither the other):
#   base < operators, dispatcher < purine < graphs < models < train < tools
# tests/ and examples/ may include anything. Every #include "folder/..." (or <folder/...>) in a
# C++ or CUDA source of a layered folder is checked; includes of anything else (the standard
# library, purine.pb.h, a file beside the source) are not. A top-level folder with C++ sources
# that is not in the order is an error too: a new folder gets a place in it first.
# Prints every violation as file:line and exits 1 when there is one, else prints a summary.
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"

declare -A level=([base]=0 [operators]=1 [dispatcher]=1 [purine]=2 [graphs]=3 [models]=4
  [train]=5 [tools]=6)
# Folders outside the layering: they may include anything, nothing may include them.
unlayered=(tests examples cmake proto)

# Known violations, each "file included-file", with the change that removes it. An entry that no
# longer occurs is reported, to be deleted.
allowed=()

sources=(-name '*.hpp' -o -name '*.cpp' -o -name '*.h' -o -name '*.cc' -o -name '*.cu' -o
  -name '*.cuh')
status=0
for dir in */; do
  dir=${dir%/}
  [[ -n "${level[$dir]+x}" || " ${unlayered[*]} " == *" $dir "* || $dir == build* ]] && continue
  if [ -n "$(find "$dir" \( "${sources[@]}" \) -print -quit)" ]; then
    echo "$dir/: C++ sources in a folder outside the layering; add it to tools/check_layering.sh"
    status=1
  fi
done

declare -A used=()
checked=0
include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]+)[">]'
while IFS= read -r -d '' file; do
  from=${file%%/*}
  lineno=0
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    [[ $line =~ $include_re ]] || continue
    included=${BASH_REMATCH[1]}
    to=${included%%/*}
    [[ $to != "$included" ]] || continue  # no folder: not a layered include
    if [[ -z "${level[$to]+x}" ]]; then
      [[ " ${unlayered[*]} " == *" $to "* ]] || continue  # <google/...>, <oneapi/...>
      why="$to/ is outside the layering"
    elif [[ $to == "$from" ]]; then
      continue
    elif ((level[$to] < level[$from])); then
      checked=$((checked + 1))
      continue
    elif ((level[$to] == level[$from])); then
      why="$from/ and $to/ are peers"
    else
      why="$to/ is above $from/"
    fi
    if [[ " ${allowed[*]/%/|} " == *" $file $included|"* ]]; then
      used["$file $included"]=1
      continue
    fi
    echo "$file:$lineno: includes \"$included\", but $why (tools/check_layering.sh)"
    status=1
  done <"$file"
done < <(find "${!level[@]}" \( "${sources[@]}" \) -print0 2>/dev/null | sort -z)

for entry in "${allowed[@]}"; do
  [[ -n "${used[$entry]+x}" ]] ||
    echo "note: the allowed violation '$entry' no longer occurs; remove it from the list"
done
if ((status == 0)); then
  echo "layering holds: $checked includes of lower folders, ${#used[@]} allowed violation(s)"
fi
exit $status
