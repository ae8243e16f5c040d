// Eager dispatch overhead: ms::add of two 16-float tensors, in ns per op, against LibTorch's
// torch::add of two 16-float at::Tensor, measured in the same run. At this size the op is
// all overhead (inference, allocation, kernel selection, hooks), which is what eager code
// made of many small ops pays.
#include <ms/ms.hpp>

#include "bench_common.hpp"

#if defined(MS_HAVE_TORCH)
#include <torch/torch.h>
#endif

namespace {
constexpr std::int64_t kN = 16;

ms::Tensor<float> filled(float start) {
  ms::Tensor<float> t = ms::AnyTensor::empty(ms::Shape{kN}, ms::DType::f32);
  for (std::int64_t i = 0; i < kN; ++i) t.data()[i] = start + static_cast<float>(i);
  return t;
}

/// The typed API: ms::add(Tensor<float>, Tensor<float>).
void ms_add(benchmark::State& state) {
  ms::Tensor<float> a = filled(1), b = filled(2);
  for (auto _ : state) {
    ms::Tensor<float> c = ms::add(a, b);
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetItemsProcessed(state.iterations());
}

/// The operator spelling: a + b.
void ms_add_operator(benchmark::State& state) {
  ms::Tensor<float> a = filled(1), b = filled(2);
  for (auto _ : state) {
    ms::Tensor<float> c = a + b;
    benchmark::DoNotOptimize(c.raw_data());
  }
  state.SetItemsProcessed(state.iterations());
}

/// The same op with the profiler recording it: the cost of one event (two clock reads,
/// a lock, a record). With no profiler installed the hook is one branch per op.
void ms_add_profiled(benchmark::State& state) {
  ms::Tensor<float> a = filled(1), b = filled(2);
  ms::Profiler prof;
  ms::ProfilerScope on(prof);
  std::int64_t since_clear = 0;
  for (auto _ : state) {
    ms::Tensor<float> c = ms::add(a, b);
    benchmark::DoNotOptimize(c.raw_data());
    if (++since_clear == (1 << 16)) {  // keep the event list bounded, as a real session would be
      state.PauseTiming();
      prof.clear();
      since_clear = 0;
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}

#if defined(MS_HAVE_TORCH)
void torch_add(benchmark::State& state) {
  at::Tensor a = torch::arange(1, 1 + kN, torch::kFloat32), b = torch::arange(2, 2 + kN, torch::kFloat32);
  for (auto _ : state) {
    at::Tensor c = torch::add(a, b);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(torch_add);
#endif

}  // namespace

BENCHMARK(ms_add);
BENCHMARK(ms_add_operator);
BENCHMARK(ms_add_profiled);

int main(int argc, char** argv) {
  ms_bench::compare("ms_add", "torch_add", "eager_add_16_floats");
  ms_bench::compare("ms_add_operator", "torch_add", "eager_add_operator_16_floats");
  ms_bench::compare("ms_add_profiled", "ms_add", "profiler_on_vs_off");
  return ms_bench::main(argc, argv);
}
