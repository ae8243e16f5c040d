#!/usr/bin/env bash
# Builds ms and runs its whole test suite with ctest.
#
#   bash scripts/test.sh               # build/: tests, examples, tools
#   bash scripts/test.sh --sanitize    # build-asan/: tests under ASan + UBSan
#   bash scripts/test.sh --tsan        # build-tsan/: the threaded tests under TSan
#
# Extra arguments after the options go to ctest (e.g. -R ops -V).
# Environment: JOBS (default: nproc) limits the parallel build and test jobs;
# SANITIZE_OPT (default -O0) is the optimization flag of the sanitizer build;
# MS_EXAMPLES_OPT (default -O0) that of the examples and tools in build/.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=0
ctest_args=()
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=1 ;;
    --tsan) sanitize=2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) ctest_args+=("$arg") ;;
  esac
done

bash scripts/setup.sh

jobs=${JOBS:-$(nproc)}
if [ "$sanitize" -eq 1 ]; then
  dir=build-asan
  # -O0: under the sanitizers the tests build in 630 s and run in 200 s at -O0,
  # against 1520 s and 90 s at -O1 (2 cores). -g1: line tables for the
  # sanitizer reports, cheap to compile. No -DNDEBUG, so internal asserts are
  # checked in this run too.
  # The kernels (one unit of their own) at -O0: at -O1 that unit took 535 s of a 632 s
  # build (2 cores), the longest path of it, for a suite about a minute faster.
  # The CPU level units at -O0: 20 s each instead of 65-100 s at -O2; ops/isa_test.cpp runs
  # them on small inputs only.
  opt=${SANITIZE_OPT:--O0}
  # shellcheck disable=SC2054  # the comma belongs to the sanitizer list
  cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$opt -g1" "-DMS_TESTS_OPT=$opt" "-DMS_TEST_KERNELS_OPT=${SANITIZE_KERNELS_OPT:--O0}" -DMS_TEST_ISA_OPT=-O0
              -DMS_SANITIZE=address,undefined
              -DMS_BUILD_TESTS=ON -DMS_BUILD_EXAMPLES=OFF
              -DMS_BUILD_BENCHMARKS=OFF -DMS_BUILD_TOOLS=OFF)
  # Not the packaging builds, nor the repeats of the op tests on the other GEMM paths
  # (label gemm_path): the default path runs under the sanitizers in the main suite, and
  # tests/ops/dnnl_test.cpp crosses every path there too.
  # Nor the op tests once more at the lower CPU levels (label isa): the main suite runs the
  # best level under the sanitizers, and ops/isa_test.cpp runs every level's kernels there.
  # Nor the device suite once more per emulator SoC profile (label ascend_soc): a profile
  # changes what the chip supports, not how memory is handled, and the default profile's
  # device tests run here one by one.
  ctest_args=(-LE "packaging|gemm_path|isa|ascend_soc" "${ctest_args[@]}")
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
elif [ "$sanitize" -eq 2 ]; then
  dir=build-tsan
  # ThreadSanitizer over the code that runs threads of its own: the Ascend emulator's
  # stream workers and events, the adapter and the device executor (tests tagged
  # [ascend]), and the graph tests. OpenMP is off: libgomp is not instrumented, so
  # TSan cannot see its barriers and reports every parallel loop as a race; the
  # parallel_for split itself is covered by the ASan run and by the thread-count
  # tests. OpenBLAS is off too (its threads are libgomp's). Not part of .ci/run (the build takes about 10 minutes on 2 cores).
  # Runs the test binary on the Catch tags in TSAN_TESTS (default "[ascend],[graph]").
  cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" -DMS_TESTS_OPT=-O1
              -DMS_TEST_KERNELS_OPT=-O1 -DMS_SANITIZE=thread -DMS_USE_OPENMP=OFF -DMS_USE_BLAS=OFF
              -DMS_BUILD_TESTS=ON -DMS_BUILD_EXAMPLES=OFF
              -DMS_BUILD_BENCHMARKS=OFF -DMS_BUILD_TOOLS=OFF)
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
else
  dir=build
  # Benchmarks are built and run by benchmarks/run.sh, not by the test run.
  # Examples and tools at -O0: they are compiled so they never rot and run by the
  # guide's walk-through test, which needs no speed (-O2 would add about 5 minutes).
  # The kernels, which the tests share with the examples and tools, at -O1.
  cmake_args=(-DCMAKE_BUILD_TYPE=Release -DMS_BUILD_TESTS=ON -DMS_BUILD_BENCHMARKS=OFF
              "-DMS_EXAMPLES_OPT=${MS_EXAMPLES_OPT:--O0}" -DMS_TEST_KERNELS_OPT=-O1)
fi

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Ninja for a new build directory: it compiles a target's units while the libraries it
# links are still being built (Make waits for them), so the kernel unit and the test
# units share the two cores (the sanitizer build: 756 s with Make). A directory
# configured before keeps its generator.
if [ ! -f "$dir/CMakeCache.txt" ] && command -v ninja > /dev/null; then
  cmake_args=(-G Ninja "${cmake_args[@]}")
fi

t=$(now)
cmake -S . -B "$dir" "${cmake_args[@]}"
echo "test.sh: configure took $(elapsed "$t") s"

t=$(now)
cmake --build "$dir" -j "$jobs"
echo "test.sh: build took $(elapsed "$t") s"

t=$(now)
rc=0
if [ "$sanitize" -eq 2 ]; then
  "$dir/bin/ms_tests" "${TSAN_TESTS:-[ascend],[graph]}" "${ctest_args[@]}" || rc=$?
  echo "test.sh: tests took $(elapsed "$t") s"
  exit "$rc"
fi
ctest --test-dir "$dir" --output-on-failure -j "$jobs" "${ctest_args[@]}" || rc=$?
echo "test.sh: ctest took $(elapsed "$t") s"
exit "$rc"
