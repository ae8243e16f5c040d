#pragma once
// Movement ops: copy elements into a new layout without arithmetic — concat, stack,
// split (multi-output), gather, index_select, one_hot — plus the strided-copy
// primitive their kernels share (also used by copy_ in ops/inplace.hpp).
// Kernels only move bytes (element-size copies), so every storage dtype works,
// including float16/bfloat16. Must not hold views (ops/views.hpp) or math.

#include <cstring>
#include <vector>

#include "views.hpp"

namespace ms::ops {

// ==== declarations ===========================================================================

/// Joins tensors along an existing axis; all inputs share dtype and every other extent.
inline AnyTensor concat(std::span<const AnyTensor> xs, std::int64_t axis = 0);
/// Joins same-shaped tensors along a new axis inserted at `axis`.
inline AnyTensor stack(std::span<const AnyTensor> xs, std::int64_t axis = 0);
/// Brace-list forms: concat({a, b}, 1), stack({a, b}).
inline AnyTensor concat(std::initializer_list<AnyTensor> xs, std::int64_t axis = 0);
inline AnyTensor stack(std::initializer_list<AnyTensor> xs, std::int64_t axis = 0);
/// Cuts x along `axis` into pieces of the given sizes (which must add up to the extent); copies.
inline std::vector<AnyTensor> split(const AnyTensor& x, const IntList& sizes, std::int64_t axis = 0);
/// Cuts x along `axis` into `parts` pieces of equal size (the extent must divide evenly); copies.
inline std::vector<AnyTensor> split_equal(const AnyTensor& x, std::int64_t parts, std::int64_t axis = 0);
/// torch.gather: out[i][j] = x[index[i][j]][j] for axis 0 (int32/int64 index, same rank as x).
inline AnyTensor gather(const AnyTensor& x, std::int64_t axis, const AnyTensor& index);
/// Picks the slices x[..., index[k], ...] along `axis` (1-D int32/int64 index).
inline AnyTensor index_select(const AnyTensor& x, std::int64_t axis, const AnyTensor& index);
/// One-hot encoding: shape index.shape + (num_classes,), 1 at each index value, 0 elsewhere.
inline AnyTensor one_hot(const AnyTensor& index, std::int64_t num_classes, DType dtype = DType::i64);

// ==== implementation =========================================================================

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

/// Copies `shape` elements of `esize` bytes from src (strides ss) to dst (strides ds); strides in
/// elements, any sign, 0 allowed in src (broadcast). Dims that are contiguous for both sides are
/// merged so a contiguous pair becomes one memcpy per row. Never throws; safe in parallel regions
/// only when src and dst do not overlap.
inline void strided_copy(const Shape& shape, const char* src, const Shape& ss, char* dst, const Shape& ds,
                         std::size_t esize) {
  const std::int64_t n = numel(shape);
  if (n <= 0) return;
  // Collapse: drop size-1 dims, merge a dim into the previous one when both layouts allow.
  std::int64_t cshp[kMaxDims], cs[kMaxDims], cd[kMaxDims];
  int cr = 0;
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) continue;
    if (cr > 0 && cs[cr - 1] == ss[d] * shape[d] && cd[cr - 1] == ds[d] * shape[d]) {
      cshp[cr - 1] *= shape[d];
      cs[cr - 1] = ss[d];
      cd[cr - 1] = ds[d];
    } else {
      cshp[cr] = shape[d];
      cs[cr] = ss[d];
      cd[cr] = ds[d];
      ++cr;
    }
  }
  if (cr == 0) {  // one element
    std::memcpy(dst, src, esize);
    return;
  }
  const std::int64_t inner = cshp[cr - 1], is = cs[cr - 1], id = cd[cr - 1];
  const std::int64_t rows = n / inner;
  const auto e = static_cast<std::ptrdiff_t>(esize);
  if (cr == 1 && is == 1 && id == 1) {  // one contiguous run: split it between the threads
    parallel_for(n, kParallelGrain, [&](std::int64_t lo, std::int64_t hi) {
      std::memcpy(dst + lo * e, src + lo * e, static_cast<std::size_t>(hi - lo) * esize);
    });
    return;
  }
  auto copy_rows = [&](std::int64_t rb, std::int64_t re) {
    for (std::int64_t row = rb; row < re; ++row) {
      std::int64_t so = 0, dof = 0, rem = row;
      for (int d = cr - 2; d >= 0; --d) {
        std::int64_t i = rem % cshp[d];
        rem /= cshp[d];
        so += i * cs[d];
        dof += i * cd[d];
      }
      const char* s = src + so * e;
      char* o = dst + dof * e;
      if (is == 1 && id == 1) {
        std::memcpy(o, s, static_cast<std::size_t>(inner) * esize);
        continue;
      }
      // Fixed-size memcpy per element compiles to one load/store of the right width.
      switch (esize) {
        case 1: for (std::int64_t i = 0; i < inner; ++i) std::memcpy(o + i * id, s + i * is, 1); break;
        case 2: for (std::int64_t i = 0; i < inner; ++i) std::memcpy(o + i * id * 2, s + i * is * 2, 2); break;
        case 4: for (std::int64_t i = 0; i < inner; ++i) std::memcpy(o + i * id * 4, s + i * is * 4, 4); break;
        default: for (std::int64_t i = 0; i < inner; ++i) std::memcpy(o + i * id * e, s + i * is * e, esize); break;
      }
    }
  };
  parallel_for(rows, std::max<std::int64_t>(1, kParallelGrain / inner), copy_rows, 1);
}

