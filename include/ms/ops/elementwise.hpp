#pragma once
// Elementwise machinery shared by every unary/binary/ternary/compare op, by
// fusion and by custom ops: the SIMD math facade (one spelling for scalars and
// xsimd batches), block kernels generated from a generic formula, the eager
// broadcasting/strided kernel, shape/dtype inference, and registration helpers.
// An op is one functor: `template <class V> V operator()(V a, V b) const`.

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include <Eigen/Core>
#include "../core/simd.hpp"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "../core/parallel.hpp"
#include "dispatch.hpp"
#if !defined(MS_ISA_LEVEL)
#include "isa_dispatch.hpp"
#endif

namespace ms::simd {
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

// Unary math: xsimd for batches, <cmath> for scalars.
#define MS_SIMD_UNARY(name, scalar_expr)                  \
  template <class V>                                      \
  inline V name(const V& x) {                             \
    if constexpr (is_batch_v<V>) return xsimd::name(x);   \
    else return scalar_expr;                              \
  }
MS_SIMD_UNARY(exp, static_cast<V>(std::exp(x)))
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

/// tanh. Float batches use Eigen's rational approximation (one division, no exp): 1.7x
/// faster than xsimd's exp-based tanh and at most 5 ulp from the correctly rounded result
/// over all floats (xsimd's: 1 ulp); the common choice of ML runtimes (TensorFlow, XLA and
/// ONNX Runtime use rational forms too). NaN is passed through. Double batches use xsimd
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
      const V t(Eigen::internal::ptanh(x.data));
      return xsimd::select(x != x, x, t);
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

namespace ms::ops {

namespace detail {
inline namespace MS_ISA_NS {

template <class T>
inline constexpr bool simd_type_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// Loads lane-block i of input k: a broadcast scalar when its stride is 0.
template <class B, class T>
inline B load(const T* p, std::int64_t i, bool scalar) {
  return scalar ? B(p[0]) : B::load_unaligned(p + i);
}

#if defined(__AVX2__)
/// kBoolBytes[m] holds eight bools (bytes 0 or 1), byte j set when bit j of m is.
inline constexpr auto kBoolBytes = [] {
  std::array<std::uint64_t, 256> t{};
  for (std::uint64_t m = 0; m < 256; ++m)
    for (int j = 0; j < 8; ++j) t[m] |= ((m >> j) & 1u) << (8 * j);
  return t;
}();
#endif

/// Writes the lanes of a comparison's result as bools.
template <class T, class A>
inline void store_bools(const xsimd::batch_bool<T, A>& m, bool* out) {
#if defined(__AVX2__)
  // 256-bit masks of AVX and AVX2 (an AVX-512 batch_bool is a k-register, smaller), told
  // apart by arch and size: std::is_same on __m256 drops its attributes with a warning.
  constexpr bool ymm = std::is_base_of_v<xsimd::avx, A> && sizeof(typename xsimd::batch_bool<T, A>::register_type) == 32;
  if constexpr (ymm && std::is_same_v<T, float>) {
    const std::uint64_t bytes = kBoolBytes[static_cast<unsigned>(_mm256_movemask_ps(m))];
    std::memcpy(out, &bytes, 8);
    return;
  } else if constexpr (ymm && std::is_same_v<T, double>) {
    const auto bytes = static_cast<std::uint32_t>(kBoolBytes[static_cast<unsigned>(_mm256_movemask_pd(m))]);
    std::memcpy(out, &bytes, 4);
    return;
  }
#endif
  m.store_unaligned(out);
}

/// The block kernel of functor F for input type T and output type O (O = T except compare ops).
template <class F, class T, class O, int Arity>
void block_kernel(const void* const* in, const std::int64_t* st, void* outp, std::int64_t n, const double* params) {
  F f(params);
  O* out = static_cast<O*>(outp);
  const T* a = static_cast<const T*>(in[0]);
  const T* b = Arity > 1 ? static_cast<const T*>(in[1]) : nullptr;
  std::int64_t i = 0;
  if constexpr (simd_type_v<T> && std::is_same_v<O, bool> && Arity == 2) {
    // Comparisons: whole batches compared and their lanes written as bools; the scalar
    // loop below finishes (IEEE comparisons give the same answer either way).
    using B = xsimd::batch<T>;
    constexpr std::int64_t W = B::size;
    const bool sa = st[0] == 0, sb = st[1] == 0;
    if (st[0] == 1 && st[1] == 1)
      for (; i + W <= n; i += W) store_bools(f(B::load_unaligned(a + i), B::load_unaligned(b + i)), out + i);
    else if (st[0] == 1 && sb) {
      const B vb(b[0]);
      for (; i + W <= n; i += W) store_bools(f(B::load_unaligned(a + i), vb), out + i);
    } else if (sa && st[1] == 1) {
      const B va(a[0]);
      for (; i + W <= n; i += W) store_bools(f(va, B::load_unaligned(b + i)), out + i);
    }
  }
  if constexpr (simd_type_v<T> && std::is_same_v<T, O>) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t W = B::size;
    if constexpr (Arity == 1) {
      if (st[0] == 0) {  // f(scalar) broadcast, computed by the batch formula like every other element
        const T v = f(B(a[0])).get(0);
        for (; i < n; ++i) out[i] = v;
        return;
      }
      for (; i + W <= n; i += W) f(B::load_unaligned(a + i)).store_unaligned(out + i);
    } else if constexpr (Arity == 2) {
      bool sa = st[0] == 0, sb = st[1] == 0;
      // Separate loops so the broadcast test is hoisted out of the hot loop.
      if (!sa && !sb) for (; i + W <= n; i += W) f(B::load_unaligned(a + i), B::load_unaligned(b + i)).store_unaligned(out + i);
      else if (sa && !sb) { B va(a[0]); for (; i + W <= n; i += W) f(va, B::load_unaligned(b + i)).store_unaligned(out + i); }
      else if (!sa && sb) { B vb(b[0]); for (; i + W <= n; i += W) f(B::load_unaligned(a + i), vb).store_unaligned(out + i); }
      else { B va(a[0]), vb(b[0]); for (; i + W <= n; i += W) f(va, vb).store_unaligned(out + i); }
    }
    // The tail (n % W elements) goes through the same batch formula on a padded copy, so an
    // element's value never depends on where it falls in a row or a block: eager kernels,
    // fused blocks and any thread split give the same bits.
    if (i < n) {
      alignas(64) T ta[W], tb[W], to[W];
      const std::int64_t r = n - i;
      for (std::int64_t j = 0; j < W; ++j) {
        const std::int64_t k = i + (j < r ? j : r - 1);  // pad with the last valid element
        ta[j] = a[k * st[0]];
        if constexpr (Arity == 2) tb[j] = b[k * st[1]];
      }
      if constexpr (Arity == 1) f(B::load_aligned(ta)).store_aligned(to);
      else f(B::load_aligned(ta), B::load_aligned(tb)).store_aligned(to);
      for (std::int64_t j = 0; j < r; ++j) out[i + j] = to[j];
      return;
    }
  }
  if constexpr (Arity == 1) {
    for (; i < n; ++i) out[i] = static_cast<O>(f(a[i * st[0]]));
  } else if constexpr (Arity == 2) {
    for (; i < n; ++i) out[i] = static_cast<O>(f(a[i * st[0]], b[i * st[1]]));
  }
}

/// Unary functor F with scalar steps folded around it, for one type T: Pre (m, a) steps
/// applied before f and Post after, read from params[kMaxElementwiseParams ...] (see
/// kAffineSteps) and broadcast once.
template <class F, class T, int Pre, int Post>
struct Affine {
  static_assert(Pre <= kAffineSteps && Post <= kAffineSteps);
  using B = xsimd::batch<T>;
  F f;
  B m[Pre + Post + 1], a[Pre + Post + 1];
  explicit Affine(const double* params) : f(params) {
    const double* p = params + kMaxElementwiseParams;
    for (int k = 0; k < Pre; ++k) { m[k] = B(static_cast<T>(p[2 * k])); a[k] = B(static_cast<T>(p[2 * k + 1])); }
    for (int k = 0; k < Post; ++k) {
      m[Pre + k] = B(static_cast<T>(p[2 * (kAffineSteps + k)]));
      a[Pre + k] = B(static_cast<T>(p[2 * (kAffineSteps + k) + 1]));
    }
  }
  static B step(B v, const B& m, const B& a) {
    B p = v * m;
    simd::no_contract(p);
    return p + a;
  }
  B operator()(B v) const {
    for (int k = 0; k < Pre; ++k) v = step(v, m[k], a[k]);
    v = f(v);
    simd::no_contract(v);  // f's last product must not fuse with a following step's addition
    for (int k = Pre; k < Pre + Post; ++k) v = step(v, m[k], a[k]);
    return v;
  }
};

/// v op z (or z op v) for a binary step code (see kAffineBinary), as the eager op computes it.
template <class V>
inline V affine_binary(int code, V v, V z) {
  switch (code) {
    case 1: return simd::add(v, z);
    case 2: return simd::add(z, v);
    case 3: return simd::sub(v, z);
    case 4: return simd::sub(z, v);
    case 5: v = simd::mul(v, z); break;
    case 6: v = simd::mul(z, v); break;
    case 7: return v / z;
    case 8: return z / v;
    default: return v;
  }
  simd::no_contract(v);  // a product stays rounded before a following step's addition
  return v;
}

/// out[i] = binary steps (f(a[i]), z[0][i], z[1][i]...) over [0, n), n a multiple of the
/// batch size, all operands contiguous. A function of its own per NB, so that the loop has
/// no branch but the steps' (predictable) switch.
/// The functor, codes and operands are locals of the loop's own frame: read through
/// pointers they were loaded again on every batch (the stores to out might alias them as
/// far as the compiler knows), and the loop measured up to 1.9x slower in some runs.
template <int NB, class A, class T>
[[gnu::noinline]] void affine_loop(const double* params, const T* a, const T* const* z, const int* code, T* out,
                                   std::int64_t n) {
  using B = xsimd::batch<T>;
  const A f(params);
  const int c0 = NB >= 1 ? code[0] : 0, c1 = NB >= 2 ? code[1] : 0;
  const T* z0 = NB >= 1 ? z[0] : nullptr;
  const T* z1 = NB >= 2 ? z[1] : nullptr;
  for (std::int64_t i = 0; i < n; i += static_cast<std::int64_t>(B::size)) {
    B v = f(B::load_unaligned(a + i));
    if constexpr (NB >= 1) v = affine_binary(c0, v, B::load_unaligned(z0 + i));
    if constexpr (NB >= 2) v = affine_binary(c1, v, B::load_unaligned(z1 + i));
    v.store_unaligned(out + i);
  }
}

/// The affine kernel of unary functor F: Pre scalar steps, f, Post scalar steps, then the
/// binary steps with inputs 1.. (see kAffineBinary). Broadcast operands are expanded into
/// local buffers, and the tail is evaluated on padded copies by the same loop, so every
/// element goes through the same batch formula (as in block_kernel).
template <class F, class T, int Pre, int Post>
void affine_kernel(const void* const* in, const std::int64_t* st, void* outp, std::int64_t n, const double* params) {
  static_assert(kAffineBinary == 2);
  using B = xsimd::batch<T>;
  constexpr std::int64_t W = B::size, kChunk = 256;
  using A = Affine<F, T, Pre, Post>;
  int code[kAffineBinary] = {};
  const T* z[kAffineBinary] = {};
  bool zs[kAffineBinary] = {};
  int nb = 0;
  for (; nb < kAffineBinary; ++nb) {
    code[nb] = static_cast<int>(params[kMaxElementwiseParams + 4 * kAffineSteps + nb]);
    if (code[nb] == 0) break;
    z[nb] = static_cast<const T*>(in[1 + nb]);
    zs[nb] = st[1 + nb] == 0;
  }
  const T* a = static_cast<const T*>(in[0]);
  const bool sa = st[0] == 0;
  T* out = static_cast<T*>(outp);
  auto run = [&](const T* ap, const T* const* zp, T* op, std::int64_t len) {
    if (nb == 0) affine_loop<0, A>(params, ap, zp, code, op, len);
    else if (nb == 1) affine_loop<1, A>(params, ap, zp, code, op, len);
    else affine_loop<2, A>(params, ap, zp, code, op, len);
  };
  const std::int64_t whole = n / W * W;
  if (!sa && !zs[0] && !zs[1]) {
    run(a, z, out, whole);
  } else if (whole > 0) {
    alignas(64) T ba[kChunk], bz[kAffineBinary][kChunk];
    if (sa) std::fill_n(ba, kChunk, a[0]);
    for (int k = 0; k < nb; ++k)
      if (zs[k]) std::fill_n(bz[k], kChunk, z[k][0]);
    for (std::int64_t c = 0; c < whole; c += kChunk) {
      const T* zp[kAffineBinary] = {};
      for (int k = 0; k < nb; ++k) zp[k] = zs[k] ? bz[k] : z[k] + c;
      run(sa ? ba : a + c, zp, out + c, std::min(kChunk, whole - c));
    }
  }
  if (whole < n) {
    alignas(64) T ta[W], tz[kAffineBinary][W], to[W];
    const T* tzp[kAffineBinary] = {tz[0], tz[1]};
    const std::int64_t r = n - whole;
    for (std::int64_t j = 0; j < W; ++j) {
      const std::int64_t k = whole + (j < r ? j : r - 1);  // pad with the last valid element
      ta[j] = a[sa ? 0 : k];
      for (int s = 0; s < nb; ++s) tz[s][j] = z[s][zs[s] ? 0 : k];
    }
    run(ta, tzp, to, W);
    for (std::int64_t j = 0; j < r; ++j) out[whole + j] = to[j];
  }
}

/// Fills table[v] with F's affine kernel of shape kAffineShape[v] for type T.
template <class F, class T, int V = 0>
constexpr void fill_affine_table(BlockFn* table) {
  if constexpr (V < kAffineVariants) {
    table[V] = &affine_kernel<F, T, kAffineShape[V][0], kAffineShape[V][1]>;
    fill_affine_table<F, T, V + 1>(table);
  }
}

/// where(cond, a, b): input 0 is bool, inputs 1 and 2 are T.
template <class T>
void where_block(const void* const* in, const std::int64_t* st, void* outp, std::int64_t n, const double*) {
  const bool* c = static_cast<const bool*>(in[0]);
  const T* a = static_cast<const T*>(in[1]);
  const T* b = static_cast<const T*>(in[2]);
  T* out = static_cast<T*>(outp);
  // Contiguous float forms (relu's gradient is where(x > 0, g, 0)): a select of the bits
  // through a mask made from the bool, which the compiler vectorizes (a ?: does not).
  if constexpr (std::is_floating_point_v<T>) {
    using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    if (st[0] == 1 && st[1] == 1 && (st[2] == 0 || st[2] == 1)) {
      const auto* cb = reinterpret_cast<const std::uint8_t*>(c);
      const std::int64_t sb = st[2];
      std::int64_t i = 0;
#if defined(__AVX2__)
      // Eight (float) or four (double) bools widened to lane masks; b broadcast or not.
      if constexpr (std::is_same_v<T, float>) {
        const __m256 bs = _mm256_set1_ps(b[0]);
        for (; i + 8 <= n; i += 8) {
          const __m256i w = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(cb + i)));
          const __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(w, _mm256_setzero_si256()));
          const __m256 bv = sb == 0 ? bs : _mm256_loadu_ps(b + i);
          _mm256_storeu_ps(out + i, _mm256_blendv_ps(bv, _mm256_loadu_ps(a + i), m));
        }
      } else {
        const __m256d bs = _mm256_set1_pd(b[0]);
        for (; i + 4 <= n; i += 4) {
          std::uint32_t c4;
          std::memcpy(&c4, cb + i, 4);
          const __m256i w = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(static_cast<int>(c4)));
          const __m256d m = _mm256_castsi256_pd(_mm256_cmpgt_epi64(w, _mm256_setzero_si256()));
          const __m256d bv = sb == 0 ? bs : _mm256_loadu_pd(b + i);
          _mm256_storeu_pd(out + i, _mm256_blendv_pd(bv, _mm256_loadu_pd(a + i), m));
        }
      }
#endif
      for (; i < n; ++i) {
        const U m = U(0) - static_cast<U>(cb[i] != 0);
        out[i] = std::bit_cast<T>((std::bit_cast<U>(a[i]) & m) | (std::bit_cast<U>(b[i * sb]) & ~m));
      }
      return;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) out[i] = c[i * st[0]] ? a[i * st[1]] : b[i * st[2]];
}

