#pragma once
// Padding: pad (a constant, the mirror image without the edge, or the edge repeated around
// each dim) and pad_grad, its adjoint (sums each output gradient into the input element it
// was read from), which pad's gradient rule uses. Both share one map per dim from an output
// index to its source index. Negative pads crop. Gradients: rows of autograd/rules.hpp.

#include <cstring>
#include <string>
#include <vector>

#include "binary.hpp"
#include "movement.hpp"

namespace ms::ops {

// ==== declarations ===========================================================================

/// Pads x by begin[d] elements before and end[d] after each dim d (one entry per dim; the
/// ONNX Pad order split in halves). mode: "constant" (fills `value`), "reflect" (mirrors
/// without repeating the edge; pads must be less than the dim's size) or "replicate" (repeats
/// the edge element). A negative pad removes elements.
inline AnyTensor pad_dims(const AnyTensor& x, const IntList& begin, const IntList& end,
                          std::string_view mode = "constant", double value = 0.0);
/// torch.nn.functional.pad order: pads = (before, after) pairs from the LAST dim backwards,
/// (left, right, top, bottom, ...); dims it does not reach are not padded.
inline AnyTensor pad(const AnyTensor& x, const IntList& pads_last_dim_first, std::string_view mode = "constant",
                     double value = 0.0);

// ==== implementation =========================================================================

namespace detail {
#if MS_KERNEL_BODIES  // the kernels: core/linkage.hpp

enum class PadMode { constant, reflect, replicate };

inline PadMode pad_mode(const OpDef& op, const Attrs& a) {
  const std::string& m = a.has("mode") ? a.str("mode") : std::string("constant");
  if (m == "constant") return PadMode::constant;
  if (m == "reflect") return PadMode::reflect;
  if (m == "replicate") return PadMode::replicate;
  MS_THROW(ValueError, "{}: mode \"{}\" is not one of \"constant\", \"reflect\", \"replicate\"", op.name, m);
}

/// The padded shape of `in` (checks the pads against the mode).
inline Shape padded_shape(const OpDef& op, const TensorMeta& in, const Attrs& a) {
  const IntList &b = a.ints("begin"), &e = a.ints("end");
  const Shape& s = in.shape;
  MS_CHECK(static_cast<int>(b.size()) == s.rank() && static_cast<int>(e.size()) == s.rank(), ValueError,
           "{}: begin {} and end {} need one entry per dim of the input {} {}", op.name, ints_str(b), ints_str(e),
           shape_str(s), in.dtype);
  const PadMode mode = pad_mode(op, a);
  Shape out = s;
  for (int d = 0; d < s.rank(); ++d) {
    const std::int64_t pb = b[static_cast<std::size_t>(d)], pe = e[static_cast<std::size_t>(d)];
    out[d] = s[d] + pb + pe;
    MS_CHECK(out[d] >= 0, ShapeError, "{}: pads {} and {} leave dim {} of the input {} with size {}", op.name, pb, pe,
             d, shape_str(s), out[d]);
    if (mode == PadMode::reflect)
      MS_CHECK(pb < s[d] && pe < s[d], ValueError,
               "{}: reflect pads {} and {} of dim {} must be less than its size {} (input {} {})", op.name, pb, pe, d,
               s[d], shape_str(s), in.dtype);
    if (mode == PadMode::replicate)
      MS_CHECK(s[d] > 0 || out[d] == 0, ValueError, "{}: replicate cannot pad dim {} of size 0 (input {} {})", op.name,
               d, shape_str(s), in.dtype);
  }
  return out;
}

/// For each output index along a dim of input size n: its source index, or -1 (the constant).
inline std::vector<std::int64_t> pad_map(std::int64_t n, std::int64_t before, std::int64_t out, PadMode mode) {
  std::vector<std::int64_t> m(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    std::int64_t i = o - before;
    if (i < 0 || i >= n) {
      if (mode == PadMode::constant) i = -1;
      else if (mode == PadMode::replicate) i = i < 0 ? 0 : n - 1;
      else i = i < 0 ? -i : 2 * (n - 1) - i;  // reflect; pads < n keep this in range
    }
    m[static_cast<std::size_t>(o)] = i;
  }
  return m;
}

/// Calls f(out_offset, in_offset) for every element of the padded shape, in_offset < 0 for the
/// constant; offsets in elements (the output contiguous, the input with its own strides).
template <class F>
void for_each_pad(const Shape& in_shape, const Shape& in_strides, const Shape& out_shape, const Attrs& a, PadMode mode,
                  F&& f) {
  const int r = out_shape.rank();
  const std::int64_t total = numel(out_shape);
  if (total == 0) return;
  if (r == 0) {
    f(0, 0);
    return;
  }
  const IntList& b = a.ints("begin");
  std::vector<std::vector<std::int64_t>> maps;
  for (int d = 0; d < r; ++d) {
    maps.push_back(pad_map(in_shape[d], b[static_cast<std::size_t>(d)], out_shape[d], mode));
    for (auto& v : maps.back())
      if (v >= 0) v *= in_strides[d];  // source offsets along this dim
  }
  const std::int64_t inner = out_shape[r - 1];
  const std::vector<std::int64_t>& last = maps[static_cast<std::size_t>(r - 1)];
  for (std::int64_t row = 0, rows = total / inner; row < rows; ++row) {
    std::int64_t src = 0, rem = row;
    bool fill = false;
    for (int d = r - 2; d >= 0; --d) {
      const std::int64_t i = rem % out_shape[d];
      rem /= out_shape[d];
      const std::int64_t v = maps[static_cast<std::size_t>(d)][static_cast<std::size_t>(i)];
      if (v < 0) fill = true;
      else src += v;
    }
    for (std::int64_t j = 0; j < inner; ++j) {
      const std::int64_t v = last[static_cast<std::size_t>(j)];
      f(row * inner + j, fill || v < 0 ? -1 : src + v);
    }
  }
}

inline void pad_kernel(const KernelArgs& k) {
  const AnyTensor &x = k.in[0], &y = k.out[0];
  const auto e = static_cast<std::ptrdiff_t>(dtype_size(x.dtype()));
  const AnyTensor v = scalar_tensor(k.attrs.f("value", 0.0), x.dtype(), k.op.name);
  const char* vb = static_cast<const char*>(v.raw_data());
  const char* xb = static_cast<const char*>(x.raw_data());
  char* yb = static_cast<char*>(y.raw_data());
  for_each_pad(x.shape(), x.strides(), y.shape(), k.attrs, pad_mode(k.op, k.attrs), [&](std::int64_t o, std::int64_t i) {
    std::memcpy(yb + o * e, i < 0 ? vb : xb + i * e, static_cast<std::size_t>(e));
  });
}

/// gx[source of o] += g[o] for every padded position o (the constant positions drop out).
inline void pad_grad_kernel(const KernelArgs& k) {
  const AnyTensor g = contiguous_raw(k.in[0]);
  const AnyTensor& gx = k.out[0];
  std::memset(gx.raw_data(), 0, gx.nbytes());
  visit_dtype(g.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      const T* gp = static_cast<const T*>(g.raw_data());
      T* xp = static_cast<T*>(gx.raw_data());
      for_each_pad(gx.shape(), gx.strides(), g.shape(), k.attrs, pad_mode(k.op, k.attrs),
                   [&](std::int64_t o, std::int64_t i) {
                     if (i >= 0) xp[i] = simd::add(xp[i], gp[o]);
                   });
    }
  });
}

