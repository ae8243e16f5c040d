#pragma once
// Neural-network ops on NCHW tensors (category nn, float32 and float64): conv2d
// (im2col over blocks of images, parallel over the blocks, with its GEMMs on the
// ms::cpu_gemm() path, or oneDNN's convolution primitives with ms::cpu_conv(); see
// ops/dnnl.hpp), max/avg/adaptive-avg pooling,
// batch_norm (updates its running statistics in place, inside the kernel, so a
// replayed graph updates them too) and layer_norm, dropout (a random op that also
// returns its mask), embedding, and the losses cross_entropy (fused log_softmax),
// nll_loss and mse_loss. Belongs here: their definitions, inference, kernels and
// costs, and the backward ops their gradient rules need (conv2d_grad_input,
// conv2d_grad_weight, max_pool2d_grad, ...), which are ordinary registered ops.
// The gradient table rows live in autograd/nn_rules.hpp. Kernels never dispatch.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <Eigen/Core>
#include "../core/simd.hpp"

#include "../core/parallel.hpp"
#include "../core/random.hpp"
#include "dnnl.hpp"
#include "factory.hpp"
#include "linalg.hpp"
#include "views.hpp"

namespace ms::ops {

/// A (height, width) pair for kernel sizes, strides, paddings and dilations; one integer
/// stands for both: conv2d(x, w, {}, 2) is stride 2, conv2d(x, w, {}, {2, 1}) is 2 by 1.
struct Int2 {
  std::int64_t h = 0, w = 0;
  constexpr Int2(std::int64_t v) : h(v), w(v) {}  // NOLINT: implicit by design
  constexpr Int2(std::int64_t h_, std::int64_t w_) : h(h_), w(w_) {}
  IntList list() const { return {h, w}; }
};

/// 2-D convolution (cross-correlation, like PyTorch) of x (N, C, H, W) with weight
/// (O, C / groups, kH, kW) and an optional bias (O,); result (N, O, Ho, Wo) with
/// Ho = (H + 2 * padding.h - dilation.h * (kH - 1) - 1) / stride.h + 1.
inline AnyTensor conv2d(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b = AnyTensor(), Int2 stride = 1,
                        Int2 padding = 0, Int2 dilation = 1, std::int64_t groups = 1);
/// Max pooling over kH x kW windows (stride defaults to the kernel size; padding counts as -inf
/// and may be at most half the kernel). NaN in a window propagates.
/// dilation spaces the window's taps; ceil_mode rounds the output size up (PyTorch's rules).
inline AnyTensor max_pool2d(const AnyTensor& x, Int2 kernel_size, std::optional<Int2> stride = std::nullopt,
                            Int2 padding = 0, Int2 dilation = 1, bool ceil_mode = false);
/// max_pool2d and the int64 index (ih * W + iw within its plane) of each maximum.
inline std::pair<AnyTensor, AnyTensor> max_pool2d_with_indices(const AnyTensor& x, Int2 kernel_size,
                                                               std::optional<Int2> stride = std::nullopt,
                                                               Int2 padding = 0, Int2 dilation = 1,
                                                               bool ceil_mode = false);
/// Average pooling; with count_include_pad the padded zeros count in the divisor (PyTorch's default);
/// ceil_mode rounds the output size up; divisor_override replaces every window's divisor.
/// (count_include_pad comes before ceil_mode here, unlike torch, so older calls keep their meaning.)
inline AnyTensor avg_pool2d(const AnyTensor& x, Int2 kernel_size, std::optional<Int2> stride = std::nullopt,
                            Int2 padding = 0, bool count_include_pad = true, bool ceil_mode = false,
                            std::optional<std::int64_t> divisor_override = std::nullopt);
/// Average pooling to a fixed output size: output cell i covers input rows
/// [floor(i * H / Ho), ceil((i + 1) * H / Ho)) (and likewise for columns).
inline AnyTensor adaptive_avg_pool2d(const AnyTensor& x, Int2 output_size);
/// Batch normalization over axis 1 of x (N, C, ...). weight/bias (C,) may be undefined (1 and 0).
/// training: normalizes with the batch statistics (biased variance) and, when running_mean and
/// running_var are given, updates them IN PLACE: r = (1 - momentum) * r + momentum * batch stat
/// (the variance unbiased). Eval: normalizes with the running statistics.
inline AnyTensor batch_norm(const AnyTensor& x, const AnyTensor& weight, const AnyTensor& bias,
                            const AnyTensor& running_mean, const AnyTensor& running_var, bool training,
                            double momentum = 0.1, double eps = 1e-5);
/// Layer normalization over the trailing dims `normalized_shape`; weight/bias of that shape, optional.
inline AnyTensor layer_norm(const AnyTensor& x, const IntList& normalized_shape, const AnyTensor& weight = AnyTensor(),
                            const AnyTensor& bias = AnyTensor(), double eps = 1e-5);
/// Zeroes each element with probability p and scales the rest by 1 / (1 - p) (training only;
/// identity otherwise). Draws from the default generator, or from its own when `seed` is given.
inline AnyTensor dropout(const AnyTensor& x, double p = 0.5, bool training = true,
                         std::optional<std::uint64_t> seed = std::nullopt);
/// dropout and its mask (same dtype as x: 0 or 1 / (1 - p)), so that y = x * mask.
inline std::pair<AnyTensor, AnyTensor> dropout_with_mask(const AnyTensor& x, double p = 0.5, bool training = true,
                                                         std::optional<std::uint64_t> seed = std::nullopt);
/// Rows of weight (V, D) picked by an int64/int32 index of any shape: result index.shape + (D,).
inline AnyTensor embedding(const AnyTensor& weight, const AnyTensor& index);
/// Cross entropy of logits (N, C) against int64 class targets (N,), computed with a fused,
/// numerically stable log_softmax. reduction "mean" (over non-ignored rows), "sum" or "none";
/// label_smoothing mixes the one-hot target with the uniform distribution; rows whose target is
/// ignore_index contribute nothing.
inline AnyTensor cross_entropy(const AnyTensor& logits, const AnyTensor& target, std::string_view reduction = "mean",
                               double label_smoothing = 0.0, std::int64_t ignore_index = -100);
/// Negative log likelihood of log-probabilities (N, C) at int64 targets (N,).
inline AnyTensor nll_loss(const AnyTensor& log_probs, const AnyTensor& target, std::string_view reduction = "mean",
                          std::int64_t ignore_index = -100);
/// Mean (or sum, or elementwise) squared error of two tensors of the same shape.
inline AnyTensor mse_loss(const AnyTensor& a, const AnyTensor& b, std::string_view reduction = "mean");

}  // namespace ms::ops

namespace ms {
using ops::Int2;
/// 2-D convolution (see ops::conv2d); pass an empty tensor for no bias.
template <Element T>
Tensor<T> conv2d(const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>& b = Tensor<T>(), Int2 stride = 1,
                 Int2 padding = 0, Int2 dilation = 1, std::int64_t groups = 1) {
  return ops::conv2d(x, w, b, stride, padding, dilation, groups);
}
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
/// Batch normalization (see ops::batch_norm); training updates running_mean/running_var in place.
template <Element T>
Tensor<T> batch_norm(const Tensor<T>& x, const Tensor<T>& weight, const Tensor<T>& bias,
                     const Tensor<T>& running_mean, const Tensor<T>& running_var, bool training,
                     double momentum = 0.1, double eps = 1e-5) {
  return ops::batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps);
}
/// Layer normalization over the trailing `normalized_shape` dims.
template <Element T>
Tensor<T> layer_norm(const Tensor<T>& x, const ops::IntList& normalized_shape, const Tensor<T>& weight = Tensor<T>(),
                     const Tensor<T>& bias = Tensor<T>(), double eps = 1e-5) {
  return ops::layer_norm(x, normalized_shape, weight, bias, eps);
}
/// Dropout (see ops::dropout).
template <Element T>
Tensor<T> dropout(const Tensor<T>& x, double p = 0.5, bool training = true,
                  std::optional<std::uint64_t> seed = std::nullopt) {
  return ops::dropout(x, p, training, seed);
}
/// Embedding lookup: rows of weight (V, D) at `index`.
template <Element T, Element I>
Tensor<T> embedding(const Tensor<T>& weight, const Tensor<I>& index) { return ops::embedding(weight, index); }
/// Cross entropy of logits (N, C) and int64 targets (N,).
template <Element T>
Tensor<T> cross_entropy(const Tensor<T>& logits, const Tensor<std::int64_t>& target, std::string_view reduction = "mean",
                        double label_smoothing = 0.0, std::int64_t ignore_index = -100) {
  return ops::cross_entropy(logits, target, reduction, label_smoothing, ignore_index);
}
/// Negative log likelihood of log-probabilities (N, C) at int64 targets (N,).
template <Element T>
Tensor<T> nll_loss(const Tensor<T>& log_probs, const Tensor<std::int64_t>& target, std::string_view reduction = "mean",
                   std::int64_t ignore_index = -100) {
  return ops::nll_loss(log_probs, target, reduction, ignore_index);
}
/// Mean squared error ("mean", "sum" or "none").
template <Element T>
Tensor<T> mse_loss(const Tensor<T>& a, const Tensor<T>& b, std::string_view reduction = "mean") {
  return ops::mse_loss(a, b, reduction);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {
namespace detail {

// ---- shared helpers ---------------------------------------------------------------------------

inline std::string nn_ints_str(const IntList& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }


/// Calls f(generator): a local generator seeded from the "seed" attribute when present, else
/// the process-wide default generator (locked for the call).
template <class F>
void with_nn_generator(const Attrs& a, F&& f) {
  if (a.has("seed")) {
    Generator g(static_cast<std::uint64_t>(a.i("seed")));
    f(g);
  } else {
    auto g = default_generator();
    f(*g);
  }
}

/// A (h, w) attribute: absent gives `dflt`; anything but two values is a ValueError.
inline Int2 pair_attr(const OpDef& op, const Attrs& a, std::string_view key, Int2 dflt) {
  if (!a.has(key)) return dflt;
  const IntList& v = a.ints(key);
  MS_CHECK(v.size() == 2, ValueError, "{}: attribute '{}' must hold 2 values (height, width), got {}", op.name, key,
           nn_ints_str(v));
  return {v[0], v[1]};
}

/// A shape attribute of exactly `rank` non-negative values (the forward shape a backward op rebuilds).
inline Shape shape_attr_n(const OpDef& op, const Attrs& a, std::string_view key, int rank) {
  const IntList& v = a.ints(key);
  MS_CHECK(static_cast<int>(v.size()) == rank, ValueError, "{}: attribute '{}' must hold {} values, got {}", op.name,
           key, rank, nn_ints_str(v));
  for (auto d : v) MS_CHECK(d >= 0, ValueError, "{}: attribute '{}' has a negative value: {}", op.name, key, nn_ints_str(v));
  return Shape(v);
}

inline double bytes_of(std::span<const TensorMeta> ms) {
  double b = 0;
  for (auto& m : ms) b += static_cast<double>(numel(m.shape)) * static_cast<double>(dtype_size(m.dtype));
  return b;
}

/// Cost of an op doing F flops per element of its first output.
template <int F>
Cost per_output_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return {static_cast<double>(numel(out[0].shape)) * F, bytes_of(in) + bytes_of(out)};
}
/// Cost of an op doing F flops per element of its first input.
template <int F>
Cost per_input_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return {static_cast<double>(numel(in[0].shape)) * F, bytes_of(in) + bytes_of(out)};
}

inline void check_float_dtype(const OpDef& op, const TensorMeta& m, std::string_view what) {
  MS_CHECK(m.dtype == DType::f32 || m.dtype == DType::f64, DTypeError, "{}: {} must be float32 or float64, got {}",
           op.name, what, m.dtype);
}

/// Every nn kernel is instantiated for float and double only.
template <class F>
void visit_float(const KernelArgs& k, DType d, F&& f) {
  if (d == DType::f32) f.template operator()<float>();
  else if (d == DType::f64) f.template operator()<double>();
  else MS_THROW(DTypeError, "{}: no CPU kernel for dtype {}", k.op.name, d);
}

/// The reduction attribute: "mean", "sum" or "none".
enum class Reduction : std::uint8_t { mean, sum, none };
inline Reduction reduction_attr(const OpDef& op, const Attrs& a) {
  const std::string& r = a.has("reduction") ? a.str("reduction") : std::string("mean");
  if (r == "mean") return Reduction::mean;
  if (r == "sum") return Reduction::sum;
  if (r == "none") return Reduction::none;
  MS_THROW(ValueError, "{}: reduction must be \"mean\", \"sum\" or \"none\", got \"{}\"", op.name, r);
}

/// Range of output positions o in [0, n_out) whose input position o * s + off lies in [0, n_in).
inline void valid_range(std::int64_t off, std::int64_t s, std::int64_t n_in, std::int64_t n_out, std::int64_t& lo,
                        std::int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = n_in - off <= 0 ? 0 : (n_in - off - 1) / s + 1;
  lo = std::min(lo, n_out);
  hi = std::clamp(hi, lo, n_out);
}

/// Splits [0, n) into `chunks` nearly equal ranges; range c is [chunk_begin(c), chunk_begin(c + 1)).
inline std::int64_t chunk_begin(std::int64_t n, std::int64_t chunks, std::int64_t c) { return n * c / chunks; }

// ---- conv2d -------------------------------------------------------------------------------------

/// The geometry of one convolution (shared by the forward and both backward ops).
struct ConvGeom {
  std::int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, G, Ho, Wo;
  std::int64_t Cg() const { return C / G; }
  std::int64_t Og() const { return O / G; }
  std::int64_t K() const { return Cg() * kh * kw; }  ///< rows of the im2col matrix
  std::int64_t P() const { return Ho * Wo; }         ///< columns of the im2col matrix
};

/// Validates shapes and attributes of a convolution of an input of shape xs with a weight of shape ws.
inline ConvGeom conv_geom(const OpDef& op, const Shape& xs, const Shape& ws, const Attrs& a) {
  MS_CHECK(xs.rank() == 4, ShapeError, "{}: input must be 4-D (N, C, H, W), got shape {}", op.name, shape_str(xs));
  MS_CHECK(ws.rank() == 4, ShapeError, "{}: weight must be 4-D (out_channels, in_channels / groups, kH, kW), got shape {}",
           op.name, shape_str(ws));
  Int2 s = pair_attr(op, a, "stride", 1), p = pair_attr(op, a, "padding", 0), d = pair_attr(op, a, "dilation", 1);
  std::int64_t G = a.i("groups", 1);
  MS_CHECK(s.h >= 1 && s.w >= 1, ValueError, "{}: stride must be positive, got ({}, {})", op.name, s.h, s.w);
  MS_CHECK(d.h >= 1 && d.w >= 1, ValueError, "{}: dilation must be positive, got ({}, {})", op.name, d.h, d.w);
  MS_CHECK(p.h >= 0 && p.w >= 0, ValueError, "{}: padding must be non-negative, got ({}, {})", op.name, p.h, p.w);
  MS_CHECK(G >= 1, ValueError, "{}: groups must be positive, got {}", op.name, G);
  ConvGeom q{xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], s.h, s.w, p.h, p.w, d.h, d.w, G, 0, 0};
  MS_CHECK(q.C % G == 0 && q.O % G == 0, ValueError,
           "{}: groups {} must divide both in_channels {} of input {} and out_channels {} of weight {}", op.name, G, q.C,
           shape_str(xs), q.O, shape_str(ws));
  MS_CHECK(ws[1] == q.C / G, ShapeError,
           "{}: weight {} expects {} input channels per group, but input {} has {} channels in {} group(s)", op.name,
           shape_str(ws), ws[1], shape_str(xs), q.C, G);
  const std::int64_t ekh = q.dh * (q.kh - 1) + 1, ekw = q.dw * (q.kw - 1) + 1;
  MS_CHECK(q.kh >= 1 && q.kw >= 1 && ekh <= q.H + 2 * q.ph && ekw <= q.W + 2 * q.pw, ShapeError,
           "{}: kernel ({}, {}) with dilation ({}, {}) does not fit the padded input ({}, {}) of input {}", op.name,
           q.kh, q.kw, q.dh, q.dw, q.H + 2 * q.ph, q.W + 2 * q.pw, shape_str(xs));
  q.Ho = (q.H + 2 * q.ph - ekh) / q.sh + 1;
  q.Wo = (q.W + 2 * q.pw - ekw) / q.sw + 1;
  return q;
}

