// The API a PyTorch user guesses: one set of free functions for Tensor<T> and AnyTensor
// (typed in, typed out; runtime-typed in, AnyTensor out), the same autograd members on both
// handles, raw bytes in and out with a runtime dtype, slicing "to the end", one-sided clamp,
// softplus(beta, threshold) and the pooling options dilation, ceil_mode, divisor_override.
// Values are checked against hand-computed references and gradients against central
// differences.

#include <cmath>
#include <cstring>
#include <functional>
#include <type_traits>

#include "../test_util.hpp"

namespace api_test {

using ms::AnyTensor;
using ms::DType;
using ms::Shape;
using ms::Tensor;
using ms_test::iota;
using ms_test::random;
using ms_test::require_values;
using i64 = std::int64_t;

/// Autodiff gradient of sum(fn(x) * w) against central differences, element by element.
void grad_matches_fd(const std::function<AnyTensor(const AnyTensor&)>& fn, Tensor<double> x, double tol = 1e-6) {
  x.requires_grad_();
  AnyTensor y = fn(x);
  Tensor<double> w = random<double>(y.shape(), 99);
  AnyTensor loss = ms::sum(ms::mul(y, w));
  Tensor<double> g = ms::autograd::grad(loss, {x})[0];
  auto gv = g.to_vector();
  Tensor<double> xd = Tensor<double>(x.detach()).clone();
  double* p = xd.data();
  const double eps = 1e-6;
  auto f = [&] { return Tensor<double>(ms::sum(ms::mul(fn(xd), w))).item(); };
  for (i64 i = 0; i < xd.numel(); ++i) {
    const double keep = p[i];
    p[i] = keep + eps;
    const double fp = f();
    p[i] = keep - eps;
    const double fm = f();
    p[i] = keep;
    const double fd = (fp - fm) / (2 * eps);
    INFO("element " << i << ": autodiff " << gv[static_cast<std::size_t>(i)] << ", finite difference " << fd);
    CHECK(std::abs(gv[static_cast<std::size_t>(i)] - fd) <= tol * (1 + std::abs(fd)));
  }
}

/// PyTorch's pooling, written out: output size (with ceil_mode), dilated taps, divisors.
struct PoolRef {
  i64 k, s, p, d = 1;
  bool ceil_mode = false, include_pad = true;
  i64 divisor = 0;
  i64 out(i64 n) const {
    const i64 span = n + 2 * p - d * (k - 1) - 1;
    i64 o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (o - 1) * s >= n + p) --o;
    return o;
  }
};
std::vector<double> ref_max_pool(const std::vector<double>& x, i64 planes, i64 H, i64 W, const PoolRef& r) {
  std::vector<double> y;
  for (i64 pl = 0; pl < planes; ++pl)
    for (i64 oh = 0; oh < r.out(H); ++oh)
      for (i64 ow = 0; ow < r.out(W); ++ow) {
        double best = -ms_test::kInf;
        for (i64 i = 0; i < r.k; ++i)
          for (i64 j = 0; j < r.k; ++j) {
            const i64 ih = oh * r.s - r.p + i * r.d, iw = ow * r.s - r.p + j * r.d;
            if (ih >= 0 && ih < H && iw >= 0 && iw < W) best = std::max(best, x[static_cast<std::size_t>((pl * H + ih) * W + iw)]);
          }
        y.push_back(best);
      }
  return y;
}
std::vector<double> ref_avg_pool(const std::vector<double>& x, i64 planes, i64 H, i64 W, const PoolRef& r) {
  std::vector<double> y;
  for (i64 pl = 0; pl < planes; ++pl)
    for (i64 oh = 0; oh < r.out(H); ++oh)
      for (i64 ow = 0; ow < r.out(W); ++ow) {
        const i64 h0 = oh * r.s - r.p, w0 = ow * r.s - r.p;
        const i64 h1 = std::min(h0 + r.k, H + r.p), w1 = std::min(w0 + r.k, W + r.p);
        const i64 padded = (h1 - h0) * (w1 - w0);
        double sum = 0;
        i64 n = 0;
        for (i64 ih = std::max<i64>(h0, 0); ih < std::min(h1, H); ++ih)
          for (i64 iw = std::max<i64>(w0, 0); iw < std::min(w1, W); ++iw, ++n)
            sum += x[static_cast<std::size_t>((pl * H + ih) * W + iw)];
        y.push_back(sum / static_cast<double>(r.divisor ? r.divisor : r.include_pad ? padded : n));
      }
  return y;
}

}  // namespace api_test

