// Transposed operands: a contiguous copy of a transposed 4096 x 4096 float matrix
// (x.t().contiguous()) and an elementwise op on it (exp(x.t())), at 1 and 2 threads, in ms
// against LibTorch in the same run. The source is read across its rows, so the copy is
// bound by how the kernel walks memory, not by arithmetic.
#include <cmath>
#include <cstdint>

#include <ms/ms.hpp>

#include "bench_common.hpp"

#if defined(MS_HAVE_TORCH)
#include <torch/torch.h>
#endif

namespace {
constexpr std::int64_t kN = 4096;

ms::Tensor<float> matrix() {
  ms::Tensor<float> t = ms::AnyTensor::empty(ms::Shape{kN, kN}, ms::DType::f32);
  for (std::int64_t i = 0; i < kN * kN; ++i) t.data()[i] = std::sin(0.001f * static_cast<float>(i));
  return t;
}

template <class F>
void ms_run(benchmark::State& state, F&& f) {
  const int saved = ms::get_num_threads();
  ms::set_num_threads(static_cast<int>(state.range(0)));
  const ms::Tensor<float> x = matrix();
  for (auto _ : state) {
    ms::Tensor<float> y = f(x);
    benchmark::DoNotOptimize(y.raw_data());
  }
  state.SetBytesProcessed(state.iterations() * kN * kN * 8);
  ms::set_num_threads(saved);
}

void ms_transpose_copy(benchmark::State& s) { ms_run(s, [](const ms::Tensor<float>& x) { return x.t().contiguous(); }); }
void ms_transpose_exp(benchmark::State& s) { ms_run(s, [](const ms::Tensor<float>& x) { return ms::exp(x.t()); }); }

#if defined(MS_HAVE_TORCH)
template <class F>
void torch_run(benchmark::State& state, F&& f) {
  const int saved = torch::get_num_threads();
  torch::set_num_threads(static_cast<int>(state.range(0)));
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::sin(torch::arange(0, kN * kN, torch::kFloat32) * 0.001f).reshape({kN, kN});
  for (auto _ : state) {
    at::Tensor y = f(x);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kN * kN * 8);
  torch::set_num_threads(saved);
}
void torch_transpose_copy(benchmark::State& s) { torch_run(s, [](const at::Tensor& x) { return x.t().contiguous(); }); }
void torch_transpose_exp(benchmark::State& s) { torch_run(s, [](const at::Tensor& x) { return torch::exp(x.t()); }); }
#endif

}  // namespace

int main(int argc, char** argv) {
  for (int threads : {1, 2}) {
    auto add = [&](const char* name, void (*fn)(benchmark::State&)) {
      benchmark::RegisterBenchmark(name, fn)->Arg(threads)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
    };
    add("ms_transpose_copy", ms_transpose_copy);
#if defined(MS_HAVE_TORCH)
    add("torch_transpose_copy", torch_transpose_copy);
#endif
    add("ms_transpose_exp", ms_transpose_exp);
#if defined(MS_HAVE_TORCH)
    add("torch_transpose_exp", torch_transpose_exp);
#endif
  }
  ms_bench::compare("ms_transpose_copy", "torch_transpose_copy", "transpose_copy_4096");
  ms_bench::compare("ms_transpose_exp", "torch_transpose_exp", "transpose_exp_4096");
  return ms_bench::main(argc, argv);
}
