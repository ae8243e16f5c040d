// Memory planning: the planner on random buffer sets (no two simultaneously live
// buffers overlap, peak >= the live lower bound, the bound itself), its checker on
// corrupt plans, and compiled graphs: random DAGs of 100+ elementwise/view nodes
// replayed against eager runs (with and without fusion and in-place reuse: this is
// what proves that the arena never clobbers a live value), a chain that must run in
// one buffer, and cases where an input buffer must not be reused in place.

#include <algorithm>
#include <map>
#include <random>
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
using ms_test::same_bits;

/// Uniform in [-2, 2) from `seed`.
Tensor<float> dag_value(const Shape& s, std::uint32_t seed) { return ms_test::random_floats(s, seed, -2.0f, 2.0f); }

/// A random program of `steps` steps over inputs x0, x1 (32, 32), bias (32,), col (32, 1):
/// unary and binary elementwise ops with random fan-in (biased toward recent values),
/// where(), scalar operands, transposes, broadcasts and reshapes. Deterministic in `seed`.
std::vector<AnyTensor> random_dag(std::uint32_t seed, int steps, const std::vector<AnyTensor>& in) {
  std::mt19937 rng(seed);
  std::vector<AnyTensor> pool(in.begin(), in.end());
  auto pick = [&]() -> AnyTensor {
    std::size_t m = pool.size();
    if (rng() % 2) return pool[m - 1 - rng() % std::min<std::size_t>(m, 6)];
    return pool[rng() % m];
  };
  const Shape sq{32, 32};
  for (int i = 0; i < steps; ++i) {
    AnyTensor r;
    switch (rng() % 17) {
      case 0: r = ops::tanh(pick()); break;
      case 1: r = ops::sigmoid(pick()); break;
      case 2: r = ops::neg(pick()); break;
      case 3: r = ops::sin(pick()); break;
      case 4: r = ops::abs(pick()); break;
      case 5: r = ops::add(pick(), pick()); break;
      case 6: r = ops::sub(pick(), pick()); break;
      case 7: r = ops::mul(pick(), pick()); break;
      case 8: r = ops::maximum(pick(), pick()); break;
      case 9: r = ops::minimum(pick(), pick()); break;
      case 10: r = ops::mul(pick(), 0.5); break;
      case 11: {
        AnyTensor a = pick(), b = pick(), c = pick(), d = pick();
        r = ops::where(ops::gt(a, b), c, d);
        break;
      }
      case 12: {
        AnyTensor a = pick();
        r = a.shape() == sq ? ops::transpose(a, 0, 1) : ops::tanh(a);
        break;
      }
      case 13: {
        AnyTensor a = pick();
        r = a.shape() == Shape{32} ? ops::expand(a, {32, 32}) : ops::cos(a);
        break;
      }
      case 14: {
        AnyTensor a = pick();
        r = a.shape() == sq ? ops::reshape(ops::reshape(a, {1024}), {32, 32}) : ops::neg(a);
        break;
      }
      case 15: r = ops::add(pick(), 1.0); break;
      default: r = ops::mul(pick(), ops::tanh(pick())); break;
    }
    pool.push_back(r);
  }
  std::vector<AnyTensor> outs{pool.back()};
  for (int j = 0; j < 3; ++j) outs.push_back(pool[in.size() + rng() % static_cast<std::uint32_t>(steps)]);
  return outs;
}

std::vector<AnyTensor> dag_inputs(std::uint32_t seed) {
  return {dag_value({32, 32}, seed), dag_value({32, 32}, seed + 1), dag_value({32}, seed + 2),
          dag_value({32, 1}, seed + 3)};
}

/// Largest sum of 64-byte-aligned sizes live at one step, by brute force.
std::size_t brute_lower_bound(const std::vector<backend::BufferReq>& bufs) {
  int last = 0;
  for (auto& b : bufs) last = std::max(last, b.end);
  std::size_t best = 0;
  for (int s = 0; s <= last; ++s) {
    std::size_t sum = 0;
    for (auto& b : bufs)
      if (b.start <= s && s <= b.end) sum += backend::align_up(b.size, 64);
    best = std::max(best, sum);
  }
  return best;
}

}  // namespace

