// GEMM throughput, float32, square N x N @ N x N for N = 256, 512, 1024, at 1 and 2
// threads: ms::matmul against Eigen called directly (the same Eigen, flags and run; row-major
// matrices like ms's tensors) and, when MS_HAVE_TORCH is defined, LibTorch's torch::matmul.
// Each benchmark reports a GFLOPS counter (2 N^3 flops per product); the summary prints
// `name value unit` lines and the ratios ms/Eigen and ms/torch (time ratio: below 1 is faster).
//
//   ./gemm                                   # all sizes and thread counts
//   ./gemm --benchmark_filter='/1024/'       # one size

#include <cstdint>
#include <random>

#include <Eigen/Core>

#include "bench_common.hpp"
#include <ms/ms.hpp>

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void fill_random(float* p, std::int64_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) p[i] = d(g);
}

void set_flops(benchmark::State& s, std::int64_t n) {
  s.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(n) * static_cast<double>(n) *
                                                static_cast<double>(n) * static_cast<double>(s.iterations()) / 1e9,
                                            benchmark::Counter::kIsRate);
}

void ms_matmul(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  ms::set_num_threads(static_cast<int>(s.range(1)));
  ms::Tensor<float> a = ms::AnyTensor::empty(ms::Shape{n, n}, ms::DType::f32);
  ms::Tensor<float> b = ms::AnyTensor::empty(ms::Shape{n, n}, ms::DType::f32);
  fill_random(a.data(), n * n, 1);
  fill_random(b.data(), n * n, 2);
  for (auto _ : s) {
    ms::Tensor<float> c = ms::matmul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(s, n);
}

void eigen_matmul(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  Eigen::setNbThreads(static_cast<int>(s.range(1)));
  RowMatrix a(n, n), b(n, n), c(n, n);
  fill_random(a.data(), n * n, 1);
  fill_random(b.data(), n * n, 2);
  for (auto _ : s) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(s, n);
}

#ifdef MS_HAVE_TORCH
void torch_matmul(benchmark::State& s) {
  const std::int64_t n = s.range(0);
  torch::set_num_threads(static_cast<int>(s.range(1)));
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::empty({n, n}, torch::kFloat32), b = torch::empty({n, n}, torch::kFloat32);
  fill_random(a.data_ptr<float>(), n * n, 1);
  fill_random(b.data_ptr<float>(), n * n, 2);
  for (auto _ : s) {
    torch::Tensor c = torch::matmul(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_flops(s, n);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  // Interleaved (ms, Eigen, torch for each size) so that load from other processes hits all alike.
  for (int threads : {1, 2}) {
    for (int n : {256, 512, 1024}) {
      auto add = [&](const char* name, void (*fn)(benchmark::State&)) {
        benchmark::RegisterBenchmark(name, fn)
            ->Args({n, threads})
            ->ArgNames({"n", "threads"})
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      };
      add("ms_matmul", ms_matmul);
      add("eigen_matmul", eigen_matmul);
#ifdef MS_HAVE_TORCH
      add("torch_matmul", torch_matmul);
#endif
    }
  }
  ms_bench::compare("ms_matmul", "eigen_matmul", "gemm_vs_eigen");
#ifdef MS_HAVE_TORCH
  ms_bench::compare("ms_matmul", "torch_matmul", "gemm_vs_torch");
#endif
  ms_bench::counter_unit("GFLOPS", "GFLOP/s");
  return ms_bench::main(argc, argv);
}
