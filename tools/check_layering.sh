#!/usr/bin/env bash
# Checks the layering of DESIGN.md: a folder includes only from itself and the folders below it,
# and only the public headers of the folders below (not their internals).
#   tools/check_layering.sh [repository root, default: this script's repository]
# Order, bottom first (folders on one level are peers and include neither the other):
#   base < operators, dispatcher < purine < graphs < models < train < tools
# tests/ and examples/ may include any folder (examples/ no internals, below). Every #include "folder/..." (or <folder/...>) in a
# C++ or CUDA source of a layered folder is checked; includes of anything else (the standard
# library, purine.pb.h, a file beside the source) are not. A top-level folder with C++ sources
# that is not in the order is an error too: a new folder gets a place in it first.
# Internals: the headers under X/internal/ (and the operators' kernel folders operators/cpu/,
# operators/cuda/, operators/mpi/) belong to folder X; only X's own files and the test harnesses
# (tests/, and tools/fuzz/, whose fuzz targets drive internal parsers as tests do) may include
# them. examples/ is checked for this rule too: it builds against the installed headers, which
# leave internals out.
# Prints every violation as file:line and exits 1 when there is one, else prints a summary.
set -euo pipefail
root=${1:-"$(dirname "$0")/.."}
cd "$root"

declare -A level=([base]=0 [operators]=1 [dispatcher]=1 [purine]=2 [graphs]=3 [models]=4
  [train]=5 [tools]=6)
# Folders outside the layering: they may include anything, nothing may include them.
unlayered=(tests examples cmake proto)

# Folders whose headers are internal to the top-level folder that holds them (besides every
# */internal/), and the folders that may include any internal header.
internal_dirs=(operators/cpu operators/cuda operators/mpi)
harnesses=(tests tools/fuzz)

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

# Sets `owner` to the folder an included path is internal to, or to nothing when it is public.
internal_owner() {
  local dir
  owner=""
  if [[ $1 == */internal/* ]]; then
    owner=${1%%/*}
    return
  fi
  for dir in "${internal_dirs[@]}"; do
    [[ $1 == "$dir"/* ]] && owner=${1%%/*} && return
  done
  return 0
}

# Whether `file` is in one of the harness folders.
in_harness() {
  local dir
  for dir in "${harnesses[@]}"; do
    [[ $1 == "$dir"/* ]] && return 0
  done
  return 1
}

report() {  # file line included why
  if [[ " ${allowed[*]/%/|} " == *" $1 $3|"* ]]; then
    used["$1 $3"]=1
    return
  fi
  echo "$1:$2: includes \"$3\", but $4 (tools/check_layering.sh)"
  status=1
}

declare -A used=()
checked=0
internal_checked=0
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
    internal_owner "$included"
    if [[ -n $owner ]]; then
      if [[ $owner == "$from" ]] || in_harness "$file"; then
        internal_checked=$((internal_checked + 1))
      else
        report "$file" "$lineno" "$included" \
          "it is internal to $owner/ (only $owner/ and the test harnesses may include it)"
        continue
      fi
    fi
    [[ -n "${level[$from]+x}" ]] || continue  # examples/: only the internals rule
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
    report "$file" "$lineno" "$included" "$why"
  done <"$file"
done < <(find "${!level[@]}" examples \( "${sources[@]}" \) -print0 2>/dev/null | sort -z)

for entry in "${allowed[@]}"; do
  [[ -n "${used[$entry]+x}" ]] ||
    echo "note: the allowed violation '$entry' no longer occurs; remove it from the list"
done
if ((status == 0)); then
  echo "layering holds: $checked includes of lower folders, $internal_checked of internal" \
    "headers from their own folder or a harness, ${#used[@]} allowed violation(s)"
fi
exit $status
