#pragma once
// Scatter-style movement ops, the adjoints of the gather-style ones (and used by
// their gradient rules): slice_scatter (write into a slice), scatter_add (adjoint
// of gather) and index_add (adjoint of index_select). Each returns a new tensor:
// a copy of `base` with `src` written or added in.

#include <cstring>

#include "views.hpp"

namespace ms::ops {

#if MS_KERNEL_BODIES  // core/linkage.hpp
namespace detail {
/// out = contiguous copy of base (out is preallocated and contiguous).
inline void copy_base(const AnyTensor& base, const AnyTensor& out) {
  const AnyTensor in[1] = {base};
  run_elementwise(copy_op.elementwise.block[static_cast<int>(base.dtype())], in, out, nullptr);
}

inline void infer_like_base(const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
  MS_CHECK(in[0].dtype == in.back().dtype, DTypeError, "{}: base is {} but src is {}", op.name, in[0].dtype,
           in.back().dtype);
  out.push_back(in[0]);
}

inline void check_index_dtype(const OpDef& op, const TensorMeta& m) {
  MS_CHECK(m.dtype == DType::i64 || m.dtype == DType::i32, DTypeError, "{}: index must be int64 or int32, got {}",
           op.name, m.dtype);
}

template <class I>
inline std::int64_t read_index(const AnyTensor& idx, std::int64_t off) {
  return static_cast<std::int64_t>(static_cast<const I*>(idx.raw_data())[off]);
}
inline std::int64_t index_at(const AnyTensor& idx, std::int64_t off) {
  return idx.dtype() == DType::i64 ? read_index<std::int64_t>(idx, off) : read_index<std::int32_t>(idx, off);
}
}  // namespace detail
#endif  // MS_KERNEL_BODIES

// slice_scatter(base, src; axis, start, stop, step): base with base[slice] = src.
MS_REGISTRATION(const OpDef& slice_scatter_op, registry().add([] {
  OpDef d;
  d.name = "slice_scatter";
  d.category = Category::movement;
  d.num_inputs = 2;
  d.doc = "copy of base with base[start:stop:step] (along axis) replaced by src";
  d.attr_names = {"axis", "start", "stop", "step"};
  d.cpu_dtypes = kStorageTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::infer_like_base(op, in, a, out);
    auto sp = detail::slice_spec(op.name, in[0].shape, a);
    Shape s = in[0].shape;
    s[sp.axis] = sp.len;
    MS_CHECK(in[1].shape == s, ShapeError, "{}: src {} does not match the slice shape {}", op.name,
             shape_str(in[1].shape), shape_str(s));
  };
  d.kernel = [](const KernelArgs& k) {
    detail::copy_base(k.in[0], k.out[0]);
    AnyTensor dst = slice_op.view(k.out[0], k.attrs);
    const AnyTensor& src = k.in[1];
    std::size_t es = dtype_size(src.dtype());
    std::vector<std::int64_t> doffs;
    ms::detail::for_each_offset(dst.shape(), dst.strides(), [&](std::int64_t o) { doffs.push_back(o); });
    std::size_t i = 0;
    char* db = static_cast<char*>(dst.raw_data());
    const char* sb = static_cast<const char*>(src.raw_data());
    ms::detail::for_each_offset(src.shape(), src.strides(), [&](std::int64_t o) {
      std::memcpy(db + doffs[i++] * static_cast<std::int64_t>(es), sb + o * static_cast<std::int64_t>(es), es);
    });
  };
  return d;
}()));

#if MS_KERNEL_BODIES  // core/linkage.hpp
namespace detail {
template <class F>
void for_each_index(const Shape& shape, F&& f) {  // f(multi_index)
  std::int64_t n = numel(shape);
  std::int64_t idx[kMaxDims] = {};
  for (std::int64_t i = 0; i < n; ++i) {
    f(static_cast<const std::int64_t*>(idx));
    for (int d = shape.rank() - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}
inline std::int64_t offset_of(const AnyTensor& t, const std::int64_t* idx) {
  std::int64_t o = 0;
  for (int d = 0; d < t.dim(); ++d) o += idx[d] * t.strides()[d];
  return o;
}

template <bool Scatter>  // true: scatter_add (index same shape as src); false: index_add (1-D index)
void add_kernel(const KernelArgs& k) {
  copy_base(k.in[0], k.out[0]);
  const AnyTensor &idx = k.in[1], &src = k.in[2], &out = k.out[0];
  int axis = normalize_axis(k.attrs.i("axis"), out.dim(), k.op.name);
  std::int64_t n = out.shape()[axis];
  visit_dtype(src.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      T* o = static_cast<T*>(out.raw_data());
      const T* s = static_cast<const T*>(src.raw_data());
      std::int64_t tmp[kMaxDims];
      for_each_index(src.shape(), [&](const std::int64_t* m) {
        std::int64_t j = Scatter ? index_at(idx, offset_of(idx, m)) : index_at(idx, m[axis] * idx.strides()[0]);
        if (j < 0) j += n;
        if (j < 0 || j >= n) return;  // validated before the kernel runs
        for (int d = 0; d < out.dim(); ++d) tmp[d] = m[d];
        tmp[axis] = j;
        o[offset_of(out, tmp)] += s[offset_of(src, m)];
      });
    }
  });
}

/// Checks every index of `idx` is within [-n, n) before any kernel runs.
inline void check_indices(const OpDef& op, const AnyTensor& idx, std::int64_t n, int axis) {
  ms::detail::for_each_offset(idx.shape(), idx.strides(), [&](std::int64_t o) {
    std::int64_t j = index_at(idx, o);
    MS_CHECK(j >= -n && j < n, IndexError, "{}: index {} is out of range for axis {} with size {}", op.name, j, axis, n);
  });
}
}  // namespace detail
#endif  // MS_KERNEL_BODIES

