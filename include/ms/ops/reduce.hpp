#pragma once
// Reductions over axes: sum, prod, mean, max, min, var, std, argmax, argmin.
// Belongs here: their op definitions, shape/dtype inference and the CPU kernels' loop
// plans (rows, columns in tiles, fixed chunks for long runs, a permuting copy for any
// other layout). The SIMD loops they call (pairwise runs, pairwise accumulation of rows)
// are in backend/cpu/kernels/reduce.hpp, per CPU level for float and double. Kernels never
// dispatch ops: they also run inside the graph executor.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "../core/linkage.hpp"
#if MS_KERNEL_BODIES  // core/linkage.hpp
#include "../backend/cpu/kernels/reduce.hpp"
#include "isa_dispatch.hpp"
#endif

#include "../core/parallel.hpp"
#include "attr_struct.hpp"
#include "views.hpp"

namespace ms::ops {

/// Sum over `axes` (all axes when empty; negative axes count from the end). Integer sums stay
/// in their dtype and wrap around; float sums are pairwise. An empty reduction gives 0.
MS_IMPL AnyTensor sum(const AnyTensor& x, const IntList& axes = {}, bool keepdim = false);
/// Product over `axes` (1 for an empty reduction).
MS_IMPL AnyTensor prod(const AnyTensor& x, const IntList& axes = {}, bool keepdim = false);
/// Arithmetic mean over `axes` (float dtypes; NaN for an empty reduction).
MS_IMPL AnyTensor mean(const AnyTensor& x, const IntList& axes = {}, bool keepdim = false);
/// Largest element over `axes`; NaN propagates (NumPy). A zero-size reduction is a ValueError.
MS_IMPL AnyTensor max(const AnyTensor& x, const IntList& axes = {}, bool keepdim = false);
/// Smallest element over `axes`; NaN propagates (NumPy). A zero-size reduction is a ValueError.
MS_IMPL AnyTensor min(const AnyTensor& x, const IntList& axes = {}, bool keepdim = false);
/// Variance over `axes` with N - correction in the denominator (1: unbiased, like PyTorch).
MS_IMPL AnyTensor var(const AnyTensor& x, const IntList& axes = {}, bool keepdim = false,
                      std::int64_t correction = 1);
/// Standard deviation: sqrt(var(x, axes, keepdim, correction)).
MS_IMPL AnyTensor std(const AnyTensor& x, const IntList& axes = {}, bool keepdim = false,
                      std::int64_t correction = 1);
/// Index (int64) of the largest element along `axis`, or in the flattened tensor when no axis
/// is given. Ties give the first occurrence; NaN counts as the largest (NumPy).
MS_IMPL AnyTensor argmax(const AnyTensor& x, std::optional<std::int64_t> axis = std::nullopt, bool keepdim = false);
/// Index (int64) of the smallest element; ties give the first occurrence, NaN counts as smallest.
MS_IMPL AnyTensor argmin(const AnyTensor& x, std::optional<std::int64_t> axis = std::nullopt, bool keepdim = false);

}  // namespace ms::ops

namespace ms {
/// Sum over `axes` (all when empty), e.g. ms::sum(x, {0}) sums a (B, N) matrix over the batch.
template <Element T>
Tensor<T> sum(const Tensor<T>& x, const ops::IntList& axes = {}, bool keepdim = false) { return ops::sum(x, axes, keepdim); }
/// Product over `axes` (all when empty).
template <Element T>
Tensor<T> prod(const Tensor<T>& x, const ops::IntList& axes = {}, bool keepdim = false) { return ops::prod(x, axes, keepdim); }
/// Mean over `axes` (all when empty); float tensors only.
template <Element T>
Tensor<T> mean(const Tensor<T>& x, const ops::IntList& axes = {}, bool keepdim = false) { return ops::mean(x, axes, keepdim); }
/// Maximum over `axes` (all when empty); NaN propagates.
template <Element T>
Tensor<T> max(const Tensor<T>& x, const ops::IntList& axes = {}, bool keepdim = false) { return ops::max(x, axes, keepdim); }
/// Minimum over `axes` (all when empty); NaN propagates.
template <Element T>
Tensor<T> min(const Tensor<T>& x, const ops::IntList& axes = {}, bool keepdim = false) { return ops::min(x, axes, keepdim); }
/// Variance over `axes` with N - correction in the denominator.
template <Element T>
Tensor<T> var(const Tensor<T>& x, const ops::IntList& axes = {}, bool keepdim = false, std::int64_t correction = 1) {
  return ops::var(x, axes, keepdim, correction);
}
/// Standard deviation over `axes` with N - correction in the denominator.
template <Element T>
Tensor<T> std(const Tensor<T>& x, const ops::IntList& axes = {}, bool keepdim = false, std::int64_t correction = 1) {
  return ops::std(x, axes, keepdim, correction);
}
/// Index of the largest element along `axis` (flattened when omitted).
template <Element T>
Tensor<std::int64_t> argmax(const Tensor<T>& x, std::optional<std::int64_t> axis = std::nullopt, bool keepdim = false) {
  return ops::argmax(x, axis, keepdim);
}
/// Index of the smallest element along `axis` (flattened when omitted).
template <Element T>
Tensor<std::int64_t> argmin(const Tensor<T>& x, std::optional<std::int64_t> axis = std::nullopt, bool keepdim = false) {
  return ops::argmin(x, axis, keepdim);
}
}  // namespace ms

