#pragma once
// The reduction kernels of the CPU backend (ops/reduce.hpp plans the loops around them):
// pairwise reduction of a contiguous run (four SIMD accumulators per block of up to 512
// elements, blocks combined pairwise, so the error grows with log n) and pairwise
// accumulation of rows across columns, for sum, prod, max, min and the squared deviation of
// var/std. Float and double are compiled once per CPU level (MS_ISA_NS) and bound by name
// (cpu::isa_function; rows "reduce_run_<policy>_f32" ... in kReduceKernelNames); integer
// dtypes run the program's own copy. Includes nothing above core/.

#include <cstdint>
#include <limits>
#include <type_traits>

#include "../../../core/linkage.hpp"
#include "abi.hpp"
#include "simd.hpp"

namespace ms::ops {

/// The arguments of a run kernel: *result = the reduction of x[0 .. n) (a centered policy
/// measures from center).
template <class T>
struct ReduceRunArgs {
  const T* x;
  std::int64_t n;
  T center;
  T* result;
};

/// The arguments of a column kernel: dst[0 .. w) = the pairwise reduction of `rows` rows of
/// x (rows sr apart; ctr: the per-column centers of a centered policy). scratch holds w
/// elements per level of recursion (see col_levels in ops/reduce.hpp).
template <class T>
struct ReduceColArgs {
  const T* x;
  std::int64_t rows, sr, w;
  const T* ctr;
  T* dst;
  T* scratch;
};

namespace detail {

/// Below this many elements a run is reduced with four SIMD accumulators, above it pairwise.
inline constexpr std::int64_t kPairwiseBase = 512;
/// Rows accumulated this many at a time before pairwise combining.
inline constexpr std::int64_t kColumnBase = 16;

/// The names of the bound kernels: [run or column][policy id][float or double].
inline constexpr const char* kReduceKernelNames[2][5][2] = {
    {{"reduce_run_sum_f32", "reduce_run_sum_f64"}, {"reduce_run_prod_f32", "reduce_run_prod_f64"},
     {"reduce_run_max_f32", "reduce_run_max_f64"}, {"reduce_run_min_f32", "reduce_run_min_f64"},
     {"reduce_run_sqdev_f32", "reduce_run_sqdev_f64"}},
    {{"reduce_col_sum_f32", "reduce_col_sum_f64"}, {"reduce_col_prod_f32", "reduce_col_prod_f64"},
     {"reduce_col_max_f32", "reduce_col_max_f64"}, {"reduce_col_min_f32", "reduce_col_min_f64"},
     {"reduce_col_sqdev_f32", "reduce_col_sqdev_f64"}}};

inline namespace MS_ISA_NS {

// ---- combine policies (one formula for scalars and xsimd batches) ------------------------------


template <class T>
struct SumP {
  static constexpr int id = 0;  // the row of kReduceKernelNames
  static constexpr bool centered = false;
  static T identity() { return T(0); }
  template <class V>
  static V combine(V a, V b) { return simd::add(a, b); }
  template <class V>
  static V map(V x, V) { return x; }
};
template <class T>
struct ProdP : SumP<T> {
  static constexpr int id = 1;
  static T identity() { return T(1); }
  template <class V>
  static V combine(V a, V b) { return simd::mul(a, b); }
};
template <class T>
struct MaxP : SumP<T> {
  static constexpr int id = 2;
  static T identity() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
  }
  // simd::max(a, b) returns b when either is NaN, the select keeps a NaN already in a.
  template <class V>
  static V combine(V a, V b) { return simd::select(simd::isnan(a), a, simd::max(a, b)); }
};
template <class T>
struct MinP : SumP<T> {
  static constexpr int id = 3;
  static T identity() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
  }
  template <class V>
  static V combine(V a, V b) { return simd::select(simd::isnan(a), a, simd::min(a, b)); }
};
/// Squared deviation from a per-output center (the second pass of var/std).
template <class T>
struct SqDevP : SumP<T> {
  static constexpr int id = 4;
  static constexpr bool centered = true;
  template <class V>
  static V map(V x, V c) {
    V d = x - c;
    return d * d;
  }
};
/// P without its map: combines partial results.
template <class P>
struct Plain : P {
  static constexpr int id = P::centered ? 0 : P::id;  // SqDevP combines as a sum
  static constexpr bool centered = false;
  template <class V>
  static V map(V x, V) { return x; }
};
template <class P>
struct PlainOf { using type = Plain<P>; };
template <class P>
struct PlainOf<Plain<P>> { using type = Plain<P>; };


template <class P, class T>
T reduce_block(const T* p, std::int64_t n, T c) {
  std::int64_t i = 0;
  T r;
  if constexpr (simd::vectorized_v<T>) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t W = B::size;
    const B cb(c);
    B a0(P::identity()), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 4 * W <= n; i += 4 * W) {
      a0 = P::combine(a0, P::map(B::load_unaligned(p + i), cb));
      a1 = P::combine(a1, P::map(B::load_unaligned(p + i + W), cb));
      a2 = P::combine(a2, P::map(B::load_unaligned(p + i + 2 * W), cb));
      a3 = P::combine(a3, P::map(B::load_unaligned(p + i + 3 * W), cb));
    }
    for (; i + W <= n; i += W) a0 = P::combine(a0, P::map(B::load_unaligned(p + i), cb));
    a0 = P::combine(P::combine(a0, a1), P::combine(a2, a3));
    alignas(64) T lanes[W];
    a0.store_aligned(lanes);
    r = lanes[0];
    for (std::int64_t k = 1; k < W; ++k) r = P::combine(r, lanes[k]);
  } else {
    T a0 = P::identity(), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 4 <= n; i += 4) {
      a0 = P::combine(a0, P::map(p[i], c));
      a1 = P::combine(a1, P::map(p[i + 1], c));
      a2 = P::combine(a2, P::map(p[i + 2], c));
      a3 = P::combine(a3, P::map(p[i + 3], c));
    }
    r = P::combine(P::combine(a0, a1), P::combine(a2, a3));
  }
  for (; i < n; ++i) r = P::combine(r, P::map(p[i], c));
  return r;
}

