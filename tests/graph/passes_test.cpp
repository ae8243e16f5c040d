// Graph passes, each checked by counting nodes before and after it runs, and by
// replaying the optimized graph against the eager result: dead-code elimination,
// common-subexpression elimination, constant folding, algebraic simplification,
// elementwise fusion; the PassManager's opt levels and switches; IR dumps.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {

using ms::AnyTensor;
using ms::DType;
using ms::Shape;
using ms::Tensor;
namespace ops = ms::ops;
namespace graph = ms::graph;
namespace backend = ms::backend;
using i64 = std::int64_t;
using ms_test::random_floats;
using ms_test::same_bits;

/// Captures fn(x) with x as the input and every returned tensor as an output.
template <class F>
graph::Graph capture(const AnyTensor& x, F&& fn) {
  graph::Capture cap;
  cap.input(x, "x");
  std::vector<AnyTensor> outs = fn(x);
  for (auto& o : outs) cap.output(o);
  return cap.finish();
}

/// Compiles g without running the pipeline again and checks replay(x2) == fn(x2) bit for bit.
template <class F>
void check_against_eager(graph::Graph g, const AnyTensor& x2, F&& fn) {
  backend::CompileOptions opt;
  opt.optimize = false;
  backend::Executable exe = backend::compile(std::move(g), opt);
  std::vector<AnyTensor> r = exe.run({x2});
  std::vector<AnyTensor> e = fn(x2);
  REQUIRE(r.size() == e.size());
  for (std::size_t i = 0; i < r.size(); ++i) {
    INFO("output " << i);
    CHECK(same_bits(r[i], e[i]));
  }
}

std::vector<std::string> node_ops(const graph::Graph& g) {
  std::vector<std::string> v;
  for (auto& n : g.nodes())
    if (!n.dead) v.push_back(graph::node_label(n));
  return v;
}

}  // namespace

TEST_CASE("passes: dce removes chains whose results are never used", "[graph]") {
  Tensor<float> x = random_floats({2, 3}, 1);
  auto fn = [](const AnyTensor& in) {
    AnyTensor y = ops::exp(in);
    AnyTensor unused = ops::mul(ops::sin(ops::tanh(in)), 2.0);  // three dead nodes
    AnyTensor also_unused = ops::neg(y);                        // dead, reads a live value
    (void)unused;
    (void)also_unused;
    return std::vector<AnyTensor>{y};
  };
  graph::Graph g = capture(x, fn);
  REQUIRE(g.num_nodes() == 5);
  CHECK(graph::dce(g) == 4);
  CHECK(g.num_nodes() == 1);
  CHECK(g.count("exp") == 1);
  CHECK(g.count("tanh") == 0);
  CHECK(g.count("sin") == 0);
  CHECK(g.count("mul") == 0);
  CHECK(g.count("neg") == 0);
  CHECK(g.nodes().size() == 1);  // compacted
  CHECK_NOTHROW(graph::verify(g));
  CHECK(graph::dce(g) == 0);
  check_against_eager(std::move(g), random_floats({2, 3}, 2), fn);
}

TEST_CASE("passes: cse merges duplicate exp(x) and what is computed from it", "[graph]") {
  Tensor<float> x = random_floats({4, 5}, 3);
  auto fn = [](const AnyTensor& in) {
    AnyTensor a = ops::exp(in);
    AnyTensor b = ops::exp(in);
    AnyTensor ta = ops::tanh(a), tb = ops::tanh(b);  // equal once a and b are merged
    AnyTensor l1 = ops::leaky_relu(in, 0.1), l2 = ops::leaky_relu(in, 0.2);  // different attributes
    return std::vector<AnyTensor>{ops::add(ops::mul(a, b), ops::sub(ta, tb)), ops::add(l1, l2)};
  };
  graph::Graph g = capture(x, fn);
  REQUIRE(g.count("exp") == 2);
  REQUIRE(g.count("tanh") == 2);
  REQUIRE(g.num_nodes() == 10);
  CHECK(graph::cse(g) == 2);
  CHECK(g.count("exp") == 1);
  CHECK(g.count("tanh") == 1);
  CHECK(g.count("leaky_relu") == 2);
  CHECK(g.num_nodes() == 8);
  // mul(a, b) now reads the one exp twice.
  for (auto& n : g.nodes())
    if (n.op->name == "mul") CHECK(n.inputs[0] == n.inputs[1]);
  CHECK_NOTHROW(graph::verify(g));
  check_against_eager(std::move(g), random_floats({4, 5}, 4), fn);
}