// =============================================================================================
// Implementation
// =============================================================================================

namespace ms::ops {

/// The attributes of sum, prod, mean, max and min (see ops/attr_struct.hpp): empty axes
/// reduce every axis.
struct ReduceAttrs {
  IntList axes;
  bool keepdim = false;
  static auto fields() {
    return std::tuple{field("axes", &ReduceAttrs::axes, IntList{}), field("keepdim", &ReduceAttrs::keepdim, false)};
  }
};
/// var and std: the reduction and Bessel's correction (divisor N - correction).
struct VarAttrs : ReduceAttrs {
  std::int64_t correction = 1;
  static auto fields() {
    return std::tuple_cat(ReduceAttrs::fields(), std::tuple{field("correction", &VarAttrs::correction, 1)});
  }
};
/// argmax and argmin: one axis (unset: the flattened tensor); keepdim is written first.
struct ArgReduceAttrs {
  std::optional<std::int64_t> axis;
  bool keepdim = false;
  static auto fields() {
    return std::tuple{field("keepdim", &ArgReduceAttrs::keepdim, false),
                      field("axis", &ArgReduceAttrs::axis, std::nullopt)};
  }
};

namespace detail {
#if MS_IMPL_BODIES
inline Attrs reduce_attrs(const IntList& axes, bool keepdim) { return to_attrs(ReduceAttrs{axes, keepdim}); }

inline Attrs arg_attrs(std::optional<std::int64_t> axis, bool keepdim) { return to_attrs(ArgReduceAttrs{axis, keepdim}); }
#endif

#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

enum class Red : std::uint8_t { sum, prod, mean, max, min, var, std, argmax, argmin };
/// The typed attributes of reduction K (argmax and argmin: ArgReduceAttrs).
template <Red K>
using reduce_attrs_t = std::conditional_t<K == Red::var || K == Red::std, VarAttrs, ReduceAttrs>;

/// Bitmask of the reduced axes. Empty `axes` means all; a 0-d tensor accepts axis 0 or -1 and
/// reduces nothing. Throws IndexError (out of range) or ValueError (an axis given twice).
inline std::uint32_t reduce_mask(std::string_view op, const IntList& axes, int rank) {
  if (axes.empty()) return rank == 0 ? 0u : (1u << rank) - 1u;
  std::uint32_t seen = 0;
  for (auto a : axes) {
    int k = normalize_axis(a, rank, op);
    if (rank == 0) k = 0;
    MS_CHECK(!((seen >> k) & 1u), ValueError, "{}: axis {} appears more than once in axes {}", op, k, ints_str(axes));
    seen |= 1u << k;
  }
  return rank == 0 ? 0u : seen;
}

inline Shape reduced_shape(const Shape& s, std::uint32_t mask, bool keepdim) {
  Shape o;
  for (int i = 0; i < s.rank(); ++i) {
    if (!((mask >> i) & 1u)) o.push_back(s[i]);
    else if (keepdim) o.push_back(1);
  }
  return o;
}

/// max/min/argmax/argmin have no identity: reducing a zero-size axis into a non-empty output fails.
inline void check_has_elements(std::string_view op, const Shape& s, std::uint32_t mask, const Shape& out) {
  std::int64_t n = 1;
  IntList axes;
  for (int i = 0; i < s.rank(); ++i)
    if ((mask >> i) & 1u) {
      n *= s[i];
      axes.push_back(i);
    }
  MS_CHECK(n > 0 || numel(out) == 0, ValueError, "{}: reduction over a zero-size axis has no identity (shape {}, axes {})",
           op, shape_str(s), ints_str(axes));
}

/// A: ReduceAttrs, or VarAttrs for var and std.
template <bool NoIdentity, class A>
void infer_reduce(const OpDef& op, std::span<const TensorMeta> in, const Attrs& attrs, MetaList& out) {
  const Shape& s = in[0].shape;
  const A a = attrs_as<A>(op, attrs);
  std::uint32_t mask = reduce_mask(op.name, a.axes, s.rank());
  Shape o = reduced_shape(s, mask, a.keepdim);
  if constexpr (NoIdentity) check_has_elements(op.name, s, mask, o);
  out.push_back({in[0].dtype, o});
}

/// argmax/argmin: attr "axis" (absent: the flattened tensor), "keepdim".
inline std::uint32_t arg_mask(std::string_view op, const ArgReduceAttrs& a, int rank) {
  if (!a.axis) return rank == 0 ? 0u : (1u << rank) - 1u;
  int k = normalize_axis(*a.axis, rank, op);
  return rank == 0 ? 0u : 1u << k;
}

inline void infer_arg(const OpDef& op, std::span<const TensorMeta> in, const Attrs& attrs, MetaList& out) {
  const Shape& s = in[0].shape;
  const ArgReduceAttrs a = attrs_as<ArgReduceAttrs>(op, attrs);
  std::uint32_t mask = arg_mask(op.name, a, s.rank());
  bool keep = a.keepdim;
  Shape o = a.axis ? reduced_shape(s, mask, keep) : (keep ? Shape::filled(s.rank(), 1) : Shape{});
  check_has_elements(op.name, s, mask, o);
  out.push_back({DType::i64, o});
}

template <int FlopsPerElement>
Cost reduce_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  double n = static_cast<double>(numel(in[0].shape));
  return {n * FlopsPerElement, n * static_cast<double>(dtype_size(in[0].dtype)) +
                                   static_cast<double>(numel(out[0].shape) * dtype_size(out[0].dtype))};
}

// ---- the three-loop plan ----------------------------------------------------------------------

/// Every supported layout is reduced as out[a*oa + c*oc] = reduce_r x[a*sa + r*sr + c*sc]:
/// rows (C == 1, sr == 1: each output reduces a contiguous run) or columns (C > 1, sc == 1:
/// whole rows are accumulated, e.g. a sum over the batch axis of a (B, N) matrix).
struct Loop3 {
  std::int64_t A = 1, R = 1, C = 1;
  std::int64_t sa = 0, sr = 1, sc = 1;
  std::int64_t oa = 0, oc = 1;
};

/// Maps (shape, strides, reduced mask) onto a Loop3 with a contiguous output; false when the
/// layout does not fit (the caller then copies the input). Dims are visited in memory order
/// (largest stride first, broadcast dims outermost) and merged where both sides allow, so a
/// transposed or sliced input usually needs no copy.
inline bool plan_loop3(const Shape& shape, const Shape& strides, std::uint32_t mask, Loop3& p) {
  struct Dim {
    std::int64_t n, si, so;
    bool red;
  };
  const int rank = shape.rank();
  std::int64_t ostr[kMaxDims] = {};
  for (std::int64_t i = rank - 1, acc = 1; i >= 0; --i)
    if (!((mask >> i) & 1u)) {
      ostr[i] = acc;
      acc *= shape[i];
    }
  Dim d[kMaxDims];
  int nd = 0;
  for (int i = 0; i < rank; ++i)
    if (shape[i] != 1) d[nd++] = {shape[i], strides[i], ostr[i], static_cast<bool>((mask >> i) & 1u)};
  auto key = [](std::int64_t s) { return s == 0 ? std::numeric_limits<std::int64_t>::max() : (s < 0 ? -s : s); };
  std::stable_sort(d, d + nd, [&](const Dim& x, const Dim& y) { return key(x.si) > key(y.si); });
  Dim g[kMaxDims];
  int ng = 0;
  for (int i = 0; i < nd; ++i) {
    if (ng > 0) {
      Dim& b = g[ng - 1];
      if (b.red == d[i].red && b.si == d[i].si * d[i].n && (b.red || b.so == d[i].so * d[i].n)) {
        b.n *= d[i].n;
        b.si = d[i].si;
        b.so = d[i].so;
        continue;
      }
    }
    g[ng++] = d[i];
  }
  p = Loop3{};
  if (ng == 0) return true;
  const Dim& last = g[ng - 1];
  if (ng == 1 && last.red) {
    p.R = last.n;
    return last.si == 1;
  }
  if (ng == 1) {  // nothing reduced (only size-1 axes): a copy through the same kernels
    if (last.si == 1) {
      p.C = last.n;
      p.oc = last.so;
    } else {
      p.A = last.n;
      p.sa = last.si;
      p.oa = last.so;
    }
    return true;
  }
  if (ng == 2 && !g[0].red && last.red && last.si == 1) {
    p.A = g[0].n, p.sa = g[0].si, p.oa = g[0].so, p.R = last.n;
    return true;
  }
  if (ng == 2 && g[0].red && !last.red && last.si == 1) {
    p.R = g[0].n, p.sr = g[0].si, p.C = last.n, p.oc = last.so;
    return true;
  }
  if (ng == 3 && !g[0].red && g[1].red && !g[2].red && last.si == 1) {
    p.A = g[0].n, p.sa = g[0].si, p.oa = g[0].so;
    p.R = g[1].n, p.sr = g[1].si;
    p.C = g[2].n, p.oc = g[2].so;
    return true;
  }
  return false;
}

/// A contiguous copy of x with the kept axes first and the reduced axes last (the fallback for
/// layouts plan_loop3 rejects); `mask` is rewritten to select the trailing axes.
inline AnyTensor reduced_last_copy(const AnyTensor& x, std::uint32_t& mask) {
  Shape s, st;
  int nk = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < x.dim(); ++i)
      if (static_cast<bool>((mask >> i) & 1u) == (pass == 1)) {
        s.push_back(x.shape()[i]);
        st.push_back(x.strides()[i]);
        nk += pass == 0;
      }
  mask = x.dim() == 0 ? 0u : ((1u << x.dim()) - 1u) & ~((1u << nk) - 1u);
  return contiguous_raw(AnyTensor::view_of(x.storage(), s, st, x.offset(), x.dtype()));
}

