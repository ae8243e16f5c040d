#pragma once
// Pooling on NCHW tensors (float32 and float64): max_pool2d (values and argmax indices),
// avg_pool2d and adaptive_avg_pool2d. Belongs here: their definitions, inference, kernels
// and costs, and the backward ops their gradient rules need (max_pool2d_grad,
// avg_pool2d_grad, adaptive_avg_pool2d_grad). The gradient table rows live in
// autograd/nn_rules.hpp.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include "../../core/parallel.hpp"
#include "../../core/linkage.hpp"
#if MS_KERNEL_BODIES  // core/linkage.hpp
#include "../../backend/cpu/kernels/avg_pool.hpp"
#include "../../backend/cpu/kernels/max_pool.hpp"
#include "../isa_dispatch.hpp"
#endif
#include "../dispatch.hpp"
#include "../views.hpp"
#include "common.hpp"

namespace ms::ops {

/// Max pooling over kH x kW windows (stride defaults to the kernel size; padding counts as -inf
/// and may be at most half the kernel). NaN in a window propagates.
/// dilation spaces the window's taps; ceil_mode rounds the output size up (PyTorch's rules).
MS_IMPL AnyTensor max_pool2d(const AnyTensor& x, Int2 kernel_size, std::optional<Int2> stride = std::nullopt,
                             Int2 padding = 0, Int2 dilation = 1, bool ceil_mode = false);
/// max_pool2d and the int64 index (ih * W + iw within its plane) of each maximum.
MS_IMPL std::pair<AnyTensor, AnyTensor> max_pool2d_with_indices(const AnyTensor& x, Int2 kernel_size,
                                                                std::optional<Int2> stride = std::nullopt,
                                                                Int2 padding = 0, Int2 dilation = 1,
                                                                bool ceil_mode = false);
/// Average pooling; with count_include_pad the padded zeros count in the divisor (PyTorch's default);
/// ceil_mode rounds the output size up; divisor_override replaces every window's divisor.
/// (count_include_pad comes before ceil_mode here, unlike torch, so older calls keep their meaning.)
MS_IMPL AnyTensor avg_pool2d(const AnyTensor& x, Int2 kernel_size, std::optional<Int2> stride = std::nullopt,
                             Int2 padding = 0, bool count_include_pad = true, bool ceil_mode = false,
                             std::optional<std::int64_t> divisor_override = std::nullopt);
/// Average pooling to a fixed output size: output cell i covers input rows
/// [floor(i * H / Ho), ceil((i + 1) * H / Ho)) (and likewise for columns).
MS_IMPL AnyTensor adaptive_avg_pool2d(const AnyTensor& x, Int2 output_size);

}  // namespace ms::ops