/// Fills `table` with block kernels for each dtype in Types (only those are instantiated).
template <class F, int Arity, bool Compare, DTypeSet Types>
constexpr void fill_block_table(BlockFn* table) {
  auto put = [&]<class T>() {
    if constexpr (Types.contains(dtype_v<T>)) {
      using O = std::conditional_t<Compare, bool, T>;
      table[static_cast<int>(dtype_v<T>)] = &block_kernel<F, T, O, Arity>;
    }
  };
  put.template operator()<float>();
  put.template operator()<double>();
  put.template operator()<std::int32_t>();
  put.template operator()<std::int64_t>();
  put.template operator()<std::uint8_t>();
  put.template operator()<bool>();
}

}  // namespace MS_ISA_NS

/// Copies n elements of `esize` bytes with a stride (in elements) into a contiguous buffer.
inline void gather(const char* src, std::int64_t stride, std::size_t esize, std::int64_t n, char* dst) {
  switch (esize) {
    case 1: for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i * stride]; break;
    case 2: for (std::int64_t i = 0; i < n; ++i) reinterpret_cast<std::uint16_t*>(dst)[i] = reinterpret_cast<const std::uint16_t*>(src)[i * stride]; break;
    case 4: for (std::int64_t i = 0; i < n; ++i) reinterpret_cast<std::uint32_t*>(dst)[i] = reinterpret_cast<const std::uint32_t*>(src)[i * stride]; break;
    default: for (std::int64_t i = 0; i < n; ++i) reinterpret_cast<std::uint64_t*>(dst)[i] = reinterpret_cast<const std::uint64_t*>(src)[i * stride]; break;
  }
}

}  // namespace detail