inline Attrs conv_attrs(Int2 stride, Int2 padding, Int2 dilation, std::int64_t groups) {
  return Attrs{{"stride", stride.list()}, {"padding", padding.list()}, {"dilation", dilation.list()}, {"groups", groups}};
}

/// dst[0, n) = src[0, n) in SIMD batches. With `spill` the last batch is whole: it also
/// reads and writes up to one batch past n (the caller's next run overwrites what it
/// wrote there). Inline, where a call to memmove per run of a few dozen elements
/// cost more than the copy (im2col of a 5 x 5 kernel is 25 such runs per output row).
template <class T>
inline void copy_run(const T* src, T* dst, std::int64_t n, bool spill) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t L = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  if (spill) {
    for (; i < n; i += L) B::load_unaligned(src + i).store_unaligned(dst + i);
    return;
  }
  for (; i + L <= n; i += L) B::load_unaligned(src + i).store_unaligned(dst + i);
  for (; i < n; ++i) dst[i] = src[i];
}

/// dst[0, n) += src[0, n) in SIMD batches.
template <class T>
inline void add_run(const T* src, T* dst, std::int64_t n) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t L = static_cast<std::int64_t>(B::size);
  std::int64_t i = 0;
  for (; i + L <= n; i += L) (B::load_unaligned(dst + i) + B::load_unaligned(src + i)).store_unaligned(dst + i);
  for (; i < n; ++i) dst[i] += src[i];
}

/// im2col of a stride-1, dilation-1 convolution over planes of hs x ws with no padding
/// left (the caller pads): each output row of a kernel offset is one run of Wo elements.
/// When a run is at least a batch long, every run but the last of a kernel offset spills
/// into the next run's place, which is written next; the spilled reads (under a batch)
/// end inside the following input row of the same plane.
template <class T>
void im2col_unit(const T* xg, const ConvGeom& q, std::int64_t hs, std::int64_t ws, T* col, std::int64_t ld) {
  const std::int64_t Ho = q.Ho, Wo = q.Wo;
  const bool spill = Wo >= static_cast<std::int64_t>(xsimd::batch<T>::size);
  for (std::int64_t c = 0; c < q.Cg(); ++c)
    for (std::int64_t ki = 0; ki < q.kh; ++ki)
      for (std::int64_t kj = 0; kj < q.kw; ++kj) {
        T* row = col + ((c * q.kh + ki) * q.kw + kj) * ld;
        const T* src = xg + (c * hs + ki) * ws + kj;
        for (std::int64_t oh = 0; oh < Ho; ++oh) copy_run(src + oh * ws, row + oh * Wo, Wo, spill && oh + 1 < Ho);
      }
}

/// col (K, P) = the receptive fields of one image's channel group xg (Cg, H, W); rows of
/// col are `ld` elements apart (ld = P for one image, B * P for a block of B images).
template <class T>
void im2col(const T* xg, const ConvGeom& q, T* col, std::int64_t ld) {
  const std::int64_t P = q.P();
  if (P == 0) return;
  if (q.sh == 1 && q.sw == 1 && q.dh == 1 && q.dw == 1) {  // the common case: runs of whole rows
    if (q.ph == 0 && q.pw == 0) return im2col_unit(xg, q, q.H, q.W, col, ld);
    // Padded: copy the planes into a zero-bordered scratch once, then read it as unpadded.
    const std::int64_t hs = q.H + 2 * q.ph, ws = q.W + 2 * q.pw;
    thread_local std::vector<T> pad;
    pad.assign(static_cast<std::size_t>(q.Cg() * hs * ws), T(0));
    for (std::int64_t c = 0; c < q.Cg(); ++c)
      for (std::int64_t h = 0; h < q.H; ++h) {
        copy_run(xg + (c * q.H + h) * q.W, pad.data() + (c * hs + h + q.ph) * ws + q.pw, q.W, false);
      }
    return im2col_unit(pad.data(), q, hs, ws, col, ld);
  }
  for (std::int64_t c = 0; c < q.Cg(); ++c) {
    const T* xc = xg + c * q.H * q.W;
    for (std::int64_t ki = 0; ki < q.kh; ++ki) {
      std::int64_t oh_lo, oh_hi;
      valid_range(ki * q.dh - q.ph, q.sh, q.H, q.Ho, oh_lo, oh_hi);
      for (std::int64_t kj = 0; kj < q.kw; ++kj) {
        T* row = col + ((c * q.kh + ki) * q.kw + kj) * ld;
        std::int64_t ow_lo, ow_hi;
        const std::int64_t woff = kj * q.dw - q.pw;
        valid_range(woff, q.sw, q.W, q.Wo, ow_lo, ow_hi);
        std::fill(row, row + oh_lo * q.Wo, T(0));
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          T* r = row + oh * q.Wo;
          const T* xr = xc + (oh * q.sh + ki * q.dh - q.ph) * q.W;  // input row; column ow reads xr[ow * sw + woff]
          std::fill(r, r + ow_lo, T(0));
          if (q.sw == 1 && ow_hi > ow_lo) std::copy(xr + (ow_lo + woff), xr + (ow_hi + woff), r + ow_lo);
          else if (q.sw != 1)
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) r[ow] = xr[ow * q.sw + woff];
          std::fill(r + ow_hi, r + q.Wo, T(0));
        }
        std::fill(row + oh_hi * q.Wo, row + P, T(0));
      }
    }
  }
}

/// xg (Cg, H, W) += the receptive fields in col (K, P), rows `ld` apart (the adjoint of im2col).
template <class T>
void col2im_add(const T* col, const ConvGeom& q, T* xg, std::int64_t ld) {
  for (std::int64_t c = 0; c < q.Cg(); ++c) {
    T* xc = xg + c * q.H * q.W;
    for (std::int64_t ki = 0; ki < q.kh; ++ki) {
      std::int64_t oh_lo, oh_hi;
      valid_range(ki * q.dh - q.ph, q.sh, q.H, q.Ho, oh_lo, oh_hi);
      for (std::int64_t kj = 0; kj < q.kw; ++kj) {
        const T* row = col + ((c * q.kh + ki) * q.kw + kj) * ld;
        std::int64_t ow_lo, ow_hi;
        const std::int64_t woff = kj * q.dw - q.pw;
        valid_range(woff, q.sw, q.W, q.Wo, ow_lo, ow_hi);
        for (std::int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const T* r = row + oh * q.Wo;
          T* xr = xc + (oh * q.sh + ki * q.dh - q.ph) * q.W;
          if (q.sw == 1) add_run(r + ow_lo, xr + ow_lo + woff, ow_hi - ow_lo);
          else
            for (std::int64_t ow = ow_lo; ow < ow_hi; ++ow) xr[ow * q.sw + woff] += r[ow];
        }
      }
    }
  }
}


/// Images per GEMM in the convolution kernels. One image of a small layer is a thin GEMM
/// (LeNet's first layer: 6 x 25 times 25 x 784) that Eigen runs far below its peak; the
/// receptive fields of a block of images side by side give about 4096 columns instead,
/// as long as the block's im2col matrix (K x columns) stays within half of a 1 MiB L2
/// in float (131072 elements): LeNet's second layer (K = 150) at 4096 columns wrote and
/// reread 2.4 MB through the last-level cache. Fixed by the geometry alone, so the
/// results do not depend on the thread count.
inline std::int64_t conv_block_images(const ConvGeom& q) {
  const std::int64_t P = std::max<std::int64_t>(1, q.P()), K = std::max<std::int64_t>(1, q.K());
  const std::int64_t by_width = 4096 / P, by_cache = 131072 / (K * P);
  return std::clamp<std::int64_t>(std::min(by_width, by_cache), 1, std::max<std::int64_t>(1, q.N));
}

/// Runs body(n0, nb, col, buf) for the image blocks [n0, n0 + nb) of the batch, in parallel
/// over blocks; col holds K x (nb P) and buf Og x (nb P) elements of per-thread scratch.
template <class T, class Body>
void for_each_conv_block(const ConvGeom& q, Body&& body) {
  const std::int64_t B = conv_block_images(q), blocks = (q.N + B - 1) / B;
  const std::int64_t cols = B * q.P();
  sync_eigen_threads();  // linalg.hpp: Eigen runs serially inside a parallel region
  parallel_for(blocks, 1, [&](std::int64_t bb, std::int64_t be) {
    // Scratch that every use writes in full before reading: not zeroed (for a 16 x 150
    // kernel that memset was 2.4 MB per call).
    auto col = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(q.K() * cols));
    auto buf = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(q.Og() * cols));
    for (std::int64_t b = bb; b < be; ++b) {
      const std::int64_t n0 = b * B;
      body(n0, std::min(B, q.N - n0), col.get(), buf.get());
    }
  }, 1);
}

/// buf (Og, nb P) <- g[n0 .. n0 + nb) of group g0 (each image's (Og, P) block side by side).
template <class T>
void gather_conv_grad(const T* gp, const ConvGeom& q, std::int64_t n0, std::int64_t nb, std::int64_t g0, T* buf) {
  const std::int64_t P = q.P(), Og = q.Og(), ld = nb * P;
  for (std::int64_t i = 0; i < nb; ++i)
    for (std::int64_t o = 0; o < Og; ++o) {
      const T* src = gp + ((n0 + i) * q.O + g0 * Og + o) * P;
      std::copy(src, src + P, buf + o * ld + i * P);
    }
}

#if defined(MS_HAVE_DNNL)
/// The three passes of a convolution that oneDNN runs.
enum class ConvPass : std::int64_t { forward, grad_input, grad_weight };

/// Whether a float convolution goes to oneDNN's convolution primitives (ms::cpu_conv() is
/// CpuConv::dnnl and no dimension is empty); otherwise ms's im2col kernels run it.
inline bool conv_on_dnnl(const ConvGeom& q) {
  return cpu_conv() == CpuConv::dnnl && q.N > 0 && q.C > 0 && q.O > 0 && q.Ho > 0 && q.Wo > 0;
}

