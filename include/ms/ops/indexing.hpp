#pragma once
// Indexing ops that decide where each output element comes from: tile (the whole tensor
// repeated), cumsum (running sums along a dim), topk (the k largest or smallest along a dim,
// with their indices) and triu/tril (the upper or lower triangle of the last two dims).
// Each is one registered op with its CPU kernel; the gradients are rows of autograd/rules.hpp.
// Padding is in ops/pad.hpp; gather/scatter-style ops in movement.hpp and scatter.hpp.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "movement.hpp"

namespace ms::ops {

// ==== declarations ===========================================================================

/// NumPy/ONNX Tile: x repeated reps[d] times along each dim d. A reps shorter than x's rank
/// is padded with 1s in front; a longer one gives x leading dims of size 1 (numpy.tile).
inline AnyTensor tile(const AnyTensor& x, const IntList& reps);
/// Running sums along dim (ONNX CumSum): `exclusive` leaves each element out of its own sum,
/// `reverse` sums from the end.
inline AnyTensor cumsum(const AnyTensor& x, std::int64_t dim, bool exclusive = false, bool reverse = false);
/// The k largest (largest = false: smallest) elements along dim and their int64 indices.
/// Equal values: the lower index first (ONNX TopK); NaN counts as larger than any number.
/// sorted = false gives the same k elements in the order of their indices.
inline std::vector<AnyTensor> topk(const AnyTensor& x, std::int64_t k, std::int64_t dim = -1, bool largest = true,
                                   bool sorted = true);
/// The upper triangle of the last two dims: elements with column - row >= k, zeros elsewhere.
inline AnyTensor triu(const AnyTensor& x, std::int64_t k = 0);
/// The lower triangle of the last two dims: elements with column - row <= k, zeros elsewhere.
inline AnyTensor tril(const AnyTensor& x, std::int64_t k = 0);

// ==== implementation =========================================================================

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

/// x's shape and strides with leading dims of size 1 (stride 0) up to rank r.
inline void left_pad(const AnyTensor& x, int r, Shape& shape, Shape& strides) {
  shape = Shape::filled(r, 1);
  strides = Shape::filled(r, 0);
  const int lead = r - x.dim();
  for (int d = 0; d < x.dim(); ++d) {
    shape[lead + d] = x.shape()[d];
    strides[lead + d] = x.strides()[d];
  }
}

inline Shape tile_shape(const OpDef& op, const TensorMeta& x, const IntList& reps) {
  for (auto v : reps)
    MS_CHECK(v >= 0, ValueError, "{}: reps {} hold a negative count (input {} {})", op.name, ints_str(reps),
             shape_str(x.shape), x.dtype);
  const int r = std::max(x.shape.rank(), static_cast<int>(reps.size()));
  MS_CHECK(r <= kMaxDims, ShapeError, "{}: reps {} for input {} give {} dims; at most {} are supported", op.name,
           ints_str(reps), shape_str(x.shape), r, kMaxDims);
  Shape out;
  for (int d = 0; d < r; ++d) {
    const int xd = d - (r - x.shape.rank()), rd = d - (r - static_cast<int>(reps.size()));
    out.push_back((xd >= 0 ? x.shape[xd] : 1) * (rd >= 0 ? reps[static_cast<std::size_t>(rd)] : 1));
  }
  return out;
}

/// The output rows (all dims but the last) and, for a row, the offset of its source row in x:
/// each row index is wrapped (i % n) per dim.
inline void tile_kernel(const KernelArgs& k) {
  const AnyTensor &x = k.in[0], &y = k.out[0];
  if (y.numel() == 0) return;
  const auto e = static_cast<std::ptrdiff_t>(dtype_size(x.dtype()));
  const char* xb = static_cast<const char*>(x.raw_data());
  char* yb = static_cast<char*>(y.raw_data());
  const int r = y.dim();
  if (r == 0) {
    std::memcpy(yb, xb, static_cast<std::size_t>(e));
    return;
  }
  Shape xs, xst;
  left_pad(x, r, xs, xst);
  const Shape& ys = y.shape();
  const std::int64_t inner = ys[r - 1], n_last = xs[r - 1], s_last = xst[r - 1];
  const std::int64_t rows = y.numel() / inner;
  parallel_for(rows, std::max<std::int64_t>(1, kParallelGrain / inner), [&](std::int64_t rb, std::int64_t re) {
    for (std::int64_t row = rb; row < re; ++row) {
      std::int64_t src = 0, rem = row;
      for (int d = r - 2; d >= 0; --d) {
        const std::int64_t i = rem % ys[d];
        rem /= ys[d];
        src += (i % xs[d]) * xst[d];
      }
      char* o = yb + row * inner * e;
      const char* s = xb + src * e;
      if (s_last == 1) {  // a contiguous source row: whole copies of it
        const auto bytes = static_cast<std::size_t>(n_last * e);
        for (std::int64_t j = 0; j < inner; j += n_last) std::memcpy(o + j * e, s, bytes);
      } else {
        for (std::int64_t j = 0; j < inner; ++j)
          std::memcpy(o + j * e, s + (j % n_last) * s_last * e, static_cast<std::size_t>(e));
      }
    }
  }, 1);
}

/// Extents around `axis` of a contiguous tensor: outer * n * inner elements.
struct AxisSplit {
  std::int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit split_at(const Shape& s, int axis) {
  AxisSplit a;
  for (int d = 0; d < axis; ++d) a.outer *= s[d];
  a.n = s[axis];
  for (int d = axis + 1; d < s.rank(); ++d) a.inner *= s[d];
  return a;
}

inline void cumsum_kernel(const KernelArgs& k) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const AnyTensor& y = k.out[0];
  if (y.numel() == 0) return;
  if (x.dim() == 0) {  // a scalar is its own running sum (0 when exclusive)
    std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
    if (k.attrs.b("exclusive")) std::memset(y.raw_data(), 0, y.nbytes());
    return;
  }
  const int axis = normalize_axis(k.attrs.i("axis"), x.dim(), k.op.name);
  const bool excl = k.attrs.b("exclusive"), rev = k.attrs.b("reverse");
  const AxisSplit a = split_at(x.shape(), axis);
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* src = static_cast<const T*>(x.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      // Position t of the scan is element pos(t) along the axis; each output row is the
      // previous one plus one input row, so the inner loop runs over contiguous memory.
      auto pos = [&](std::int64_t t) { return rev ? a.n - 1 - t : t; };
      parallel_for(a.outer, std::max<std::int64_t>(1, kParallelGrain / (a.n * a.inner)), [&](std::int64_t ob, std::int64_t oe) {
        for (std::int64_t o = ob; o < oe; ++o) {
          const T* xs = src + o * a.n * a.inner;
          T* ys = dst + o * a.n * a.inner;
          T* first = ys + pos(0) * a.inner;
          for (std::int64_t i = 0; i < a.inner; ++i) first[i] = excl ? T(0) : xs[pos(0) * a.inner + i];
          for (std::int64_t t = 1; t < a.n; ++t) {
            const T* prev = ys + pos(t - 1) * a.inner;
            const T* add = xs + (excl ? pos(t - 1) : pos(t)) * a.inner;
            T* cur = ys + pos(t) * a.inner;
            for (std::int64_t i = 0; i < a.inner; ++i) cur[i] = simd::add(prev[i], add[i]);
          }
        }
      }, 1);
    }
  });
}