TEST_CASE("passes: constant folding evaluates ops whose inputs are all constants", "[graph]") {
  Tensor<float> x = random_floats({2, 3}, 5);
  Tensor<float> c{0.5f, 1.0f, 1.5f};  // read inside the capture without being registered: a constant
  auto fn = [&](const AnyTensor& in) {
    AnyTensor k = ops::mul(ops::exp(c), 2.0);
    return std::vector<AnyTensor>{ops::add(in, k)};
  };
  graph::Graph g = capture(x, fn);
  REQUIRE(g.num_nodes() == 3);
  SECTION("too large to fold") {
    CHECK(graph::fold_constants(g, 2) == 0);
    CHECK(g.num_nodes() == 3);
  }
  SECTION("folded") {
    CHECK(graph::fold_constants(g) == 2);
    CHECK(g.num_nodes() == 1);
    CHECK(g.count("exp") == 0);
    CHECK(g.count("mul") == 0);
    CHECK(g.count("add") == 1);
    const graph::Value& folded = g.value(g.nodes()[0].inputs[1]);
    CHECK(folded.kind == graph::ValueKind::constant);
    CHECK(folded.meta == ops::TensorMeta{DType::f32, Shape{3}});
    CHECK_NOTHROW(graph::verify(g));
    check_against_eager(std::move(g), random_floats({2, 3}, 6), fn);
  }
}

TEST_CASE("passes: folding a view of a constant makes a constant that owns its data", "[graph]") {
  Tensor<float> x = random_floats({3, 2}, 7);
  Tensor<float> c{{1, 2}, {3, 4}, {5, 6}};
  auto fn = [&](const AnyTensor& in) {
    return std::vector<AnyTensor>{ops::add(in, ops::reshape(ops::permute(c, {1, 0}), {3, 2}))};
  };
  graph::Graph g = capture(x, fn);
  REQUIRE(g.count("permute") == 1);
  REQUIRE(g.count("copy") == 1);  // reshape of a transposed tensor copies first
  REQUIRE(g.count("reshape") == 1);
  CHECK(graph::fold_constants(g) == 3);
  CHECK(g.num_nodes() == 1);
  check_against_eager(std::move(g), random_floats({3, 2}, 8), fn);
}

TEST_CASE("passes: simplify removes x*1, 1*x, x/1, x+(-0), (-0)+x, x-0", "[graph]") {
  Tensor<float> x = random_floats({3, 4}, 9);
  auto fn = [](const AnyTensor& in) {
    AnyTensor t = ops::div(ops::sub(ops::add(ops::mul(in, 1.0), -0.0), 0.0), 1.0);
    t = ops::add(-0.0, ops::mul(1.0, t));
    return std::vector<AnyTensor>{ops::exp(t)};
  };
  graph::Graph g = capture(x, fn);
  REQUIRE(g.num_nodes() == 7);
  CHECK(graph::simplify(g) == 6);
  CHECK(g.num_nodes() == 1);
  CHECK(node_ops(g) == std::vector<std::string>{"exp"});
  CHECK(g.nodes()[0].inputs[0] == g.inputs()[0]);
  CHECK_NOTHROW(graph::verify(g));
  check_against_eager(std::move(g), random_floats({3, 4}, 10), fn);
}

TEST_CASE("passes: simplify keeps what is not an identity", "[graph]") {
  Tensor<float> x = random_floats({3}, 11);
  Tensor<float> ones{{1, 1, 1}, {1, 1, 1}};  // x * ones broadcasts x to (2, 3): not x
  auto fn = [&](const AnyTensor& in) {
    AnyTensor a = ops::mul(in, ones);
    AnyTensor b = ops::sub(0.0, in);  // 0 - x is -x
    AnyTensor c = ops::mul(in, 2.0);
    AnyTensor d = ops::div(1.0, in);
    AnyTensor e = ops::add(in, 0.0);   // -0.0 + 0.0 is +0.0: not x
    AnyTensor f = ops::sub(in, -0.0);  // the same
    return std::vector<AnyTensor>{a, b, c, d, e, f};
  };
  graph::Graph g = capture(x, fn);
  REQUIRE(g.num_nodes() == 6);
  CHECK(graph::simplify(g) == 0);
  CHECK(g.num_nodes() == 6);
  Tensor<float> z{0.0f, -0.0f, 1.5f};
  check_against_eager(std::move(g), z, fn);
}