/// One pass of a float convolution on oneDNN, on ms's own contiguous NCHW / OIHW buffers
/// (no reorders): forward y = conv(a = x, b = w) + bias; grad_input out = the input gradient
/// of a = g with b = w; grad_weight out = the weight gradient of a = g with b = x. The
/// primitive comes from the cache (made on first use of the geometry).
inline void conv_dnnl(ConvPass pass, const OpDef& op, const ConvGeom& q, const float* a, const float* b,
                      const float* bias, float* out) {
  const auto shapes = [&] {
    return fmt::format("input ({}, {}, {}, {}), weight ({}, {}, {}, {}), output ({}, {}, {}, {})", q.N, q.C, q.H, q.W,
                       q.O, q.Cg(), q.kh, q.kw, q.N, q.O, q.Ho, q.Wo);
  };
  const bool has_bias = pass == ConvPass::forward && bias != nullptr;
  const DnnlKey key{static_cast<std::int64_t>(pass), q.N, q.C, q.H, q.W, q.O, q.kh, q.kw, q.sh, q.sw,
                    q.ph, q.pw, q.dh, q.dw, q.G, has_bias ? 1 : 0};
  const dnnl_memory_desc_t src = dnnl_plain_md({q.N, q.C, q.H, q.W}, dnnl_nchw, op.name, "");
  const dnnl_memory_desc_t dst = dnnl_plain_md({q.N, q.O, q.Ho, q.Wo}, dnnl_nchw, op.name, "");
  const dnnl_memory_desc_t wei = q.G > 1 ? dnnl_plain_md({q.G, q.Og(), q.Cg(), q.kh, q.kw}, dnnl_goihw, op.name, "")
                                         : dnnl_plain_md({q.O, q.C, q.kh, q.kw}, dnnl_oihw, op.name, "");
  const dnnl_memory_desc_t bmd = dnnl_plain_md({q.O}, dnnl_a, op.name, "");
  const dnnl_dims_t strides{q.sh, q.sw}, dilates{q.dh - 1, q.dw - 1}, pad{q.ph, q.pw};
  auto prim = DnnlCache::instance().get(key, [&] {
    const std::string sh = shapes();
    dnnl_convolution_desc_t fwd;
    dnnl_check(dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &src, &wei,
                                                          has_bias ? &bmd : nullptr, &dst, strides, dilates, pad, pad),
               op.name, "convolution descriptor", sh);
    if (pass == ConvPass::forward) return make_dnnl_primitive(&fwd, nullptr, op.name, sh);
    // The backward passes need the forward primitive descriptor as a hint.
    dnnl_primitive_desc_t hint = nullptr;
    dnnl_check(dnnl_primitive_desc_create(&hint, &fwd, nullptr, dnnl_engine(), nullptr), op.name,
               "forward hint descriptor", sh);
    dnnl_convolution_desc_t bwd;
    dnnl_status_t st =
        pass == ConvPass::grad_input
            ? dnnl_dilated_convolution_backward_data_desc_init(&bwd, dnnl_convolution_direct, &src, &wei, &dst, strides,
                                                               dilates, pad, pad)
            : dnnl_dilated_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &src, &wei, nullptr, &dst,
                                                                  strides, dilates, pad, pad);
    if (st != dnnl_success) dnnl_primitive_desc_destroy(hint);
    dnnl_check(st, op.name, "backward convolution descriptor", sh);
    try {
      auto p = make_dnnl_primitive(&bwd, hint, op.name, sh);
      dnnl_primitive_desc_destroy(hint);
      return p;
    } catch (...) {
      dnnl_primitive_desc_destroy(hint);
      throw;
    }
  });
  switch (pass) {
    case ConvPass::forward:
      if (has_bias)
        dnnl_execute<4>(*prim, {{{DNNL_ARG_SRC, &src, a}, {DNNL_ARG_WEIGHTS, &wei, b}, {DNNL_ARG_BIAS, &bmd, bias},
                                 {DNNL_ARG_DST, &dst, out}}}, op.name, shapes);
      else
        dnnl_execute<3>(*prim, {{{DNNL_ARG_SRC, &src, a}, {DNNL_ARG_WEIGHTS, &wei, b}, {DNNL_ARG_DST, &dst, out}}},
                        op.name, shapes);
      break;
    case ConvPass::grad_input:
      dnnl_execute<3>(*prim, {{{DNNL_ARG_DIFF_DST, &dst, a}, {DNNL_ARG_WEIGHTS, &wei, b}, {DNNL_ARG_DIFF_SRC, &src, out}}},
                      op.name, shapes);
      break;
    case ConvPass::grad_weight:
      dnnl_execute<3>(*prim, {{{DNNL_ARG_DIFF_DST, &dst, a}, {DNNL_ARG_SRC, &src, b}, {DNNL_ARG_DIFF_WEIGHTS, &wei, out}}},
                      op.name, shapes);
      break;
  }
}
#endif

template <class T>
void conv2d_run(const KernelArgs& k, const ConvGeom& q) {
  const AnyTensor x = contiguous_raw(k.in[0]), w = contiguous_raw(k.in[1]);
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(w.raw_data());
  T* yp = static_cast<T*>(k.out[0].raw_data());
  const T* bp = k.in.size() > 2 ? static_cast<const T*>(k.in[2].raw_data()) : nullptr;
  const std::int64_t bs = bp ? k.in[2].strides()[0] : 0;
  const std::int64_t Cg = q.Cg(), Og = q.Og(), K = q.K(), P = q.P();
  if (k.out[0].numel() == 0) return;
#if defined(MS_HAVE_DNNL)
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_dnnl(q)) {
      const AnyTensor b = bp ? contiguous_raw(k.in[2]) : AnyTensor();
      conv_dnnl(ConvPass::forward, k.op, q, xp, wp, bp ? static_cast<const float*>(b.raw_data()) : nullptr, yp);
      return;
    }
  }
#endif
  for_each_conv_block<T>(q, [&](std::int64_t n0, std::int64_t nb, T* col, T* buf) {
    const std::int64_t ld = nb * P;
    for (std::int64_t g = 0; g < q.G; ++g) {
      for (std::int64_t i = 0; i < nb; ++i) im2col(xp + ((n0 + i) * q.C + g * Cg) * q.H * q.W, q, col + i * P, ld);
      // buf (Og, ld) = w_g (Og, K) @ col (K, ld), on the selected GEMM path.
      gemm(wp + g * Og * K, MatRef{Og, K, false, std::max<std::int64_t>(K, 1)}, col, MatRef{K, ld, false, ld}, buf, false);
      for (std::int64_t i = 0; i < nb; ++i)
        for (std::int64_t o = 0; o < Og; ++o) {
          const T* src = buf + o * ld + i * P;
          T* dst = yp + ((n0 + i) * q.O + g * Og + o) * P;
          if (bp) {
            const T bv = bp[(g * Og + o) * bs];
            for (std::int64_t j = 0; j < P; ++j) dst[j] = src[j] + bv;
          } else {
            std::copy(src, src + P, dst);
          }
        }
    }
  });
}

/// gx (N, C, H, W) = the adjoint of the convolution applied to g (N, O, Ho, Wo): col2im(w^T g).
template <class T>
void conv2d_grad_input_run(const KernelArgs& k, const ConvGeom& q) {
  const AnyTensor g = contiguous_raw(k.in[0]), w = contiguous_raw(k.in[1]);
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* wp = static_cast<const T*>(w.raw_data());
  T* xp = static_cast<T*>(k.out[0].raw_data());
  const std::int64_t Cg = q.Cg(), Og = q.Og(), K = q.K(), P = q.P();
  if (k.out[0].numel() == 0) return;
#if defined(MS_HAVE_DNNL)
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_dnnl(q)) return conv_dnnl(ConvPass::grad_input, k.op, q, gp, wp, nullptr, xp);
  }
#endif
  for_each_conv_block<T>(q, [&](std::int64_t n0, std::int64_t nb, T* col, T* buf) {
    const std::int64_t ld = nb * P;
    std::fill(xp + n0 * q.C * q.H * q.W, xp + (n0 + nb) * q.C * q.H * q.W, T(0));
    for (std::int64_t g0 = 0; g0 < q.G; ++g0) {
      gather_conv_grad(gp, q, n0, nb, g0, buf);
      // col (K, ld) = w_g^T (K, Og; w_g read column-major) @ buf (Og, ld).
      gemm(wp + g0 * Og * K, MatRef{K, Og, true, std::max<std::int64_t>(K, 1)}, buf, MatRef{Og, ld, false, ld}, col, false);
      for (std::int64_t i = 0; i < nb; ++i) col2im_add(col + i * P, q, xp + ((n0 + i) * q.C + g0 * Cg) * q.H * q.W, ld);
    }
  });
}

/// Batches per partial sum of conv2d_grad_weight: fixed, so the summation order (and the
/// rounding) does not depend on the thread count.
inline constexpr std::int64_t kConvWeightChunks = 8;

/// gw (O, Cg, kH, kW) = sum over the batch of g_n (Og, P) @ im2col(x_n)^T, per group; the
/// images of a chunk are taken in blocks (one GEMM per block, as in the forward kernel).
template <class T>
void conv2d_grad_weight_run(const KernelArgs& k, const ConvGeom& q) {
  const AnyTensor g = contiguous_raw(k.in[0]), x = contiguous_raw(k.in[1]);
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  T* wp = static_cast<T*>(k.out[0].raw_data());
#if defined(MS_HAVE_DNNL)
  if constexpr (std::is_same_v<T, float>) {
    if (conv_on_dnnl(q) && k.out[0].numel() > 0) return conv_dnnl(ConvPass::grad_weight, k.op, q, gp, xp, nullptr, wp);
  }
#endif
  const std::int64_t Cg = q.Cg(), Og = q.Og(), K = q.K(), P = q.P(), wsize = q.O * K;
  const std::int64_t chunks = std::max<std::int64_t>(1, std::min(q.N, kConvWeightChunks));
  const std::int64_t B = conv_block_images(q);
  std::vector<T> part(static_cast<std::size_t>(chunks * wsize), T(0));
  sync_eigen_threads();
  parallel_for(chunks, 1, [&](std::int64_t cb, std::int64_t ce) {
    const std::int64_t cols = std::min(B, (q.N + chunks - 1) / chunks) * P;
    auto col = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(K * cols));
    auto buf = std::make_unique_for_overwrite<T[]>(static_cast<std::size_t>(Og * cols));
    for (std::int64_t c = cb; c < ce; ++c) {
      T* acc = part.data() + c * wsize;
      const std::int64_t end = chunk_begin(q.N, chunks, c + 1);
      for (std::int64_t n0 = chunk_begin(q.N, chunks, c); n0 < end; n0 += B) {
        const std::int64_t nb = std::min(B, end - n0), ld = nb * P;
        for (std::int64_t g0 = 0; g0 < q.G; ++g0) {
          for (std::int64_t i = 0; i < nb; ++i) im2col(xp + ((n0 + i) * q.C + g0 * Cg) * q.H * q.W, q, col.get() + i * P, ld);
          gather_conv_grad(gp, q, n0, nb, g0, buf.get());
          // acc_g (Og, K) += buf (Og, ld) @ col^T (ld, K; col read column-major).
          gemm(buf.get(), MatRef{Og, ld, false, ld}, col.get(), MatRef{ld, K, true, ld}, acc + g0 * Og * K, true);
        }
      }
    }
  }, 1);
  std::copy(part.begin(), part.begin() + wsize, wp);
  for (std::int64_t c = 1; c < chunks; ++c)
    for (std::int64_t i = 0; i < wsize; ++i) wp[i] += part[static_cast<std::size_t>(c * wsize + i)];
}

inline Cost conv_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&,
                      const ConvGeom& q) {
  return {2.0 * static_cast<double>(q.N * q.O * q.P() * q.K()), bytes_of(in) + bytes_of(out)};
}

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

/// Validates a pooling of an input of shape xs (kernel_size, stride = kernel_size, padding).
inline PoolGeom pool_geom(const OpDef& op, const Shape& xs, const Attrs& a) {
  MS_CHECK(xs.rank() == 4, ShapeError, "{}: input must be 4-D (N, C, H, W), got shape {}", op.name, shape_str(xs));
  MS_CHECK(a.has("kernel_size"), ValueError, "{}: attribute 'kernel_size' is missing", op.name);
  Int2 kz = pair_attr(op, a, "kernel_size", 1);
  Int2 s = pair_attr(op, a, "stride", kz), p = pair_attr(op, a, "padding", 0), d = pair_attr(op, a, "dilation", 1);
  const bool ceil_mode = a.b("ceil_mode", false);
  const std::int64_t divisor = a.i("divisor_override", 0);
  MS_CHECK(kz.h >= 1 && kz.w >= 1, ValueError, "{}: kernel_size must be positive, got ({}, {})", op.name, kz.h, kz.w);
  MS_CHECK(d.h >= 1 && d.w >= 1, ValueError, "{}: dilation must be positive, got ({}, {})", op.name, d.h, d.w);
  MS_CHECK(!a.has("divisor_override") || divisor >= 1, ValueError, "{}: divisor_override must be positive, got {}",
           op.name, divisor);
  MS_CHECK(s.h >= 1 && s.w >= 1, ValueError, "{}: stride must be positive, got ({}, {})", op.name, s.h, s.w);
  MS_CHECK(p.h >= 0 && p.w >= 0 && 2 * p.h <= kz.h && 2 * p.w <= kz.w, ValueError,
           "{}: padding ({}, {}) must be non-negative and at most half of kernel_size ({}, {})", op.name, p.h, p.w,
           kz.h, kz.w);
  PoolGeom q{xs[0], xs[1], xs[2], xs[3], kz.h, kz.w, s.h, s.w, p.h, p.w, 0, 0};
  q.dh = d.h, q.dw = d.w, q.divisor = divisor;
  const std::int64_t eh = d.h * (kz.h - 1) + 1, ew = d.w * (kz.w - 1) + 1;  // the dilated window
  MS_CHECK(q.H >= 1 && q.W >= 1, ShapeError, "{}: input {} has an empty plane", op.name, shape_str(xs));
  MS_CHECK(eh <= q.H + 2 * p.h && ew <= q.W + 2 * p.w, ShapeError,
           "{}: {} ({}, {}) is larger than the padded input ({}, {}) of input {}", op.name,
           d.h == 1 && d.w == 1 ? "kernel_size" : "the dilated kernel", eh, ew, q.H + 2 * p.h, q.W + 2 * p.w,
           shape_str(xs));
  q.Ho = pool_out_size(q.H, eh, s.h, p.h, ceil_mode);
  q.Wo = pool_out_size(q.W, ew, s.w, p.w, ceil_mode);
  return q;
}

