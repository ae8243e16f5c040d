#pragma once
// conv_transpose2d: the transposed 2-D convolution (PyTorch's ConvTranspose2d, ONNX's
// ConvTranspose) as one registered op: its API, inference, CPU kernel, gradient rule and
// cost. The kernel is the adjoint of conv2d (GEMM + col2im, or oneDNN's backward-data
// convolution; ops/nn.hpp), so a transposed convolution and conv2d's input gradient are
// the same code. Must not hold other nn ops.

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "../movement.hpp"
#include "../pad.hpp"
#include "../reduce.hpp"
#include "common.hpp"
#include "conv.hpp"

namespace ms::ops {

/// Transposed 2-D convolution (PyTorch's conv_transpose2d) of x (N, Cin, H, W) with weight
/// (Cin, Cout / groups, kH, kW) and an optional bias (Cout,); result (N, Cout, Ho, Wo) with
/// Ho = (H - 1) * stride.h - 2 * padding.h + dilation.h * (kH - 1) + output_padding.h + 1.
/// output_padding (extra rows/columns at the end) must be smaller than stride or dilation.
/// The arguments come in torch's order (groups before dilation).
MS_IMPL AnyTensor conv_transpose2d(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b = AnyTensor(),
                                   Int2 stride = 1, Int2 padding = 0, Int2 output_padding = 0, std::int64_t groups = 1,
                                   Int2 dilation = 1);

}  // namespace ms::ops

