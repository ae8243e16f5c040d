#pragma once
// Max pooling of float32 planes whose windows all lie inside the plane (no padding, no
// dilation): values and argmax indices, a row of windows at a time, and the gradient. 2 x 2
// windows of stride 2 (LeNet's, VGG's, ResNet's) run on SIMD shuffles at AVX2 (8 outputs per
// step) and AVX-512 (16, two short rows at once; the gradient too, for rows of 8 windows or
// more); every other window
// on the row loop below, which the compiler vectorizes for the level, and the gradient on a
// scatter. Compiled once per CPU level (MS_ISA_NS) and bound by name (cpu::isa_function).
// Includes nothing above core/.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../../core/linkage.hpp"
#include "abi.hpp"
#include "simd.hpp"
#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ms::ops {

/// The arguments of max_pool_dense: planes [p0, p1) of x (planes of H x W) pooled by kh x kw
/// windows of stride (sh, sw) into y and idx (planes of Ho x Wo; idx: ih * W + iw).
struct MaxPoolArgs {
  const float* x = nullptr;
  float* y = nullptr;
  std::int64_t* idx = nullptr;
  std::int64_t H = 0, W = 0, Ho = 0, Wo = 0, kh = 0, kw = 0, sh = 0, sw = 0;
  std::int64_t p0 = 0, p1 = 0;
};

/// The arguments of max_pool_grad_dense: planes [p0, p1) of x (planes of H x W) = the
/// gradient g (planes of Ho x Wo) added at the argmax indices idx of a max pooling whose
/// windows all lie inside the plane (kh x kw, stride sh x sw). An index outside the plane is
/// skipped and the first one met reported in *bad (with *any_bad set).
struct MaxPoolGradArgs {
  const float* g = nullptr;
  const std::int64_t* idx = nullptr;
  float* x = nullptr;
  std::int64_t H = 0, W = 0, Ho = 0, Wo = 0, kh = 0, kw = 0, sh = 0, sw = 0;
  std::int64_t p0 = 0, p1 = 0;
  std::int64_t* bad = nullptr;
  bool* any_bad = nullptr;
};

