#!/usr/bin/env bash
# Fuzzes the file readers with libFuzzer: tools/fuzz/run.sh [seconds per target, default 60]
#   fuzz_idx         the IDX reader, raw and gzip (tools/fuzz/idx_input.hpp)
#   fuzz_checkpoint  purine::load_checkpoint (tools/fuzz/checkpoint_input.hpp)
#   fuzz_image       purine predict's PNG and PGM reader (tools/fuzz/image_input.hpp)
# Installs clang and its fuzzer runtime (Debian packages) when missing, builds the targets with
# clang, ASan and UBSan into build-fuzz/, and runs each for the given time, starting from the
# checked-in corpus tests/fuzz_corpus/<target> (copied, so the fuzzers' own growth stays in
# build-fuzz/corpus/). Prints the executions and the findings of each; a finding (crash, leak,
# timeout, out-of-memory) is written to build-fuzz/findings/<time>/<target>/. Once fixed, copy it into
# tests/fuzz_corpus/<target>/ so the normal test suite replays it. Exits non-zero on a finding.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
jobs=${JOBS:-2}

packages=(clang libclang-rt-14-dev libomp-14-dev protobuf-compiler)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}"
fi

cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DPURINE_FUZZ=ON -DPURINE_WITH_CUDA=OFF \
  -DPURINE_BUILD_TESTS=OFF -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzz_idx fuzz_checkpoint fuzz_image

status=0
stamp=$(date +%Y%m%d-%H%M%S)
for target in idx checkpoint image; do
  corpus=build-fuzz/corpus/$target findings=build-fuzz/findings/$stamp/$target
  mkdir -p "$corpus" "$findings"
  cp -n tests/fuzz_corpus/$target/* "$corpus"/
  log=build-fuzz/fuzz_$target.log
  echo "== fuzz_$target for ${seconds}s (log: $log)"
  # -rss_limit_mb: a reader must not need more than this for inputs of at most -max_len bytes.
  rc=0
  build-fuzz/tools/fuzz/fuzz_$target "$corpus" -max_total_time="$seconds" -max_len=65536 \
    -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 -artifact_prefix="$findings/" \
    >"$log" 2>&1 || rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true
  echo "executions: ${runs:-?}; corpus: $(ls "$corpus" | wc -l) inputs; findings:"
  if ((rc != 0)) || [ -n "$(ls -A "$findings")" ]; then
    grep -E 'ERROR: |SUMMARY: |terminate called|what\(\)' "$log" | head -5 || true
    ls "$findings"
    status=1
  else
    echo "  none"
  fi
done
exit $status
