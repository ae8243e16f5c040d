// Reference-value tests of the nn ops (ops/nn.hpp). References are straightforward
// loops in double written here: a direct convolution (every stride, padding,
// dilation and group combination goes through the same definition), window loops
// for the poolings, two-pass statistics for the normalizations, log-softmax by
// hand for the losses. Also: exact error messages, batch_norm's running-statistic
// update (eagerly and on graph replay), dropout's mask properties.

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <ms/ops/nn.hpp>
#include <ms/autograd/nn_rules.hpp>

#include "../test_util.hpp"

MS_TEST_COVERS("conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm", "layer_norm", "dropout",
               "embedding", "cross_entropy", "nll_loss", "mse_loss");

namespace {

using ms::AnyTensor;
using ms::Int2;
using ms::Shape;
using ms::Tensor;
using ms_test::random;  // uniform in [-1, 1) from a fixed seed
using ms_test::require_shape;
using ms_test::require_values;
using ms_test::ThreadGuard;
using ms_test::values;
namespace ops = ms::ops;
using i64 = std::int64_t;

template <class T>
constexpr double tol() { return std::is_same_v<T, float> ? 2e-5 : 1e-12; }

// ---- references ---------------------------------------------------------------------------------

struct ConvCase {
  Shape x, w;
  Int2 stride, padding, dilation;
  i64 groups;
  bool bias;
};

/// Direct convolution: y[n, o, i, j] = b[o] + sum_{c, ki, kj} x[n, g*Cg + c, i*s - p + ki*d, ...] * w[o, c, ki, kj].
std::vector<double> ref_conv(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                             const Shape& ws, const std::vector<double>* b, Int2 s, Int2 p, Int2 d, i64 G,
                             Shape& os) {
  const i64 N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], Cg = ws[1], kh = ws[2], kw = ws[3];
  REQUIRE(Cg * G == C);
  const i64 Ho = (H + 2 * p.h - d.h * (kh - 1) - 1) / s.h + 1, Wo = (W + 2 * p.w - d.w * (kw - 1) - 1) / s.w + 1;
  const i64 Og = O / G;
  os = Shape{N, O, Ho, Wo};
  std::vector<double> y;
  for (i64 n = 0; n < N; ++n)
    for (i64 o = 0; o < O; ++o)
      for (i64 i = 0; i < Ho; ++i)
        for (i64 j = 0; j < Wo; ++j) {
          double acc = b ? (*b)[static_cast<std::size_t>(o)] : 0.0;
          const i64 g = o / Og;
          for (i64 c = 0; c < Cg; ++c)
            for (i64 ki = 0; ki < kh; ++ki)
              for (i64 kj = 0; kj < kw; ++kj) {
                const i64 ih = i * s.h - p.h + ki * d.h, iw = j * s.w - p.w + kj * d.w;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += x[static_cast<std::size_t>(((n * C + g * Cg + c) * H + ih) * W + iw)] *
                       w[static_cast<std::size_t>(((o * Cg + c) * kh + ki) * kw + kj)];
              }
          y.push_back(acc);
        }
  return y;
}

enum class PoolKind { max, avg_incl, avg_excl };

std::vector<double> ref_pool(const std::vector<double>& x, const Shape& xs, Int2 k, Int2 s, Int2 p, PoolKind kind,
                             Shape& os, std::vector<i64>* argmax = nullptr) {
  const i64 N = xs[0], C = xs[1], H = xs[2], W = xs[3];
  const i64 Ho = (H + 2 * p.h - k.h) / s.h + 1, Wo = (W + 2 * p.w - k.w) / s.w + 1;
  os = Shape{N, C, Ho, Wo};
  std::vector<double> y;
  for (i64 pl = 0; pl < N * C; ++pl)
    for (i64 i = 0; i < Ho; ++i)
      for (i64 j = 0; j < Wo; ++j) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        i64 bi = -1, cnt = 0;
        for (i64 a = 0; a < k.h; ++a)
          for (i64 b = 0; b < k.w; ++b) {
            const i64 ih = i * s.h - p.h + a, iw = j * s.w - p.w + b;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = x[static_cast<std::size_t>(pl * H * W + ih * W + iw)];
            if (bi < 0 || v > best) best = v, bi = ih * W + iw;
            sum += v;
            ++cnt;
          }
        if (kind == PoolKind::max) {
          y.push_back(best);
          if (argmax) argmax->push_back(bi);
        } else {
          y.push_back(sum / static_cast<double>(kind == PoolKind::avg_incl ? k.h * k.w : cnt));
        }
      }
  return y;
}

// ---- conv2d ------------------------------------------------------------------------------------------

template <class T>
void check_conv(const ConvCase& c, unsigned seed) {
  Tensor<T> x = random<T>(c.x, seed), w = random<T>(c.w, seed + 1), b = random<T>(Shape{c.w[0]}, seed + 2);
  Tensor<T> y = ms::conv2d(x, w, c.bias ? b : Tensor<T>(), c.stride, c.padding, c.dilation, c.groups);
  auto bv = values(b);
  Shape os;
  auto ref = ref_conv(values(x), c.x, values(w), c.w, c.bias ? &bv : nullptr, c.stride, c.padding, c.dilation,
                      c.groups, os);
  REQUIRE(y.shape() == os);
  require_values(y, ref, tol<T>(), tol<T>());
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {{1, 3, 5, 5}, {4, 3, 3, 3}, 1, 0, 1, 1, true},                   // plain
      {{2, 3, 7, 6}, {4, 3, 3, 3}, 2, 1, 1, 1, true},                   // stride 2, padding 1
      {{1, 2, 9, 8}, {3, 2, 3, 3}, 1, 2, 2, 1, false},                  // dilation 2
      {{2, 4, 5, 5}, {6, 2, 3, 3}, 1, 1, 1, 2, true},                   // groups 2
      {{3, 2, 6, 9}, {4, 2, 2, 3}, {1, 2}, {0, 1}, {1, 1}, 1, true},    // non-square kernel and stride, batch 3
      {{3, 2, 7, 5}, {4, 2, 3, 2}, {2, 1}, {1, 0}, {2, 1}, 1, false},   // mixed everything
      {{2, 4, 4, 5}, {6, 2, 1, 1}, 1, 0, 1, 2, true},                   // pointwise (no im2col) with groups
      {{2, 3, 6, 6}, {3, 1, 3, 3}, 2, 1, 1, 3, true},                   // depthwise
      {{1, 1, 3, 3}, {2, 1, 3, 3}, 1, 0, 1, 1, true},                   // 1 x 1 output
      // stride 1: rows of at least a SIMD batch (the im2col runs that spill), padded or not
      {{2, 1, 28, 28}, {6, 1, 5, 5}, 1, 2, 1, 1, true},                 // LeNet's first layer
      {{2, 3, 12, 20}, {4, 3, 3, 3}, 1, 0, 1, 1, false},                // 18 columns
      {{1, 2, 10, 10}, {3, 2, 3, 3}, 1, 0, 1, 1, true},                 // 8 columns exactly
      {{1, 2, 9, 9}, {3, 2, 3, 2}, 1, {1, 0}, 1, 1, true},              // 8 columns, padded rows only
  };
  return cases;
}

}  // namespace

