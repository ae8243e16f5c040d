#pragma once
// Softmax and log_softmax over one axis (numerically stable: the
// maximum is subtracted before exp). Belongs here: their op definitions and CPU
// kernels (xsimd exp along contiguous rows, column tiles for any other axis).
// Layer-level normalizations (batch/layer norm) belong with nn.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../core/linkage.hpp"
#if MS_KERNEL_BODIES  // core/linkage.hpp
#include "../core/simd.hpp"
#endif

#include "../core/parallel.hpp"
#include "attr_struct.hpp"
#include "views.hpp"

namespace ms::ops {

/// exp(x - max) / sum(exp(x - max)) along `axis` (default the last); float dtypes.
MS_IMPL AnyTensor softmax(const AnyTensor& x, std::int64_t axis = -1);
/// x - max - log(sum(exp(x - max))) along `axis`: the log of softmax without its underflow.
MS_IMPL AnyTensor log_softmax(const AnyTensor& x, std::int64_t axis = -1);

}  // namespace ms::ops

namespace ms {
/// Softmax along `axis` (default the last).
template <Element T>
Tensor<T> softmax(const Tensor<T>& x, std::int64_t axis = -1) { return ops::softmax(x, axis); }
/// Log-softmax along `axis` (default the last).
template <Element T>
Tensor<T> log_softmax(const Tensor<T>& x, std::int64_t axis = -1) { return ops::log_softmax(x, axis); }
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {

/// The attributes of softmax and log_softmax (see ops/attr_struct.hpp).
struct SoftmaxAttrs {
  std::int64_t axis = -1;
  static auto fields() { return std::tuple{field("axis", &SoftmaxAttrs::axis, -1)}; }
};

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

inline void infer_softmax(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
  normalize_axis(attrs_as<SoftmaxAttrs>(op, a).axis, in[0].shape.rank(), op.name);
  out.push_back(in[0]);
}

/// max with NaN propagation (x86 maxps returns its second operand when either is NaN).
template <class V>
inline V max_nan(V a, V b) { return simd::select(simd::isnan(a), a, simd::max(a, b)); }

/// One contiguous row of length n.
template <bool Log, class T>
void softmax_row(const T* x, T* y, std::int64_t n) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = B::size;
  std::int64_t i = 0;
  B vm(-std::numeric_limits<T>::infinity());
  for (; i + W <= n; i += W) vm = max_nan(vm, B::load_unaligned(x + i));
  alignas(64) T lanes[W];
  vm.store_aligned(lanes);
  T m = lanes[0];
  for (std::int64_t k = 1; k < W; ++k) m = max_nan(m, lanes[k]);
  for (; i < n; ++i) m = max_nan(m, x[i]);

  const B bm(m);
  B vs0(T(0)), vs1(T(0));
  i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    B e0 = xsimd::exp(B::load_unaligned(x + i) - bm), e1 = xsimd::exp(B::load_unaligned(x + i + W) - bm);
    if constexpr (!Log) e0.store_unaligned(y + i), e1.store_unaligned(y + i + W);
    vs0 += e0;
    vs1 += e1;
  }
  for (; i + W <= n; i += W) {
    B e0 = xsimd::exp(B::load_unaligned(x + i) - bm);
    if constexpr (!Log) e0.store_unaligned(y + i);
    vs0 += e0;
  }
  T s = xsimd::hadd(vs0 + vs1);
  for (; i < n; ++i) {
    T e = std::exp(x[i] - m);
    if constexpr (!Log) y[i] = e;
    s += e;
  }
  i = 0;
  if constexpr (Log) {  // (x - m) - log(s): x - m is exact near the maximum, m + log(s) would round
    const T ls = std::log(s);
    const B bls(ls);
    for (; i + W <= n; i += W) ((B::load_unaligned(x + i) - bm) - bls).store_unaligned(y + i);
    for (; i < n; ++i) y[i] = (x[i] - m) - ls;
  } else {
    const T r = T(1) / s;
    const B br(r);
    for (; i + W <= n; i += W) (B::load_unaligned(y + i) * br).store_unaligned(y + i);
    for (; i < n; ++i) y[i] *= r;
  }
}