/// Runs a block kernel over tensors with NumPy broadcasting and arbitrary strides.
/// `out` must be contiguous with the broadcast shape. Rows whose inputs are strided
/// (neither 0 nor 1) are gathered into small buffers first.
inline void run_elementwise(BlockFn fn, std::span<const AnyTensor> in, const AnyTensor& out, const double* params) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  const int k = static_cast<int>(in.size());
  const Shape& oshape = out.shape();
  const int r = oshape.rank();
  std::size_t esize[kMaxArity];
  const char* base[kMaxArity];
  for (int j = 0; j < k; ++j) {
    esize[j] = dtype_size(in[j].dtype());
    base[j] = static_cast<const char*>(in[j].raw_data());
  }
  const std::size_t osize = dtype_size(out.dtype());
  char* obase = static_cast<char*>(out.raw_data());

  // Fast path: every input is contiguous with the output's shape, or a single element.
  bool flat = true;
  std::int64_t fst[kMaxArity];
  for (int j = 0; j < k; ++j) {
    const TensorImpl& t = *in[j].impl();
    if (t.shape == oshape && t.is_contiguous()) fst[j] = 1;
    else if (t.numel() == 1) fst[j] = 0;
    else { flat = false; break; }
  }
  if (flat) {
    if (n < kParallelGrain) {  // small: no thread-count lookup on the eager hot path
      const void* p[kMaxArity];
      for (int j = 0; j < k; ++j) p[j] = base[j];
      fn(p, fst, obase, n, params);
      return;
    }
    parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
      const void* p[kMaxArity];
      for (int j = 0; j < k; ++j) p[j] = base[j] + b * fst[j] * static_cast<std::int64_t>(esize[j]);
      fn(p, fst, obase + b * static_cast<std::int64_t>(osize), e - b, params);
    });
    return;
  }

  // General path: broadcast strides, then collapse dims that are contiguous for every operand.
  std::int64_t shp[kMaxDims], st[kMaxArity][kMaxDims];
  for (int d = 0; d < r; ++d) shp[d] = oshape[d];
  for (int j = 0; j < k; ++j) {
    const Shape& s = in[j].shape();
    int lead = r - s.rank();
    for (int d = 0; d < r; ++d) {
      int sd = d - lead;
      st[j][d] = (sd < 0 || s[sd] == 1) ? 0 : in[j].strides()[sd];
    }
  }
  int cr = 0;  // collapsed rank
  std::int64_t cshp[kMaxDims], cst[kMaxArity][kMaxDims];
  for (int d = 0; d < r; ++d) {
    if (shp[d] == 1) continue;
    bool merge = cr > 0;
    for (int j = 0; j < k && merge; ++j) merge = cst[j][cr - 1] == st[j][d] * shp[d];
    if (merge) {
      cshp[cr - 1] *= shp[d];
      for (int j = 0; j < k; ++j) cst[j][cr - 1] = st[j][d];
    } else {
      cshp[cr] = shp[d];
      for (int j = 0; j < k; ++j) cst[j][cr] = st[j][d];
      ++cr;
    }
  }
  if (cr == 0) {  // all dims of size 1
    cshp[0] = 1;
    for (int j = 0; j < k; ++j) cst[j][0] = 0;
    cr = 1;
  }
  const std::int64_t inner = cshp[cr - 1];
  const std::int64_t rows = n / inner;
  std::int64_t ist[kMaxArity];
  bool needs_gather = false;
  for (int j = 0; j < k; ++j) {
    ist[j] = cst[j][cr - 1];
    if (ist[j] != 0 && ist[j] != 1) needs_gather = true;
  }
  constexpr std::int64_t kBlock = 1024;
  auto do_rows = [&](std::int64_t rb, std::int64_t re) {
    alignas(64) char buf[kMaxArity][kBlock * 8];
    for (std::int64_t row = rb; row < re; ++row) {
      // Offsets of this row from its multi-index over the outer (collapsed) dims.
      std::int64_t off[kMaxArity] = {};
      std::int64_t rem = row;
      for (int d = cr - 2; d >= 0; --d) {
        std::int64_t idx = rem % cshp[d];
        rem /= cshp[d];
        for (int j = 0; j < k; ++j) off[j] += idx * cst[j][d];
      }
      char* orow = obase + row * inner * static_cast<std::int64_t>(osize);
      if (!needs_gather) {
        const void* p[kMaxArity];
        for (int j = 0; j < k; ++j) p[j] = base[j] + off[j] * static_cast<std::int64_t>(esize[j]);
        fn(p, ist, orow, inner, params);
        continue;
      }
      for (std::int64_t c0 = 0; c0 < inner; c0 += kBlock) {
        std::int64_t len = std::min(kBlock, inner - c0);
        const void* p[kMaxArity];
        std::int64_t bst[kMaxArity];
        for (int j = 0; j < k; ++j) {
          const char* src = base[j] + (off[j] + c0 * ist[j]) * static_cast<std::int64_t>(esize[j]);
          if (ist[j] == 0 || ist[j] == 1) { p[j] = src; bst[j] = ist[j]; continue; }
          detail::gather(src, ist[j], esize[j], len, buf[j]);
          p[j] = buf[j];
          bst[j] = 1;
        }
        fn(p, bst, orow + c0 * static_cast<std::int64_t>(osize), len, params);
      }
    }
  };
  std::int64_t row_grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(inner, 1));
  parallel_for(rows, row_grain, do_rows, 1);
}