TEST_CASE("conv2d matches a direct convolution (stride, padding, dilation, groups, non-square)", "[nn][conv2d]") {
  const auto& cases = conv_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    check_conv<float>(cases[i], 10 + static_cast<unsigned>(i));
    check_conv<double>(cases[i], 10 + static_cast<unsigned>(i));
  }
}

TEST_CASE("conv2d: non-contiguous operands and thread counts give the same result", "[nn][conv2d]") {
  ThreadGuard guard;
  // x and w as transposed views of contiguous buffers
  Tensor<double> xt = random<double>({2, 3, 6, 5}, 3), wt = random<double>({4, 3, 3, 2}, 4);
  Tensor<double> x = xt.transpose(2, 3), w = wt.transpose(2, 3);  // (2, 3, 5, 6), (4, 3, 2, 3)
  REQUIRE_FALSE(x.is_contiguous());
  Tensor<double> b = random<double>({8}, 5).slice(0, 0, 8, 2);  // stride 2
  Tensor<double> y = ms::conv2d(x, w, b, {2, 1}, 1);
  auto bv = values(b);
  Shape os;
  auto ref = ref_conv(values(x), x.shape(), values(w), w.shape(), &bv, {2, 1}, 1, 1, 1, os);
  REQUIRE(y.shape() == os);
  require_values(y, ref, 1e-12, 1e-12);
  ms::set_num_threads(1);
  Tensor<double> y1 = ms::conv2d(x, w, b, {2, 1}, 1);
  CHECK(y1.to_vector() == y.to_vector());  // each image is computed the same way on any thread
}

TEST_CASE("conv2d backward ops are its adjoints on wide stride-1 rows, in f32 and f64", "[nn][conv2d]") {
  // <conv(x, w), g> = <x, grad_input(g, w)> = <w, grad_weight(g, x)>, on the geometries whose
  // im2col and col2im take whole rows in SIMD batches (with and without padding).
  struct Case {
    Shape x, w;
    Int2 p;
  };
  for (const Case& c : {Case{{3, 1, 28, 28}, {6, 1, 5, 5}, 2}, Case{{2, 6, 14, 14}, {16, 6, 5, 5}, 0},
                        Case{{2, 2, 11, 21}, {3, 2, 3, 4}, {1, 2}}}) {
    INFO("input " << ms::shape_str(c.x) << ", weight " << ms::shape_str(c.w));
    ops::Attrs a{{"stride", ops::IntList{1, 1}}, {"padding", c.p.list()}, {"dilation", ops::IntList{1, 1}},
                 {"groups", std::int64_t{1}}};
    ops::Attrs ai = a, aw = a;
    ai.set("input_shape", c.x.vec());
    aw.set("weight_shape", c.w.vec());
    auto check = [&]<class T>(double tolerance) {
      Tensor<T> x = random<T>(c.x, 1), w = random<T>(c.w, 2);
      Tensor<T> y = ms::conv2d(x, w, Tensor<T>(), 1, c.p);
      Tensor<T> g = random<T>(y.shape(), 3);
      auto dot = [](const Tensor<T>& u, const Tensor<T>& v) {
        double s = 0;
        auto uv = values(u), vv = values(v);
        for (std::size_t i = 0; i < uv.size(); ++i) s += uv[i] * vv[i];
        return s;
      };
      const double lhs = dot(y, g);
      const double rx = dot(x, Tensor<T>(ops::call1(ops::conv2d_grad_input_op, {g, w}, ai)));
      const double rw = dot(w, Tensor<T>(ops::call1(ops::conv2d_grad_weight_op, {g, x}, aw)));
      CHECK(std::abs(rx - lhs) <= tolerance * std::abs(lhs));
      CHECK(std::abs(rw - lhs) <= tolerance * std::abs(lhs));
    };
    check.template operator()<double>(1e-10);
    check.template operator()<float>(1e-4);
  }
}

TEST_CASE("conv2d: errors name the op, shapes and dtypes", "[nn][conv2d][errors]") {
  Tensor<float> x = random<float>({1, 3, 5, 5}, 1);
  MS_REQUIRE_THROWS_MSG(ms::conv2d(x, random<float>({4, 2, 3, 3}, 2)), ms::ShapeError,
                        "[ms.shape_error] conv2d: weight (4, 2, 3, 3) expects 2 input channels per group, but input "
                        "(1, 3, 5, 5) has 3 channels in 1 group(s)");
  MS_REQUIRE_THROWS_MSG(ms::conv2d(x, random<float>({4, 1, 3, 3}, 2), {}, 1, 0, 1, 2), ms::ValueError,
                        "[ms.value_error] conv2d: groups 2 must divide both in_channels 3 of input (1, 3, 5, 5) and "
                        "out_channels 4 of weight (4, 1, 3, 3)");
  MS_REQUIRE_THROWS_MSG(ms::conv2d(random<float>({1, 1, 2, 2}, 1), random<float>({1, 1, 3, 3}, 2)), ms::ShapeError,
                        "[ms.shape_error] conv2d: kernel (3, 3) with dilation (1, 1) does not fit the padded input "
                        "(2, 2) of input (1, 1, 2, 2)");
  MS_REQUIRE_THROWS_MSG(ms::conv2d(x, random<float>({4, 3, 3, 3}, 2), random<float>({3}, 3)), ms::ShapeError,
                        "[ms.shape_error] conv2d: bias shape (3,) does not match out_channels 4 of weight (4, 3, 3, 3)");
  MS_REQUIRE_THROWS_MSG(ops::conv2d(x, random<double>({4, 3, 3, 3}, 2)), ms::DTypeError,
                        "[ms.dtype_error] conv2d: dtype mismatch float32 vs float64 (shapes (1, 3, 5, 5) and (4, 3, 3, "
                        "3)); convert one side with ms::cast");
  MS_REQUIRE_THROWS_MSG(ms::conv2d(random<float>({3, 5, 5}, 1), random<float>({4, 3, 3, 3}, 2)), ms::ShapeError,
                        "[ms.shape_error] conv2d: input must be 4-D (N, C, H, W), got shape (3, 5, 5)");
  MS_REQUIRE_THROWS_MSG(ms::conv2d(x, random<float>({4, 3, 3, 3}, 2), {}, 0), ms::ValueError,
                        "[ms.value_error] conv2d: stride must be positive, got (0, 0)");
  MS_REQUIRE_THROWS_MSG(ops::conv2d(ms::zeros<std::int32_t>({1, 3, 5, 5}), ms::zeros<std::int32_t>({4, 3, 3, 3})),
                        ms::DTypeError,
                        "[ms.dtype_error] conv2d: unsupported dtype int32 for 'input' (input 0; supported: float32, float64, float16, bfloat16)");
}