TEST_CASE("passes: simplify removes x + 0 for integers", "[graph]") {
  Tensor<std::int32_t> x{1, -2, 3};
  auto fn = [](const AnyTensor& in) { return std::vector<AnyTensor>{ops::mul(ops::add(in, 0.0), 2.0)}; };
  graph::Graph g = capture(x, fn);
  REQUIRE(g.num_nodes() == 2);
  CHECK(graph::simplify(g) == 1);
  check_against_eager(std::move(g), Tensor<std::int32_t>{4, 0, -7}, fn);
}

TEST_CASE("passes: simplify removes double transposes and composes permutes", "[graph]") {
  SECTION("transpose of a transpose is removed") {
    Tensor<float> x = random_floats({2, 3}, 12);
    auto fn = [](const AnyTensor& in) { return std::vector<AnyTensor>{ops::exp(ops::transpose(ops::transpose(in, 0, 1), 0, 1))}; };
    graph::Graph g = capture(x, fn);
    REQUIRE(g.count("permute") == 2);
    CHECK(graph::simplify(g) >= 1);
    graph::dce(g);
    CHECK(g.count("permute") == 0);
    CHECK(g.num_nodes() == 1);
    check_against_eager(std::move(g), random_floats({2, 3}, 13), fn);
  }
  SECTION("a permute of a permute becomes one permute") {
    Tensor<float> x = random_floats({2, 3, 4}, 14);
    auto fn = [](const AnyTensor& in) { return std::vector<AnyTensor>{ops::exp(ops::permute(ops::permute(in, {1, 2, 0}), {1, 2, 0}))}; };
    graph::Graph g = capture(x, fn);
    REQUIRE(g.count("permute") == 2);
    CHECK(graph::simplify(g) == 1);
    graph::dce(g);
    CHECK(g.count("permute") == 1);
    CHECK(g.nodes()[0].attrs.ints("perm") == ops::IntList{2, 0, 1});
    CHECK(g.nodes()[0].inputs[0] == g.inputs()[0]);
    check_against_eager(std::move(g), random_floats({2, 3, 4}, 15), fn);
  }
  SECTION("three permutes that compose to the identity vanish") {
    Tensor<float> x = random_floats({2, 3, 4}, 16);
    auto fn = [](const AnyTensor& in) {
      return std::vector<AnyTensor>{ops::exp(ops::permute(ops::permute(ops::permute(in, {1, 2, 0}), {1, 2, 0}), {1, 2, 0}))};
    };
    graph::Graph g = capture(x, fn);
    REQUIRE(g.count("permute") == 3);
    graph::simplify(g);
    graph::dce(g);
    CHECK(g.count("permute") == 0);
    check_against_eager(std::move(g), random_floats({2, 3, 4}, 17), fn);
  }
}

TEST_CASE("passes: simplify shortens reshape chains and removes identity reshapes and casts", "[graph]") {
  SECTION("reshape of a reshape reads the original") {
    Tensor<float> x = random_floats({2, 6}, 18);
    auto fn = [](const AnyTensor& in) { return std::vector<AnyTensor>{ops::exp(ops::reshape(ops::reshape(in, {3, 4}), {12}))}; };
    graph::Graph g = capture(x, fn);
    REQUIRE(g.count("reshape") == 2);
    CHECK(graph::simplify(g) == 1);
    graph::dce(g);
    CHECK(g.count("reshape") == 1);
    CHECK(g.nodes()[0].inputs[0] == g.inputs()[0]);
    check_against_eager(std::move(g), random_floats({2, 6}, 19), fn);
  }
  SECTION("a reshape chain back to the original shape vanishes") {
    Tensor<float> x = random_floats({2, 6}, 20);
    auto fn = [](const AnyTensor& in) {
      return std::vector<AnyTensor>{ops::exp(ops::reshape(ops::reshape(ops::reshape(in, {3, 4}), {4, 3}), {2, 6}))};
    };
    graph::Graph g = capture(x, fn);
    REQUIRE(g.count("reshape") == 3);
    graph::simplify(g);
    graph::dce(g);
    CHECK(g.count("reshape") == 0);
    CHECK(g.num_nodes() == 1);
    check_against_eager(std::move(g), random_floats({2, 6}, 21), fn);
  }
  SECTION("a cast to the same dtype is removed, a real cast stays") {
    Tensor<float> x = random_floats({5}, 22);
    auto fn = [](const AnyTensor& in) {
      AnyTensor same = ops::call1(ops::cast_op, {in}, ops::Attrs{{"dtype", DType::f32}});
      AnyTensor other = ops::call1(ops::cast_op, {in}, ops::Attrs{{"dtype", DType::f64}});
      return std::vector<AnyTensor>{ops::exp(same), other};
    };
    graph::Graph g = capture(x, fn);
    REQUIRE(g.count("cast") == 2);
    CHECK(graph::simplify(g) == 1);
    CHECK(g.count("cast") == 1);
    CHECK(g.num_nodes() == 2);
    check_against_eager(std::move(g), random_floats({5}, 23), fn);
  }
}