// ---- the planner alone ------------------------------------------------------------------------

TEST_CASE("memory plan: random sets of 200 buffers are placed without overlap, peak >= lower bound", "[graph]") {
  double worst = 0, sum = 0;
  const int sets = 60;
  for (int seed = 0; seed < sets; ++seed) {
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    std::vector<backend::BufferReq> bufs(200);
    for (auto& b : bufs) {
      int kind = static_cast<int>(rng() % 10);
      b.size = kind == 0 ? 0 : kind < 4 ? 1 + rng() % 256 : 1 + rng() % (1u << 20);
      b.start = static_cast<int>(rng() % 300);
      b.end = b.start + static_cast<int>(rng() % (rng() % 4 == 0 ? 120 : 12));
    }
    backend::MemoryPlan plan = backend::plan_memory(bufs);
    INFO("seed " << seed);
    REQUIRE_NOTHROW(backend::check_memory_plan(bufs, plan));
    CHECK(plan.lower_bound == brute_lower_bound(bufs));
    CHECK(plan.peak >= plan.lower_bound);
    std::size_t total = 0;
    for (auto& b : bufs) total += backend::align_up(std::max<std::size_t>(b.size, 1), 64);
    CHECK(plan.peak <= total);
    for (auto off : plan.offsets) CHECK(off % 64 == 0);
    worst = std::max(worst, plan.ratio());
    sum += plan.ratio();
  }
  fmt::print("memory_plan_test: random buffer sets (200 buffers): peak/lower_bound mean {:.3f}, worst {:.3f}\n",
             sum / sets, worst);
  CHECK(worst < 1.5);
}

TEST_CASE("memory plan: buffers with disjoint lifetimes share memory, overlapping ones do not", "[graph]") {
  std::vector<backend::BufferReq> bufs{{1000, 0, 1}, {1000, 2, 3}, {500, 1, 2}, {500, 4, 5}};
  backend::MemoryPlan plan = backend::plan_memory(bufs);
  REQUIRE_NOTHROW(backend::check_memory_plan(bufs, plan));
  CHECK(plan.lower_bound == 1024 + 512);
  CHECK(plan.peak == 1024 + 512);
  CHECK(plan.offsets[0] == plan.offsets[1]);
  CHECK(plan.ratio() == 1.0);
}

TEST_CASE("memory plan: the best of several placement orders reaches the bound where largest-first does not", "[graph]") {
  // Largest first places b at 0 and c above it; a then takes b's old place and d finds no
  // gap of its size: 7 units. Longest-lived first packs them into 6, the live bound at step 4.
  const std::size_t u = 64;
  std::vector<backend::BufferReq> bufs{{2 * u, 4, 4}, {3 * u, 1, 3}, {2 * u, 3, 6}, {2 * u, 4, 4}};
  std::vector<std::size_t> largest_first{1, 2, 0, 3};
  CHECK(backend::detail::place_in_order(bufs, largest_first, 64).peak == 7 * u);
  backend::MemoryPlan plan = backend::plan_memory(bufs);
  REQUIRE_NOTHROW(backend::check_memory_plan(bufs, plan));
  CHECK(plan.lower_bound == 6 * u);
  CHECK(plan.peak == 6 * u);
}