/// Pairwise reduction of a contiguous run: error grows with log(n), not n.
template <class P, class T>
T reduce_pairwise(const T* p, std::int64_t n, T c) {
  if (n <= kPairwiseBase) return reduce_block<P>(p, n, c);
  std::int64_t h = (n / 2) & ~std::int64_t{63};  // split on whole SIMD blocks
  return P::combine(reduce_pairwise<P>(p, h, c), reduce_pairwise<P>(p + h, n - h, c));
}

/// dst[0..w) = map(x) (First) or combine(dst, map(x)), vectorized across columns.
template <class P, bool First, class T>
inline void col_step(T* dst, const T* x, const T* ctr, std::int64_t w) {
  std::int64_t c = 0;
  if constexpr (simd::vectorized_v<T>) {
    using B = xsimd::batch<T>;
    constexpr std::int64_t W = B::size;
    for (; c + W <= w; c += W) {
      B v = B::load_unaligned(x + c);
      if constexpr (P::centered) v = P::map(v, B::load_unaligned(ctr + c));
      if constexpr (First) v.store_unaligned(dst + c);
      else P::combine(B::load_unaligned(dst + c), v).store_unaligned(dst + c);
    }
  }
  for (; c < w; ++c) {
    T v = x[c];
    if constexpr (P::centered) v = P::map(v, ctr[c]);
    dst[c] = First ? v : P::combine(dst[c], v);
  }
}


/// Pairwise column reduction of `rows` rows of width w (row stride sr) into dst. `scratch`
/// holds one row of w per level of recursion (see col_levels).
template <class P, class T>
void col_pairwise(const T* x, std::int64_t rows, std::int64_t sr, std::int64_t w, const T* ctr, T* dst, T* scratch) {
  if (rows <= kColumnBase) {
    col_step<P, true>(dst, x, ctr, w);
    for (std::int64_t r = 1; r < rows; ++r) col_step<P, false>(dst, x + r * sr, ctr, w);
    return;
  }
  const std::int64_t h = rows / 2;
  col_pairwise<P>(x, h, sr, w, ctr, dst, scratch);
  col_pairwise<P>(x + h * sr, rows - h, sr, w, ctr, scratch, scratch + w);
  col_step<typename PlainOf<P>::type, false>(dst, scratch, static_cast<const T*>(nullptr), w);
}

template <class P, class T>
void reduce_run_kernel(const void* args) {
  const ReduceRunArgs<T>& a = *static_cast<const ReduceRunArgs<T>*>(args);
  *a.result = reduce_pairwise<P>(a.x, a.n, a.center);
}

template <class P, class T>
void reduce_col_kernel(const void* args) {
  const ReduceColArgs<T>& a = *static_cast<const ReduceColArgs<T>*>(args);
  col_pairwise<P>(a.x, a.rows, a.sr, a.w, a.ctr, a.dst, a.scratch);
}

#define MS_REDUCE_ROWS(policy, name)                                                   \
  MS_ISA_FUNCTION("reduce_run_" name "_f32", (&reduce_run_kernel<policy<float>, float>));   \
  MS_ISA_FUNCTION("reduce_run_" name "_f64", (&reduce_run_kernel<policy<double>, double>)); \
  MS_ISA_FUNCTION("reduce_col_" name "_f32", (&reduce_col_kernel<policy<float>, float>));   \
  MS_ISA_FUNCTION("reduce_col_" name "_f64", (&reduce_col_kernel<policy<double>, double>))
MS_REDUCE_ROWS(SumP, "sum");
MS_REDUCE_ROWS(ProdP, "prod");
MS_REDUCE_ROWS(MaxP, "max");
MS_REDUCE_ROWS(MinP, "min");
MS_REDUCE_ROWS(SqDevP, "sqdev");
#undef MS_REDUCE_ROWS

}  // namespace MS_ISA_NS
}  // namespace detail
}  // namespace ms::ops