// ---- pooling ---------------------------------------------------------------------------------------------

TEST_CASE("max_pool2d matches window maxima and their indices", "[nn][pool]") {
  struct Case {
    Shape x;
    Int2 k;
    std::optional<Int2> s;
    Int2 p;
  };
  const std::vector<Case> cases = {
      {{2, 3, 6, 6}, 2, std::nullopt, 0},  // stride defaults to the kernel
      {{1, 2, 7, 5}, 3, Int2(2), 1},       // overlapping windows, padding
      {{3, 1, 5, 8}, {2, 3}, Int2{1, 2}, {1, 1}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    const Case& c = cases[i];
    Tensor<double> x = random<double>(c.x, 20 + static_cast<unsigned>(i));
    auto [y, idx] = ops::max_pool2d_with_indices(x, c.k, c.s, c.p);
    Shape os;
    std::vector<i64> am;
    auto ref = ref_pool(values(x), c.x, c.k, c.s.value_or(c.k), c.p, PoolKind::max, os, &am);
    REQUIRE(y.shape() == os);
    require_values(Tensor<double>(y), ref, 0, 0);
    CHECK(Tensor<i64>(idx).to_vector() == am);
    Tensor<float> yf = ms::max_pool2d(ms::cast<float>(x), c.k, c.s, c.p);
    require_values(yf, ref, 1e-7, 1e-7);
  }
}

TEST_CASE("max_pool2d: NaN propagates, -inf is a value", "[nn][pool]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Tensor<double> x = ms::from_vector<double>({1, nan, 3, 4, -inf, -inf, -inf, -inf}, {1, 2, 2, 2});
  auto [y, idx] = ops::max_pool2d_with_indices(x, 2);
  Tensor<double> yy = y;
  CHECK(std::isnan(yy(0, 0, 0, 0)));
  CHECK(yy(0, 1, 0, 0) == -inf);
  CHECK(Tensor<i64>(idx).to_vector() == std::vector<i64>{1, 0});
}

TEST_CASE("max_pool2d 2x2 stride 2: any row width, ties, NaN and infinities, in f32 and f64", "[nn][pool][op]") {
  // The window rule, visited in row-major order: a later candidate is taken when it is
  // greater, or when it is NaN and the best so far is not (the first maximum and the first
  // NaN win). Float rows of 2 x 2 windows take a SIMD path 8 (AVX2) or 16 (AVX-512) outputs
  // at a time, with a masked last group; widths below cover whole groups, partial ones and
  // odd widths. At AVX-512 rows of up to 8 windows go two at a time, across planes: the
  // 3 x 2 x 10 x 10 input (rows of 5, pairs straddling planes) and 1 x 3 x 7 x 13 (odd
  // sizes, an odd number of rows in all) cover that; 40 x 16 x 10 x 10 is split between
  // threads (planes of 100 elements, 327 to a chunk) wherever ms runs on more than one.
  // Tagged [op]: it runs again at every CPU level.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const Shape& xs : {Shape{2, 3, 28, 28}, Shape{1, 2, 9, 31}, Shape{1, 1, 4, 17}, Shape{1, 1, 2, 2},
                          Shape{2, 1, 6, 40}, Shape{1, 1, 3, 3}, Shape{1, 2, 4, 66}, Shape{3, 2, 10, 10},
                          Shape{1, 3, 7, 13}, Shape{40, 16, 10, 10}}) {
    INFO("input " << ms::shape_str(xs));
    std::mt19937 gen(7);
    std::uniform_int_distribution<int> small(0, 3), pick(0, 99);
    std::vector<double> xv(static_cast<std::size_t>(ms::numel(xs)));
    for (double& v : xv) {
      const int r = pick(gen);
      v = r < 4 ? nan : r < 6 ? inf : r < 8 ? -inf : static_cast<double>(small(gen));  // many ties
    }
    const i64 planes = xs[0] * xs[1], H = xs[2], W = xs[3], Ho = H / 2, Wo = W / 2;
    std::vector<double> ref;
    std::vector<i64> ref_idx;
    for (i64 pl = 0; pl < planes; ++pl)
      for (i64 i = 0; i < Ho; ++i)
        for (i64 j = 0; j < Wo; ++j) {
          double best = 0;
          i64 bi = -1;
          for (i64 a = 0; a < 2; ++a)
            for (i64 b = 0; b < 2; ++b) {
              const i64 at = (2 * i + a) * W + 2 * j + b;
              const double v = xv[static_cast<std::size_t>(pl * H * W + at)];
              if (bi < 0 || v > best || (std::isnan(v) && !std::isnan(best))) best = v, bi = at;
            }
          ref.push_back(best);
          ref_idx.push_back(bi);
        }
    auto check = [&]<class T>() {
      INFO(ms::dtype_name(ms::dtype_v<T>));
      Tensor<T> x = ms::from_vector<T>(std::vector<T>(xv.begin(), xv.end()), xs);
      auto [y, idx] = ops::max_pool2d_with_indices(x, 2);
      REQUIRE(y.shape() == Shape{xs[0], xs[1], Ho, Wo});
      CHECK(Tensor<i64>(idx).to_vector() == ref_idx);
      std::vector<T> got = Tensor<T>(y).to_vector();
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < got.size(); ++i)
        wrong += std::isnan(ref[i]) ? !std::isnan(got[i]) : static_cast<double>(got[i]) != ref[i];
      CHECK(wrong == 0);
    };
    check.template operator()<float>();
    check.template operator()<double>();
  }
}