TEST_CASE("memory plan: the checker rejects overlapping live buffers and buffers past the arena", "[graph]") {
  std::vector<backend::BufferReq> bufs{{100, 0, 2}, {100, 1, 3}};
  backend::MemoryPlan plan = backend::plan_memory(bufs);
  REQUIRE_NOTHROW(backend::check_memory_plan(bufs, plan));
  backend::MemoryPlan bad = plan;
  bad.offsets = {0, 0};
  MS_REQUIRE_THROWS_MSG(backend::check_memory_plan(bufs, bad), ms::GraphError,
                        "[ms.graph_error] memory plan: buffers 0 (steps 0-2, bytes 0+100) and 1 (steps 1-3, bytes 0+100) overlap");
  bad.offsets = {0, 50};
  MS_REQUIRE_THROWS_MSG(backend::check_memory_plan(bufs, bad), ms::GraphError,
                        "[ms.graph_error] memory plan: buffers 0 (steps 0-2, bytes 0+100) and 1 (steps 1-3, bytes 50+100) overlap");
  bad.offsets = {0, 128};
  bad.peak = 128;
  MS_REQUIRE_THROWS_MSG(backend::check_memory_plan(bufs, bad), ms::GraphError,
                        "[ms.graph_error] memory plan: buffer 1 [128, 228) exceeds the arena of 128 bytes");
  bad.offsets = {0};
  MS_REQUIRE_THROWS_MSG(backend::check_memory_plan(bufs, bad), ms::GraphError,
                        "[ms.graph_error] memory plan: 1 offsets for 2 buffers");
  // The same offsets are fine when the lifetimes do not meet.
  std::vector<backend::BufferReq> apart{{100, 0, 1}, {100, 2, 3}};
  backend::MemoryPlan shared{{0, 0}, 128, 128};
  CHECK_NOTHROW(backend::check_memory_plan(apart, shared));
}

// ---- compiled graphs --------------------------------------------------------------------------

TEST_CASE("memory plan: random DAGs of 100+ nodes replay like eager, with and without fusion and in-place reuse", "[graph]") {
  struct Mode {
    const char* name;
    int opt_level;
    bool inplace;
  };
  const Mode modes[] = {{"no passes", 0, true}, {"no fusion", 1, true}, {"fusion", 2, true}, {"fusion, no in-place", 2, false}};
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    std::vector<AnyTensor> a = dag_inputs(100 * seed), b = dag_inputs(100 * seed + 50);
    graph::Graph g;
    std::vector<AnyTensor> eager_a;
    {
      graph::Capture cap;
      for (auto& t : a) cap.input(t);
      eager_a = random_dag(seed, 130, a);
      for (auto& t : eager_a) cap.output(t);
      g = cap.finish();
    }
    REQUIRE(g.num_nodes() >= 130);
    std::vector<AnyTensor> eager_b = random_dag(seed, 130, b);
    for (const Mode& m : modes) {
      INFO("seed " << seed << ", " << m.name);
      backend::CompileOptions opt;
      opt.passes.opt_level = m.opt_level;
      opt.inplace = m.inplace;
      backend::Executable exe = backend::compile(g, opt);
      const backend::MemoryPlan& plan = exe.memory_plan();
      CHECK(plan.peak >= plan.lower_bound);
      CHECK(exe.arena_bytes() == plan.peak);
      fmt::print("memory_plan_test: random DAG seed {} ({}): {} nodes -> {} steps, {} buffers, peak {} B, lower bound {} B, "
                 "ratio {:.3f}\n",
                 seed, m.name, g.num_nodes(), exe.num_steps(), plan.offsets.size(), plan.peak, plan.lower_bound,
                 plan.ratio());
      std::vector<AnyTensor> ra = exe.run(a);
      std::vector<AnyTensor> rb = exe.run(b);
      std::vector<AnyTensor> rb2 = exe.run(b);
      REQUIRE(ra.size() == eager_a.size());
      for (std::size_t i = 0; i < ra.size(); ++i) {
        INFO("output " << i);
        CHECK(same_bits(ra[i], eager_a[i]));
        CHECK(same_bits(rb[i], eager_b[i]));
        CHECK(same_bits(rb2[i], eager_b[i]));
      }
    }
  }
}

