#pragma once
// What the nn op families of ops/nn/ share: Int2 (from ops/attr_struct.hpp), the (height,
// width) pair of kernel sizes, strides, paddings and dilations, and the helpers of their definitions (detail::): the
// attribute readers pair_attr and shape_n, the cost functions, the float-only kernel
// visitor. Not here: ops, or a helper that only one family uses (it stays in that family's
// header); ops/optim_ops.hpp uses the cost functions and visitor too.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "../attr_struct.hpp"

namespace ms::ops::detail {

/// A (h, w) attribute: absent gives `dflt`; anything but two values is a ValueError.
inline Int2 pair_attr(const OpDef& op, const Attrs& a, std::string_view key, Int2 dflt) {
  if (!a.has(key)) return dflt;
  const IntList& v = a.ints(key);
  MS_CHECK(v.size() == 2, ValueError, "{}: attribute '{}' must hold 2 values (height, width), got {}", op.name, key,
           ints_str(v));
  return {v[0], v[1]};
}

/// A shape attribute `key` = v of exactly `rank` non-negative values (the forward shape a backward op rebuilds).
inline Shape shape_n(const OpDef& op, std::string_view key, const IntList& v, int rank) {
  MS_CHECK(static_cast<int>(v.size()) == rank, ValueError, "{}: attribute '{}' must hold {} values, got {}", op.name,
           key, rank, ints_str(v));
  for (auto d : v) MS_CHECK(d >= 0, ValueError, "{}: attribute '{}' has a negative value: {}", op.name, key, ints_str(v));
  return Shape(v);
}
inline Shape shape_attr_n(const OpDef& op, const Attrs& a, std::string_view key, int rank) {
  return shape_n(op, key, a.ints(key), rank);
}

inline double bytes_of(std::span<const TensorMeta> ms) {
  double b = 0;
  for (auto& m : ms) b += static_cast<double>(m.nbytes());
  return b;
}

/// Cost of an op doing F flops per element of its first output.
template <int F>
Cost per_output_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return {static_cast<double>(numel(out[0].shape)) * F, bytes_of(in) + bytes_of(out)};
}
/// Cost of an op doing F flops per element of its first input.
template <int F>
Cost per_input_cost(const OpDef&, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return {static_cast<double>(numel(in[0].shape)) * F, bytes_of(in) + bytes_of(out)};
}

inline void check_float_dtype(const OpDef& op, const TensorMeta& m, std::string_view what) {
  MS_CHECK(m.dtype == DType::f32 || m.dtype == DType::f64, DTypeError, "{}: {} must be float32 or float64, got {}",
           op.name, what, m.dtype);
}

/// Every nn kernel is instantiated for float and double only.
template <class F>
void visit_float(const KernelArgs& k, DType d, F&& f) {
  if (d == DType::f32) f.template operator()<float>();
  else if (d == DType::f64) f.template operator()<double>();
  else MS_THROW(DTypeError, "{}: no CPU kernel for dtype {}", k.op.name, d);
}

}  // namespace ms::ops::detail