/// Elements per parallel task along a row; fixed (not derived from the thread count) so the
/// result is the same for any number of threads.
inline constexpr std::int64_t kReduceChunk = 1 << 15;

/// The run and column kernels of policy P (backend/cpu/kernels/reduce.hpp) for T: float and
/// double on the CPU level in force (looked up once per op call), other dtypes on the
/// program's own copy.
template <class P, class T>
struct ReduceKernels {
  IsaFn run_fn = nullptr, col_fn = nullptr;
  ReduceKernels() {
    if constexpr (simd::vectorized_v<T>) {
      constexpr int t = std::is_same_v<T, double> ? 1 : 0;
      run_fn = cpu::isa_function(kReduceKernelNames[0][P::id][t], &reduce_run_kernel<P, T>);
      col_fn = cpu::isa_function(kReduceKernelNames[1][P::id][t], &reduce_col_kernel<P, T>);
    }
  }
  /// The pairwise reduction of x[0 .. n) (centered at c).
  T run(const T* x, std::int64_t n, T c) const {
    if constexpr (simd::vectorized_v<T>) {
      T r;
      const ReduceRunArgs<T> a{x, n, c, &r};
      run_fn(&a);
      return r;
    } else {
      return reduce_pairwise<P>(x, n, c);
    }
  }
  /// dst[0 .. w) = the pairwise reduction of `rows` rows of x, sr apart (see ReduceColArgs).
  void columns(const T* x, std::int64_t rows, std::int64_t sr, std::int64_t w, const T* ctr, T* dst, T* scratch) const {
    if constexpr (simd::vectorized_v<T>) {
      const ReduceColArgs<T> a{x, rows, sr, w, ctr, dst, scratch};
      col_fn(&a);
    } else {
      col_pairwise<P>(x, rows, sr, w, ctr, dst, scratch);
    }
  }
};

