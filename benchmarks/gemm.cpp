// GEMM throughput, float32, C (M x N) = A (M x K) @ B (K x N), row-major, at 1 and 2 threads:
// ms::matmul on its default path (ms::cpu_gemm(): oneDNN when built with it) against the
// libraries a training framework could choose, called directly in the same run:
//   openblas_gemm  OpenBLAS's sgemm_ (the BLAS ms links, when found)
//   eigen_gemm     Eigen's product on row-major maps
//   torch_gemm     LibTorch's torch::matmul, when found
// and ms_gemm_builtin, ms::matmul on ms's own GEMM (the path without oneDNN and OpenBLAS,
// MS_CPU_GEMM=builtin) against eigen_gemm (gemm_builtin_vs_eigen),
// and in bfloat16 (ms_gemm_bf16 against torch_gemm_bf16, both on bfloat16 tensors), and
// ms's float32 matmul under ms::GemmPrecision::bf16 (ms_gemm_f32_as_bf16), each against
// ms's float32 figure of the same shape.
// Shapes: the MLP training step's own products (784-256-256-10 at batch 64: forward,
// weight and input gradients) and 1024^3. Each benchmark reports GFLOPS; the summary
// prints `name value unit` lines and the ratio of ours to the fastest peer of each shape
// (time ratio: below 1 is faster; the target is at most 1.05, i.e. >= 0.95x the speed).
// At start it prints the CPU, the ISA oneDNN dispatches to and the core OpenBLAS chose.
//
//   ./gemm                                   # all shapes and thread counts
//   ./gemm --benchmark_filter='/1024/'       # one shape

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include <Eigen/Core>

#include "bench_common.hpp"
#include <ms/ms.hpp>

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

#if defined(MS_HAVE_BLAS)
extern "C" {
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c, const int* ldc);
void openblas_set_num_threads(int num_threads);
char* openblas_get_corename(void);
}
#endif

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void fill_random(float* p, std::int64_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) p[i] = d(g);
}

