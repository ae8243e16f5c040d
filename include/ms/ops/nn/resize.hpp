#pragma once
// interpolate: resizing of NCHW images (PyTorch's F.interpolate, modes nearest and
// bilinear) as one registered op, with interpolate_grad (its adjoint, the gradient) as
// another: API, inference, CPU kernels, gradient rules and costs. The source coordinate and
// the weights of every output row and column follow PyTorch's CPU kernels (the same
// floating-point type, the same rounding), so results match torch. Must not hold other ops.

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../movement.hpp"
#include "common.hpp"
#include "../reduce.hpp"

namespace ms::ops {

/// A (height, width) pair of scale factors; one number stands for both.
struct Scale2 {
  double h = 1, w = 1;
  constexpr Scale2(double v) : h(v), w(v) {}  // NOLINT: implicit by design
  constexpr Scale2(double h_, double w_) : h(h_), w(w_) {}
};

/// Resizes x (N, C, H, W) to `size`, or by `scale_factor` (output floor(H * scale.h) by
/// floor(W * scale.w)); give exactly one. mode "nearest" (source index floor(dst * H / Ho),
/// PyTorch's 'nearest') or "bilinear" (align_corners: the corner pixels' centers line up;
/// otherwise half-pixel centers, PyTorch's default). With a scale_factor the coordinates are
/// mapped with it, unless recompute_scale_factor (then with the sizes' ratio), like torch.
inline AnyTensor interpolate(const AnyTensor& x, std::optional<Int2> size,
                             std::optional<Scale2> scale_factor = std::nullopt, std::string_view mode = "nearest",
                             std::optional<bool> align_corners = std::nullopt, bool recompute_scale_factor = false);

}  // namespace ms::ops