TEST_CASE("memory plan: a chain of 10 unary ops on 1M floats runs in one arena buffer", "[graph]") {
  const i64 n = 1 << 20;
  const std::size_t bytes = static_cast<std::size_t>(n) * 4;
  Tensor<float> x = dag_value({n}, 7);
  auto chain = [](const AnyTensor& v) {
    AnyTensor y = ops::tanh(v);
    y = ops::sin(y);
    y = ops::neg(y);
    y = ops::abs(y);
    y = ops::sqrt(y);
    y = ops::sigmoid(y);
    y = ops::cos(y);
    y = ops::relu(y);
    y = ops::exp(y);
    return ops::neg(y);
  };
  graph::Capture cap;
  cap.input(x);
  AnyTensor y = chain(x);
  cap.output(y);
  graph::Graph g = cap.finish();
  REQUIRE(g.num_nodes() == 10);
  Tensor<float> x2 = dag_value({n}, 8);
  AnyTensor e2 = chain(x2);
  SECTION("in place: the nine intermediates share one buffer") {
    backend::CompileOptions opt;
    opt.passes.opt_level = 1;
    backend::Executable exe = backend::compile(g, opt);
    REQUIRE(exe.num_steps() == 10);
    CHECK(exe.memory_plan().offsets.size() == 1);
    CHECK(exe.arena_bytes() == bytes);
    CHECK(exe.memory_plan().lower_bound == bytes);
    CHECK(same_bits(exe.run({x2})[0], e2));
  }
  SECTION("without in-place reuse: two buffers alternate") {
    backend::CompileOptions opt;
    opt.passes.opt_level = 1;
    opt.inplace = false;
    backend::Executable exe = backend::compile(g, opt);
    CHECK(exe.memory_plan().offsets.size() == 9);
    CHECK(exe.arena_bytes() == 2 * bytes);
    CHECK(exe.memory_plan().lower_bound == 2 * bytes);
    CHECK(same_bits(exe.run({x2})[0], e2));
  }
  SECTION("fused: no intermediate buffer at all") {
    backend::Executable exe = backend::compile(g);
    CHECK(exe.num_steps() == 1);
    CHECK(exe.memory_plan().offsets.empty());
    CHECK(same_bits(exe.run({x2})[0], e2));
  }
}

TEST_CASE("memory plan: a value read again later is not overwritten in place", "[graph]") {
  const i64 n = 1 << 16;
  const std::size_t bytes = static_cast<std::size_t>(n) * 4;
  auto fn = [](const AnyTensor& x) {
    AnyTensor a = ops::exp(x);
    AnyTensor b = ops::tanh(a);  // may not write over a: a is read again below
    AnyTensor c = ops::sin(b);   // may write over b
    return ops::add(c, a);
  };
  Tensor<float> x = dag_value({n}, 9), x2 = dag_value({n}, 10);
  graph::Capture cap;
  cap.input(x);
  AnyTensor y = fn(x);
  cap.output(y);
  backend::CompileOptions opt;
  opt.passes.opt_level = 1;
  backend::Executable exe = backend::compile(cap.finish(), opt);
  CHECK(exe.memory_plan().offsets.size() == 2);
  CHECK(exe.arena_bytes() == 2 * bytes);
  CHECK(same_bits(exe.run({x2})[0], fn(x2)));
}

TEST_CASE("memory plan: an op that also reads a view of its input's buffer does not write over it", "[graph]") {
  // a + a.t(): the add is the last reader of a, but it reads a's buffer through the
  // transposed view too, at other positions; writing its result over a would clobber
  // elements that the view has not read yet.
  // The result is returned through a reshape (a view) so that the add's (or the fused
  // node's) own output lives in the arena rather than in a fresh output tensor.
  auto fn = [](const AnyTensor& x) {
    AnyTensor a = ops::exp(ops::mul(x, 0.5));
    return ops::reshape(ops::tanh(ops::add(a, ops::transpose(a, 0, 1))), {4096});
  };
  auto fn_expand = [](const AnyTensor& x) {
    AnyTensor a = ops::exp(ops::mul(x, 0.5));  // (64, 64)
    AnyTensor r = ops::slice(a, 0, 0, 1);      // row 0 of a, (1, 64)
    return ops::reshape(ops::tanh(ops::add(a, ops::expand(r, {64, 64}))), {4096});  // every row reads row 0
  };
  Tensor<float> x = dag_value({64, 64}, 11), x2 = dag_value({64, 64}, 12);
  for (auto* f : {+fn, +fn_expand}) {
    for (int level : {1, 2}) {
      INFO("opt_level " << level);
      graph::Capture cap;
      cap.input(x);
      AnyTensor y = f(x);
      cap.output(y);
      backend::CompileOptions opt;
      opt.passes.opt_level = level;
      backend::Executable exe = backend::compile(cap.finish(), opt);
      CHECK(same_bits(exe.run({x2})[0], f(x2)));
    }
  }
}
