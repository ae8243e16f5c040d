// Fusion across the elementwise boundary (graph/fusion.hpp, fuse_epilogues): a matmul or
// linear followed by elementwise ops becomes one node (the GEMM writes the output buffer,
// the epilogue runs in place over it), and a sum/mean/max/min over trailing axes of an
// elementwise result becomes one node that never writes the full-size intermediate.
// GEMM epilogues replay bit for bit like eager; fused reductions accumulate rows in double and
// are checked against eager within a stated tolerance (and against a double reference).

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

using ms::Tensor;
namespace backend = ms::backend;
namespace graph = ms::graph;

/// The compiled graph of fn traced on x (and y) at opt_level 2, with epilogue fusion on or off.
template <class F, class... Args>
backend::Executable compile_with(F&& fn, bool epilogue, const Args&... args) {
  graph::Capture cap;
  (cap.input(args), ...);
  auto out = fn(args...);
  cap.output(out);
  backend::CompileOptions opt;
  opt.passes.fuse_epilogue = epilogue;
  return backend::compile(cap.finish(), opt);
}

/// Labels of the graph's non-view nodes, in order.
std::vector<std::string> labels(const graph::Graph& g) {
  std::vector<std::string> r;
  for (const auto& n : g.nodes())
    if (!n.dead && !n.op->is_view()) r.push_back(graph::node_label(n));
  return r;
}

/// Largest relative difference between two float tensors of the same shape.
double max_rel_diff(const ms::AnyTensor& a, const ms::AnyTensor& b) {
  auto va = ms_test::values(Tensor<float>(a)), vb = ms_test::values(Tensor<float>(b));
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (std::size_t i = 0; i < va.size(); ++i)
    worst = std::max(worst, std::abs(va[i] - vb[i]) / std::max(1e-30, std::abs(vb[i])));
  return worst;
}

}  // namespace

TEST_CASE("fuse_epilogue: linear + bias + activation + scale is one node, bit-identical to eager", "[graph][fusion]") {
  Tensor<float> w = ms_test::random_floats({24, 40}, 1), b = ms_test::random_floats({24}, 2);
  auto fn = [&](const Tensor<float>& x) { return ms::relu(ms::linear(x, w, b)) * 0.5f + 1.0f; };
  Tensor<float> x1 = ms_test::random_floats({33, 40}, 3), x2 = ms_test::random_floats({33, 40}, 4);
  backend::Executable exe = compile_with(fn, true, x1);
  CHECK(labels(exe.graph()) == std::vector<std::string>{"fused[linear+relu+mul+add]"});
  for (const Tensor<float>& x : {x1, x2}) CHECK(ms_test::same_bits(exe.run({x})[0], fn(x)));
  // Off: the linear stays a node of its own.
  backend::Executable off = compile_with(fn, false, x1);
  CHECK(labels(off.graph()) == std::vector<std::string>{"linear", "fused[relu+mul+add]"});
  CHECK(ms_test::same_bits(off.run({x2})[0], exe.run({x2})[0]));
}

TEST_CASE("fuse_epilogue: batched matmul with a broadcast bias and a single elementwise op", "[graph][fusion]") {
  Tensor<float> bias = ms_test::random_floats({1, 1, 7}, 5);
  auto fn = [&](const Tensor<float>& a, const Tensor<float>& b) { return ms::tanh(ms::matmul(a, b) + bias); };
  Tensor<float> a = ms_test::random_floats({3, 5, 9}, 6), b = ms_test::random_floats({9, 7}, 7);
  backend::Executable exe = compile_with(fn, true, a, b);
  CHECK(labels(exe.graph()) == std::vector<std::string>{"fused[matmul+add+tanh]"});
  Tensor<float> a2 = ms_test::random_floats({3, 5, 9}, 8), b2 = ms_test::random_floats({9, 7}, 9);
  CHECK(ms_test::same_bits(exe.run({a2, b2})[0], fn(a2, b2)));
  // A single unfused elementwise op after the GEMM is absorbed as well.
  auto one = [](const Tensor<float>& x, const Tensor<float>& y) { return ms::relu(ms::matmul(x, y)); };
  backend::Executable exe1 = compile_with(one, true, a, b);
  CHECK(labels(exe1.graph()) == std::vector<std::string>{"fused[matmul+relu]"});
  CHECK(ms_test::same_bits(exe1.run({a2, b2})[0], one(a2, b2)));
}

