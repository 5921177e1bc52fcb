#!/usr/bin/env bash
# Runs the test suite under AddressSanitizer and UndefinedBehaviorSanitizer, in a build of its
# own (build-asan/, -DPURINE_ASAN=ON, no CUDA backend): a read or write out of bounds or after
# free, a misaligned or overflowing operation, a shift past the width, ... fails the test that
# did it, with the sanitizer's report in its output. Leaks are not checked (Open MPI and glog
# keep memory to exit). Through ccache when present. Not part of CI: the whole build takes
# about 40 minutes on 2 cores, the tests about 3 times their usual time.
#   tools/check_memory.sh [extra ctest arguments, e.g. -R conv]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
dir=build-asan

SECONDS=0
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1  # as tools/build.sh: fresh clones share objects
cmake -S . -B $dir -DCMAKE_BUILD_TYPE=Release -DPURINE_ASAN=ON -DPURINE_WITH_CUDA=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$(command -v ccache || true)" >/dev/null
cmake --build $dir -j"$jobs"
echo "built in ${SECONDS}s"

# A report ends the process with an error: the test fails. Code generated at run time (oneDNN's
# JIT kernels) and the libraries' own code are not instrumented: what they touch is not checked.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1 ${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1 ${UBSAN_OPTIONS:-}"
SECONDS=0
status=0
# The installed package's example is another CMake project, built without the sanitizers: it
# would load libasan after the instrumented libpurine and crash at start-up, before any test.
ctest --test-dir $dir -j"$jobs" --output-on-failure -E '^install/example_np' "$@" || status=$?
echo "tests in ${SECONDS}s"
exit $status
