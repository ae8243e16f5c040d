#pragma once
// The CPU backend's own GEMM, the path that is always there (ms::CpuGemm::builtin; oneDNN
// and OpenBLAS pick their kernels at run time by themselves): c = a @ b on any strides, in
// float and double. Packed panels (a in strips of MR rows, b in strips of NR = 2 SIMD
// batches of columns, both zero-padded) feed an MR x NR register tile of FMA accumulators:
// 6 x 8 floats at sse4, 6 x 16 at avx2, 8 x 32 at avx512. Compiled once per CPU level
// (MS_ISA_NS) and bound by name (cpu::isa_function; rows "gemm_f32", "gemm_f64"); the
// caller splits the work between threads and gives each its scratch. Includes nothing
// above core/.

#include <algorithm>
#include <cstdint>

#include "../../../core/linkage.hpp"
#include "abi.hpp"
#include "simd.hpp"

namespace ms::ops {

/// The arguments of the GEMM kernel: c[i * ldc + j] (+)= sum_k a(i, k) b(k, j) for rows
/// [i0, i1) and columns [j0, j1) of c, where a(i, k) = a[a_col ? k * lda + i : i * lda + k]
/// and b(k, j) = b[b_col ? j * ldb + k : k * ldb + j]. accumulate: add to c instead of
/// overwriting it. scratch: GemmScratch(i1 - i0, j1 - j0, K).total() elements of the
/// caller's, for this call alone.
template <class T>
struct GemmArgs {
  const T* a;
  std::int64_t lda;
  bool a_col;
  const T* b;
  std::int64_t ldb;
  bool b_col;
  T* c;
  std::int64_t ldc;
  std::int64_t K;
  std::int64_t i0, i1, j0, j1;
  bool accumulate;
  T* scratch;
};

/// The blocking of the GEMM kernel: a panel of kGemmKc rows of b by kGemmNc columns, and
/// blocks of kGemmMc rows of a, the same at every level (the register tile varies; kGemmMc
/// and kGemmNc are multiples of every level's tile, and every NR divides kGemmMaxNr).
inline constexpr std::int64_t kGemmKc = 128, kGemmMc = 96, kGemmNc = 2048;
/// The largest register tile at any level, in rows and columns (the scratch is sized for it).
inline constexpr std::int64_t kGemmMaxMr = 8, kGemmMaxNr = 32;
/// The parts of one GEMM call's scratch, in elements: the packed block of a, the packed
/// panel of b and one edge tile, for `rows` x `cols` of c and depth K.
struct GemmScratch {
  std::int64_t a, b, edge;
  GemmScratch(std::int64_t rows, std::int64_t cols, std::int64_t K) {
    const std::int64_t kc = std::min(kGemmKc, K);
    // Strips of MR rows and NR columns: rounded up past the block's last row and column.
    a = (std::min(kGemmMc, rows) + kGemmMaxMr) * kc;
    b = std::min(kGemmNc, (cols + kGemmMaxNr - 1) / kGemmMaxNr * kGemmMaxNr) * kc;
    edge = kGemmMaxMr * kGemmMaxNr;
  }
  std::int64_t total() const { return a + b + edge; }
};
/// The column split that keeps each thread's share a whole number of register tiles.
inline constexpr std::int64_t kGemmColumnGrain = kGemmMaxNr;

namespace detail {
inline namespace MS_ISA_NS {

template <class T>
struct GemmTile {
  using B = xsimd::batch<T>;
  static constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
  static constexpr std::int64_t NR = 2 * W;
  static constexpr std::int64_t MR = W * sizeof(T) >= 64 ? 8 : 6;  // 16 of 32 zmm, or 12 of 16
  static_assert(MR <= kGemmMaxMr && NR <= kGemmMaxNr);
};

/// Packs rows [i, i + mc) x columns [p, p + kc) of a into strips of MR rows: strip s holds
/// ap[s * MR * kc + k * MR + r] = a(i + s * MR + r, p + k), rows past mc zero.
template <class T>
void gemm_pack_a(const GemmArgs<T>& g, std::int64_t i, std::int64_t mc, std::int64_t p, std::int64_t kc, T* ap) {
  constexpr std::int64_t MR = GemmTile<T>::MR;
  for (std::int64_t s = 0; s * MR < mc; ++s) {
    T* dst = ap + s * MR * kc;
    const std::int64_t rows = std::min(MR, mc - s * MR), row0 = i + s * MR;
    if (g.a_col) {  // a column of a is contiguous: MR neighbours per k
      for (std::int64_t k = 0; k < kc; ++k) {
        const T* src = g.a + (p + k) * g.lda + row0;
        T* d = dst + k * MR;
        for (std::int64_t r = 0; r < MR; ++r) d[r] = r < rows ? src[r] : T(0);
      }
      continue;
    }
    // Rows of a are contiguous: read the strip's rows side by side, write each k's MR at once.
    const T* src[MR];
    for (std::int64_t r = 0; r < MR; ++r) src[r] = g.a + (row0 + std::min(r, rows - 1)) * g.lda + p;
    for (std::int64_t k = 0; k < kc; ++k) {
      T* d = dst + k * MR;
      MS_UNROLL
      for (std::int64_t r = 0; r < MR; ++r) d[r] = src[r][k];
    }
    for (std::int64_t r = rows; r < MR; ++r)  // rows past the block: zero
      for (std::int64_t k = 0; k < kc; ++k) dst[k * MR + r] = T(0);
  }
}

/// Packs rows [p, p + kc) x columns [j, j + nc) of b into strips of NR columns: strip s
/// holds bp[s * NR * kc + k * NR + c] = b(p + k, j + s * NR + c), columns past nc zero.
template <class T>
void gemm_pack_b(const GemmArgs<T>& g, std::int64_t p, std::int64_t kc, std::int64_t j, std::int64_t nc, T* bp) {
  using B = typename GemmTile<T>::B;
  constexpr std::int64_t NR = GemmTile<T>::NR, W = GemmTile<T>::W;
  for (std::int64_t s = 0; s * NR < nc; ++s) {
    T* dst = bp + s * NR * kc;
    const std::int64_t cols = std::min(NR, nc - s * NR), col0 = j + s * NR;
    if (!g.b_col && cols == NR) {  // rows of NR contiguous elements: two batches each
      for (std::int64_t k = 0; k < kc; ++k) {
        const T* src = g.b + (p + k) * g.ldb + col0;
        B::load_unaligned(src).store_unaligned(dst + k * NR);
        B::load_unaligned(src + W).store_unaligned(dst + k * NR + W);
      }
    } else if (!g.b_col) {
      for (std::int64_t k = 0; k < kc; ++k) {
        const T* src = g.b + (p + k) * g.ldb + col0;
        T* d = dst + k * NR;
        for (std::int64_t c = 0; c < NR; ++c) d[c] = c < cols ? src[c] : T(0);
      }
    } else {
      // Columns of b are rows in memory: read four of them side by side, so that each
      // pass over k writes four neighbouring elements of every packed row.
      std::int64_t c = 0;
      for (; c + 4 <= cols; c += 4) {
        const T* s0 = g.b + (col0 + c) * g.ldb + p;
        const T *s1 = s0 + g.ldb, *s2 = s1 + g.ldb, *s3 = s2 + g.ldb;
        for (std::int64_t k = 0; k < kc; ++k) {
          T* d = dst + k * NR + c;
          d[0] = s0[k], d[1] = s1[k], d[2] = s2[k], d[3] = s3[k];
        }
      }
      for (; c < cols; ++c) {
        const T* src = g.b + (col0 + c) * g.ldb + p;
        for (std::int64_t k = 0; k < kc; ++k) dst[k * NR + c] = src[k];
      }
      for (; c < NR; ++c)
        for (std::int64_t k = 0; k < kc; ++k) dst[k * NR + c] = T(0);
    }
  }
}

/// One register tile: c[rows x cols] (+)= ap (kc x MR) . bp (kc x NR). A partial tile goes
/// through `edge` (MR x NR) so that no store passes c's bounds.
template <class T>
void gemm_tile(std::int64_t kc, const T* ap, const T* bp, T* c, std::int64_t ldc, bool add, std::int64_t rows,
               std::int64_t cols, T* edge) {
  using B = typename GemmTile<T>::B;
  constexpr std::int64_t MR = GemmTile<T>::MR, NR = GemmTile<T>::NR, W = GemmTile<T>::W;
  B acc0[MR], acc1[MR];
  MS_UNROLL
  for (std::int64_t r = 0; r < MR; ++r) acc0[r] = acc1[r] = B(T(0));
  for (std::int64_t k = 0; k < kc; ++k) {
    const B b0 = B::load_unaligned(bp + k * NR), b1 = B::load_unaligned(bp + k * NR + W);
    const T* a = ap + k * MR;
    MS_UNROLL
    for (std::int64_t r = 0; r < MR; ++r) {
      const B av(a[r]);
      acc0[r] = xsimd::fma(av, b0, acc0[r]);
      acc1[r] = xsimd::fma(av, b1, acc1[r]);
    }
  }
  if (cols == NR) {  // whole rows: stored from the registers
    MS_UNROLL
    for (std::int64_t r = 0; r < MR; ++r) {
      if (r >= rows) break;
      T* cr = c + r * ldc;
      if (add) {
        (B::load_unaligned(cr) + acc0[r]).store_unaligned(cr);
        (B::load_unaligned(cr + W) + acc1[r]).store_unaligned(cr + W);
      } else {
        acc0[r].store_unaligned(cr);
        acc1[r].store_unaligned(cr + W);
      }
    }
    return;
  }
  MS_UNROLL
  for (std::int64_t r = 0; r < MR; ++r) {  // a partial column strip: through `edge`
    acc0[r].store_unaligned(edge + r * NR);
    acc1[r].store_unaligned(edge + r * NR + W);
  }
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t col = 0; col < cols; ++col)
      c[r * ldc + col] = add ? c[r * ldc + col] + edge[r * NR + col] : edge[r * NR + col];
}

template <class T>
void gemm_kernel(const void* args) {
  const GemmArgs<T>& g = *static_cast<const GemmArgs<T>*>(args);
  constexpr std::int64_t MR = GemmTile<T>::MR, NR = GemmTile<T>::NR;
  const GemmScratch room(g.i1 - g.i0, g.j1 - g.j0, g.K);
  T* ap = g.scratch;
  T* bp = ap + room.a;
  T* edge = bp + room.b;
  if (g.K == 0) {
    if (!g.accumulate)
      for (std::int64_t i = g.i0; i < g.i1; ++i) std::fill(g.c + i * g.ldc + g.j0, g.c + i * g.ldc + g.j1, T(0));
    return;
  }
  for (std::int64_t j = g.j0; j < g.j1; j += kGemmNc) {
    const std::int64_t nc = std::min(kGemmNc, g.j1 - j);
    for (std::int64_t p = 0; p < g.K; p += kGemmKc) {
      const std::int64_t kc = std::min(kGemmKc, g.K - p);
      const bool add = g.accumulate || p > 0;
      gemm_pack_b(g, p, kc, j, nc, bp);
      for (std::int64_t i = g.i0; i < g.i1; i += kGemmMc) {
        const std::int64_t mc = std::min(kGemmMc, g.i1 - i);
        gemm_pack_a(g, i, mc, p, kc, ap);
        for (std::int64_t js = 0; js < nc; js += NR)
          for (std::int64_t is = 0; is < mc; is += MR)
            gemm_tile(kc, ap + is * kc, bp + js * kc, g.c + (i + is) * g.ldc + j + js, g.ldc, add,
                      std::min(MR, mc - is), std::min(NR, nc - js), edge);
      }
    }
  }
}

MS_ISA_FUNCTION("gemm_f32", &gemm_kernel<float>);
MS_ISA_FUNCTION("gemm_f64", &gemm_kernel<double>);

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
