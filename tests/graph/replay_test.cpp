// Replaying compiled graphs: ms::jit traces once per input signature and replays
// afterwards (bounded cache), Executable::run rejects bad inputs with exact messages,
// replays are deterministic (bit-identical run to run and across thread counts) for a
// fused kernel with row- and column-broadcast and transposed operands, results of
// earlier replays are never overwritten by later ones.

#include <random>
#include <string>
#include <tuple>
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
using ms_test::ThreadGuard;

/// Uniform in [-3, 3) (drawn in double) from `seed`.
template <class T = float>
Tensor<T> random_input(const Shape& s, std::uint32_t seed) {
  return ms_test::random<T>(s, seed, -3.0, 3.0);
}

}  // namespace

// ---- jit: trace once per signature ------------------------------------------------------------

TEST_CASE("jit: traces once per input signature and replays afterwards", "[graph]") {
  auto body = [](const auto& x) { return ms::tanh(x * 0.5f) + x; };
  int traced = 0;  // counts calls of the wrapped function, i.e. traces
  auto f = ms::jit([&](const auto& x) {
    ++traced;
    return body(x);
  });
  CHECK(f.executable() == nullptr);
  Tensor<float> a = random_input({3, 4}, 1), b = random_input({3, 4}, 2), c = random_input({5, 4}, 3);

  Tensor<float> ya = f(a);
  CHECK(f.num_traces() == 1);
  CHECK(f.num_replays() == 0);
  CHECK(traced == 1);
  CHECK(same_bits(ya, body(a)));
  REQUIRE(f.executable() != nullptr);
  CHECK(f.executable()->graph().count("fused") == 1);

  Tensor<float> yb = f(b);  // same signature: replay, the function is not called
  CHECK(f.num_traces() == 1);
  CHECK(f.num_replays() == 1);
  CHECK(traced == 1);
  CHECK(same_bits(yb, body(b)));

  Tensor<float> yc = f(c);  // a new shape traces again
  CHECK(f.num_traces() == 2);
  CHECK(traced == 2);
  CHECK(same_bits(yc, body(c)));

  Tensor<double> d = random_input<double>({3, 4}, 4);
  Tensor<double> yd = f(d);  // a new dtype traces again
  CHECK(f.num_traces() == 3);
  CHECK(traced == 3);
  CHECK(same_bits(yd, body(d)));

  CHECK(same_bits(f(a), body(a)));  // both earlier signatures are still cached
  CHECK(same_bits(f(c), body(c)));
  CHECK(f.num_traces() == 3);
  CHECK(f.num_replays() == 3);
  CHECK(traced == 3);
  CHECK(same_bits(ya, body(a)));  // an earlier result was not overwritten by later replays
  CHECK(same_bits(yb, body(b)));
}

TEST_CASE("jit: the cache is bounded, evicted signatures trace again", "[graph]") {
  int calls = 0;
  auto f = ms::jit(
      [&calls](const Tensor<float>& x) {
        ++calls;
        return ms::exp(x) * 2.0f;
      },
      {}, 1);
  Tensor<float> a = random_input({3, 4}, 5), c = random_input({5, 4}, 6);
  for (int i = 0; i < 4; ++i) {
    Tensor<float> y = f(i % 2 ? c : a);
    CHECK(same_bits(y, ms::exp(i % 2 ? c : a) * 2.0f));
  }
  CHECK(f.num_traces() == 4);
  CHECK(f.num_replays() == 0);
  f(c);
  CHECK(f.num_traces() == 4);
  CHECK(f.num_replays() == 1);
  CHECK(calls == 4);

  auto g = ms::jit([](const Tensor<float>& x) { return ms::exp(x) * 2.0f; }, {}, 2);
  for (int i = 0; i < 4; ++i) g(i % 2 ? c : a);
  CHECK(g.num_traces() == 2);
  CHECK(g.num_replays() == 2);
}

TEST_CASE("jit: several inputs and outputs", "[graph]") {
  auto f = ms::jit([](const Tensor<float>& x, const Tensor<float>& y) { return std::make_tuple(x + y, x * y, ms::sin(x)); });
  Tensor<float> a = random_input({7}, 7), b = random_input({7}, 8), c = random_input({7}, 9), d = random_input({7}, 10);
  f(a, b);
  auto [s, p, q] = f(c, d);
  CHECK(f.num_replays() == 1);
  CHECK(same_bits(s, c + d));
  CHECK(same_bits(p, c * d));
  CHECK(same_bits(q, ms::sin(c)));
}