namespace ms {
using ops::Scale2;
/// Resizes an NCHW image batch (see ops::interpolate).
template <Element T>
Tensor<T> interpolate(const Tensor<T>& x, std::optional<Int2> size, std::optional<Scale2> scale_factor = std::nullopt,
                      std::string_view mode = "nearest", std::optional<bool> align_corners = std::nullopt,
                      bool recompute_scale_factor = false) {
  return ops::interpolate(x, size, scale_factor, mode, align_corners, recompute_scale_factor);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {
namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

/// An interpolation's attributes, checked: size (Ho, Wo), mode, align_corners and the scales
/// that map coordinates (absent: the sizes' ratio).
struct InterpGeom {
  std::int64_t N, C, H, W, Ho, Wo;
  bool bilinear, align_corners;
  std::optional<double> scale_h, scale_w;
};

inline InterpGeom interp_geom(const OpDef& op, const Shape& xs, const Attrs& a) {
  MS_CHECK(xs.rank() == 4, ShapeError, "{}: input must be 4-D (N, C, H, W), got shape {}", op.name, shape_str(xs));
  MS_CHECK(a.has("size"), ValueError, "{}: attribute 'size' is missing", op.name);
  const Int2 s = pair_attr(op, a, "size", 1);
  const std::string& mode = a.has("mode") ? a.str("mode") : std::string("nearest");
  MS_CHECK(mode == "nearest" || mode == "bilinear", ValueError,
           "{}: mode must be \"nearest\" or \"bilinear\", got \"{}\"", op.name, mode);
  const bool bilinear = mode == "bilinear";
  MS_CHECK(bilinear || !a.has("align_corners"), ValueError,
           "{}: align_corners can only be set with mode \"bilinear\" (mode is \"{}\")", op.name, mode);
  MS_CHECK(xs[2] >= 1 && xs[3] >= 1 && s.h >= 1 && s.w >= 1, ShapeError,
           "{}: input and output sizes must be positive, got input {} and output size ({}, {})", op.name,
           shape_str(xs), s.h, s.w);
  InterpGeom q{xs[0], xs[1], xs[2], xs[3], s.h, s.w, bilinear, a.b("align_corners", false), std::nullopt,
               std::nullopt};
  for (auto [key, dst] : {std::pair{"scale_h", &q.scale_h}, std::pair{"scale_w", &q.scale_w}}) {
    if (!a.has(key)) continue;
    const double v = a.f(key);
    MS_CHECK(std::isfinite(v) && v > 0, ValueError, "{}: attribute '{}' must be a positive scale, got {}", op.name,
             key, v);
    *dst = v;
  }
  return q;
}

/// The two source taps of each output position along one axis, and their weights:
/// out[i] = l0[i] * in[i0[i]] + l1[i] * in[i1[i]] (nearest: one tap of weight 1).
template <class T>
struct InterpTaps {
  std::vector<std::int64_t> i0, i1;
  std::vector<T> l0, l1;
};

/// PyTorch's nearest_idx and compute_source_index_and_lambda (aten/src/ATen/native/UpSample.h),
/// in the same types: nearest maps in float, bilinear in T.
template <class T>
InterpTaps<T> interp_taps(bool bilinear, bool align_corners, std::int64_t in, std::int64_t out,
                          std::optional<double> scale) {
  InterpTaps<T> t;
  const auto n = static_cast<std::size_t>(out);
  t.i0.resize(n), t.i1.resize(n), t.l0.assign(n, T(1)), t.l1.assign(n, T(0));
  if (!bilinear) {
    const float sc = scale ? static_cast<float>(1.0 / *scale) : static_cast<float>(in) / static_cast<float>(out);
    for (std::int64_t i = 0; i < out; ++i) {
      std::int64_t k;
      if (out == in) k = i;
      else if (out == 2 * in) k = i >> 1;
      else k = std::min(static_cast<std::int64_t>(std::floor(static_cast<float>(i) * sc)), in - 1);
      t.i0[static_cast<std::size_t>(i)] = t.i1[static_cast<std::size_t>(i)] = k;
    }
    return t;
  }
  if (out == in) {  // the identity, whatever the scale (torch: a scale of 1.2 on 3 pixels gives 3)
    for (std::int64_t i = 0; i < out; ++i) t.i0[static_cast<std::size_t>(i)] = t.i1[static_cast<std::size_t>(i)] = i;
    return t;
  }
  T sc;
  if (align_corners) sc = out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  else sc = scale ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / static_cast<T>(out);
  for (std::int64_t i = 0; i < out; ++i) {
    T src;
    if (align_corners) src = sc * static_cast<T>(i);
    else src = std::max(sc * (static_cast<T>(i) + T(0.5)) - T(0.5), T(0));
    const std::int64_t k0 = std::min(static_cast<std::int64_t>(src), in - 1);
    const std::int64_t off = k0 < in - 1 ? 1 : 0;
    const T l1 = std::min(std::max(src - static_cast<T>(k0), T(0)), T(1));
    const auto u = static_cast<std::size_t>(i);
    t.i0[u] = k0, t.i1[u] = k0 + off, t.l0[u] = T(1) - l1, t.l1[u] = l1;
  }
  return t;
}

/// y (N, C, Ho, Wo) from x (N, C, H, W); planes in parallel.
template <class T>
void interpolate_run(const KernelArgs& k, const InterpGeom& q) {
  if (k.out[0].numel() == 0) return;
  const AnyTensor x = contiguous_raw(k.in[0]);
  const T* xp = static_cast<const T*>(x.raw_data());
  T* yp = static_cast<T*>(k.out[0].raw_data());
  const auto th = interp_taps<T>(q.bilinear, q.align_corners, q.H, q.Ho, q.scale_h);
  const auto tw = interp_taps<T>(q.bilinear, q.align_corners, q.W, q.Wo, q.scale_w);
  const std::int64_t in_plane = q.H * q.W, out_plane = q.Ho * q.Wo;
  parallel_for(q.N * q.C, std::max<std::int64_t>(1, kParallelGrain / out_plane), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t p = lo; p < hi; ++p) {
      const T* xs = xp + p * in_plane;
      T* y = yp + p * out_plane;
      for (std::int64_t oh = 0; oh < q.Ho; ++oh) {
        const auto h = static_cast<std::size_t>(oh);
        const T* r0 = xs + th.i0[h] * q.W;
        T* yr = y + oh * q.Wo;
        if (!q.bilinear) {
          for (std::int64_t ow = 0; ow < q.Wo; ++ow) yr[ow] = r0[tw.i0[static_cast<std::size_t>(ow)]];
          continue;
        }
        const T* r1 = xs + th.i1[h] * q.W;
        const T a0 = th.l0[h], a1 = th.l1[h];
        for (std::int64_t ow = 0; ow < q.Wo; ++ow) {
          const auto w = static_cast<std::size_t>(ow);
          const std::int64_t c0 = tw.i0[w], c1 = tw.i1[w];
          const T b0 = tw.l0[w], b1 = tw.l1[w];
          yr[ow] = a0 * (b0 * r0[c0] + b1 * r0[c1]) + a1 * (b0 * r1[c0] + b1 * r1[c1]);
        }
      }
    }
  });
}

/// gx (N, C, H, W) = the adjoint of interpolate applied to g (N, C, Ho, Wo): each output's
/// gradient spread onto its taps. Planes in parallel, each plane in one fixed order, so the
/// result does not depend on the thread count.
template <class T>
void interpolate_grad_run(const KernelArgs& k, const InterpGeom& q) {
  T* gx = static_cast<T*>(k.out[0].raw_data());
  std::fill(gx, gx + k.out[0].numel(), T(0));
  if (k.in[0].numel() == 0) return;
  const AnyTensor g = contiguous_raw(k.in[0]);
  const T* gp = static_cast<const T*>(g.raw_data());
  const auto th = interp_taps<T>(q.bilinear, q.align_corners, q.H, q.Ho, q.scale_h);
  const auto tw = interp_taps<T>(q.bilinear, q.align_corners, q.W, q.Wo, q.scale_w);
  const std::int64_t in_plane = q.H * q.W, out_plane = q.Ho * q.Wo;
  parallel_for(q.N * q.C, std::max<std::int64_t>(1, kParallelGrain / out_plane), [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t p = lo; p < hi; ++p) {
      T* xs = gx + p * in_plane;
      const T* gpl = gp + p * out_plane;
      for (std::int64_t oh = 0; oh < q.Ho; ++oh) {
        const auto h = static_cast<std::size_t>(oh);
        T* r0 = xs + th.i0[h] * q.W;
        const T* gr = gpl + oh * q.Wo;
        if (!q.bilinear) {
          for (std::int64_t ow = 0; ow < q.Wo; ++ow) r0[tw.i0[static_cast<std::size_t>(ow)]] += gr[ow];
          continue;
        }
        T* r1 = xs + th.i1[h] * q.W;
        const T a0 = th.l0[h], a1 = th.l1[h];
        for (std::int64_t ow = 0; ow < q.Wo; ++ow) {
          const auto w = static_cast<std::size_t>(ow);
          const std::int64_t c0 = tw.i0[w], c1 = tw.i1[w];
          const T b0 = tw.l0[w], b1 = tw.l1[w], v = gr[ow];
          r0[c0] += a0 * b0 * v;
          r0[c1] += a0 * b1 * v;
          r1[c0] += a1 * b0 * v;
          r1[c1] += a1 * b1 * v;
        }
      }
    }
  });
}

