// Training-step time: the Fashion-MNIST models of examples/fashion_mnist.cpp
// (MLP 784-256-256-10 with ReLU, LeNet-5), one step = forward, cross-entropy,
// backward and an Adam update, on random data of the real shapes.
//
//   ms_captured_<model>/<batch>/<threads>  the whole step captured once by ms::jit, then replayed
//   ms_eager_<model>/<batch>/<threads>     the same step run eagerly (tape autodiff)
//   torch_<model>/<batch>/<threads>        LibTorch eager (zero_grad, backward, step), when found
//   gemm_floor_mlp_<lib>/<batch>/<threads> only the MLP step's matrix products, on oneDNN, OpenBLAS,
//                                          the built-in GEMM (ms::matmul on each path) and LibTorch: the fastest
//                                          is the floor of any step; floor_ratio = our step / it
//
//   ms_captured_<model>_bf16gemm           the captured step with float32 GEMMs at bfloat16 precision
//                                          (ms::GemmPrecision::bf16), beside its own GEMM floor
//   ms_captured_mlp_no_postops             the captured step with its GEMM epilogues run after the
//                                          GEMM (MS_DNNL_POSTOPS=0) instead of as oneDNN post-ops;
//                                          postops_per_step counts the fused nodes that ran as one
//                                          primitive
//
// Targets: captured MLP step at batch 64 <= 0.4x LibTorch and <= 1.3x its GEMM floor,
// at batch 256 <= 0.5x LibTorch; captured LeNet at batch 64 <= 0.4x LibTorch; 2 threads
// never slower than 1.
// The captured MLP also reports its arena (planned peak) and the planner's lower
// bound, in KiB.

#include <algorithm>
#include <memory>

#include <ms/ms.hpp>

#include "bench_common.hpp"

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

namespace nn = ms::nn;


enum class Model { mlp, lenet };

void ms_step(benchmark::State& state, Model which, bool captured) {
  const std::int64_t batch = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const int saved_threads = ms::get_num_threads();
  ms::set_num_threads(threads);
  ms::manual_seed(0);
  auto model = which == Model::mlp ? nn::mlp(784, {256, 256}, 10) : nn::lenet5(10);
  ms::optim::Adam opt(model->parameters(), 1e-3);
  std::vector<ms::AnyTensor> params = model->parameters_any();
  ms::Tensor<float> x = ms::rand<float>({batch, 1, 28, 28});
  ms::Tensor<std::int64_t> y = ms::randint<std::int64_t>(0, 10, {batch});
  auto step = [&](const ms::Tensor<float>& xb, const ms::Tensor<std::int64_t>& yb) {
    ms::Tensor<float> loss = ms::cross_entropy((*model)(xb), yb);
    opt.step(ms::autograd::grad(loss, params));
    return loss;
  };
  auto jitted = ms::jit(step);
  auto run = [&] { return captured ? jitted(x, y) : step(x, y); };
  run();  // the trace (captured) or a warm-up step (eager)
  const std::uint64_t postops0 = ms::dnnl_postop_runs();
  for (auto _ : state) {
    ms::Tensor<float> loss = run();
    benchmark::DoNotOptimize(loss.raw_data());
  }
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  if (captured) {
    const auto& plan = jitted.executable()->memory_plan();
    state.counters["arena_KiB"] = static_cast<double>(plan.peak) / 1024.0;
    state.counters["lower_bound_KiB"] = static_cast<double>(plan.lower_bound) / 1024.0;
    state.counters["nodes"] = static_cast<double>(jitted.executable()->graph().num_nodes());
    state.counters["postops_per_step"] = static_cast<double>(ms::dnnl_postop_runs() - postops0) /
                                         static_cast<double>(std::max<benchmark::IterationCount>(state.iterations(), 1));
  }
  ms::set_num_threads(saved_threads);
}

