#pragma once
// The normalization kernels of the CPU backend (ops/nn/norm.hpp): batch_norm and layer_norm,
// forward and gradient, over a range of channels or rows, statistics accumulated in double.
// Compiled once per CPU level (MS_ISA_NS) and bound by name (cpu::isa_function; rows
// "batch_norm_f32", ...); the ops split the channels or rows between threads. Includes
// nothing above core/.

#include <cmath>
#include <cstdint>

#include "../../../core/linkage.hpp"
#include "abi.hpp"

namespace ms::ops {

/// batch_norm over channels [c0, c1) of x (N, C, S contiguous): y, the batch mean and invstd
/// per channel, and (training with running statistics) the running mean and variance
/// updated in place. w, b, rm, rv are read ws, bs, rms, rvs elements apart.
template <class T>
struct BatchNormArgs {
  const T *xp, *wp, *bp;
  std::int64_t ws, bs;
  T *rm, *rv;
  std::int64_t rms, rvs;
  T *yp, *mean_out, *invstd_out;
  std::int64_t N, C, S, M;
  bool training, has_running;
  double momentum, eps;
  std::int64_t c0, c1;
};

/// batch_norm's gradient over channels [c0, c1): gx, and the weight and bias gradients.
template <class T>
struct BatchNormGradArgs {
  const T *gp, *xp, *wp, *mp, *ip;
  std::int64_t ws, ms_, is;
  T *gx, *gw, *gb;
  std::int64_t N, C, S, M;
  bool training;
  std::int64_t c0, c1;
};

/// layer_norm over rows [r0, r1) of D elements (w, b: null or D elements), and its
/// gradient: gx over rows [r0, r1) (R rows in all), the weight and bias gradients over
/// columns [r0, r1) (layer_norm_grad_cols).
template <class T>
struct LayerNormArgs {
  const T *xp, *wp, *bp, *gp, *mp, *rp;
  T *yp, *mo, *ro, *gx, *gw, *gb;
  std::int64_t R, D;
  double eps;
  std::int64_t r0, r1;
};

namespace detail {
inline namespace MS_ISA_NS {

template <class T>
void batch_norm_kernel(const void* args) {
  const BatchNormArgs<T>& A = *static_cast<const BatchNormArgs<T>*>(args);
  const T *xp = A.xp, *wp = A.wp, *bp = A.bp;
  T *rm = A.rm, *rv = A.rv, *yp = A.yp, *mean_out = A.mean_out, *invstd_out = A.invstd_out;
  const std::int64_t ws = A.ws, bs = A.bs, rms = A.rms, rvs = A.rvs, N = A.N, C = A.C, S = A.S, M = A.M;
  const bool training = A.training, has_running = A.has_running;
  const double momentum = A.momentum, eps = A.eps;
  const std::int64_t cb = A.c0, ce = A.c1;

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
}

template <class T>
void batch_norm_grad_kernel(const void* args) {
  const BatchNormGradArgs<T>& A = *static_cast<const BatchNormGradArgs<T>*>(args);
  const T *gp = A.gp, *xp = A.xp, *wp = A.wp, *mp = A.mp, *ip = A.ip;
  T *gx = A.gx, *gw = A.gw, *gb = A.gb;
  const std::int64_t ws = A.ws, ms_ = A.ms_, is = A.is, N = A.N, C = A.C, S = A.S, M = A.M;
  const bool training = A.training;
  const std::int64_t cb = A.c0, ce = A.c1;

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
}

template <class T>
void layer_norm_kernel(const void* args) {
  const LayerNormArgs<T>& A = *static_cast<const LayerNormArgs<T>*>(args);
  const T *xp = A.xp, *wp = A.wp, *bp = A.bp;
  T *yp = A.yp, *mo = A.mo, *ro = A.ro;
  const std::int64_t D = A.D, rb = A.r0, re = A.r1;
  const double eps = A.eps;

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
}

template <class T>
void layer_norm_grad_rows_kernel(const void* args) {
  const LayerNormArgs<T>& A = *static_cast<const LayerNormArgs<T>*>(args);
  const T *gp = A.gp, *xp = A.xp, *mp = A.mp, *rp = A.rp, *wp = A.wp;
  T* gx = A.gx;
  const std::int64_t D = A.D, rb = A.r0, re = A.r1;

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
}

template <class T>
void layer_norm_grad_cols_kernel(const void* args) {
  const LayerNormArgs<T>& A = *static_cast<const LayerNormArgs<T>*>(args);
  const T *gp = A.gp, *xp = A.xp, *mp = A.mp, *rp = A.rp;
  T *gw = A.gw, *gb = A.gb;
  const std::int64_t D = A.D, R = A.R, cb = A.r0, ce = A.r1;

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
}

MS_ISA_FUNCTION("batch_norm_f32", &batch_norm_kernel<float>);
MS_ISA_FUNCTION("batch_norm_f64", &batch_norm_kernel<double>);
MS_ISA_FUNCTION("batch_norm_grad_f32", &batch_norm_grad_kernel<float>);
MS_ISA_FUNCTION("batch_norm_grad_f64", &batch_norm_grad_kernel<double>);
MS_ISA_FUNCTION("layer_norm_f32", &layer_norm_kernel<float>);
MS_ISA_FUNCTION("layer_norm_f64", &layer_norm_kernel<double>);
MS_ISA_FUNCTION("layer_norm_grad_rows_f32", &layer_norm_grad_rows_kernel<float>);
MS_ISA_FUNCTION("layer_norm_grad_rows_f64", &layer_norm_grad_rows_kernel<double>);
MS_ISA_FUNCTION("layer_norm_grad_cols_f32", &layer_norm_grad_cols_kernel<float>);
MS_ISA_FUNCTION("layer_norm_grad_cols_f64", &layer_norm_grad_cols_kernel<double>);

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