#endif  // MS_KERNEL_BODIES
}  // namespace detail

// pad(x; begin, end, mode, value).
MS_REGISTRATION(const OpDef& pad_op, registry().add([] {
  OpDef d;
  d.name = "pad";
  d.category = Category::movement;
  d.doc = "pads each dim by begin/end elements: a constant, the mirror image (reflect) or the edge (replicate)";
  d.attr_names = {"begin", "end", "mode", "value"};
  d.cpu_dtypes = kStorageTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    Shape s = detail::padded_shape(op, in[0], a);
    if (detail::pad_mode(op, a) == detail::PadMode::constant && in[0].dtype != DType::f16 && in[0].dtype != DType::bf16)
      scalar_tensor(a.f("value", 0.0), in[0].dtype, op.name);  // the value must fit the dtype
    out.push_back({in[0].dtype, s});
  };
  d.kernel = &detail::pad_kernel;
  return d;
}()));

// pad_grad(g; begin, end, mode, input_shape): the adjoint of pad.
MS_REGISTRATION(const OpDef& pad_grad_op, registry().add([] {
  OpDef d;
  d.name = "pad_grad";
  d.category = Category::movement;
  d.doc = "gradient of pad: sums each element of g into the input element it was read from";
  d.attr_names = {"begin", "end", "mode", "input_shape"};
  d.cpu_dtypes = kNumericTypes;
  d.cost = &detail::movement_cost;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const TensorMeta x{in[0].dtype, Shape(a.ints("input_shape"))};
    const Shape s = detail::padded_shape(op, x, a);
    MS_CHECK(in[0].shape == s, ShapeError, "{}: g {} does not match the padded shape {} of the input {}", op.name,
             shape_str(in[0].shape), shape_str(s), shape_str(x.shape));
    out.push_back(x);
  };
  d.kernel = &detail::pad_grad_kernel;
  return d;
}()));