TEST_CASE("avg_pool2d matches window means (count_include_pad true and false)", "[nn][pool]") {
  for (bool incl : {true, false}) {
    for (auto [xs, k, s, p] : {std::tuple{Shape{2, 2, 6, 7}, Int2(3), Int2(2), Int2(1)},
                               std::tuple{Shape{1, 3, 5, 5}, Int2(2), Int2(2), Int2(0)},
                               std::tuple{Shape{1, 1, 4, 7}, Int2{2, 4}, Int2{1, 3}, Int2{1, 2}}}) {
      INFO("count_include_pad " << incl << ", input " << ms::shape_str(xs));
      Tensor<double> x = random<double>(xs, 30);
      Tensor<double> y = ms::avg_pool2d(x, k, s, p, incl);
      Shape os;
      auto ref = ref_pool(values(x), xs, k, s, p, incl ? PoolKind::avg_incl : PoolKind::avg_excl, os);
      REQUIRE(y.shape() == os);
      require_values(y, ref, 1e-12, 1e-12);
      require_values(ms::avg_pool2d(ms::cast<float>(x), k, s, p, incl), ref, 1e-6, 1e-6);
    }
  }
  // padding counts in the divisor: a 2x2 window with one real element of 4 at the corner
  Tensor<double> one = ms::full<double>({1, 1, 1, 1}, 4.0);
  require_values(ms::avg_pool2d(one, 2, 1, 1, true), {1, 1, 1, 1});
  require_values(ms::avg_pool2d(one, 2, 1, 1, false), {4, 4, 4, 4});
}

TEST_CASE("adaptive_avg_pool2d matches PyTorch's cell boundaries", "[nn][pool]") {
  for (auto [xs, o] : {std::pair{Shape{2, 2, 5, 7}, Int2{3, 4}}, std::pair{Shape{1, 3, 4, 4}, Int2(2)},
                       std::pair{Shape{1, 1, 3, 2}, Int2{5, 3}}, std::pair{Shape{2, 1, 6, 6}, Int2(1)}}) {
    INFO("input " << ms::shape_str(xs));
    Tensor<double> x = random<double>(xs, 40);
    Tensor<double> y = ms::adaptive_avg_pool2d(x, o);
    const i64 H = xs[2], W = xs[3];
    std::vector<double> ref;
    auto xv = values(x);
    for (i64 pl = 0; pl < xs[0] * xs[1]; ++pl)
      for (i64 i = 0; i < o.h; ++i)
        for (i64 j = 0; j < o.w; ++j) {
          const i64 h0 = static_cast<i64>(std::floor(static_cast<double>(i * H) / static_cast<double>(o.h)));
          const i64 h1 = static_cast<i64>(std::ceil(static_cast<double>((i + 1) * H) / static_cast<double>(o.h)));
          const i64 w0 = static_cast<i64>(std::floor(static_cast<double>(j * W) / static_cast<double>(o.w)));
          const i64 w1 = static_cast<i64>(std::ceil(static_cast<double>((j + 1) * W) / static_cast<double>(o.w)));
          double s = 0;
          for (i64 a = h0; a < h1; ++a)
            for (i64 b = w0; b < w1; ++b) s += xv[static_cast<std::size_t>(pl * H * W + a * W + b)];
          ref.push_back(s / static_cast<double>((h1 - h0) * (w1 - w0)));
        }
    REQUIRE(y.shape() == Shape{xs[0], xs[1], o.h, o.w});
    require_values(y, ref, 1e-12, 1e-12);
  }
  // divisible sizes: the same as avg_pool2d
  Tensor<float> x = random<float>({2, 3, 6, 4}, 41);
  require_values(ms::adaptive_avg_pool2d(x, {3, 2}), values(ms::avg_pool2d(x, 2)), 1e-6, 1e-6);
}

TEST_CASE("pooling errors", "[nn][pool][errors]") {
  Tensor<float> x = random<float>({1, 1, 4, 4}, 1);
  MS_REQUIRE_THROWS_MSG(ms::max_pool2d(x, 2, std::nullopt, 2), ms::ValueError,
                        "[ms.value_error] max_pool2d: padding (2, 2) must be non-negative and at most half of "
                        "kernel_size (2, 2)");
  MS_REQUIRE_THROWS_MSG(ms::avg_pool2d(x, 5), ms::ShapeError,
                        "[ms.shape_error] avg_pool2d: kernel_size (5, 5) is larger than the padded input (4, 4) of "
                        "input (1, 1, 4, 4)");
  MS_REQUIRE_THROWS_MSG(ms::max_pool2d(random<float>({4, 4}, 1), 2), ms::ShapeError,
                        "[ms.shape_error] max_pool2d: input must be 4-D (N, C, H, W), got shape (4, 4)");
  MS_REQUIRE_THROWS_MSG(ms::adaptive_avg_pool2d(x, {0, 2}), ms::ValueError,
                        "[ms.value_error] adaptive_avg_pool2d: output_size must be positive, got (0, 2)");
}

// ---- batch_norm / layer_norm -------------------------------------------------------------------------------