inline Attrs pool_attrs(Int2 kernel_size, std::optional<Int2> stride, Int2 padding) {
  return Attrs{{"kernel_size", kernel_size.list()}, {"stride", stride.value_or(kernel_size).list()},
               {"padding", padding.list()}};
}
/// pool_attrs plus the options that are set only when they differ from their defaults, so a
/// graph or frozen model without them reads and prints as before.
inline Attrs pool_attrs(Int2 kernel_size, std::optional<Int2> stride, Int2 padding, Int2 dilation, bool ceil_mode) {
  Attrs a = pool_attrs(kernel_size, stride, padding);
  if (dilation.h != 1 || dilation.w != 1) a.set("dilation", dilation.list());
  if (ceil_mode) a.set("ceil_mode", true);
  return a;
}

/// The backward ops of pooling: input 0 is the output gradient; attr input_shape the forward input's.
inline Shape pool_grad_shape(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, PoolGeom& q) {
  Shape xs = shape_attr_n(op, a, "input_shape", 4);
  q = pool_geom(op, xs, a);
  Shape want{q.N, q.C, q.Ho, q.Wo};
  MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the pooled shape {} of input {}",
           op.name, shape_str(in[0].shape), shape_str(want), shape_str(xs));
  return xs;
}

#if defined(__AVX2__)
/// One output row of a 2 x 2, stride-2 max pooling of float planes, eight outputs at a
/// time: the even and odd columns of the two input rows r0, r1 (row r0 starts at index
/// `base` of its plane, rows are W apart) are the window's four candidates, taken in
/// row-major order with max_pool_run's scalar rule (the first maximum wins, the first NaN
/// wins and stays). The last partial group loads and stores through lane masks.
inline void max_pool_2x2_row_avx2(const float* r0, const float* r1, std::int64_t base, std::int64_t W,
                                  std::int64_t Wo, float* y, std::int64_t* idx) {
  auto even = [](__m256 a, __m256 b) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  };
  auto odd = [](__m256 a, __m256 b) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
  };
  const __m256i cols = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i off01 = _mm256_set1_epi32(1), off10 = _mm256_set1_epi32(static_cast<int>(W)),
                off11 = _mm256_set1_epi32(static_cast<int>(W + 1));
  // Eight outputs from 16 columns of each row, p0 and p1; their first column is index b.
  // A partial group (n < 8 outputs) loads and stores through lane masks.
  auto group = [&]<bool Partial>(const float* p0, const float* p1, std::int64_t b, float* yo, std::int64_t* io,
                                 std::int64_t n) {
    __m256 a0, a1, b0, b1;
    __m256i m_lo, m_hi, m_out;
    if constexpr (Partial) {
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      m_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(2 * n)), lane);
      m_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(2 * n - 8)), lane);
      m_out = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane);
      a0 = _mm256_maskload_ps(p0, m_lo), a1 = _mm256_maskload_ps(p0 + 8, m_hi);
      b0 = _mm256_maskload_ps(p1, m_lo), b1 = _mm256_maskload_ps(p1 + 8, m_hi);
    } else {
      a0 = _mm256_loadu_ps(p0), a1 = _mm256_loadu_ps(p0 + 8);
      b0 = _mm256_loadu_ps(p1), b1 = _mm256_loadu_ps(p1 + 8);
    }
    __m256 best = even(a0, a1);
    __m256i off = _mm256_setzero_si256();
    auto step = [&](__m256 v, __m256i o) {
      const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
      const __m256 nan_v = _mm256_cmp_ps(v, v, _CMP_UNORD_Q), nan_b = _mm256_cmp_ps(best, best, _CMP_UNORD_Q);
      const __m256 take = _mm256_or_ps(gt, _mm256_andnot_ps(nan_b, nan_v));
      best = _mm256_blendv_ps(best, v, take);
      off = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(off), _mm256_castsi256_ps(o), take));
    };
    step(odd(a0, a1), off01);
    step(even(b0, b1), off10);
    step(odd(b0, b1), off11);
    const __m256i i32 = _mm256_add_epi32(_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(b)), cols), off);
    const __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(i32));
    const __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(i32, 1));
    if constexpr (Partial) {
      _mm256_maskstore_ps(yo, m_out, best);
      auto* i64 = reinterpret_cast<long long*>(io);
      _mm256_maskstore_epi64(i64, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(m_out)), lo);
      _mm256_maskstore_epi64(i64 + 4, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(m_out, 1)), hi);
    } else {
      _mm256_storeu_ps(yo, best);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(io), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(io + 4), hi);
    }
  };
  std::int64_t ow = 0;
  for (; ow + 8 <= Wo; ow += 8)
    group.template operator()<false>(r0 + 2 * ow, r1 + 2 * ow, base + 2 * ow, y + ow, idx + ow, 8);
  if (ow < Wo) group.template operator()<true>(r0 + 2 * ow, r1 + 2 * ow, base + 2 * ow, y + ow, idx + ow, Wo - ow);
}
#endif

template <class T>
void max_pool_run(const KernelArgs& k, const PoolGeom& q) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const T* xp = static_cast<const T*>(x.raw_data());
  T* yp = static_cast<T*>(k.out[0].raw_data());
  std::int64_t* ip = static_cast<std::int64_t*>(k.out[1].raw_data());
  const std::int64_t HW = q.H * q.W, P = q.Ho * q.Wo;
  parallel_for(q.planes(), std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, HW)),
               [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t pl = b; pl < e; ++pl) {
      const T* xpl = xp + pl * HW;
      if (q.dense()) {
        // Every window lies inside the plane: a row of windows at a time, visiting each
        // window offset (i, j) for the whole row, so the output columns are independent
        // (the per-window loop below measured 3x slower on a 64x6x28x28 input). Selects
        // are written as masks: as ?: the compiler emits branches, which mispredict.
        using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
        const std::int64_t W = q.W, Wo = q.Wo, sw = q.sw, kh = q.kh, kw = q.kw;
        for (std::int64_t oh = 0; oh < q.Ho; ++oh) {
          T* yr = yp + pl * P + oh * Wo;
          std::int64_t* ir = ip + pl * P + oh * Wo;
          const std::int64_t h0 = oh * q.sh;
#if defined(__AVX2__)
          if constexpr (std::is_same_v<T, float>)
            if (kh == 2 && kw == 2 && q.sh == 2 && sw == 2 && HW <= std::numeric_limits<std::int32_t>::max()) {
              max_pool_2x2_row_avx2(xpl + h0 * W, xpl + (h0 + 1) * W, h0 * W, W, Wo, yr, ir);
              continue;
            }
#endif
          for (std::int64_t ow = 0; ow < Wo; ++ow) {
            yr[ow] = xpl[h0 * W + ow * sw];
            ir[ow] = h0 * W + ow * sw;
          }
          for (std::int64_t i = 0; i < kh; ++i)
            for (std::int64_t j = i == 0 ? 1 : 0; j < kw; ++j) {
              const std::int64_t base = (h0 + i) * W + j;
              const T* xr = xpl + base;
              for (std::int64_t ow = 0; ow < Wo; ++ow) {
                const T v = xr[ow * sw], best = yr[ow];
                const bool take = (v > best) | ((v != v) & (best == best));
                const U mv = U(0) - static_cast<U>(take);
                const std::int64_t mi = -static_cast<std::int64_t>(take);
                yr[ow] = std::bit_cast<T>((std::bit_cast<U>(v) & mv) | (std::bit_cast<U>(best) & ~mv));
                ir[ow] = ((base + ow * sw) & mi) | (ir[ow] & ~mi);
              }
            }
        }
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
  for (std::int64_t i = 0; i < q.planes() * P; ++i)  // validated before the parallel part
    MS_CHECK(ip[i] >= 0 && ip[i] < HW, IndexError, "{}: index {} is out of range for an input plane of {} x {}",
             k.op.name, ip[i], q.H, q.W);
  parallel_for(q.planes(), std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, HW)),
               [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t pl = b; pl < e; ++pl) {
      T* xpl = xp + pl * HW;
      std::fill(xpl, xpl + HW, T(0));
      for (std::int64_t i = 0; i < P; ++i) xpl[ip[pl * P + i]] += gp[pl * P + i];
    }
  }, 1);
}

/// Average pooling (Adjoint = false: y from x) or its adjoint (true: gx from gy), over the
/// windows of an ordinary (Adaptive = false) or adaptive pooling.
template <bool Adaptive, bool Adjoint, class T>
void avg_pool_run(const T* src, T* dst, const PoolGeom& q, bool count_include_pad) {
  const std::int64_t HW = q.H * q.W, P = q.Ho * q.Wo;
  parallel_for(q.planes(), std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, HW)),
               [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t pl = b; pl < e; ++pl) {
      if constexpr (Adjoint) std::fill(dst + pl * HW, dst + (pl + 1) * HW, T(0));
      for (std::int64_t oh = 0; oh < q.Ho; ++oh) {
        std::int64_t ha, hb, wa, wb, div_h;
        if constexpr (Adaptive) {
          ha = oh * q.H / q.Ho, hb = ((oh + 1) * q.H + q.Ho - 1) / q.Ho, div_h = hb - ha;
        } else {
          const std::int64_t h0 = oh * q.sh - q.ph;
          ha = std::max<std::int64_t>(h0, 0), hb = std::min(h0 + q.kh, q.H);
          div_h = count_include_pad ? std::min(h0 + q.kh, q.H + q.ph) - h0 : hb - ha;
        }
        for (std::int64_t ow = 0; ow < q.Wo; ++ow) {
          std::int64_t div_w;
          if constexpr (Adaptive) {
            wa = ow * q.W / q.Wo, wb = ((ow + 1) * q.W + q.Wo - 1) / q.Wo, div_w = wb - wa;
          } else {
            const std::int64_t w0 = ow * q.sw - q.pw;
            wa = std::max<std::int64_t>(w0, 0), wb = std::min(w0 + q.kw, q.W);
            div_w = count_include_pad ? std::min(w0 + q.kw, q.W + q.pw) - w0 : wb - wa;
          }
          const T scale = T(1) / static_cast<T>(q.divisor > 0 ? q.divisor : div_h * div_w);
          if constexpr (Adjoint) {
            const T v = src[pl * P + oh * q.Wo + ow] * scale;
            for (std::int64_t ih = ha; ih < hb; ++ih)
              for (std::int64_t iw = wa; iw < wb; ++iw) dst[pl * HW + ih * q.W + iw] += v;
          } else {
            T s = T(0);
            for (std::int64_t ih = ha; ih < hb; ++ih)
              for (std::int64_t iw = wa; iw < wb; ++iw) s += src[pl * HW + ih * q.W + iw];
            dst[pl * P + oh * q.Wo + ow] = s * scale;
          }
        }
      }
    }
  }, 1);
}

/// The geometry of an adaptive pooling from input shape xs (N, C, H, W) to output_size.
inline PoolGeom adaptive_geom(const OpDef& op, const Shape& xs, const Attrs& a) {
  MS_CHECK(xs.rank() == 4, ShapeError, "{}: input must be 4-D (N, C, H, W), got shape {}", op.name, shape_str(xs));
  MS_CHECK(a.has("output_size"), ValueError, "{}: attribute 'output_size' is missing", op.name);
  Int2 o = pair_attr(op, a, "output_size", 1);
  MS_CHECK(o.h >= 1 && o.w >= 1, ValueError, "{}: output_size must be positive, got ({}, {})", op.name, o.h, o.w);
  MS_CHECK(xs[2] >= 1 && xs[3] >= 1, ShapeError, "{}: input {} has an empty plane", op.name, shape_str(xs));
  return PoolGeom{xs[0], xs[1], xs[2], xs[3], 1, 1, 1, 1, 0, 0, o.h, o.w};
}

// ---- normalization ------------------------------------------------------------------------------

inline void check_channel_vec(const OpDef& op, const TensorMeta& x, const TensorMeta& v, std::string_view what) {
  check_same_dtype(op, x, v);
  MS_CHECK(v.shape == Shape{x.shape[1]}, ShapeError, "{}: {} shape {} does not match the {} channels of input {}",
           op.name, what, shape_str(v.shape), x.shape[1], shape_str(x.shape));
}

/// (N, C, S): batch, channels and the product of the spatial dims of a batch_norm input.
inline void bn_dims(const Shape& s, std::int64_t& N, std::int64_t& C, std::int64_t& S) {
  N = s[0], C = s[1], S = 1;
  for (int i = 2; i < s.rank(); ++i) S *= s[i];
}