TEST_CASE("passes: simplify's rewrites are rows keyed by registered op handles", "[graph]") {
  const auto& rows = graph::simplify_rules();
  std::set<std::string> ops_with_rows;
  for (const auto& row : rows) {
    REQUIRE(row.op != nullptr);
    INFO(row.op->name);
    CHECK(&ops::registry().get(row.op->name) == row.op);  // the registered op, not a copy
    CHECK(std::string(row.pattern).find("->") != std::string::npos);
    CHECK(row.rule != nullptr);
    ops_with_rows.insert(row.op->name);
  }
  CHECK(ops_with_rows == std::set<std::string>{"mul", "div", "add", "sub", "cast", "reshape", "permute"});
}

TEST_CASE("passes: fusion turns tanh(x*0.5+0.1)*1.5 - x/(1+exp(x)) into one fused node", "[graph]") {
  Tensor<float> x = random_floats({1000}, 24);
  auto fn = [](const AnyTensor& in) {
    AnyTensor a = ops::mul(ops::tanh(ops::add(ops::mul(in, 0.5), 0.1)), 1.5);
    AnyTensor b = ops::div(in, ops::add(1.0, ops::exp(in)));
    return std::vector<AnyTensor>{ops::sub(a, b)};
  };
  graph::Graph g = capture(x, fn);
  REQUIRE(g.num_nodes() == 8);
  graph::Graph g2 = g;
  CHECK(graph::fuse_elementwise(g2) == 1);
  CHECK(g2.num_nodes() == 1);
  CHECK(g2.count("fused") == 1);
  CHECK_NOTHROW(graph::verify(g2));

  backend::Executable exe = backend::compile(std::move(g));
  const graph::Graph& og = exe.graph();
  REQUIRE(og.num_nodes() == 1);
  REQUIRE(og.count("fused") == 1);
  const graph::Node& n = og.nodes()[0];
  REQUIRE(n.fused);
  CHECK(n.fused->members.size() == 8);
  std::string label = graph::node_label(n);
  CHECK(label.rfind("fused[", 0) == 0);
  for (const char* m : {"mul", "add", "tanh", "div", "exp", "sub"}) {
    INFO(label << " lists " << m);
    CHECK(label.find(m) != std::string::npos);
  }
  CHECK(std::count(label.begin(), label.end(), '+') == 7);
  CHECK(og.str().find(label) != std::string::npos);
  CHECK(og.dot().find(label) != std::string::npos);
  CHECK(exe.pass_report().get("fuse") == 1);
  CHECK(n.inputs.size() == 5);  // x and the four scalars
  // The steps fold into the unary ops: tanh(x*0.5+0.1)*1.5 is one pass, and
  // t - x/(1+exp(x)) the other (a scalar step, then two binary steps with x and t).
  CHECK(n.fused->instrs.size() == 2);
  // Fusion reorders no arithmetic: the replay is bit-identical to eager.
  Tensor<float> x2 = random_floats({1000}, 25);
  CHECK(same_bits(exe.run({x2})[0], fn(x2)[0]));
}