/// The same step with float32 GEMMs at bfloat16 precision (ms::GemmPrecision::bf16).
void ms_step_bf16_gemm(benchmark::State& s, Model which) {
  const ms::GemmPrecision saved = ms::set_cpu_gemm_precision(ms::GemmPrecision::bf16);
  ms_step(s, which, true);
  ms::set_cpu_gemm_precision(saved);
}

void ms_captured_mlp(benchmark::State& s) { ms_step(s, Model::mlp, true); }
void ms_captured_mlp_no_postops(benchmark::State& s) {
  const bool saved = ms::set_dnnl_postops(false);
  ms_step(s, Model::mlp, true);
  ms::set_dnnl_postops(saved);
}
void ms_captured_mlp_bf16gemm(benchmark::State& s) { ms_step_bf16_gemm(s, Model::mlp); }
void ms_captured_lenet_bf16gemm(benchmark::State& s) { ms_step_bf16_gemm(s, Model::lenet); }
void ms_eager_mlp(benchmark::State& s) { ms_step(s, Model::mlp, false); }
void ms_captured_lenet(benchmark::State& s) { ms_step(s, Model::lenet, true); }
void ms_eager_lenet(benchmark::State& s) { ms_step(s, Model::lenet, false); }

void mlp_args(benchmark::internal::Benchmark* b) {
  for (int batch : {64, 256})
    for (int threads : {1, 2}) b->Args({batch, threads});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
void lenet_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) b->Args({64, threads});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

/// The MLP step's matrix products alone (forward, weight gradients, input gradients of
/// layers 2 and 3: 77.5 MFLOP at batch 64), through ms::matmul on one GEMM path (oneDNN,
/// OpenBLAS, the built-in GEMM) and through LibTorch. No step, ours or the peer's, can take less than
/// the fastest of these: `floor_ratio` is our step over that floor.
void gemm_floor_mlp(benchmark::State& state, ms::CpuGemm path) {
  if (!ms::cpu_gemm_available(path)) {
    state.SkipWithError("GEMM path not in this build");
    return;
  }
  const ms::CpuGemm saved_path = ms::cpu_gemm();
  ms::set_cpu_gemm(path);
  const std::int64_t batch = state.range(0);
  const int saved_threads = ms::get_num_threads();
  ms::set_num_threads(static_cast<int>(state.range(1)));
  ms::manual_seed(0);
  const std::int64_t dims[4] = {784, 256, 256, 10};
  std::vector<ms::Tensor<float>> w, act, grad;
  for (int l = 0; l < 3; ++l) {
    w.push_back(ms::rand<float>({dims[l + 1], dims[l]}));
    act.push_back(ms::rand<float>({batch, dims[l]}));
    grad.push_back(ms::rand<float>({batch, dims[l + 1]}));
  }
  for (auto _ : state) {
    for (int l = 0; l < 3; ++l) {
      auto y = ms::matmul(act[l], w[l].t());                  // forward
      auto gw = ms::matmul(grad[l].t(), act[l]);              // weight gradient
      benchmark::DoNotOptimize(y.raw_data());
      benchmark::DoNotOptimize(gw.raw_data());
      if (l > 0) {
        auto gx = ms::matmul(grad[l], w[l]);                  // input gradient
        benchmark::DoNotOptimize(gx.raw_data());
      }
    }
  }
  ms::set_num_threads(saved_threads);
  ms::set_cpu_gemm(saved_path);
}
void gemm_floor_mlp_dnnl(benchmark::State& s) { gemm_floor_mlp(s, ms::CpuGemm::dnnl); }
void gemm_floor_mlp_dnnl_bf16gemm(benchmark::State& s) {
  const ms::GemmPrecision saved = ms::set_cpu_gemm_precision(ms::GemmPrecision::bf16);
  gemm_floor_mlp(s, ms::CpuGemm::dnnl);
  ms::set_cpu_gemm_precision(saved);
}
void gemm_floor_mlp_blas(benchmark::State& s) { gemm_floor_mlp(s, ms::CpuGemm::blas); }
void gemm_floor_mlp_builtin(benchmark::State& s) { gemm_floor_mlp(s, ms::CpuGemm::builtin); }

