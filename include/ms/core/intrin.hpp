#pragma once
// The x86 intrinsics header, included by every ms header that brings in xsimd or Eigen,
// before them, so that ms's kernel units compile without warnings at every optimization
// level. Under GCC, AVX-512 intrinsics that start from _mm512_undefined_*() (whose body is
// the self-initialization `__m512i __Y = __Y;`, the header's way of saying "any value")
// warn "'__Y' is used uninitialized" wherever they are inlined into unoptimized code:
// xsimd's 64-bit shifts in log and log1p at -O0 -march=x86-64-v4 gave ten such warnings
// per kernel unit. GCC judges a warning by its location, which is in this header's text, so
// the two warnings are turned off for that text alone; the code that includes it keeps them.
// (Where <immintrin.h> was included before any ms header, its own settings stand.)

#if defined(__x86_64__) || defined(__i386__)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
#endif
