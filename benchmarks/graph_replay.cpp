// Replay overhead per node: a 1000-node chain of tiny ops (add and mul with a scalar,
// alternating, on a 16-element float tensor), captured and compiled WITHOUT fusion
// (opt_level 1), so every node is one kernel launch on replay. Compares the replay's
// nanoseconds per node with running the same chain eagerly, and with LibTorch eager
// on the same chain when available. Target: replay <= 50 ns per node.
//
// Prints Google Benchmark's table, then `name value unit` lines (ns_per_node is the
// per-node figure) and `ratio` lines (ours/peer, time; below 1: ours is faster).

#include <chrono>
#include <cstdio>

#include <ms/ms.hpp>

#include "bench_common.hpp"

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

constexpr int kNodes = 1000;
constexpr std::int64_t kElems = 16;

ms::AnyTensor chain(const ms::AnyTensor& x) {
  ms::AnyTensor y = x;
  for (int i = 0; i < kNodes; ++i) y = (i % 2) ? ms::ops::mul(y, 1.0001) : ms::ops::add(y, 0.001);
  return y;
}

ms::AnyTensor input() {
  ms::Tensor<float> x = ms::AnyTensor::empty(ms::Shape{kElems}, ms::DType::f32);
  for (std::int64_t i = 0; i < kElems; ++i) static_cast<float*>(x.raw_data())[i] = 0.1f * static_cast<float>(i);
  return x;
}

ms::backend::Executable compiled_chain() {
  ms::AnyTensor x = input();
  ms::graph::Capture cap;
  cap.input(x);
  ms::AnyTensor y = chain(x);
  cap.output(y);
  ms::backend::CompileOptions opt;
  opt.passes.opt_level = 1;  // no fusion: one kernel per node
  ms::backend::Executable exe = ms::backend::compile(cap.finish(), opt);
  if (exe.num_steps() != kNodes) std::fprintf(stderr, "graph_replay: expected %d steps, got %zu\n", kNodes, exe.num_steps());
  return exe;
}

/// Sets ns_per_node from the wall time of the benchmark loop.
template <class F>
void run_timed(benchmark::State& state, F&& body) {
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) body();
  auto t1 = std::chrono::steady_clock::now();
  double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
  state.counters["ns_per_node"] = ns / static_cast<double>(state.iterations()) / kNodes;
}

void ms_replay(benchmark::State& state) {
  ms::set_num_threads(1);
  ms::backend::Executable exe = compiled_chain();
  ms::AnyTensor x = input();
  const ms::AnyTensor in[1] = {x};
  run_timed(state, [&] {
    auto out = exe.run(in);
    benchmark::DoNotOptimize(out.data());
  });
}

void ms_eager(benchmark::State& state) {
  ms::set_num_threads(1);
  ms::AnyTensor x = input();
  run_timed(state, [&] {
    ms::AnyTensor y = chain(x);
    benchmark::DoNotOptimize(y.raw_data());
  });
}

#ifdef MS_HAVE_TORCH
void torch_eager(benchmark::State& state) {
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::arange(kElems, torch::kFloat32) * 0.1;
  run_timed(state, [&] {
    torch::Tensor y = x;
    for (int i = 0; i < kNodes; ++i) y = (i % 2) ? y * 1.0001 : y + 0.001;
    benchmark::DoNotOptimize(y.data_ptr());
  });
}
BENCHMARK(torch_eager)->Unit(benchmark::kMicrosecond);
#endif

BENCHMARK(ms_replay)->Unit(benchmark::kMicrosecond);
BENCHMARK(ms_eager)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  ms_bench::counter_unit("ns_per_node", "ns");
  ms_bench::compare("ms_replay", "ms_eager", "replay_vs_eager");
#ifdef MS_HAVE_TORCH
  ms_bench::compare("ms_replay", "torch_eager", "replay_vs_torch_eager");
  ms_bench::compare("ms_eager", "torch_eager", "eager_vs_torch_eager");
#endif
  return ms_bench::main(argc, argv);
}
