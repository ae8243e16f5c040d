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

#include "intrin.hpp"  // first: see there

#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__) && defined(__AVX512BW__)
#undef _mm512_mask_blend_epi8
#undef _mm512_mask_blend_epi16
#define _mm512_mask_blend_epi8(U, A, W)                                                      \
  ((__m512i)__builtin_ia32_blendmb_512_mask((__v64qi)(__m512i)(A), (__v64qi)(__m512i)(W), \
                                            (__mmask64)(U)))
#define _mm512_mask_blend_epi16(U, A, W)                                                     \
  ((__m512i)__builtin_ia32_blendmw_512_mask((__v32hi)(__m512i)(A), (__v32hi)(__m512i)(W), \
                                            (__mmask32)(U)))
#endif

// xsimd 8.1 has no fused multiply-add kernels for AVX-512 (xsimd 10 does): there its fma,
// fms, fnma and fnms fall back to x * y + z, which every polynomial of its math functions
// (exp, log, sin, ...) goes through. Under -ffp-contract=off (the level units, and ISO mode)
// that is two roundings and two instructions instead of one: exp ran 14% slower at x86-64-v4
// than at -march=native, and the AVX-512 results were not those of the AVX2 build. Declared
// here, after xsimd's batch types and before its API (whose fma calls kernel::fma by
// qualified name, bound where it is defined), they are the better match for every
// AVX-512 architecture, as xsimd's own kernels for the other architectures are.
// (When xsimd was included before this header, they come too late and xsimd's own are used.)
#if defined(__AVX512F__) && !defined(XSIMD_HPP)
// What <xsimd/xsimd.hpp> includes ahead of its API, in its order.
#if defined(__GNUC__)
#define XSIMD_NO_DISCARD __attribute__((warn_unused_result))
#else
#define XSIMD_NO_DISCARD
#endif
#include <xsimd/config/xsimd_config.hpp>
#include <xsimd/arch/xsimd_scalar.hpp>
#include <xsimd/memory/xsimd_aligned_allocator.hpp>
#include <xsimd/types/xsimd_batch.hpp>
#include <xsimd/types/xsimd_batch_constant.hpp>
#include <xsimd/types/xsimd_traits.hpp>
namespace xsimd::kernel {
#define MS_XSIMD_AVX512_FMA(name, intrinsic)                                                              \
  template <class A>                                                                                   \
  inline batch<float, A> name(batch<float, A> const& x, batch<float, A> const& y, batch<float, A> const& z, \
                              requires_arch<avx512f>) noexcept {                                         \
    return _mm512_##intrinsic##_ps(x, y, z);                                                           \
  }                                                                                                    \
  template <class A>                                                                                   \
  inline batch<double, A> name(batch<double, A> const& x, batch<double, A> const& y,                   \
                               batch<double, A> const& z, requires_arch<avx512f>) noexcept {           \
    return _mm512_##intrinsic##_pd(x, y, z);                                                           \
  }
MS_XSIMD_AVX512_FMA(fma, fmadd)    // x * y + z
MS_XSIMD_AVX512_FMA(fms, fmsub)    // x * y - z
MS_XSIMD_AVX512_FMA(fnma, fnmadd)  // -(x * y) + z
MS_XSIMD_AVX512_FMA(fnms, fnmsub)  // -(x * y) - z
#undef MS_XSIMD_AVX512_FMA
}  // namespace xsimd::kernel
#endif

#include <xsimd/xsimd.hpp>

// The namespace of the code that is compiled once per CPU level (see <ms/core/cpu_isa.hpp>):
// the SIMD facade, the elementwise formulas and their block kernels. A unit compiled for a
// level (MS_ISA_LEVEL = 1, 2, 3 with -march=x86-64-v2, -v3, -v4) puts them in a namespace of
// its own, so that the linker never takes a higher level's copy of an inline function for
// the rest of the program; every other unit has them in isa_base. Inline, so the code
// spells them ms::simd::exp, ms::ops::fx::Exp, ... in every unit.
#if !defined(MS_ISA_LEVEL)
#define MS_ISA_NS isa_base
#elif MS_ISA_LEVEL == 1
#define MS_ISA_NS isa_sse4
#elif MS_ISA_LEVEL == 2
#define MS_ISA_NS isa_avx2
#elif MS_ISA_LEVEL == 3
#define MS_ISA_NS isa_avx512
#else
#error "MS_ISA_LEVEL must be 1 (x86-64-v2), 2 (x86-64-v3) or 3 (x86-64-v4)"
#endif
