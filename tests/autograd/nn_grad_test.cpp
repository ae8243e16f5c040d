// Finite-difference checks of the nn gradient rows (autograd/nn_rules.hpp): for every
// differentiable nn op and every differentiable input, the gradient that backward
// computes equals central differences of the forward (float64, step 1e-6, rtol 1e-5).
// The loss is sum(f(inputs) * R) for a fixed random R, so every output element and
// every element of the gradient is exercised. The backward ops that have rows of
// their own (convolution and pooling adjoints, nll_loss_grad) are checked the same way.

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <ms/ops/nn.hpp>
#include <ms/autograd/nn_rules.hpp>

#include "../test_util.hpp"

MS_TEST_COVERS("conv2d_grad_input", "conv2d_grad_weight", "max_pool2d_grad", "avg_pool2d_grad",
               "adaptive_avg_pool2d_grad", "batch_norm_grad", "layer_norm_grad", "cross_entropy_grad",
               "nll_loss_grad");

namespace {

using ms::AnyTensor;
using ms::Int2;
using ms::Shape;
using ms::Tensor;
namespace ops = ms::ops;
using i64 = std::int64_t;
using Fn = std::function<AnyTensor(const std::vector<AnyTensor>&)>;
using ms_test::random;  // float64, uniform in [lo, hi) (default [-1, 1))

/// Distinct values (a shuffled grid 0.05 apart, centered): no ties for max pooling, and no
/// perturbation of 1e-6 can change an argmax.
Tensor<double> distinct(const Shape& shape, unsigned seed) {
  Tensor<double> t = AnyTensor::empty(shape, ms::DType::f64);
  double* p = static_cast<double*>(t.raw_data());
  const i64 n = t.numel();
  std::vector<i64> perm(static_cast<std::size_t>(n));
  for (i64 i = 0; i < n; ++i) perm[static_cast<std::size_t>(i)] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  for (i64 i = 0; i < n; ++i) p[i] = 0.05 * static_cast<double>(perm[static_cast<std::size_t>(i)] - n / 2);
  return t;
}

/// Requires the gradients of fn to match finite differences (ms_test::grad_mismatches with its
/// defaults: step 1e-6, rtol 1e-5, atol 1e-8), `constant` naming inputs not differentiated.
void check_grads(const Fn& fn, std::vector<AnyTensor> inputs, const std::vector<int>& constant = {}) {
  ms_test::check_gradients(fn, std::move(inputs), {}, constant);
}

}  // namespace

TEST_CASE("check_grad: finds a wrong gradient", "[nn][grad]") {
  // x * detach(x): backward sees only one of the two paths, so its gradient is half the true one
  Fn wrong = [](const std::vector<AnyTensor>& in) { return ops::mul(in[0], in[0].detach()); };
  std::string report;
  CHECK(ms_test::grad_mismatches(wrong, {random({3, 2}, 1, 0.5, 1)}, {}, report) == 6);
  CHECK(report.find("input 0 (3, 2) element 0") != std::string::npos);
  Fn right = [](const std::vector<AnyTensor>& in) { return ops::mul(in[0], in[0]); };
  report.clear();
  CHECK(ms_test::grad_mismatches(right, {random({3, 2}, 1, 0.5, 1)}, {}, report) == 0);
}

// ---- convolution ---------------------------------------------------------------------------------

TEST_CASE("conv2d gradients w.r.t. input, weight and bias match finite differences", "[nn][grad][conv2d]") {
  struct Case {
    Shape x, w;
    Int2 s, p, d;
    i64 g;
  };
  const std::vector<Case> cases = {
      {{2, 3, 5, 5}, {4, 3, 3, 3}, 1, 0, 1, 1},
      {{2, 2, 6, 5}, {3, 2, 3, 3}, 2, 1, 1, 1},           // stride 2, padding 1
      {{1, 2, 7, 7}, {2, 2, 3, 3}, 1, 2, 2, 1},           // dilation 2
      {{2, 4, 4, 4}, {4, 2, 3, 3}, 1, 1, 1, 2},           // groups 2
      {{3, 2, 4, 6}, {2, 2, 2, 3}, {1, 2}, {1, 0}, 1, 1}, // non-square, batch 3
      {{2, 4, 3, 3}, {6, 2, 1, 1}, 1, 0, 1, 2},           // pointwise
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO("case " << i);
    Fn f = [&](const std::vector<AnyTensor>& in) { return ops::conv2d(in[0], in[1], in[2], c.s, c.p, c.d, c.g); };
    check_grads(f, {random(c.x, 1 + static_cast<unsigned>(i)), random(c.w, 2), random(Shape{c.w[0]}, 3)});
    Fn nb = [&](const std::vector<AnyTensor>& in) { return ops::conv2d(in[0], in[1], {}, c.s, c.p, c.d, c.g); };
    check_grads(nb, {random(c.x, 4), random(c.w, 5)});
  }
}