TEST_CASE("fuse_epilogue: a GEMM result used twice, or a graph output, is not absorbed", "[graph][fusion]") {
  Tensor<float> w = ms_test::random_floats({6, 4}, 10);
  auto twice = [&](const Tensor<float>& x) {
    Tensor<float> h = ms::matmul(x, w);
    return ms::relu(h) + ms::sum(h, {1}, true);
  };
  Tensor<float> x = ms_test::random_floats({5, 6}, 11);
  backend::Executable exe = compile_with(twice, true, x);
  auto l = labels(exe.graph());
  REQUIRE(!l.empty());
  CHECK(l.front() == "matmul");
  Tensor<float> x2 = ms_test::random_floats({5, 6}, 12);
  CHECK(max_rel_diff(exe.run({x2})[0], twice(x2)) < 1e-6);
}

TEST_CASE("fuse_epilogue: sum, mean, max and min over trailing axes of an elementwise result", "[graph][fusion]") {
  ms_test::ThreadGuard guard;
  Tensor<float> a = ms_test::random_floats({64, 300}, 13), b = ms_test::random_floats({64, 300}, 14);
  struct Case {
    const char* label;
    std::function<Tensor<float>(const Tensor<float>&, const Tensor<float>&)> fn;
  };
  std::vector<Case> cases{
      {"fused[mul+sum]", [](const Tensor<float>& x, const Tensor<float>&) { return ms::sum(x * x, {1}); }},
      {"fused[sub+square+mean]", [](const Tensor<float>& x, const Tensor<float>& y) { return ms::mean(ms::square(x - y)); }},
      {"fused[exp+max]", [](const Tensor<float>& x, const Tensor<float>&) { return ms::max(ms::exp(x), {-1}, true); }},
      {"fused[add+min]", [](const Tensor<float>& x, const Tensor<float>& y) { return ms::min(x + y, {1}); }},
  };
  for (const Case& c : cases) {
    INFO(c.label);
    backend::Executable exe = compile_with(c.fn, true, a, b);
    CHECK(labels(exe.graph()) == std::vector<std::string>{c.label});
    Tensor<float> a2 = ms_test::random_floats({64, 300}, 15), b2 = ms_test::random_floats({64, 300}, 16);
    ms::set_num_threads(1);
    ms::AnyTensor r1 = exe.run({a2, b2})[0];
    ms::set_num_threads(2);
    ms::AnyTensor r2 = exe.run({a2, b2})[0];
    CHECK(ms_test::same_bits(r1, r2));  // rows are reduced whole by one thread: no dependence on the split
    // Eager sums pairwise in float, the fused kernel in double: agreement within 1e-5.
    CHECK(max_rel_diff(r1, c.fn(a2, b2)) < 1e-5);
  }
  // Against a double reference: sum over axis 1 of a * a.
  backend::Executable exe = compile_with(cases[0].fn, true, a, b);
  std::vector<double> va = ms_test::values(a);
  Tensor<float> r = exe.run({a, b})[0];
  std::vector<double> expect(64, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 300; ++j) expect[static_cast<std::size_t>(i)] += va[static_cast<std::size_t>(i * 300 + j)] * va[static_cast<std::size_t>(i * 300 + j)];
  ms_test::require_values(r, expect, 1e-6);
}

TEST_CASE("fuse_epilogue: a fused max propagates NaN, leading-axis reductions stay unfused", "[graph][fusion]") {
  auto fn = [](const Tensor<float>& x) { return ms::max(x * 2.0f, {1}); };
  Tensor<float> x{{1.0f, 5.0f, -2.0f}, {3.0f, static_cast<float>(ms_test::kNaN), 4.0f}};
  backend::Executable exe = compile_with(fn, true, x);
  REQUIRE(labels(exe.graph()) == std::vector<std::string>{"fused[mul+max]"});
  Tensor<float> r = exe.run({x})[0];
  CHECK(r.to_vector()[0] == 10.0f);
  CHECK(std::isnan(r.to_vector()[1]));
  // Reducing axis 0 of a (rows, cols) result is not a run of consecutive elements.
  auto lead = [](const Tensor<float>& y) { return ms::sum(ms::exp(y), {0}); };
  backend::Executable exe0 = compile_with(lead, true, x);
  CHECK(labels(exe0.graph()) == std::vector<std::string>{"exp", "sum"});
}