TEST_CASE("batch_norm: training normalizes with batch statistics, eval with running ones", "[nn][norm]") {
  const Shape xs{3, 4, 2, 3};
  Tensor<double> x = random<double>(xs, 50), w = random<double>({4}, 51), b = random<double>({4}, 52);
  Tensor<double> rm = ms::zeros<double>({4}), rv = ms::ones<double>({4});
  Tensor<double> y = ms::batch_norm(x, w, b, rm, rv, true);
  auto xv = values(x), wv = values(w), bv = values(b);
  const i64 N = 3, C = 4, S = 6, M = N * S;
  std::vector<double> ref(xv.size()), mean(C), var(C);
  for (i64 c = 0; c < C; ++c) {
    double s = 0, ss = 0;
    for (i64 n = 0; n < N; ++n)
      for (i64 i = 0; i < S; ++i) s += xv[static_cast<std::size_t>((n * C + c) * S + i)];
    mean[c] = s / M;
    for (i64 n = 0; n < N; ++n)
      for (i64 i = 0; i < S; ++i) ss += std::pow(xv[static_cast<std::size_t>((n * C + c) * S + i)] - mean[c], 2);
    var[c] = ss / M;
    for (i64 n = 0; n < N; ++n)
      for (i64 i = 0; i < S; ++i) {
        auto k = static_cast<std::size_t>((n * C + c) * S + i);
        ref[k] = (xv[k] - mean[c]) / std::sqrt(var[c] + 1e-5) * wv[c] + bv[c];
      }
  }
  require_values(y, ref, 1e-12, 1e-12);
  std::vector<double> erm, erv;
  for (i64 c = 0; c < C; ++c) {
    erm.push_back(0.1 * mean[c]);
    erv.push_back(0.9 + 0.1 * var[c] * M / (M - 1));
  }
  require_values(rm, erm, 1e-12, 1e-12);
  require_values(rv, erv, 1e-12, 1e-12);

  // eval: the running statistics, nothing updated
  Tensor<double> ye = ms::batch_norm(x, w, b, rm, rv, false);
  for (i64 c = 0; c < C; ++c)
    for (i64 n = 0; n < N; ++n)
      for (i64 i = 0; i < S; ++i) {
        auto k = static_cast<std::size_t>((n * C + c) * S + i);
        ref[k] = (xv[k] - erm[c]) / std::sqrt(erv[c] + 1e-5) * wv[c] + bv[c];
      }
  require_values(ye, ref, 1e-12, 1e-12);
  require_values(rm, erm, 0, 0);
  require_values(rv, erv, 0, 0);

  // float, no affine, no running statistics
  Tensor<float> yf = ms::batch_norm(ms::cast<float>(x), Tensor<float>(), Tensor<float>(), Tensor<float>(),
                                    Tensor<float>(), true);
  for (i64 c = 0; c < C; ++c)
    for (i64 n = 0; n < N; ++n)
      for (i64 i = 0; i < S; ++i) {
        auto k = static_cast<std::size_t>((n * C + c) * S + i);
        ref[k] = (xv[k] - mean[c]) / std::sqrt(var[c] + 1e-5);
      }
  require_values(yf, ref, 1e-5, 1e-5);
}

TEST_CASE("batch_norm: running statistics after two training steps equal the hand-computed values", "[nn][norm]") {
  // (N, C) = (4, 2). Step 1: channel 0 = 1, 2, 3, 4 (mean 2.5, unbiased var 5/3), channel 1 = 2, 4, 6, 8
  // (mean 5, unbiased var 20/3). Step 2: channel 0 = 0, 0, 0, 4 (mean 1, unbiased var 4),
  // channel 1 = 1, 1, 1, 1 (mean 1, var 0). momentum 0.1, starting from mean 0 and var 1.
  Tensor<double> rm = ms::zeros<double>({2}), rv = ms::ones<double>({2});
  Tensor<double> w = ms::ones<double>({2}), b = ms::zeros<double>({2});
  ms::batch_norm(Tensor<double>{{1, 2}, {2, 4}, {3, 6}, {4, 8}}, w, b, rm, rv, true);
  require_values(rm, {0.25, 0.5}, 1e-15, 1e-15);
  require_values(rv, {0.9 + 0.1 * 5.0 / 3.0, 0.9 + 0.1 * 20.0 / 3.0}, 1e-15, 1e-15);
  ms::batch_norm(Tensor<double>{{0, 1}, {0, 1}, {0, 1}, {4, 1}}, w, b, rm, rv, true);
  // mean: 0.9 * 0.25 + 0.1 * 1 = 0.325, 0.9 * 0.5 + 0.1 * 1 = 0.55
  // var: 0.9 * (0.9 + 1/6) + 0.1 * 4 = 1.36, 0.9 * (0.9 + 2/3) + 0 = 1.41
  require_values(rm, {0.325, 0.55}, 1e-15, 1e-15);
  require_values(rv, {1.36, 1.41}, 1e-14, 1e-14);

  // other momentum, float
  Tensor<float> rmf = ms::zeros<float>({2}), rvf = ms::ones<float>({2});
  ms::batch_norm(Tensor<float>{{1, 2}, {2, 4}, {3, 6}, {4, 8}}, Tensor<float>(), Tensor<float>(), rmf, rvf, true, 0.5);
  require_values(rmf, {1.25, 2.5}, 1e-7, 1e-7);
  require_values(rvf, {0.5 + 0.5 * 5.0 / 3.0, 0.5 + 0.5 * 20.0 / 3.0}, 1e-6, 1e-6);
}

TEST_CASE("batch_norm: a replayed graph updates the running statistics too", "[nn][norm][graph]") {
  Tensor<double> x1{{1, 2}, {2, 4}, {3, 6}, {4, 8}}, x2{{0, 1}, {0, 1}, {0, 1}, {4, 1}};
  Tensor<double> rm = ms::zeros<double>({2}), rv = ms::ones<double>({2});
  Tensor<double> w = ms::ones<double>({2}), b = ms::zeros<double>({2});
  ms::graph::Capture cap;
  cap.input(x1);
  cap.param(rm);  // mutable state read from (and written to) the caller's storage on every run
  cap.param(rv);
  Tensor<double> y = ms::batch_norm(x1, w, b, rm, rv, true);  // also runs eagerly: step 1
  cap.output(y);
  auto ex = ms::backend::compile(cap.finish());
  require_values(rm, {0.25, 0.5}, 1e-15, 1e-15);
  auto out = ex.run({x2});  // step 2, replayed
  require_values(rm, {0.325, 0.55}, 1e-15, 1e-15);
  require_values(rv, {1.36, 1.41}, 1e-14, 1e-14);
  std::vector<double> ey{-1 / std::sqrt(3 + 1e-5), 0, -1 / std::sqrt(3 + 1e-5), 0, -1 / std::sqrt(3 + 1e-5), 0,
                         3 / std::sqrt(3 + 1e-5), 0};
  require_values(Tensor<double>(out[0]), ey, 1e-12, 1e-12);
  CHECK(ops::batch_norm_op.doc.find("SIDE EFFECT") != std::string::npos);
}

TEST_CASE("batch_norm errors", "[nn][norm][errors]") {
  Tensor<float> x = random<float>({2, 3, 4}, 1), c3 = ms::ones<float>({3}), c4 = ms::ones<float>({4});
  MS_REQUIRE_THROWS_MSG(ms::batch_norm(x, c4, c3, c3, c3, true), ms::ShapeError,
                        "[ms.shape_error] batch_norm: weight shape (4,) does not match the 3 channels of input (2, 3, 4)");
  MS_REQUIRE_THROWS_MSG(ms::batch_norm(x, c3, c3, Tensor<float>(), Tensor<float>(), false), ms::ValueError,
                        "[ms.value_error] batch_norm: eval mode (training=false) needs running_mean and running_var");
  MS_REQUIRE_THROWS_MSG(ms::batch_norm(random<float>({1, 3}, 1), c3, c3, c3, c3, true), ms::ValueError,
                        "[ms.value_error] batch_norm: training needs more than 1 value per channel, got input shape (1, 3)");
  MS_REQUIRE_THROWS_MSG(ms::batch_norm(random<float>({3}, 1), c3, c3, c3, c3, true), ms::ShapeError,
                        "[ms.shape_error] batch_norm: input must have at least 2 dims (N, C, ...), got shape (3,)");
}