/// Copies tensor `src` (any layout) into `dst_base` laid out with `dst_strides` (elements).
inline void copy_into(const AnyTensor& src, char* dst_base, const Shape& dst_strides) {
  strided_copy(src.shape(), static_cast<const char*>(src.raw_data()), src.strides(), dst_base, dst_strides,
               dtype_size(src.dtype()));
}

/// Movement ops do no arithmetic: their cost is the bytes they read and write.
inline Cost movement_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                          const Attrs&) {
  Cost c;
  for (auto& m : in) c.bytes += static_cast<double>(numel(m.shape)) * static_cast<double>(dtype_size(m.dtype));
  for (auto& m : out) c.bytes += static_cast<double>(numel(m.shape)) * static_cast<double>(dtype_size(m.dtype));
  return c;
}

inline constexpr DTypeSet kIndexTypes{DType::i32, DType::i64};

inline void check_index_dtype(std::string_view op, const TensorMeta& m) {
  MS_CHECK(kIndexTypes.contains(m.dtype), DTypeError, "{}: index must be int64 or int32, got {} (shape {})", op,
           m.dtype, shape_str(m.shape));
}

/// Reads index element `off` (in elements) of an int32/int64 buffer.
inline std::int64_t read_index(const void* p, DType d, std::int64_t off) {
  return d == DType::i64 ? static_cast<const std::int64_t*>(p)[off]
                         : static_cast<std::int64_t>(static_cast<const std::int32_t*>(p)[off]);
}

/// Checks every element of an index tensor against [0, n) before any parallel work, so the
/// kernel's hot loop needs no checks and never throws inside a parallel region.
inline void check_index_values(std::string_view op, const AnyTensor& index, int axis, std::int64_t n) {
  const void* p = index.raw_data();
  const DType d = index.dtype();
  std::int64_t bad = 0;
  bool found = false;
  ms::detail::for_each_offset(index.shape(), index.strides(), [&](std::int64_t off) {
    std::int64_t v = read_index(p, d, off);
    if (!found && (v < 0 || v >= n)) { bad = v; found = true; }
  });
  MS_CHECK(!found, IndexError, "{}: index {} is out of range for axis {} with size {}", op, bad, axis, n);
}

/// out[i] = x[i with i[axis] replaced by idx(i)], where idx(i) reads the index buffer at
/// sum_d i[d] * ist[d] (ist spans the output's shape: gather uses the index's own strides,
/// index_select a 1-D index broadcast with stride 0 on every other axis). Indices are checked.
inline void gather_kernel_impl(const AnyTensor& x, int axis, const void* idx, DType idx_dtype, Shape ist,
                               const AnyTensor& out) {
  Shape shp = out.shape(), xst = x.strides();
  if (numel(shp) == 0) return;
  if (shp.rank() == 0) {  // 0-d gather: treat as one element along a size-1 axis
    shp = Shape{1};
    xst = Shape{0};
    ist = Shape{0};
  }
  const int r = shp.rank();
  const std::int64_t inner = shp[r - 1], rows = numel(shp) / inner;
  const auto e = static_cast<std::ptrdiff_t>(dtype_size(x.dtype()));
  const char* xb = static_cast<const char*>(x.raw_data());
  char* ob = static_cast<char*>(out.raw_data());
  const std::int64_t ax_stride = xst[axis];
  const std::int64_t last_x = axis == r - 1 ? 0 : xst[r - 1];  // the last dim's own step in x
  const std::int64_t last_i = ist[r - 1];
  parallel_for(rows, std::max<std::int64_t>(1, kParallelGrain / inner), [&](std::int64_t rb, std::int64_t re) {
    for (std::int64_t row = rb; row < re; ++row) {
      std::int64_t xo = 0, io = 0, rem = row;
      for (int d = r - 2; d >= 0; --d) {
        std::int64_t i = rem % shp[d];
        rem /= shp[d];
        if (d != axis) xo += i * xst[d];
        io += i * ist[d];
      }
      char* o = ob + row * inner * e;
      for (std::int64_t j = 0; j < inner; ++j) {
        std::int64_t v = read_index(idx, idx_dtype, io + j * last_i);
        std::memcpy(o + j * e, xb + (xo + j * last_x + v * ax_stride) * e, static_cast<std::size_t>(e));
      }
    }
  }, 1);
}