/// Rows: out[a*oa] = reduce of the contiguous run x[a*sa .. a*sa + R).
template <class P, class T>
void reduce_rows(const T* x, const Loop3& p, T* out, std::type_identity_t<const T*> center) {
  const std::int64_t A = p.A, R = p.R;
  auto ctr = [&](std::int64_t a) {
    if constexpr (P::centered) return center[a * p.oa];
    else return T(0);
  };
  const ReduceKernels<P, T> k;
  if (R <= kReduceChunk) {
    const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(R, 1));
    parallel_for(A, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t a = b; a < e; ++a) out[a * p.oa] = k.run(x + a * p.sa, R, ctr(a));
    }, 1);
    return;
  }
  // Long rows: fixed-size chunks reduced in parallel, then their partials pairwise.
  const std::int64_t nc = (R + kReduceChunk - 1) / kReduceChunk;
  std::vector<T> part(static_cast<std::size_t>(A * nc));
  parallel_for(A * nc, 2, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      std::int64_t a = t / nc, s = (t % nc) * kReduceChunk;
      part[t] = k.run(x + a * p.sa + s, std::min(kReduceChunk, R - s), ctr(a));
    }
  }, 1);
  const ReduceKernels<typename PlainOf<P>::type, T> q;
  for (std::int64_t a = 0; a < A; ++a) out[a * p.oa] = q.run(part.data() + a * nc, nc, T(0));
}

