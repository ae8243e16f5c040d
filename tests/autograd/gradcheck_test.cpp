// Finite-difference checks (float64, central differences) of the gradient rules of
// elementwise, reduction, normalization and linear-algebra ops, eager and captured.

#include "../test_util.hpp"

#include <functional>

using ms::AnyTensor;
using ms::Tensor;

namespace {

/// Compares autodiff gradients of sum(fn(x) * w) with central differences, for every element of x.
void check_grad(const std::function<AnyTensor(const AnyTensor&)>& fn, Tensor<double> x, double tol = 1e-6) {
  x.requires_grad_();
  AnyTensor y = fn(x);
  Tensor<double> w = ms::randn<double>(y.shape());  // a random projection exercises every output
  AnyTensor loss = ms::ops::sum(ms::ops::mul(y, w), {}, false);
  Tensor<double> g = ms::autograd::grad(loss, {x})[0];
  auto gv = g.to_vector();
  Tensor<double> xd = Tensor<double>(x.detach()).clone();
  double* p = xd.data();
  const double eps = 1e-6;
  for (std::int64_t i = 0; i < xd.numel(); ++i) {
    double keep = p[i];
    p[i] = keep + eps;
    double fp = Tensor<double>(ms::ops::sum(ms::ops::mul(fn(xd), w), {}, false)).item();
    p[i] = keep - eps;
    double fm = Tensor<double>(ms::ops::sum(ms::ops::mul(fn(xd), w), {}, false)).item();
    p[i] = keep;
    double fd = (fp - fm) / (2 * eps);
    INFO("element " << i << ": autodiff " << gv[static_cast<std::size_t>(i)] << ", finite difference " << fd);
    CHECK(std::abs(gv[static_cast<std::size_t>(i)] - fd) <= tol * (1 + std::abs(fd)));
  }
}

Tensor<double> away_from_kinks() {  // values away from 0 and from ties
  return Tensor<double>{{0.3, -0.7, 1.1}, {-1.4, 0.9, 0.45}};
}

}  // namespace

TEST_CASE("gradcheck: unary ops", "[grad]") {
  using F = AnyTensor (*)(const AnyTensor&);
  const std::pair<const char*, F> ops[] = {
      {"neg", ms::ops::neg}, {"abs", ms::ops::abs}, {"exp", ms::ops::exp}, {"expm1", ms::ops::expm1},
      {"sin", ms::ops::sin}, {"cos", ms::ops::cos}, {"tanh", ms::ops::tanh}, {"sigmoid", ms::ops::sigmoid},
      {"relu", ms::ops::relu}, {"gelu", ms::ops::gelu}, {"gelu_tanh", ms::ops::gelu_tanh}, {"silu", ms::ops::silu},
      {"softplus", ms::ops::softplus}, {"hardsigmoid", ms::ops::hardsigmoid}, {"erf", ms::ops::erf},
      {"square", ms::ops::square}};
  for (auto& [name, f] : ops) {
    INFO(name);
    check_grad(f, away_from_kinks());
  }
  Tensor<double> pos{{0.3, 0.7, 1.1}, {1.4, 0.9, 0.45}};
  const std::pair<const char*, F> positive[] = {{"log", ms::ops::log}, {"log1p", ms::ops::log1p},
                                                {"sqrt", ms::ops::sqrt}, {"rsqrt", ms::ops::rsqrt},
                                                {"reciprocal", ms::ops::reciprocal}};
  for (auto& [name, f] : positive) {
    INFO(name);
    check_grad(f, pos);
  }
  check_grad([](const AnyTensor& x) { return ms::ops::leaky_relu(x, 0.2); }, away_from_kinks());
  check_grad([](const AnyTensor& x) { return ms::ops::elu(x, 0.5); }, away_from_kinks());
  check_grad([](const AnyTensor& x) { return ms::ops::clamp(x, -1.0, 1.0); }, away_from_kinks());
  check_grad([](const AnyTensor& x) { return ms::ops::pow(x, 3.0); }, away_from_kinks());
}

