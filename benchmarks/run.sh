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
# benchmarks themselves and for ms::ms's kernel library); only the benchmark programs are built here.
dir=${BUILD_DIR:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMS_BUILD_BENCHMARKS=ON -DMS_KERNELS_OPT=-O3
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

# The peers at their best: some machines set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) in
# the environment, which holds OpenBLAS to older kernels (AVX2 on an AVX-512 machine).
# Unset here, for the benchmark programs alone (never in the tests or CI). Each program
# that uses OpenBLAS prints the core it then chose, and oneDNN's ISA.
echo "bench: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} OPENBLAS_L2_SIZE=${OPENBLAS_L2_SIZE:-unset} in the environment; unset for the benchmarks"
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
# OpenBLAS 0.3.21 (Debian 12) does not know CPUs newer than it and then falls back to its
# SSE3 "Prescott" kernels: 25-32 GFLOP/s against 125-135 with its AVX-512 kernels on an
# AVX-512 machine here. When its own pick is such a fallback, name the best core it has
# for the instructions the CPU reports.
openblas_core() {
  python3 -c "import ctypes; l = ctypes.CDLL('libopenblas.so.0'); l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())" 2>/dev/null || echo unknown
}
core=$(openblas_core)
case "$core" in
  Prescott|Katmai|Coppermine|Northwood|Core2|Penryn|Dunnington|Nehalem|Atom|unknown)
    if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo; then export OPENBLAS_CORETYPE=Haswell; fi ;;
esac
echo "bench: OpenBLAS core: detected $core; using $(openblas_core)${OPENBLAS_CORETYPE:+ (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE)}"
echo "bench: CPU $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); flags: $(grep -m1 '^flags' /proc/cpuinfo | grep -oE 'avx512f|avx512bw|avx512_bf16|amx_tile|avx2|fma' | sort -u | tr '\n' ' ')"

rc=0
for p in "${programs[@]}"; do
  echo
  echo "=== $p ==="
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
  "$dir/bin/$p" ${BENCH_ARGS:-} || rc=$?
done
exit "$rc"