inline Cost interp_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a,
                        const Shape& big) {
  const bool bilinear = a.has("mode") && a.str("mode") == "bilinear";
  return {static_cast<double>(numel(big)) * (bilinear ? 9.0 : 0.0), bytes_of(in) + bytes_of(out)};
}

/// The forward attributes of an interpolate_grad (without input_shape).
inline Attrs interp_forward_attrs(const Attrs& a) {
  Attrs r;
  for (auto& [key, v] : a.items())
    if (key != "input_shape") r.set(key, v);
  return r;
}

/// interpolate's gradient rule (below interpolate_grad_op, which it calls). The pair's rules:
/// each op is linear, and each is the other's adjoint.
inline std::vector<AnyTensor> interpolate_backward(const GradArgs& a);

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// interpolate(x; size, mode, align_corners, scale_h, scale_w).
MS_REGISTRATION(const OpDef& interpolate_op, registry().add([] {
  OpDef d;
  d.name = "interpolate";
  d.input_names = {"input"};
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "resizes x (N, C, H, W) to size (Ho, Wo), mode nearest or bilinear (align_corners), PyTorch's interpolate";
  d.attr_names = {"size", "mode", "align_corners", "scale_h", "scale_w"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const detail::InterpGeom q = detail::interp_geom(op, in[0].shape, a);
    out.push_back({in[0].dtype, Shape{q.N, q.C, q.Ho, q.Wo}});
  };
  d.kernel = [](const KernelArgs& k) {
    const detail::InterpGeom q = detail::interp_geom(k.op, k.in[0].shape(), k.attrs);
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::interpolate_run<T>(k, q); });
  };
  d.grad = &detail::interpolate_backward;
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    return detail::interp_cost(in, out, a, out[0].shape);
  };
  return d;
}()));

