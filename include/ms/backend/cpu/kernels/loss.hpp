#pragma once
// The cross-entropy kernels of the CPU backend (ops/nn/loss.hpp): per row of logits, the
// numerically stable log-sum-exp in double (one SIMD exp per element, shared by the loss
// and its gradient), the loss with label smoothing and ignore_index, and the gradient.
// Compiled once per CPU level (MS_ISA_NS) and bound by name (cpu::isa_function; rows
// "cross_entropy_f32", "cross_entropy_grad_f64", ...). Includes nothing above core/.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "../../../core/linkage.hpp"
#include "abi.hpp"
#include "simd.hpp"

namespace ms::ops {

/// The arguments of the cross-entropy kernels, rows [i0, i1) of the logits z (N, C) against
/// targets target[i * ts] (rows whose target is `ignore` are skipped, or zeroed in the
/// gradient); eps: label smoothing. The loss writes row[i] and keep[i]; the gradient writes
/// out (N, C) from g[i] (g_per_row) or g[0], divided by denom. e: the caller's scratch of
/// cross_entropy_scratch(C) doubles.
template <class T>
struct CrossEntropyArgs {
  const T* z;
  const std::int64_t* target;
  std::int64_t ts, ignore, C;
  double eps;
  double* row;
  char* keep;
  const T* g;
  bool g_per_row;
  double denom;
  T* out;
  double* e;
  std::int64_t i0, i1;
};

/// Room for one row's exponentials: C doubles rounded up to 8 (whole batches at every level).
inline std::int64_t cross_entropy_scratch(std::int64_t C) { return (C + 7) / 8 * 8; }

namespace detail {
inline namespace MS_ISA_NS {

/// e[c] = exp(z[c] - m) for the row's maximum m (returned in m), in double through SIMD
/// batches over the padded row (padding lanes unused); returns sum_c e[c].
template <class T>
double shifted_exp(const T* z, std::int64_t C, double* e, double& m) {
  using D = xsimd::batch<double>;
  constexpr std::int64_t W = static_cast<std::int64_t>(D::size);
  m = -std::numeric_limits<double>::infinity();
  for (std::int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(z[c]));
  const std::int64_t padded = cross_entropy_scratch(C);
  for (std::int64_t c = 0; c < padded; ++c) e[c] = c < C ? static_cast<double>(z[c]) - m : 0.0;
  for (std::int64_t c = 0; c < padded; c += W) xsimd::exp(D::load_unaligned(e + c)).store_unaligned(e + c);
  double s = 0;
  for (std::int64_t c = 0; c < C; ++c) s += e[c];
  return s;
}

template <class T>
void cross_entropy_kernel(const void* args) {
  const CrossEntropyArgs<T>& a = *static_cast<const CrossEntropyArgs<T>*>(args);
  const std::int64_t C = a.C;
  const double eps = a.eps;
  for (std::int64_t i = a.i0; i < a.i1; ++i) {
    const std::int64_t t = a.target[i * a.ts];
    if (t == a.ignore) continue;
    const T* zr = a.z + i * C;
    double sz = 0;
    for (std::int64_t c = 0; c < C; ++c) sz += static_cast<double>(zr[c]);
    double m = 0;
    const double s = shifted_exp(zr, C, a.e, m);
    const double lse = m + std::log(s);
    // -(1 - eps) * logp[t] - eps / C * sum_c logp[c]
    a.row[i] = (1.0 - eps) * (lse - static_cast<double>(zr[t])) + eps * (lse - sz / static_cast<double>(C));
    a.keep[i] = 1;
  }
}

template <class T>
void cross_entropy_grad_kernel(const void* args) {
  const CrossEntropyArgs<T>& a = *static_cast<const CrossEntropyArgs<T>*>(args);
  const std::int64_t C = a.C;
  const double eps = a.eps;
  for (std::int64_t i = a.i0; i < a.i1; ++i) {
    const std::int64_t t = a.target[i * a.ts];
    T* o = a.out + i * C;
    if (t == a.ignore) {
      std::fill(o, o + C, T(0));
      continue;
    }
    const T* zr = a.z + i * C;
    const double gi = static_cast<double>(a.g_per_row ? a.g[i] : a.g[0]) / a.denom;
    double m = 0;
    const double inv = 1.0 / shifted_exp(zr, C, a.e, m), u = eps / static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) o[c] = static_cast<T>(gi * (a.e[c] * inv - u - (c == t ? 1.0 - eps : 0.0)));
  }
}

MS_ISA_FUNCTION("cross_entropy_f32", &cross_entropy_kernel<float>);
MS_ISA_FUNCTION("cross_entropy_f64", &cross_entropy_kernel<double>);
MS_ISA_FUNCTION("cross_entropy_grad_f32", &cross_entropy_grad_kernel<float>);
MS_ISA_FUNCTION("cross_entropy_grad_f64", &cross_entropy_grad_kernel<double>);

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