template <class T>
void batch_norm_run(const KernelArgs& k) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const bool training = k.attrs.b("training");
  const double momentum = k.attrs.f("momentum", 0.1), eps = k.attrs.f("eps", 1e-5);
  std::int64_t N, C, S;
  bn_dims(x.shape(), N, C, S);
  const std::int64_t M = N * S;
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(k.in[1].raw_data());
  const T* bp = static_cast<const T*>(k.in[2].raw_data());
  const std::int64_t ws = k.in[1].strides()[0], bs = k.in[2].strides()[0];
  const bool has_running = k.in.size() == 5;
  T* rm = has_running ? static_cast<T*>(k.in[3].raw_data()) : nullptr;
  T* rv = has_running ? static_cast<T*>(k.in[4].raw_data()) : nullptr;
  const std::int64_t rms = has_running ? k.in[3].strides()[0] : 0, rvs = has_running ? k.in[4].strides()[0] : 0;
  T* yp = static_cast<T*>(k.out[0].raw_data());
  T* mean_out = static_cast<T*>(k.out[1].raw_data());
  T* invstd_out = static_cast<T*>(k.out[2].raw_data());
  parallel_for(C, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, M)),
               [&](std::int64_t cb, std::int64_t ce) {
    for (std::int64_t c = cb; c < ce; ++c) {
      double mean, var;
      if (training) {  // two passes in double: mean, then squared deviations
        double s = 0;
        for (std::int64_t n = 0; n < N; ++n) {
          const T* p = xp + (n * C + c) * S;
          for (std::int64_t i = 0; i < S; ++i) s += static_cast<double>(p[i]);
        }
        mean = M > 0 ? s / static_cast<double>(M) : 0.0;
        double ss = 0;
        for (std::int64_t n = 0; n < N; ++n) {
          const T* p = xp + (n * C + c) * S;
          for (std::int64_t i = 0; i < S; ++i) {
            const double d = static_cast<double>(p[i]) - mean;
            ss += d * d;
          }
        }
        var = M > 0 ? ss / static_cast<double>(M) : 0.0;
        if (has_running) {  // the documented side effect: running statistics updated in place
          const double unbiased = M > 1 ? ss / static_cast<double>(M - 1) : 0.0;
          rm[c * rms] = static_cast<T>((1.0 - momentum) * static_cast<double>(rm[c * rms]) + momentum * mean);
          rv[c * rvs] = static_cast<T>((1.0 - momentum) * static_cast<double>(rv[c * rvs]) + momentum * unbiased);
        }
      } else {
        mean = static_cast<double>(rm[c * rms]);
        var = static_cast<double>(rv[c * rvs]);
      }
      const double invstd = 1.0 / std::sqrt(var + eps);
      mean_out[c] = static_cast<T>(mean);
      invstd_out[c] = static_cast<T>(invstd);
      const T a = static_cast<T>(static_cast<double>(wp[c * ws]) * invstd);
      const T b = static_cast<T>(static_cast<double>(bp[c * bs]) - mean * static_cast<double>(wp[c * ws]) * invstd);
      for (std::int64_t n = 0; n < N; ++n) {
        const T* p = xp + (n * C + c) * S;
        T* y = yp + (n * C + c) * S;
        for (std::int64_t i = 0; i < S; ++i) y[i] = p[i] * a + b;
      }
    }
  }, 1);
}

template <class T>
void batch_norm_grad_run(const KernelArgs& k) {
  const AnyTensor g = contiguous_raw(k.in[0]), x = contiguous_raw(k.in[1]);
  const bool training = k.attrs.b("training");
  std::int64_t N, C, S;
  bn_dims(x.shape(), N, C, S);
  const std::int64_t M = N * S;
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = static_cast<const T*>(k.in[2].raw_data());
  const T* mp = static_cast<const T*>(k.in[3].raw_data());
  const T* ip = static_cast<const T*>(k.in[4].raw_data());
  const std::int64_t ws = k.in[2].strides()[0], ms_ = k.in[3].strides()[0], is = k.in[4].strides()[0];
  T* gx = static_cast<T*>(k.out[0].raw_data());
  T* gw = static_cast<T*>(k.out[1].raw_data());
  T* gb = static_cast<T*>(k.out[2].raw_data());
  parallel_for(C, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, M)),
               [&](std::int64_t cb, std::int64_t ce) {
    for (std::int64_t c = cb; c < ce; ++c) {
      const double mean = static_cast<double>(mp[c * ms_]), invstd = static_cast<double>(ip[c * is]);
      const double w = static_cast<double>(wp[c * ws]);
      double sg = 0, sgx = 0;  // sum g, sum g * xhat
      for (std::int64_t n = 0; n < N; ++n) {
        const T* gr = gp + (n * C + c) * S;
        const T* xr = xp + (n * C + c) * S;
        for (std::int64_t i = 0; i < S; ++i) {
          sg += static_cast<double>(gr[i]);
          sgx += static_cast<double>(gr[i]) * (static_cast<double>(xr[i]) - mean) * invstd;
        }
      }
      gw[c] = static_cast<T>(sgx);
      gb[c] = static_cast<T>(sg);
      const double a = w * invstd;
      const double mg = training && M > 0 ? sg / static_cast<double>(M) : 0.0;
      const double mgx = training && M > 0 ? sgx / static_cast<double>(M) : 0.0;
      for (std::int64_t n = 0; n < N; ++n) {
        const T* gr = gp + (n * C + c) * S;
        const T* xr = xp + (n * C + c) * S;
        T* out = gx + (n * C + c) * S;
        for (std::int64_t i = 0; i < S; ++i) {
          const double xhat = (static_cast<double>(xr[i]) - mean) * invstd;
          out[i] = static_cast<T>(a * (static_cast<double>(gr[i]) - mg - xhat * mgx));
        }
      }
    }
  }, 1);
}

/// (rows, D): D is the product of normalized_shape, validated against the input's trailing dims.
inline std::int64_t ln_cols(const OpDef& op, const Shape& xs, const Attrs& a, Shape* outer = nullptr) {
  const IntList& ns = a.ints("normalized_shape");
  const int k = static_cast<int>(ns.size());
  MS_CHECK(k >= 1 && k <= xs.rank(), ShapeError, "{}: normalized_shape {} does not fit input {}", op.name, nn_ints_str(ns),
           shape_str(xs));
  std::int64_t D = 1;
  for (int i = 0; i < k; ++i) {
    MS_CHECK(xs[xs.rank() - k + i] == ns[static_cast<std::size_t>(i)], ShapeError,
             "{}: normalized_shape {} does not match the trailing dims of input {}", op.name, nn_ints_str(ns),
             shape_str(xs));
    D *= ns[static_cast<std::size_t>(i)];
  }
  if (outer) {
    *outer = Shape{};
    for (int i = 0; i < xs.rank() - k; ++i) outer->push_back(xs[i]);
  }
  return D;
}

template <class T>
void layer_norm_run(const KernelArgs& k) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const double eps = k.attrs.f("eps", 1e-5);
  const std::int64_t D = ln_cols(k.op, x.shape(), k.attrs), R = D == 0 ? 0 : x.numel() / D;
  AnyTensor w = k.in.size() > 1 ? contiguous_raw(k.in[1]) : AnyTensor();
  AnyTensor b = k.in.size() > 2 ? contiguous_raw(k.in[2]) : AnyTensor();
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* wp = w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr;
  const T* bp = b.defined() ? static_cast<const T*>(b.raw_data()) : nullptr;
  T* yp = static_cast<T*>(k.out[0].raw_data());
  T* mo = static_cast<T*>(k.out[1].raw_data());
  T* ro = static_cast<T*>(k.out[2].raw_data());
  if (D == 0) {  // nothing to normalize: mean 0, rstd of eps
    for (std::int64_t i = 0; i < k.out[1].numel(); ++i) mo[i] = T(0), ro[i] = static_cast<T>(1.0 / std::sqrt(eps));
    return;
  }
  parallel_for(R, std::max<std::int64_t>(1, kParallelGrain / D), [&](std::int64_t rb, std::int64_t re) {
    for (std::int64_t r = rb; r < re; ++r) {
      const T* xr = xp + r * D;
      double s = 0;
      for (std::int64_t i = 0; i < D; ++i) s += static_cast<double>(xr[i]);
      const double mean = s / static_cast<double>(D);
      double ss = 0;
      for (std::int64_t i = 0; i < D; ++i) {
        const double d = static_cast<double>(xr[i]) - mean;
        ss += d * d;
      }
      const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(D) + eps);
      mo[r] = static_cast<T>(mean);
      ro[r] = static_cast<T>(rstd);
      T* y = yp + r * D;
      for (std::int64_t i = 0; i < D; ++i) {
        T v = static_cast<T>((static_cast<double>(xr[i]) - mean) * rstd);
        if (wp) v *= wp[i];
        if (bp) v += bp[i];
        y[i] = v;
      }
    }
  }, 1);
}

template <class T>
void layer_norm_grad_run(const KernelArgs& k) {
  const AnyTensor g = contiguous_raw(k.in[0]), x = contiguous_raw(k.in[1]);
  const AnyTensor mean = contiguous_raw(k.in[2]), rstd = contiguous_raw(k.in[3]);
  const AnyTensor w = k.in.size() > 4 ? contiguous_raw(k.in[4]) : AnyTensor();
  const std::int64_t D = ln_cols(k.op, x.shape(), k.attrs), R = D == 0 ? 0 : x.numel() / D;
  const T* gp = static_cast<const T*>(g.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* mp = static_cast<const T*>(mean.raw_data());
  const T* rp = static_cast<const T*>(rstd.raw_data());
  const T* wp = w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr;
  T* gx = static_cast<T*>(k.out[0].raw_data());
  T* gw = static_cast<T*>(k.out[1].raw_data());
  T* gb = static_cast<T*>(k.out[2].raw_data());
  if (D == 0) return;
  parallel_for(R, std::max<std::int64_t>(1, kParallelGrain / D), [&](std::int64_t rb, std::int64_t re) {
    for (std::int64_t r = rb; r < re; ++r) {
      const T* gr = gp + r * D;
      const T* xr = xp + r * D;
      const double m = static_cast<double>(mp[r]), rs = static_cast<double>(rp[r]);
      double s1 = 0, s2 = 0;  // mean of dxhat and of dxhat * xhat
      for (std::int64_t i = 0; i < D; ++i) {
        const double dxh = static_cast<double>(gr[i]) * (wp ? static_cast<double>(wp[i]) : 1.0);
        s1 += dxh;
        s2 += dxh * (static_cast<double>(xr[i]) - m) * rs;
      }
      s1 /= static_cast<double>(D);
      s2 /= static_cast<double>(D);
      T* o = gx + r * D;
      for (std::int64_t i = 0; i < D; ++i) {
        const double dxh = static_cast<double>(gr[i]) * (wp ? static_cast<double>(wp[i]) : 1.0);
        const double xh = (static_cast<double>(xr[i]) - m) * rs;
        o[i] = static_cast<T>(rs * (dxh - s1 - xh * s2));
      }
    }
  }, 1);
  // weight and bias gradients: column sums over the rows (parallel over columns, no races)
  parallel_for(D, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, R)),
               [&](std::int64_t cb, std::int64_t ce) {
    for (std::int64_t c = cb; c < ce; ++c) {
      double sw = 0, sb = 0;
      for (std::int64_t r = 0; r < R; ++r) {
        const double gv = static_cast<double>(gp[r * D + c]);
        sb += gv;
        sw += gv * (static_cast<double>(xp[r * D + c]) - static_cast<double>(mp[r])) * static_cast<double>(rp[r]);
      }
      gw[c] = static_cast<T>(sw);
      gb[c] = static_cast<T>(sb);
    }
  }, 1);
}

// ---- losses ---------------------------------------------------------------------------------------

/// Checks a (N, C) float input and its int64 target (N,).
inline void check_class_target(const OpDef& op, const TensorMeta& in, const TensorMeta& target, std::string_view what) {
  MS_CHECK(in.shape.rank() == 2, ShapeError, "{}: {} must be 2-D (N, C), got shape {}", op.name, what,
           shape_str(in.shape));
  MS_CHECK(target.dtype == DType::i64, DTypeError, "{}: target must be int64, got {} (shape {})", op.name,
           target.dtype, shape_str(target.shape));
  MS_CHECK(target.shape == Shape{in.shape[0]}, ShapeError, "{}: target shape {} does not match {} of shape {}",
           op.name, shape_str(target.shape), what, shape_str(in.shape));
}

/// Checks every target is in [0, C) or equals ignore_index, before any parallel work.
inline void check_targets(const OpDef& op, const AnyTensor& target, std::int64_t C, std::int64_t ignore_index) {
  const std::int64_t* t = static_cast<const std::int64_t*>(target.raw_data());
  const std::int64_t st = target.strides().empty() ? 1 : target.strides()[0];
  for (std::int64_t i = 0; i < target.numel(); ++i) {
    const std::int64_t v = t[i * st];
    MS_CHECK(v == ignore_index || (v >= 0 && v < C), IndexError,
             "{}: target {} at position {} is out of range for {} classes", op.name, v, i, C);
  }
}

/// The loss output: () for mean/sum, (N,) for none.
inline Shape loss_shape(Reduction r, std::int64_t n) { return r == Reduction::none ? Shape{n} : Shape{}; }