TEST_CASE("gradcheck: binary ops with broadcasting", "[grad]") {
  Tensor<double> b{0.5, -1.5, 2.0};  // broadcasts over rows
  check_grad([&](const AnyTensor& x) { return ms::ops::add(x, b); }, away_from_kinks());
  check_grad([&](const AnyTensor& x) { return ms::ops::sub(b, x); }, away_from_kinks());
  check_grad([&](const AnyTensor& x) { return ms::ops::mul(x, b); }, away_from_kinks());
  check_grad([&](const AnyTensor& x) { return ms::ops::div(b, x); }, away_from_kinks());
  check_grad([&](const AnyTensor& x) { return ms::ops::maximum(x, b); }, away_from_kinks());
  check_grad([&](const AnyTensor& x) { return ms::ops::minimum(x, b); }, away_from_kinks());
  // gradient w.r.t. the broadcast operand (summed over rows by the engine)
  Tensor<double> m = away_from_kinks();
  check_grad([&](const AnyTensor& v) { return ms::ops::mul(m, v); }, Tensor<double>{0.5, -1.5, 2.0});
  Tensor<double> pos{{0.3, 0.7, 1.1}, {1.4, 0.9, 0.45}};
  check_grad([&](const AnyTensor& x) { return ms::ops::pow(x, Tensor<double>{1.5, 2.0, 0.5}); }, pos);
  check_grad([&](const AnyTensor& e) { return ms::ops::pow(pos, e); }, Tensor<double>{1.5, 2.0, 0.5});
  check_grad([&](const AnyTensor& x) { return ms::ops::where(ms::ops::gt(x, 0.0), x, ms::ops::mul(x, x)); },
             away_from_kinks());
}

TEST_CASE("gradcheck: reductions, softmax, matmul, linear, views", "[grad]") {
  Tensor<double> x = away_from_kinks();
  check_grad([](const AnyTensor& v) { return ms::ops::sum(v, {1}, false); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::mean(v, {0}, true); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::max(v, {1}, false); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::min(v, {}, false); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::prod(v, {1}, false); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::var(v, {1}, false, 1); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::std(v, {0}, false, 1); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::softmax(v, 1); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::log_softmax(v, 0); }, x);
  Tensor<double> w{{0.2, -0.4}, {1.0, 0.3}, {-0.6, 0.8}};
  check_grad([&](const AnyTensor& v) { return ms::ops::matmul(v, w); }, x);
  check_grad([&](const AnyTensor& v) { return ms::ops::matmul(x, v); }, w);
  check_grad([&](const AnyTensor& v) { return ms::ops::matmul(v, Tensor<double>{1.0, -2.0, 0.5}); }, x);
  Tensor<double> wl{{0.2, -0.4, 1.0}, {0.3, -0.6, 0.8}};  // (out=2, in=3)
  Tensor<double> bl{0.1, -0.2};
  check_grad([&](const AnyTensor& v) { return ms::ops::linear(v, wl, bl); }, x);
  check_grad([&](const AnyTensor& v) { return ms::ops::linear(x, v, bl); }, wl);
  check_grad([&](const AnyTensor& v) { return ms::ops::linear(x, wl, v); }, bl);
  check_grad([](const AnyTensor& v) { return ms::ops::permute(ms::ops::reshape(v, {3, 2}), {1, 0}); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::slice(v, 1, 2, -4, -1); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::expand(ms::ops::reshape(v, {2, 1, 3}), {2, 4, 3}); }, x);
  check_grad([](const AnyTensor& v) { return ms::ops::concat({v, ms::ops::mul(v, 2.0)}, 1); }, x);
}

TEST_CASE("gradients of a captured function equal eager gradients", "[grad][graph]") {
  Tensor<double> w{{0.2, -0.4}, {1.0, 0.3}, {-0.6, 0.8}};
  w.requires_grad_();
  auto step = [&](const Tensor<double>& x) {
    AnyTensor loss = ms::ops::mean(ms::ops::tanh(ms::ops::matmul(x, w)), {}, false);
    return Tensor<double>(ms::autograd::grad(loss, {w})[0]);
  };
  Tensor<double> x = away_from_kinks();
  auto eager = step(x).to_vector();
  auto f = ms::jit(step);
  f(x);
  auto replay = f(x).to_vector();
  REQUIRE(f.num_replays() == 1);
  for (std::size_t i = 0; i < eager.size(); ++i) CHECK(replay[i] == Approx(eager[i]).epsilon(1e-12));
}

