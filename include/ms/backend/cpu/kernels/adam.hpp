#pragma once
// The Adam / AdamW update of one parameter in one pass (the kernel of ops/optim_ops.hpp's
// adam_update): reads p, g, m and v once and writes p', m' and v', each operation rounded
// as the composite form's separate op would be (no FMA contraction; the one division done
// with FMAs, adam_div_bc2, rounds as the division does). Compiled once per CPU
// level (MS_ISA_NS) and bound by name (cpu::isa_function, rows "adam_update_f32" and
// "adam_update_f64"). Includes nothing above core/.

#include <cstdint>
#include <limits>
#include <type_traits>

#include "../../../core/linkage.hpp"
#include "abi.hpp"
#include "simd.hpp"

namespace ms::ops {

/// Scalars of one adam_update call, in the parameter's dtype (as the composite form's
/// scalar operands would be).
template <class T>
struct AdamScalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay;
  T step_size, bc2_sqrt, decay;
  /// 1 / bc2_sqrt rounded to nearest, and whether the division by bc2_sqrt may run as a
  /// multiplication by it with an FMA correction (see adam_div_bc2): bc2_sqrt in [2^-60, 2^60].
  T bc2_recip;
  bool bc2_recip_exact;
  bool l2, decoupled;
};

/// The scalars that follow from bc2_sqrt (AdamScalars::bc2_recip and bc2_recip_exact).
template <class T>
constexpr void set_bc2_recip(AdamScalars<T>& s) {
  s.bc2_recip = T(1) / s.bc2_sqrt;
  constexpr T lo = T(1) / T(1ull << 60), hi = T(1ull << 60);
  s.bc2_recip_exact = s.bc2_sqrt >= lo && s.bc2_sqrt <= hi;  // false for NaN
}

/// The arguments of the adam_update kernels: elements [lo, hi) of p, g, m and v, results in
/// po, mo and vo (which may be p, m and v: each batch is loaded whole before its results
/// are stored).
template <class T>
struct AdamArgs {
  AdamScalars<T> s;
  const T *p, *g, *m, *v;
  T *po, *mo, *vo;
  std::int64_t lo, hi;
};

namespace detail {
inline namespace MS_ISA_NS {

/// sqrt(v) / bc2_sqrt, rounded to nearest as the division is, for d = sqrt(v). On the
/// Adam step's critical unit (one square root and two divisions per element all run on the
/// divider), this division by the step's scalar becomes a multiplication and two FMAs when
/// the level has FMA: q = d * y with y = RN(1 / b) is within an ulp of d / b, the remainder
/// d - q * b is then exact in one FMA, and RN(q + (d - q * b) * y) = RN(d / b) (Markstein's
/// theorem). It holds for every d in (0, inf): such d = sqrt(v) lies in [2^-75, 2^64]
/// (float) or [2^-537, 2^512] (double), so with b in [2^-60, 2^60] neither q nor the
/// remainder leaves the normal range. d = +-0, inf and NaN keep the division's result, which
/// is d itself (b is positive).
template <class V, class T>
inline V adam_div_bc2(const AdamScalars<T>& s, V d) {
#if defined(__FMA__)
  if constexpr (!std::is_same_v<V, T>) {
    if (s.bc2_recip_exact) {
      const V y(s.bc2_recip), b(s.bc2_sqrt);
      const V q = d * y;
      const V r = xsimd::fnma(q, b, d);  // d - q * b, exact
      const V q1 = xsimd::fma(r, y, q);
      return xsimd::select((d > V(T(0))) & (d < V(std::numeric_limits<T>::infinity())), q1, d);
    }
  }
#endif
  return d / s.bc2_sqrt;
}

/// One element (or batch) of the update, in the order and rounding of optim::Adam's
/// composite form:
///   p = p * decay                                  (AdamW: decoupled decay)
///   g = g + p * weight_decay                       (Adam: L2 term)
///   m = m * beta1 + g * (1 - beta1);  v = v * beta2 + (g * g) * (1 - beta2)
///   p = p - (m / (sqrt(v) / sqrt(1 - beta2^t) + eps)) * (lr / (1 - beta1^t))
template <class V, class T>
inline void adam_element(const AdamScalars<T>& s, V& p, V g, V& m, V& v) {
  auto prod = [](V a, auto b) {
    V r = a * b;
    simd::no_contract(r);  // rounded before the following addition, as the separate ops are
    return r;
  };
  if (s.decoupled) p = prod(p, s.decay);
  if (s.l2) g = g + prod(p, s.weight_decay);
  m = prod(m, s.beta1) + prod(g, s.one_minus_beta1);
  v = prod(v, s.beta2) + prod(prod(g, g), s.one_minus_beta2);
  V denom = adam_div_bc2(s, simd::sqrt(v)) + s.eps;
  p = p - prod(m / denom, s.step_size);
}

/// The update over elements [lo, hi), with the optional terms fixed at compile time. The
/// scalars and pointers are local copies: read through references, they could alias the
/// (float) outputs, and the compiler reloaded them after every store (the loop then took
/// twice as long on a 200k-element parameter).
template <bool Decoupled, bool L2, class T>
void adam_range(AdamScalars<T> c, const T* pp, const T* gp, const T* mp, const T* vp, T* po, T* mo, T* vo,
                std::int64_t lo, std::int64_t hi) {
  c.decoupled = Decoupled;
  c.l2 = L2;
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  std::int64_t i = lo;
  for (; i + W <= hi; i += W) {
    B p = B::load_unaligned(pp + i), m = B::load_unaligned(mp + i), v = B::load_unaligned(vp + i);
    adam_element(c, p, B::load_unaligned(gp + i), m, v);
    p.store_unaligned(po + i);
    m.store_unaligned(mo + i);
    v.store_unaligned(vo + i);
  }
  for (; i < hi; ++i) {
    T p = pp[i], m = mp[i], v = vp[i];
    adam_element(c, p, gp[i], m, v);
    po[i] = p;
    mo[i] = m;
    vo[i] = v;
  }
}

/// The update of one AdamArgs<T> range, the optional terms chosen once.
template <class T>
void adam_update_kernel(const void* args) {
  const AdamArgs<T>& a = *static_cast<const AdamArgs<T>*>(args);
  if (a.s.decoupled) adam_range<true, false>(a.s, a.p, a.g, a.m, a.v, a.po, a.mo, a.vo, a.lo, a.hi);
  else if (a.s.l2) adam_range<false, true>(a.s, a.p, a.g, a.m, a.v, a.po, a.mo, a.vo, a.lo, a.hi);
  else adam_range<false, false>(a.s, a.p, a.g, a.m, a.v, a.po, a.mo, a.vo, a.lo, a.hi);
}

MS_ISA_FUNCTION("adam_update_f32", &adam_update_kernel<float>);
MS_ISA_FUNCTION("adam_update_f64", &adam_update_kernel<double>);

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