namespace ms {
/// Transposed 2-D convolution (see ops::conv_transpose2d); pass an empty tensor for no bias.
template <Element T>
Tensor<T> conv_transpose2d(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b = Tensor<T>(), Int2 stride = 1,
                           Int2 padding = 0, Int2 output_padding = 0, std::int64_t groups = 1, Int2 dilation = 1) {
  return ops::conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {

/// The attributes of conv_transpose2d: those of the convolution whose adjoint it is, and
/// output_padding (written last, as the API always did).
struct ConvTranspose2dAttrs : Conv2dAttrs {
  Int2 output_padding = 0;
  static auto fields() {
    return std::tuple_cat(Conv2dAttrs::fields(),
                          std::tuple{field("output_padding", &ConvTranspose2dAttrs::output_padding, 0)});
  }
  void validate(const OpDef& op) const {
    Conv2dAttrs::validate(op);
    const Int2 &s = stride, &d = dilation, &o = output_padding;
    MS_CHECK(o.h >= 0 && o.w >= 0 && (o.h < s.h || o.h < d.h) && (o.w < s.w || o.w < d.w), ValueError,
             "{}: output_padding ({}, {}) must be non-negative and smaller than either stride ({}, {}) or dilation "
             "({}, {})",
             op.name, o.h, o.w, s.h, s.w, d.h, d.w);
  }
  /// Whether output_padding reaches the stride on some axis (allowed when it is below the dilation).
  bool output_padding_past_stride() const { return output_padding.h >= stride.h || output_padding.w >= stride.w; }
};

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

/// The geometry of a transposed convolution, stated as the convolution whose adjoint it is:
/// that convolution reads the result (N, Cout, Ho, Wo) and writes x's shape (N, Cin, H, W),
/// with the weight read as conv2d's (O = Cin, Cout / groups, kH, kW).
inline ConvGeom conv_transpose_geom(const OpDef& op, const Shape& xs, const Shape& ws,
                                    const ConvTranspose2dAttrs& a) {
  MS_CHECK(xs.rank() == 4, ShapeError, "{}: input must be 4-D (N, C, H, W), got shape {}", op.name, shape_str(xs));
  MS_CHECK(ws.rank() == 4, ShapeError,
           "{}: weight must be 4-D (in_channels, out_channels / groups, kH, kW), got shape {}", op.name, shape_str(ws));
  const Int2 s = a.stride, p = a.padding, d = a.dilation, op_ = a.output_padding;
  const std::int64_t G = a.groups;
  MS_CHECK(xs[1] == ws[0], ShapeError, "{}: weight {} expects {} input channels, but input {} has {}", op.name,
           shape_str(ws), ws[0], shape_str(xs), xs[1]);
  MS_CHECK(xs[1] % G == 0, ValueError, "{}: groups {} must divide in_channels {} of input {}", op.name, G, xs[1],
           shape_str(xs));
  MS_CHECK(ws[2] >= 1 && ws[3] >= 1, ShapeError, "{}: kernel ({}, {}) of weight {} is empty", op.name, ws[2], ws[3],
           shape_str(ws));
  const std::int64_t Ho = (xs[2] - 1) * s.h - 2 * p.h + d.h * (ws[2] - 1) + op_.h + 1;
  const std::int64_t Wo = (xs[3] - 1) * s.w - 2 * p.w + d.w * (ws[3] - 1) + op_.w + 1;
  MS_CHECK(Ho >= 1 && Wo >= 1, ShapeError,
           "{}: the output size ({}, {}) of input {} with weight {} is not positive (padding ({}, {}) is too large)",
           op.name, Ho, Wo, shape_str(xs), shape_str(ws), p.h, p.w);
  return ConvGeom{xs[0], ws[1] * G, Ho, Wo, xs[1], ws[2], ws[3], s.h, s.w, p.h, p.w, d.h, d.w, G, xs[2], xs[3]};
}

template <class T>
void conv_transpose2d_run(const KernelArgs& k, const ConvGeom& q, bool output_padding_past_stride) {
  if (k.out[0].numel() == 0) return;
  const AnyTensor x = contiguous_raw(k.in[0]), w = contiguous_raw(k.in[1]);
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(w.raw_data());
  T* yp = static_cast<T*>(k.out[0].raw_data());
  // The adjoint of the convolution q: y = col2im(w^T x), as conv2d_grad_input computes it.
  // oneDNN's backward-data convolution checks that the convolution's output size follows from
  // its input; an output_padding of a stride or more breaks that, so such shapes take im2col.
  bool done = false;
#if defined(MS_HAVE_DNNL)
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_dnnl(q, ConvPass::grad_input) && !output_padding_past_stride) {
      conv_dnnl(ConvPass::grad_input, k.op, q, xp, wp, nullptr, yp);
      done = true;
    }
  }
#else
  (void)output_padding_past_stride;
#endif
  if (!done) conv_grad_input_columns(q, xp, wp, yp);
  if (k.in.size() < 3) return;
  const T* bp = static_cast<const T*>(k.in[2].raw_data());
  const std::int64_t bs = k.in[2].strides()[0], plane = q.H * q.W;
  parallel_for(q.N * q.C, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(plane, 1)),
               [&](std::int64_t lo, std::int64_t hi) {
                 for (std::int64_t r = lo; r < hi; ++r) {
                   const T bv = bp[(r % q.C) * bs];
                   T* row = yp + r * plane;
                   for (std::int64_t j = 0; j < plane; ++j) row[j] += bv;
                 }
               });
}

