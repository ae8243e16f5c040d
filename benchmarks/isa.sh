#!/usr/bin/env bash
# The CPU levels of the elementwise kernels, measured: benchmarks/isa/isa_bench.cpp built
# twice in one run as a user's project builds ms (add_subdirectory, ms::ms, -O2):
#   default   no -march (what a find_package/add_subdirectory consumer gets by default),
#   native    -march=native,
# each run at every level the program holds and the CPU runs. Prints each build's lines,
# then `ratio <name> default/native X.XX`: the default build at its best level over the
# faster of the native build's best level and its baseline (-march=native) kernels
# (target: <= 1.1).
#
#   bash benchmarks/isa.sh
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
work=${ISA_BENCH_DIR:-build-isa-bench}
mkdir -p "$work"
grep -m1 "model name" /proc/cpuinfo | sed 's/^/isa: CPU: /'
for build in default native; do
  flags="-O2"
  [ "$build" = native ] && flags="-O2 -march=native"
  cmake -S benchmarks/isa -B "$work/$build" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=$flags" \
        -DMS_SOURCE_DIR="$src" > "$work/$build.configure.log"
  cmake --build "$work/$build" -j "${JOBS:-$(nproc)}" --target isa_bench > "$work/$build.build.log"
  OMP_NUM_THREADS=1 "$work/$build/isa_bench" | sed "s/^isa /isa $build /" | tee "$work/$build.txt"
done
best=$(grep -h "^isa default " "$work/default.txt" | awk '{print $3}' | tail -1)
for name in chain_16M eager_add_16M eager_add_1k sum_16M sum_cols_16M softmax_16M xent_4096x1000 adam_269k \
            transpose_16M gather_4096x1024 isum_16M mse_4096x1000 nll_4096x1000 embedding_4096x256 dropout_16M \
            resize_bilinear gemm_builtin_256x784x64; do
  d=$(awk -v b="$best" -v n="$name" '$3 == b && $4 == n { print $5 }' "$work/default.txt")
  nat=$(awk -v b="$best" -v n="$name" '$3 == b && $4 == n { print $5 }' "$work/native.txt")
  nat_base=$(awk -v n="$name" '$3 == "baseline" && $4 == n { print $5 }' "$work/native.txt")
  awk -v n="$name" -v d="$d" -v nat="$nat" -v nb="$nat_base" -v b="$best" \
    'BEGIN { best = nat < nb ? nat : nb
             printf "ratio %s default/native %.2f (default at %s %.3f; native at %s %.3f, native baseline %.3f)\n", n, d / best, b, d, b, nat, nb }'
done
