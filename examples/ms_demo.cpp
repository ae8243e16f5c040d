// The first look at ms: a few eager ops, the same code captured into a graph,
// optimized (fusion), compiled and replayed with new inputs, and the op list.
//
//   bash scripts/demo.sh        (or: build/bin/ms_demo)

#include <ms/ms.hpp>

#include <chrono>
#include <cstdio>

int main() {
  using ms::Tensor;

  // Eager: every op runs at once, like PyTorch or MindSpore's PyNative mode.
  Tensor<float> x{{-1.0f, 0.5f, 2.0f}, {3.0f, -4.0f, 0.25f}};
  Tensor<float> b{0.1f, 0.2f, 0.3f};
  auto y = ms::relu(x + b) * 2.0f;
  fmt::print("x + b, relu, * 2 =\n{}\n\n", y);
  fmt::print("softmax over the last axis =\n{}\n\n", ms::softmax(x, -1));
  fmt::print("x @ x^T =\n{}\n\n", ms::matmul(x, x.t()));
  fmt::print("sum over axis 0 = {}\n\n", ms::sum(x, {0}));

  // Graph mode: jit traces the function once per input signature, optimizes and
  // compiles the graph, then replays it for later calls with the same signature.
  auto f = ms::jit([](const Tensor<float>& v) {
    return ms::tanh(v * 0.5f + 0.1f) * 1.5f - v / (1.0f + ms::exp(v));
  });
  auto big = ms::randn<float>({1 << 20});
  auto first = f(big);   // traced and compiled
  auto again = f(big);   // replayed
  fmt::print("captured graph after optimization:\n{}\n", f.executable()->graph().str());
  auto eager = ms::tanh(big * 0.5f + 0.1f) * 1.5f - big / (1.0f + ms::exp(big));
  float max_diff = ms::max(ms::abs(eager - again)).item();
  fmt::print("replay vs eager on 1M floats: max |difference| = {}\n", max_diff);

  auto time_it = [](auto&& fn) {
    fn();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) fn();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 20;
  };
  double t_eager = time_it([&] { (void)(ms::tanh(big * 0.5f + 0.1f) * 1.5f - big / (1.0f + ms::exp(big))); });
  double t_graph = time_it([&] { (void)f(big); });
  fmt::print("eager {:.3f} ms per call, captured and fused {:.3f} ms per call ({:.1f}x)\n\n", t_eager, t_graph,
             t_eager / t_graph);

  // The operator list: every op is defined once in the registry.
  fmt::print("{} registered ops:\n", ms::ops::registry().size());
  for (const ms::ops::OpDef* op : ms::ops::registry().all())
    fmt::print("  {:<16} {:<13} {}\n", op->name, ms::ops::category_name(op->category), op->doc);
  (void)first;
  return max_diff < 1e-5f ? 0 : 1;
}