TEST_CASE("conv2d backward ops: their own gradients (second order) match finite differences", "[nn][grad][conv2d]") {
  const Shape xs{2, 4, 5, 4}, ws{4, 2, 3, 2};
  ops::Attrs a{{"stride", ops::IntList{2, 1}}, {"padding", ops::IntList{1, 1}}, {"dilation", ops::IntList{1, 2}},
               {"groups", std::int64_t{2}}};
  const AnyTensor y = ops::conv2d(random(xs, 1), random(ws, 2), {}, {2, 1}, 1, {1, 2}, 2);
  ops::Attrs ai = a, aw = a;
  ai.set("input_shape", xs.vec());
  aw.set("weight_shape", ws.vec());
  Fn gi = [&](const std::vector<AnyTensor>& in) { return ops::call1(ops::conv2d_grad_input_op, {in[0], in[1]}, ai); };
  check_grads(gi, {random(y.shape(), 3), random(ws, 4)});
  Fn gw = [&](const std::vector<AnyTensor>& in) { return ops::call1(ops::conv2d_grad_weight_op, {in[0], in[1]}, aw); };
  check_grads(gw, {random(y.shape(), 5), random(xs, 6)});
  // and the backward ops are the adjoints of conv2d: <conv(x, w), g> = <x, grad_input(g, w)> = <w, grad_weight(g, x)>
  Tensor<double> x = random(xs, 7), w = random(ws, 8), g = random(y.shape(), 9);
  const double lhs = ms::sum(ms::conv2d(x, w, {}, {2, 1}, 1, {1, 2}, 2) * g).item();
  const double rx = ms::sum(x * Tensor<double>(ops::call1(ops::conv2d_grad_input_op, {g, w}, ai))).item();
  const double rw = ms::sum(w * Tensor<double>(ops::call1(ops::conv2d_grad_weight_op, {g, x}, aw))).item();
  CHECK(std::abs(lhs - rx) < 1e-12);
  CHECK(std::abs(lhs - rw) < 1e-12);
}

// ---- pooling ---------------------------------------------------------------------------------------

TEST_CASE("pooling gradients match finite differences", "[nn][grad][pool]") {
  Fn mp = [](const std::vector<AnyTensor>& in) { return ops::max_pool2d(in[0], 3, Int2(2), 1); };
  check_grads(mp, {distinct({2, 2, 7, 6}, 1)});
  Fn mp2 = [](const std::vector<AnyTensor>& in) { return ops::max_pool2d(in[0], {2, 3}, Int2{1, 2}); };
  check_grads(mp2, {distinct({1, 3, 4, 7}, 2)});
  for (bool incl : {true, false}) {
    Fn ap = [incl](const std::vector<AnyTensor>& in) { return ops::avg_pool2d(in[0], 3, Int2(2), 1, incl); };
    check_grads(ap, {random({2, 2, 7, 6}, 3)});
  }
  Fn ap2 = [](const std::vector<AnyTensor>& in) { return ops::avg_pool2d(in[0], {2, 4}, Int2{1, 3}, {1, 2}, true); };
  check_grads(ap2, {random({1, 2, 4, 7}, 4)});
  Fn ad = [](const std::vector<AnyTensor>& in) { return ops::adaptive_avg_pool2d(in[0], {3, 4}); };
  check_grads(ad, {random({2, 2, 5, 7}, 5)});
  Fn ad2 = [](const std::vector<AnyTensor>& in) { return ops::adaptive_avg_pool2d(in[0], {4, 3}); };
  check_grads(ad2, {random({1, 2, 3, 2}, 6)});
}