inline int concat_axis(const OpDef& op, std::span<const TensorMeta> in, const Attrs& a) {
  MS_CHECK(!in.empty(), ValueError, "{}: expects at least one tensor", op.name);
  MS_CHECK(in[0].shape.rank() > 0, ShapeError, "{}: zero-dimensional tensors cannot be joined (input 0 has shape ())",
           op.name);
  return normalize_axis(a.i("axis", 0), in[0].shape.rank(), op.name);
}

inline void check_same_dtypes(const OpDef& op, std::span<const TensorMeta> in) {
  for (std::size_t i = 1; i < in.size(); ++i)
    MS_CHECK(in[i].dtype == in[0].dtype, DTypeError,
             "{}: dtype mismatch: input 0 is {} but input {} is {}; convert with ms::cast", op.name, in[0].dtype, i,
             in[i].dtype);
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// concat: attr "axis"; variadic inputs.
MS_REGISTRATION(const OpDef& concat_op, registry().add([] {
  OpDef d;
  d.name = "concat";
  d.category = Category::movement;
  d.num_inputs = -1;
  d.doc = "joins tensors along an existing axis";
  d.attr_names = {"axis"};
  d.cpu_dtypes = kStorageTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    int ax = detail::concat_axis(op, in, a);
    detail::check_same_dtypes(op, in);
    Shape s = in[0].shape;
    for (std::size_t i = 1; i < in.size(); ++i) {
      const Shape& t = in[i].shape;
      bool ok = t.rank() == s.rank();
      for (int d2 = 0; ok && d2 < s.rank(); ++d2) ok = d2 == ax || t[d2] == s[d2];
      MS_CHECK(ok, ShapeError, "{}: tensors must match except along axis {}: {} vs {}", op.name, ax,
               shape_str(in[0].shape), shape_str(t));
      s[ax] += t[ax];
    }
    out.push_back({in[0].dtype, s});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    const int ax = normalize_axis(k.attrs.i("axis", 0), y.dim(), "concat");
    const auto e = static_cast<std::int64_t>(dtype_size(y.dtype()));
    char* base = static_cast<char*>(y.raw_data());
    std::int64_t at = 0;  // running position along the axis
    for (const AnyTensor& x : k.in) {
      detail::copy_into(x, base + at * y.strides()[ax] * e, y.strides());
      at += x.shape()[ax];
    }
  };
  return d;
}()));

// stack: attr "axis" (in the output's rank); variadic inputs of one shape.
MS_REGISTRATION(const OpDef& stack_op, registry().add([] {
  OpDef d;
  d.name = "stack";
  d.category = Category::movement;
  d.num_inputs = -1;
  d.doc = "joins same-shaped tensors along a new axis";
  d.attr_names = {"axis"};
  d.cpu_dtypes = kStorageTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    MS_CHECK(!in.empty(), ValueError, "{}: expects at least one tensor", op.name);
    int ax = normalize_axis(a.i("axis", 0), in[0].shape.rank() + 1, op.name);
    detail::check_same_dtypes(op, in);
    for (std::size_t i = 1; i < in.size(); ++i)
      MS_CHECK(in[i].shape == in[0].shape, ShapeError, "{}: all tensors must have the same shape: {} vs {} (input {})",
               op.name, shape_str(in[0].shape), shape_str(in[i].shape), i);
    Shape s = in[0].shape;
    s.insert(ax, static_cast<std::int64_t>(in.size()));
    out.push_back({in[0].dtype, s});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& y = k.out[0];
    const int ax = normalize_axis(k.attrs.i("axis", 0), y.dim(), "stack");
    const auto e = static_cast<std::int64_t>(dtype_size(y.dtype()));
    Shape st = y.strides();  // each input fills the output with the new axis fixed
    st.erase(ax);
    char* base = static_cast<char*>(y.raw_data());
    for (std::size_t i = 0; i < k.in.size(); ++i)
      detail::copy_into(k.in[i], base + static_cast<std::int64_t>(i) * y.strides()[ax] * e, st);
  };
  return d;
}()));