TEST_CASE("passes: scalar steps folded into a fused unary op give eager's bits", "[graph][fusion]") {
  // Special values: signed zeros (x + -0.0 and x * 1 must keep them), infinities, NaN.
  auto input = [](DType dt, std::uint64_t seed) {
    Tensor<float> f = random_floats({1037}, seed);
    float* p = f.data();
    const float special[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(), 1e-40f, -3.5f, 88.0f};
    for (std::size_t k = 0; k < std::size(special); ++k) p[k * 97] = special[k];
    return ops::cast(f, dt);
  };
  struct Case {
    const char* name;
    std::size_t instrs;  // program length after folding
    std::function<AnyTensor(const AnyTensor&)> fn;
  };
  const std::vector<Case> cases = {
      {"sub, then c * x", 1, [](const AnyTensor& x) { return ops::mul(2.0, ops::exp(ops::sub(x, 0.25))); }},
      {"c + x on both sides", 1, [](const AnyTensor& x) { return ops::add(-0.0, ops::sin(ops::add(0.0, x))); }},
      // A multiplication followed by an addition is one step: three fit in two.
      {"three steps before", 1, [](const AnyTensor& x) { return ops::tanh(ops::add(ops::mul(ops::add(x, 1.0), 3.0), -2.0)); }},
      {"three steps after", 1, [](const AnyTensor& x) { return ops::sub(ops::mul(ops::add(ops::relu(x), 1.0), 3.0), 0.5); }},
      // Two additions do not merge: the third step stays an instruction.
      {"three additions before", 2, [](const AnyTensor& x) { return ops::exp(ops::add(ops::add(ops::add(x, 1.0), 2.0), 3.0)); }},
      // c - x and x / c are not scalar steps (the sign of a NaN would differ) but binary
      // steps with a broadcast operand, in their own operand order.
      {"c - x and x / c", 1, [](const AnyTensor& x) { return ops::sub(1.0, ops::div(ops::exp(x), 3.0)); }},
      // The intermediate x*2 has a second reader: it stays, and tanh(t) + t is one pass.
      {"shared intermediate", 2, [](const AnyTensor& x) { AnyTensor t = ops::mul(x, 2.0); return ops::add(ops::tanh(t), t); }},
      // Binary steps with tensors on either side: x / (exp(x) + 1), then s - that, where s
      // was made before exp. The third, * x, stays an instruction.
      {"binary steps with tensors", 3, [](const AnyTensor& x) {
         AnyTensor s = ops::sin(x);
         AnyTensor e = ops::add(ops::exp(x), 1.0);
         return ops::mul(ops::sub(s, ops::div(x, e)), x);
       }},
      // t - s joins sin's pass (t is ready then), not tanh's (s is made after tanh).
      {"operand not ready", 2, [](const AnyTensor& x) {
         AnyTensor t = ops::tanh(x);
         AnyTensor s = ops::sin(x);
         return ops::sub(t, s);
       }},
      // sin(x) may take exp(x)'s buffer once x*2... reads it: folding x*2 into tanh must not
      // read the buffer after sin overwrote it.
      {"operand overwritten in between", 3, [](const AnyTensor& x) {
         AnyTensor a = ops::exp(x);
         AnyTensor b = ops::mul(a, 2.0);
         AnyTensor c = ops::sin(x);
         AnyTensor d = ops::tanh(b);
         return ops::add(d, c);
       }},
      {"two unary ops in a row", 2, [](const AnyTensor& x) { return ops::add(ops::exp(ops::mul(ops::tanh(ops::mul(x, 0.5)), 2.0)), 1.0); }},
  };
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Case& c : cases) {
      INFO(c.name << " " << ms::dtype_name(dt));
      AnyTensor x = input(dt, 31);
      auto fn = [&](const AnyTensor& in) { return std::vector<AnyTensor>{c.fn(in)}; };
      backend::Executable exe = backend::compile(capture(x, fn));
      REQUIRE(exe.graph().num_nodes() == 1);
      const graph::Node& n = exe.graph().nodes()[0];
      REQUIRE(n.fused);
      CHECK(n.fused->instrs.size() == c.instrs);
      AnyTensor x2 = input(dt, 32);
      CHECK(same_bits(exe.run({x2})[0], fn(x2)[0]));
    }
  }
}