namespace ms {
/// Max pooling (see ops::max_pool2d).
template <Element T>
Tensor<T> max_pool2d(const Tensor<T>& x, Int2 kernel_size, std::optional<Int2> stride = std::nullopt,
                     Int2 padding = 0, Int2 dilation = 1, bool ceil_mode = false) {
  return ops::max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}
/// Average pooling (see ops::avg_pool2d).
template <Element T>
Tensor<T> avg_pool2d(const Tensor<T>& x, Int2 kernel_size, std::optional<Int2> stride = std::nullopt,
                     Int2 padding = 0, bool count_include_pad = true, bool ceil_mode = false,
                     std::optional<std::int64_t> divisor_override = std::nullopt) {
  return ops::avg_pool2d(x, kernel_size, stride, padding, count_include_pad, ceil_mode, divisor_override);
}
/// Adaptive average pooling to `output_size`.
template <Element T>
Tensor<T> adaptive_avg_pool2d(const Tensor<T>& x, Int2 output_size) { return ops::adaptive_avg_pool2d(x, output_size); }
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {

/// The window of a pooling as the geometry reads it (from MaxPool2dAttrs or AvgPool2dAttrs).
struct PoolWindow {
  Int2 kernel_size = 1, stride = 1, padding = 0, dilation = 1;
  bool ceil_mode = false;
  std::int64_t divisor = 0;  ///< avg_pool2d's divisor_override (0: none)
};

namespace detail {
/// The attribute checks that need no input shape, in the order the messages were always given.
inline void check_pool_window(const OpDef& op, const PoolWindow& w, std::optional<std::int64_t> divisor) {
  const Int2 &kz = w.kernel_size, &s = w.stride, &p = w.padding, &d = w.dilation;
  MS_CHECK(kz.h >= 1 && kz.w >= 1, ValueError, "{}: kernel_size must be positive, got ({}, {})", op.name, kz.h, kz.w);
  MS_CHECK(d.h >= 1 && d.w >= 1, ValueError, "{}: dilation must be positive, got ({}, {})", op.name, d.h, d.w);
  MS_CHECK(!divisor || *divisor >= 1, ValueError, "{}: divisor_override must be positive, got {}", op.name,
           divisor.value_or(0));
  MS_CHECK(s.h >= 1 && s.w >= 1, ValueError, "{}: stride must be positive, got ({}, {})", op.name, s.h, s.w);
  MS_CHECK(p.h >= 0 && p.w >= 0 && 2 * p.h <= kz.h && 2 * p.w <= kz.w, ValueError,
           "{}: padding ({}, {}) must be non-negative and at most half of kernel_size ({}, {})", op.name, p.h, p.w,
           kz.h, kz.w);
}
}  // namespace detail

/// The attributes of max_pool2d (see ops/attr_struct.hpp); dilation and ceil_mode are written
/// only when they differ from their defaults, so graphs and frozen models without them read
/// and print as before.
struct MaxPool2dAttrs {
  Int2 kernel_size;
  std::optional<Int2> stride;  ///< unset: kernel_size
  Int2 padding = 0, dilation = 1;
  bool ceil_mode = false;
  static auto fields() {
    using S = MaxPool2dAttrs;
    return std::tuple{required_field("kernel_size", &S::kernel_size), field("stride", &S::stride, std::nullopt),
                      field("padding", &S::padding, 0), field("dilation", &S::dilation, 1, Emit::unless_default),
                      field("ceil_mode", &S::ceil_mode, false, Emit::unless_default)};
  }
  PoolWindow window() const { return {kernel_size, stride.value_or(kernel_size), padding, dilation, ceil_mode, 0}; }
  void validate(const OpDef& op) const { detail::check_pool_window(op, window(), std::nullopt); }
};
/// max_pool2d_grad: max_pool2d's attributes and the forward input's shape.
struct MaxPool2dGradAttrs : MaxPool2dAttrs {
  IntList input_shape;
  static auto fields() {
    return std::tuple_cat(MaxPool2dAttrs::fields(),
                          std::tuple{required_field("input_shape", &MaxPool2dGradAttrs::input_shape)});
  }
  void validate(const OpDef& op) const {
    MaxPool2dAttrs::validate(op);
    detail::shape_n(op, "input_shape", input_shape, 4);
  }
};

/// The attributes of avg_pool2d; ceil_mode is written only when set, divisor_override only when given.
struct AvgPool2dAttrs {
  Int2 kernel_size;
  std::optional<Int2> stride;  ///< unset: kernel_size
  Int2 padding = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<std::int64_t> divisor_override;
  static auto fields() {
    using S = AvgPool2dAttrs;
    return std::tuple{required_field("kernel_size", &S::kernel_size), field("stride", &S::stride, std::nullopt),
                      field("padding", &S::padding, 0), field("ceil_mode", &S::ceil_mode, false, Emit::unless_default),
                      field("count_include_pad", &S::count_include_pad, true),
                      field("divisor_override", &S::divisor_override, std::nullopt)};
  }
  PoolWindow window() const {
    return {kernel_size, stride.value_or(kernel_size), padding, 1, ceil_mode, divisor_override.value_or(0)};
  }
  void validate(const OpDef& op) const { detail::check_pool_window(op, window(), divisor_override); }
};
/// avg_pool2d_grad: avg_pool2d's attributes and the forward input's shape.
struct AvgPool2dGradAttrs : AvgPool2dAttrs {
  IntList input_shape;
  static auto fields() {
    return std::tuple_cat(AvgPool2dAttrs::fields(),
                          std::tuple{required_field("input_shape", &AvgPool2dGradAttrs::input_shape)});
  }
  void validate(const OpDef& op) const {
    AvgPool2dAttrs::validate(op);
    detail::shape_n(op, "input_shape", input_shape, 4);
  }
};

/// The attributes of adaptive_avg_pool2d.
struct AdaptiveAvgPool2dAttrs {
  Int2 output_size;
  static auto fields() { return std::tuple{required_field("output_size", &AdaptiveAvgPool2dAttrs::output_size)}; }
  void validate(const OpDef& op) const {
    const Int2& o = output_size;
    MS_CHECK(o.h >= 1 && o.w >= 1, ValueError, "{}: output_size must be positive, got ({}, {})", op.name, o.h, o.w);
  }
};
/// adaptive_avg_pool2d_grad: the output size and the forward input's shape.
struct AdaptiveAvgPool2dGradAttrs : AdaptiveAvgPool2dAttrs {
  IntList input_shape;
  static auto fields() {
    return std::tuple_cat(AdaptiveAvgPool2dAttrs::fields(),
                          std::tuple{required_field("input_shape", &AdaptiveAvgPool2dGradAttrs::input_shape)});
  }
  void validate(const OpDef& op) const {
    AdaptiveAvgPool2dAttrs::validate(op);
    detail::shape_n(op, "input_shape", input_shape, 4);
  }
};

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

// ---- pooling --------------------------------------------------------------------------------------

struct PoolGeom {
  std::int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, Ho, Wo;
  std::int64_t dh = 1, dw = 1;  ///< dilation (max pooling)
  std::int64_t divisor = 0;     ///< avg pooling's divisor_override (0: none)
  std::int64_t planes() const { return N * C; }
  /// True when every window lies inside the plane with no dilation (the fast max-pool path).
  bool dense() const {
    return ph == 0 && pw == 0 && dh == 1 && dw == 1 && (Ho - 1) * sh + kh <= H && (Wo - 1) * sw + kw <= W;
  }
};

/// Output extent of a pooling over n inputs (effective window k, stride s, padding p), PyTorch's
/// rule: with ceil_mode the last window may hang over the end but must start inside the input
/// or its left padding.
inline std::int64_t pool_out_size(std::int64_t n, std::int64_t k, std::int64_t s, std::int64_t p, bool ceil_mode) {
  const std::int64_t span = n + 2 * p - k;
  std::int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= n + p) --o;
  return o;
}

/// The geometry of a pooling of an input of shape xs with the (validated) window w.
inline PoolGeom pool_geom(const OpDef& op, const Shape& xs, const PoolWindow& w) {
  MS_CHECK(xs.rank() == 4, ShapeError, "{}: input must be 4-D (N, C, H, W), got shape {}", op.name, shape_str(xs));
  const Int2 kz = w.kernel_size, s = w.stride, p = w.padding, d = w.dilation;
  PoolGeom q{xs[0], xs[1], xs[2], xs[3], kz.h, kz.w, s.h, s.w, p.h, p.w, 0, 0};
  q.dh = d.h, q.dw = d.w, q.divisor = w.divisor;
  const std::int64_t eh = d.h * (kz.h - 1) + 1, ew = d.w * (kz.w - 1) + 1;  // the dilated window
  MS_CHECK(q.H >= 1 && q.W >= 1, ShapeError, "{}: input {} has an empty plane", op.name, shape_str(xs));
  MS_CHECK(eh <= q.H + 2 * p.h && ew <= q.W + 2 * p.w, ShapeError,
           "{}: {} ({}, {}) is larger than the padded input ({}, {}) of input {}", op.name,
           d.h == 1 && d.w == 1 ? "kernel_size" : "the dilated kernel", eh, ew, q.H + 2 * p.h, q.W + 2 * p.w,
           shape_str(xs));
  q.Ho = pool_out_size(q.H, eh, s.h, p.h, w.ceil_mode);
  q.Wo = pool_out_size(q.W, ew, s.w, p.w, w.ceil_mode);
  return q;
}

/// The backward ops of pooling: input 0 is the output gradient; attr input_shape the forward input's.
inline Shape pool_grad_shape(const OpDef& op, std::span<const TensorMeta> in, const IntList& input_shape,
                             const PoolWindow& w, PoolGeom& q) {
  const Shape xs(input_shape);
  q = pool_geom(op, xs, w);
  Shape want{q.N, q.C, q.Ho, q.Wo};
  MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the pooled shape {} of input {}",
           op.name, shape_str(in[0].shape), shape_str(want), shape_str(xs));
  return xs;
}