namespace detail {
inline bool is_half_float(DType d) { return d == DType::f16 || d == DType::bf16; }
/// Runs a float32 kernel for 16-bit float operands (defined in views.hpp, beside cast).
inline void run_upcast_f32(const KernelArgs& k, KernelFn kernel);
}  // namespace detail

/// The CPU kernel of every elementwise op: picks the block function by dtype and runs it.
/// 16-bit floats without a block function of their own compute in float32, rounded once.
inline void elementwise_kernel(const KernelArgs& a) {
  const ElementwiseInfo& ew = a.op.elementwise;
  DType d = a.in[ew.dispatch_input].dtype();
  BlockFn fn = ew.block[static_cast<int>(d)];
  if (!fn && detail::is_half_float(d) && ew.block[static_cast<int>(DType::f32)])
    return detail::run_upcast_f32(a, &elementwise_kernel);
  MS_CHECK(fn != nullptr, DTypeError, "{}: no CPU kernel for dtype {}", a.op.name, d);
  double params[kMaxElementwiseParams] = {};
  if (ew.params) ew.params(a.attrs, params);
  run_elementwise(fn, a.in, a.out[0], params);
}

// ---- inference ------------------------------------------------------------------------------

inline void infer_unary(const OpDef&, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  out.push_back(in[0]);
}

