#pragma once
// Elementwise machinery shared by every unary/binary/ternary/compare op, by
// fusion and by custom ops: block kernels generated from a generic formula, the eager
// broadcasting/strided kernel, shape/dtype inference, and registration helpers. The
// formulas are written in the CPU backend's SIMD facade (backend/cpu/kernels/simd.hpp);
// the affine kernels fusion chains are in backend/cpu/kernels/affine.hpp.
// An op is one functor: `template <class V> V operator()(V a, V b) const`.

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../core/parallel.hpp"
#include "dispatch.hpp"
#if MS_KERNEL_BODIES  // the kernels and their SIMD facade: core/linkage.hpp
#include "../backend/cpu/kernels/affine.hpp"
#include "../backend/cpu/kernels/simd.hpp"
#include "../core/simd.hpp"
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#endif
#if !defined(MS_ISA_LEVEL)
#include "isa_dispatch.hpp"
#endif


namespace ms::ops {

#if MS_KERNEL_BODIES
namespace detail {
inline namespace MS_ISA_NS {

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
#if defined(__AVX512F__)
  // AVX-512 masks of floats and doubles are k-registers (an integer): eight lanes per table
  // lookup. xsimd writes them one bit at a time, and a float comparison producing bools took
  // 5% of the captured LeNet step that way (the ReLU gradient's mask).
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    using R = typename xsimd::batch_bool<T, A>::register_type;  // __mmask16 or __mmask8
    constexpr std::size_t lanes = xsimd::batch_bool<T, A>::size;
    const auto bits = static_cast<std::uint64_t>(static_cast<R>(m));
    for (std::size_t j = 0; j < lanes; j += 8) {
      const std::uint64_t bytes = kBoolBytes[static_cast<unsigned>((bits >> j) & 0xFFu)];
      std::memcpy(out + j, &bytes, lanes - j < 8 ? lanes - j : 8);
    }
    return;
  }
#endif
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
  if constexpr (simd::vectorized_v<T> && std::is_same_v<O, bool> && Arity == 2) {
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
  if constexpr (simd::vectorized_v<T> && std::is_same_v<T, O>) {
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

/// Copies n elements of `esize` bytes from src to dst, each side with its own stride (in
/// elements): a strided operand gathered into a contiguous buffer (dst_stride 1), or a
/// contiguous run written as a column of a tile being transposed (src_stride 1).
inline void strided_copy(const char* src, std::int64_t src_stride, char* dst, std::int64_t dst_stride,
                         std::size_t esize, std::int64_t n) {
  auto copy = [&]<class U>() {
    const U* s = reinterpret_cast<const U*>(src);
    U* d = reinterpret_cast<U*>(dst);
    for (std::int64_t i = 0; i < n; ++i) d[i * dst_stride] = s[i * src_stride];
  };
  switch (esize) {
    case 1: copy.template operator()<std::uint8_t>(); break;
    case 2: copy.template operator()<std::uint16_t>(); break;
    case 4: copy.template operator()<std::uint32_t>(); break;
    default: copy.template operator()<std::uint64_t>(); break;
  }
}

/// A unary block kernel over an operand whose unit-stride dim is the output's second-innermost
/// (a transposed matrix, or the last two dims of a permuted tensor): collapsed shape `shp` and
/// the operand's strides `st` (rank cr >= 2, st[cr - 2] == 1). Gathering each output row
/// touches one element per cache line and per page of the source (a 4096 x 4096 transposed
/// copy took 123 ms); tiles of kTile x kTile instead read each source line once whole, are
/// transposed in L1, and the kernel runs on the tile's rows.
inline void run_unary_transposed(BlockFn fn, const char* src, std::size_t esize, const std::int64_t* shp,
                                 const std::int64_t* st, int cr, char* out, std::size_t osize, const double* params) {
  constexpr std::int64_t kTile = 64;
  const std::int64_t inner = shp[cr - 1], m = shp[cr - 2], is = st[cr - 1];
  std::int64_t outer = 1;
  for (int d = 0; d < cr - 2; ++d) outer *= shp[d];
  const std::int64_t tiles_i = (m + kTile - 1) / kTile;
  const auto es = static_cast<std::int64_t>(esize), os = static_cast<std::int64_t>(osize);
  auto do_tiles = [&](std::int64_t tb, std::int64_t te) {
    alignas(64) char tile[kTile * kTile * 8];
    const std::int64_t unit = 1;
    for (std::int64_t t = tb; t < te; ++t) {
      const std::int64_t o = t / tiles_i, i0 = t % tiles_i * kTile, ni = std::min(kTile, m - i0);
      std::int64_t off = 0, rem = o;
      for (int d = cr - 3; d >= 0; --d) {
        off += rem % shp[d] * st[d];
        rem /= shp[d];
      }
      const char* s0 = src + (off + i0) * es;
      char* o0 = out + (o * m + i0) * inner * os;
      for (std::int64_t j0 = 0; j0 < inner; j0 += kTile) {
        const std::int64_t nj = std::min(kTile, inner - j0);
        // tile[ii][jj] = x[i0 + ii][j0 + jj]; source column jj is contiguous in ii.
        for (std::int64_t jj = 0; jj < nj; ++jj) strided_copy(s0 + (j0 + jj) * is * es, 1, tile + jj * es, kTile, esize, ni);
        for (std::int64_t ii = 0; ii < ni; ++ii) {
          const void* p[1] = {tile + ii * kTile * es};
          fn(p, &unit, o0 + (ii * inner + j0) * os, nj, params);
        }
      }
    }
  };
  parallel_for(outer * tiles_i, std::max<std::int64_t>(1, kParallelGrain / (kTile * std::max<std::int64_t>(inner, 1))),
               do_tiles, 1);
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
  if (k == 1 && needs_gather && cr >= 2 && cst[0][cr - 2] == 1) {  // a transposed operand
    detail::run_unary_transposed(fn, base[0], esize[0], cshp, cst[0], cr, obase, osize, params);
    return;
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
          detail::strided_copy(src, ist[j], buf[j], 1, esize[j], len);
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

#endif  // MS_KERNEL_BODIES

namespace detail {
inline bool is_half_float(DType d) { return d == DType::f16 || d == DType::bf16; }
/// Runs a float32 kernel for 16-bit float operands (defined in views.hpp, beside cast).
MS_IMPL void run_upcast_f32(const KernelArgs& k, KernelFn kernel);
}  // namespace detail

#if MS_KERNEL_BODIES
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

#endif  // MS_KERNEL_BODIES

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

#if MS_KERNEL_BODIES
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

#endif  // MS_KERNEL_BODIES

}  // namespace ms::ops