template <class T>
void max_pool_run(const KernelArgs& k, const PoolGeom& q) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const T* xp = static_cast<const T*>(x.raw_data());
  T* yp = static_cast<T*>(k.out[0].raw_data());
  std::int64_t* ip = static_cast<std::int64_t*>(k.out[1].raw_data());
  const std::int64_t HW = q.H * q.W, P = q.Ho * q.Wo;
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, HW));
  if constexpr (std::is_same_v<T, float>) {
    if (q.dense()) {  // on the kernels of the CPU level in force
      const IsaFn fn = cpu::isa_function("max_pool_dense", &max_pool_dense);
      parallel_for(q.planes(), grain, [&](std::int64_t b, std::int64_t e) {
        const MaxPoolArgs a{xp, yp, ip, q.H, q.W, q.Ho, q.Wo, q.kh, q.kw, q.sh, q.sw, b, e};
        fn(&a);
      }, 1);
      return;
    }
  }
  parallel_for(q.planes(), grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t pl = b; pl < e; ++pl) {
      const T* xpl = xp + pl * HW;
      if (q.dense()) {  // every window inside the plane: a row of windows at a time
        for (std::int64_t oh = 0; oh < q.Ho; ++oh)
          max_pool_row(xpl, q.W, oh * q.sh, q.Wo, q.sw, q.kh, q.kw, yp + pl * P + oh * q.Wo, ip + pl * P + oh * q.Wo);
        continue;
      }
      for (std::int64_t oh = 0; oh < q.Ho; ++oh) {
        const std::int64_t h0 = oh * q.sh - q.ph;
        for (std::int64_t ow = 0; ow < q.Wo; ++ow) {
          const std::int64_t w0 = ow * q.sw - q.pw;
          T best = T(0);
          std::int64_t bi = -1;
          // The taps h0 + i * dh, w0 + j * dw inside the plane, in row-major order: the first
          // maximum wins; the first NaN wins and stays.
          for (std::int64_t i = 0; i < q.kh; ++i) {
            const std::int64_t ih = h0 + i * q.dh;
            if (ih < 0 || ih >= q.H) continue;
            for (std::int64_t j = 0; j < q.kw; ++j) {
              const std::int64_t iw = w0 + j * q.dw;
              if (iw < 0 || iw >= q.W) continue;
              const T v = xpl[ih * q.W + iw];
              const bool take = bi < 0 || (v > best) | ((v != v) & (best == best));
              best = take ? v : best;
              bi = take ? ih * q.W + iw : bi;
            }
          }
          yp[pl * P + oh * q.Wo + ow] = best;
          ip[pl * P + oh * q.Wo + ow] = bi;
        }
      }
    }
  }, 1);
}

