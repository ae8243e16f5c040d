// A fused reduction: the row sums of squares, sum(x * x, axis 1), of a (rows, 4096) float
// matrix (64 rows: 1 MiB; 1024 rows: 16 MiB), with 1 and 2 threads.
//   ms_sumsq/<rows>/<threads>     captured and compiled: one fused[mul+sum] node that never
//                                 writes the product; it accumulates each row in double
//   eigen_sumsq/<rows>/<threads>  (a * a).rowwise().sum() on an Eigen::Map (float
//                                 accumulation; OpenMP splits the rows for 2 threads)
//   torch_sumsq/<rows>/<threads>  LibTorch eager (x * x).sum(1) (when built with MS_HAVE_TORCH)
// Bandwidth counts 4 bytes per element (the matrix is read once).
//
// Prints Google Benchmark's table, then `name value unit` lines and `ratio` lines
// (ours/peer time; below 1: ours is faster).

#include <cstdint>

#include <Eigen/Core>

#include <ms/ms.hpp>

#include "bench_common.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr std::int64_t kCols = 4096;

void set_bytes(benchmark::State& state, std::int64_t rows) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * rows * kCols * 4);
}

void ms_sumsq(benchmark::State& state) {
  const std::int64_t rows = state.range(0);
  const int saved = ms::get_num_threads();
  ms::set_num_threads(static_cast<int>(state.range(1)));
  ms::manual_seed(0);
  ms::Tensor<float> x = ms::randn<float>({rows, kCols});
  auto jitted = ms::jit([](const ms::Tensor<float>& a) { return ms::sum(a * a, {1}); });
  jitted(x);  // the trace
  for (auto _ : state) {
    ms::Tensor<float> r = jitted(x);
    benchmark::DoNotOptimize(r.raw_data());
  }
  set_bytes(state, rows);
  ms::set_num_threads(saved);
}

void eigen_sumsq(benchmark::State& state) {
  const std::int64_t rows = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  using Mat = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Mat a = Mat::Random(rows, kCols);
  Eigen::ArrayXf out(rows);
  for (auto _ : state) {
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      std::int64_t lo = 0, hi = rows;
#if defined(_OPENMP)
      const std::int64_t n = omp_get_num_threads(), t = omp_get_thread_num();
      lo = rows * t / n;
      hi = rows * (t + 1) / n;
#endif
      out.segment(lo, hi - lo) = (a.middleRows(lo, hi - lo) * a.middleRows(lo, hi - lo)).rowwise().sum();
    }
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, rows);
}

void args(benchmark::internal::Benchmark* b) {
  for (int rows : {64, 1024})
    for (int threads : {1, 2}) b->Args({rows, threads});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(ms_sumsq)->Apply(args);
BENCHMARK(eigen_sumsq)->Apply(args);

#ifdef MS_HAVE_TORCH
void torch_sumsq(benchmark::State& state) {
  const std::int64_t rows = state.range(0);
  const int saved = torch::get_num_threads();
  torch::set_num_threads(static_cast<int>(state.range(1)));
  torch::Tensor x = torch::randn({rows, kCols});
  for (auto _ : state) {
    torch::Tensor r = (x * x).sum(1);
    benchmark::DoNotOptimize(r.data_ptr());
  }
  set_bytes(state, rows);
  torch::set_num_threads(saved);
}
BENCHMARK(torch_sumsq)->Apply(args);
#endif

}  // namespace

int main(int argc, char** argv) {
  ms_bench::compare("ms_sumsq", "eigen_sumsq", "row sums of squares vs Eigen");
  ms_bench::compare("ms_sumsq", "torch_sumsq", "row sums of squares vs LibTorch");
  return ms_bench::main(argc, argv);
}
