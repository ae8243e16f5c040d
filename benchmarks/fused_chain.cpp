// A fused elementwise chain: y = tanh(x*0.5 + 0.1)*1.5 - x/(1 + exp(x)) on 1M and 16M
// floats with 1 and 2 threads. Ours: the formula written with ms ops, captured and
// compiled (fusion makes it one node that evaluates 1,024-element blocks in L1, in two
// passes: tanh with its scalar steps, then exp with a scalar and two binary steps), then
// replayed. ms_codegen: the same graph compiled with CompileOptions::codegen (the fused
// program generated as C++ and compiled into one loop, cached under MS_CODEGEN_CACHE; the
// first run compiles it, in a few seconds before the timing starts). Peers in the same run:
//   xsimd_hand   a hand-fused loop over xsimd::batch<float> (one pass, the same formula),
//   hand_same_math  the same loop with ms's own tanh and exp (ms::simd::tanh is Eigen's
//                rational tanh for floats, ms::simd::exp a float exp 1.12-1.16x as fast
//                as xsimd's): what a one-pass loop gains from the faster math alone,
//                beside what fusion costs,
//   eigen_array  an Eigen array expression on Eigen::Map<ArrayXf> (one pass; for two
//                threads each OpenMP thread evaluates it on half of the array), built
//                with -march=native like this program; benchmarks/fused_chain_levels.sh
//                compares each CPU level of ours with Eigen built for that level,
//   torch_eager  LibTorch eager ops (when built with MS_HAVE_TORCH).
// Also ms_unfused (the same graph at opt_level 1: eight kernels, for reference).
// Bandwidth counts 8 bytes per element (read x, write y). Targets: ours >= 0.9x the
// hand-fused xsimd loop and >= 1.0x Eigen (ratios printed for both ms_fused and ms_codegen). Also prints the planned arena peak over its
// lower bound for the benchmark graphs (target <= 1.1).
//
// Prints Google Benchmark's table, then `name value unit` lines and `ratio` lines
// (ours/peer time; below 1: ours is faster).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <Eigen/Core>
#include <xsimd/xsimd.hpp>

#include <ms/ms.hpp>
#include <ms/backend/cpu/kernels/simd.hpp>  // ms::simd, for the same formula written by hand

#include "bench_common.hpp"
#include "chain_common.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

using chain::AlignedVec;
using chain::make_input;
using chain::set_counters;
using chain::split;

ms::AnyTensor as_tensor(const AlignedVec& v) {
  ms::AnyTensor t = ms::AnyTensor::empty(ms::Shape{static_cast<std::int64_t>(v.size())}, ms::DType::f32);
  std::copy(v.begin(), v.end(), static_cast<float*>(t.raw_data()));
  return t;
}

ms::AnyTensor formula_ms(const ms::AnyTensor& x) {
  namespace o = ms::ops;
  return o::sub(o::mul(o::tanh(o::add(o::mul(x, 0.5), 0.1)), 1.5), o::div(x, o::add(1.0, o::exp(x))));
}

ms::backend::Executable compile_formula(std::int64_t n, int opt_level, bool codegen = false) {
  ms::AnyTensor x = ms::AnyTensor::empty(ms::Shape{n}, ms::DType::f32);
  std::fill_n(static_cast<float*>(x.raw_data()), n, 0.0f);
  ms::graph::Capture cap;
  cap.input(x);
  ms::AnyTensor y = formula_ms(x);
  cap.output(y);
  ms::backend::CompileOptions opt;
  opt.passes.opt_level = opt_level;
  opt.codegen = codegen;
  return ms::backend::compile(cap.finish(), opt);
}

template <class B>
inline B formula_simd(B x) {
  return xsimd::tanh(x * B(0.5f) + B(0.1f)) * B(1.5f) - x / (B(1.0f) + xsimd::exp(x));
}

template <class B>
inline B formula_same_math(B x) {
  return ms::simd::tanh(x * B(0.5f) + B(0.1f)) * B(1.5f) - x / (B(1.0f) + ms::simd::exp(x));
}

void ms_fused(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ms::set_num_threads(static_cast<int>(state.range(1)));
  ms::backend::Executable exe = compile_formula(n, 2);
  if (exe.graph().count("fused") != 1 || exe.num_steps() != 1) state.SkipWithError("the chain did not fuse into one node");
  const ms::AnyTensor in[1] = {as_tensor(make_input(n))};
  for (auto _ : state) {
    auto out = exe.run(in);
    benchmark::DoNotOptimize(out[0].raw_data());
  }
  set_counters(state, n);
}

void ms_codegen(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ms::set_num_threads(static_cast<int>(state.range(1)));
  ms::backend::Executable exe = compile_formula(n, 2, true);
  if (exe.codegen_kernels() != 1 || exe.num_steps() != 1) state.SkipWithError("the chain did not compile into one kernel");
  const ms::AnyTensor in[1] = {as_tensor(make_input(n))};
  for (auto _ : state) {
    auto out = exe.run(in);
    benchmark::DoNotOptimize(out[0].raw_data());
  }
  set_counters(state, n);
}

void ms_unfused(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  ms::set_num_threads(static_cast<int>(state.range(1)));
  ms::backend::Executable exe = compile_formula(n, 1);
  const ms::AnyTensor in[1] = {as_tensor(make_input(n))};
  for (auto _ : state) {
    auto out = exe.run(in);
    benchmark::DoNotOptimize(out[0].raw_data());
  }
  set_counters(state, n);
}