TEST_CASE("pooling backward ops: their own gradients match finite differences", "[nn][grad][pool]") {
  const Shape xs{2, 2, 7, 6};
  ops::Attrs pa{{"kernel_size", ops::IntList{3, 3}}, {"stride", ops::IntList{2, 2}}, {"padding", ops::IntList{1, 1}}};
  auto [y, idx] = ops::max_pool2d_with_indices(distinct(xs, 1), 3, Int2(2), 1);
  ops::Attrs ga = pa;
  ga.set("input_shape", xs.vec());
  Fn mg = [&](const std::vector<AnyTensor>& in) { return ops::call1(ops::max_pool2d_grad_op, {in[0], in[1]}, ga); };
  check_grads(mg, {random(y.shape(), 2), idx});
  ops::Attrs aa = ga;
  aa.set("count_include_pad", false);
  Fn ag = [&](const std::vector<AnyTensor>& in) { return ops::call1(ops::avg_pool2d_grad_op, {in[0]}, aa); };
  check_grads(ag, {random(y.shape(), 3)});
  ops::Attrs ad{{"output_size", ops::IntList{3, 4}}, {"input_shape", ops::IntList{2, 2, 5, 7}}};
  Fn dg = [&](const std::vector<AnyTensor>& in) { return ops::call1(ops::adaptive_avg_pool2d_grad_op, {in[0]}, ad); };
  check_grads(dg, {random({2, 2, 3, 4}, 4)});
  // max_pool2d_grad validates the indices it is given
  MS_REQUIRE_THROWS_MSG(ops::call1(ops::max_pool2d_grad_op, {random(y.shape(), 2), ms::full<i64>(y.shape(), 42)}, ga),
                        ms::IndexError, "[ms.index_error] max_pool2d_grad: index 42 is out of range for an input plane of 7 x 6");
}

TEST_CASE("max_pool2d_grad 2x2 stride 2: the scatter's sums, any plane size, indices in or out of their windows",
          "[nn][grad][pool]") {
  // The reference: out = 0, then out[plane][idx] += g for every output element, in order.
  auto scatter = []<class T>(const Tensor<T>& g, const Tensor<i64>& idx, const Shape& xs) {
    Tensor<T> out = ms::zeros<T>(xs);
    const i64 planes = xs[0] * xs[1], HW = xs[2] * xs[3], P = g.numel() / planes;
    const T* gp = g.data();
    const i64* ip = idx.data();
    T* op = out.data();
    for (i64 pl = 0; pl < planes; ++pl)
      for (i64 i = 0; i < P; ++i) op[pl * HW + ip[pl * P + i]] += gp[pl * P + i];
    return out;
  };
  // Rows of 1 to 32 windows: whole and partial groups of the SIMD kernels (16 windows at
  // AVX-512), odd sizes leaving a row or column no window covers.
  for (Shape xs : {Shape{2, 3, 6, 8}, Shape{1, 2, 7, 9}, Shape{2, 1, 5, 4}, Shape{1, 1, 2, 2}, Shape{2, 2, 28, 28},
                   Shape{1, 2, 5, 35}, Shape{1, 1, 4, 64}, Shape{1, 2, 6, 41}}) {
    INFO("input " << ms::shape_str(xs));
    ops::Attrs ga{{"kernel_size", ops::IntList{2, 2}}, {"stride", ops::IntList{2, 2}}, {"padding", ops::IntList{0, 0}},
                  {"input_shape", xs.vec()}};
    auto [y, idx] = ops::max_pool2d_with_indices(distinct(xs, 3), 2);
    Tensor<double> g = random(y.shape(), 4);
    g.data()[0] = -0.0;  // 0 + -0 is +0, as in the scatter
    g.data()[g.numel() - 1] = ms_test::kNaN;
    Tensor<i64> in_window = Tensor<i64>(idx);
    // Indices anywhere in the plane are summed where they point: the first plane's all at 0.
    Tensor<i64> moved = in_window.clone();
    const i64 P = y.shape()[2] * y.shape()[3];
    for (i64 i = 0; i < P; ++i) moved.data()[i] = 0;
    const Tensor<float> g32 = ms::cast<float>(g);
    for (int moved_case : {0, 1}) {
      const Tensor<i64>& ix = moved_case ? moved : in_window;
      INFO((moved_case ? "indices moved out of their windows" : "indices in their windows"));
      CHECK(ms_test::same_bits(ops::call1(ops::max_pool2d_grad_op, {g, ix}, ga), scatter(g, ix, xs)));
      CHECK(ms_test::same_bits(ops::call1(ops::max_pool2d_grad_op, {g32, ix}, ga), scatter(g32, ix, xs)));
    }
    // An index outside the plane is still an error.
    Tensor<i64> bad = in_window.clone();
    bad.data()[bad.numel() - 1] = xs[2] * xs[3];
    const std::string message = "[ms.index_error] max_pool2d_grad: index " + std::to_string(xs[2] * xs[3]) +
                                " is out of range for an input plane of " + std::to_string(xs[2]) + " x " +
                                std::to_string(xs[3]);
    MS_REQUIRE_THROWS_MSG(ops::call1(ops::max_pool2d_grad_op, {g, bad}, ga), ms::IndexError, message);
    MS_REQUIRE_THROWS_MSG(ops::call1(ops::max_pool2d_grad_op, {g32, bad}, ga), ms::IndexError, message);
  }
}