using namespace api_test;

TEST_CASE("api: a runtime-typed program written like the README", "[op][api]") {
  // Data of a dtype known only at run time, as a loader would hand it over.
  const std::vector<double> raw = {1.0, -2.0, 3.0, 4.0, -5.0, 6.0};
  std::vector<std::byte> bytes(raw.size() * sizeof(double));
  std::memcpy(bytes.data(), raw.data(), bytes.size());
  const DType dt = ms::dtype_from_name("float64");
  AnyTensor x = AnyTensor::from_bytes(dt, Shape{2, 3}, bytes);
  REQUIRE(x.dtype() == DType::f64);
  REQUIRE(x.shape() == Shape{2, 3});

  // Views, "to the end" and negative indices, on the runtime-typed handle.
  AnyTensor last_two = ms::slice(x, -1, -2, ms::end);          // x[:, -2:]
  REQUIRE(last_two.shape() == Shape{2, 2});
  CHECK(Tensor<double>(last_two).to_vector() == std::vector<double>{-2, 3, -5, 6});
  AnyTensor col = ms::transpose(x, 0, 1);
  CHECK(Tensor<double>(ms::contiguous(col)).to_vector() == std::vector<double>{1, 4, -2, -5, 3, 6});

  // Ops under the same names as for Tensor<T>, with torch's arguments.
  AnyTensor y = ms::gelu(ms::clamp_min(x, 0.0), "tanh");
  AnyTensor total = ms::sum(y, {1}, true);
  REQUIRE(total.shape() == Shape{2, 1});
  AnyTensor b = ms::broadcast_to(total, {2, 3});
  REQUIRE(b.shape() == Shape{2, 3});
  auto gelu_tanh = [](double v) {
    return 0.5 * v * (1 + std::tanh(0.79788456080286535588 * (v + 0.044715 * v * v * v)));
  };
  const double r0 = gelu_tanh(1) + gelu_tanh(3), r1 = gelu_tanh(4) + gelu_tanh(6);
  require_values(Tensor<double>(b), {r0, r0, r0, r1, r1, r1}, 1e-12, 1e-12);

  // Autograd with the members Tensor<T> has.
  AnyTensor w = AnyTensor::from_bytes(DType::f64, Shape{3}, std::span<const std::byte>(bytes.data(), 24));
  w.requires_grad_();
  CHECK(w.requires_grad());
  AnyTensor loss = ms::sum(ms::mul(ms::matmul(x, ms::reshape(w, {3, 1})), 0.5));
  loss.backward();
  // d loss / dw = 0.5 * column sums of x
  require_values(Tensor<double>(w.grad()), {0.5 * (1 + 4), 0.5 * (-2 - 5), 0.5 * (3 + 6)}, 1e-15, 0);

  // And back to raw bytes of the same dtype.
  AnyTensor xt = ms::transpose(x, 0, 1);  // a strided view: to_bytes gives its row-major order
  std::vector<std::byte> out = xt.to_bytes();
  REQUIRE(out.size() == 6 * sizeof(double));
  std::vector<double> back(6);
  std::memcpy(back.data(), out.data(), out.size());
  CHECK(back == std::vector<double>{1, 4, -2, -5, 3, 6});
  AnyTensor again = AnyTensor::from_bytes(xt.dtype(), xt.shape(), xt.to_bytes());
  CHECK(ms_test::same_bits(again, xt));
}