template <class T>
void max_pool_grad_run(const KernelArgs& k, const PoolGeom& q) {
  const AnyTensor g = contiguous_raw(k.in[0]), idx = contiguous_raw(k.in[1]);
  const T* gp = static_cast<const T*>(g.raw_data());
  const std::int64_t* ip = static_cast<const std::int64_t*>(idx.raw_data());
  T* xp = static_cast<T*>(k.out[0].raw_data());
  const std::int64_t HW = q.H * q.W, P = q.Ho * q.Wo;
  // The indices are checked as they are used, in the parallel part (checked first, on one
  // thread, they took as long as the scatter); an out-of-range one is skipped and reported.
  std::atomic<std::int64_t> bad{0};
  std::atomic<bool> any_bad{false};
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, HW));
  auto report = [&](std::int64_t at) {
    if (!any_bad.exchange(true)) bad.store(at);
  };
  // Float planes whose windows lie inside them: on the kernels of the CPU level in force.
  IsaFn fn = nullptr;
  if constexpr (std::is_same_v<T, float>)
    if (q.dense()) fn = cpu::isa_function("max_pool_grad_dense", &max_pool_grad_dense);
  parallel_for(q.planes(), grain, [&](std::int64_t b, std::int64_t e) {
    if constexpr (std::is_same_v<T, float>) {
      if (fn != nullptr) {
        std::int64_t at = 0;
        bool found = false;
        const MaxPoolGradArgs a{gp, ip, xp, q.H, q.W, q.Ho, q.Wo, q.kh, q.kw, q.sh, q.sw, b, e, &at, &found};
        fn(&a);
        if (found) report(at);
        return;
      }
    }
    for (std::int64_t pl = b; pl < e; ++pl) {
      std::int64_t at = 0;
      if (!max_pool_scatter_plane(gp + pl * P, ip + pl * P, xp + pl * HW, HW, P, at)) report(at);
    }
  }, 1);
  MS_CHECK(!any_bad.load(), IndexError, "{}: index {} is out of range for an input plane of {} x {}", k.op.name,
           bad.load(), q.H, q.W);
}

