#!/usr/bin/env bash
# Builds the benchmarks (-O3, -march=native) and runs each one.
# Each program prints Google Benchmark's table, then `name value unit` lines
# and `ratio name ours/peer X.XX` lines for ours against the peer (Eigen,
# LibTorch) measured in the same run.
#
#   bash benchmarks/run.sh                    # all benchmarks
#   bash benchmarks/run.sh bench_matmul       # only these programs
#   BENCH_ARGS="--benchmark_filter=add" bash benchmarks/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --bench

if [ $# -gt 0 ]; then
  programs=("$@")
else
  programs=()
  for src in benchmarks/*.cpp; do
    [ -e "$src" ] || continue
    programs+=("$(basename "${src%.cpp}")")
  done
fi
if [ ${#programs[@]} -eq 0 ]; then
  echo "bench: no benchmarks/*.cpp yet"
  exit 0
fi

# The same build tree as scripts/test.sh (Release; -O3 -march=native for the
# benchmarks themselves); only the benchmark programs are built here.
dir=${BUILD_DIR:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMS_BUILD_BENCHMARKS=ON
cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target "${programs[@]}"

# LibTorch peer: glibc's malloc returns big blocks to the OS at every free
# unless told otherwise, which costs LibTorch (and us) page faults on each
# allocation of a large tensor. These settings keep such blocks around. Both
# sides run in the same process, so both get them.
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296
echo "bench: GLIBC_TUNABLES=$GLIBC_TUNABLES"

# LibTorch calls BLAS through libblas.so.3. Pick OpenBLAS (OpenMP build) for
# this run without touching update-alternatives.
openblas_dir=/usr/lib/x86_64-linux-gnu/openblas-openmp
if [ -e "$openblas_dir/libblas.so.3" ]; then
  export LD_LIBRARY_PATH="$openblas_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
torch_lib=/usr/lib/x86_64-linux-gnu/libtorch_cpu.so
if [ -e "$torch_lib" ]; then
  blas=$(ldd "$torch_lib" | awk '$1 == "libblas.so.3" { print $3 }')
  echo "bench: LibTorch BLAS: libblas.so.3 => ${blas:-not found} ($(readlink -f "${blas:-/dev/null}"))"
  echo "bench: LibTorch threads: OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} (cores: $(nproc))"
else
  echo "bench: LibTorch not installed: benchmarks run without the LibTorch peer"
fi

rc=0
for p in "${programs[@]}"; do
  echo
  echo "=== $p ==="
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
  "$dir/bin/$p" ${BENCH_ARGS:-} || rc=$?
done
exit "$rc"
