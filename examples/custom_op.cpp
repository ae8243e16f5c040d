// The walk-through of docs/guide.md: two operators that ms does not have (softsign and
// running_sum, defined in examples/custom_op.hpp) run eagerly, in a captured and fused graph,
// under autodiff and in the profiler. Every step checks its numbers and the program exits
// with status 1 when one is wrong, so the guide's code is tested whenever this runs.
//
//   custom_op            prints each step

#include <cmath>
#include <cstdio>
#include <cstring>

#include "custom_op.hpp"

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) ++failures;
}

bool close(const std::vector<float>& a, const std::vector<double>& b, double tol = 1e-6) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > tol * (1 + std::abs(b[i]))) return false;
  return true;
}

bool same_bits(const ms::AnyTensor& a, const ms::AnyTensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.is_contiguous() && b.is_contiguous() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

int main() {
  using ms::Tensor;
  try {
    std::printf("1. the new ops are in the op list:\n");
    for (const char* name : {"softsign", "running_sum"}) {
      const ms::ops::OpDef& op = ms::ops::registry().get(name);
      std::printf("  %-12s %-7s %s\n", op.name.c_str(), std::string(ms::ops::category_name(op.category)).c_str(),
                  op.doc.c_str());
    }

    std::printf("2. eager mode:\n");
    // [eager]
    Tensor<float> x{{-3.f, -1.f, 0.f}, {0.5f, 1.f, 4.f}};
    Tensor<float> s = guide::softsign(x);                             // runs now, like ms::relu(x)
    Tensor<float> c = guide::running_sum(x, {{"axis", std::int64_t{1}}});  // attributes by name
    fmt::print("softsign(x) = {}\nrunning_sum(x, axis=1) = {}\n", s, c);
    // [eager]
    expect(close(s.to_vector(), {-0.75, -0.5, 0, 1.0 / 3, 0.5, 0.8}), "softsign matches x / (1 + |x|)");
    expect(close(c.to_vector(), {-3, -4, -4, 0.5, 1.5, 5.5}), "running_sum matches hand-computed running sums");

    std::printf("3. graph mode:\n");
    // [graph]
    Tensor<float> bias{0.1f, 0.2f, 0.3f};
    auto program = [&](const Tensor<float>& in) { return guide::running_sum(guide::softsign(in * 2.0f) + bias); };
    ms::graph::Capture cap;
    cap.input(x, "x");
    cap.output(program(x));
    ms::backend::Executable exe = ms::backend::compile(cap.finish());
    std::printf("%s", exe.graph().str().c_str());  // mul, softsign and add became one fused node
    Tensor<float> replayed = Tensor<float>(exe.run({x})[0]);
    // [graph]
    expect(exe.graph().count("fused") == 1 && exe.graph().count("running_sum") == 1, "softsign fused with mul and add");
    expect(same_bits(replayed, program(x)), "the replay equals eager mode bit for bit");

    std::printf("4. gradients:\n");
    // [grad]
    Tensor<float> w{-2.f, 0.5f, 3.f};
    w.set_requires_grad(true);
    Tensor<float> loss = ms::sum(guide::running_sum(guide::softsign(w)));
    loss.backward();  // uses both ops' gradient rules
    fmt::print("d loss / d w = {}\n", w.grad());
    // [grad]
    // loss = 3 softsign(w0) + 2 softsign(w1) + softsign(w2); softsign' = 1 / (1 + |w|)^2.
    expect(close(w.grad().to_vector(), {3.0 / 9, 2.0 / 2.25, 1.0 / 16}), "gradient matches the derivative by hand");

    std::printf("5. profiler:\n");
    // [profile]
    ms::Profiler prof;
    {
      ms::ProfilerScope on(prof);
      guide::running_sum(guide::softsign(x));
      exe.run({x});
    }
    std::printf("%s", prof.table().c_str());
    // [profile]
    bool seen_eager = false, seen_fused = false;
    for (auto& e : prof.events()) {
      seen_eager |= e.type == "running_sum" && e.graph_id < 0;
      seen_fused |= e.type == "fused[mul+softsign+add]";
    }
    expect(seen_eager && seen_fused, "the profiler shows the eager op and the fused node");
  } catch (const ms::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf(failures ? "%d check(s) FAILED\n" : "all checks passed\n", failures);
  return failures ? 1 : 0;
}