TEST_CASE("layer_norm normalizes over the trailing dims", "[nn][norm]") {
  const Shape xs{2, 3, 4, 5};
  Tensor<double> x = random<double>(xs, 60), w = random<double>({4, 5}, 61), b = random<double>({4, 5}, 62);
  auto xv = values(x), wv = values(w), bv = values(b);
  const i64 R = 6, D = 20;
  std::vector<double> ref(xv.size()), ref_plain(xv.size());
  for (i64 r = 0; r < R; ++r) {
    double s = 0, ss = 0;
    for (i64 i = 0; i < D; ++i) s += xv[static_cast<std::size_t>(r * D + i)];
    const double m = s / D;
    for (i64 i = 0; i < D; ++i) ss += std::pow(xv[static_cast<std::size_t>(r * D + i)] - m, 2);
    const double rstd = 1 / std::sqrt(ss / D + 1e-5);
    for (i64 i = 0; i < D; ++i) {
      auto k = static_cast<std::size_t>(r * D + i);
      ref_plain[k] = (xv[k] - m) * rstd;
      ref[k] = ref_plain[k] * wv[static_cast<std::size_t>(i)] + bv[static_cast<std::size_t>(i)];
    }
  }
  require_values(ms::layer_norm(x, {4, 5}, w, b), ref, 1e-12, 1e-12);
  require_values(ms::layer_norm(x, {4, 5}), ref_plain, 1e-12, 1e-12);
  require_values(ms::layer_norm(ms::cast<float>(x), {4, 5}, ms::cast<float>(w), ms::cast<float>(b)), ref, 1e-5, 1e-5);
  // over the whole tensor: normalized_shape == x.shape
  Tensor<double> all = ms::layer_norm(x, xs.vec());
  CHECK(std::abs(ms::mean(all).item()) < 1e-12);
  MS_REQUIRE_THROWS_MSG(ms::layer_norm(x, {5, 4}), ms::ShapeError,
                        "[ms.shape_error] layer_norm: normalized_shape [5, 4] does not match the trailing dims of "
                        "input (2, 3, 4, 5)");
  MS_REQUIRE_THROWS_MSG(ms::layer_norm(x, {5}, random<double>({4}, 1)), ms::ShapeError,
                        "[ms.shape_error] layer_norm: weight shape (4,) does not match normalized_shape (5,)");
}

// ---- dropout -------------------------------------------------------------------------------------------------

TEST_CASE("dropout: masks, scaling, seeds, eval mode", "[nn][dropout]") {
  Tensor<float> x = random<float>({50, 40}, 70);
  auto [y1, m1] = ops::dropout_with_mask(x, 0.25, true, 123);
  auto [y2, m2] = ops::dropout_with_mask(x, 0.25, true, 123);
  auto [y3, m3] = ops::dropout_with_mask(x, 0.25, true, 124);
  CHECK(Tensor<float>(m1).to_vector() == Tensor<float>(m2).to_vector());  // same seed, same mask
  CHECK(Tensor<float>(y1).to_vector() == Tensor<float>(y2).to_vector());
  CHECK(Tensor<float>(m1).to_vector() != Tensor<float>(m3).to_vector());
  auto mv = Tensor<float>(m1).to_vector(), xv = x.to_vector(), yv = Tensor<float>(y1).to_vector();
  for (std::size_t i = 0; i < mv.size(); ++i) {
    REQUIRE((mv[i] == 0.0f || mv[i] == static_cast<float>(1 / 0.75)));
    REQUIRE(yv[i] == xv[i] * mv[i]);
  }
  // the same seed gives the same mask in float64
  auto [yd, md] = ops::dropout_with_mask(ms::cast<double>(x), 0.25, true, 123);
  auto mdv = Tensor<double>(md).to_vector();
  for (std::size_t i = 0; i < mv.size(); ++i) REQUIRE((mdv[i] == 0) == (mv[i] == 0));

  CHECK(ms::dropout(x, 0.0).to_vector() == xv);                 // p = 0: identity
  CHECK(ms::dropout(x, 0.7, false).to_vector() == xv);          // eval: identity
  CHECK(ms::dropout(x, 1.0).to_vector() == std::vector<float>(xv.size(), 0.0f));

  // the mask has mean ~1 (large n), so the expected output equals the input
  Tensor<double> big = ms::ones<double>({200000});
  auto [yb, mb] = ops::dropout_with_mask(big, 0.3, true, 7);
  CHECK(std::abs(ms::mean(Tensor<double>(mb)).item() - 1.0) < 0.01);

  // the default generator: reseeding reproduces the draw
  ms::manual_seed(99);
  Tensor<float> a = ms::dropout(x, 0.5);
  ms::manual_seed(99);
  Tensor<float> a2 = ms::dropout(x, 0.5);
  Tensor<float> a3 = ms::dropout(x, 0.5);
  CHECK(a.to_vector() == a2.to_vector());
  CHECK(a.to_vector() != a3.to_vector());
  CHECK(ops::dropout_op.is_random);
  MS_REQUIRE_THROWS_MSG(ms::dropout(x, 1.5), ms::ValueError, "[ms.value_error] dropout: p must be in [0, 1], got 1.5");
}

// ---- embedding ----------------------------------------------------------------------------------------------------

TEST_CASE("embedding picks rows, out-of-range indices are IndexErrors", "[nn][embedding]") {
  Tensor<float> w = random<float>({5, 3}, 80);
  Tensor<i64> idx{{4, 0, 4}, {2, 1, 3}};
  Tensor<float> y = ms::embedding(w, idx);
  require_shape(y, {2, 3, 3});
  auto wv = values(w);
  std::vector<double> ref;
  for (i64 i : idx.to_vector())
    for (i64 d = 0; d < 3; ++d) ref.push_back(wv[static_cast<std::size_t>(i * 3 + d)]);
  require_values(y, ref, 0, 0);
  Tensor<std::int32_t> idx32{1, 1};
  require_values(ms::embedding(w, idx32), {wv[3], wv[4], wv[5], wv[3], wv[4], wv[5]}, 0, 0);
  MS_REQUIRE_THROWS_MSG(ms::embedding(w, Tensor<i64>{1, 5}), ms::IndexError,
                        "[ms.index_error] embedding: index 5 is out of range for num_embeddings 5");
  MS_REQUIRE_THROWS_MSG(ms::embedding(w, Tensor<i64>{-1}), ms::IndexError,
                        "[ms.index_error] embedding: index -1 is out of range for num_embeddings 5");
  MS_REQUIRE_THROWS_MSG(ops::embedding(w, Tensor<float>{1}), ms::DTypeError,
                        "[ms.dtype_error] embedding: 'index' (input 1) must be an int64 or int32 tensor, got float32 (shape (1,))");
  MS_REQUIRE_THROWS_MSG(ms::embedding(random<float>({5}, 1), idx), ms::ShapeError,
                        "[ms.shape_error] embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape (5,)");
}