/// Broadcast shape of all inputs; throws "<op>: cannot broadcast (3, 4) with (5,)".
inline Shape broadcast_all(const OpDef& op, std::span<const TensorMeta> in, std::size_t first = 0) {
  Shape s = in[first].shape;
  for (std::size_t i = first + 1; i < in.size(); ++i) s = broadcast_shapes(s, in[i].shape, op.name);
  return s;
}

inline void check_same_dtype(const OpDef& op, const TensorMeta& a, const TensorMeta& b) {
  MS_CHECK(a.dtype == b.dtype, DTypeError,
           "{}: dtype mismatch {} vs {} (shapes {} and {}); convert one side with ms::cast", op.name, a.dtype, b.dtype,
           shape_str(a.shape), shape_str(b.shape));
}

inline void infer_binary(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  check_same_dtype(op, in[0], in[1]);
  if (in[0].shape == in[1].shape) out.push_back(in[0]);  // the common case, without broadcasting
  else out.push_back(TensorMeta{in[0].dtype, broadcast_all(op, in)});
}

inline void infer_compare(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  check_same_dtype(op, in[0], in[1]);
  out.push_back(TensorMeta{DType::b8, in[0].shape == in[1].shape ? in[0].shape : broadcast_all(op, in)});
}

inline void infer_where(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  MS_CHECK(in[0].dtype == DType::b8, DTypeError, "{}: condition must be bool, got {} (shape {})", op.name, in[0].dtype,
           shape_str(in[0].shape));
  check_same_dtype(op, in[1], in[2]);
  out.push_back(TensorMeta{in[1].dtype, broadcast_all(op, in)});
}