// split: attrs "sizes" (extents of the pieces along the axis), "axis". One output per piece.
MS_REGISTRATION(const OpDef& split_op, registry().add([] {
  OpDef d;
  d.name = "split";
  d.category = Category::movement;
  d.doc = "cuts a tensor along an axis into pieces of the given sizes (copies; one output per piece)";
  d.attr_names = {"sizes", "axis"};
  d.cpu_dtypes = kStorageTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const Shape& s = in[0].shape;
    MS_CHECK(s.rank() > 0, ShapeError, "{}: cannot split a zero-dimensional tensor", op.name);
    int ax = normalize_axis(a.i("axis", 0), s.rank(), op.name);
    const IntList& sizes = a.ints("sizes");
    MS_CHECK(!sizes.empty(), ValueError, "{}: sizes must not be empty", op.name);
    std::int64_t total = 0;
    for (auto v : sizes) {
      MS_CHECK(v >= 0, ValueError, "{}: sizes {} contain a negative size", op.name, detail::ints_str(sizes));
      total += v;
    }
    MS_CHECK(total == s[ax], ShapeError, "{}: sizes {} add up to {} but axis {} of shape {} has size {}", op.name,
             detail::ints_str(sizes), total, ax, shape_str(s), s[ax]);
    for (auto v : sizes) {
      Shape o = s;
      o[ax] = v;
      out.push_back({in[0].dtype, o});
    }
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& x = k.in[0];
    const int ax = normalize_axis(k.attrs.i("axis", 0), x.dim(), "split");
    const auto e = static_cast<std::int64_t>(dtype_size(x.dtype()));
    const char* base = static_cast<const char*>(x.raw_data());
    std::int64_t at = 0;
    for (const AnyTensor& y : k.out) {
      detail::strided_copy(y.shape(), base + at * x.strides()[ax] * e, x.strides(), static_cast<char*>(y.raw_data()),
                           y.strides(), static_cast<std::size_t>(e));
      at += y.shape()[ax];
    }
  };
  return d;
}()));

// gather: attr "axis"; inputs x and index (int32/int64, same rank as x).
MS_REGISTRATION(const OpDef& gather_op, registry().add([] {
  OpDef d;
  d.name = "gather";
  d.category = Category::movement;
  d.num_inputs = 2;
  d.doc = "out[i][j] = x[index[i][j]][j] along an axis (torch.gather)";
  d.attr_names = {"axis"};
  d.cpu_dtypes = kStorageTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const Shape &xs = in[0].shape, &is = in[1].shape;
    int ax = normalize_axis(a.i("axis", 0), xs.rank(), op.name);
    detail::check_index_dtype(op.name, in[1]);
    MS_CHECK(is.rank() == xs.rank(), ShapeError, "{}: index {} must have the same rank as the input {}", op.name,
             shape_str(is), shape_str(xs));
    for (int i = 0; i < xs.rank(); ++i)
      MS_CHECK(i == ax || is[i] <= xs[i], ShapeError,
               "{}: index {} is larger than the input {} on axis {} (only axis {} may be larger)", op.name,
               shape_str(is), shape_str(xs), i, ax);
    out.push_back({in[0].dtype, is});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor &x = k.in[0], &index = k.in[1];
    const int ax = normalize_axis(k.attrs.i("axis", 0), x.dim(), "gather");
    detail::check_index_values("gather", index, ax, x.dim() == 0 ? 1 : x.shape()[ax]);
    detail::gather_kernel_impl(x, ax, index.raw_data(), index.dtype(), index.strides(), k.out[0]);
  };
  return d;
}()));