TEST_CASE("passes: random chains with scalar steps replay bit-identically after folding", "[graph][fusion]") {
  // Random programs over x: unary ops, scalar steps on either side, binary ops of earlier
  // values (binary steps when the other value is ready), in an order that makes the fused
  // program reuse its temporaries.
  std::mt19937 rng(2024);
  std::size_t folded = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int len = 4 + static_cast<int>(rng() % 10);
    std::vector<std::uint32_t> plan(static_cast<std::size_t>(len) * 3);
    for (auto& v : plan) v = rng();
    auto fn = [&](const AnyTensor& x) {
      std::vector<AnyTensor> vals{x};
      std::vector<bool> used{true};
      for (int k = 0; k < len; ++k) {
        const std::uint32_t* r = &plan[static_cast<std::size_t>(k) * 3];
        // Mostly the latest value (a chain), sometimes an earlier one (a tree).
        const std::size_t ia = r[1] % 4 == 0 ? r[1] % vals.size() : vals.size() - 1;
        const std::size_t ib = r[2] % vals.size();
        const AnyTensor a = vals[ia], b = vals[ib];
        used[ia] = true;
        if (r[0] % 10 >= 7) used[ib] = true;
        const double c = 0.25 * static_cast<double>(static_cast<int>(r[2] % 9) - 4);
        switch (r[0] % 10) {
          case 0: vals.push_back(ops::tanh(a)); break;
          case 1: vals.push_back(ops::sin(a)); break;
          case 2: vals.push_back(ops::relu(a)); break;
          case 3: vals.push_back(ops::mul(a, c)); break;
          case 4: vals.push_back(ops::add(c, a)); break;
          case 5: vals.push_back(ops::sub(a, c)); break;
          case 6: vals.push_back(ops::mul(c, a)); break;
          case 7: vals.push_back(ops::add(a, b)); break;
          case 8: vals.push_back(ops::sub(b, a)); break;
          default: vals.push_back(ops::div(a, ops::add(ops::abs(b), 1.0))); break;
        }
        used.push_back(false);
      }
      // Every value nothing else reads feeds the output, so nothing is dead.
      AnyTensor out = vals.back();
      for (std::size_t k = 1; k + 1 < vals.size(); ++k)
        if (!used[k]) out = ops::add(out, vals[k]);
      return std::vector<AnyTensor>{out};
    };
    Tensor<float> x = random_floats({300}, 40 + static_cast<std::uint64_t>(trial));
    backend::Executable exe = backend::compile(capture(x, fn));
    for (const auto& n : exe.graph().nodes())
      if (n.fused) folded += n.fused->members.size() - n.fused->instrs.size();
    Tensor<float> x2 = random_floats({300}, 140 + static_cast<std::uint64_t>(trial));
    INFO("trial " << trial);
    CHECK(same_bits(exe.run({x2})[0], fn(x2)[0]));
  }
  CHECK(folded > 30);
}

TEST_CASE("passes: fusion leaves a value with uses outside the group unfused", "[graph]") {
  Tensor<float> x = random_floats({64, 16}, 26);
  SECTION("two chains read exp(x)") {
    auto fn = [](const AnyTensor& in) {
      AnyTensor a = ops::exp(in);
      return std::vector<AnyTensor>{ops::tanh(ops::mul(a, 2.0)), ops::sin(ops::add(a, 1.0))};
    };
    backend::Executable exe = backend::compile(capture(x, fn));
    CHECK(exe.graph().count("exp") == 1);
    CHECK(exe.graph().count("fused") == 2);
    CHECK(exe.graph().num_nodes() == 3);
    Tensor<float> x2 = random_floats({64, 16}, 27);
    auto r = exe.run({x2});
    auto e = fn(x2);
    CHECK(same_bits(r[0], e[0]));
    CHECK(same_bits(r[1], e[1]));
  }
  SECTION("exp(x) is also a graph output") {
    auto fn = [](const AnyTensor& in) {
      AnyTensor a = ops::exp(in);
      return std::vector<AnyTensor>{ops::add(ops::mul(a, 2.0), 1.0), a};
    };
    backend::Executable exe = backend::compile(capture(x, fn));
    CHECK(exe.graph().count("exp") == 1);
    CHECK(exe.graph().count("fused") == 1);
    CHECK(node_ops(exe.graph()) == std::vector<std::string>{"exp", "fused[mul+add]"});
  }
  SECTION("a broadcast intermediate is not fused into a larger output") {
    Tensor<float> bias = random_floats({16}, 28);
    // exp((16,)) is not fused into the (64, 16) group: intermediates must be full blocks.
    graph::Capture cap;
    cap.input(x);
    cap.param(bias, "bias");
    AnyTensor y = ops::tanh(ops::add(x, ops::exp(ops::mul(bias, 3.0))));
    cap.output(y);
    backend::Executable exe = backend::compile(cap.finish());
    CHECK(exe.graph().count("fused") == 2);  // fused[mul+exp] on (16,), fused[add+tanh] on (64, 16)
    CHECK(node_ops(exe.graph()) == std::vector<std::string>{"fused[mul+exp]", "fused[add+tanh]"});
  }
}