namespace detail {
inline namespace MS_ISA_NS {

/// The plane x (HW elements) = 0, then each g[i] added at idx[i] (i < P): the gradient of a
/// max pooling. An index outside [0, HW) is skipped; the first one is returned in bad, with false.
template <class T>
inline bool max_pool_scatter_plane(const T* g, const std::int64_t* idx, T* x, std::int64_t HW, std::int64_t P,
                                   std::int64_t& bad) {
  std::memset(x, 0, static_cast<std::size_t>(HW) * sizeof(T));
  bool ok = true;
  for (std::int64_t i = 0; i < P; ++i) {
    const std::int64_t at = idx[i];
    if (static_cast<std::uint64_t>(at) < static_cast<std::uint64_t>(HW)) [[likely]] {
      x[at] += g[i];
    } else if (ok) {
      ok = false;
      bad = at;
    }
  }
  return ok;
}

/// One output row: windows of kh x kw from input row h0 of the plane xpl, stride sw. Visits
/// each window offset (i, j) for the whole row, so the output columns are independent (the
/// per-window loop measured 3x slower on a 64x6x28x28 input); selects are masks, not
/// branches. Row-major order within a window: the first maximum wins, the first NaN wins and stays.
template <class T>
inline void max_pool_row(const T* xpl, std::int64_t W, std::int64_t h0, std::int64_t Wo, std::int64_t sw,
                         std::int64_t kh, std::int64_t kw, T* yr, std::int64_t* ir) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
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

#if defined(__AVX512F__)
/// Planes [p0, p1) of a 2 x 2, stride-2 max pooling (see MaxPoolArgs) as one run of output
/// rows, the planes' rows end to end: rows of at most 8 windows two at a time (the 16 lanes
/// hold row k's windows, then row k + 1's, which follow them in y; LeNet's second pooling,
/// rows of 5, took 56 us for 64 x 16 planes one row at a time), longer rows 16 windows at a
/// time. The even and odd columns of each window's two input rows are its four candidates,
/// in row-major order with max_pool_row's rule; the last partial group loads and stores
/// through lane masks. Indices are computed in 32 bits (planes below 2^31 elements).
inline void max_pool_2x2_planes(const MaxPoolArgs& a) {
  const std::int64_t HW = a.H * a.W, W = a.W, Ho = a.Ho, Wo = a.Wo;
  if (Ho == 0 || Wo == 0 || a.p1 <= a.p0) return;
  const __m512i off01 = _mm512_set1_epi32(1), off10 = _mm512_set1_epi32(static_cast<int>(W)),
                off11 = _mm512_set1_epi32(static_cast<int>(W + 1));
  // v replaces best where v > best or v is NaN, and best is not NaN: the first maximum wins,
  // the first NaN wins and stays.
  auto window = [&](__m512 e0, __m512 o0, __m512 e1, __m512 o1, __m512i& off) {
    __m512 best = e0;
    off = _mm512_setzero_si512();
    auto step = [&](__m512 v, __m512i o) {
      const __mmask16 take =
          _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_ORD_Q), v, best, _CMP_NLE_UQ);
      best = _mm512_mask_blend_ps(take, best, v);
      off = _mm512_mask_blend_epi32(take, off, o);
    };
    step(o0, off01);
    step(e1, off10);
    step(o1, off11);
    return best;
  };
  auto store = [](float* y, std::int64_t* idx, __mmask16 m, __m512 best, __m512i i32) {
    _mm512_mask_storeu_ps(y, m, best);
    _mm512_mask_storeu_epi64(idx, static_cast<__mmask8>(m & 0xFF), _mm512_cvtepi32_epi64(_mm512_castsi512_si256(i32)));
    _mm512_mask_storeu_epi64(idx + 8, static_cast<__mmask8>(m >> 8),
                             _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(i32, 1)));
  };
  // The cursor: output row k = oh of the plane starting at xpl; its input rows start at
  // xpl + 2 oh W.
  const float* xpl = a.x + a.p0 * HW;
  std::int64_t oh = 0;
  auto advance = [&] {
    if (++oh == Ho) oh = 0, xpl += HW;
  };
  const std::int64_t k0 = a.p0 * Ho, k1 = a.p1 * Ho;
  if (Wo <= 8) {
    // Lane j: row r = (j >= Wo), column c = j - r Wo; its even candidate is lane 2c of the
    // first operand (row k) or of the second (row k + 1) of the permutes.
    alignas(64) std::int32_t even[16], col[16];
    for (int j = 0; j < 16; ++j) {
      const int r = j >= Wo ? 1 : 0, c = j - r * static_cast<int>(Wo);
      even[j] = j < 2 * Wo ? r * 16 + 2 * c : 0;
      col[j] = j < 2 * Wo ? 2 * c : 0;
    }
    const __m512i even_i = _mm512_load_si512(even), odd_i = _mm512_add_epi32(even_i, off01);
    const __m512i colv = _mm512_load_si512(col);
    const __mmask16 m_in = simd::lanes_between(0, 2 * Wo), second_row = simd::lanes_between(Wo, 2 * Wo);
    for (std::int64_t k = k0; k < k1; k += 2) {
      const bool two = k + 1 < k1;
      const float* t0 = xpl + 2 * oh * W;
      const std::int64_t base0 = 2 * oh * W;
      advance();
      const float* t1 = t0;
      std::int64_t base1 = base0;
      if (two) t1 = xpl + 2 * oh * W, base1 = 2 * oh * W, advance();
      const __m512 a0 = _mm512_maskz_loadu_ps(m_in, t0), b0 = _mm512_maskz_loadu_ps(m_in, t0 + W);
      const __m512 a1 = _mm512_maskz_loadu_ps(m_in, t1), b1 = _mm512_maskz_loadu_ps(m_in, t1 + W);
      __m512i off;
      const __m512 best = window(_mm512_permutex2var_ps(a0, even_i, a1), _mm512_permutex2var_ps(a0, odd_i, a1),
                                 _mm512_permutex2var_ps(b0, even_i, b1), _mm512_permutex2var_ps(b0, odd_i, b1), off);
      const __m512i base = _mm512_mask_blend_epi32(second_row, _mm512_set1_epi32(static_cast<int>(base0)),
                                                   _mm512_set1_epi32(static_cast<int>(base1)));
      store(a.y + k * Wo, a.idx + k * Wo, simd::lanes_between(0, two ? 2 * Wo : Wo), best,
            _mm512_add_epi32(_mm512_add_epi32(base, colv), off));
    }
    return;
  }
  const __m512i even_i = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_i = _mm512_add_epi32(even_i, off01);
  for (std::int64_t k = k0; k < k1; ++k, advance()) {
    const float* r0 = xpl + 2 * oh * W;
    const float* r1 = r0 + W;
    for (std::int64_t ow = 0; ow < Wo; ow += 16) {
      const std::int64_t n = std::min<std::int64_t>(16, Wo - ow);
      // The 2n input columns: the first 16 and the rest.
      const __mmask16 m_lo = simd::lanes_between(0, 2 * n), m_hi = simd::lanes_between(0, 2 * n - 16);
      const float* p0 = r0 + 2 * ow;
      const float* p1 = r1 + 2 * ow;
      const __m512 a0 = _mm512_maskz_loadu_ps(m_lo, p0), a1 = _mm512_maskz_loadu_ps(m_hi, p0 + 16);
      const __m512 b0 = _mm512_maskz_loadu_ps(m_lo, p1), b1 = _mm512_maskz_loadu_ps(m_hi, p1 + 16);
      __m512i off;
      const __m512 best = window(_mm512_permutex2var_ps(a0, even_i, a1), _mm512_permutex2var_ps(a0, odd_i, a1),
                                 _mm512_permutex2var_ps(b0, even_i, b1), _mm512_permutex2var_ps(b0, odd_i, b1), off);
      const __m512i i32 =
          _mm512_add_epi32(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(2 * oh * W + 2 * ow)), even_i), off);
      store(a.y + k * Wo + ow, a.idx + k * Wo + ow, simd::lanes_between(0, n), best, i32);
    }
  }
}
#elif defined(__AVX2__)
/// One output row of a 2 x 2, stride-2 max pooling, eight outputs at a time (see the
/// AVX-512 version above).
inline void max_pool_2x2_row(const float* r0, const float* r1, std::int64_t base, std::int64_t W, std::int64_t Wo,
                             float* y, std::int64_t* idx) {
  auto even = [](__m256 a, __m256 b) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  };
  auto odd = [](__m256 a, __m256 b) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
  };
  const __m256i cols = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i off01 = _mm256_set1_epi32(1), off10 = _mm256_set1_epi32(static_cast<int>(W)),
                off11 = _mm256_set1_epi32(static_cast<int>(W + 1));
  // Eight outputs from 16 columns of each row; a partial group (n < 8 outputs) loads and
  // stores through lane masks, whole groups without (AVX2's masked stores are slow).
  auto group = [&]<bool Partial>(std::int64_t ow, std::int64_t n) {
    const float* p0 = r0 + 2 * ow;
    const float* p1 = r1 + 2 * ow;
    __m256 a0, a1, b0, b1;
    __m256i m_out;
    if constexpr (Partial) {
      const __m256i m_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(2 * n)), lane);
      const __m256i m_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(2 * n - 8)), lane);
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
    const __m256i i32 = _mm256_add_epi32(_mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base + 2 * ow)), cols), off);
    const __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(i32));
    const __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(i32, 1));
    if constexpr (Partial) {
      auto* i64 = reinterpret_cast<long long*>(idx + ow);
      _mm256_maskstore_ps(y + ow, m_out, best);
      _mm256_maskstore_epi64(i64, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(m_out)), lo);
      _mm256_maskstore_epi64(i64 + 4, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(m_out, 1)), hi);
    } else {
      _mm256_storeu_ps(y + ow, best);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + ow), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(idx + ow + 4), hi);
    }
  };
  std::int64_t ow = 0;
  for (; ow + 8 <= Wo; ow += 8) group.template operator()<false>(ow, 8);
  if (ow < Wo) group.template operator()<true>(ow, Wo - ow);
}
#endif

