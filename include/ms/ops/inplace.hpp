#pragma once
// In-place writes: the op "copy_" (writes a source, broadcast, into a destination's
// storage) and the in-place methods of Tensor<T> built on it (add_, sub_, mul_, div_,
// fill_, copy_). Every other op in the library is pure; this is the one place where
// an op has a side effect. Must not define out-of-place math (it reuses ops/binary.hpp).
//
// Semantics (the same as PyTorch): `x.add_(y)` computes `x + y` out of place, then
// writes the result into x's storage through x's strides. Every view of x (slices,
// transposes, reshapes sharing its storage) sees the new values. Graph capture and
// autodiff see the out-of-place op followed by one copy_ node.

#include "binary.hpp"
#include "movement.hpp"

namespace ms::ops {

// ==== declarations ===========================================================================

/// Writes src (broadcast to dst's shape, same dtype) into dst's storage; returns dst.
inline AnyTensor copy_(const AnyTensor& dst, const AnyTensor& src);

// ==== implementation =========================================================================

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

/// True when two elements of t share one memory location (a broadcast view, stride 0 on a
/// dim of size > 1): writing into such a tensor would be ambiguous.
inline bool has_internal_overlap(const AnyTensor& t) {
  for (int d = 0; d < t.dim(); ++d)
    if (t.shape()[d] > 1 && t.strides()[d] == 0) return true;
  return false;
}

/// The view function of copy_: writes src into dst, returns dst (the same handle).
///
/// copy_ is a view op (its output aliases input 0) so that graph capture rebinds dst to the
/// result, DCE/CSE/folding keep it (OpDef::writes_inputs) and the executor runs it
/// as a runtime view step. A ViewFn receives only input 0; both callers (ops::run_op and the
/// CPU executor) pass the first element of the contiguous input array, so the source is the
/// next element, (&dst)[1]. Calling this with a lone tensor is undefined: always go through
/// ops::copy_ or ops::call. (Giving ViewFn the whole input span would remove this contract.)
/// Shapes and dtypes were checked by inference; the stride checks happen here, before writing.
inline AnyTensor copy_view(const AnyTensor& dst, const Attrs&) {
  const AnyTensor& src = (&dst)[1];
  // View ops bypass the device runners, so writes into device memory are not possible here.
  MS_CHECK(dst.device().is_cpu(), DeviceError, "copy_: in-place writes into a tensor on {} are not supported yet",
           dst.device());
  MS_CHECK(!has_internal_overlap(dst), ValueError,
           "copy_: the destination {} with strides {} is a broadcast view (several elements share one memory "
           "location); write into a contiguous tensor instead",
           shape_str(dst.shape()), shape_str(dst.strides()));
  // Copying a tensor onto itself (a compiled graph that already wrote the result into dst).
  if (src.raw_data() == dst.raw_data() && src.shape() == dst.shape() && src.strides() == dst.strides()) return dst;
  const int r = dst.dim(), lead = r - src.dim();
  AnyTensor from = src;
  if (src.shares_storage(dst) && dst.numel() > 0) {
    // src may overlap dst (x[1:].copy_(x[:-1])): read it out completely before writing.
    from = AnyTensor::empty(src.shape(), src.dtype());
    copy_into(src, static_cast<char*>(from.raw_data()), from.strides());
  }
  Shape sst = Shape::filled(r, 0);  // src strides broadcast to dst's shape
  for (int d = lead; d < r; ++d) sst[d] = from.shape()[d - lead] == 1 ? 0 : from.strides()[d - lead];
  strided_copy(dst.shape(), static_cast<const char*>(from.raw_data()), sst, static_cast<char*>(dst.raw_data()),
               dst.strides(), dtype_size(dst.dtype()));
  return dst;
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// copy_: inputs (dst, src). Side effect: mutates dst (writes_inputs), so graph passes never
// drop, merge or fold it.
MS_REGISTRATION(const OpDef& copy__op, registry().add([] {
  OpDef d;
  d.name = "copy_";
  d.category = Category::movement;
  d.num_inputs = 2;
  d.doc = "writes src (broadcast) into dst's storage and returns dst; has a side effect: graph passes must keep it";
  d.writes_inputs = 1u;  // dst
  d.cpu_dtypes = kStorageTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs&, MetaList& out) {
    const TensorMeta &dst = in[0], &src = in[1];
    MS_CHECK(dst.dtype == src.dtype, DTypeError,
             "{}: dtype mismatch: destination {} is {} but source {} is {}; convert the source with ms::cast", op.name,
             shape_str(dst.shape), dst.dtype, shape_str(src.shape), src.dtype);
    Shape b;
    MS_CHECK(try_broadcast(dst.shape, src.shape, b) && b == dst.shape, ShapeError,
             "{}: cannot broadcast the source {} to the destination {}", op.name, shape_str(src.shape),
             shape_str(dst.shape));
    out.push_back(dst);
  };
  d.view = &detail::copy_view;  // a movement-category view op = "writes into input 0"
  return d;
}()));

inline AnyTensor copy_(const AnyTensor& dst, const AnyTensor& src) { return call1(copy__op, {dst, src}); }

namespace detail {

/// Rejects in-place writes that autodiff could not follow (as PyTorch does for leaves): the
/// tape keeps handles, not copies, so overwriting a tensor it saved would corrupt gradients.
inline void check_inplace_autograd(std::string_view op, const AnyTensor& dst, const AnyTensor& src) {
  if (!ops::detail::grad_mode) return;
  const AnyTensor in[2] = {dst, src};
  const std::size_t n = src.defined() ? 2 : 1;
  MS_CHECK(!ops::detail::any_requires_grad(std::span<const AnyTensor>(in, n)), ValueError,
           "{}: in-place ops on tensors that take part in autodiff are not supported; use the out-of-place form, "
           "or run the update under ms::NoGradGuard (as optimizers do)",
           op);
}

/// Writes an out-of-place result into dst after checking it keeps dst's shape and dtype.
inline void assign_result(std::string_view op, const AnyTensor& dst, const AnyTensor& result) {
  MS_CHECK(result.shape() == dst.shape(), ShapeError, "{}: result shape {} differs from the destination shape {}",
           op, shape_str(result.shape()), shape_str(dst.shape()));
  MS_CHECK(result.dtype() == dst.dtype(), DTypeError, "{}: result dtype {} differs from the destination dtype {}", op,
           result.dtype(), dst.dtype());
  copy_(dst, result);
}

}  // namespace detail

}  // namespace ms::ops