TEST_CASE("passes: opt levels and per-pass switches", "[graph]") {
  Tensor<float> x = random_floats({8, 8}, 29);
  Tensor<float> c{2.0f};
  auto fn = [&](const AnyTensor& in) {
    AnyTensor dead = ops::sin(in);
    (void)dead;
    AnyTensor k = ops::exp(c);                                      // foldable
    AnyTensor a = ops::mul(ops::exp(in), 1.0), b = ops::exp(in);    // x*1 and a duplicate
    return std::vector<AnyTensor>{ops::tanh(ops::add(ops::mul(a, b), k))};
  };
  const graph::Graph g = capture(x, fn);
  REQUIRE(g.num_nodes() == 8);
  auto run = [&](graph::PassOptions opt) {
    graph::Graph h = g;
    graph::PassReport rep = graph::optimize(h, opt);
    return std::make_pair(std::move(h), rep);
  };
  SECTION("level 0 runs nothing") {
    graph::PassOptions o;
    o.opt_level = 0;
    auto [h, rep] = run(o);
    CHECK(rep.changes.empty());
    CHECK(h.num_nodes() == 8);
  }
  SECTION("level 1 runs dce, cse, fold, simplify, dce") {
    graph::PassOptions o;
    o.opt_level = 1;
    auto [h, rep] = run(o);
    std::vector<std::string> names;
    for (auto& [p, n] : rep.changes) names.push_back(p);
    CHECK(names == std::vector<std::string>{"dce", "cse", "fold", "simplify", "dce"});
    CHECK(rep.get("dce") == 1);       // sin (simplify removes the mul by one itself)
    CHECK(rep.get("cse") == 1);
    CHECK(rep.get("fold") == 1);
    CHECK(rep.get("simplify") == 1);
    CHECK(h.num_nodes() == 4);        // exp, mul, add, tanh
    CHECK(h.count("fused") == 0);
  }
  SECTION("level 2 also fuses") {
    auto [h, rep] = run({});
    CHECK(rep.get("fuse") == 1);
    CHECK(h.num_nodes() == 1);
    CHECK(h.count("fused") == 1);
    CHECK(node_ops(h) == std::vector<std::string>{"fused[exp+mul+add+tanh]"});
  }
  SECTION("each pass can be switched off") {
    graph::PassOptions o;
    o.opt_level = 1;
    o.dce = false;
    CHECK(run(o).first.count("sin") == 1);
    o = {};
    o.opt_level = 1;
    o.cse = false;
    CHECK(run(o).first.count("exp") == 2);
    o = {};
    o.opt_level = 1;
    o.fold = false;
    CHECK(run(o).first.count("exp") == 2);  // exp(c) stays
    o = {};
    o.opt_level = 1;
    o.simplify = false;
    CHECK(run(o).first.count("mul") == 2);
    o = {};
    o.fuse = false;
    auto [h, rep] = run(o);
    CHECK(h.count("fused") == 0);
    CHECK(rep.get("fuse") == 0);
    CHECK(h.num_nodes() == 4);
  }
  SECTION("the result is the same at every level") {
    Tensor<float> x2 = random_floats({8, 8}, 30);
    std::vector<AnyTensor> e = fn(x2);
    for (int level : {0, 1, 2}) {
      INFO("level " << level);
      backend::CompileOptions co;
      co.passes.opt_level = level;
      backend::Executable exe = backend::compile(g, co);
      CHECK(same_bits(exe.run({x2})[0], e[0]));
    }
  }
}