TEST_CASE("jit: a trace with the same tensor passed twice does not tie the two arguments together", "[graph]") {
  auto f = ms::jit([](const Tensor<float>& x, const Tensor<float>& y) { return x * 2.0f + y; });
  Tensor<float> a = random_input({6}, 11), p = random_input({6}, 12), q = random_input({6}, 13);
  CHECK(same_bits(f(a, a), a * 2.0f + a));
  CHECK(same_bits(f(p, q), p * 2.0f + q));
  CHECK(same_bits(f(q, q), q * 2.0f + q));
  CHECK(same_bits(f(q, p), q * 2.0f + p));
}

// ---- Executable::run input checks -------------------------------------------------------------

TEST_CASE("replay: bad inputs are rejected with exact messages", "[graph]") {
  Tensor<float> x = random_input({2, 3}, 14);
  graph::Capture cap;
  cap.input(x);
  Tensor<float> y = ms::exp(x) + 1.0f;
  cap.output(y);
  backend::Executable exe = backend::compile(cap.finish());
  MS_REQUIRE_THROWS_MSG(exe.run({x, x}), ms::ValueError, "[ms.value_error] run: the graph takes 1 inputs, got 2");
  MS_REQUIRE_THROWS_MSG(exe.run(std::vector<AnyTensor>{}), ms::ValueError, "[ms.value_error] run: the graph takes 1 inputs, got 0");
  MS_REQUIRE_THROWS_MSG(exe.run({random_input<double>({2, 3}, 15)}), ms::DTypeError,
                        "[ms.dtype_error] run: input 0 must be float32 (2, 3), got float64 (2, 3)");
  MS_REQUIRE_THROWS_MSG(exe.run({random_input({3, 2}, 16)}), ms::ShapeError,
                        "[ms.shape_error] run: input 0 must be float32 (2, 3), got float32 (3, 2)");
  MS_REQUIRE_THROWS_MSG(exe.run({random_input({6}, 17)}), ms::ShapeError,
                        "[ms.shape_error] run: input 0 must be float32 (2, 3), got float32 (6,)");
  MS_REQUIRE_THROWS_MSG(exe.run({AnyTensor()}), ms::ValueError, "[ms.value_error] run: input 0 is an undefined tensor");
  // A good run after the bad ones.
  CHECK(same_bits(exe.run({x})[0], ms::exp(x) + 1.0f));
}

// ---- determinism ------------------------------------------------------------------------------

TEST_CASE("replay: deterministic across runs and thread counts for a fused kernel with broadcast and strided operands", "[graph]") {
  ThreadGuard guard;
  const i64 B = 400, N = 300;  // 120000 elements: several blocks per thread
  auto fn = [](const Tensor<float>& x, const Tensor<float>& bias, const Tensor<float>& col, const Tensor<float>& w) {
    // x (B, N), bias (N,) row broadcast, col (B, 1) column broadcast, w (N, B) read transposed.
    return ms::tanh(x * 0.5f + bias) * col - w.t() / (1.0f + ms::exp(x));
  };
  Tensor<float> x = random_input({B, N}, 20), bias = random_input({N}, 21), col = random_input({B, 1}, 22),
                w = random_input({N, B}, 23);
  graph::Capture cap;
  for (const AnyTensor& t : {AnyTensor(x), AnyTensor(bias), AnyTensor(col), AnyTensor(w)}) cap.input(t);
  Tensor<float> y0 = fn(x, bias, col, w);
  cap.output(y0);
  backend::Executable exe = backend::compile(cap.finish());
  REQUIRE(exe.graph().count("fused") == 1);
  REQUIRE(exe.graph().count("permute") == 1);
  REQUIRE(exe.graph().num_nodes() == 2);
  for (auto& n : exe.graph().nodes())
    if (n.fused) CHECK(n.fused->members.size() == 8);

  Tensor<float> x2 = random_input({B, N}, 24), bias2 = random_input({N}, 25), col2 = random_input({B, 1}, 26),
                w2 = random_input({N, B}, 27);
  std::vector<AnyTensor> in{x2, bias2, col2, w2};
  ms::set_num_threads(1);
  Tensor<float> eager1 = fn(x2, bias2, col2, w2);
  AnyTensor first = exe.run(in)[0];
  for (int i = 0; i < 4; ++i) CHECK(same_bits(exe.run(in)[0], first));
  ms::set_num_threads(2);
  Tensor<float> eager2 = fn(x2, bias2, col2, w2);
  for (int i = 0; i < 5; ++i) CHECK(same_bits(exe.run(in)[0], first));
  CHECK(same_bits(eager1, eager2));
  // Fusion reorders no arithmetic: the replay equals the eager run bit for bit.
  CHECK(same_bits(first, eager1));
  // The first replay's result is still intact after the later ones.
  CHECK(same_bits(first, eager2));
}