/// True when a comes before b in the top-k order (value, then the lower index).
template <class T>
inline bool topk_before(T a, std::int64_t ia, T b, std::int64_t ib, bool largest) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);  // NaN is the largest value
    if (na || nb) {
      if (na && nb) return ia < ib;
      return largest ? na : nb;
    }
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

inline void topk_kernel(const KernelArgs& k) {
  const AnyTensor x = contiguous_raw(k.in[0]);
  const AnyTensor &vals = k.out[0], &idx = k.out[1];
  const int axis = normalize_axis(k.attrs.i("axis", -1), x.dim(), k.op.name);
  const std::int64_t kk = k.attrs.i("k");
  const bool largest = k.attrs.b("largest", true), sorted = k.attrs.b("sorted", true);
  const AxisSplit a = split_at(x.shape(), axis);
  if (kk == 0 || a.outer * a.inner == 0) return;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* src = static_cast<const T*>(x.raw_data());
      T* vo = static_cast<T*>(vals.raw_data());
      auto* io = static_cast<std::int64_t*>(idx.raw_data());
      const std::int64_t lines = a.outer * a.inner;
      parallel_for(lines, std::max<std::int64_t>(1, kParallelGrain / a.n), [&](std::int64_t lb, std::int64_t le) {
        std::vector<std::int64_t> order(static_cast<std::size_t>(a.n));
        for (std::int64_t line = lb; line < le; ++line) {
          const std::int64_t o = line / a.inner, i = line % a.inner;
          const T* xs = src + o * a.n * a.inner + i;
          std::iota(order.begin(), order.end(), std::int64_t{0});
          auto before = [&](std::int64_t p, std::int64_t q) {
            return topk_before(xs[p * a.inner], p, xs[q * a.inner], q, largest);
          };
          std::partial_sort(order.begin(), order.begin() + kk, order.end(), before);
          if (!sorted) std::sort(order.begin(), order.begin() + kk);
          for (std::int64_t j = 0; j < kk; ++j) {
            const std::int64_t at = (o * kk + j) * a.inner + i;
            vo[at] = xs[order[static_cast<std::size_t>(j)] * a.inner];
            io[at] = order[static_cast<std::size_t>(j)];
          }
        }
      }, 1);
    }
  });
}