TEST_CASE("api: typed in gives typed out, AnyTensor in gives AnyTensor out", "[op][api]") {
  Tensor<float> t{1, -2, 3};
  AnyTensor a = t;
  static_assert(std::is_same_v<decltype(ms::sum(t)), Tensor<float>>);
  static_assert(std::is_same_v<decltype(ms::sum(a)), AnyTensor>);
  static_assert(std::is_same_v<decltype(ms::gelu(t, "tanh")), Tensor<float>>);
  static_assert(std::is_same_v<decltype(ms::gelu(a, "tanh")), AnyTensor>);
  static_assert(std::is_same_v<decltype(ms::reshape(t, {3, 1})), Tensor<float>>);
  static_assert(std::is_same_v<decltype(ms::reshape(a, {3, 1})), AnyTensor>);
  static_assert(std::is_same_v<decltype(ms::slice(t, 0, 1, ms::end)), Tensor<float>>);
  static_assert(std::is_same_v<decltype(ms::argmax(t)), Tensor<std::int64_t>>);
  static_assert(std::is_same_v<decltype(ms::argmax(a)), AnyTensor>);
  static_assert(std::is_same_v<decltype(ms::softplus(t, 2.0)), Tensor<float>>);
  static_assert(std::is_same_v<decltype(ms::softplus(a, 2.0)), AnyTensor>);
  static_assert(std::is_same_v<decltype(a + t), AnyTensor>);
  static_assert(std::is_same_v<decltype(t + t), Tensor<float>>);
  static_assert(std::is_same_v<decltype(ms::cat({t, t})), Tensor<float>>);
  static_assert(std::is_same_v<decltype(ms::cat({a, a})), AnyTensor>);
  static_assert(std::is_same_v<ms::handle_t<Tensor<float>>, Tensor<float>>);
  static_assert(std::is_same_v<ms::handle_as_t<AnyTensor, bool>, AnyTensor>);

  // The two forms compute the same values.
  CHECK(Tensor<float>(ms::exp(a)).to_vector() == ms::exp(t).to_vector());
  CHECK(Tensor<float>(ms::sum(a)).item() == ms::sum(t).item());
  CHECK(Tensor<float>(ms::max(a, {0})).item() == 3.0f);
  CHECK(Tensor<std::int64_t>(ms::argmin(a)).item() == 1);
  CHECK(Tensor<float>(a * 2.0 - t).to_vector() == std::vector<float>{1, -2, 3});
  CHECK(Tensor<float>(-a).to_vector() == std::vector<float>{-1, 2, -3});
  CHECK(Tensor<bool>(a > 0.0).to_vector() == std::vector<bool>{true, false, true});
  CHECK(Tensor<float>(ms::where(a > 0.0, a, ms::zeros_like(t))).to_vector() == std::vector<float>{1, 0, 3});
  CHECK(Tensor<float>(ms::cat({a, a})).to_vector() == ms::concat({t, t}).to_vector());
  CHECK(ms::cat({t, t}, 0).to_vector() == std::vector<float>{1, -2, 3, 1, -2, 3});
  CHECK(Tensor<float>(ms::stack(std::vector<AnyTensor>{a, a}, 1)).shape() == Shape{3, 2});
  CHECK(Tensor<float>(ms::leaky_relu(a, 0.5)).to_vector() == std::vector<float>{1, -1, 3});
  CHECK(Tensor<double>(ms::cast(a, DType::f64)).to_vector() == std::vector<double>{1, -2, 3});
  CHECK(ms::cast(a, DType::f32).is_same(a));  // already float32: the input itself, like torch's .to()
  CHECK(Tensor<float>(ms::softmax(a, 0)).to_vector() == ms::softmax(t, 0).to_vector());
  CHECK(Tensor<float>(ms::embedding(ms::reshape(a, {3, 1}), Tensor<std::int64_t>{2, 0})).to_vector() ==
        std::vector<float>{3, 1});

  // Autograd members with the same names on both handles.
  Tensor<double> p{0.5, -1.5};
  p.requires_grad_();
  Tensor<double> q = ms::mul(p, p);
  q.backward(Tensor<double>{1.0, 2.0});
  static_assert(std::is_same_v<decltype(p.grad()), Tensor<double>>);
  static_assert(std::is_same_v<decltype(AnyTensor(p).grad()), AnyTensor>);
  CHECK(p.grad().to_vector() == std::vector<double>{1.0, -6.0});
  CHECK(Tensor<double>(AnyTensor(p).grad()).to_vector() == std::vector<double>{1.0, -6.0});
}

