// interpolate and interpolate_grad (ops/nn/resize.hpp): hand-computed small cases (the
// values torch.nn.functional.interpolate gives for them), a per-pixel reference in double
// for larger shapes, gradients against central differences, the gradient as the adjoint,
// a captured run against eager, the exact error messages.

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <ms/ops/nn/resize.hpp>

#include "../test_util.hpp"

MS_TEST_COVERS("interpolate", "interpolate_grad");

namespace interpolate_test {

using ms::AnyTensor;
using ms::Int2;
using ms::Scale2;
using ms::Shape;
using ms::Tensor;
using ms_test::random;
using ms_test::require_values;
using ms_test::values;
namespace ops = ms::ops;
using i64 = std::int64_t;

/// Bilinear resizing, one output pixel at a time, in double: source coordinate
/// (dst + 0.5) * in / out - 0.5 clamped at 0 (align_corners: dst * (in - 1) / (out - 1)),
/// then the two neighbours along each axis weighted by distance.
std::vector<double> ref_bilinear(const std::vector<double>& x, const Shape& xs, i64 Ho, i64 Wo, bool align) {
  const i64 P = xs[0] * xs[1], H = xs[2], W = xs[3];
  auto src = [&](i64 i, i64 in, i64 out) {
    const double di = static_cast<double>(i);
    if (align) return out > 1 ? di * static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
    return std::max((di + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5, 0.0);
  };
  std::vector<double> y;
  for (i64 p = 0; p < P; ++p)
    for (i64 i = 0; i < Ho; ++i)
      for (i64 j = 0; j < Wo; ++j) {
        const double sh = src(i, H, Ho), sw = src(j, W, Wo);
        const i64 h0 = std::min(static_cast<i64>(sh), H - 1), w0 = std::min(static_cast<i64>(sw), W - 1);
        const i64 h1 = std::min(h0 + 1, H - 1), w1 = std::min(w0 + 1, W - 1);
        const double th = std::clamp(sh - static_cast<double>(h0), 0.0, 1.0);
        const double tw = std::clamp(sw - static_cast<double>(w0), 0.0, 1.0);
        auto at = [&](i64 h, i64 w) { return x[static_cast<std::size_t>((p * H + h) * W + w)]; };
        const double top = (1 - tw) * at(h0, w0) + tw * at(h0, w1), bottom = (1 - tw) * at(h1, w0) + tw * at(h1, w1);
        y.push_back((1 - th) * top + th * bottom);
      }
  return y;
}

/// The rows (or columns) that nearest resizing reads, spelled out: out[i] = in[rows[i]].
std::vector<double> pick(const std::vector<double>& x, i64 H, i64 W, const std::vector<i64>& rows,
                         const std::vector<i64>& cols) {
  std::vector<double> y;
  for (i64 r : rows)
    for (i64 c : cols) y.push_back(x[static_cast<std::size_t>(r * W + c)]);
  (void)H;
  return y;
}

void check_grads(const std::function<AnyTensor(const AnyTensor&)>& fn, Tensor<double> x) {
  ms_test::check_gradients(fn, x, {.rtol = 1e-6, .seed = 99});
}

/// The float input (1, 2, 3, 3) of the error rows.
Tensor<float> x233() { return random<float>({1, 2, 3, 3}, 1); }



TEST_CASE("interpolate nearest: hand-computed cases (floor of dst * in / out)", "[nn][interpolate]") {
  Tensor<double> x = ms_test::iota<double>({1, 1, 2, 2}, 1);  // [[1, 2], [3, 4]]
  // doubling repeats every pixel 2 x 2
  require_values(ms::interpolate(x, Int2(4)), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 0, 0);
  require_values(ms::interpolate(x, std::nullopt, 2.0), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 0, 0);
  // 2 -> 3 columns: sources floor(0), floor(2/3), floor(4/3) = 0, 0, 1; 2 -> 1 row: row 0
  require_values(ms::interpolate(x, Int2{1, 3}), {1, 1, 2}, 0, 0);
  // 4 x 4 -> 2 x 3: rows 0, 2; columns floor(0), floor(4/3), floor(8/3) = 0, 1, 2
  Tensor<double> g = ms_test::iota<double>({1, 1, 4, 4});
  require_values(ms::interpolate(g, Int2{2, 3}), {0, 1, 2, 8, 9, 10}, 0, 0);
  // a scale factor maps with 1 / scale, not with the sizes' ratio: 5 rows by 1.7 give 8, read from
  // rows floor(i / 1.7) = 0 0 1 1 2 2 3 4; recomputed from the sizes, floor(i * 5 / 8) = 0 0 1 1 2 3 3 4
  Tensor<double> c = ms_test::iota<double>({1, 1, 5, 1});
  require_values(ms::interpolate(c, std::nullopt, Scale2{1.7, 1.0}), {0, 0, 1, 1, 2, 2, 3, 4}, 0, 0);
  require_values(ms::interpolate(c, std::nullopt, Scale2{1.7, 1.0}, "nearest", std::nullopt, true),
                 {0, 0, 1, 1, 2, 3, 3, 4}, 0, 0);
  // every plane of a batch alike, float too
  Tensor<float> b = ms_test::iota<float>({2, 3, 3, 4});
  Tensor<float> yb = ms::interpolate(b, Int2{5, 2});
  REQUIRE(yb.shape() == Shape{2, 3, 5, 2});
  const auto bv = values(b);
  std::vector<double> want;
  for (i64 p = 0; p < 6; ++p) {
    const std::vector<double> plane(bv.begin() + p * 12, bv.begin() + (p + 1) * 12);
    auto v = pick(plane, 3, 4, {0, 0, 1, 1, 2}, {0, 2});  // rows floor(i * 3 / 5), columns floor(j * 2)
    want.insert(want.end(), v.begin(), v.end());
  }
  require_values(yb, want, 0, 0);
}

TEST_CASE("interpolate bilinear: hand-computed cases and a per-pixel reference", "[nn][interpolate]") {
  Tensor<double> x = ms_test::iota<double>({1, 1, 2, 2}, 1);  // [[1, 2], [3, 4]]
  // torch.nn.functional.interpolate(x, size=4, mode='bilinear', align_corners=False)
  require_values(ms::interpolate(x, Int2(4), std::nullopt, "bilinear"),
                 {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0}, 1e-15,
                 1e-15);
  // align_corners=True: the corners stay, the middle is the mean
  require_values(ms::interpolate(x, Int2(3), std::nullopt, "bilinear", true), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4},
                 1e-15, 1e-15);
  // halving averages 2 x 2 blocks (source coordinates 0.5 and 2.5)
  Tensor<double> g = ms_test::iota<double>({1, 1, 4, 4});
  require_values(ms::interpolate(g, Int2(2), std::nullopt, "bilinear"), {2.5, 4.5, 10.5, 12.5}, 1e-15, 1e-15);
  require_values(ms::interpolate(ms::cast<float>(g), std::nullopt, 0.5, "bilinear"), {2.5, 4.5, 10.5, 12.5}, 1e-6,
                 1e-6);
  // a scale that leaves a size unchanged (3 * 1.2 -> 3) is the identity, as in torch
  Tensor<double> i3 = ms_test::iota<double>({1, 1, 3, 3});
  require_values(ms::interpolate(i3, std::nullopt, 1.2, "bilinear"), values(i3), 0, 0);
  require_values(ms::interpolate(i3, std::nullopt, 1.2), values(i3), 0, 0);
  // larger shapes, up and down, against the per-pixel reference
  struct Case {
    Shape x;
    Int2 size;
  };
  for (const Case& c : {Case{{2, 3, 5, 7}, {9, 4}}, Case{{1, 2, 6, 6}, {13, 17}}, Case{{1, 1, 7, 3}, {1, 5}},
                        Case{{2, 1, 1, 4}, {3, 8}}}) {
    for (bool align : {false, true}) {
      INFO("input " << ms::shape_str(c.x) << " to (" << c.size.h << ", " << c.size.w << "), align_corners " << align);
      Tensor<double> xv = random<double>(c.x, 5);
      const auto ref = ref_bilinear(values(xv), c.x, c.size.h, c.size.w, align);
      require_values(ms::interpolate(xv, c.size, std::nullopt, "bilinear", align), ref, 1e-12, 1e-12);
      require_values(ms::interpolate(ms::cast<float>(xv), c.size, std::nullopt, "bilinear", align), ref, 1e-5, 1e-5);
    }
  }
  // non-contiguous input
  Tensor<double> xt = random<double>({1, 2, 4, 3}, 6);
  Tensor<double> xn = xt.transpose(2, 3);
  REQUIRE_FALSE(xn.is_contiguous());
  require_values(ms::interpolate(xn, Int2{5, 6}, std::nullopt, "bilinear"),
                 ref_bilinear(values(xn), xn.shape(), 5, 6, false), 1e-12, 1e-12);
}

TEST_CASE("interpolate gradients match finite differences, and interpolate_grad is the adjoint",
          "[nn][grad][interpolate]") {
  check_grads([](const AnyTensor& x) { return ops::interpolate(x, Int2{5, 7}, std::nullopt, "bilinear"); },
              random<double>({2, 2, 3, 4}, 1));
  check_grads([](const AnyTensor& x) { return ops::interpolate(x, Int2{2, 3}, std::nullopt, "bilinear", true); },
              random<double>({1, 2, 5, 4}, 2));
  check_grads([](const AnyTensor& x) { return ops::interpolate(x, std::nullopt, Scale2{1.5, 0.75}, "bilinear"); },
              random<double>({1, 1, 4, 5}, 3));
  check_grads([](const AnyTensor& x) { return ops::interpolate(x, Int2{7, 3}); }, random<double>({2, 1, 3, 5}, 4));
  check_grads([](const AnyTensor& x) { return ops::interpolate(x, std::nullopt, 2.0); },
              random<double>({1, 2, 2, 3}, 5));
  // interpolate_grad's own gradient (it is linear: interpolate itself)
  ops::Attrs a{{"size", ops::IntList{5, 6}}, {"mode", std::string("bilinear")},
               {"input_shape", ops::IntList{1, 2, 3, 4}}};
  check_grads([&](const AnyTensor& g) { return ops::call1(ops::interpolate_grad_op, {g}, a); },
              random<double>({1, 2, 5, 6}, 6));
  // <interpolate(x), g> = <x, interpolate_grad(g)>
  for (const char* mode : {"nearest", "bilinear"}) {
    INFO(mode);
    Tensor<double> x = random<double>({2, 3, 4, 5}, 7), g = random<double>({2, 3, 7, 3}, 8);
    ops::Attrs at{{"size", ops::IntList{7, 3}}, {"mode", std::string(mode)}, {"input_shape", ops::IntList{2, 3, 4, 5}}};
    const double lhs = ms::sum(ms::interpolate(x, Int2{7, 3}, std::nullopt, mode) * g).item();
    const double rhs = ms::sum(x * Tensor<double>(ops::call1(ops::interpolate_grad_op, {g}, at))).item();
    CHECK(std::abs(lhs - rhs) < 1e-12);
  }
}

TEST_CASE("interpolate replays in a captured graph, forward and backward", "[nn][graph][interpolate]") {
  Tensor<double> w = random<double>({1, 3, 1, 1}, 1);
  w.requires_grad_();
  auto net = [&](const AnyTensor& x) {
    AnyTensor h = ops::interpolate(ops::mul(x, w), Int2{7, 9}, std::nullopt, "bilinear");
    return ops::interpolate(h, std::nullopt, 2.0);
  };
  Tensor<double> x1 = random<double>({2, 3, 4, 5}, 2), x2 = random<double>({2, 3, 4, 5}, 3);
  {
    ms::graph::Capture cap;
    cap.input(x1);
    cap.output(net(x1));
    auto ex = ms::backend::compile(cap.finish());
    CHECK(ex.graph().count("interpolate") == 2);
    CHECK(ms_test::same_bits(ex.run({x2})[0], net(x2)));
  }
  ms::graph::Capture cap;
  cap.input(x1);
  cap.output(ms::autograd::grad(ops::sum(ops::square(net(x1))), {w})[0]);
  auto ex = ms::backend::compile(cap.finish());
  CHECK(ex.graph().count("interpolate_grad") == 2);
  const AnyTensor eager = ms::autograd::grad(ops::sum(ops::square(net(x2))), {w})[0];
  require_values(Tensor<double>(ex.run({x2})[0]), values(Tensor<double>(eager)), 1e-12, 1e-12);
}

TEST_CASE("interpolate: errors name the op, shapes and values", "[nn][interpolate][errors]") {
  const std::vector<ms_test::ErrorRow> rows = {
      MS_ERROR_ROW("neither", ms::interpolate(x233(), std::nullopt), ms::ValueError,
                   "[ms.value_error] interpolate: give exactly one of size and scale_factor (got neither)"),
      MS_ERROR_ROW("both", ms::interpolate(x233(), Int2(4), 2.0), ms::ValueError,
                   "[ms.value_error] interpolate: give exactly one of size and scale_factor (got both)"),
      MS_ERROR_ROW("mode", ms::interpolate(x233(), Int2(4), std::nullopt, "bicubic"), ms::ValueError,
                   "[ms.value_error] interpolate: mode must be \"nearest\" or \"bilinear\", got \"bicubic\""),
      MS_ERROR_ROW("align_corners", ms::interpolate(x233(), Int2(4), std::nullopt, "nearest", false), ms::ValueError,
                   "[ms.value_error] interpolate: align_corners can only be set with mode \"bilinear\" (mode is "
                   "\"nearest\")"),
      MS_ERROR_ROW("rank", ms::interpolate(random<float>({2, 3, 3}, 1), Int2(4)), ms::ShapeError,
                   "[ms.shape_error] interpolate: input must be 4-D (N, C, H, W), got shape (2, 3, 3)"),
      MS_ERROR_ROW("empty output", ms::interpolate(x233(), std::nullopt, 0.2), ms::ShapeError,
                   "[ms.shape_error] interpolate: input and output sizes must be positive, got input (1, 2, 3, 3) "
                   "and output size (0, 0)"),
      MS_ERROR_ROW("scale", ms::interpolate(x233(), std::nullopt, Scale2{-1.0, 2.0}), ms::ValueError,
                   "[ms.value_error] interpolate: scale_factor must be positive, got (-1, 2)"),
      MS_ERROR_ROW("integers", ms::ops::interpolate(ms::zeros<std::int32_t>({1, 1, 2, 2}), Int2(4)), ms::DTypeError,
                   "[ms.dtype_error] interpolate: unsupported dtype int32 for 'input' (input 0; supported: float32, "
                   "float64)"),
      MS_ERROR_ROW("gradient shape",
                   ms::ops::call1(ms::ops::interpolate_grad_op, {random<float>({1, 2, 4, 4}, 2)},
                                  ms::ops::Attrs{{"size", ms::ops::IntList{5, 5}},
                                                 {"input_shape", ms::ops::IntList{1, 2, 3, 3}}}),
                   ms::ShapeError,
                   "[ms.shape_error] interpolate_grad: gradient shape (1, 2, 4, 4) does not match the interpolate "
                   "output shape (1, 2, 5, 5)"),
  };
  for (const auto& r : rows) {
    INFO(r.what);
    r.check();
  }
}

}  // namespace interpolate_test
