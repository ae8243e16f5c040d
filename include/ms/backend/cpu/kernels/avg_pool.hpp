#pragma once
// Average pooling of the CPU backend (ops/nn/pool.hpp): the ordinary and the adaptive
// windows, forward (y from x) and adjoint (gx from gy), over a range of planes. Compiled
// once per CPU level (MS_ISA_NS) and bound by name (cpu::isa_function; rows "avg_pool_f32",
// "avg_pool_grad_f32", "adaptive_avg_pool_f32", "adaptive_avg_pool_grad_f32" and their f64
// twins). Includes nothing above core/.

#include <algorithm>
#include <cstdint>

#include "../../../core/linkage.hpp"
#include "abi.hpp"

namespace ms::ops {

/// The arguments of the average pooling kernels: planes [p0, p1) of src (planes of H x W
/// forward, Ho x Wo adjoint) into dst. Windows kh x kw, stride (sh, sw), padding (ph, pw);
/// divisor: divisor_override (0: none).
template <class T>
struct AvgPoolArgs {
  const T* src;
  T* dst;
  std::int64_t H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, divisor;
  bool count_include_pad;
  std::int64_t p0, p1;
};

namespace detail {
inline namespace MS_ISA_NS {

/// The window of output index o along one axis: input range [lo, hi) and the number of
/// elements its average divides by along that axis (padding counted or not). Adaptive
/// windows split n inputs over n_out outputs; ordinary ones start at o * stride - pad.
struct PoolAxis {
  std::int64_t lo, hi, div;
};
template <bool Adaptive>
inline PoolAxis pool_axis(std::int64_t o, std::int64_t n, std::int64_t n_out, std::int64_t k, std::int64_t stride,
                          std::int64_t pad, bool count_include_pad) {
  if constexpr (Adaptive) {
    const std::int64_t lo = o * n / n_out, hi = ((o + 1) * n + n_out - 1) / n_out;
    return {lo, hi, hi - lo};
  } else {
    const std::int64_t start = o * stride - pad;
    const std::int64_t lo = std::max<std::int64_t>(start, 0), hi = std::min(start + k, n);
    return {lo, hi, count_include_pad ? std::min(start + k, n + pad) - start : hi - lo};
  }
}

/// Average pooling (Adjoint = false: y from x) or its adjoint (true: gx from gy), over the
/// windows of an ordinary (Adaptive = false) or adaptive pooling.
template <bool Adaptive, bool Adjoint, class T>
void avg_pool_kernel(const void* args) {
  const AvgPoolArgs<T>& a = *static_cast<const AvgPoolArgs<T>*>(args);
  const T* src = a.src;
  T* dst = a.dst;
  const bool count_include_pad = a.count_include_pad;
  struct {
    std::int64_t H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, divisor;
  } const q{a.H, a.W, a.Ho, a.Wo, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.divisor};
  const std::int64_t HW = q.H * q.W, P = q.Ho * q.Wo, b = a.p0, e = a.p1;

  for (std::int64_t pl = b; pl < e; ++pl) {
    if constexpr (Adjoint) std::fill(dst + pl * HW, dst + (pl + 1) * HW, T(0));
    for (std::int64_t oh = 0; oh < q.Ho; ++oh) {
      const PoolAxis h = pool_axis<Adaptive>(oh, q.H, q.Ho, q.kh, q.sh, q.ph, count_include_pad);
      const std::int64_t ha = h.lo, hb = h.hi;
      for (std::int64_t ow = 0; ow < q.Wo; ++ow) {
        const PoolAxis w = pool_axis<Adaptive>(ow, q.W, q.Wo, q.kw, q.sw, q.pw, count_include_pad);
        const std::int64_t wa = w.lo, wb = w.hi;
        const T scale = T(1) / static_cast<T>(q.divisor > 0 ? q.divisor : h.div * w.div);
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
}

MS_ISA_FUNCTION("avg_pool_f32", (&avg_pool_kernel<false, false, float>));
MS_ISA_FUNCTION("avg_pool_f64", (&avg_pool_kernel<false, false, double>));
MS_ISA_FUNCTION("avg_pool_grad_f32", (&avg_pool_kernel<false, true, float>));
MS_ISA_FUNCTION("avg_pool_grad_f64", (&avg_pool_kernel<false, true, double>));
MS_ISA_FUNCTION("adaptive_avg_pool_f32", (&avg_pool_kernel<true, false, float>));
MS_ISA_FUNCTION("adaptive_avg_pool_f64", (&avg_pool_kernel<true, false, double>));
MS_ISA_FUNCTION("adaptive_avg_pool_grad_f32", (&avg_pool_kernel<true, true, float>));
MS_ISA_FUNCTION("adaptive_avg_pool_grad_f64", (&avg_pool_kernel<true, true, double>));

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