TEST_CASE("api: slice to the end, omitted bounds and negative indices follow Python", "[op][api]") {
  Tensor<float> x = iota<float>({5});  // 0 1 2 3 4
  CHECK(x.slice(0, 2, ms::end).to_vector() == std::vector<float>{2, 3, 4});         // x[2:]
  CHECK(x.slice(0, -2, ms::end).to_vector() == std::vector<float>{3, 4});           // x[-2:]
  CHECK(x.slice(0, std::nullopt, -1).to_vector() == std::vector<float>{0, 1, 2, 3});  // x[:-1]
  CHECK(x.slice(0, 1, -1).to_vector() == std::vector<float>{1, 2, 3});              // x[1:-1]
  CHECK(x.slice(0, ms::end, ms::end, -1).to_vector() == std::vector<float>{4, 3, 2, 1, 0});  // x[::-1]
  CHECK(x.slice(0, -1, ms::end, -2).to_vector() == std::vector<float>{4, 2, 0});    // x[-1::-2]
  CHECK(x.slice(0, 0, ms::end, 2).to_vector() == std::vector<float>{0, 2, 4});      // x[::2]
  CHECK(x.slice(0, 7, ms::end).numel() == 0);                                       // x[7:]
  Tensor<float> m = iota<float>({2, 3});
  Tensor<float> s = ms::slice(m, -1, 1, ms::end);  // m[:, 1:]
  REQUIRE(s.shape() == Shape{2, 2});
  CHECK(s.contiguous().to_vector() == std::vector<float>{1, 2, 4, 5});
  CHECK(ms::narrow(x, 0, -3, 2).to_vector() == std::vector<float>{2, 3});
  CHECK(ms::flatten(m).shape() == Shape{6});
  CHECK(ms::unsqueeze(x, -1).shape() == Shape{5, 1});
  CHECK(ms::permute(m, {1, 0}).shape() == Shape{3, 2});
}

TEST_CASE("api: clamp with one bound, clamp_min and clamp_max", "[op][api]") {
  Tensor<double> x{-2.0, 0.5, 3.0};
  CHECK(ms::clamp(x, std::nullopt, 1.5).to_vector() == std::vector<double>{-2.0, 0.5, 1.5});
  CHECK(ms::clamp(x, -1.0).to_vector() == std::vector<double>{-1.0, 0.5, 3.0});
  CHECK(ms::clamp(x, 0, 1).to_vector() == std::vector<double>{0.0, 0.5, 1.0});
  CHECK(ms::clamp_min(x, 0.0).to_vector() == std::vector<double>{0.0, 0.5, 3.0});
  CHECK(ms::clamp_max(x, 0.0).to_vector() == std::vector<double>{-2.0, 0.0, 0.0});
  CHECK(ms::clamp_min(Tensor<std::int64_t>{-3, 4}, -1.5).to_vector() == std::vector<std::int64_t>{-1, 4});
  CHECK(Tensor<double>(ms::clamp_max(AnyTensor(x), -1.0)).to_vector() == std::vector<double>{-2.0, -1.0, -1.0});
  // The gradient passes where the bound does not bite.
  grad_matches_fd([](const AnyTensor& v) { return ms::clamp_min(v, 0.2); }, Tensor<double>{-1.0, 0.7, 1.3});
  grad_matches_fd([](const AnyTensor& v) { return ms::clamp_max(v, 0.2); }, Tensor<double>{-1.0, 0.7, 1.3});
}

