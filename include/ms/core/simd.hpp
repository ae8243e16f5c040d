#pragma once
// The one place ms includes xsimd. Every header that needs xsimd includes this one
// instead of <xsimd/xsimd.hpp>, so that the work-around below is always in force.
//
// xsimd 8.1 (Debian 12) does not compile for AVX-512BW without optimization under GCC:
// its integer `select` passes xsimd::batch objects to _mm512_mask_blend_epi8/16, which
// GCC defines as inline functions taking __m512i only under __OPTIMIZE__ and otherwise
// as macros that cast their arguments straight to __v64qi/__v32hi, and a class cannot
// be cast to a vector type in one step. Fixed in xsimd 10. Here the two macros are
// redefined to go through __m512i first (the batch's own conversion), which is what the
// optimized build's function parameters do; the system headers stay untouched.

#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__) && defined(__AVX512BW__)
#include <immintrin.h>
#undef _mm512_mask_blend_epi8
#undef _mm512_mask_blend_epi16
#define _mm512_mask_blend_epi8(U, A, W)                                                      \
  ((__m512i)__builtin_ia32_blendmb_512_mask((__v64qi)(__m512i)(A), (__v64qi)(__m512i)(W), \
                                            (__mmask64)(U)))
#define _mm512_mask_blend_epi16(U, A, W)                                                     \
  ((__m512i)__builtin_ia32_blendmw_512_mask((__v32hi)(__m512i)(A), (__v32hi)(__m512i)(W), \
                                            (__mmask32)(U)))
#endif

#include <xsimd/xsimd.hpp>
