#!/usr/bin/env bash
# Checks the dispatcher's lock discipline, in a clang build of its own (build-tsan/):
#   1. clang -Wthread-safety -Werror over dispatcher/: its GUARDED_BY / REQUIRES annotations
#      (dispatcher/internal/thread_annotations.hpp, mutex.hpp) must hold;
#   2. ThreadSanitizer (-DPURINE_TSAN=ON) over the dispatcher tests (test_dispatcher) and the
#      Runnable tests (tests/purine/test_runnable.cpp, built alone as test_runnable): a data race,
#      a lock-order inversion or a misused mutex fails the run.
# Builds only those targets, through ccache when present. Needs clang and its runtimes
# (tools/setup.sh installs them). Run by .ci/run; exits non-zero on a finding.
#   tools/check_threads.sh [extra Catch2 arguments for both test programs]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
dir=build-tsan

step() { printf '== %s\n' "$*"; }
SECONDS=0
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1  # as tools/build.sh: fresh clones share objects
cmake -S . -B $dir -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DPURINE_TSAN=ON -DPURINE_WITH_CUDA=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" >/dev/null
step "clang -Wthread-safety -Werror: dispatcher/"
cmake --build $dir -j"$jobs" --target purine_dispatcher
step "ThreadSanitizer build: test_dispatcher, test_runnable"
cmake --build $dir -j"$jobs" --target test_dispatcher test_runnable
echo "built in ${SECONDS}s"

# Every report fails the run at once; nothing is suppressed. libomp's start-up warning asking
# for ignore_noninstrumented_modules=1 (which hides what uninstrumented libraries touch) is
# expected: these tests have needed no such option.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
status=0
for test in test_dispatcher test_runnable; do
  step "ThreadSanitizer: $test"
  SECONDS=0
  if $dir/tests/$test "$@"; then
    echo "$test: no ThreadSanitizer finding (${SECONDS}s)"
  else
    echo "$test: FAILED (exit $?, ${SECONDS}s): a test or a ThreadSanitizer report above"
    status=1
  fi
done
exit $status