/// Average pooling (Adjoint = false: y from x) or its adjoint (true: gx from gy), over the
/// windows of an ordinary (Adaptive = false) or adaptive pooling.
template <bool Adaptive, bool Adjoint, class T>
void avg_pool_run(const T* src, T* dst, const PoolGeom& q, bool count_include_pad) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const std::int64_t HW = q.H * q.W;
  // On the kernels of the CPU level in force (backend/cpu/kernels/avg_pool.hpp).
  static constexpr const char* kNames[2][2][2] = {
      {{"avg_pool_f32", "avg_pool_f64"}, {"avg_pool_grad_f32", "avg_pool_grad_f64"}},
      {{"adaptive_avg_pool_f32", "adaptive_avg_pool_f64"},
       {"adaptive_avg_pool_grad_f32", "adaptive_avg_pool_grad_f64"}}};
  const IsaFn fn = cpu::isa_function_for<T>(kNames[Adaptive][Adjoint][0], kNames[Adaptive][Adjoint][1],
                                            &avg_pool_kernel<Adaptive, Adjoint, T>);
  parallel_for(q.planes(), std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, HW)),
               [&](std::int64_t b, std::int64_t e) {
    const AvgPoolArgs<T> a{src, dst, q.H, q.W, q.Ho, q.Wo, q.kh, q.kw, q.sh, q.sw, q.ph, q.pw, q.divisor,
                           count_include_pad, b, e};
    fn(&a);
  }, 1);
}

/// The geometry of an adaptive pooling from input shape xs (N, C, H, W) to output_size.
inline PoolGeom adaptive_geom(const OpDef& op, const Shape& xs, const AdaptiveAvgPool2dAttrs& a) {
  MS_CHECK(xs.rank() == 4, ShapeError, "{}: input must be 4-D (N, C, H, W), got shape {}", op.name, shape_str(xs));
  const Int2 o = a.output_size;
  MS_CHECK(xs[2] >= 1 && xs[3] >= 1, ShapeError, "{}: input {} has an empty plane", op.name, shape_str(xs));
  return PoolGeom{xs[0], xs[1], xs[2], xs[3], 1, 1, 1, 1, 0, 0, o.h, o.w};
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// ---- registrations --------------------------------------------------------------------------------

// max_pool2d(x; kernel_size, stride, padding) -> (values, int64 indices into each H * W plane).
MS_REGISTRATION(const OpDef& max_pool2d_op, registry().add([] {
  OpDef d;
  d.name = "max_pool2d";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "max over kH x kW windows of x (N, C, H, W); second output: int64 argmax (ih * W + iw) per window";
  d.attr_schema = &attr_schema<MaxPool2dAttrs>("MaxPool2dAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q = detail::pool_geom(op, in[0].shape, attrs_as<MaxPool2dAttrs>(op, a).window());
    Shape s{q.N, q.C, q.Ho, q.Wo};
    out.push_back({in[0].dtype, s});
    out.push_back({DType::i64, s});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q = detail::pool_geom(k.op, k.in[0].shape(), attrs_as<MaxPool2dAttrs>(k.op, k.attrs).window());
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::max_pool_run<T>(k, q); });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    detail::PoolGeom q = detail::pool_geom(op, in[0].shape, attrs_as<MaxPool2dAttrs>(op, a).window());
    return Cost{static_cast<double>(numel(out[0].shape) * q.kh * q.kw), detail::bytes_of(in) + detail::bytes_of(out)};
  };
  return d;
}()));