TEST_CASE("replay: a fused node reads transposed and sliced operands at every thread count", "[graph]") {
  ThreadGuard guard;
  auto fn = [](const Tensor<float>& a, const Tensor<float>& b) {
    Tensor<float> at = a.t();                 // (512, 384), strided
    Tensor<float> bs = b.slice(1, 0, 768, 2);  // (512, 384), every second column
    return ms::sigmoid(at * bs + 0.25f) - ms::abs(at);
  };
  Tensor<float> a = random_input({384, 512}, 30), b = random_input({512, 768}, 31);
  graph::Capture cap;
  cap.input(a);
  cap.input(b);
  Tensor<float> y = fn(a, b);
  cap.output(y);
  backend::Executable exe = backend::compile(cap.finish());
  REQUIRE(exe.graph().count("fused") == 1);
  Tensor<float> a2 = random_input({384, 512}, 32), b2 = random_input({512, 768}, 33);
  for (int threads : {1, 2}) {
    ms::set_num_threads(threads);
    INFO(threads << " threads");
    CHECK(same_bits(exe.run({a2, b2})[0], fn(a2, b2)));
  }
}

TEST_CASE("replay: a graph that reshapes its input accepts a non-contiguous input", "[graph]") {
  auto fn = [](const Tensor<float>& x) { return ms::exp(x.reshape({16})) * 2.0f; };
  auto f = ms::jit(fn);
  Tensor<float> a = random_input({4, 4}, 40), b = random_input({4, 4}, 41);
  CHECK(same_bits(f(a), fn(a)));
  Tensor<float> bt = b.t();  // same signature (float32 (4, 4)), transposed strides
  REQUIRE_FALSE(bt.is_contiguous());
  CHECK(same_bits(f(bt), fn(bt)));
  CHECK(f.num_traces() == 1);
  CHECK(f.num_replays() == 1);
}

TEST_CASE("replay: elementwise and fused steps accept non-contiguous inputs of the traced shape", "[graph]") {
  auto fn = [](const Tensor<float>& x, const Tensor<float>& y) { return ms::exp(x) * 2.0f + y; };
  Tensor<float> a = random_input({6, 6}, 60), b = random_input({6, 6}, 61);
  Tensor<float> c = random_input({6, 6}, 62), d = random_input({6, 6}, 63);
  for (int level : {0, 1, 2}) {
    INFO("opt_level " << level);
    backend::CompileOptions opt;
    opt.passes.opt_level = level;
    auto f = ms::jit(fn, opt);
    CHECK(same_bits(f(a, b), fn(a, b)));
    Tensor<float> ct = c.t(), ds = d.slice(0, 0, 6, 1);
    REQUIRE_FALSE(ct.is_contiguous());
    CHECK(same_bits(f(ct, d), fn(ct, d)));
    CHECK(same_bits(f(c, ct), fn(c, ct)));
    CHECK(same_bits(f(ds, ct), fn(ds, ct)));
    CHECK(f.num_traces() == 1);
  }
}