// ---- registration helpers -------------------------------------------------------------------

/// Functors without parameters accept (and ignore) the params pointer through this base.
inline namespace MS_ISA_NS {
struct NoParams {
  NoParams() = default;
  constexpr explicit NoParams(const double*) {}
};
}  // namespace MS_ISA_NS

#if !defined(MS_ISA_LEVEL)

/// Describes an elementwise op built from functor F (arity 1 or 2).
struct ElementwiseSpec {
  std::string name;
  std::string doc;
  double flops = 1;
  GradFn grad = nullptr;
  std::string nondiff_reason;
  std::vector<std::string> attr_names;
  ParamsFn params = nullptr;
  std::string formula;  ///< F's qualified name, for generated code (ElementwiseInfo::formula)
};

template <class F, int Arity, DTypeSet Types, bool Compare = false>
OpDef make_elementwise_op(ElementwiseSpec s) {
  OpDef d;
  d.name = std::move(s.name);
  d.doc = std::move(s.doc);
  d.category = Compare ? Category::compare : (Arity == 1 ? Category::unary : Category::binary);
  d.num_inputs = Arity;
  d.infer = Compare ? &infer_compare : (Arity == 1 ? &infer_unary : &infer_binary);
  d.kernel = &elementwise_kernel;
  d.grad = s.grad;
  d.nondiff_reason = std::move(s.nondiff_reason);
  // 16-bit floats compute in float32 (elementwise_kernel), like PyTorch's CPU kernels.
  d.cpu_dtypes = Types.contains(DType::f32) ? Types | DTypeSet{DType::f16, DType::bf16} : Types;
  d.attr_names = std::move(s.attr_names);
  d.elementwise.params = s.params;
  d.elementwise.flops_per_element = s.flops;
  if (!Compare) d.elementwise.formula = std::move(s.formula);
  detail::fill_block_table<F, Arity, Compare, Types>(d.elementwise.block);
  if constexpr (Arity == 1 && !Compare) {
    if constexpr (Types.contains(DType::f32))
      detail::fill_affine_table<F, float>(d.elementwise.affine[static_cast<int>(DType::f32)]);
    if constexpr (Types.contains(DType::f64))
      detail::fill_affine_table<F, double>(d.elementwise.affine[static_cast<int>(DType::f64)]);
  }
  return d;
}