inline int col_levels(std::int64_t rows) {
  int d = 1;
  for (; rows > kColumnBase; rows -= rows / 2) ++d;
  return d;
}

template <class T>
inline constexpr std::int64_t kColumnTile = std::max<std::int64_t>(64, 2048 / static_cast<std::int64_t>(sizeof(T)));

/// Columns: out[a*oa + c*oc] = reduce_r x[a*sa + r*sr + c] for C > 1, in tiles of columns
/// (the running tile stays in L1). Long reductions are split into fixed row chunks whose
/// partial rows are combined by a second, map-free column reduction.
template <class P, class T>
void reduce_cols(const T* x, const Loop3& p, T* out, std::type_identity_t<const T*> center) {
  constexpr std::int64_t TW = kColumnTile<T>;
  const std::int64_t A = p.A, R = p.R, C = p.C;
  const std::int64_t ntile = (C + TW - 1) / TW;
  const std::int64_t rc = std::max<std::int64_t>(64, kReduceChunk / C);
  const std::int64_t nrc = (R + rc - 1) / rc;
  std::vector<T> part(nrc > 1 ? static_cast<std::size_t>(A * nrc * C) : 0);
  const ReduceKernels<P, T> kern;
  const int levels = col_levels(std::min(rc, R));
  const std::int64_t work = std::min(rc, R) * std::min(TW, C);
  parallel_for(A * ntile * nrc, std::max<std::int64_t>(1, kParallelGrain / work), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> buf(static_cast<std::size_t>((levels + 2) * TW));
    T* tile = buf.data();
    T* ctile = tile + TW;
    T* scratch = ctile + TW;
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t k = t % nrc, j = (t / nrc) % ntile, a = t / nrc / ntile;
      const std::int64_t c0 = j * TW, w = std::min(TW, C - c0), r0 = k * rc, rows = std::min(rc, R - r0);
      if constexpr (P::centered)
        for (std::int64_t c = 0; c < w; ++c) ctile[c] = center[a * p.oa + (c0 + c) * p.oc];
      kern.columns(x + a * p.sa + r0 * p.sr + c0, rows, p.sr, w, ctile, tile, scratch);
      if (nrc == 1) {
        for (std::int64_t c = 0; c < w; ++c) out[a * p.oa + (c0 + c) * p.oc] = tile[c];
      } else {
        std::copy(tile, tile + w, part.data() + (a * nrc + k) * C + c0);
      }
    }
  }, 1);
  if (nrc > 1) {
    Loop3 q = p;
    q.R = nrc, q.sa = nrc * C, q.sr = C;
    reduce_cols<typename PlainOf<P>::type>(part.data(), q, out, nullptr);
  }
}

template <class P, class T>
void reduce_loop3(const T* x, const Loop3& p, T* out, std::type_identity_t<const T*> center) {
  if (p.C > 1) reduce_cols<P>(x, p, out, center);
  else reduce_rows<P>(x, p, out, center);
}

// ---- argmax / argmin ------------------------------------------------------------------------

/// True when v should replace the current best (strictly better, so ties keep the first;
/// the first NaN wins and is never replaced).
template <bool Max, class T>
inline bool arg_better(T v, T best) {
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best) return false;
    if (v != v) return true;
  }
  return Max ? v > best : v < best;
}

