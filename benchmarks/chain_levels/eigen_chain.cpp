// The Eigen peer of benchmarks/fused_chain.cpp alone, built once per x86-64 level
// (fused_chain_eigen_sse4, _avx2, _avx512: -march=x86-64-v2, -v3, -v4), so that
// benchmarks/fused_chain_levels.sh compares each CPU level of ms's kernels with Eigen
// compiled for the same instructions. Prints Google Benchmark's table, then
// `eigen_array/n:N/threads:T/real_time TIME us` lines.

#include "bench_common.hpp"
#include "chain_common.hpp"

namespace {

void eigen_array(benchmark::State& state) { chain::eigen_array(state); }
BENCHMARK(eigen_array)->Apply(chain::args);

}  // namespace

MS_BENCH_MAIN()