// ---- normalization ------------------------------------------------------------------------------------

TEST_CASE("batch_norm gradients (training and eval) match finite differences", "[nn][grad][norm]") {
  for (Shape xs : {Shape{3, 2, 3, 2}, Shape{5, 3}}) {
    INFO("input " << ms::shape_str(xs));
    const i64 C = xs[1];
    Tensor<double> rm = random({C}, 9), rv = random({C}, 10, 0.5, 2.0);
    Fn train = [&](const std::vector<AnyTensor>& in) { return ops::batch_norm(in[0], in[1], in[2], rm, rv, true); };
    check_grads(train, {random(xs, 1), random({C}, 2), random({C}, 3)});
    Fn eval = [&](const std::vector<AnyTensor>& in) { return ops::batch_norm(in[0], in[1], in[2], rm, rv, false); };
    check_grads(eval, {random(xs, 4), random({C}, 5), random({C}, 6)});
    // running statistics as inputs: no gradient, checked as zero
    Fn withstats = [&](const std::vector<AnyTensor>& in) {
      return ops::batch_norm(in[0], in[1], in[2], in[3], in[4], false);
    };
    check_grads(withstats, {random(xs, 7), random({C}, 5), random({C}, 6), random({C}, 11), random({C}, 12, 0.5, 2)},
               {3, 4});
  }
}

TEST_CASE("layer_norm gradients match finite differences", "[nn][grad][norm]") {
  Fn affine = [](const std::vector<AnyTensor>& in) { return ops::layer_norm(in[0], {3, 4}, in[1], in[2]); };
  check_grads(affine, {random({2, 3, 3, 4}, 1), random({3, 4}, 2), random({3, 4}, 3)});
  Fn weight_only = [](const std::vector<AnyTensor>& in) { return ops::layer_norm(in[0], {5}, in[1]); };
  check_grads(weight_only, {random({4, 5}, 4), random({5}, 5)});
  Fn plain = [](const std::vector<AnyTensor>& in) { return ops::layer_norm(in[0], {2, 5}, {}, {}, 1e-3); };
  check_grads(plain, {random({2, 5}, 6)});
}

// ---- dropout, embedding ------------------------------------------------------------------------------------

TEST_CASE("dropout and embedding gradients match finite differences", "[nn][grad]") {
  Fn dr = [](const std::vector<AnyTensor>& in) { return ops::dropout(in[0], 0.4, true, 5); };
  check_grads(dr, {random({4, 6}, 1)});
  Fn dr_eval = [](const std::vector<AnyTensor>& in) { return ops::dropout(in[0], 0.4, false); };
  check_grads(dr_eval, {random({3, 2}, 2)});
  Tensor<i64> idx{{1, 3, 1}, {0, 1, 4}};  // repeated rows accumulate
  Fn em = [&](const std::vector<AnyTensor>& in) { return ops::embedding(in[0], idx); };
  check_grads(em, {random({6, 3}, 3)});
}

// ---- losses -------------------------------------------------------------------------------------------------