template <bool SameMath>
void hand_loop(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  AlignedVec x = make_input(n), y(static_cast<std::size_t>(n));
  using B = xsimd::batch<float>;
  constexpr std::int64_t W = B::size;
  for (auto _ : state) {
    split(n, threads, [&](std::int64_t b, std::int64_t e) {
      std::int64_t i = b;
      for (; i + W <= e; i += W) {
        const B v = B::load_aligned(x.data() + i);
        (SameMath ? formula_same_math(v) : formula_simd(v)).store_aligned(y.data() + i);
      }
      for (; i < e; ++i) {
        float v = x[static_cast<std::size_t>(i)];
        y[static_cast<std::size_t>(i)] = std::tanh(v * 0.5f + 0.1f) * 1.5f - v / (1.0f + std::exp(v));
      }
    });
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n);
}

void xsimd_hand(benchmark::State& state) { hand_loop<false>(state); }
void hand_same_math(benchmark::State& state) { hand_loop<true>(state); }

#ifdef MS_HAVE_TORCH
void torch_eager(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  at::set_num_threads(static_cast<int>(state.range(1)));
  torch::NoGradGuard no_grad;
  AlignedVec xv = make_input(n);
  torch::Tensor x = torch::from_blob(xv.data(), {n}, torch::kFloat32).clone();
  for (auto _ : state) {
    torch::Tensor y = torch::tanh(x * 0.5 + 0.1) * 1.5 - x / (1 + torch::exp(x));
    benchmark::DoNotOptimize(y.data_ptr());
  }
  set_counters(state, n);
}
#endif

void eigen_array(benchmark::State& state) { chain::eigen_array(state); }

BENCHMARK(ms_fused)->Apply(chain::args);
BENCHMARK(ms_codegen)->Apply(chain::args);
BENCHMARK(xsimd_hand)->Apply(chain::args);
BENCHMARK(hand_same_math)->Apply(chain::args);
BENCHMARK(eigen_array)->Apply(chain::args);
#ifdef MS_HAVE_TORCH
BENCHMARK(torch_eager)->Apply(chain::args);
#endif
BENCHMARK(ms_unfused)->Apply(chain::args);

/// Checks ours against the hand-fused loops once (the same formula; ms's float tanh is
/// within 5 ulp of xsimd's 1-ulp tanh; the same-math loop differs only in rounding order).
void sanity_check() {
  const std::int64_t n = 100003;
  AlignedVec x = make_input(n);
  ms::backend::Executable exe = compile_formula(n, 2);
  const ms::AnyTensor in[1] = {as_tensor(x)};
  ms::AnyTensor y = exe.run(in)[0];
  const float* p = static_cast<const float*>(y.raw_data());
  using B = xsimd::batch<float>;
  auto max_diff = [&](auto formula) {
    double worst = 0;
    for (std::int64_t i = 0; i + static_cast<std::int64_t>(B::size) <= n; i += B::size) {
      alignas(64) float ref[B::size];
      formula(B::load_unaligned(x.data() + i)).store_aligned(ref);
      for (std::size_t k = 0; k < B::size; ++k)
        worst = std::max(worst, static_cast<double>(std::abs(ref[k] - p[i + static_cast<std::int64_t>(k)])));
    }
    return worst;
  };
  std::printf("fused_chain: max |ours - hand-fused xsimd| = %g\n", max_diff([](B v) { return formula_simd(v); }));
  std::printf("fused_chain: max |ours - hand-fused same math| = %g\n",
              max_diff([](B v) { return formula_same_math(v); }));
  // Generated code must give the interpreter's bits.
  ms::backend::Executable gen = compile_formula(n, 2, true);
  ms::AnyTensor yg = gen.run(in)[0];
  std::printf("fused_chain: generated kernels %d, bit-identical to the interpreter: %s\n", gen.codegen_kernels(),
              std::memcmp(y.raw_data(), yg.raw_data(), static_cast<std::size_t>(n) * 4) == 0 ? "yes" : "NO");
}

void print_plans() {
  std::printf("\n# planned arena peak over its lower bound (largest live set) for the benchmark graphs\n");
  for (int level : {2, 1}) {
    ms::backend::Executable exe = compile_formula(std::int64_t{1} << 24, level);
    const auto& p = exe.memory_plan();
    std::printf("plan_%s/n:16777216 peak %zu B\n", level == 2 ? "fused" : "unfused", p.peak);
    std::printf("plan_%s/n:16777216 lower_bound %zu B\n", level == 2 ? "fused" : "unfused", p.lower_bound);
    std::printf("plan_%s/n:16777216 peak_over_lower_bound %.3f ratio\n", level == 2 ? "fused" : "unfused", p.ratio());
  }
}

}  // namespace

int main(int argc, char** argv) {
  sanity_check();
  ms_bench::counter_unit("GBps", "GB/s");
  for (const std::string tag : {"fused", "codegen"}) {  // the interpreter, then generated code
    const std::string ours = "ms_" + tag;
    ms_bench::compare(ours, "xsimd_hand", tag + "_vs_xsimd_hand");
    ms_bench::compare(ours, "hand_same_math", tag + "_vs_hand_same_math");
    ms_bench::compare(ours, "eigen_array", tag + "_vs_eigen");
#ifdef MS_HAVE_TORCH
    ms_bench::compare(ours, "torch_eager", tag + "_vs_torch_eager");
#endif
  }
  ms_bench::compare("ms_fused", "ms_unfused", "fused_vs_unfused");
  ms_bench::compare("ms_codegen", "ms_fused", "codegen_vs_interpreter");
  int rc = ms_bench::main(argc, argv);
  print_plans();
  return rc;
}