TEST_CASE("api: softplus with beta and threshold", "[op][api][grad]") {
  const std::vector<double> xv = {-3.0, -0.5, 0.0, 0.5, 4.0, 30.0};
  Tensor<double> x = ms::from_vector<double>(xv);
  for (auto [beta, thr] : {std::pair{1.0, 20.0}, std::pair{2.0, 5.0}, std::pair{0.5, 1.0}}) {
    INFO("beta " << beta << ", threshold " << thr);
    std::vector<double> ref;
    for (double v : xv) ref.push_back(beta * v > thr ? v : std::log1p(std::exp(beta * v)) / beta);
    require_values(ms::softplus(x, beta, thr), ref, 1e-14, 1e-14);
    require_values(ms::softplus(ms::cast<float>(x), beta, thr), ref, 1e-6, 1e-6);
    // away from the threshold, where softplus switches to x
    grad_matches_fd([=](const AnyTensor& v) { return ms::softplus(v, beta, thr); },
                    Tensor<double>{{-1.5, 0.3, 0.9}, {1.7, -0.2, 25.0}});
  }
}

TEST_CASE("api: max_pool2d with dilation and ceil_mode", "[op][api][pool]") {
  Tensor<double> x = iota<double>({1, 1, 5, 5});
  // kernel 2, stride 1, dilation 2: taps (i, j), (i, j + 2), (i + 2, j), (i + 2, j + 2)
  Tensor<double> y = ms::max_pool2d(x, 2, 1, 0, 2);
  REQUIRE(y.shape() == Shape{1, 1, 3, 3});
  require_values(y, {12, 13, 14, 17, 18, 19, 22, 23, 24}, 0, 0);
  // ceil_mode keeps the last, partial window: (5 - 2) / 2 rounded up, plus one
  Tensor<double> c = ms::max_pool2d(x, 2, 2, 0, 1, true);
  REQUIRE(c.shape() == Shape{1, 1, 3, 3});
  require_values(c, {6, 8, 9, 16, 18, 19, 21, 23, 24}, 0, 0);
  REQUIRE(ms::max_pool2d(x, 2, 2).shape() == Shape{1, 1, 2, 2});
  // Random inputs against the written-out rule, with padding, uneven strides and dilation.
  for (auto r : {PoolRef{3, 2, 1, 2, true}, PoolRef{2, 3, 1, 1, true}, PoolRef{3, 1, 1, 2, false},
                 PoolRef{2, 2, 0, 3, true}}) {
    INFO("k " << r.k << " s " << r.s << " p " << r.p << " d " << r.d << " ceil " << r.ceil_mode);
    Tensor<double> xr = random<double>({2, 2, 8, 9}, 5);
    Tensor<double> yr = ms::max_pool2d(xr, r.k, r.s, r.p, r.d, r.ceil_mode);
    REQUIRE(yr.shape() == Shape{2, 2, r.out(8), r.out(9)});
    require_values(yr, ref_max_pool(ms_test::values(xr), 4, 8, 9, r), 0, 0);
    require_values(ms::max_pool2d(ms::cast<float>(xr), r.k, r.s, r.p, r.d, r.ceil_mode),
                   ref_max_pool(ms_test::values(ms::cast<float>(xr)), 4, 8, 9, r), 0, 0);
    grad_matches_fd([r](const AnyTensor& v) { return ms::max_pool2d(v, r.k, r.s, r.p, r.d, r.ceil_mode); },
                    random<double>({1, 2, 8, 9}, 6));
  }
}