TEST_CASE("loss gradients match finite differences", "[nn][grad][loss]") {
  Tensor<i64> t{2, 0, 3, 3, 1};
  for (const char* red : {"mean", "sum", "none"}) {
    INFO("reduction " << red);
    for (double ls : {0.0, 0.15}) {
      Fn ce = [&](const std::vector<AnyTensor>& in) { return ops::cross_entropy(in[0], t, red, ls); };
      check_grads(ce, {random({5, 4}, 1, -3, 3)});
      Fn ci = [&](const std::vector<AnyTensor>& in) { return ops::cross_entropy(in[0], t, red, ls, 3); };
      check_grads(ci, {random({5, 4}, 2, -3, 3)});
    }
    Fn nl = [&](const std::vector<AnyTensor>& in) { return ops::nll_loss(in[0], t, red); };
    check_grads(nl, {random({5, 4}, 3)});
    Fn ni = [&](const std::vector<AnyTensor>& in) { return ops::nll_loss(in[0], t, red, 0); };
    check_grads(ni, {random({5, 4}, 4)});
    Fn ms_ = [&](const std::vector<AnyTensor>& in) { return ops::mse_loss(in[0], in[1], red); };
    check_grads(ms_, {random({3, 4}, 5), random({3, 4}, 6)});
    // nll_loss_grad is linear in the loss gradient: its row is nll_loss itself
    const bool none = std::string(red) == "none";
    ops::Attrs na{{"num_classes", std::int64_t{4}}, {"reduction", std::string(red)}, {"ignore_index", std::int64_t{3}}};
    Fn ng = [&](const std::vector<AnyTensor>& in) { return ops::call1(ops::nll_loss_grad_op, {t, in[0]}, na); };
    check_grads(ng, {none ? AnyTensor(random({5}, 7)) : AnyTensor(random({}, 7))});
  }
  // a composite: conv -> relu -> adaptive pool -> flatten -> cross_entropy, w.r.t. every parameter
  Fn net = [&](const std::vector<AnyTensor>& in) {
    AnyTensor h = ops::relu(ops::conv2d(in[0], in[1], in[2], 1, 1));
    h = ops::batch_norm(h, in[3], in[4], {}, {}, true);
    h = ops::flatten(ops::adaptive_avg_pool2d(h, 2), 1);
    return ops::cross_entropy(h, Tensor<i64>{3, 0}, "mean", 0.1);
  };
  check_grads(net, {random({2, 2, 4, 4}, 8), random({3, 2, 3, 3}, 9), random({3}, 10), random({3}, 11),
                   random({3}, 12)});
}

TEST_CASE("nn backward ops without a second-order rule say why", "[nn][grad]") {
  for (const ops::OpDef* op : {&ops::batch_norm_grad_op, &ops::layer_norm_grad_op, &ops::cross_entropy_grad_op}) {
    CHECK_FALSE(op->differentiable());
    CHECK(op->nondiff_reason == "second-order gradient not implemented");
  }
  for (const ops::OpDef* op : {&ops::conv2d_op, &ops::conv2d_grad_input_op, &ops::conv2d_grad_weight_op,
                               &ops::max_pool2d_op, &ops::max_pool2d_grad_op, &ops::avg_pool2d_op,
                               &ops::avg_pool2d_grad_op, &ops::adaptive_avg_pool2d_op,
                               &ops::adaptive_avg_pool2d_grad_op, &ops::batch_norm_op, &ops::layer_norm_op,
                               &ops::dropout_op, &ops::embedding_op, &ops::cross_entropy_op, &ops::nll_loss_op,
                               &ops::nll_loss_grad_op, &ops::mse_loss_op})
    CHECK(op->differentiable());
}