/// Registers an elementwise op defined by functor F for the dtypes in Types.
template <class F, int Arity, DTypeSet Types, bool Compare = false>
const OpDef& register_elementwise(ElementwiseSpec s) {
  return add_elementwise_op(make_elementwise_op<F, Arity, Types, Compare>(std::move(s)));
}

#else  // a unit of one CPU level: the same registrations give rows of kernel tables

inline namespace MS_ISA_NS {
/// The fields of an elementwise registration, as constants: the level's unit evaluates
/// each registration at compile time into an IsaKernelRow (no code runs at start-up).
struct ElementwiseSpec {
  const char* name = "";
  const char* doc = "";
  double flops = 1;
  GradFn grad = nullptr;
  const char* nondiff_reason = "";
  std::initializer_list<const char*> attr_names = {};
  ParamsFn params = nullptr;
  const char* formula = "";
};

template <class F, int Arity, DTypeSet Types, bool Compare = false>
constexpr IsaKernelRow make_elementwise_op(const ElementwiseSpec& s) {
  IsaKernelRow r{};
  r.level = MS_ISA_LEVEL;
  r.name = s.name;
  detail::fill_block_table<F, Arity, Compare, Types>(r.block);
  if constexpr (Arity == 1 && !Compare) {
    if constexpr (Types.contains(DType::f32))
      detail::fill_affine_table<F, float>(r.affine[static_cast<int>(DType::f32)]);
    if constexpr (Types.contains(DType::f64))
      detail::fill_affine_table<F, double>(r.affine[static_cast<int>(DType::f64)]);
  }
  return r;
}
}  // namespace MS_ISA_NS

#endif

}  // namespace ms::ops