TEST_CASE("replay: an output that is a view of an input or of an intermediate is a copy", "[graph]") {
  Tensor<float> x = random_input({3, 4}, 50);
  graph::Capture cap;
  cap.input(x);
  Tensor<float> u = ms::exp(x);
  Tensor<float> v1 = x.t(), v2 = u.reshape({12});
  cap.output(v1);
  cap.output(v2);
  backend::Executable exe = backend::compile(cap.finish());
  Tensor<float> x2 = random_input({3, 4}, 51), x3 = random_input({3, 4}, 52);
  auto r2 = exe.run({x2});
  auto r3 = exe.run({x3});
  CHECK(same_bits(r2[0], x2.t()));
  CHECK(same_bits(r2[1], ms::exp(x2).reshape({12})));
  CHECK(same_bits(r3[1], ms::exp(x3).reshape({12})));
  CHECK_FALSE(r2[0].shares_storage(x2));
  CHECK_FALSE(r2[1].shares_storage(r3[1]));
}

// ---- write-back elision -----------------------------------------------------------------------

namespace {

/// An optimizer-style step: m = 0.9 m + g; w = w - 0.1 m; both written back with copy_.
/// `read_old_m` also sums m's old value after the update of m is computed, which must keep
/// the update out of m's storage until the copy_.
std::vector<AnyTensor> momentum_step(const AnyTensor& w, const AnyTensor& m, const AnyTensor& g, bool read_old_m) {
  AnyTensor m_new = ops::add(ops::mul(m, 0.9), g);
  AnyTensor w_new = ops::sub(w, ops::mul(m_new, 0.1));
  AnyTensor old_sum = read_old_m ? ops::sum(m) : AnyTensor();
  ops::copy_(m, m_new);
  ops::copy_(w, w_new);
  return {ops::sum(ops::mul(w_new, w_new)), read_old_m ? old_sum : ops::sum(m_new)};
}

}  // namespace

TEST_CASE("replay: an update copied into a parameter is written straight into it", "[graph]") {
  for (bool read_old_m : {false, true}) {
    INFO("read_old_m " << read_old_m);
    // Eager reference: three steps.
    Tensor<float> w0 = random_input({64, 33}, 60), m0 = random_input({64, 33}, 61);
    std::vector<Tensor<float>> grads;
    for (std::uint32_t k = 0; k < 4; ++k) grads.push_back(random_input({64, 33}, 62 + k));
    Tensor<float> we = w0.clone(), me = m0.clone();
    std::vector<std::vector<AnyTensor>> eager;
    for (int k = 1; k < 4; ++k) eager.push_back(momentum_step(we, me, grads[static_cast<std::size_t>(k)], read_old_m));

    std::size_t arena[2] = {};
    for (bool elide : {false, true}) {
      INFO("elide " << elide);
      Tensor<float> w = w0.clone(), m = m0.clone();
      graph::Capture cap;
      cap.input(grads[0]);
      cap.param(w, "w");
      cap.param(m, "m");
      for (auto& o : momentum_step(w, m, grads[0], read_old_m)) cap.output(o);
      graph::Graph g = cap.finish();
      // The trace ran the step once eagerly: start the replays from the initial values.
      ops::copy_(w, w0);
      ops::copy_(m, m0);
      backend::CompileOptions opt;
      opt.elide_writeback = elide;
      backend::Executable exe = backend::compile(std::move(g), opt);
      arena[elide] = exe.arena_bytes();
      const float* w_storage = w.data();
      for (int k = 1; k < 4; ++k) {
        auto r = exe.run({grads[static_cast<std::size_t>(k)]});
        REQUIRE(r.size() == 2);
        CHECK(same_bits(r[0], eager[static_cast<std::size_t>(k - 1)][0]));
        CHECK(same_bits(r[1], eager[static_cast<std::size_t>(k - 1)][1]));
      }
      CHECK(same_bits(w, we));
      CHECK(same_bits(m, me));
      CHECK(w.data() == w_storage);  // updated in place, never rebound
    }
    const std::size_t buf = 64 * 33 * sizeof(float);
    if (read_old_m) {
      // m's update cannot go into m (its old value is summed later); w's still can.
      CHECK(arena[1] + buf <= arena[0]);
      CHECK(arena[1] >= buf);
    } else {
      // Both updates (m_new, w_new) live in their parameters: nothing of that size remains.
      CHECK(arena[1] < buf);
      CHECK(arena[0] >= buf);
    }
  }
}