// index_select: attr "axis"; inputs x and a 1-D int32/int64 index.
MS_REGISTRATION(const OpDef& index_select_op, registry().add([] {
  OpDef d;
  d.name = "index_select";
  d.category = Category::movement;
  d.num_inputs = 2;
  d.doc = "picks slices along an axis by a 1-D index";
  d.attr_names = {"axis"};
  d.cpu_dtypes = kStorageTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const Shape &xs = in[0].shape, &is = in[1].shape;
    MS_CHECK(xs.rank() > 0, ShapeError, "{}: cannot select from a zero-dimensional tensor", op.name);
    int ax = normalize_axis(a.i("axis", 0), xs.rank(), op.name);
    detail::check_index_dtype(op.name, in[1]);
    MS_CHECK(is.rank() == 1, ShapeError, "{}: index must be 1-D, got shape {}", op.name, shape_str(is));
    Shape s = xs;
    s[ax] = is[0];
    out.push_back({in[0].dtype, s});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor &x = k.in[0], &index = k.in[1];
    const int ax = normalize_axis(k.attrs.i("axis", 0), x.dim(), "index_select");
    detail::check_index_values("index_select", index, ax, x.shape()[ax]);
    // A 1-D index read at out-position i[axis] only: stride 0 on every other axis.
    Shape ist = Shape::filled(x.dim(), 0);
    ist[ax] = index.strides()[0];
    detail::gather_kernel_impl(x, ax, index.raw_data(), index.dtype(), ist, k.out[0]);
  };
  return d;
}()));

// one_hot: attrs "num_classes", "dtype" (of the output, default int64); input an int32/int64 index.
MS_REGISTRATION(const OpDef& one_hot_op, registry().add([] {
  OpDef d;
  d.name = "one_hot";
  d.category = Category::movement;
  d.doc = "one-hot encoding: index.shape + (num_classes,), 1 at each index value";
  d.attr_names = {"num_classes", "dtype"};
  d.cpu_dtypes = detail::kIndexTypes;
  d.nondiff_reason = "integer index input; the output is piecewise constant";
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    std::int64_t c = a.i("num_classes");
    MS_CHECK(c >= 0, ValueError, "{}: num_classes must be >= 0, got {} (it is not inferred from the data)", op.name,
             c);
    Shape s = in[0].shape;
    MS_CHECK(s.rank() < kMaxDims, ShapeError, "{}: index {} has {} dims; the output would exceed {}", op.name,
             shape_str(s), s.rank(), kMaxDims);
    s.push_back(c);
    out.push_back({a.has("dtype") ? a.dtype("dtype") : DType::i64, s});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& index = k.in[0];
    const AnyTensor& y = k.out[0];
    const std::int64_t c = k.attrs.i("num_classes");
    const void* p = index.raw_data();
    const DType id = index.dtype();
    std::int64_t bad = 0;
    bool found = false;
    ms::detail::for_each_offset(index.shape(), index.strides(), [&](std::int64_t off) {
      std::int64_t v = detail::read_index(p, id, off);
      if (!found && (v < 0 || v >= c)) { bad = v; found = true; }
    });
    MS_CHECK(!found, IndexError, "one_hot: class index {} is out of range for num_classes {}", bad, c);
    std::memset(y.raw_data(), 0, y.nbytes());  // all-zero bytes are 0 in every dtype
    visit_dtype(y.dtype(), [&]<class O>() {
      O* o = static_cast<O*>(y.raw_data());
      const O one = static_cast<O>(1);
      std::int64_t row = 0;
      ms::detail::for_each_offset(index.shape(), index.strides(), [&](std::int64_t off) {
        o[row++ * c + detail::read_index(p, id, off)] = one;
      });
    });
  };
  return d;
}()));

// ---- untyped API ----------------------------------------------------------------------------