namespace {
/// A small network using every nn op; returns its loss and its gradients w.r.t. w, gamma, emb.
struct Net {
  Tensor<double> w = random({3, 2, 3, 3}, 3), gamma = random({3}, 4), emb = random({5, 4}, 5);
  Tensor<i64> t{1, 4}, tok{{0, 3}, {3, 1}};
  Net() {
    w.requires_grad_();
    gamma.requires_grad_();
    emb.requires_grad_();
  }
  AnyTensor loss(const AnyTensor& x) const {
    AnyTensor h = ops::conv2d(x, w, {}, 1, 1);
    h = ops::batch_norm(h, gamma, {}, {}, {}, true);
    h = ops::max_pool2d(ops::relu(h), 2);                            // (2, 3, 3, 3)
    h = ops::avg_pool2d(h, 2, 1, 1, false);                          // (2, 3, 4, 4)
    h = ops::adaptive_avg_pool2d(h, 3);                              // (2, 3, 3, 3)
    h = ops::flatten(ops::dropout(h, 0.3, true, 7), 1);              // (2, 27)
    AnyTensor e = ops::flatten(ops::embedding(emb, tok), 1);         // (2, 8)
    h = ops::concat({ops::layer_norm(h, {27}), e}, 1);               // (2, 35)
    AnyTensor lp = ops::log_softmax(h, -1);
    return ops::add(ops::add(ops::cross_entropy(h, t, "mean", 0.1), ops::nll_loss(lp, t, "sum")),
                    ops::mse_loss(e, ops::zeros_like(e)));
  }
  std::vector<AnyTensor> grads(const AnyTensor& x) const { return ms::autograd::grad(loss(x), {w, gamma, emb}); }
};

void require_close(const std::vector<AnyTensor>& a, const std::vector<AnyTensor>& b, double rtol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << i);
    auto u = Tensor<double>(a[i]).to_vector(), v = Tensor<double>(b[i]).to_vector();
    REQUIRE(u.size() == v.size());
    for (std::size_t j = 0; j < u.size(); ++j) CHECK(std::abs(u[j] - v[j]) <= rtol * (1 + std::abs(u[j])));
  }
}
}  // namespace

TEST_CASE("nn forward ops replay in a captured graph", "[nn][graph]") {
  Net net;
  Tensor<double> x1 = random({2, 2, 6, 6}, 1), x2 = random({2, 2, 6, 6}, 2);
  ms::graph::Capture cap;
  cap.input(x1);
  cap.output(net.loss(x1));
  auto ex = ms::backend::compile(cap.finish());
  require_close({net.loss(x2)}, ex.run({x2}), 1e-12);
  for (const char* op : {"conv2d", "batch_norm", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "dropout",
                         "embedding", "layer_norm", "cross_entropy", "nll_loss", "mse_loss"}) {
    INFO(op);
    CHECK(ex.graph().count(op) == 1);
  }
}

// The gradient rules read the forward values through the tape's detached handles; capture
// maps those to the traced values, so the whole backward is recorded and replays.
TEST_CASE("nn backward ops replay in a captured training step", "[nn][grad][graph]") {
  Net net;
  Tensor<double> x1 = random({2, 2, 6, 6}, 1), x2 = random({2, 2, 6, 6}, 2);
  ms::graph::Capture cap;
  cap.input(x1);
  for (auto& g : net.grads(x1)) cap.output(g);
  auto ex = ms::backend::compile(cap.finish());
  require_close(net.grads(x2), ex.run({x2}), 1e-12);
  CHECK(ex.graph().count("conv2d_grad_weight") == 1);
  CHECK(ex.graph().count("batch_norm_grad") == 1);
  CHECK(ex.graph().count("max_pool2d_grad") == 1);
}

TEST_CASE("nn backward kernels in float32 agree with float64", "[nn][grad]") {
  Tensor<double> xd = random({2, 4, 5, 5}, 1), wd = random({6, 2, 3, 3}, 2), gd = random({6}, 3);
  Tensor<i64> t{5, 2};
  auto grads = [&](auto x, auto w, auto g) {
    x.requires_grad_();
    w.requires_grad_();
    g.requires_grad_();
    AnyTensor h = ops::layer_norm(ops::conv2d(x, w, {}, 2, 1, 1, 2), {3, 3});
    h = ops::avg_pool2d(ops::batch_norm(h, g, {}, {}, {}, true), 2, 1);
    h = ops::adaptive_avg_pool2d(h, 1);
    return ms::autograd::grad(ops::cross_entropy(ops::flatten(h, 1), t), {x, w, g});
  };
  Tensor<float> xf = ms::cast<float>(xd), wf = ms::cast<float>(wd), gf = ms::cast<float>(gd);  // before xd is a leaf
  auto d = grads(xd, wd, gd);
  auto f = grads(xf, wf, gf);
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("gradient " << i);
    auto dv = Tensor<double>(d[i]).to_vector();
    auto fv = Tensor<float>(f[i]).to_vector();
    double scale = 0;
    for (double v : dv) scale = std::max(scale, std::abs(v));
    for (std::size_t j = 0; j < dv.size(); ++j) CHECK(std::abs(dv[j] - static_cast<double>(fv[j])) <= 1e-4 * scale);
  }
}