/// y, idx of planes [p0, p1) (see MaxPoolArgs); every window inside the plane.
inline void max_pool_dense(const void* args) {
  const MaxPoolArgs& a = *static_cast<const MaxPoolArgs*>(args);
  const std::int64_t HW = a.H * a.W, P = a.Ho * a.Wo;
#if defined(__AVX512F__)
  if (a.kh == 2 && a.kw == 2 && a.sh == 2 && a.sw == 2 && HW <= 0x7fffffff) return max_pool_2x2_planes(a);
#endif
  for (std::int64_t pl = a.p0; pl < a.p1; ++pl) {
    const float* xpl = a.x + pl * HW;
    for (std::int64_t oh = 0; oh < a.Ho; ++oh) {
      float* yr = a.y + pl * P + oh * a.Wo;
      std::int64_t* ir = a.idx + pl * P + oh * a.Wo;
      const std::int64_t h0 = oh * a.sh;
#if defined(__AVX2__) && !defined(__AVX512F__)
      // The indices are computed in 32 bits.
      if (a.kh == 2 && a.kw == 2 && a.sh == 2 && a.sw == 2 && HW <= 0x7fffffff) {
        max_pool_2x2_row(xpl + h0 * a.W, xpl + (h0 + 1) * a.W, h0 * a.W, a.W, a.Wo, yr, ir);
        continue;
      }
#endif
      max_pool_row(xpl, a.W, h0, a.Wo, a.sw, a.kh, a.kw, yr, ir);
    }
  }
}

