// conv_transpose2d (ops/nn/conv_transpose.hpp): values against a direct scatter loop in
// double (every input element times the kernel, added at its strided, dilated place), on
// every convolution path the build has; gradients against central differences; a captured
// forward and training step against eager; the exact error messages.

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <ms/ops/nn/conv_transpose.hpp>

#include "../test_util.hpp"

MS_TEST_COVERS("conv_transpose2d");

namespace conv_transpose_test {

using ms::AnyTensor;
using ms::Int2;
using ms::Shape;
using ms::Tensor;
using ms_test::random;
using ms_test::require_values;
using ms_test::values;
namespace ops = ms::ops;
using i64 = std::int64_t;

struct Case {
  Shape x, w;
  Int2 stride, padding, output_padding;
  i64 groups;
  Int2 dilation;
  bool bias;
};

/// y[n, g*Cog + co, i*s - p + ki*d, j*s - p + kj*d] += x[n, g*Cig + ci, i, j] * w[g*Cig + ci, co, ki, kj].
std::vector<double> ref_conv_transpose(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                                       const Shape& ws, const std::vector<double>* b, const Case& c, Shape& os) {
  const i64 N = xs[0], Ci = xs[1], H = xs[2], W = xs[3], Cog = ws[1], kh = ws[2], kw = ws[3], G = c.groups;
  const i64 Cig = Ci / G, Co = Cog * G;
  const Int2 s = c.stride, p = c.padding, d = c.dilation, op = c.output_padding;
  const i64 Ho = (H - 1) * s.h - 2 * p.h + d.h * (kh - 1) + op.h + 1;
  const i64 Wo = (W - 1) * s.w - 2 * p.w + d.w * (kw - 1) + op.w + 1;
  os = Shape{N, Co, Ho, Wo};
  std::vector<double> y(static_cast<std::size_t>(N * Co * Ho * Wo), 0.0);
  for (i64 n = 0; n < N; ++n)
    for (i64 o = 0; o < Co; ++o)
      for (i64 k = 0; k < Ho * Wo; ++k)
        y[static_cast<std::size_t>((n * Co + o) * Ho * Wo + k)] = b ? (*b)[static_cast<std::size_t>(o)] : 0.0;
  for (i64 n = 0; n < N; ++n)
    for (i64 g = 0; g < G; ++g)
      for (i64 ci = 0; ci < Cig; ++ci)
        for (i64 i = 0; i < H; ++i)
          for (i64 j = 0; j < W; ++j) {
            const double xv = x[static_cast<std::size_t>(((n * Ci + g * Cig + ci) * H + i) * W + j)];
            for (i64 co = 0; co < Cog; ++co)
              for (i64 ki = 0; ki < kh; ++ki)
                for (i64 kj = 0; kj < kw; ++kj) {
                  const i64 oh = i * s.h - p.h + ki * d.h, ow = j * s.w - p.w + kj * d.w;
                  if (oh < 0 || oh >= Ho || ow < 0 || ow >= Wo) continue;
                  y[static_cast<std::size_t>(((n * Co + g * Cog + co) * Ho + oh) * Wo + ow)] +=
                      xv * w[static_cast<std::size_t>((((g * Cig + ci) * Cog + co) * kh + ki) * kw + kj)];
                }
          }
  return y;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> v = {
      {{1, 2, 3, 3}, {2, 3, 3, 3}, 1, 0, 0, 1, 1, true},                  // plain
      {{2, 3, 4, 5}, {3, 2, 3, 3}, 2, 1, 1, 1, 1, true},                  // stride 2, padding, output_padding
      {{1, 2, 5, 4}, {2, 3, 3, 3}, 1, 2, 0, 1, 2, false},                 // dilation 2
      {{2, 4, 3, 3}, {4, 3, 3, 3}, 2, 0, 0, 2, 1, true},                  // groups 2
      {{3, 2, 4, 6}, {2, 2, 2, 3}, {1, 2}, {0, 1}, {0, 1}, 1, 1, true},   // non-square, batch 3
      {{2, 3, 4, 4}, {3, 1, 4, 4}, 2, 1, 0, 3, 1, true},                  // depthwise upsampling (4 x 4, s 2, p 1)
      {{1, 2, 3, 4}, {2, 2, 3, 2}, 1, 1, {1, 1}, 1, {2, 3}, true},        // output_padding past the stride
      {{2, 3, 5, 5}, {3, 4, 1, 1}, 3, 0, 2, 1, 1, false},                 // 1 x 1 kernel, stride 3: gaps of zeros
      {{1, 1, 1, 1}, {1, 2, 2, 2}, 1, 0, 0, 1, 1, true},                  // a single pixel
  };
  return v;
}

template <class T>
void check_case(const Case& c, unsigned seed, double tol) {
  Tensor<T> x = random<T>(c.x, seed), w = random<T>(c.w, seed + 1), b = random<T>(Shape{c.w[1] * c.groups}, seed + 2);
  Tensor<T> y = ms::conv_transpose2d(x, w, c.bias ? b : Tensor<T>(), c.stride, c.padding, c.output_padding, c.groups,
                                     c.dilation);
  const auto bv = values(b);
  Shape os;
  const auto ref = ref_conv_transpose(values(x), c.x, values(w), c.w, c.bias ? &bv : nullptr, c, os);
  REQUIRE(y.shape() == os);
  require_values(y, ref, tol, tol);
}

using PathGuard = ms_test::CpuPathGuard;

/// Compares the gradients of sum(fn(inputs) * R) with central differences (float64).
void check_grads(const ms_test::GradFnOfInputs& fn, std::vector<AnyTensor> in) {
  ms_test::check_gradients(fn, std::move(in), {.seed = 777});
}

/// The float input (1, 4, 3, 3) of the error rows.
Tensor<float> x433() { return random<float>({1, 4, 3, 3}, 1); }



TEST_CASE("conv_transpose2d matches a direct scatter loop on every convolution path", "[nn][conv_transpose2d]") {
  PathGuard guard;
  std::vector<std::pair<ms::CpuGemm, ms::CpuConv>> paths;
  for (ms::CpuGemm g : {ms::CpuGemm::dnnl, ms::CpuGemm::blas, ms::CpuGemm::builtin})
    if (ms::cpu_gemm_available(g)) paths.push_back({g, ms::CpuConv::im2col});
  if (ms::cpu_gemm_available(ms::CpuGemm::dnnl)) paths.push_back({ms::CpuGemm::dnnl, ms::CpuConv::dnnl});
  REQUIRE_FALSE(paths.empty());
  for (auto [g, conv] : paths) {
    ms::set_cpu_gemm(g);
    ms::set_cpu_conv(conv);
    for (std::size_t i = 0; i < cases().size(); ++i) {
      INFO("case " << i << ", convolution path " << (conv == ms::CpuConv::dnnl ? "dnnl" : "im2col"));
      check_case<double>(cases()[i], 30 + static_cast<unsigned>(i), 1e-12);
      check_case<float>(cases()[i], 30 + static_cast<unsigned>(i), 2e-5);
    }
  }
}

TEST_CASE("conv_transpose2d: hand-computed values, and the adjoint of conv2d", "[nn][conv_transpose2d]") {
  // 1 x 1 x 2 x 2 input, 2 x 2 kernel of ones, stride 2: every input pixel becomes a 2 x 2 block.
  Tensor<double> x = ms_test::iota<double>({1, 1, 2, 2}, 1);  // [[1, 2], [3, 4]]
  Tensor<double> ones = ms::ones<double>({1, 1, 2, 2});
  require_values(ms::conv_transpose2d(x, ones, Tensor<double>(), 2),
                 {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 0, 0);
  // stride 1: overlapping blocks add up; a bias of 0.5 is added everywhere; padding 1 keeps the center.
  require_values(ms::conv_transpose2d(x, ones, Tensor<double>{0.5}), {1.5, 3.5, 2.5, 4.5, 10.5, 6.5, 3.5, 7.5, 4.5},
                 0, 0);
  require_values(ms::conv_transpose2d(x, ms::ones<double>({1, 1, 3, 3}), Tensor<double>(), 1, 1),
                 {10, 10, 10, 10}, 0, 0);
  // output_padding adds a row and a column at the end that no window reaches (with padding 0).
  Tensor<double> yp = ms::conv_transpose2d(x, ones, Tensor<double>(), 2, 0, 1);
  REQUIRE(yp.shape() == Shape{1, 1, 5, 5});
  CHECK(ms::sum(yp).item() == 40.0);
  // <conv2d(u, w), v> = <u, conv_transpose2d(v, w)>: the transposed convolution is the adjoint.
  Tensor<double> u = random<double>({2, 4, 7, 6}, 1), w = random<double>({6, 2, 3, 3}, 2);
  Tensor<double> cu = ms::conv2d(u, w, Tensor<double>(), 2, 1, 1, 2);
  Tensor<double> v = random<double>(cu.shape(), 3);
  Tensor<double> tv = ms::conv_transpose2d(v, w, Tensor<double>(), 2, 1, {0, 1}, 2);
  REQUIRE(tv.shape() == u.shape());
  CHECK(std::abs(ms::sum(cu * v).item() - ms::sum(u * tv).item()) < 1e-12);
}

TEST_CASE("conv_transpose2d: non-contiguous operands and a strided bias", "[nn][conv_transpose2d]") {
  Tensor<double> xt = random<double>({2, 3, 5, 4}, 5), wt = random<double>({3, 2, 2, 3}, 6);
  Tensor<double> x = xt.transpose(2, 3), w = wt.transpose(2, 3);  // (2, 3, 4, 5), (3, 2, 3, 2)
  REQUIRE_FALSE(x.is_contiguous());
  Tensor<double> b = random<double>({4}, 7).slice(0, 0, 4, 2);
  const Case c{x.shape(), w.shape(), {2, 1}, {1, 0}, {1, 0}, 1, 1, true};
  Tensor<double> y = ms::conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding);
  const auto bv = values(b);
  Shape os;
  const auto ref = ref_conv_transpose(values(x), x.shape(), values(w), w.shape(), &bv, c, os);
  REQUIRE(y.shape() == os);
  require_values(y, ref, 1e-12, 1e-12);
}

TEST_CASE("conv_transpose2d gradients w.r.t. input, weight and bias match finite differences",
          "[nn][grad][conv_transpose2d]") {
  for (std::size_t i = 0; i < cases().size(); ++i) {
    const Case& c = cases()[i];
    INFO("case " << i);
    auto f = [&](const std::vector<AnyTensor>& in) {
      return ops::conv_transpose2d(in[0], in[1], in.size() > 2 ? in[2] : AnyTensor(), c.stride, c.padding,
                                   c.output_padding, c.groups, c.dilation);
    };
    check_grads(f, {random(c.x, 40 + static_cast<unsigned>(i)), random(c.w, 41), random(Shape{c.w[1] * c.groups}, 42)});
    check_grads(f, {random(c.x, 43), random(c.w, 44)});
  }
}

TEST_CASE("conv_transpose2d replays in a captured graph, forward and backward", "[nn][graph][conv_transpose2d]") {
  Tensor<double> w = random<double>({4, 1, 4, 4}, 1), b = random<double>({2}, 2);
  w.requires_grad_();
  b.requires_grad_();
  auto net = [&](const AnyTensor& x) {
    return ops::relu(ops::conv_transpose2d(x, w, b, 2, 1, 0, 2));
  };
  Tensor<double> x1 = random<double>({2, 4, 4, 5}, 3), x2 = random<double>({2, 4, 4, 5}, 4);
  {
    ms::graph::Capture cap;
    cap.input(x1);
    cap.output(net(x1));
    auto ex = ms::backend::compile(cap.finish());
    CHECK(ex.graph().count("conv_transpose2d") == 1);
    CHECK(ms_test::same_bits(ex.run({x2})[0], net(x2)));
  }
  auto step = [&](const AnyTensor& x) {
    return ms::autograd::grad(ops::sum(ops::mul(net(x), net(x))), {w, b});
  };
  ms::graph::Capture cap;
  cap.input(x1);
  for (auto& g : step(x1)) cap.output(g);
  auto ex = ms::backend::compile(cap.finish());
  CHECK(ex.graph().count("conv2d_grad_weight") >= 1);
  const auto eager = step(x2), replay = ex.run({x2});
  REQUIRE(eager.size() == replay.size());
  for (std::size_t i = 0; i < eager.size(); ++i)
    require_values(Tensor<double>(replay[i]), values(Tensor<double>(eager[i])), 1e-12, 1e-12);
}

TEST_CASE("conv_transpose2d: registry entry and cost", "[nn][registry][conv_transpose2d]") {
  const ops::OpDef& op = ops::registry().get("conv_transpose2d");
  CHECK(op.category == ops::Category::nn);
  CHECK(op.differentiable());
  CHECK(op.cpu_dtypes.contains(ms::DType::f32));
  CHECK_FALSE(op.cpu_dtypes.contains(ms::DType::i64));
  // 2 * N * Cin * H * W * (Cout / groups) * kH * kW flops, plus the bias
  ops::TensorMeta x{ms::DType::f32, {2, 4, 5, 5}}, w{ms::DType::f32, {4, 3, 3, 3}}, b{ms::DType::f32, {6}};
  ops::TensorMeta y{ms::DType::f32, {2, 6, 11, 11}};
  ops::TensorMeta in[3] = {x, w, b};
  ops::Attrs a{{"stride", ops::IntList{2, 2}}, {"padding", ops::IntList{0, 0}}, {"dilation", ops::IntList{1, 1}},
               {"groups", i64{2}}, {"output_padding", ops::IntList{0, 0}}};
  const ops::Cost c = ops::op_cost(op, in, std::span<const ops::TensorMeta>(&y, 1), a);
  CHECK(c.flops == 2.0 * 2 * 4 * 25 * 3 * 9 + 2 * 6 * 121);
}

TEST_CASE("conv_transpose2d: errors name the op, shapes and dtypes", "[nn][conv_transpose2d][errors]") {
  const std::vector<ms_test::ErrorRow> rows = {
      MS_ERROR_ROW("in_channels", ms::conv_transpose2d(x433(), random<float>({3, 2, 3, 3}, 2)), ms::ShapeError,
                   "[ms.shape_error] conv_transpose2d: weight (3, 2, 3, 3) expects 3 input channels, but input "
                   "(1, 4, 3, 3) has 4"),
      MS_ERROR_ROW("groups", ms::conv_transpose2d(x433(), random<float>({4, 2, 3, 3}, 2), Tensor<float>(), 1, 0, 0, 3),
                   ms::ValueError,
                   "[ms.value_error] conv_transpose2d: groups 3 must divide in_channels 4 of input (1, 4, 3, 3)"),
      MS_ERROR_ROW("output_padding",
                   ms::conv_transpose2d(x433(), random<float>({4, 2, 3, 3}, 2), Tensor<float>(), 2, 0, 2),
                   ms::ValueError,
                   "[ms.value_error] conv_transpose2d: output_padding (2, 2) must be non-negative and smaller than "
                   "either stride (2, 2) or dilation (1, 1)"),
      MS_ERROR_ROW("bias",
                   ms::conv_transpose2d(x433(), random<float>({4, 1, 3, 3}, 2), random<float>({1}, 3), 1, 0, 0, 2),
                   ms::ShapeError,
                   "[ms.shape_error] conv_transpose2d: bias shape (1,) does not match out_channels 2 of weight "
                   "(4, 1, 3, 3) in 2 group(s)"),
      MS_ERROR_ROW("rank", ms::conv_transpose2d(random<float>({4, 3, 3}, 1), random<float>({4, 2, 3, 3}, 2)),
                   ms::ShapeError,
                   "[ms.shape_error] conv_transpose2d: input must be 4-D (N, C, H, W), got shape (4, 3, 3)"),
      MS_ERROR_ROW("size", ms::conv_transpose2d(x433(), random<float>({4, 2, 1, 1}, 2), Tensor<float>(), 1, 2),
                   ms::ShapeError,
                   "[ms.shape_error] conv_transpose2d: the output size (-1, -1) of input (1, 4, 3, 3) with weight "
                   "(4, 2, 1, 1) is not positive (padding (2, 2) is too large)"),
      MS_ERROR_ROW("stride", ms::conv_transpose2d(x433(), random<float>({4, 2, 3, 3}, 2), Tensor<float>(), 0),
                   ms::ValueError, "[ms.value_error] conv_transpose2d: stride must be positive, got (0, 0)"),
      MS_ERROR_ROW("dtype", ops::conv_transpose2d(x433(), random<double>({4, 2, 3, 3}, 2)), ms::DTypeError,
                   "[ms.dtype_error] conv_transpose2d: dtype mismatch float32 vs float64 (shapes (1, 4, 3, 3) and "
                   "(4, 2, 3, 3)); convert one side with ms::cast"),
      MS_ERROR_ROW("integers", ops::conv_transpose2d(ms::zeros<std::int32_t>({1, 4, 3, 3}),
                                                         ms::zeros<std::int32_t>({4, 2, 3, 3})),
                   ms::DTypeError,
                   "[ms.dtype_error] conv_transpose2d: unsupported dtype int32 for 'input' (input 0; supported: "
                   "float32, float64)"),
  };
  for (const auto& r : rows) {
    INFO(r.what);
    r.check();
  }
}

}  // namespace conv_transpose_test