TEST_CASE("backward skips the gradient of an input that needs none", "[grad]") {
  // linear(x, w, b) and conv2d(x, w, b) with x a plain input: backward runs no product for x.
  Tensor<double> x{{1.0, -2.0, 0.5}, {0.25, 3.0, -1.0}};
  Tensor<double> w{{0.2, -0.4, 1.0}, {0.3, -0.6, 0.8}};
  Tensor<double> b{0.1, -0.2};
  w.requires_grad_();
  b.requires_grad_();
  auto count = [](const ms::Profiler& p, const std::string& type) {
    auto ev = p.events();
    return std::count_if(ev.begin(), ev.end(), [&](const ms::ProfileEvent& e) { return e.type == type; });
  };
  AnyTensor loss = ms::ops::sum(ms::ops::linear(x, w, b), {}, false);
  ms::Profiler prof;
  prof.start();
  auto g = ms::autograd::grad(loss, {w, b});
  prof.stop();
  CHECK(count(prof, "matmul") == 1);  // the weight's gradient only
  // d sum(x w^T + b) / dw[o][i] = sum over rows of x[:, i]; / db[o] = rows.
  ms_test::require_values(Tensor<double>(g[0]), {1.25, 1.0, -0.5, 1.25, 1.0, -0.5});
  ms_test::require_values(Tensor<double>(g[1]), {2.0, 2.0});

  Tensor<double> img = ms::ops::reshape(Tensor<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor<double> k = ms::ops::reshape(Tensor<double>{1, 0, 0, 1}, {1, 1, 2, 2});
  k.requires_grad_();
  AnyTensor closs = ms::ops::sum(ms::ops::conv2d(img, k, AnyTensor(), {1, 1}, {0, 0}, {1, 1}, 1), {}, false);
  ms::Profiler cprof;
  cprof.start();
  auto gk = ms::autograd::grad(closs, {k});
  cprof.stop();
  CHECK(count(cprof, "conv2d_grad_input") == 0);
  CHECK(count(cprof, "conv2d_grad_weight") == 1);
  // d/dk[i][j] = sum of the 2x2 windows' element (i, j): 1+2+4+5, 2+3+5+6, 4+5+7+8, 5+6+8+9.
  ms_test::require_values(Tensor<double>(gk[0]), {12.0, 16.0, 24.0, 28.0});
}

TEST_CASE("grad-ready hooks run once per leaf, with its complete gradient", "[grad]") {
  // loss = sum(x w1 w2) + sum(w1 * w1): w1 gets three contributions (the product's two
  // inputs and the first matmul), w2 one. By hand, with h = x w1 = [4.5, -0.5]:
  // d/dw2 = h^T, d/dw1 = x^T w2^T + 2 w1.
  Tensor<double> x{{1.0, 2.0}};
  Tensor<double> w1{{0.5, -1.0}, {2.0, 0.25}};
  Tensor<double> w2 = Tensor<double>{3.0, -1.0}.reshape({2, 1});
  w1.requires_grad_();
  w2.requires_grad_();
  std::vector<std::string> order;
  AnyTensor seen1, seen2;
  auto id1 = ms::autograd::add_grad_ready_hook(w1, [&](const AnyTensor& g) { order.push_back("w1"); seen1 = g; });
  auto id2 = ms::autograd::add_grad_ready_hook(w2, [&](const AnyTensor& g) { order.push_back("w2"); seen2 = g; });
  auto loss_of = [&] {
    return ms::ops::add(ms::ops::sum(ms::ops::matmul(ms::ops::matmul(x, w1), w2), {}, false),
                        ms::ops::sum(ms::ops::mul(w1, w1), {}, false));
  };
  auto g = ms::autograd::grad(loss_of(), {w1, w2});
  // w2's gradient is complete before backward reaches the first matmul, w1's only after it.
  CHECK(order == std::vector<std::string>{"w2", "w1"});
  CHECK(seen1.is_same(g[0]));  // the gradient grad() returns, all contributions summed
  CHECK(seen2.is_same(g[1]));
  ms_test::require_values(Tensor<double>(g[0]), {4.0, -3.0, 10.0, -1.5});
  ms_test::require_values(Tensor<double>(g[1]), {4.5, -0.5});

  // backward(): the hooks see the accumulated .grad (here twice the gradient).
  loss_of().backward();
  order.clear();
  loss_of().backward();
  CHECK(order == std::vector<std::string>{"w2", "w1"});
  CHECK(seen1.is_same(w1.grad_any()));
  ms_test::require_values(Tensor<double>(seen1), {8.0, -6.0, 20.0, -3.0});

  // Only leaves whose gradient grad() computes: w2 alone.
  order.clear();
  ms::autograd::grad(loss_of(), {w2});
  CHECK(order == std::vector<std::string>{"w2"});

  ms::autograd::remove_grad_ready_hook(w1, id1);
  ms::autograd::remove_grad_ready_hook(w2, id2);
  order.clear();
  ms::autograd::grad(loss_of(), {w1, w2});
  CHECK(order.empty());
  CHECK_THROWS_WITH(ms::autograd::add_grad_ready_hook(ms::ops::mul(w1, w1), [](const AnyTensor&) {}),
                    "[ms.value_error] add_grad_ready_hook: the tensor float64 (2, 2) is not a leaf that requires grad");
}