// ---- losses -------------------------------------------------------------------------------------------------------

namespace {
/// Per-row cross entropy with label smoothing, by hand.
std::vector<double> ref_ce_rows(const std::vector<double>& z, i64 N, i64 C, const std::vector<i64>& t, double eps) {
  std::vector<double> out;
  for (i64 i = 0; i < N; ++i) {
    double m = -1e300, s = 0, sum_logp = 0;
    for (i64 c = 0; c < C; ++c) m = std::max(m, z[static_cast<std::size_t>(i * C + c)]);
    for (i64 c = 0; c < C; ++c) s += std::exp(z[static_cast<std::size_t>(i * C + c)] - m);
    const double lse = m + std::log(s);
    for (i64 c = 0; c < C; ++c) sum_logp += z[static_cast<std::size_t>(i * C + c)] - lse;
    const double nll = lse - z[static_cast<std::size_t>(i * C + t[static_cast<std::size_t>(i)])];
    out.push_back((1 - eps) * nll - eps * sum_logp / static_cast<double>(C));
  }
  return out;
}
}  // namespace

TEST_CASE("cross_entropy matches log_softmax by hand (reductions, label smoothing, ignore_index)", "[nn][loss]") {
  const i64 N = 6, C = 5;
  Tensor<double> z = random<double>({N, C}, 90);
  Tensor<i64> t{0, 4, 2, 2, 1, 3};
  auto tv = t.to_vector();
  for (double eps : {0.0, 0.2}) {
    INFO("label_smoothing " << eps);
    auto rows = ref_ce_rows(values(z), N, C, tv, eps);
    const double sum = std::accumulate(rows.begin(), rows.end(), 0.0);
    require_values(ms::cross_entropy(z, t, "none", eps), rows, 1e-12, 1e-12);
    require_values(ms::cross_entropy(z, t, "sum", eps), {sum}, 1e-12, 1e-12);
    require_values(ms::cross_entropy(z, t, "mean", eps), {sum / N}, 1e-12, 1e-12);
    require_values(ms::cross_entropy(ms::cast<float>(z), t, "mean", eps), {sum / N}, 1e-6, 1e-6);
    // ignore_index: row 1 (target 4) drops out of the sum and the count
    Tensor<i64> ti{0, 4, 2, 2, 1, 3};
    require_values(ms::cross_entropy(z, ti, "mean", eps, 4), {(sum - rows[1]) / (N - 1)}, 1e-12, 1e-12);
    auto none = ms::cross_entropy(z, ti, "none", eps, 4).to_vector();
    CHECK(none[1] == 0.0);
  }
  // nll_loss(log_softmax(z)) is cross_entropy(z)
  require_values(ms::nll_loss(ms::log_softmax(z), t), values(ms::cross_entropy(z, t)), 1e-12, 1e-12);
  // all rows ignored: mean is NaN (like PyTorch), sum 0
  CHECK(std::isnan(ms::cross_entropy(z, ms::full<i64>({N}, -100)).item()));
  CHECK(ms::cross_entropy(z, ms::full<i64>({N}, -100), "sum").item() == 0.0);
}

TEST_CASE("cross_entropy with label smoothing equals the hand-computed value", "[nn][loss]") {
  // logits [1, 2, 3], target 0, smoothing 0.1: lse = log(e + e^2 + e^3) = 3.40760596444...
  // loss = 0.9 * (lse - 1) + 0.1 * ((lse - 1) + (lse - 2) + (lse - 3)) / 3 = lse - 0.9 - 0.2 = 2.30760596444...
  Tensor<double> z{{1, 2, 3}};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(std::abs(lse - 3.4076059644443806) < 1e-15);
  require_values(ms::cross_entropy(z, Tensor<i64>{0}, "mean", 0.1), {2.3076059644443806}, 1e-15, 1e-15);
  require_values(ms::cross_entropy(z, Tensor<i64>{2}, "mean", 0.1), {lse - 3 * 0.9 - 0.2}, 1e-15, 1e-15);
  // smoothing 1: the uniform target, the same for every class
  require_values(ms::cross_entropy(z, Tensor<i64>{1}, "mean", 1.0), {lse - 2}, 1e-15, 1e-15);
}

TEST_CASE("cross_entropy is numerically stable for large logits", "[nn][loss]") {
  Tensor<float> z{{1000, 0, -1000}, {-1e30f, 0, 1e30f}};
  auto l = ms::cross_entropy(z, Tensor<i64>{0, 1}, "none").to_vector();
  CHECK(l[0] == 0.0f);
  CHECK(l[1] == 1e30f);
  Tensor<double> zd{{1000, 1001}};
  require_values(ms::cross_entropy(zd, Tensor<i64>{0}), {std::log(1 + std::exp(1.0))}, 1e-14, 1e-14);
}

