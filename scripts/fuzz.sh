#!/usr/bin/env bash
# Fuzzes the frozen-model loader and the ONNX importer with libFuzzer (clang, AddressSanitizer + UBSan) for a
# bounded time, starting from the seed corpus tests/fuzz/corpus (on a copy of it).
#
#   bash scripts/fuzz.sh                     # 60 s, with ASan + UBSan
#   MS_FUZZ_SECONDS=600 bash scripts/fuzz.sh # longer
#   MS_FUZZ_SANITIZERS= bash scripts/fuzz.sh # libFuzzer alone: compiles 4x faster (CI)
#
# Builds in build-fuzz/ (clang) and runs the test labelled "fuzz" with ctest, which
# fails on any crash, sanitizer report or exception other than ms::IOError.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --fuzz

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Ninja for a new build directory, as in scripts/test.sh.
generator=()
if [ ! -f build-fuzz/CMakeCache.txt ] && command -v ninja > /dev/null; then generator=(-G Ninja); fi

t=$(now)
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
  -DMS_BUILD_TESTS=ON -DMS_BUILD_FUZZERS=ON -DMS_FUZZ_SECONDS="${MS_FUZZ_SECONDS:-60}" \
  -DMS_FUZZ_SANITIZERS="${MS_FUZZ_SANITIZERS-address,undefined}" \
  -DMS_BUILD_EXAMPLES=OFF -DMS_BUILD_BENCHMARKS=OFF -DMS_BUILD_TOOLS=OFF -DMS_NATIVE_ARCH=OFF
echo "fuzz.sh: configure took $(elapsed "$t") s"

t=$(now)
targets=(frozen_loader_fuzz)
# The ONNX importer's target exists when libonnx, protobuf and the ONNX test data are installed.
# (The target list is read whole first: grep -q would close the pipe early, and under
# pipefail the build tool's SIGPIPE would read as "not there".)
all_targets=$(cmake --build build-fuzz --target help)
if grep -q onnx_loader_fuzz <<< "$all_targets"; then targets+=(onnx_loader_fuzz); fi
cmake --build build-fuzz -j "${JOBS:-$(nproc)}" --target "${targets[@]}"
echo "fuzz.sh: build took $(elapsed "$t") s"

t=$(now)
rc=0
# The fuzzers side by side: each is one process on one core.
ctest --test-dir build-fuzz --output-on-failure -L fuzz -j "${JOBS:-$(nproc)}" || rc=$?
echo "fuzz.sh: ctest took $(elapsed "$t") s"
exit "$rc"