template <bool Max, class T>
void arg_loop3(const T* x, const Loop3& p, std::int64_t* out) {
  using P = std::conditional_t<Max, MaxP<T>, MinP<T>>;
  const std::int64_t A = p.A, R = p.R, C = p.C;
  if (C == 1) {  // rows: find the extreme with SIMD, then its first position
    const ReduceKernels<P, T> k;
    const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / R);
    parallel_for(A, grain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t a = b; a < e; ++a) {
        const T* row = x + a * p.sa;
        const T m = k.run(row, R, T(0));
        std::int64_t i = 0;
        if (m != m) {
          while (row[i] == row[i]) ++i;
        } else {
          while (row[i] != m) ++i;
        }
        out[a * p.oa] = i;
      }
    }, 1);
    return;
  }
  constexpr std::int64_t TW = kColumnTile<T>;
  const std::int64_t ntile = (C + TW - 1) / TW;
  parallel_for(A * ntile, std::max<std::int64_t>(1, kParallelGrain / (R * std::min(TW, C))),
               [&](std::int64_t b, std::int64_t e) {
    T best[TW];
    std::int64_t idx[TW];
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t a = t / ntile, c0 = (t % ntile) * TW, w = std::min(TW, C - c0);
      const T* base = x + a * p.sa + c0;
      for (std::int64_t c = 0; c < w; ++c) best[c] = base[c], idx[c] = 0;
      for (std::int64_t r = 1; r < R; ++r) {
        const T* row = base + r * p.sr;
        for (std::int64_t c = 0; c < w; ++c)
          if (arg_better<Max>(row[c], best[c])) best[c] = row[c], idx[c] = r;
      }
      for (std::int64_t c = 0; c < w; ++c) out[a * p.oa + (c0 + c) * p.oc] = idx[c];
    }
  }, 1);
}

// ---- the kernel -------------------------------------------------------------------------------

template <Red K, class T>
inline constexpr bool red_supports_v =
    (K == Red::mean || K == Red::var || K == Red::std)
        ? simd::vectorized_v<T>
        : (simd::vectorized_v<T> || std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
           std::is_same_v<T, std::uint8_t>);

/// The combine policy of a reduction (mean sums; var and std have their own passes).
template <Red K, class T>
using RedPolicy = std::conditional_t<K == Red::prod, ProdP<T>,
                                     std::conditional_t<K == Red::max, MaxP<T>,
                                                        std::conditional_t<K == Red::min, MinP<T>, SumP<T>>>>;

/// Two-stage reduction of a contiguous x whose last t >= 1 axes are all reduced and that
/// also reduces some earlier axis: rows of the trailing run into a temporary of the leading
/// shape, then that temporary's reduced axes into out. False when x does not fit.
template <Red K, class T>
bool reduce_two_stage(const AnyTensor& x, std::uint32_t mask, T* out) {
  const int rank = x.dim();
  if (!x.is_contiguous() || rank < 2) return false;
  int lead = rank;
  std::int64_t run = 1;
  while (lead > 0 && ((mask >> (lead - 1)) & 1u)) run *= x.shape()[--lead];
  const std::uint32_t mask2 = mask & ((1u << lead) - 1u);
  if (lead == rank || mask2 == 0) return false;
  Shape s2;
  for (int i = 0; i < lead; ++i) s2.push_back(x.shape()[i]);
  Loop3 p2;
  if (!plan_loop3(s2, contiguous_strides(s2), mask2, p2)) return false;
  const std::int64_t rows = numel(s2);
  std::vector<T> tmp(static_cast<std::size_t>(rows));
  Loop3 p1;
  p1.A = rows, p1.R = run, p1.sa = run, p1.oa = 1;
  using P = RedPolicy<K, T>;
  reduce_rows<P>(static_cast<const T*>(x.raw_data()), p1, tmp.data(), nullptr);
  reduce_loop3<typename PlainOf<P>::type>(tmp.data(), p2, out, nullptr);
  return true;
}