BENCHMARK(gemm_floor_mlp_dnnl)->Apply(mlp_args);
BENCHMARK(gemm_floor_mlp_blas)->Apply(mlp_args);
BENCHMARK(gemm_floor_mlp_builtin)->Apply(mlp_args);
BENCHMARK(ms_captured_mlp)->Apply(mlp_args);
BENCHMARK(ms_captured_mlp_no_postops)->Apply(mlp_args);
BENCHMARK(ms_eager_mlp)->Apply(mlp_args);
BENCHMARK(ms_captured_lenet)->Apply(lenet_args);
BENCHMARK(ms_eager_lenet)->Apply(lenet_args);
BENCHMARK(gemm_floor_mlp_dnnl_bf16gemm)->Apply(mlp_args);
BENCHMARK(ms_captured_mlp_bf16gemm)->Apply(mlp_args);
BENCHMARK(ms_captured_lenet_bf16gemm)->Apply(lenet_args);

#ifdef MS_HAVE_TORCH
struct TorchMLP : torch::nn::Module {
  torch::nn::Linear l1{784, 256}, l2{256, 256}, l3{256, 10};
  TorchMLP() {
    register_module("l1", l1);
    register_module("l2", l2);
    register_module("l3", l3);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = x.flatten(1);
    return l3(torch::relu(l2(torch::relu(l1(x)))));
  }
};

struct TorchLeNet : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 6, 5).padding(2)}, c2{torch::nn::Conv2dOptions(6, 16, 5)};
  torch::nn::Linear f1{400, 120}, f2{120, 84}, f3{84, 10};
  TorchLeNet() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("f1", f1);
    register_module("f2", f2);
    register_module("f3", f3);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    x = x.flatten(1);
    return f3(torch::relu(f2(torch::relu(f1(x)))));
  }
};

template <class Net>
void torch_step(benchmark::State& state) {
  const std::int64_t batch = state.range(0);
  const int saved_threads = torch::get_num_threads();
  torch::set_num_threads(static_cast<int>(state.range(1)));
  torch::manual_seed(0);
  auto net = std::make_shared<Net>();
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(1e-3));
  torch::Tensor x = torch::rand({batch, 1, 28, 28});
  torch::Tensor y = torch::randint(0, 10, {batch}, torch::kLong);
  auto step = [&] {
    opt.zero_grad();
    torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    return loss;
  };
  step();
  for (auto _ : state) {
    torch::Tensor loss = step();
    benchmark::DoNotOptimize(loss.data_ptr());
  }
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  torch::set_num_threads(saved_threads);
}

/// The MLP step's matrix products on LibTorch (the same products as gemm_floor_mlp).
void gemm_floor_mlp_torch(benchmark::State& state) {
  const std::int64_t batch = state.range(0);
  const int saved_threads = torch::get_num_threads();
  torch::set_num_threads(static_cast<int>(state.range(1)));
  torch::NoGradGuard no_grad;
  const std::int64_t dims[4] = {784, 256, 256, 10};
  std::vector<torch::Tensor> w, act, grad;
  for (int l = 0; l < 3; ++l) {
    w.push_back(torch::rand({dims[l + 1], dims[l]}));
    act.push_back(torch::rand({batch, dims[l]}));
    grad.push_back(torch::rand({batch, dims[l + 1]}));
  }
  for (auto _ : state) {
    for (int l = 0; l < 3; ++l) {
      auto y = torch::matmul(act[l], w[l].t());
      auto gw = torch::matmul(grad[l].t(), act[l]);
      benchmark::DoNotOptimize(y.data_ptr());
      benchmark::DoNotOptimize(gw.data_ptr());
      if (l > 0) {
        auto gx = torch::matmul(grad[l], w[l]);
        benchmark::DoNotOptimize(gx.data_ptr());
      }
    }
  }
  torch::set_num_threads(saved_threads);
}
BENCHMARK(gemm_floor_mlp_torch)->Apply(mlp_args);