/// A tile of w columns of a contiguous (R, C) block (row stride C): softmax down each column.
template <bool Log, class T>
void softmax_cols(const T* x, T* y, std::int64_t R, std::int64_t C, std::int64_t w, T* m, T* s) {
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = B::size;
  std::copy(x, x + w, m);
  for (std::int64_t r = 1; r < R; ++r) {
    const T* row = x + r * C;
    std::int64_t c = 0;
    for (; c + W <= w; c += W) max_nan(B::load_unaligned(m + c), B::load_unaligned(row + c)).store_unaligned(m + c);
    for (; c < w; ++c) m[c] = max_nan(m[c], row[c]);
  }
  std::fill(s, s + w, T(0));
  for (std::int64_t r = 0; r < R; ++r) {
    const T* row = x + r * C;
    T* out = y + r * C;
    std::int64_t c = 0;
    for (; c + W <= w; c += W) {
      B e = xsimd::exp(B::load_unaligned(row + c) - B::load_unaligned(m + c));
      if constexpr (!Log) e.store_unaligned(out + c);
      (B::load_unaligned(s + c) + e).store_unaligned(s + c);
    }
    for (; c < w; ++c) {
      T e = std::exp(row[c] - m[c]);
      if constexpr (!Log) out[c] = e;
      s[c] += e;
    }
  }
  for (std::int64_t c = 0; c < w; ++c) s[c] = Log ? std::log(s[c]) : T(1) / s[c];
  for (std::int64_t r = 0; r < R; ++r) {
    const T* row = x + r * C;
    T* out = y + r * C;
    std::int64_t c = 0;
    if constexpr (Log) {
      for (; c + W <= w; c += W)
        ((B::load_unaligned(row + c) - B::load_unaligned(m + c)) - B::load_unaligned(s + c)).store_unaligned(out + c);
      for (; c < w; ++c) out[c] = (row[c] - m[c]) - s[c];
    } else {
      for (; c + W <= w; c += W) (B::load_unaligned(out + c) * B::load_unaligned(s + c)).store_unaligned(out + c);
      for (; c < w; ++c) out[c] *= s[c];
    }
  }
}

template <bool Log>
void softmax_kernel(const KernelArgs& k) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const AnyTensor& y = k.out[0];
  if (y.numel() == 0) return;
  const int rank = x.dim();
  const int ax = rank == 0 ? 0 : normalize_axis(attrs_as<SoftmaxAttrs>(k.op, k.attrs).axis, rank, k.op.name);
  std::int64_t A = 1, R = 1, C = 1;
  for (int i = 0; i < rank; ++i) (i < ax ? A : i == ax ? R : C) *= x.shape()[i];
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (simd_type_v<T>) {
      const T* xp = static_cast<const T*>(x.raw_data());
      T* yp = static_cast<T*>(y.raw_data());
      // exp costs ~10 flops an element, so threads pay off sooner than for a copy.
      constexpr std::int64_t grain = kParallelGrain / 4;
      if (C == 1) {
        parallel_for(A, std::max<std::int64_t>(1, grain / R), [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t a = b; a < e; ++a) softmax_row<Log>(xp + a * R, yp + a * R, R);
        }, 1);
        return;
      }
      constexpr std::int64_t TW = 256;
      const std::int64_t ntile = (C + TW - 1) / TW;
      parallel_for(A * ntile, std::max<std::int64_t>(1, grain / (R * std::min(C, TW))), [&](std::int64_t b, std::int64_t e) {
        T m[TW], s[TW];
        for (std::int64_t t = b; t < e; ++t) {
          const std::int64_t a = t / ntile, c0 = (t % ntile) * TW;
          const std::int64_t off = a * R * C + c0;
          softmax_cols<Log>(xp + off, yp + off, R, C, std::min(TW, C - c0), m, s);
        }
      }, 1);
    } else {
      MS_THROW(DTypeError, "{}: no CPU kernel for dtype {}", k.op.name, x.dtype());
    }
  });
}

template <bool Log>
OpDef make_softmax_op() {
  OpDef d;
  d.name = Log ? "log_softmax" : "softmax";
  d.doc = Log ? "log of softmax along an axis (x - max - log sum exp)" : "exp(x - max) normalized to sum 1 along an axis";
  d.category = Category::softmax;
  d.num_inputs = 1;
  d.attr_schema = &attr_schema<SoftmaxAttrs>("SoftmaxAttrs");
  d.infer = &infer_softmax;
  d.kernel = &softmax_kernel<Log>;
  d.cost = [](const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
    double n = static_cast<double>(numel(in[0].shape));
    return Cost{n * 15, n * static_cast<double>(dtype_size(in[0].dtype) + dtype_size(out[0].dtype))};
  };
  d.cpu_dtypes = kFloatTypes;
  return d;
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

MS_REGISTRATION(const OpDef& softmax_op, registry().add(detail::make_softmax_op<false>()));
MS_REGISTRATION(const OpDef& log_softmax_op, registry().add(detail::make_softmax_op<true>()));

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL AnyTensor softmax(const AnyTensor& x, std::int64_t axis) {
  return call1(softmax_op, {x}, to_attrs(SoftmaxAttrs{axis}));
}
MS_IMPL AnyTensor log_softmax(const AnyTensor& x, std::int64_t axis) {
  return call1(log_softmax_op, {x}, to_attrs(SoftmaxAttrs{axis}));
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::ops