// interpolate_grad(g; input_shape, and interpolate's attributes): the gradient of interpolate.
MS_REGISTRATION(const OpDef& interpolate_grad_op, registry().add([] {
  OpDef d;
  d.name = "interpolate_grad";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "gradient of interpolate w.r.t. its input: each output's gradient added onto its source taps";
  d.attr_names = {"size", "mode", "align_corners", "scale_h", "scale_w", "input_shape"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const Shape xs = detail::shape_attr_n(op, a, "input_shape", 4);
    const detail::InterpGeom q = detail::interp_geom(op, xs, a);
    const Shape want{q.N, q.C, q.Ho, q.Wo};
    MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the interpolate output shape {}",
             op.name, shape_str(in[0].shape), shape_str(want));
    out.push_back({in[0].dtype, xs});
  };
  d.kernel = [](const KernelArgs& k) {
    const detail::InterpGeom q = detail::interp_geom(k.op, k.out[0].shape(), k.attrs);
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::interpolate_grad_run<T>(k, q); });
  };
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    return detail::interp_cost(in, out, a, in[0].shape);
  };
  d.grad = [](const GradArgs& a) -> std::vector<AnyTensor> {
    if (!a.grad_out[0].defined()) return {AnyTensor()};
    return {call1(interpolate_op, {a.grad_out[0]}, detail::interp_forward_attrs(a.attrs))};
  };
  return d;
}()));

#if MS_KERNEL_BODIES
inline std::vector<AnyTensor> detail::interpolate_backward(const GradArgs& a) {
  if (!a.grad_out[0].defined()) return {AnyTensor()};
  Attrs at = a.attrs;
  at.set("input_shape", a.in[0].shape().vec());
  return {call1(interpolate_grad_op, {a.grad_out[0]}, at)};
}
#endif  // MS_KERNEL_BODIES

inline AnyTensor interpolate(const AnyTensor& x, std::optional<Int2> size, std::optional<Scale2> scale_factor,
                             std::string_view mode, std::optional<bool> align_corners, bool recompute_scale_factor) {
  MS_CHECK(size.has_value() != scale_factor.has_value(), ValueError,
           "interpolate: give exactly one of size and scale_factor (got {})", size ? "both" : "neither");
  MS_CHECK(x.defined() && x.dim() == 4, ShapeError, "interpolate: input must be 4-D (N, C, H, W), got shape {}",
           x.defined() ? shape_str(x.shape()) : std::string("(undefined)"));
  Attrs a;
  if (size) {
    a.set("size", size->list());
  } else {
    const Scale2 s = *scale_factor;
    MS_CHECK(std::isfinite(s.h) && std::isfinite(s.w) && s.h > 0 && s.w > 0, ValueError,
             "interpolate: scale_factor must be positive, got ({}, {})", s.h, s.w);
    // torch: the output size is floor(input size * scale), computed in double.
    const auto oh = static_cast<std::int64_t>(std::floor(static_cast<double>(x.shape()[2]) * s.h));
    const auto ow = static_cast<std::int64_t>(std::floor(static_cast<double>(x.shape()[3]) * s.w));
    a.set("size", IntList{oh, ow});
    if (!recompute_scale_factor) a.set("scale_h", s.h).set("scale_w", s.w);
  }
  a.set("mode", std::string(mode));
  if (align_corners) a.set("align_corners", *align_corners);
  return call1(interpolate_op, {x}, a);
}

}  // namespace ms::ops