// ---- untyped API ----------------------------------------------------------------------------

inline AnyTensor pad_dims(const AnyTensor& x, const IntList& begin, const IntList& end, std::string_view mode,
                          double value) {
  return call1(pad_op, {x},
               Attrs{{"begin", begin}, {"end", end}, {"mode", std::string(mode)}, {"value", value}});
}
inline AnyTensor pad(const AnyTensor& x, const IntList& pads_last_dim_first, std::string_view mode, double value) {
  const IntList& p = pads_last_dim_first;
  const int r = x.dim();
  MS_CHECK(p.size() % 2 == 0 && static_cast<int>(p.size()) <= 2 * r, ValueError,
           "pad: pads {} must hold (before, after) pairs for at most the {} dims of the input {} {}", detail::ints_str(p), r,
           shape_str(x.shape()), x.dtype());
  IntList b(static_cast<std::size_t>(r), 0), e(static_cast<std::size_t>(r), 0);
  for (std::size_t j = 0; j < p.size() / 2; ++j) {
    const auto d = static_cast<std::size_t>(r - 1) - j;  // pair j pads the j-th dim from the end
    b[d] = p[2 * j];
    e[d] = p[2 * j + 1];
  }
  return pad_dims(x, b, e, mode, value);
}

}  // namespace ms::ops

// ---- typed API ------------------------------------------------------------------------------

namespace ms {

/// torch.nn.functional.pad: pads_last_dim_first = (left, right, top, bottom, ...), pairs from
/// the last dim backwards; mode "constant" (value), "reflect" or "replicate".
template <Element T>
Tensor<T> pad(const Tensor<T>& x, const ops::IntList& pads_last_dim_first, std::string_view mode = "constant",
              double value = 0.0) {
  return ops::pad(x, pads_last_dim_first, mode, value);
}
/// Pads by begin[d] before and end[d] after each dim d (ONNX Pad's pads split in halves).
template <Element T>
Tensor<T> pad_dims(const Tensor<T>& x, const ops::IntList& begin, const ops::IntList& end,
                   std::string_view mode = "constant", double value = 0.0) {
  return ops::pad_dims(x, begin, end, mode, value);
}

}  // namespace ms
