#pragma once
// The softmax kernels of the CPU backend (ops/softmax.hpp): softmax and log_softmax along
// contiguous rows, and down the columns of a tile for any other axis (numerically stable:
// the maximum is subtracted before exp; NaN propagates). Compiled once per CPU level
// (MS_ISA_NS) and bound by name (cpu::isa_function; rows "softmax_rows_f32",
// "log_softmax_cols_f64", ...). Includes nothing above core/.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "../../../core/linkage.hpp"
#include "abi.hpp"
#include "simd.hpp"

namespace ms::ops {

/// The arguments of the softmax kernels. Rows: rows [a0, a1) of x (each R contiguous
/// elements) into y. Columns: the w columns of the contiguous (R, C) block at x (row stride
/// C) into y, with m and s the caller's scratch of w elements each.
template <class T>
struct SoftmaxArgs {
  const T* x;
  T* y;
  std::int64_t R, C, w;
  T *m, *s;
  std::int64_t a0, a1;
};

namespace detail {
inline namespace MS_ISA_NS {

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

template <bool Log, class T>
void softmax_rows_kernel(const void* args) {
  const SoftmaxArgs<T>& a = *static_cast<const SoftmaxArgs<T>*>(args);
  for (std::int64_t r = a.a0; r < a.a1; ++r) softmax_row<Log>(a.x + r * a.R, a.y + r * a.R, a.R);
}

template <bool Log, class T>
void softmax_cols_kernel(const void* args) {
  const SoftmaxArgs<T>& a = *static_cast<const SoftmaxArgs<T>*>(args);
  softmax_cols<Log>(a.x, a.y, a.R, a.C, a.w, a.m, a.s);
}

MS_ISA_FUNCTION("softmax_rows_f32", (&softmax_rows_kernel<false, float>));
MS_ISA_FUNCTION("softmax_rows_f64", (&softmax_rows_kernel<false, double>));
MS_ISA_FUNCTION("log_softmax_rows_f32", (&softmax_rows_kernel<true, float>));
MS_ISA_FUNCTION("log_softmax_rows_f64", (&softmax_rows_kernel<true, double>));
MS_ISA_FUNCTION("softmax_cols_f32", (&softmax_cols_kernel<false, float>));
MS_ISA_FUNCTION("softmax_cols_f64", (&softmax_cols_kernel<false, double>));
MS_ISA_FUNCTION("log_softmax_cols_f32", (&softmax_cols_kernel<true, float>));
MS_ISA_FUNCTION("log_softmax_cols_f64", (&softmax_cols_kernel<true, double>));

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