TEST_CASE("api: avg_pool2d with ceil_mode, count_include_pad and divisor_override", "[op][api][pool]") {
  Tensor<double> x = iota<double>({1, 1, 5, 5});
  // PyTorch: F.avg_pool2d(arange(25.).view(1, 1, 5, 5), 2, 2, ceil_mode=True)
  require_values(ms::avg_pool2d(x, 2, 2, 0, true, true), {3, 5, 6.5, 13, 15, 16.5, 20.5, 22.5, 24}, 1e-15, 0);
  // divisor_override: window sums divided by 1
  require_values(ms::avg_pool2d(x, 2, 2, 0, true, false, 1), {12, 20, 52, 60}, 0, 0);
  for (auto r : {PoolRef{3, 2, 1, 1, true, true}, PoolRef{3, 2, 1, 1, true, false}, PoolRef{2, 3, 1, 1, false, true, 3},
                 PoolRef{3, 2, 1, 1, true, false, 4}}) {
    INFO("k " << r.k << " s " << r.s << " p " << r.p << " ceil " << r.ceil_mode << " include_pad " << r.include_pad
              << " divisor " << r.divisor);
    Tensor<double> xr = random<double>({2, 1, 7, 8}, 8);
    std::optional<i64> div = r.divisor ? std::optional<i64>(r.divisor) : std::nullopt;
    Tensor<double> yr = ms::avg_pool2d(xr, r.k, r.s, r.p, r.include_pad, r.ceil_mode, div);
    REQUIRE(yr.shape() == Shape{2, 1, r.out(7), r.out(8)});
    require_values(yr, ref_avg_pool(ms_test::values(xr), 2, 7, 8, r), 1e-14, 1e-14);
    grad_matches_fd(
        [r, div](const AnyTensor& v) { return ms::avg_pool2d(v, r.k, r.s, r.p, r.include_pad, r.ceil_mode, div); },
        random<double>({1, 1, 7, 8}, 9));
  }
}

TEST_CASE("api: from_bytes and to_bytes for every dtype", "[op][api]") {
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8, DType::b8, DType::f16, DType::bf16}) {
    INFO(ms::dtype_name(dt));
    const std::size_t es = ms::dtype_size(dt);
    std::vector<std::byte> b(6 * es);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::byte(dt == DType::b8 ? (i % 2) : (i * 7 + 1) & 0x3f);
    AnyTensor t = AnyTensor::from_bytes(dt, Shape{2, 3}, b);
    REQUIRE(t.dtype() == dt);
    CHECK(t.to_bytes() == b);
    // a transposed view reads back in its own row-major order
    std::vector<std::byte> tb = ms::transpose(t, 0, 1).to_bytes();
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j)
        CHECK(std::memcmp(tb.data() + (i * 2 + j) * es, b.data() + (j * 3 + i) * es, es) == 0);
  }
  CHECK(AnyTensor::from_bytes(DType::f32, Shape{0}, nullptr, 0).numel() == 0);
}

TEST_CASE("api: nn::MaxPool2d and nn::AvgPool2d take the same options", "[nn][api][pool]") {
  Tensor<float> x = iota<float>({1, 1, 5, 5});
  ms::nn::MaxPool2d mp(2, 2, 0, 1, true);
  CHECK(mp(x).to_vector() == ms::max_pool2d(x, 2, 2, 0, 1, true).to_vector());
  CHECK(mp.extra_repr() == "kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=True");
  ms::nn::MaxPool2d dil(2, 1, 0, 2);
  CHECK(dil(x).shape() == Shape{1, 1, 3, 3});
  CHECK(dil.extra_repr() == "kernel_size=(2, 2), stride=(1, 1), padding=(0, 0), dilation=(2, 2)");
  ms::nn::AvgPool2d ap(2, 2, 0, true, true, 1);
  require_values(ap(x), {12, 20, 13, 52, 60, 33, 41, 45, 24}, 0, 0);  // window sums (divisor 1)
  CHECK(ap.extra_repr() == "kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=True, divisor_override=1");
  CHECK(ms::nn::AvgPool2d(2).extra_repr() == "kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)");
}