/// d/dx, d/dw and d/db of y = conv_transpose2d(x, w, b) for the output gradient g:
/// gx = conv2d(g, w) (cut to x's extent: an output_padding past the stride adds windows past
/// its end), gw = conv2d_grad_weight with the roles swapped (x the convolution's gradient, g
/// its input; x zero-extended to those windows), gb = g summed over N, H and W.
inline std::vector<AnyTensor> conv_transpose2d_grad(const GradArgs& a) {
  std::vector<AnyTensor> r(a.in.size());
  const AnyTensor& g = a.grad_out[0];
  if (!g.defined()) return r;
  const AnyTensor &x = a.in[0], &w = a.in[1];
  const Conv2dAttrs c = attrs_as<ConvTranspose2dAttrs>(a.op, a.attrs);  // the convolution, without output_padding
  const Attrs ca = to_attrs(c);
  const Shape& xs = x.shape();
  if (a.needs_grad(0)) {
    AnyTensor gx = call1(conv2d_op, {g, w}, ca);
    if (gx.shape()[2] != xs[2]) gx = slice(gx, 2, 0, xs[2]);
    if (gx.shape()[3] != xs[3]) gx = slice(gx, 3, 0, xs[3]);
    r[0] = contiguous(gx);
  }
  if (a.needs_grad(1)) {
    const ConvGeom q = conv_geom(a.op, g.shape(), w.shape(), c);  // g as the convolution's input
    const AnyTensor xe =
        q.Ho != xs[2] || q.Wo != xs[3] ? pad_dims(x, {0, 0, 0, 0}, {0, 0, q.Ho - xs[2], q.Wo - xs[3]}) : x;
    r[1] = call1(conv2d_grad_weight_op, {xe, g}, to_attrs(Conv2dGradWeightAttrs{c, w.shape().vec()}));
  }
  if (a.in.size() > 2 && a.needs_grad(2)) r[2] = sum(g, {0, 2, 3}, false);
  return r;
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// conv_transpose2d(x, w[, b]; stride, padding, output_padding, dilation, groups).
MS_REGISTRATION(const OpDef& conv_transpose2d_op, registry().add([] {
  OpDef d;
  d.name = "conv_transpose2d";
  d.input_names = {"input", "weight", "bias"};
  d.category = Category::nn;
  d.num_inputs = -1;  // x, weight and an optional bias
  d.doc = "transposed 2-D convolution of x (N, Cin, H, W) with weight (Cin, Cout/groups, kH, kW) and optional bias "
          "(Cout,); col2im(weight^T @ x), the adjoint of conv2d";
  d.attr_names = {"stride", "padding", "output_padding", "dilation", "groups"};
  d.attr_schema = &attr_schema<ConvTranspose2dAttrs>("ConvTranspose2dAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() == 2 || in.size() == 3, ValueError, "{}: expected 2 or 3 inputs (x, weight[, bias]), got {}",
             op.name, in.size());
    check_same_dtype(op, in[0], in[1]);
    const detail::ConvGeom q =
        detail::conv_transpose_geom(op, in[0].shape, in[1].shape, attrs_as<ConvTranspose2dAttrs>(op, a));
    if (in.size() == 3) {
      check_same_dtype(op, in[0], in[2]);
      MS_CHECK(in[2].shape == Shape{q.C}, ShapeError,
               "{}: bias shape {} does not match out_channels {} of weight {} in {} group(s)", op.name,
               shape_str(in[2].shape), q.C, shape_str(in[1].shape), q.G);
    }
    out.push_back({in[0].dtype, Shape{q.N, q.C, q.H, q.W}});
  };
  d.kernel = [](const KernelArgs& k) {
    const auto at = attrs_as<ConvTranspose2dAttrs>(k.op, k.attrs);
    const detail::ConvGeom q = detail::conv_transpose_geom(k.op, k.in[0].shape(), k.in[1].shape(), at);
    const bool past = at.output_padding_past_stride();
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::conv_transpose2d_run<T>(k, q, past); });
  };
  d.grad = &detail::conv_transpose2d_grad;
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    const auto at = attrs_as<ConvTranspose2dAttrs>(op, a);
    Cost c = detail::conv_cost(op, in, out, a, detail::conv_transpose_geom(op, in[0].shape, in[1].shape, at));
    if (in.size() == 3) c.flops += static_cast<double>(numel(out[0].shape));
    return c;
  };
  return d;
}()));

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL AnyTensor conv_transpose2d(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b, Int2 stride,
                                   Int2 padding, Int2 output_padding, std::int64_t groups, Int2 dilation) {
  const Attrs a = to_attrs(ConvTranspose2dAttrs{{stride, padding, dilation, groups}, output_padding});
  return b.defined() ? call1(conv_transpose2d_op, {x, w, b}, a) : call1(conv_transpose2d_op, {x, w}, a);
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::ops