// max_pool2d_grad(g, indices; kernel_size, stride, padding, input_shape): routes g to the argmax.
MS_REGISTRATION(const OpDef& max_pool2d_grad_op, registry().add([] {
  OpDef d;
  d.name = "max_pool2d_grad";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "gradient of max_pool2d: each output gradient added at its window's argmax";
  d.attr_schema = &attr_schema<MaxPool2dGradAttrs>("MaxPool2dGradAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q;
    const auto at = attrs_as<MaxPool2dGradAttrs>(op, a);
    Shape xs = detail::pool_grad_shape(op, in, at.input_shape, at.window(), q);
    MS_CHECK(in[1].dtype == DType::i64 && in[1].shape == in[0].shape, DTypeError,
             "{}: indices must be int64 of the gradient's shape {}, got {} {}", op.name, shape_str(in[0].shape),
             in[1].dtype, shape_str(in[1].shape));
    out.push_back({in[0].dtype, xs});
  };
  d.kernel = [](const KernelArgs& k) {
    const auto at = attrs_as<MaxPool2dGradAttrs>(k.op, k.attrs);
    detail::PoolGeom q = detail::pool_geom(k.op, k.out[0].shape(), at.window());
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::max_pool_grad_run<T>(k, q); });
  };
  d.cost = &detail::per_input_cost<1>;
  return d;
}()));

// avg_pool2d(x; kernel_size, stride, padding, count_include_pad).
MS_REGISTRATION(const OpDef& avg_pool2d_op, registry().add([] {
  OpDef d;
  d.name = "avg_pool2d";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "mean over kH x kW windows of x (N, C, H, W); count_include_pad counts padded zeros in the divisor";
  d.attr_names = {"kernel_size", "stride", "padding", "count_include_pad", "ceil_mode", "divisor_override"};
  d.attr_schema = &attr_schema<AvgPool2dAttrs>("AvgPool2dAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q = detail::pool_geom(op, in[0].shape, attrs_as<AvgPool2dAttrs>(op, a).window());
    out.push_back({in[0].dtype, Shape{q.N, q.C, q.Ho, q.Wo}});
  };
  d.kernel = [](const KernelArgs& k) {
    const auto at = attrs_as<AvgPool2dAttrs>(k.op, k.attrs);
    detail::PoolGeom q = detail::pool_geom(k.op, k.in[0].shape(), at.window());
    const AnyTensor x = detail::contiguous_raw(k.in[0]);
    detail::visit_float(k, x.dtype(), [&]<class T>() {
      detail::avg_pool_run<false, false>(static_cast<const T*>(x.raw_data()), static_cast<T*>(k.out[0].raw_data()), q,
                                         at.count_include_pad);
    });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    detail::PoolGeom q = detail::pool_geom(op, in[0].shape, attrs_as<AvgPool2dAttrs>(op, a).window());
    return Cost{static_cast<double>(numel(out[0].shape) * q.kh * q.kw), detail::bytes_of(in) + detail::bytes_of(out)};
  };
  return d;
}()));

// avg_pool2d_grad(g; kernel_size, stride, padding, count_include_pad, input_shape).
MS_REGISTRATION(const OpDef& avg_pool2d_grad_op, registry().add([] {
  OpDef d;
  d.name = "avg_pool2d_grad";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "gradient of avg_pool2d: each output gradient spread evenly over its window";
  d.attr_names = {"kernel_size", "stride", "padding", "count_include_pad", "ceil_mode", "divisor_override",
                  "input_shape"};
  d.attr_schema = &attr_schema<AvgPool2dGradAttrs>("AvgPool2dGradAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q;
    const auto at = attrs_as<AvgPool2dGradAttrs>(op, a);
    out.push_back({in[0].dtype, detail::pool_grad_shape(op, in, at.input_shape, at.window(), q)});
  };
  d.kernel = [](const KernelArgs& k) {
    const auto at = attrs_as<AvgPool2dGradAttrs>(k.op, k.attrs);
    detail::PoolGeom q = detail::pool_geom(k.op, k.out[0].shape(), at.window());
    const AnyTensor g = detail::contiguous_raw(k.in[0]);
    detail::visit_float(k, g.dtype(), [&]<class T>() {
      detail::avg_pool_run<false, true>(static_cast<const T*>(g.raw_data()), static_cast<T*>(k.out[0].raw_data()), q,
                                        at.count_include_pad);
    });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    detail::PoolGeom q = detail::pool_geom(op, out[0].shape, attrs_as<AvgPool2dGradAttrs>(op, a).window());
    return Cost{static_cast<double>(numel(in[0].shape) * q.kh * q.kw), detail::bytes_of(in) + detail::bytes_of(out)};
  };
  return d;
}()));