/// triu (Upper) or tril: a copy of x with the other triangle of each matrix zeroed.
template <bool Upper>
void triangle_kernel(const KernelArgs& k) {
  const AnyTensor &x = k.in[0], &y = k.out[0];
  if (y.numel() == 0) return;
  copy_into(x, static_cast<char*>(y.raw_data()), y.strides());
  const std::int64_t diag = k.attrs.i("k", 0);
  const int r = y.dim();
  const std::int64_t n = y.shape()[r - 2], m = y.shape()[r - 1];
  const auto e = static_cast<std::int64_t>(dtype_size(y.dtype()));
  char* yb = static_cast<char*>(y.raw_data());
  const std::int64_t rows = y.numel() / m;  // every row of every matrix
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t i = row % n;
    // Columns zeroed in row i: [0, i + k) for triu, [i + k + 1, m) for tril (all-zero bytes are 0 in every dtype).
    const std::int64_t b = Upper ? 0 : std::clamp<std::int64_t>(i + diag + 1, 0, m);
    const std::int64_t end = Upper ? std::clamp<std::int64_t>(i + diag, 0, m) : m;
    if (end > b) std::memset(yb + (row * m + b) * e, 0, static_cast<std::size_t>((end - b) * e));
  }
}

inline void infer_triangle(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  MS_CHECK(in[0].shape.rank() >= 2, ShapeError, "{}: input must have at least 2 dims (a batch of matrices), got {} {}",
           op.name, shape_str(in[0].shape), in[0].dtype);
  out.push_back(in[0]);
}

inline OpDef triangle_def(const char* name, const char* doc, KernelFn kernel) {
  OpDef d;
  d.name = name;
  d.category = Category::movement;
  d.doc = doc;
  d.attr_names = {"k"};
  d.cpu_dtypes = kStorageTypes;
  d.cost = &movement_cost;
  d.infer = &infer_triangle;
  d.kernel = kernel;
  return d;
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// tile(x; reps).
MS_REGISTRATION(const OpDef& tile_op, registry().add([] {
  OpDef d;
  d.name = "tile";
  d.category = Category::movement;
  d.doc = "x repeated reps[d] times along each dim d (numpy.tile, ONNX Tile)";
  d.attr_names = {"reps"};
  d.cpu_dtypes = kStorageTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    out.push_back({in[0].dtype, detail::tile_shape(op, in[0], a.ints("reps"))});
  };
  d.kernel = &detail::tile_kernel;
  return d;
}()));

// cumsum(x; axis, exclusive, reverse).
MS_REGISTRATION(const OpDef& cumsum_op, registry().add([] {
  OpDef d;
  d.name = "cumsum";
  d.category = Category::movement;
  d.doc = "running sums along an axis; exclusive leaves each element out, reverse sums from the end (ONNX CumSum)";
  d.attr_names = {"axis", "exclusive", "reverse"};
  d.cpu_dtypes = kNumericTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    if (in[0].shape.rank() > 0) normalize_axis(a.i("axis"), in[0].shape.rank(), op.name);
    else MS_CHECK(a.i("axis") == 0 || a.i("axis") == -1, IndexError, "{}: axis {} is out of range for a tensor of rank 0",
                  op.name, a.i("axis"));
    out.push_back(in[0]);
  };
  d.cost = [](const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
    Cost c = detail::movement_cost(op, in, out, a);
    c.flops = static_cast<double>(numel(in[0].shape));
    return c;
  };
  d.kernel = &detail::cumsum_kernel;
  return d;
}()));

