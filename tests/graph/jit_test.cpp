// ms::jit results with structure: tuples and vectors of tensors, nested, are flattened
// into graph outputs at trace time and rebuilt in the same shape on every replay.

#include <tuple>
#include <vector>

#include "test_util.hpp"

namespace {

using ms::Tensor;

/// (sum, [x*1, x*2, ..., x*n], (x - 1, [x + 1])) for a vector length n fixed by the caller.
auto nested(int n) {
  return [n](const Tensor<float>& x) {
    std::vector<Tensor<float>> multiples;
    for (int i = 1; i <= n; ++i) multiples.push_back(x * static_cast<float>(i));
    return std::make_tuple(ms::sum(x), multiples, std::make_tuple(x - 1.0f, std::vector<Tensor<float>>{x + 1.0f}));
  };
}

}  // namespace

TEST_CASE("jit: nested tuples and vectors come back in the traced structure", "[graph]") {
  auto fn = nested(3);
  auto f = ms::jit(fn);
  Tensor<float> a{1.0f, 2.0f}, b{10.0f, -4.0f};
  f(a);  // trace
  auto [s, m, inner] = f(b);
  REQUIRE(f.num_replays() == 1);
  CHECK(s.item() == 6.0f);
  REQUIRE(m.size() == 3);
  for (int i = 0; i < 3; ++i) {
    INFO("multiple " << i + 1);
    ms_test::require_values(m[static_cast<std::size_t>(i)], {10.0f * static_cast<float>(i + 1), -4.0f * static_cast<float>(i + 1)});
  }
  auto& [minus, plus] = inner;
  ms_test::require_values(minus, {9.0f, -5.0f});
  REQUIRE(plus.size() == 1);
  ms_test::require_values(plus[0], {11.0f, -3.0f});
}

TEST_CASE("jit: a training step returning (loss, gradients) replays like eager", "[graph][grad]") {
  Tensor<float> w{0.5f, -1.0f, 2.0f};
  w.requires_grad_(true);
  auto step = [&](const Tensor<float>& x) {
    Tensor<float> loss = ms::sum(ms::square(x * w));
    std::vector<ms::AnyTensor> g = ms::autograd::grad(loss, {w});
    return std::make_tuple(loss, g);
  };
  auto f = ms::jit(step);
  Tensor<float> x1{1.0f, 2.0f, 3.0f}, x2{-1.0f, 0.5f, 4.0f};
  f(x1);
  auto [loss, grads] = f(x2);
  REQUIRE(f.num_replays() == 1);
  // loss = sum((x w)^2), d/dw = 2 x^2 w
  CHECK(loss.item() == Approx(0.25f + 0.25f + 64.0f));
  REQUIRE(grads.size() == 1);
  ms_test::require_values(Tensor<float>(grads[0]), {2 * 1 * 0.5f, 2 * 0.25f * -1.0f, 2 * 16 * 2.0f});
}