void torch_mlp(benchmark::State& s) { torch_step<TorchMLP>(s); }
void torch_lenet(benchmark::State& s) { torch_step<TorchLeNet>(s); }
BENCHMARK(torch_mlp)->Apply(mlp_args);
BENCHMARK(torch_lenet)->Apply(lenet_args);
#endif

}  // namespace

int main(int argc, char** argv) {
  ms_bench::counter_unit("arena_KiB", "KiB");
  ms_bench::counter_unit("lower_bound_KiB", "KiB");
  ms_bench::counter_unit("steps_per_s", "steps/s");
  ms_bench::compare("ms_captured_mlp", "torch_mlp", "mlp step, captured vs LibTorch");
  ms_bench::compare("ms_eager_mlp", "torch_mlp", "mlp step, eager vs LibTorch");
  ms_bench::compare("ms_captured_lenet", "torch_lenet", "lenet step, captured vs LibTorch");
  ms_bench::compare("ms_eager_lenet", "torch_lenet", "lenet step, eager vs LibTorch");
  ms_bench::compare("gemm_floor_mlp_dnnl", "torch_mlp", "mlp step's GEMMs alone (oneDNN) vs LibTorch's whole step");
  ms_bench::compare_fastest("ms_captured_mlp",
                            {"gemm_floor_mlp_dnnl", "gemm_floor_mlp_blas", "gemm_floor_mlp_builtin", "gemm_floor_mlp_torch"},
                            "floor_ratio mlp captured");
  ms_bench::compare_fastest("ms_eager_mlp",
                            {"gemm_floor_mlp_dnnl", "gemm_floor_mlp_blas", "gemm_floor_mlp_builtin", "gemm_floor_mlp_torch"},
                            "floor_ratio mlp eager");
  // float32 GEMMs at bfloat16 precision: against LibTorch's float32 step, ms's float32 step,
  // and their own floor (the same products at bfloat16 precision).
  ms_bench::compare("ms_captured_mlp_bf16gemm", "torch_mlp", "mlp step, captured, bf16 GEMMs vs LibTorch f32");
  ms_bench::compare("ms_captured_lenet_bf16gemm", "torch_lenet", "lenet step, captured, bf16 GEMMs vs LibTorch f32");
  ms_bench::compare("ms_captured_mlp_bf16gemm", "ms_captured_mlp", "mlp step, captured, bf16 GEMMs vs f32 GEMMs");
  ms_bench::compare("ms_captured_lenet_bf16gemm", "ms_captured_lenet", "lenet step, captured, bf16 GEMMs vs f32 GEMMs");
  ms_bench::compare("ms_captured_mlp_bf16gemm", "gemm_floor_mlp_dnnl_bf16gemm", "floor_ratio mlp captured bf16 GEMMs");
  // Both libraries flush denormals to zero (ms::set_flush_denormal; LibTorch's
  // setFlushDenormal): each benchmark trains a model on one fixed batch, whose gradients and
  // Adam moments underflow after some hundred steps, and without it a step's time doubles
  // partway through (see ms::set_flush_denormal), so medians would depend on iteration counts.
  const bool flushed = ms::set_flush_denormal(true);
#ifdef MS_HAVE_TORCH
  at::globalContext().setFlushDenormal(true);
#endif
  std::printf("train_step: denormals flushed to zero: %s\n", flushed ? "yes, for ms and the peer" : "no (not on this CPU)");
  std::printf("train_step: ms GEMM path %s, oneDNN ISA %s, bfloat16 units %s\n",
              std::string(ms::cpu_gemm_name(ms::cpu_gemm())).c_str(), ms::dnnl_cpu_isa().c_str(),
              ms::dnnl_bf16_native() ? "yes" : "no");
  return ms_bench::main(argc, argv);
}