inline AnyTensor concat(std::span<const AnyTensor> xs, std::int64_t axis) {
  return call1(concat_op, xs, Attrs{{"axis", axis}});
}
inline AnyTensor stack(std::span<const AnyTensor> xs, std::int64_t axis) {
  return call1(stack_op, xs, Attrs{{"axis", axis}});
}
inline AnyTensor concat(std::initializer_list<AnyTensor> xs, std::int64_t axis) {
  return concat(std::span<const AnyTensor>(xs.begin(), xs.size()), axis);
}
inline AnyTensor stack(std::initializer_list<AnyTensor> xs, std::int64_t axis) {
  return stack(std::span<const AnyTensor>(xs.begin(), xs.size()), axis);
}
inline std::vector<AnyTensor> split(const AnyTensor& x, const IntList& sizes, std::int64_t axis) {
  const AnyTensor in[1] = {x};
  return call(split_op, in, Attrs{{"sizes", sizes}, {"axis", axis}});
}
inline std::vector<AnyTensor> split_equal(const AnyTensor& x, std::int64_t parts, std::int64_t axis) {
  MS_CHECK(x.dim() > 0, ShapeError, "split_equal: cannot split a zero-dimensional tensor");
  int ax = normalize_axis(axis, x.dim(), "split_equal");
  std::int64_t n = x.shape()[ax];
  MS_CHECK(parts >= 1, ValueError, "split_equal: parts must be >= 1, got {}", parts);
  MS_CHECK(n % parts == 0, ShapeError, "split_equal: axis {} of shape {} has size {}, which is not divisible by {}",
           ax, shape_str(x.shape()), n, parts);
  return split(x, IntList(static_cast<std::size_t>(parts), n / parts), axis);
}
inline AnyTensor gather(const AnyTensor& x, std::int64_t axis, const AnyTensor& index) {
  return call1(gather_op, {x, index}, Attrs{{"axis", axis}});
}
inline AnyTensor index_select(const AnyTensor& x, std::int64_t axis, const AnyTensor& index) {
  return call1(index_select_op, {x, index}, Attrs{{"axis", axis}});
}
inline AnyTensor one_hot(const AnyTensor& index, std::int64_t num_classes, DType dtype) {
  return call1(one_hot_op, {index}, Attrs{{"num_classes", num_classes}, {"dtype", dtype}});
}

}  // namespace ms::ops

// ---- typed API ------------------------------------------------------------------------------

namespace ms {

namespace detail {
template <class T>
std::vector<AnyTensor> any_list(std::span<const Tensor<T>> xs) {
  return std::vector<AnyTensor>(xs.begin(), xs.end());
}
template <class T>
std::vector<Tensor<T>> typed_list(const std::vector<AnyTensor>& xs) {
  return std::vector<Tensor<T>>(xs.begin(), xs.end());
}
template <class I>
concept IndexElement = std::is_same_v<I, std::int64_t> || std::is_same_v<I, std::int32_t>;
}  // namespace detail

/// Joins tensors along an existing axis: concat({a, b}, 1).
template <Element T>
Tensor<T> concat(const std::vector<Tensor<T>>& xs, std::int64_t axis = 0) {
  auto v = detail::any_list<T>(xs);
  return ops::concat(v, axis);
}
template <Element T>
Tensor<T> concat(std::initializer_list<Tensor<T>> xs, std::int64_t axis = 0) {
  auto v = detail::any_list<T>(std::span<const Tensor<T>>(xs.begin(), xs.size()));
  return ops::concat(v, axis);
}
/// Joins same-shaped tensors along a new axis: stack({a, b}, 0) has shape (2, ...).
template <Element T>
Tensor<T> stack(const std::vector<Tensor<T>>& xs, std::int64_t axis = 0) {
  auto v = detail::any_list<T>(xs);
  return ops::stack(v, axis);
}
template <Element T>
Tensor<T> stack(std::initializer_list<Tensor<T>> xs, std::int64_t axis = 0) {
  auto v = detail::any_list<T>(std::span<const Tensor<T>>(xs.begin(), xs.size()));
  return ops::stack(v, axis);
}
/// Cuts x along `axis` into pieces of the given sizes (they must add up to the extent).
template <Element T>
std::vector<Tensor<T>> split(const Tensor<T>& x, const ops::IntList& sizes, std::int64_t axis = 0) {
  return detail::typed_list<T>(ops::split(x, sizes, axis));
}
/// Cuts x along `axis` into `parts` equal pieces (the extent must be divisible by parts).
template <Element T>
std::vector<Tensor<T>> split_equal(const Tensor<T>& x, std::int64_t parts, std::int64_t axis = 0) {
  return detail::typed_list<T>(ops::split_equal(x, parts, axis));
}
/// torch.gather along `axis` with an int64 or int32 index of the input's rank.
template <Element T, detail::IndexElement I>
Tensor<T> gather(const Tensor<T>& x, std::int64_t axis, const Tensor<I>& index) {
  return ops::gather(x, axis, index);
}
/// The slices of x along `axis` at the positions of a 1-D int64 or int32 index.
template <Element T, detail::IndexElement I>
Tensor<T> index_select(const Tensor<T>& x, std::int64_t axis, const Tensor<I>& index) {
  return ops::index_select(x, axis, index);
}
/// One-hot encoding of an int64/int32 index as dtype U (int64 unless given): one_hot<float>(labels, 10).
template <Element U = std::int64_t, detail::IndexElement I>
Tensor<U> one_hot(const Tensor<I>& index, std::int64_t num_classes) {
  return ops::one_hot(index, num_classes, dtype_v<U>);
}

}  // namespace ms