void set_flops(benchmark::State& s) {
  const double flops = 2.0 * static_cast<double>(s.range(0)) * static_cast<double>(s.range(1)) *
                       static_cast<double>(s.range(2));
  s.counters["GFLOPS"] =
      benchmark::Counter(flops * static_cast<double>(s.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

/// ms::matmul of random (m x k) and (k x n) operands of dtype d (float32 values rounded to d).
void ms_gemm_of(benchmark::State& s, ms::DType d) {
  const std::int64_t m = s.range(0), n = s.range(1), k = s.range(2);
  const int saved = ms::get_num_threads();
  ms::set_num_threads(static_cast<int>(s.range(3)));
  ms::Tensor<float> a = ms::AnyTensor::empty(ms::Shape{m, k}, ms::DType::f32);
  ms::Tensor<float> b = ms::AnyTensor::empty(ms::Shape{k, n}, ms::DType::f32);
  fill_random(a.data(), m * k, 1);
  fill_random(b.data(), k * n, 2);
  const ms::AnyTensor ad = ms::ops::cast(a, d), bd = ms::ops::cast(b, d);
  for (auto _ : s) {
    ms::AnyTensor c = ms::ops::matmul(ad, bd);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_flops(s);
  ms::set_num_threads(saved);
}

void ms_gemm(benchmark::State& s) { ms_gemm_of(s, ms::DType::f32); }
/// bfloat16 operands and result (oneDNN's bfloat16 primitive, float32 sums, where the CPU
/// has bfloat16 units; float32 compute and one rounding elsewhere).
void ms_gemm_bf16(benchmark::State& s) { ms_gemm_of(s, ms::DType::bf16); }

/// The built-in GEMM (kernels/gemm.hpp at the CPU level in force).
void ms_gemm_builtin(benchmark::State& s) {
  const ms::CpuGemm saved = ms::cpu_gemm();
  ms::set_cpu_gemm(ms::CpuGemm::builtin);
  ms_gemm(s);
  ms::set_cpu_gemm(saved);
}

/// float32 tensors under ms::GemmPrecision::bf16 (operands rounded to bfloat16 on the way in).
void ms_gemm_f32_as_bf16(benchmark::State& s) {
  const ms::GemmPrecision saved = ms::set_cpu_gemm_precision(ms::GemmPrecision::bf16);
  ms_gemm(s);
  ms::set_cpu_gemm_precision(saved);
}

#if defined(MS_HAVE_BLAS)
void openblas_gemm(benchmark::State& s) {
  const int m = static_cast<int>(s.range(0)), n = static_cast<int>(s.range(1)), k = static_cast<int>(s.range(2));
  openblas_set_num_threads(static_cast<int>(s.range(3)));
  std::vector<float> a(static_cast<std::size_t>(m) * k), b(static_cast<std::size_t>(k) * n),
      c(static_cast<std::size_t>(m) * n);
  fill_random(a.data(), m * k, 1);
  fill_random(b.data(), k * n, 2);
  const float one = 1, zero = 0;
  for (auto _ : s) {
    // Row-major C = A B is column-major C^T = B^T A^T.
    sgemm_("N", "N", &n, &m, &k, &one, b.data(), &n, a.data(), &k, &zero, c.data(), &n);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(s);
}
#endif

void eigen_gemm(benchmark::State& s) {
  const std::int64_t m = s.range(0), n = s.range(1), k = s.range(2);
  Eigen::setNbThreads(static_cast<int>(s.range(3)));
  RowMatrix a(m, k), b(k, n), c(m, n);
  fill_random(a.data(), m * k, 1);
  fill_random(b.data(), k * n, 2);
  for (auto _ : s) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(s);
}

#ifdef MS_HAVE_TORCH
/// torch::matmul of random (m x k) and (k x n) operands of dtype d (float32 values converted).
void torch_gemm_of(benchmark::State& s, torch::ScalarType d) {
  const std::int64_t m = s.range(0), n = s.range(1), k = s.range(2);
  const int saved = torch::get_num_threads();
  torch::set_num_threads(static_cast<int>(s.range(3)));
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::empty({m, k}, torch::kFloat32), b = torch::empty({k, n}, torch::kFloat32);
  fill_random(a.data_ptr<float>(), m * k, 1);
  fill_random(b.data_ptr<float>(), k * n, 2);
  const torch::Tensor ad = a.to(d), bd = b.to(d);
  for (auto _ : s) {
    torch::Tensor c = torch::matmul(ad, bd);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  set_flops(s);
  torch::set_num_threads(saved);
}

void torch_gemm(benchmark::State& s) { torch_gemm_of(s, torch::kFloat32); }
void torch_gemm_bf16(benchmark::State& s) { torch_gemm_of(s, torch::kBFloat16); }
#endif

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("gemm: CPU %s; ms path %s; oneDNN ISA %s; bfloat16 units %s", cpu_model().c_str(),
              std::string(ms::cpu_gemm_name(ms::cpu_gemm())).c_str(), ms::dnnl_cpu_isa().c_str(),
              ms::dnnl_bf16_native() ? "yes" : "no");
#if defined(MS_HAVE_BLAS)
  std::printf("; OpenBLAS core %s", openblas_get_corename());
#endif
  const char* ct = std::getenv("OPENBLAS_CORETYPE");
  std::printf("; OPENBLAS_CORETYPE %s\n", ct ? ct : "unset");
  struct Shape {
    int m, n, k;
  };
  // The MLP's products at batch 64 (forward, weight gradient, input gradient), then 1024^3.
  const Shape shapes[] = {{64, 256, 784}, {256, 784, 64}, {64, 784, 256}, {64, 256, 256},
                          {256, 256, 64}, {1024, 1024, 1024}};
  // Interleaved (ours and every peer for each shape) so that outside load hits all alike.
  for (int threads : {1, 2}) {
    for (const Shape& sh : shapes) {
      auto add = [&](const char* name, void (*fn)(benchmark::State&)) {
        benchmark::RegisterBenchmark(name, fn)
            ->Args({sh.m, sh.n, sh.k, threads})
            ->ArgNames({"m", "n", "k", "threads"})
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      };
      add("ms_gemm", ms_gemm);
#if defined(MS_HAVE_BLAS)
      add("openblas_gemm", openblas_gemm);
#endif
      add("eigen_gemm", eigen_gemm);
      add("ms_gemm_builtin", ms_gemm_builtin);
#ifdef MS_HAVE_TORCH
      add("torch_gemm", torch_gemm);
#endif
      add("ms_gemm_bf16", ms_gemm_bf16);
      add("ms_gemm_f32_as_bf16", ms_gemm_f32_as_bf16);
#ifdef MS_HAVE_TORCH
      add("torch_gemm_bf16", torch_gemm_bf16);
#endif
    }
  }
  ms_bench::compare_fastest("ms_gemm", {"openblas_gemm", "eigen_gemm", "torch_gemm"}, "gemm");
  ms_bench::compare("ms_gemm", "eigen_gemm", "gemm_vs_eigen");
  ms_bench::compare("ms_gemm_builtin", "eigen_gemm", "gemm_builtin_vs_eigen");
#ifdef MS_HAVE_TORCH
  ms_bench::compare("ms_gemm", "torch_gemm", "gemm_vs_torch");
#endif
#ifdef MS_HAVE_TORCH
  ms_bench::compare("ms_gemm_bf16", "torch_gemm_bf16", "gemm_bf16_vs_torch_bf16");
#endif
  ms_bench::compare("ms_gemm_bf16", "ms_gemm", "gemm_bf16_vs_ms_f32");
  ms_bench::compare("ms_gemm_f32_as_bf16", "ms_gemm", "gemm_f32_bf16_precision_vs_f32");
  ms_bench::counter_unit("GFLOPS", "GFLOP/s");
  return ms_bench::main(argc, argv);
}