// adaptive_avg_pool2d(x; output_size).
MS_REGISTRATION(const OpDef& adaptive_avg_pool2d_op, registry().add([] {
  OpDef d;
  d.name = "adaptive_avg_pool2d";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "average pooling of x (N, C, H, W) to a fixed (Ho, Wo): cell i covers [floor(i*H/Ho), ceil((i+1)*H/Ho))";
  d.attr_schema = &attr_schema<AdaptiveAvgPool2dAttrs>("AdaptiveAvgPool2dAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q = detail::adaptive_geom(op, in[0].shape, attrs_as<AdaptiveAvgPool2dAttrs>(op, a));
    out.push_back({in[0].dtype, Shape{q.N, q.C, q.Ho, q.Wo}});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q =
        detail::adaptive_geom(k.op, k.in[0].shape(), attrs_as<AdaptiveAvgPool2dAttrs>(k.op, k.attrs));
    const AnyTensor x = detail::contiguous_raw(k.in[0]);
    detail::visit_float(k, x.dtype(), [&]<class T>() {
      detail::avg_pool_run<true, false>(static_cast<const T*>(x.raw_data()), static_cast<T*>(k.out[0].raw_data()), q, true);
    });
  };
  d.cost = &detail::per_input_cost<1>;
  return d;
}()));

// adaptive_avg_pool2d_grad(g; output_size, input_shape).
MS_REGISTRATION(const OpDef& adaptive_avg_pool2d_grad_op, registry().add([] {
  OpDef d;
  d.name = "adaptive_avg_pool2d_grad";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "gradient of adaptive_avg_pool2d: each output gradient spread evenly over its cell";
  d.attr_schema = &attr_schema<AdaptiveAvgPool2dGradAttrs>("AdaptiveAvgPool2dGradAttrs");
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const auto at = attrs_as<AdaptiveAvgPool2dGradAttrs>(op, a);
    const Shape xs(at.input_shape);
    detail::PoolGeom q = detail::adaptive_geom(op, xs, at);
    Shape want{q.N, q.C, q.Ho, q.Wo};
    MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the pooled shape {} of input {}",
             op.name, shape_str(in[0].shape), shape_str(want), shape_str(xs));
    out.push_back({in[0].dtype, xs});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q =
        detail::adaptive_geom(k.op, k.out[0].shape(), attrs_as<AdaptiveAvgPool2dGradAttrs>(k.op, k.attrs));
    const AnyTensor g = detail::contiguous_raw(k.in[0]);
    detail::visit_float(k, g.dtype(), [&]<class T>() {
      detail::avg_pool_run<true, true>(static_cast<const T*>(g.raw_data()), static_cast<T*>(k.out[0].raw_data()), q, true);
    });
  };
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    return Cost{static_cast<double>(numel(out[0].shape)), detail::bytes_of(in) + detail::bytes_of(out)};
  };
  return d;
}()));

// ---- untyped API ------------------------------------------------------------------------------------

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL std::pair<AnyTensor, AnyTensor> max_pool2d_with_indices(const AnyTensor& x, Int2 kernel_size,
                                                                std::optional<Int2> stride, Int2 padding,
                                                                Int2 dilation, bool ceil_mode) {
  const AnyTensor in[1] = {x};
  const MaxPool2dAttrs a{kernel_size, stride.value_or(kernel_size), padding, dilation, ceil_mode};
  auto out = call(max_pool2d_op, in, to_attrs(a));
  return {out[0], out[1]};
}
MS_IMPL AnyTensor max_pool2d(const AnyTensor& x, Int2 kernel_size, std::optional<Int2> stride, Int2 padding,
                             Int2 dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).first;
}
MS_IMPL AnyTensor avg_pool2d(const AnyTensor& x, Int2 kernel_size, std::optional<Int2> stride, Int2 padding,
                             bool count_include_pad, bool ceil_mode, std::optional<std::int64_t> divisor_override) {
  const AvgPool2dAttrs a{kernel_size, stride.value_or(kernel_size), padding, ceil_mode, count_include_pad,
                         divisor_override};
  return call1(avg_pool2d_op, {x}, to_attrs(a));
}
MS_IMPL AnyTensor adaptive_avg_pool2d(const AnyTensor& x, Int2 output_size) {
  return call1(adaptive_avg_pool2d_op, {x}, to_attrs(AdaptiveAvgPool2dAttrs{output_size}));
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::ops