/// The gradient of a loss output: () for mean/sum, (N,) for none.
inline void check_loss_grad(const OpDef& op, const TensorMeta& g, Reduction r, std::int64_t n, DType dt) {
  MS_CHECK(g.shape == loss_shape(r, n), ShapeError, "{}: gradient shape {} does not match the loss shape {}", op.name,
           shape_str(g.shape), shape_str(loss_shape(r, n)));
  MS_CHECK(g.dtype == dt, DTypeError, "{}: gradient dtype {} does not match {}", op.name, g.dtype, dt);
}

/// Writes per-row losses `row` (n of them, `keep` marks non-ignored rows) to out by reduction.
template <class T>
void reduce_loss(const std::vector<double>& row, const std::vector<char>& keep, Reduction r, T* out) {
  if (r == Reduction::none) {
    for (std::size_t i = 0; i < row.size(); ++i) out[i] = static_cast<T>(row[i]);
    return;
  }
  double s = 0;
  std::int64_t cnt = 0;
  for (std::size_t i = 0; i < row.size(); ++i)
    if (keep[i]) s += row[i], ++cnt;
  out[0] = static_cast<T>(r == Reduction::sum ? s : s / static_cast<double>(cnt));  // all ignored: NaN
}

/// Number of targets that are not ignore_index.
inline std::int64_t count_kept(const AnyTensor& target, std::int64_t ignore_index) {
  const std::int64_t* t = static_cast<const std::int64_t*>(target.raw_data());
  const std::int64_t st = target.strides().empty() ? 1 : target.strides()[0];
  std::int64_t cnt = 0;
  for (std::int64_t i = 0; i < target.numel(); ++i) cnt += t[i * st] != ignore_index;
  return cnt;
}

/// Room for one row of shifted_exp: C doubles rounded up to whole SIMD batches.
inline std::size_t exp_buffer_size(std::int64_t C) {
  constexpr std::int64_t W = static_cast<std::int64_t>(xsimd::batch<double>::size);
  return static_cast<std::size_t>((C + W - 1) / W * W);
}

/// e[c] = exp(z[c] - m) for the row's maximum m (returned in m), in double through SIMD
/// batches (the padding lanes of the last batch are not used); returns sum_c e[c]. One
/// exp per element, shared by the loss and its gradient (scalar std::exp made them a
/// large part of a small classifier's step).
template <class T>
double shifted_exp(const T* z, std::int64_t C, std::vector<double>& e, double& m) {
  using D = xsimd::batch<double>;
  constexpr std::int64_t W = static_cast<std::int64_t>(D::size);
  m = -std::numeric_limits<double>::infinity();
  for (std::int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(z[c]));
  const std::int64_t padded = static_cast<std::int64_t>(e.size());
  for (std::int64_t c = 0; c < padded; ++c)
    e[static_cast<std::size_t>(c)] = c < C ? static_cast<double>(z[c]) - m : 0.0;
  for (std::int64_t c = 0; c < padded; c += W) xsimd::exp(D::load_unaligned(e.data() + c)).store_unaligned(e.data() + c);
  double s = 0;
  for (std::int64_t c = 0; c < C; ++c) s += e[static_cast<std::size_t>(c)];
  return s;
}

template <class T>
void cross_entropy_run(const KernelArgs& k) {
  const AnyTensor z = contiguous_raw(k.in[0]);
  const AnyTensor& target = k.in[1];
  const Reduction red = reduction_attr(k.op, k.attrs);
  const double eps = k.attrs.f("label_smoothing", 0.0);
  const std::int64_t ignore = k.attrs.i("ignore_index", -100);
  const std::int64_t N = z.shape()[0], C = z.shape()[1];
  check_targets(k.op, target, C, ignore);
  const T* zp = static_cast<const T*>(z.raw_data());
  const std::int64_t* tp = static_cast<const std::int64_t*>(target.raw_data());
  const std::int64_t ts = target.strides()[0];
  std::vector<double> row(static_cast<std::size_t>(N), 0.0);
  std::vector<char> keep(static_cast<std::size_t>(N), 0);
  parallel_for(N, std::max<std::int64_t>(1, kParallelGrain / 8 / std::max<std::int64_t>(1, C)),
               [&](std::int64_t b, std::int64_t end) {
    std::vector<double> e(exp_buffer_size(C));
    for (std::int64_t i = b; i < end; ++i) {
      const std::int64_t t = tp[i * ts];
      if (t == ignore) continue;
      const T* zr = zp + i * C;
      double sz = 0;
      for (std::int64_t c = 0; c < C; ++c) sz += static_cast<double>(zr[c]);
      double m = 0;
      const double s = shifted_exp(zr, C, e, m);
      const double lse = m + std::log(s);
      // -(1 - eps) * logp[t] - eps / C * sum_c logp[c]
      row[static_cast<std::size_t>(i)] = (1.0 - eps) * (lse - static_cast<double>(zr[t])) + eps * (lse - sz / static_cast<double>(C));
      keep[static_cast<std::size_t>(i)] = 1;
    }
  }, 1);
  reduce_loss(row, keep, red, static_cast<T*>(k.out[0].raw_data()));
}

template <class T>
void cross_entropy_grad_run(const KernelArgs& k) {
  const AnyTensor z = contiguous_raw(k.in[0]);
  const AnyTensor& target = k.in[1];
  const AnyTensor g = contiguous_raw(k.in[2]);
  const Reduction red = reduction_attr(k.op, k.attrs);
  const double eps = k.attrs.f("label_smoothing", 0.0);
  const std::int64_t ignore = k.attrs.i("ignore_index", -100);
  const std::int64_t N = z.shape()[0], C = z.shape()[1];
  check_targets(k.op, target, C, ignore);
  const double denom = red == Reduction::mean ? static_cast<double>(count_kept(target, ignore)) : 1.0;
  const T* zp = static_cast<const T*>(z.raw_data());
  const T* gp = static_cast<const T*>(g.raw_data());
  const std::int64_t* tp = static_cast<const std::int64_t*>(target.raw_data());
  const std::int64_t ts = target.strides()[0];
  T* out = static_cast<T*>(k.out[0].raw_data());
  parallel_for(N, std::max<std::int64_t>(1, kParallelGrain / 8 / std::max<std::int64_t>(1, C)),
               [&](std::int64_t b, std::int64_t end) {
    std::vector<double> e(exp_buffer_size(C));
    for (std::int64_t i = b; i < end; ++i) {
      const std::int64_t t = tp[i * ts];
      T* o = out + i * C;
      if (t == ignore) {
        std::fill(o, o + C, T(0));
        continue;
      }
      const T* zr = zp + i * C;
      const double gi = static_cast<double>(red == Reduction::none ? gp[i] : gp[0]) / denom;
      double m = 0;
      const double inv = 1.0 / shifted_exp(zr, C, e, m), u = eps / static_cast<double>(C);
      for (std::int64_t c = 0; c < C; ++c) o[c] = static_cast<T>(gi * (e[static_cast<std::size_t>(c)] * inv - u - (c == t ? 1.0 - eps : 0.0)));
    }
  }, 1);
}

inline void check_ce_attrs(const OpDef& op, const Attrs& a) {
  reduction_attr(op, a);
  const double ls = a.f("label_smoothing", 0.0);
  MS_CHECK(ls >= 0.0 && ls <= 1.0, ValueError, "{}: label_smoothing must be in [0, 1], got {}", op.name, ls);
}

}  // namespace detail

// ---- registrations --------------------------------------------------------------------------------

// conv2d(x, w[, b]; stride, padding, dilation, groups).
MS_REGISTRATION(const OpDef& conv2d_op, registry().add([] {
  OpDef d;
  d.name = "conv2d";
  d.input_names = {"input", "weight", "bias"};
  d.category = Category::nn;
  d.num_inputs = -1;  // x, weight and an optional bias
  d.doc = "2-D convolution of x (N, C, H, W) with weight (O, C/groups, kH, kW) and optional bias (O,); im2col + GEMM";
  d.attr_names = {"stride", "padding", "dilation", "groups"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() == 2 || in.size() == 3, ValueError, "{}: expected 2 or 3 inputs (x, weight[, bias]), got {}",
             op.name, in.size());
    check_same_dtype(op, in[0], in[1]);
    detail::ConvGeom q = detail::conv_geom(op, in[0].shape, in[1].shape, a);
    if (in.size() == 3) {
      check_same_dtype(op, in[0], in[2]);
      MS_CHECK(in[2].shape == Shape{q.O}, ShapeError, "{}: bias shape {} does not match out_channels {} of weight {}",
               op.name, shape_str(in[2].shape), q.O, shape_str(in[1].shape));
    }
    out.push_back({in[0].dtype, Shape{q.N, q.O, q.Ho, q.Wo}});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::ConvGeom q = detail::conv_geom(k.op, k.in[0].shape(), k.in[1].shape(), k.attrs);
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::conv2d_run<T>(k, q); });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    Cost c = detail::conv_cost(op, in, out, a, detail::conv_geom(op, in[0].shape, in[1].shape, a));
    if (in.size() == 3) c.flops += static_cast<double>(numel(out[0].shape));
    return c;
  };
  return d;
}()));

// conv2d_grad_input(g, w; stride, padding, dilation, groups, input_shape): the input gradient of conv2d.
MS_REGISTRATION(const OpDef& conv2d_grad_input_op, registry().add([] {
  OpDef d;
  d.name = "conv2d_grad_input";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "gradient of conv2d w.r.t. its input: col2im(weight^T @ g) (a transposed convolution)";
  d.attr_names = {"stride", "padding", "dilation", "groups", "input_shape"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    check_same_dtype(op, in[0], in[1]);
    Shape xs = detail::shape_attr_n(op, a, "input_shape", 4);
    detail::ConvGeom q = detail::conv_geom(op, xs, in[1].shape, a);
    Shape want{q.N, q.O, q.Ho, q.Wo};
    MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the conv2d output shape {}",
             op.name, shape_str(in[0].shape), shape_str(want));
    out.push_back({in[0].dtype, xs});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::ConvGeom q = detail::conv_geom(k.op, k.out[0].shape(), k.in[1].shape(), k.attrs);
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::conv2d_grad_input_run<T>(k, q); });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    return detail::conv_cost(op, in, out, a, detail::conv_geom(op, out[0].shape, in[1].shape, a));
  };
  return d;
}()));

// conv2d_grad_weight(g, x; stride, padding, dilation, groups, weight_shape): the weight gradient of conv2d.
MS_REGISTRATION(const OpDef& conv2d_grad_weight_op, registry().add([] {
  OpDef d;
  d.name = "conv2d_grad_weight";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "gradient of conv2d w.r.t. its weight: sum over the batch of g @ im2col(x)^T";
  d.attr_names = {"stride", "padding", "dilation", "groups", "weight_shape"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    check_same_dtype(op, in[0], in[1]);
    Shape ws = detail::shape_attr_n(op, a, "weight_shape", 4);
    detail::ConvGeom q = detail::conv_geom(op, in[1].shape, ws, a);
    Shape want{q.N, q.O, q.Ho, q.Wo};
    MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the conv2d output shape {}",
             op.name, shape_str(in[0].shape), shape_str(want));
    out.push_back({in[0].dtype, ws});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::ConvGeom q = detail::conv_geom(k.op, k.in[1].shape(), k.out[0].shape(), k.attrs);
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::conv2d_grad_weight_run<T>(k, q); });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    return detail::conv_cost(op, in, out, a, detail::conv_geom(op, in[1].shape, out[0].shape, a));
  };
  return d;
}()));

