#pragma once
// The SIMD math facade of the CPU backend: one spelling for scalars and xsimd batches
// (simd::exp, simd::tanh, simd::select, simd::no_contract, ...), in which the elementwise
// formulas of ops/unary.hpp, ops/binary.hpp and users' define_elementwise ops are written.
// Compiled once per CPU level: everything here lives in the level's namespace (MS_ISA_NS,
// core/simd.hpp; see backend/cpu/isa_unit.hpp). Includes nothing above core/.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../../../core/intrin.hpp"  // before Eigen: see there
#include <Eigen/Core>
#include "../../../core/simd.hpp"

// The loops over a block's accumulators run a compile-time count of times: unrolled at every
// -O, so that the accumulators stay in registers (GCC's -O2 kept them on the stack: 2.5x slower).
#if !defined(MS_UNROLL)
#if defined(__clang__)
#define MS_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define MS_UNROLL _Pragma("GCC unroll 16")
#else
#define MS_UNROLL
#endif
#endif

namespace ms::simd {

/// Whether the kernels' SIMD paths take T (float and double; other dtypes run scalar loops).
/// A property of the type, the same at every CPU level, so it lives outside the level's namespace.
template <class T>
inline constexpr bool vectorized_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

inline namespace MS_ISA_NS {

template <class V>
struct is_batch : std::false_type {};
template <class T, class A>
struct is_batch<xsimd::batch<T, A>> : std::true_type {};
template <class V>
inline constexpr bool is_batch_v = is_batch<V>::value;

template <class V>
struct scalar_of { using type = V; };
template <class T, class A>
struct scalar_of<xsimd::batch<T, A>> { using type = T; };
template <class V>
using scalar_t = typename scalar_of<V>::type;

/// A constant of the formula's type: c<V>(0.5) is a float, a double or a broadcast batch.
template <class V>
inline V c(double v) {
  return V(static_cast<scalar_t<V>>(v));
}

/// The mask of a batch's first n lanes (0 <= n <= the batch size).
template <class B>
inline auto first_lanes(std::int64_t n) {
  using T = scalar_t<B>;
  alignas(64) T index[B::size];
  for (std::size_t l = 0; l < B::size; ++l) index[l] = static_cast<T>(l);
  return B::load_aligned(index) < B(static_cast<T>(n));
}

#if defined(__AVX512F__)
/// The AVX-512 mask of the lanes l of a 16-lane register with lo <= l < hi (either bound may
/// lie outside [0, 16)).
inline __mmask16 lanes_between(std::int64_t lo, std::int64_t hi) {
  lo = std::clamp<std::int64_t>(lo, 0, 16);
  hi = std::clamp<std::int64_t>(hi, 0, 16);
  if (hi <= lo) return 0;
  return static_cast<__mmask16>((hi == 16 ? 0xFFFFu : (1u << hi) - 1u) & ~((1u << lo) - 1u));
}
#endif

/// The n elements at p (0 < n < the batch size) in a batch whose other lanes are zero;
/// `first` is first_lanes<B>(n). With `read_on` (the caller knows that a whole batch at p
/// is readable) the batch is loaded whole and masked, otherwise it goes through a copy, so
/// that nothing past p + n is read.
template <class B>
inline B load_first(const scalar_t<B>* p, std::int64_t n, const typename B::batch_bool_type& first, bool read_on) {
  if (read_on) return xsimd::select(first, B::load_unaligned(p), B(scalar_t<B>(0)));
  alignas(64) scalar_t<B> tmp[B::size] = {};
  for (std::int64_t l = 0; l < n; ++l) tmp[l] = p[l];
  return B::load_aligned(tmp);
}

// Unary math: xsimd for batches, <cmath> for scalars.
#define MS_SIMD_UNARY(name, scalar_expr)                  \
  template <class V>                                      \
  inline V name(const V& x) {                             \
    if constexpr (is_batch_v<V>) return xsimd::name(x);   \
    else return scalar_expr;                              \
  }
MS_SIMD_UNARY(log, static_cast<V>(std::log(x)))
MS_SIMD_UNARY(log1p, static_cast<V>(std::log1p(x)))
MS_SIMD_UNARY(expm1, static_cast<V>(std::expm1(x)))
MS_SIMD_UNARY(sqrt, static_cast<V>(std::sqrt(x)))
MS_SIMD_UNARY(sin, static_cast<V>(std::sin(x)))
MS_SIMD_UNARY(cos, static_cast<V>(std::cos(x)))
MS_SIMD_UNARY(floor, static_cast<V>(std::floor(x)))
MS_SIMD_UNARY(ceil, static_cast<V>(std::ceil(x)))
MS_SIMD_UNARY(nearbyint, static_cast<V>(std::nearbyint(x)))  // half to even, like NumPy's round
#undef MS_SIMD_UNARY

namespace detail {
/// e^x for a float batch: xsimd's method and its values at every edge, 1.12-1.16x as fast
/// (SSE2 to AVX-512, AMD Zen 4); over every float in [-87.3, 88.3] at most 1.55 ulp from the
/// correctly rounded result (xsimd's: 1.53), and never more than 1 ulp from xsimd's. x = k ln2 + r
/// (k = nearbyint(x / ln2), ln2 in two parts), e^r = 1 + r + r^2 p(r) with xsimd's degree-4
/// minimax p (Cephes), evaluated in Estrin's order (fewer dependent steps than Horner's), and
/// 2^k put in the exponent field. Where xsimd compares and selects for its range, x is clamped
/// to [-88, 89] first: 2^-127 (below -87.68) is the zero bit pattern and 2^128 (above 88.38)
/// the infinite one, so under- and overflow give 0 and inf as xsimd's do. max(lo, x) and
/// min(hi, .) return their second operand when one is NaN (SSE/AVX semantics, and NEON's
/// max propagates NaN): a NaN x stays NaN.
template <class V>
inline V exp_f32(const V& x0) {
  using I = xsimd::batch<std::int32_t, typename V::arch_type>;
  const V x = xsimd::min(V(89.0f), xsimd::max(V(-88.0f), x0));
  const V k = xsimd::nearbyint(x * V(1.44269504088896341f));
  V r = xsimd::fnma(k, V(0.693359375f), x);  // ln2 = 0.693359375 - 2.12194440e-4
  r = xsimd::fnma(k, V(-2.12194440e-4f), r);
  const V r2 = r * r;
  const V p01 = xsimd::fma(V(1.6666277e-01f), r, V(0.5f));
  const V p23 = xsimd::fma(V(8.3955629e-03f), r, V(4.1665401e-02f));
  const V p = xsimd::fma(xsimd::fma(V(1.3997796e-03f), r2, p23), r2, p01);
  const V y = xsimd::fma(p, r2, r) + V(1.0f);
  return y * xsimd::bitwise_cast<V>((xsimd::to_int(k) + I(127)) << 23);
}

/// Eigen's float tanh on its packet, inlined whole wherever it is used: GCC at -O2 keeps
/// generic_fast_tanh_float out of line (a call per batch, the operand passed through
/// memory), which took a fifth of the interpreted 8-op chain's time at AVX-512.
template <class R>
#if defined(__GNUC__)
[[gnu::flatten]]
#endif
inline R eigen_tanh(const R& x) {
  return Eigen::internal::ptanh(x);
}
}  // namespace detail

/// exp: detail::exp_f32 for float batches, xsimd for double batches, <cmath> for scalars.
template <class V>
inline V exp(const V& x) {
  if constexpr (is_batch_v<V> && std::is_same_v<scalar_t<V>, float>) return detail::exp_f32(x);
  else if constexpr (is_batch_v<V>) return xsimd::exp(x);
  else return static_cast<V>(std::exp(x));
}

/// tanh. Float batches use Eigen's rational approximation (one division, no exp): 1.7x
/// faster than xsimd's exp-based tanh and at most 5 ulp from the correctly rounded result
/// over all floats (xsimd's: 1 ulp); the common choice of ML runtimes (TensorFlow, XLA and
/// ONNX Runtime use rational forms too). NaN stays NaN. Double batches use xsimd
/// (1 ulp). The Eigen path needs Eigen's packet to be xsimd's register (SSE, AVX, AVX-512,
/// NEON); other targets fall back to xsimd.
template <class V>
inline V tanh(const V& x) {
  if constexpr (is_batch_v<V>) {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"  // vector types as template arguments
#endif
    using Reg = std::remove_cv_t<decltype(x.data)>;
    constexpr bool eigen_packet = std::is_same_v<scalar_t<V>, float> &&
                                  std::is_same_v<Reg, typename Eigen::internal::packet_traits<float>::type>;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
    if constexpr (eigen_packet) {
      // A NaN needs no select of its own: Eigen's clamp (pmin, then pmax) keeps the NaN
      // operand on every packet type this path takes (SSE/AVX min and max with the
      // arguments reversed, NEON's propagate), and the polynomial carries it through. The
      // select cost 4% of the fused 8-op chain at AVX-512 (benchmarks/fused_chain, 16M).
      return V(detail::eigen_tanh(x.data));
    } else {
      return xsimd::tanh(x);
    }
  } else {
    return static_cast<V>(std::tanh(x));
  }
}

/// tanh through exp (xsimd's, 1 ulp), for formulas where 1 + tanh(x) cancels: the rational
/// form rounds tanh(x) to -1 below x = -7.9, where 1 + tanh(x) is still ~2e-7.
template <class V>
inline V tanh_exp(const V& x) {
  if constexpr (is_batch_v<V>) return xsimd::tanh(x);
  else return static_cast<V>(std::tanh(x));
}

namespace detail {
/// Applies the scalar function f to every lane of a batch (for functions whose xsimd form is not accurate).
template <class B, class F>
inline B per_lane(const B& x, F f) {
  alignas(64) scalar_t<B> a[B::size];
  x.store_aligned(a);
  for (auto& v : a) v = f(v);
  return B::load_aligned(a);
}
}  // namespace detail

/// erf. xsimd's double erf is up to ~70 ulp off (and NaN for |x| > ~1e154), so double
/// batches use the C library per lane; xsimd's float erf is within 2 ulp.
template <class V>
inline V erf(const V& x) {
  if constexpr (is_batch_v<V>) {
    if constexpr (std::is_same_v<scalar_t<V>, double>) return detail::per_lane(x, [](double v) { return std::erf(v); });
    else return xsimd::erf(x);
  } else {
    return static_cast<V>(std::erf(x));
  }
}

template <class V>
inline V abs(const V& x) {
  if constexpr (is_batch_v<V>) return xsimd::abs(x);
  else if constexpr (std::is_unsigned_v<V> || std::is_same_v<V, bool>) return x;
  else if constexpr (std::is_integral_v<V>)  // unsigned negation: abs(INT_MIN) wraps to INT_MIN like NumPy, no UB
    return static_cast<V>(x < 0 ? static_cast<V>(std::make_unsigned_t<V>(0) - static_cast<std::make_unsigned_t<V>>(x)) : x);
  else return std::abs(x);
}
template <class V>
inline V pow(const V& x, const V& y) {
  if constexpr (is_batch_v<V>) {
    // xsimd::pow is exp(y * log(x)) in the working precision: hundreds of ulp off for large
    // results, and wrong at IEEE special cases (pow(0, 0), pow(inf, 0), pow(0, -1), ...).
    // float: for positive finite x and finite y the same formula in double is accurate to
    // well below a float ulp; any other lane sends the batch to the C library, as does double.
    using T = scalar_t<V>;
    if constexpr (std::is_same_v<T, float>) {
      const V inf(std::numeric_limits<float>::infinity());
      if (xsimd::all((x > V(0.0f)) & (x < inf) & (xsimd::abs(y) < inf))) {
        using D = xsimd::batch<double>;
        constexpr std::size_t W = V::size, DW = D::size;
        alignas(64) float xf[W], yf[W];
        alignas(64) double xd[W], yd[W];
        x.store_aligned(xf);
        y.store_aligned(yf);
        for (std::size_t i = 0; i < W; ++i) { xd[i] = xf[i]; yd[i] = yf[i]; }
        for (std::size_t k = 0; k < W; k += DW)
          xsimd::exp(D::load_aligned(yd + k) * xsimd::log(D::load_aligned(xd + k))).store_aligned(xd + k);
        for (std::size_t i = 0; i < W; ++i) xf[i] = static_cast<float>(xd[i]);
        return V::load_aligned(xf);
      }
    }
    alignas(64) T a[V::size], b[V::size];
    x.store_aligned(a);
    y.store_aligned(b);
    for (std::size_t i = 0; i < V::size; ++i) a[i] = std::pow(a[i], b[i]);
    return V::load_aligned(a);
  } else if constexpr (std::is_integral_v<V>) {
    if (y < 0) return static_cast<V>(x == 1 ? 1 : (x == V(0) - 1 ? ((y % 2) ? -1 : 1) : 0));
    using U = std::make_unsigned_t<V>;
    U r = 1, b = static_cast<U>(x);
    for (auto e = y; e > 0; e >>= 1, b = static_cast<U>(b * b))
      if (e & 1) r = static_cast<U>(r * b);
    return static_cast<V>(r);
  } else return std::pow(x, y);
}
/// Mask of NaN lanes (false for integers).
template <class V>
inline auto isnan(const V& x) {
  if constexpr (is_batch_v<V>) return xsimd::isnan(x);
  else if constexpr (std::is_floating_point_v<V>) return std::isnan(x);
  else return false;
}
/// cond ? a : b, lane-wise.
template <class M, class V>
inline V select(const M& cond, const V& a, const V& b) {
  if constexpr (is_batch_v<V>) return xsimd::select(cond, a, b);
  else return cond ? a : b;
}
/// Keeps v as computed (rounded) so that the compiler cannot contract it into a following
/// addition (an FMA rounds once, the separate ops twice). Emits no instruction.
template <class V>
inline void no_contract(V& v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if constexpr (is_batch_v<V>) asm("" : "+x"(v.data));
  else if constexpr (std::is_floating_point_v<V>) asm("" : "+x"(v));
#elif defined(__GNUC__) && defined(__aarch64__)
  if constexpr (is_batch_v<V>) asm("" : "+w"(v.data));
  else if constexpr (std::is_floating_point_v<V>) asm("" : "+w"(v));
#elif defined(__GNUC__)
  asm("" : "+m"(v));
#else
  volatile V keep = v;
  v = keep;
#endif
}
/// max/min that return `b` when either is NaN (the x86 maxps rule; put the value to propagate second).
template <class V>
inline V max(const V& a, const V& b) {
  if constexpr (is_batch_v<V>) return xsimd::max(a, b);
  else return a > b ? a : b;
}
template <class V>
inline V min(const V& a, const V& b) {
  if constexpr (is_batch_v<V>) return xsimd::min(a, b);
  else return a < b ? a : b;
}

// Integer add/sub/mul/neg wrap around like two's complement (no UB on overflow).
template <class V>
inline V add(const V& a, const V& b) {
  if constexpr (std::is_integral_v<V> && std::is_signed_v<V>)
    return static_cast<V>(static_cast<std::make_unsigned_t<V>>(a) + static_cast<std::make_unsigned_t<V>>(b));
  else return static_cast<V>(a + b);
}
template <class V>
inline V sub(const V& a, const V& b) {
  if constexpr (std::is_integral_v<V> && std::is_signed_v<V>)
    return static_cast<V>(static_cast<std::make_unsigned_t<V>>(a) - static_cast<std::make_unsigned_t<V>>(b));
  else return static_cast<V>(a - b);
}
template <class V>
inline V mul(const V& a, const V& b) {
  if constexpr (std::is_integral_v<V> && std::is_signed_v<V>)
    return static_cast<V>(static_cast<std::make_unsigned_t<V>>(a) * static_cast<std::make_unsigned_t<V>>(b));
  else return static_cast<V>(a * b);
}

}  // namespace MS_ISA_NS
}  // namespace ms::simd
