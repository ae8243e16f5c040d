#pragma once
// The 8-op chain of benchmarks/fused_chain.cpp, y = tanh(x*0.5 + 0.1)*1.5 - x/(1 + exp(x)):
// its input, the sizes and thread counts, the byte counters, and the Eigen peer, shared with
// benchmarks/fused_chain_eigen.cpp (the Eigen peer built once per x86-64 level).
// Nothing from ms is needed here.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <Eigen/Core>
#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>

namespace chain {

using AlignedVec = std::vector<float, xsimd::aligned_allocator<float, 64>>;

/// The chain's input: 4 sin(0.001 i), so exp and tanh see values in [-4, 4].
inline AlignedVec make_input(std::int64_t n) {
  AlignedVec x(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = std::sin(0.001f * static_cast<float>(i)) * 4.0f;
  return x;
}

/// Splits [0, n) into `threads` parts (multiples of 64 elements) and calls f(begin, end) on each.
template <class F>
void split(std::int64_t n, int threads, F&& f) {
  std::int64_t per = ((n + threads - 1) / threads + 63) / 64 * 64;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int t = 0; t < threads; ++t) {
    std::int64_t b = std::min(n, t * per), e = std::min(n, b + per);
    if (b < e) f(b, e);
  }
}

/// Bandwidth counts 8 bytes per element (read x, write y).
inline void set_counters(benchmark::State& state, std::int64_t n) {
  state.SetBytesProcessed(state.iterations() * n * 8);
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(n) * 8e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/// 1M and 16M floats, 1 and 2 threads.
inline void args(benchmark::internal::Benchmark* b) {
  for (std::int64_t n : {std::int64_t{1} << 20, std::int64_t{1} << 24})
    for (std::int64_t t : {1, 2}) b->Args({n, t});
  b->ArgNames({"n", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

/// The peer: an Eigen array expression on Eigen::Map<ArrayXf> (one pass; for two threads
/// each OpenMP thread evaluates it on half of the array).
inline void eigen_array(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  AlignedVec x = make_input(n), y(static_cast<std::size_t>(n));
  for (auto _ : state) {
    split(n, threads, [&](std::int64_t b, std::int64_t e) {
      Eigen::Map<const Eigen::ArrayXf> X(x.data() + b, e - b);
      Eigen::Map<Eigen::ArrayXf> Y(y.data() + b, e - b);
      Y = (X * 0.5f + 0.1f).tanh() * 1.5f - X / (1.0f + X.exp());
    });
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n);
}

}  // namespace chain