template <Red K, class T>
void run_reduce(const KernelArgs& k, std::uint32_t mask) {
  const AnyTensor& x = k.in[0];
  const AnyTensor& y = k.out[0];
  const std::int64_t n_out = y.numel();
  if constexpr (K == Red::argmax || K == Red::argmin) {
    AnyTensor src = x;
    if (!k.attrs.has("axis") && !x.is_contiguous()) src = contiguous_raw(x);  // flat index = row-major order
    Loop3 p;
    if (!plan_loop3(src.shape(), src.strides(), mask, p)) {
      src = reduced_last_copy(src, mask);
      plan_loop3(src.shape(), src.strides(), mask, p);
    }
    arg_loop3<K == Red::argmax>(static_cast<const T*>(src.raw_data()), p, static_cast<std::int64_t*>(y.raw_data()));
  } else {
    T* out = static_cast<T*>(y.raw_data());
    const std::int64_t N = x.numel() / n_out;  // elements reduced into each output
    if (N == 0) {  // empty reduction: the identity (NaN for mean/var/std)
      T v = K == Red::prod ? T(1) : T(0);
      if constexpr (K == Red::mean || K == Red::var || K == Red::std) v = std::numeric_limits<T>::quiet_NaN();
      std::fill(out, out + n_out, v);
      return;
    }
    [[maybe_unused]] auto scale = [&](T* o, double d) {
      for (std::int64_t i = 0; i < n_out; ++i) o[i] = static_cast<T>(static_cast<double>(o[i]) / d);
    };
    AnyTensor src = x;
    Loop3 p;
    if (!plan_loop3(x.shape(), x.strides(), mask, p)) {
      if constexpr (K != Red::var && K != Red::std) {
        // A contiguous input whose trailing axes are reduced along with others (a conv
        // bias gradient sums (N, H, W) of NCHW): reduce the trailing run of each row first,
        // then the smaller result's remaining axes, rather than transposing the input.
        if (reduce_two_stage<K, T>(x, mask, out)) {
          if constexpr (K == Red::mean) scale(out, static_cast<double>(N));
          return;
        }
      }
      src = reduced_last_copy(x, mask);
      plan_loop3(src.shape(), src.strides(), mask, p);
    }
    const T* xp = static_cast<const T*>(src.raw_data());
    if constexpr (K == Red::sum) reduce_loop3<SumP<T>>(xp, p, out, nullptr);
    if constexpr (K == Red::prod) reduce_loop3<ProdP<T>>(xp, p, out, nullptr);
    if constexpr (K == Red::max) reduce_loop3<MaxP<T>>(xp, p, out, nullptr);
    if constexpr (K == Red::min) reduce_loop3<MinP<T>>(xp, p, out, nullptr);
    if constexpr (K == Red::mean) {
      reduce_loop3<SumP<T>>(xp, p, out, nullptr);
      scale(out, static_cast<double>(N));
    }
    if constexpr (K == Red::var || K == Red::std) {
      // Two passes (mean, then squared deviations): accurate where the one-pass formula cancels.
      std::vector<T> mu(static_cast<std::size_t>(n_out));
      reduce_loop3<SumP<T>>(xp, p, mu.data(), nullptr);
      scale(mu.data(), static_cast<double>(N));
      reduce_loop3<SqDevP<T>>(xp, p, out, mu.data());
      const T denom = static_cast<T>(std::max<std::int64_t>(0, N - attrs_as<VarAttrs>(k.op, k.attrs).correction));
      for (std::int64_t i = 0; i < n_out; ++i) {
        out[i] /= denom;
        if constexpr (K == Red::std) out[i] = std::sqrt(out[i]);
      }
    }
  }
}

template <Red K>
void reduce_kernel(const KernelArgs& k) {
  const AnyTensor& x = k.in[0];
  if (k.out[0].numel() == 0) return;
  if (is_half_float(x.dtype())) return run_upcast_f32(k, &reduce_kernel<K>);  // summed in float32
  std::uint32_t mask = 0;
  if constexpr (K == Red::argmax || K == Red::argmin)
    mask = arg_mask(k.op.name, attrs_as<ArgReduceAttrs>(k.op, k.attrs), x.dim());
  else
    mask = reduce_mask(k.op.name, attrs_as<reduce_attrs_t<K>>(k.op, k.attrs).axes, x.dim());
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (red_supports_v<K, T>) run_reduce<K, T>(k, mask);
    else MS_THROW(DTypeError, "{}: no CPU kernel for dtype {}", k.op.name, x.dtype());
  });
}

inline constexpr DTypeSet kReduceTypes = kNumericTypes;