// max_pool2d(x; kernel_size, stride, padding) -> (values, int64 indices into each H * W plane).
MS_REGISTRATION(const OpDef& max_pool2d_op, registry().add([] {
  OpDef d;
  d.name = "max_pool2d";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "max over kH x kW windows of x (N, C, H, W); second output: int64 argmax (ih * W + iw) per window";
  d.attr_names = {"kernel_size", "stride", "padding", "dilation", "ceil_mode"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q = detail::pool_geom(op, in[0].shape, a);
    Shape s{q.N, q.C, q.Ho, q.Wo};
    out.push_back({in[0].dtype, s});
    out.push_back({DType::i64, s});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q = detail::pool_geom(k.op, k.in[0].shape(), k.attrs);
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::max_pool_run<T>(k, q); });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    detail::PoolGeom q = detail::pool_geom(op, in[0].shape, a);
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
  d.attr_names = {"kernel_size", "stride", "padding", "dilation", "ceil_mode", "input_shape"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q;
    Shape xs = detail::pool_grad_shape(op, in, a, q);
    MS_CHECK(in[1].dtype == DType::i64 && in[1].shape == in[0].shape, DTypeError,
             "{}: indices must be int64 of the gradient's shape {}, got {} {}", op.name, shape_str(in[0].shape),
             in[1].dtype, shape_str(in[1].shape));
    out.push_back({in[0].dtype, xs});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q = detail::pool_geom(k.op, k.out[0].shape(), k.attrs);
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
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q = detail::pool_geom(op, in[0].shape, a);
    out.push_back({in[0].dtype, Shape{q.N, q.C, q.Ho, q.Wo}});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q = detail::pool_geom(k.op, k.in[0].shape(), k.attrs);
    const AnyTensor x = detail::contiguous_raw(k.in[0]);
    detail::visit_float(k, x.dtype(), [&]<class T>() {
      detail::avg_pool_run<false, false>(static_cast<const T*>(x.raw_data()), static_cast<T*>(k.out[0].raw_data()), q,
                                         k.attrs.b("count_include_pad", true));
    });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    detail::PoolGeom q = detail::pool_geom(op, in[0].shape, a);
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
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q;
    out.push_back({in[0].dtype, detail::pool_grad_shape(op, in, a, q)});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q = detail::pool_geom(k.op, k.out[0].shape(), k.attrs);
    const AnyTensor g = detail::contiguous_raw(k.in[0]);
    detail::visit_float(k, g.dtype(), [&]<class T>() {
      detail::avg_pool_run<false, true>(static_cast<const T*>(g.raw_data()), static_cast<T*>(k.out[0].raw_data()), q,
                                        k.attrs.b("count_include_pad", true));
    });
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    detail::PoolGeom q = detail::pool_geom(op, out[0].shape, a);
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
  d.attr_names = {"output_size"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::PoolGeom q = detail::adaptive_geom(op, in[0].shape, a);
    out.push_back({in[0].dtype, Shape{q.N, q.C, q.Ho, q.Wo}});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q = detail::adaptive_geom(k.op, k.in[0].shape(), k.attrs);
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
  d.attr_names = {"output_size", "input_shape"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    Shape xs = detail::shape_attr_n(op, a, "input_shape", 4);
    detail::PoolGeom q = detail::adaptive_geom(op, xs, a);
    Shape want{q.N, q.C, q.Ho, q.Wo};
    MS_CHECK(in[0].shape == want, ShapeError, "{}: gradient shape {} does not match the pooled shape {} of input {}",
             op.name, shape_str(in[0].shape), shape_str(want), shape_str(xs));
    out.push_back({in[0].dtype, xs});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::PoolGeom q = detail::adaptive_geom(k.op, k.out[0].shape(), k.attrs);
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

// batch_norm(x, weight, bias[, running_mean, running_var]; training, momentum, eps)
//   -> (y, mean, invstd). SIDE EFFECT: with training=true the kernel writes the updated running
//   statistics into the running_mean / running_var input buffers (so a replayed graph updates them).
MS_REGISTRATION(const OpDef& batch_norm_op, registry().add([] {
  OpDef d;
  d.name = "batch_norm";
  d.category = Category::nn;
  d.num_inputs = -1;  // x, weight, bias and optionally running_mean, running_var
  d.doc = "batch normalization over axis 1 of x (N, C, ...); outputs y, mean, invstd. SIDE EFFECT: training=true "
          "updates the running_mean/running_var INPUTS in place (momentum, unbiased variance), in eager mode and on "
          "every graph replay";
  d.attr_names = {"training", "momentum", "eps"};
  d.cpu_dtypes = kFloatTypes;
  d.writes_inputs = (1u << 3) | (1u << 4);  // running_mean, running_var
  d.writes_when = [](const Attrs& a, std::size_t num_inputs) { return num_inputs == 5 && a.b("training"); };
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() == 3 || in.size() == 5, ValueError,
             "{}: expected 3 or 5 inputs (x, weight, bias[, running_mean, running_var]), got {}", op.name, in.size());
    const TensorMeta& x = in[0];
    MS_CHECK(x.shape.rank() >= 2, ShapeError, "{}: input must have at least 2 dims (N, C, ...), got shape {}", op.name,
             shape_str(x.shape));
    detail::check_channel_vec(op, x, in[1], "weight");
    detail::check_channel_vec(op, x, in[2], "bias");
    if (in.size() == 5) {
      detail::check_channel_vec(op, x, in[3], "running_mean");
      detail::check_channel_vec(op, x, in[4], "running_var");
    }
    const bool training = a.b("training");
    MS_CHECK(training || in.size() == 5, ValueError, "{}: eval mode (training=false) needs running_mean and running_var",
             op.name);
    MS_CHECK(!training || numel(x.shape) / std::max<std::int64_t>(1, x.shape[1]) > 1 || numel(x.shape) == 0, ValueError,
             "{}: training needs more than 1 value per channel, got input shape {}", op.name, shape_str(x.shape));
    MS_CHECK(a.f("eps", 1e-5) >= 0, ValueError, "{}: eps must be non-negative, got {}", op.name, a.f("eps", 1e-5));
    out.push_back(x);
    out.push_back({x.dtype, Shape{x.shape[1]}});
    out.push_back({x.dtype, Shape{x.shape[1]}});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::batch_norm_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<8>;
  return d;
}()));

// batch_norm_grad(g, x, weight, mean, invstd; training) -> (grad x, grad weight, grad bias).
MS_REGISTRATION(const OpDef& batch_norm_grad_op, registry().add([] {
  OpDef d;
  d.name = "batch_norm_grad";
  d.category = Category::nn;
  d.num_inputs = 5;
  d.doc = "gradient of batch_norm w.r.t. x, weight and bias, from the saved mean and invstd";
  d.attr_names = {"training"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
    const TensorMeta& x = in[1];
    MS_CHECK(x.shape.rank() >= 2, ShapeError, "{}: input must have at least 2 dims (N, C, ...), got shape {}", op.name,
             shape_str(x.shape));
    check_same_dtype(op, in[0], x);
    MS_CHECK(in[0].shape == x.shape, ShapeError, "{}: gradient shape {} does not match input {}", op.name,
             shape_str(in[0].shape), shape_str(x.shape));
    detail::check_channel_vec(op, x, in[2], "weight");
    detail::check_channel_vec(op, x, in[3], "mean");
    detail::check_channel_vec(op, x, in[4], "invstd");
    out.push_back(x);
    out.push_back(in[2]);
    out.push_back(in[2]);
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::batch_norm_grad_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<8>;
  return d;
}()));

// layer_norm(x[, weight[, bias]]; normalized_shape, eps) -> (y, mean, rstd).
MS_REGISTRATION(const OpDef& layer_norm_op, registry().add([] {
  OpDef d;
  d.name = "layer_norm";
  d.category = Category::nn;
  d.num_inputs = -1;  // x and optionally weight, bias
  d.doc = "layer normalization over the trailing normalized_shape dims; outputs y, mean, rstd";
  d.attr_names = {"normalized_shape", "eps"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() >= 1 && in.size() <= 3, ValueError, "{}: expected 1 to 3 inputs (x[, weight[, bias]]), got {}",
             op.name, in.size());
    Shape outer;
    detail::ln_cols(op, in[0].shape, a, &outer);
    const Shape ns(a.ints("normalized_shape"));
    for (std::size_t i = 1; i < in.size(); ++i) {
      check_same_dtype(op, in[0], in[i]);
      MS_CHECK(in[i].shape == ns, ShapeError, "{}: {} shape {} does not match normalized_shape {}", op.name,
               i == 1 ? "weight" : "bias", shape_str(in[i].shape), shape_str(ns));
    }
    MS_CHECK(a.f("eps", 1e-5) >= 0, ValueError, "{}: eps must be non-negative, got {}", op.name, a.f("eps", 1e-5));
    out.push_back(in[0]);
    out.push_back({in[0].dtype, outer});
    out.push_back({in[0].dtype, outer});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::layer_norm_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<8>;
  return d;
}()));

// layer_norm_grad(g, x, mean, rstd[, weight]; normalized_shape) -> (grad x, grad weight, grad bias).
MS_REGISTRATION(const OpDef& layer_norm_grad_op, registry().add([] {
  OpDef d;
  d.name = "layer_norm_grad";
  d.category = Category::nn;
  d.num_inputs = -1;  // g, x, mean, rstd and optionally weight
  d.doc = "gradient of layer_norm w.r.t. x, weight and bias, from the saved mean and rstd";
  d.attr_names = {"normalized_shape"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in.size() == 4 || in.size() == 5, ValueError,
             "{}: expected 4 or 5 inputs (g, x, mean, rstd[, weight]), got {}", op.name, in.size());
    Shape outer;
    detail::ln_cols(op, in[1].shape, a, &outer);
    const Shape ns(a.ints("normalized_shape"));
    for (std::size_t i = 0; i < in.size(); ++i) check_same_dtype(op, in[1], in[i]);
    MS_CHECK(in[0].shape == in[1].shape, ShapeError, "{}: gradient shape {} does not match input {}", op.name,
             shape_str(in[0].shape), shape_str(in[1].shape));
    MS_CHECK(in[2].shape == outer && in[3].shape == outer, ShapeError,
             "{}: mean {} and rstd {} must have the leading shape {} of input {}", op.name, shape_str(in[2].shape),
             shape_str(in[3].shape), shape_str(outer), shape_str(in[1].shape));
    MS_CHECK(in.size() < 5 || in[4].shape == ns, ShapeError, "{}: weight shape {} does not match normalized_shape {}",
             op.name, in.size() < 5 ? "" : shape_str(in[4].shape), shape_str(ns));
    out.push_back(in[1]);
    out.push_back({in[1].dtype, ns});
    out.push_back({in[1].dtype, ns});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::layer_norm_grad_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<10>;
  return d;
}()));

// dropout(x; p, training, seed) -> (y, mask); y = x * mask, mask 0 or 1 / (1 - p).
MS_REGISTRATION(const OpDef& dropout_op, registry().add([] {
  OpDef d;
  d.name = "dropout";
  d.category = Category::nn;
  d.num_inputs = 1;
  d.doc = "zeroes elements with probability p and scales the rest by 1/(1-p) (training only); outputs y and the mask";
  d.attr_names = {"p", "training", "seed"};
  d.cpu_dtypes = kFloatTypes;
  d.is_random = true;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const double p = a.f("p", 0.5);
    MS_CHECK(p >= 0.0 && p <= 1.0, ValueError, "{}: p must be in [0, 1], got {}", op.name, p);
    out.push_back(in[0]);
    out.push_back(in[0]);
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor x = detail::contiguous_raw(k.in[0]);
    const double p = k.attrs.f("p", 0.5);
    const bool active = k.attrs.b("training", true) && p > 0.0;
    detail::visit_float(k, x.dtype(), [&]<class T>() {
      const T* xp = static_cast<const T*>(x.raw_data());
      T* yp = static_cast<T*>(k.out[0].raw_data());
      T* mp = static_cast<T*>(k.out[1].raw_data());
      const std::int64_t n = x.numel();
      if (!active) {
        std::copy(xp, xp + n, yp);
        std::fill(mp, mp + n, T(1));
        return;
      }
      const T scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
      // One uniform double per element, in row-major order: the same seed gives the same
      // mask for float32 and float64.
      detail::with_nn_generator(k.attrs, [&](Generator& g) {
        for (std::int64_t i = 0; i < n; ++i) mp[i] = g.uniform() < p ? T(0) : scale;
      });
      for (std::int64_t i = 0; i < n; ++i) yp[i] = xp[i] * mp[i];
    });
  };
  d.cost = &detail::per_input_cost<3>;
  return d;
}()));

// embedding(weight, index) -> weight rows at index: shape index.shape + (D,).
MS_REGISTRATION(const OpDef& embedding_op, registry().add([] {
  OpDef d;
  d.name = "embedding";
  d.input_names = {"weight", "index"};
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "rows of weight (V, D) at an int64/int32 index of any shape: result index.shape + (D,)";
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
    MS_CHECK(in[0].shape.rank() == 2, ShapeError, "{}: weight must be 2-D (num_embeddings, embedding_dim), got shape {}",
             op.name, shape_str(in[0].shape));
    MS_CHECK(in[1].dtype == DType::i64 || in[1].dtype == DType::i32, DTypeError,
             "{}: 'index' (input 1) must be an int64 or int32 tensor, got {} (shape {})", op.name, in[1].dtype,
             shape_str(in[1].shape));
    Shape s = in[1].shape;
    s.push_back(in[0].shape[1]);
    out.push_back({in[0].dtype, s});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor w = detail::contiguous_raw(k.in[0]), idx = detail::contiguous_raw(k.in[1]);
    const std::int64_t V = w.shape()[0], D = w.shape()[1], n = idx.numel();
    const void* ip = idx.raw_data();
    auto at = [&](std::int64_t i) {
      return idx.dtype() == DType::i64 ? static_cast<const std::int64_t*>(ip)[i]
                                       : static_cast<std::int64_t>(static_cast<const std::int32_t*>(ip)[i]);
    };
    for (std::int64_t i = 0; i < n; ++i)  // checked before the parallel part
      MS_CHECK(at(i) >= 0 && at(i) < V, IndexError, "{}: index {} is out of range for num_embeddings {}", k.op.name,
               at(i), V);
    const std::size_t row_bytes = static_cast<std::size_t>(D) * dtype_size(w.dtype());
    const char* wb = static_cast<const char*>(w.raw_data());
    char* ob = static_cast<char*>(k.out[0].raw_data());
    parallel_for(n, std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(1, D)),
                 [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i)
        if (row_bytes) std::memcpy(ob + static_cast<std::size_t>(i) * row_bytes, wb + static_cast<std::size_t>(at(i)) * row_bytes, row_bytes);
    }, 1);
  };
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    return Cost{0, detail::bytes_of(in.subspan(1)) + 2 * detail::bytes_of(out)};
  };
  return d;
}()));