TEST_CASE("passes: the IR is dumped after each pass into a directory", "[graph]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() /
                 fmt::format("ms_ir_dump_{}", std::chrono::steady_clock::now().time_since_epoch().count());
  Tensor<float> x = random_floats({4}, 31);
  auto fn = [](const AnyTensor& in) { return std::vector<AnyTensor>{ops::tanh(ops::add(ops::mul(in, 0.5), 0.1))}; };
  const std::vector<std::string> stems{"00_captured", "01_dce", "02_cse", "03_fold",
                                       "04_simplify", "05_dce", "06_fuse", "07_fuse_epilogue"};
  auto read = [](const fs::path& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  SECTION("PassOptions::dump_dir") {
    graph::Graph g = capture(x, fn);
    graph::PassOptions o;
    o.dump_dir = (dir / "a").string();
    graph::optimize(g, o);
    for (auto& s : stems) {
      INFO(s);
      CHECK(fs::exists(dir / "a" / (s + ".ir")));
      CHECK(fs::exists(dir / "a" / (s + ".dot")));
    }
    CHECK(read(dir / "a" / "00_captured.ir").find("= tanh(") != std::string::npos);
    CHECK(read(dir / "a" / "06_fuse.ir").find("fused[mul+add+tanh]") != std::string::npos);
    CHECK(read(dir / "a" / "06_fuse.dot").rfind("digraph ms {", 0) == 0);
    std::size_t files = 0;
    for (auto& e : fs::directory_iterator(dir / "a")) {
      (void)e;
      ++files;
    }
    CHECK(files == 2 * stems.size());
  }
  SECTION("MS_DUMP_IR, and only the passes that ran") {
    graph::Graph g = capture(x, fn);
    ::setenv("MS_DUMP_IR", (dir / "b").c_str(), 1);
    graph::PassOptions o;
    o.opt_level = 1;
    graph::optimize(g, o);
    ::unsetenv("MS_DUMP_IR");
    CHECK(fs::exists(dir / "b" / "00_captured.ir"));
    CHECK(fs::exists(dir / "b" / "05_dce.ir"));
    CHECK_FALSE(fs::exists(dir / "b" / "06_fuse.ir"));
  }
  fs::remove_all(dir);
}

namespace {
/// A training-mode batch_norm whose running statistics are read by `graph` only through
/// the op's in-place write: the value the graph returns does not depend on the node.
struct BatchNormStats {
  AnyTensor rm = ops::zeros({3}), rv = ops::ones({3});
  AnyTensor w = ops::ones({3}), b = ops::zeros({3});
};
}  // namespace

TEST_CASE("passes: a batch_norm whose output is unused still updates its running statistics", "[graph]") {
  AnyTensor x = random_floats({8, 3}, 21), x2 = random_floats({8, 3}, 22);
  BatchNormStats eager, traced;
  auto fn = [](BatchNormStats& s, const AnyTensor& in) {
    (void)ops::batch_norm(in, s.w, s.b, s.rm, s.rv, true, 0.1, 1e-5);  // y unused: only the stats change
    return ops::exp(in);
  };
  (void)fn(eager, x);
  (void)fn(eager, x2);

  graph::Capture cap;
  cap.input(x, "x");
  cap.output(fn(traced, x));
  graph::Graph g = cap.finish();
  REQUIRE(g.count("batch_norm") == 1);
  CHECK(ms::ops::registry().get("batch_norm").writes_input(g.nodes()[0].attrs, 5, 3));
  // The capture ran the op eagerly once; replay the graph for the second step.
  graph::Graph copy = g;
  CHECK(graph::dce(copy) == 0);
  CHECK(copy.count("batch_norm") == 1);
  backend::Executable exe = backend::compile(std::move(g));
  CHECK(exe.num_steps() >= 2);
  std::vector<AnyTensor> r = exe.run({x2});
  CHECK(same_bits(r[0], ops::exp(x2)));
  CHECK(same_bits(traced.rm, eager.rm));
  CHECK(same_bits(traced.rv, eager.rv));
}

TEST_CASE("passes: two identical batch_norm calls are not merged: each updates the statistics", "[graph]") {
  AnyTensor x = random_floats({6, 3}, 23), x2 = random_floats({6, 3}, 24);
  BatchNormStats eager, traced;
  auto fn = [](BatchNormStats& s, const AnyTensor& in) {
    AnyTensor y1 = ops::batch_norm(in, s.w, s.b, s.rm, s.rv, true, 0.1, 1e-5);
    AnyTensor y2 = ops::batch_norm(in, s.w, s.b, s.rm, s.rv, true, 0.1, 1e-5);
    return ops::add(y1, y2);
  };
  (void)fn(eager, x);
  const AnyTensor want = fn(eager, x2);
  graph::Capture cap;
  cap.input(x, "x");
  cap.output(fn(traced, x));
  graph::Graph g = cap.finish();
  REQUIRE(g.count("batch_norm") == 2);
  graph::Graph copy = g;
  CHECK(graph::cse(copy) == 0);
  CHECK(copy.count("batch_norm") == 2);
  backend::Executable exe = backend::compile(std::move(g));
  std::vector<AnyTensor> r = exe.run({x2});
  CHECK(same_bits(r[0], want));
  CHECK(same_bits(traced.rm, eager.rm));  // four updates on each side
  CHECK(same_bits(traced.rv, eager.rv));
}