// scatter_add(base, index, src; axis): out = base; out[..., index[p], ...] += src[p] (adjoint of gather).
MS_REGISTRATION(const OpDef& scatter_add_op, registry().add([] {
  OpDef d;
  d.name = "scatter_add";
  d.category = Category::movement;
  d.num_inputs = 3;
  d.doc = "copy of base with src added at the positions given by index along axis (adjoint of gather)";
  d.attr_names = {"axis"};
  d.cpu_dtypes = kNumericTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::check_index_dtype(op, in[1]);
    int ax = normalize_axis(a.i("axis"), in[0].shape.rank(), op.name);
    MS_CHECK(in[1].shape == in[2].shape && in[2].shape.rank() == in[0].shape.rank(), ShapeError,
             "{}: index {} and src {} must have the same shape and the rank of base {}", op.name,
             shape_str(in[1].shape), shape_str(in[2].shape), shape_str(in[0].shape));
    for (int i = 0; i < in[0].shape.rank(); ++i)
      MS_CHECK(i == ax || in[2].shape[i] <= in[0].shape[i], ShapeError, "{}: src {} is larger than base {} on axis {}",
               op.name, shape_str(in[2].shape), shape_str(in[0].shape), i);
    detail::infer_like_base(op, in, a, out);
  };
  d.kernel = [](const KernelArgs& k) {
    int ax = normalize_axis(k.attrs.i("axis"), k.in[0].dim(), k.op.name);
    detail::check_indices(k.op, k.in[1], k.in[0].shape()[ax], ax);
    detail::add_kernel<true>(k);
  };
  return d;
}()));

// index_add(base, index, src; axis): out = base; out.select(axis, index[i]) += src.select(axis, i).
MS_REGISTRATION(const OpDef& index_add_op, registry().add([] {
  OpDef d;
  d.name = "index_add";
  d.category = Category::movement;
  d.num_inputs = 3;
  d.doc = "copy of base with slices of src added at index along axis (adjoint of index_select)";
  d.attr_names = {"axis"};
  d.cpu_dtypes = kNumericTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    detail::check_index_dtype(op, in[1]);
    int ax = normalize_axis(a.i("axis"), in[0].shape.rank(), op.name);
    MS_CHECK(in[1].shape.rank() == 1, ShapeError, "{}: index must be 1-D, got {}", op.name, shape_str(in[1].shape));
    Shape want = in[0].shape;
    want[ax] = in[1].shape[0];
    MS_CHECK(in[2].shape == want, ShapeError, "{}: src {} must be {} (base {} with axis {} of the index's length)",
             op.name, shape_str(in[2].shape), shape_str(want), shape_str(in[0].shape), ax);
    detail::infer_like_base(op, in, a, out);
  };
  d.kernel = [](const KernelArgs& k) {
    int ax = normalize_axis(k.attrs.i("axis"), k.in[0].dim(), k.op.name);
    detail::check_indices(k.op, k.in[1], k.in[0].shape()[ax], ax);
    detail::add_kernel<false>(k);
  };
  return d;
}()));

inline AnyTensor slice_scatter(const AnyTensor& base, const AnyTensor& src, std::int64_t axis, std::int64_t start,
                               std::int64_t stop, std::int64_t step = 1) {
  return call1(slice_scatter_op, {base, src}, Attrs{{"axis", axis}, {"start", start}, {"stop", stop}, {"step", step}});
}
inline AnyTensor scatter_add(const AnyTensor& base, std::int64_t axis, const AnyTensor& index, const AnyTensor& src) {
  return call1(scatter_add_op, {base, index, src}, Attrs{{"axis", axis}});
}
inline AnyTensor index_add(const AnyTensor& base, std::int64_t axis, const AnyTensor& index, const AnyTensor& src) {
  return call1(index_add_op, {base, index, src}, Attrs{{"axis", axis}});
}

}  // namespace ms::ops