// topk(x; k, axis, largest, sorted) -> (values, int64 indices).
MS_REGISTRATION(const OpDef& topk_op, registry().add([] {
  OpDef d;
  d.name = "topk";
  d.category = Category::movement;
  d.doc = "the k largest (or smallest) elements along an axis and their int64 indices; ties: lower index first";
  d.attr_names = {"k", "axis", "largest", "sorted"};
  d.cpu_dtypes = kNumericTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const Shape& s = in[0].shape;
    MS_CHECK(s.rank() > 0, ShapeError, "{}: input must have at least 1 dim, got {} {}", op.name, shape_str(s),
             in[0].dtype);
    const int ax = normalize_axis(a.i("axis", -1), s.rank(), op.name);
    const std::int64_t k = a.i("k");
    MS_CHECK(k >= 0 && k <= s[ax], ValueError, "{}: k={} is out of range for axis {} of size {} (input {} {})",
             op.name, k, ax, s[ax], shape_str(s), in[0].dtype);
    Shape o = s;
    o[ax] = k;
    out.push_back({in[0].dtype, o});
    out.push_back({DType::i64, o});
  };
  d.kernel = &detail::topk_kernel;
  return d;
}()));

MS_REGISTRATION(const OpDef& triu_op, registry().add(detail::triangle_def(
    "triu", "upper triangle of the last two dims: elements with column - row >= k, zeros elsewhere",
    &detail::triangle_kernel<true>)));
MS_REGISTRATION(const OpDef& tril_op, registry().add(detail::triangle_def(
    "tril", "lower triangle of the last two dims: elements with column - row <= k, zeros elsewhere",
    &detail::triangle_kernel<false>)));

// ---- untyped API ----------------------------------------------------------------------------

inline AnyTensor tile(const AnyTensor& x, const IntList& reps) { return call1(tile_op, {x}, Attrs{{"reps", reps}}); }
inline AnyTensor cumsum(const AnyTensor& x, std::int64_t dim, bool exclusive, bool reverse) {
  return call1(cumsum_op, {x}, Attrs{{"axis", dim}, {"exclusive", exclusive}, {"reverse", reverse}});
}
inline std::vector<AnyTensor> topk(const AnyTensor& x, std::int64_t k, std::int64_t dim, bool largest, bool sorted) {
  const AnyTensor in[1] = {x};
  return call(topk_op, in, Attrs{{"k", k}, {"axis", dim}, {"largest", largest}, {"sorted", sorted}});
}
inline AnyTensor triu(const AnyTensor& x, std::int64_t k) { return call1(triu_op, {x}, Attrs{{"k", k}}); }
inline AnyTensor tril(const AnyTensor& x, std::int64_t k) { return call1(tril_op, {x}, Attrs{{"k", k}}); }

}  // namespace ms::ops

// ---- typed API ------------------------------------------------------------------------------

namespace ms {

/// numpy.tile / torch.tile: x repeated reps[d] times along each dim d.
template <Element T>
Tensor<T> tile(const Tensor<T>& x, const ops::IntList& reps) { return ops::tile(x, reps); }
/// torch.cumsum(x, dim) with ONNX CumSum's exclusive and reverse.
template <Element T>
Tensor<T> cumsum(const Tensor<T>& x, std::int64_t dim, bool exclusive = false, bool reverse = false) {
  return ops::cumsum(x, dim, exclusive, reverse);
}
/// torch.topk: the k largest (or smallest) values along dim and their indices; ties: lower index first.
template <Element T>
std::pair<Tensor<T>, Tensor<std::int64_t>> topk(const Tensor<T>& x, std::int64_t k, std::int64_t dim = -1,
                                                 bool largest = true, bool sorted = true) {
  auto r = ops::topk(x, k, dim, largest, sorted);
  return {Tensor<T>(r[0]), Tensor<std::int64_t>(r[1])};
}
/// torch.triu: the upper triangle (column - row >= k) of the last two dims.
template <Element T>
Tensor<T> triu(const Tensor<T>& x, std::int64_t k = 0) { return ops::triu(x, k); }
/// torch.tril: the lower triangle (column - row <= k) of the last two dims.
template <Element T>
Tensor<T> tril(const Tensor<T>& x, std::int64_t k = 0) { return ops::tril(x, k); }

}  // namespace ms