TEST_CASE("fuse_epilogue: fused reductions over rows of many blocks, in f32 and f64", "[graph][fusion]") {
  // Rows of 1000 and 70001 elements span several 256-element blocks and a tail; sums are
  // checked against a double reference, max and min against the plain values with a NaN
  // or an infinity placed in a later block.
  ms_test::ThreadGuard guard;
  Tensor<float> a = ms_test::random_floats({3, 1000}, 21);
  std::vector<double> va = ms_test::values(a);
  auto row_sum = [&](const std::vector<double>& v, std::int64_t cols, std::int64_t r) {
    double s = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const double x = v[static_cast<std::size_t>(r * cols + j)];
      s += x * x;
    }
    return s;
  };
  auto sq_sum = [](const Tensor<float>& x) { return ms::sum(x * x, {1}); };
  backend::Executable exe = compile_with(sq_sum, true, a);
  REQUIRE(labels(exe.graph()) == std::vector<std::string>{"fused[mul+sum]"});
  for (int threads : {1, 2}) {
    ms::set_num_threads(threads);
    ms_test::require_values(Tensor<float>(exe.run({a})[0]), {row_sum(va, 1000, 0), row_sum(va, 1000, 1), row_sum(va, 1000, 2)}, 1e-6);
  }
  Tensor<double> big = ms::cast<double>(ms_test::random_floats({1, 70001}, 22));
  auto sq_sum64 = [](const Tensor<double>& x) { return ms::sum(x * x, {1}); };
  backend::Executable exe64 = compile_with(sq_sum64, true, big);
  REQUIRE(labels(exe64.graph()) == std::vector<std::string>{"fused[mul+sum]"});
  const double want = row_sum(ms_test::values(big), 70001, 0);
  const double got = Tensor<double>(exe64.run({big})[0]).item();
  CHECK(std::abs(got - want) <= 1e-12 * want);

  std::vector<float> m(3000);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(va[i]);
  m[700] = static_cast<float>(ms_test::kNaN);     // row 0, third block
  m[1000 + 999] = 50.0f;                          // row 1: the largest value in its tail
  m[2000 + 300] = -static_cast<float>(ms_test::kInf);  // row 2, second block
  Tensor<float> mx = ms::empty<float>({3, 1000});
  std::copy(m.begin(), m.end(), mx.data());
  auto mx2 = [](const Tensor<float>& x) { return ms::max(x * 2.0f, {1}); };
  auto mn2 = [](const Tensor<float>& x) { return ms::min(x * 2.0f, {1}); };
  std::vector<float> hi = Tensor<float>(compile_with(mx2, true, mx).run({mx})[0]).to_vector();
  std::vector<float> lo = Tensor<float>(compile_with(mn2, true, mx).run({mx})[0]).to_vector();
  CHECK(std::isnan(hi[0]));
  CHECK(std::isnan(lo[0]));
  CHECK(hi[1] == 100.0f);
  CHECK(lo[2] == -static_cast<float>(ms_test::kInf));
  float want_lo1 = m[1000], want_hi2 = m[2000];
  for (int j = 0; j < 1000; ++j) {
    want_lo1 = std::min(want_lo1, m[static_cast<std::size_t>(1000 + j)]);
    want_hi2 = std::max(want_hi2, m[static_cast<std::size_t>(2000 + j)]);
  }
  CHECK(lo[1] == 2.0f * want_lo1);
  CHECK(hi[2] == 2.0f * want_hi2);
}

TEST_CASE("fuse_epilogue: the fused reduction never allocates the full-size intermediate", "[graph][fusion]") {
  auto fn = [](const Tensor<float>& x, const Tensor<float>& y) { return ms::sum(ms::square(x - y), {1}); };
  Tensor<float> a = ms_test::random_floats({256, 256}, 17), b = ms_test::random_floats({256, 256}, 18);
  backend::Executable on = compile_with(fn, true, a, b), off = compile_with(fn, false, a, b);
  CHECK(off.memory_plan().peak >= 256u * 256u * 4u);
  CHECK(on.memory_plan().peak < 256u * 4u * 2u);
}
