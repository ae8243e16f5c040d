// The Adam update alone, on the parameters of the Fashion-MNIST MLP (784-256-256-10: six
// tensors, 269,322 floats), with the gradients given, 1 and 2 threads:
//   ms_adam/<threads>     optim::Adam::step captured by ms::jit and replayed: one
//                         adam_update node per parameter, writing p, m and v in place
//   hand_adam/<threads>   a hand-written xsimd loop with the same formula (which the compiler
//                         may contract into FMAs), its scalars in registers (OpenMP splits
//                         each tensor for 2 threads)
//   torch_adam/<threads>  LibTorch's torch::optim::Adam::step with the gradients set
//                         (when built with MS_HAVE_TORCH)
// All three touch the same 4.2 MiB (p, g, m, v), which stays in the last-level cache
// between iterations here; inside a training step the update also waits for memory.
//
// Prints Google Benchmark's table, then `name value unit` lines and `ratio` lines
// (ours/peer time; below 1: ours is faster).

#include <cstdint>
#include <vector>

#include <xsimd/xsimd.hpp>

#include <ms/ms.hpp>

#include "bench_common.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

const std::vector<std::vector<std::int64_t>> kShapes = {{256, 784}, {256}, {256, 256}, {256}, {10, 256}, {10}};
constexpr double kLr = 1e-3, kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

std::int64_t numel_of(const std::vector<std::int64_t>& s) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

void ms_adam(benchmark::State& state) {
  const int saved = ms::get_num_threads();
  ms::set_num_threads(static_cast<int>(state.range(0)));
  ms::manual_seed(0);
  std::vector<ms::Tensor<float>> params, grads;
  for (const auto& s : kShapes) {
    params.push_back(ms::randn<float>(ms::Shape(s)));
    params.back().requires_grad_(true);
    grads.push_back(ms::rand<float>(ms::Shape(s)));
  }
  ms::optim::Adam opt(params, kLr);
  using T = const ms::Tensor<float>&;
  auto step = [&](T g0, T g1, T g2, T g3, T g4, T g5) {
    opt.step({g0, g1, g2, g3, g4, g5});
    return std::vector<ms::Tensor<float>>{};
  };
  auto jitted = ms::jit(step);
  jitted(grads[0], grads[1], grads[2], grads[3], grads[4], grads[5]);  // the trace
  for (auto _ : state) {
    jitted(grads[0], grads[1], grads[2], grads[3], grads[4], grads[5]);
    benchmark::DoNotOptimize(params[0].raw_data());
  }
  state.counters["nodes"] = static_cast<double>(jitted.executable()->graph().count("adam_update"));
  ms::set_num_threads(saved);
}

/// p, g, m, v of one parameter.
struct HandParam {
  std::vector<float> p, g, m, v;
};

void hand_adam(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<HandParam> ps;
  for (const auto& s : kShapes) {
    const auto n = static_cast<std::size_t>(numel_of(s));
    ps.push_back({std::vector<float>(n, 0.5f), std::vector<float>(n, 0.25f), std::vector<float>(n, 0.0f),
                  std::vector<float>(n, 0.0f)});
  }
  using B = xsimd::batch<float>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  std::int64_t t = 0;
  for (auto _ : state) {
    ++t;
    // The bias corrections, as optim::Adam computes them (in float, from the step count).
    const float step_size = static_cast<float>(kLr) / (1.0f - std::pow(static_cast<float>(kBeta1), static_cast<float>(t)));
    const float bc2_sqrt = std::sqrt(1.0f - std::pow(static_cast<float>(kBeta2), static_cast<float>(t)));
    const float b1 = static_cast<float>(kBeta1), c1 = static_cast<float>(1.0 - kBeta1);
    const float b2 = static_cast<float>(kBeta2), c2 = static_cast<float>(1.0 - kBeta2), eps = static_cast<float>(kEps);
    for (HandParam& hp : ps) {
      float *p = hp.p.data(), *m = hp.m.data(), *v = hp.v.data();
      const float* g = hp.g.data();
      const auto n = static_cast<std::int64_t>(hp.p.size());
      const std::int64_t chunks = (n + 4095) / 4096;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && chunks > 1)
      for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t lo = c * 4096, hi = std::min(n, lo + 4096);
        std::int64_t i = lo;
        for (; i + W <= hi; i += W) {
          B gi = B::load_unaligned(g + i);
          B mi = B::load_unaligned(m + i) * b1 + gi * c1;
          B vi = B::load_unaligned(v + i) * b2 + (gi * gi) * c2;
          B pi = B::load_unaligned(p + i) - (mi / (xsimd::sqrt(vi) / bc2_sqrt + eps)) * step_size;
          pi.store_unaligned(p + i);
          mi.store_unaligned(m + i);
          vi.store_unaligned(v + i);
        }
        for (; i < hi; ++i) {
          m[i] = m[i] * b1 + g[i] * c1;
          v[i] = v[i] * b2 + (g[i] * g[i]) * c2;
          p[i] = p[i] - (m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps)) * step_size;
        }
      }
    }
    benchmark::DoNotOptimize(ps[0].p.data());
  }
}

void thread_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) b->Arg(threads);
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(ms_adam)->Apply(thread_args);
BENCHMARK(hand_adam)->Apply(thread_args);

#ifdef MS_HAVE_TORCH
void torch_adam(benchmark::State& state) {
  const int saved = torch::get_num_threads();
  torch::set_num_threads(static_cast<int>(state.range(0)));
  torch::manual_seed(0);
  std::vector<torch::Tensor> params;
  for (const auto& s : kShapes) {
    params.push_back(torch::randn(s).requires_grad_(true));
    params.back().mutable_grad() = torch::rand(s);
  }
  torch::optim::Adam opt(params, torch::optim::AdamOptions(kLr).betas({kBeta1, kBeta2}).eps(kEps));
  opt.step();
  for (auto _ : state) {
    opt.step();
    benchmark::DoNotOptimize(params[0].data_ptr());
  }
  torch::set_num_threads(saved);
}
BENCHMARK(torch_adam)->Apply(thread_args);
#endif

}  // namespace

int main(int argc, char** argv) {
  ms_bench::compare("ms_adam", "hand_adam", "adam update vs a hand-written xsimd loop");
  ms_bench::compare("ms_adam", "torch_adam", "adam update vs LibTorch");
  return ms_bench::main(argc, argv);
}