// cross_entropy(logits, target; reduction, label_smoothing, ignore_index).
MS_REGISTRATION(const OpDef& cross_entropy_op, registry().add([] {
  OpDef d;
  d.name = "cross_entropy";
  d.input_names = {"logits", "target"};
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "cross entropy of logits (N, C) and int64 targets (N,) with a fused, stable log_softmax; label smoothing";
  d.attr_names = {"reduction", "label_smoothing", "ignore_index"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::check_class_target(op, in[0], in[1], "logits");
    detail::check_ce_attrs(op, a);
    out.push_back({in[0].dtype, detail::loss_shape(detail::reduction_attr(op, a), in[0].shape[0])});
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::cross_entropy_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<20>;
  return d;
}()));

// cross_entropy_grad(logits, target, g; reduction, label_smoothing, ignore_index) -> grad logits.
MS_REGISTRATION(const OpDef& cross_entropy_grad_op, registry().add([] {
  OpDef d;
  d.name = "cross_entropy_grad";
  d.category = Category::nn;
  d.num_inputs = 3;
  d.doc = "gradient of cross_entropy w.r.t. the logits: g * (softmax - smoothed one-hot) (/ count for mean)";
  d.attr_names = {"reduction", "label_smoothing", "ignore_index"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::check_class_target(op, in[0], in[1], "logits");
    detail::check_ce_attrs(op, a);
    detail::check_loss_grad(op, in[2], detail::reduction_attr(op, a), in[0].shape[0], in[0].dtype);
    out.push_back(in[0]);
  };
  d.kernel = [](const KernelArgs& k) {
    detail::visit_float(k, k.in[0].dtype(), [&]<class T>() { detail::cross_entropy_grad_run<T>(k); });
  };
  d.cost = &detail::per_input_cost<20>;
  return d;
}()));

// nll_loss(log_probs, target; reduction, ignore_index).
MS_REGISTRATION(const OpDef& nll_loss_op, registry().add([] {
  OpDef d;
  d.name = "nll_loss";
  d.input_names = {"log_probs", "target"};
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "negative log likelihood: -log_probs[i, target[i]] for log_probs (N, C), reduced by mean/sum/none";
  d.attr_names = {"reduction", "ignore_index"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::check_class_target(op, in[0], in[1], "log_probs");
    out.push_back({in[0].dtype, detail::loss_shape(detail::reduction_attr(op, a), in[0].shape[0])});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor lp = detail::contiguous_raw(k.in[0]);
    const AnyTensor& target = k.in[1];
    const std::int64_t ignore = k.attrs.i("ignore_index", -100);
    const std::int64_t N = lp.shape()[0], C = lp.shape()[1];
    detail::check_targets(k.op, target, C, ignore);
    const std::int64_t* tp = static_cast<const std::int64_t*>(target.raw_data());
    const std::int64_t ts = target.strides()[0];
    detail::visit_float(k, lp.dtype(), [&]<class T>() {
      const T* p = static_cast<const T*>(lp.raw_data());
      std::vector<double> row(static_cast<std::size_t>(N), 0.0);
      std::vector<char> keep(static_cast<std::size_t>(N), 0);
      for (std::int64_t i = 0; i < N; ++i) {
        const std::int64_t t = tp[i * ts];
        if (t == ignore) continue;
        row[static_cast<std::size_t>(i)] = -static_cast<double>(p[i * C + t]);
        keep[static_cast<std::size_t>(i)] = 1;
      }
      detail::reduce_loss(row, keep, detail::reduction_attr(k.op, k.attrs), static_cast<T*>(k.out[0].raw_data()));
    });
  };
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    return Cost{static_cast<double>(numel(in[1].shape)), detail::bytes_of(in.subspan(1)) + detail::bytes_of(out)};
  };
  return d;
}()));

// nll_loss_grad(target, g; num_classes, reduction, ignore_index) -> grad log_probs (N, C).
MS_REGISTRATION(const OpDef& nll_loss_grad_op, registry().add([] {
  OpDef d;
  d.name = "nll_loss_grad";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "gradient of nll_loss w.r.t. log_probs: -g at [i, target[i]] (/ count for mean), 0 elsewhere";
  d.attr_names = {"num_classes", "reduction", "ignore_index"};
  d.cpu_dtypes = kFloatTypes;
  d.elementwise.dispatch_input = 1;  // the dtype is the gradient's
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(in[0].dtype == DType::i64 && in[0].shape.rank() == 1, DTypeError,
             "{}: target must be 1-D int64, got {} {}", op.name, in[0].dtype, shape_str(in[0].shape));
    const std::int64_t C = a.i("num_classes");
    MS_CHECK(C >= 0, ValueError, "{}: num_classes must be non-negative, got {}", op.name, C);
    detail::check_loss_grad(op, in[1], detail::reduction_attr(op, a), in[0].shape[0], in[1].dtype);
    out.push_back({in[1].dtype, Shape{in[0].shape[0], C}});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& target = k.in[0];
    const AnyTensor g = detail::contiguous_raw(k.in[1]);
    const std::int64_t ignore = k.attrs.i("ignore_index", -100), C = k.attrs.i("num_classes");
    const detail::Reduction red = detail::reduction_attr(k.op, k.attrs);
    detail::check_targets(k.op, target, C, ignore);
    const std::int64_t N = target.shape()[0], ts = target.strides()[0];
    const std::int64_t* tp = static_cast<const std::int64_t*>(target.raw_data());
    const double denom = red == detail::Reduction::mean ? static_cast<double>(detail::count_kept(target, ignore)) : 1.0;
    detail::visit_float(k, g.dtype(), [&]<class T>() {
      const T* gp = static_cast<const T*>(g.raw_data());
      T* o = static_cast<T*>(k.out[0].raw_data());
      std::fill(o, o + N * C, T(0));
      for (std::int64_t i = 0; i < N; ++i) {
        const std::int64_t t = tp[i * ts];
        if (t == ignore) continue;
        o[i * C + t] = static_cast<T>(-static_cast<double>(red == detail::Reduction::none ? gp[i] : gp[0]) / denom);
      }
    });
  };
  d.cost = &detail::per_output_cost<0>;
  return d;
}()));

// mse_loss(a, b; reduction).
MS_REGISTRATION(const OpDef& mse_loss_op, registry().add([] {
  OpDef d;
  d.name = "mse_loss";
  d.category = Category::nn;
  d.num_inputs = 2;
  d.doc = "squared error (a - b)^2 of two same-shape tensors, reduced by mean/sum/none";
  d.attr_names = {"reduction"};
  d.cpu_dtypes = kFloatTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    check_same_dtype(op, in[0], in[1]);
    MS_CHECK(in[0].shape == in[1].shape, ShapeError, "{}: shapes {} and {} differ", op.name, shape_str(in[0].shape),
             shape_str(in[1].shape));
    out.push_back({in[0].dtype, detail::reduction_attr(op, a) == detail::Reduction::none ? in[0].shape : Shape{}});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor a = detail::contiguous_raw(k.in[0]), b = detail::contiguous_raw(k.in[1]);
    const detail::Reduction red = detail::reduction_attr(k.op, k.attrs);
    const std::int64_t n = a.numel();
    detail::visit_float(k, a.dtype(), [&]<class T>() {
      const T* ap = static_cast<const T*>(a.raw_data());
      const T* bp = static_cast<const T*>(b.raw_data());
      T* o = static_cast<T*>(k.out[0].raw_data());
      if (red == detail::Reduction::none) {
        parallel_for(n, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
          for (std::int64_t i = lo; i < hi; ++i) o[i] = (ap[i] - bp[i]) * (ap[i] - bp[i]);
        });
        return;
      }
      double s = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const double dv = static_cast<double>(ap[i]) - static_cast<double>(bp[i]);
        s += dv * dv;
      }
      o[0] = static_cast<T>(red == detail::Reduction::sum ? s : s / static_cast<double>(n));  // empty mean: NaN
    });
  };
  d.cost = &detail::per_input_cost<3>;
  return d;
}()));

// ---- untyped API ------------------------------------------------------------------------------------

inline AnyTensor conv2d(const AnyTensor& x, const AnyTensor& w, const AnyTensor& b, Int2 stride, Int2 padding,
                        Int2 dilation, std::int64_t groups) {
  Attrs a = detail::conv_attrs(stride, padding, dilation, groups);
  return b.defined() ? call1(conv2d_op, {x, w, b}, a) : call1(conv2d_op, {x, w}, a);
}
inline std::pair<AnyTensor, AnyTensor> max_pool2d_with_indices(const AnyTensor& x, Int2 kernel_size,
                                                               std::optional<Int2> stride, Int2 padding,
                                                               Int2 dilation, bool ceil_mode) {
  const AnyTensor in[1] = {x};
  auto out = call(max_pool2d_op, in, detail::pool_attrs(kernel_size, stride, padding, dilation, ceil_mode));
  return {out[0], out[1]};
}
inline AnyTensor max_pool2d(const AnyTensor& x, Int2 kernel_size, std::optional<Int2> stride, Int2 padding,
                            Int2 dilation, bool ceil_mode) {
  return max_pool2d_with_indices(x, kernel_size, stride, padding, dilation, ceil_mode).first;
}
inline AnyTensor avg_pool2d(const AnyTensor& x, Int2 kernel_size, std::optional<Int2> stride, Int2 padding,
                            bool count_include_pad, bool ceil_mode, std::optional<std::int64_t> divisor_override) {
  Attrs a = detail::pool_attrs(kernel_size, stride, padding, 1, ceil_mode).set("count_include_pad", count_include_pad);
  if (divisor_override) a.set("divisor_override", *divisor_override);
  return call1(avg_pool2d_op, {x}, a);
}
inline AnyTensor adaptive_avg_pool2d(const AnyTensor& x, Int2 output_size) {
  return call1(adaptive_avg_pool2d_op, {x}, Attrs{{"output_size", output_size.list()}});
}
inline AnyTensor batch_norm(const AnyTensor& x, const AnyTensor& weight, const AnyTensor& bias,
                            const AnyTensor& running_mean, const AnyTensor& running_var, bool training, double momentum,
                            double eps) {
  MS_CHECK(x.defined() && x.dim() >= 2, ShapeError, "batch_norm: input must have at least 2 dims (N, C, ...), got shape {}",
           x.defined() ? shape_str(x.shape()) : std::string("(undefined)"));
  MS_CHECK(running_mean.defined() == running_var.defined(), ValueError,
           "batch_norm: give both running_mean and running_var, or neither");
  const Shape c{x.shape()[1]};
  AnyTensor w = weight.defined() ? weight : ones(c, x.dtype());
  AnyTensor b = bias.defined() ? bias : zeros(c, x.dtype());
  Attrs a{{"training", training}, {"momentum", momentum}, {"eps", eps}};
  std::vector<AnyTensor> in{x, w, b};
  if (running_mean.defined()) {
    in.push_back(running_mean);
    in.push_back(running_var);
  }
  return call(batch_norm_op, in, a)[0];
}
inline AnyTensor layer_norm(const AnyTensor& x, const IntList& normalized_shape, const AnyTensor& weight,
                            const AnyTensor& bias, double eps) {
  Attrs a{{"normalized_shape", normalized_shape}, {"eps", eps}};
  std::vector<AnyTensor> in{x};
  if (weight.defined() || bias.defined()) in.push_back(weight.defined() ? weight : ones(Shape(normalized_shape), x.dtype()));
  if (bias.defined()) in.push_back(bias);
  return call(layer_norm_op, in, a)[0];
}
inline std::pair<AnyTensor, AnyTensor> dropout_with_mask(const AnyTensor& x, double p, bool training,
                                                         std::optional<std::uint64_t> seed) {
  Attrs a{{"p", p}, {"training", training}};
  if (seed) a.set("seed", static_cast<std::int64_t>(*seed));
  const AnyTensor in[1] = {x};
  auto out = call(dropout_op, in, a);
  return {out[0], out[1]};
}
inline AnyTensor dropout(const AnyTensor& x, double p, bool training, std::optional<std::uint64_t> seed) {
  return dropout_with_mask(x, p, training, seed).first;
}
inline AnyTensor embedding(const AnyTensor& weight, const AnyTensor& index) {
  // torch.nn.functional.embedding takes (input, weight): say so when the operands look swapped.
  MS_CHECK(!(weight.defined() && index.defined() && is_integral(weight.dtype()) && is_floating(index.dtype())),
           DTypeError,
           "embedding: index must be an integer tensor (got {} as 'index' and {} as 'weight'); ms::embedding takes "
           "(weight, index), the reverse of torch's embedding(input, weight)",
           index.dtype(), weight.dtype());
  return call1(embedding_op, {weight, index});
}
inline AnyTensor cross_entropy(const AnyTensor& logits, const AnyTensor& target, std::string_view reduction,
                               double label_smoothing, std::int64_t ignore_index) {
  return call1(cross_entropy_op, {logits, target},
               Attrs{{"reduction", std::string(reduction)}, {"label_smoothing", label_smoothing},
                     {"ignore_index", ignore_index}});
}
inline AnyTensor nll_loss(const AnyTensor& log_probs, const AnyTensor& target, std::string_view reduction,
                          std::int64_t ignore_index) {
  return call1(nll_loss_op, {log_probs, target},
               Attrs{{"reduction", std::string(reduction)}, {"ignore_index", ignore_index}});
}
inline AnyTensor mse_loss(const AnyTensor& a, const AnyTensor& b, std::string_view reduction) {
  return call1(mse_loss_op, {a, b}, Attrs{{"reduction", std::string(reduction)}});
}

}  // namespace ms::ops