template <Red K>
OpDef make_reduce_op(std::string name, std::string doc) {
  constexpr bool arg = K == Red::argmax || K == Red::argmin;
  constexpr bool float_only = K == Red::mean || K == Red::var || K == Red::std;
  OpDef d;
  d.name = std::move(name);
  d.doc = std::move(doc);
  d.category = Category::reduction;
  d.num_inputs = 1;
  d.attr_names = arg ? std::vector<std::string>{"axis", "keepdim"}
                     : ((K == Red::var || K == Red::std) ? std::vector<std::string>{"axes", "keepdim", "correction"}
                                                          : std::vector<std::string>{"axes", "keepdim"});
  if constexpr (arg) d.attr_schema = &attr_schema<ArgReduceAttrs>("ArgReduceAttrs");
  else if constexpr (K == Red::var || K == Red::std) d.attr_schema = &attr_schema<VarAttrs>("VarAttrs");
  else d.attr_schema = &attr_schema<ReduceAttrs>("ReduceAttrs");
  if constexpr (arg) d.infer = &infer_arg;
  else d.infer = &infer_reduce<K == Red::max || K == Red::min, reduce_attrs_t<K>>;
  d.kernel = &reduce_kernel<K>;
  d.cost = &reduce_cost<(K == Red::var || K == Red::std) ? 3 : 1>;
  d.cpu_dtypes = (float_only ? kFloatTypes : kReduceTypes) | DTypeSet{DType::f16, DType::bf16};
  if (arg) d.nondiff_reason = "integer output";
  return d;
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

MS_REGISTRATION(const OpDef& sum_op, registry().add(detail::make_reduce_op<detail::Red::sum>(
    "sum", "sum over axes (all when empty); pairwise for floats, wraps for integers")));
MS_REGISTRATION(const OpDef& prod_op, registry().add(detail::make_reduce_op<detail::Red::prod>("prod", "product over axes")));
MS_REGISTRATION(const OpDef& mean_op, registry().add(detail::make_reduce_op<detail::Red::mean>("mean", "mean over axes")));
MS_REGISTRATION(const OpDef& max_op, registry().add(
    detail::make_reduce_op<detail::Red::max>("max", "maximum over axes (NaN propagates)")));
MS_REGISTRATION(const OpDef& min_op, registry().add(
    detail::make_reduce_op<detail::Red::min>("min", "minimum over axes (NaN propagates)")));
MS_REGISTRATION(const OpDef& var_op, registry().add(
    detail::make_reduce_op<detail::Red::var>("var", "variance over axes, N - correction in the denominator")));
MS_REGISTRATION(const OpDef& std_op, registry().add(
    detail::make_reduce_op<detail::Red::std>("std", "standard deviation over axes, N - correction in the denominator")));
MS_REGISTRATION(const OpDef& argmax_op, registry().add(detail::make_reduce_op<detail::Red::argmax>(
    "argmax", "int64 index of the maximum along an axis (flattened when absent); NaN is the maximum")));
MS_REGISTRATION(const OpDef& argmin_op, registry().add(detail::make_reduce_op<detail::Red::argmin>(
    "argmin", "int64 index of the minimum along an axis (flattened when absent); NaN is the minimum")));

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
MS_IMPL AnyTensor sum(const AnyTensor& x, const IntList& axes, bool keepdim) {
  return call1(sum_op, {x}, detail::reduce_attrs(axes, keepdim));
}
MS_IMPL AnyTensor prod(const AnyTensor& x, const IntList& axes, bool keepdim) {
  return call1(prod_op, {x}, detail::reduce_attrs(axes, keepdim));
}
MS_IMPL AnyTensor mean(const AnyTensor& x, const IntList& axes, bool keepdim) {
  return call1(mean_op, {x}, detail::reduce_attrs(axes, keepdim));
}
MS_IMPL AnyTensor max(const AnyTensor& x, const IntList& axes, bool keepdim) {
  return call1(max_op, {x}, detail::reduce_attrs(axes, keepdim));
}
MS_IMPL AnyTensor min(const AnyTensor& x, const IntList& axes, bool keepdim) {
  return call1(min_op, {x}, detail::reduce_attrs(axes, keepdim));
}
MS_IMPL AnyTensor var(const AnyTensor& x, const IntList& axes, bool keepdim, std::int64_t correction) {
  return call1(var_op, {x}, to_attrs(VarAttrs{{axes, keepdim}, correction}));
}
MS_IMPL AnyTensor std(const AnyTensor& x, const IntList& axes, bool keepdim, std::int64_t correction) {
  return call1(std_op, {x}, to_attrs(VarAttrs{{axes, keepdim}, correction}));
}
MS_IMPL AnyTensor argmax(const AnyTensor& x, std::optional<std::int64_t> axis, bool keepdim) {
  return call1(argmax_op, {x}, detail::arg_attrs(axis, keepdim));
}
MS_IMPL AnyTensor argmin(const AnyTensor& x, std::optional<std::int64_t> axis, bool keepdim) {
  return call1(argmin_op, {x}, detail::arg_attrs(axis, keepdim));
}
#endif  // MS_IMPL_BODIES

}  // namespace ms::ops