namespace ms {

// In-place methods declared in core/tensor.hpp. Each one computes the out-of-place op
// (so autodiff and graphs see an ordinary op), then copy_s the result into this tensor.

#define MS_INPLACE_BINARY(name, fn)                                          \
  template <Element T>                                                       \
  Tensor<T>& Tensor<T>::name(const Tensor<T>& other) {                       \
    ops::detail::check_inplace_autograd(#name, *this, other);                \
    ops::detail::assign_result(#name, *this, ops::fn(*this, other));         \
    return *this;                                                            \
  }                                                                          \
  template <Element T>                                                       \
  Tensor<T>& Tensor<T>::name(double other) {                                 \
    ops::detail::check_inplace_autograd(#name, *this, AnyTensor());          \
    ops::detail::assign_result(#name, *this, ops::fn(*this, other));         \
    return *this;                                                            \
  }
MS_INPLACE_BINARY(add_, add)
MS_INPLACE_BINARY(sub_, sub)
MS_INPLACE_BINARY(mul_, mul)
MS_INPLACE_BINARY(div_, div)
#undef MS_INPLACE_BINARY

/// Sets every element to `value` (which must be representable in T).
template <Element T>
Tensor<T>& Tensor<T>::fill_(double value) {
  ops::detail::check_inplace_autograd("fill_", *this, AnyTensor());
  ops::copy_(*this, ops::scalar_tensor(value, dtype(), "fill_"));
  return *this;
}

/// Copies src (broadcast to this tensor's shape) into this tensor's storage.
template <Element T>
Tensor<T>& Tensor<T>::copy_(const Tensor<T>& src) {
  ops::detail::check_inplace_autograd("copy_", *this, src);
  ops::copy_(*this, src);
  return *this;
}

}  // namespace ms