#if defined(__AVX512F__)
/// The gradient of a 2 x 2, stride-2 max pooling for one plane, written rather than
/// scattered: 16 outputs at a time, each window's four places get the gradient (plus +0,
/// as the scatter's 0 + g gives) where the index points, zeros elsewhere; rows and columns
/// no window covers are zeroed. Returns false, having written part of the plane, when an
/// index is not in its own window (the caller scatters the plane instead).
inline bool max_pool_grad_2x2_plane(const float* g, const std::int64_t* idx, float* x, std::int64_t H, std::int64_t W,
                                    std::int64_t Ho, std::int64_t Wo) {
  const __m512i cols = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
  // Output lanes l of (a, b) to input columns 2l and 2l + 1: the first and second 16 of 32.
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i o0 = _mm512_setzero_si512(), o1 = _mm512_set1_epi64(1), oW = _mm512_set1_epi64(W),
                oW1 = _mm512_set1_epi64(W + 1);
  for (std::int64_t oh = 0; oh < Ho; ++oh) {
    float* x0 = x + 2 * oh * W;
    float* x1 = x0 + W;
    const float* gr = g + oh * Wo;
    const std::int64_t* ir = idx + oh * Wo;
    for (std::int64_t ow = 0; ow < Wo; ow += 16) {
      const std::int64_t n = std::min<std::int64_t>(16, Wo - ow);
      const __mmask16 m_out = simd::lanes_between(0, n);
      const __m512 gv = _mm512_add_ps(_mm512_maskz_loadu_ps(m_out, gr + ow), _mm512_setzero_ps());
      const __m512i base = _mm512_add_epi64(_mm512_set1_epi64(2 * oh * W + 2 * ow), cols);
      const __m512i off_lo = _mm512_sub_epi64(_mm512_maskz_loadu_epi64(static_cast<__mmask8>(m_out), ir + ow), base);
      const __m512i off_hi = _mm512_sub_epi64(_mm512_maskz_loadu_epi64(static_cast<__mmask8>(m_out >> 8), ir + ow + 8),
                                              _mm512_add_epi64(base, _mm512_set1_epi64(16)));
      auto at = [&](__m512i o) {
        return static_cast<__mmask16>(_mm512_cmpeq_epi64_mask(off_lo, o) |
                                      (static_cast<unsigned>(_mm512_cmpeq_epi64_mask(off_hi, o)) << 8));
      };
      const __mmask16 m00 = at(o0), m01 = at(o1), m10 = at(oW), m11 = at(oW1);
      if (static_cast<__mmask16>((m00 | m01 | m10 | m11) & m_out) != m_out) return false;
      const __m512 a = _mm512_maskz_mov_ps(m00, gv), b = _mm512_maskz_mov_ps(m01, gv);
      const __m512 c = _mm512_maskz_mov_ps(m10, gv), d = _mm512_maskz_mov_ps(m11, gv);
      const __mmask16 m_a = simd::lanes_between(0, 2 * n), m_b = simd::lanes_between(0, 2 * n - 16);
      _mm512_mask_storeu_ps(x0 + 2 * ow, m_a, _mm512_permutex2var_ps(a, first, b));
      _mm512_mask_storeu_ps(x0 + 2 * ow + 16, m_b, _mm512_permutex2var_ps(a, second, b));
      _mm512_mask_storeu_ps(x1 + 2 * ow, m_a, _mm512_permutex2var_ps(c, first, d));
      _mm512_mask_storeu_ps(x1 + 2 * ow + 16, m_b, _mm512_permutex2var_ps(c, second, d));
    }
    for (std::int64_t w = 2 * Wo; w < W; ++w) x0[w] = x1[w] = 0.0f;
  }
  std::memset(x + 2 * Ho * W, 0, static_cast<std::size_t>((H - 2 * Ho) * W) * sizeof(float));
  return true;
}
#endif

/// The gradient of planes [p0, p1) (see MaxPoolGradArgs).
inline void max_pool_grad_dense(const void* args) {
  const MaxPoolGradArgs& a = *static_cast<const MaxPoolGradArgs*>(args);
  const std::int64_t HW = a.H * a.W, P = a.Ho * a.Wo;
  for (std::int64_t pl = a.p0; pl < a.p1; ++pl) {
    const float* g = a.g + pl * P;
    const std::int64_t* idx = a.idx + pl * P;
    float* x = a.x + pl * HW;
#if defined(__AVX512F__)
    // Rows of at least 8 windows: below that a group's fixed cost (masks, permutes) exceeds
    // the scatter's (LeNet's second pooling, rows of 5: 52 us against 31 for 64 x 16 planes).
    if (a.kh == 2 && a.kw == 2 && a.sh == 2 && a.sw == 2 && a.Wo >= 8 &&
        max_pool_grad_2x2_plane(g, idx, x, a.H, a.W, a.Ho, a.Wo))
      continue;
#endif
    std::int64_t bad = 0;
    if (!max_pool_scatter_plane(g, idx, x, HW, P, bad) && !*a.any_bad) *a.any_bad = true, *a.bad = bad;
  }
}

MS_ISA_FUNCTION("max_pool_dense", &max_pool_dense);
MS_ISA_FUNCTION("max_pool_grad_dense", &max_pool_grad_dense);

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