TEST_CASE("loss errors: targets, shapes, dtypes, reductions", "[nn][loss][errors]") {
  Tensor<float> z = random<float>({4, 3}, 1);
  MS_REQUIRE_THROWS_MSG(ms::cross_entropy(z, Tensor<i64>{0, 3, 1, 2}), ms::IndexError,
                        "[ms.index_error] cross_entropy: target 3 at position 1 is out of range for 3 classes");
  MS_REQUIRE_THROWS_MSG(ms::cross_entropy(z, Tensor<i64>{0, -1, 1, 2}), ms::IndexError,
                        "[ms.index_error] cross_entropy: target -1 at position 1 is out of range for 3 classes");
  MS_REQUIRE_THROWS_MSG(ms::cross_entropy(z, Tensor<i64>{0, 1, 2}), ms::ShapeError,
                        "[ms.shape_error] cross_entropy: target shape (3,) does not match logits of shape (4, 3)");
  MS_REQUIRE_THROWS_MSG(ops::cross_entropy(z, Tensor<std::int32_t>{0, 1, 2, 0}), ms::DTypeError,
                        "[ms.dtype_error] cross_entropy: target must be int64, got int32 (shape (4,))");
  MS_REQUIRE_THROWS_MSG(ops::cross_entropy(ms::zeros<i64>({4, 3}), Tensor<i64>{0, 1, 2, 0}), ms::DTypeError,
                        "[ms.dtype_error] cross_entropy: unsupported dtype int64 for 'logits' (input 0; supported: float32, float64)");
  MS_REQUIRE_THROWS_MSG(ms::cross_entropy(random<float>({3}, 1), Tensor<i64>{0}), ms::ShapeError,
                        "[ms.shape_error] cross_entropy: logits must be 2-D (N, C), got shape (3,)");
  MS_REQUIRE_THROWS_MSG(ms::cross_entropy(z, Tensor<i64>{0, 1, 2, 0}, "avg"), ms::ValueError,
                        "[ms.value_error] cross_entropy: reduction must be \"mean\", \"sum\" or \"none\", got \"avg\"");
  MS_REQUIRE_THROWS_MSG(ms::cross_entropy(z, Tensor<i64>{0, 1, 2, 0}, "mean", 1.5), ms::ValueError,
                        "[ms.value_error] cross_entropy: label_smoothing must be in [0, 1], got 1.5");
  MS_REQUIRE_THROWS_MSG(ms::nll_loss(z, Tensor<i64>{0, 1, 2, 7}), ms::IndexError,
                        "[ms.index_error] nll_loss: target 7 at position 3 is out of range for 3 classes");
  MS_REQUIRE_THROWS_MSG(ms::nll_loss(random<float>({4, 3, 2}, 1), Tensor<i64>{0, 1, 2, 0}), ms::ShapeError,
                        "[ms.shape_error] nll_loss: log_probs must be 2-D (N, C), got shape (4, 3, 2)");
  MS_REQUIRE_THROWS_MSG(ms::mse_loss(z, random<float>({3, 4}, 2)), ms::ShapeError,
                        "[ms.shape_error] mse_loss: shapes (4, 3) and (3, 4) differ");
  MS_REQUIRE_THROWS_MSG(ops::mse_loss(z, random<double>({4, 3}, 2)), ms::DTypeError,
                        "[ms.dtype_error] mse_loss: dtype mismatch float32 vs float64 (shapes (4, 3) and (4, 3)); "
                        "convert one side with ms::cast");
}

TEST_CASE("nll_loss and mse_loss match their definitions", "[nn][loss]") {
  Tensor<double> lp = random<double>({5, 4}, 100);
  Tensor<i64> t{3, 0, 1, 3, 2};
  auto lv = values(lp);
  std::vector<double> rows;
  for (i64 i = 0; i < 5; ++i) rows.push_back(-lv[static_cast<std::size_t>(i * 4 + t.to_vector()[static_cast<std::size_t>(i)])]);
  const double s = std::accumulate(rows.begin(), rows.end(), 0.0);
  require_values(ms::nll_loss(lp, t, "none"), rows, 0, 0);
  require_values(ms::nll_loss(lp, t, "sum"), {s}, 1e-14, 1e-14);
  require_values(ms::nll_loss(lp, t), {s / 5}, 1e-14, 1e-14);
  require_values(ms::nll_loss(lp, t, "mean", 3), {(s - rows[0] - rows[3]) / 3}, 1e-14, 1e-14);

  Tensor<double> a = random<double>({3, 4}, 101), b = random<double>({3, 4}, 102);
  auto av = values(a), bv = values(b);
  std::vector<double> sq;
  for (std::size_t i = 0; i < av.size(); ++i) sq.push_back((av[i] - bv[i]) * (av[i] - bv[i]));
  const double ss = std::accumulate(sq.begin(), sq.end(), 0.0);
  require_values(ms::mse_loss(a, b, "none"), sq, 1e-14, 1e-14);
  require_values(ms::mse_loss(a, b, "sum"), {ss}, 1e-14, 1e-14);
  require_values(ms::mse_loss(a, b), {ss / 12}, 1e-14, 1e-14);
  require_values(ms::mse_loss(ms::cast<float>(a), ms::cast<float>(b)), {ss / 12}, 1e-6, 1e-6);
}

// ---- the registry ---------------------------------------------------------------------------------------------------

TEST_CASE("nn ops are registered once, documented, with costs and gradient rows", "[nn][registry]") {
  for (const char* name : {"conv2d", "conv2d_grad_input", "conv2d_grad_weight", "max_pool2d", "max_pool2d_grad",
                           "avg_pool2d", "avg_pool2d_grad", "adaptive_avg_pool2d", "adaptive_avg_pool2d_grad",
                           "batch_norm", "batch_norm_grad", "layer_norm", "layer_norm_grad", "dropout", "embedding",
                           "cross_entropy", "cross_entropy_grad", "nll_loss", "nll_loss_grad", "mse_loss"}) {
    INFO(name);
    const ops::OpDef& op = ops::registry().get(name);
    CHECK(op.category == ops::Category::nn);
    CHECK_FALSE(op.doc.empty());
    CHECK(op.cpu_dtypes.contains(ms::DType::f32));
    CHECK(op.cpu_dtypes.contains(ms::DType::f64));
    CHECK_FALSE(op.cpu_dtypes.contains(ms::DType::i32));
    CHECK(op.cost != nullptr);
    CHECK((op.differentiable() || !op.nondiff_reason.empty()));
  }
  CHECK(ops::batch_norm_grad_op.nondiff_reason == "second-order gradient not implemented");
  // conv2d cost: 2 * N * O * Ho * Wo * (C / groups) * kH * kW flops, plus the bias
  ops::TensorMeta x{ms::DType::f32, {2, 4, 8, 8}}, w{ms::DType::f32, {6, 2, 3, 3}}, y{ms::DType::f32, {2, 6, 8, 8}};
  ops::TensorMeta in[2] = {x, w};
  ops::Attrs a{{"stride", ops::IntList{1, 1}}, {"padding", ops::IntList{1, 1}}, {"dilation", ops::IntList{1, 1}},
               {"groups", std::int64_t{2}}};
  ops::Cost c = ops::op_cost(ops::conv2d_op, in, std::span<const ops::TensorMeta>(&y, 1), a);
  CHECK(c.flops == 2.0 * 2 * 6 * 64 * 2 * 9);
  CHECK(c.bytes == 4.0 * (2 * 4 * 64 + 6 * 2 * 9 + 2 * 6 * 64));
}
