#pragma once
// View ops (alias the input's storage: reshape, permute/transpose, slice with step,
// squeeze/unsqueeze, expand/broadcast_to) and the copying ops that make layouts
// concrete (copy for contiguous()/clone(), cast between dtypes).
// View ops are registered like every op so graph capture records them.

#include <bit>
#include <cmath>
#include <limits>
#include <optional>

#include "elementwise.hpp"

namespace ms::ops {

namespace detail {
inline AnyTensor make_view(const AnyTensor& x, const Shape& shape, const Shape& strides, std::int64_t offset) {
  return AnyTensor::view_of(x.storage(), shape, strides, offset, x.dtype());
}

/// Resolves one -1 in a requested shape against `n` elements.
inline Shape resolve_shape(std::string_view op, const Shape& from, const IntList& req) {
  Shape out;
  std::int64_t known = 1;
  int infer_at = -1;
  for (std::size_t i = 0; i < req.size(); ++i) {
    if (req[i] == -1) {
      MS_CHECK(infer_at < 0, ShapeError, "{}: only one dimension can be -1, got {}", op, ints_str(req));
      infer_at = static_cast<int>(i);
      out.push_back(1);
    } else {
      MS_CHECK(req[i] >= 0, ShapeError, "{}: invalid dimension {} in {}", op, req[i], ints_str(req));
      known *= req[i];
      out.push_back(req[i]);
    }
  }
  std::int64_t n = numel(from);
  if (infer_at >= 0) {
    MS_CHECK(known != 0 && n % known == 0, ShapeError, "{}: cannot reshape {} ({} elements) into {}", op,
             shape_str(from), n, ints_str(req));
    out[infer_at] = n / known;
  }
  MS_CHECK(numel(out) == n, ShapeError, "{}: cannot reshape {} ({} elements) into {}", op, shape_str(from), n,
           ints_str(req));
  return out;
}
}  // namespace detail

// reshape: attr "shape" holds the resolved shape; the input must be contiguous (the API copies first if not).
MS_REGISTRATION(const OpDef& reshape_op, registry().add([] {
  OpDef d;
  d.name = "reshape";
  d.category = Category::view;
  d.doc = "same elements, new shape (a view of a contiguous input)";
  d.attr_names = {"shape"};
  d.cpu_dtypes = kStorageTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    out.push_back({in[0].dtype, detail::resolve_shape(op.name, in[0].shape, a.ints("shape"))});
  };
  d.view = [](const AnyTensor& x, const Attrs& a) {
    MS_CHECK(x.is_contiguous(), ShapeError, "reshape: input {} with strides {} is not contiguous", shape_str(x.shape()),
             shape_str(x.strides()));
    Shape s = detail::resolve_shape("reshape", x.shape(), a.ints("shape"));
    return detail::make_view(x, s, contiguous_strides(s), x.offset());
  };
  return d;
}()));

// permute: attr "perm" (a permutation of the axes).
MS_REGISTRATION(const OpDef& permute_op, registry().add([] {
  OpDef d;
  d.name = "permute";
  d.category = Category::view;
  d.doc = "reorders axes (a view)";
  d.attr_names = {"perm"};
  d.cpu_dtypes = kStorageTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const IntList& p = a.ints("perm");
    int r = in[0].shape.rank();
    MS_CHECK(static_cast<int>(p.size()) == r, ShapeError, "{}: permutation {} does not match rank {} of shape {}",
             op.name, detail::ints_str(p), r, shape_str(in[0].shape));
    std::vector<bool> seen(r, false);
    Shape s;
    for (auto ax : p) {
      int k = normalize_axis(ax, r, op.name);
      MS_CHECK(!seen[k], ValueError, "{}: axis {} repeats in permutation {}", op.name, ax, detail::ints_str(p));
      seen[k] = true;
      s.push_back(in[0].shape[k]);
    }
    out.push_back({in[0].dtype, s});
  };
  d.view = [](const AnyTensor& x, const Attrs& a) {
    Shape s, st;
    for (auto ax : a.ints("perm")) {
      int k = normalize_axis(ax, x.dim(), "permute");
      s.push_back(x.shape()[k]);
      st.push_back(x.strides()[k]);
    }
    return detail::make_view(x, s, st, x.offset());
  };
  return d;
}()));

namespace detail {
struct SliceSpec {
  int axis;
  std::int64_t start, len, step;
};
/// NumPy slicing rules for [start:stop:step] on an axis of size n (clamping, negative indices and steps).
inline SliceSpec slice_spec(std::string_view op, const Shape& s, const Attrs& a) {
  int ax = normalize_axis(a.i("axis"), s.rank(), op);
  std::int64_t n = s[ax], step = a.i("step", 1);
  MS_CHECK(step != 0, ValueError, "{}: slice step cannot be zero", op);
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  std::int64_t start = a.i("start", kNone), stop = a.i("stop", kNone);
  auto norm = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    if (v < 0) v += n;
    return std::clamp(v, lo, hi);
  };
  std::int64_t b, e;
  if (step > 0) {
    b = start == kNone ? 0 : norm(start, 0, n);
    e = stop == kNone ? n : norm(stop, 0, n);
  } else {
    b = start == kNone ? n - 1 : norm(start, -1, n - 1);
    e = stop == kNone ? -1 : norm(stop, -1, n - 1);
    if (stop != kNone && stop < -n) e = -1;
  }
  std::int64_t len = step > 0 ? (e > b ? (e - b + step - 1) / step : 0) : (b > e ? (b - e + (-step) - 1) / (-step) : 0);
  return {ax, len > 0 ? b : 0, len, step};
}
}  // namespace detail

// slice: attrs axis, start, stop, step (NumPy semantics; start/stop may be omitted).
MS_REGISTRATION(const OpDef& slice_op, registry().add([] {
  OpDef d;
  d.name = "slice";
  d.category = Category::view;
  d.doc = "x[start:stop:step] along an axis (a view)";
  d.attr_names = {"axis", "start", "stop", "step"};
  d.cpu_dtypes = kStorageTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    auto sp = detail::slice_spec(op.name, in[0].shape, a);
    Shape s = in[0].shape;
    s[sp.axis] = sp.len;
    out.push_back({in[0].dtype, s});
  };
  d.view = [](const AnyTensor& x, const Attrs& a) {
    auto sp = detail::slice_spec("slice", x.shape(), a);
    Shape s = x.shape(), st = x.strides();
    s[sp.axis] = sp.len;
    std::int64_t off = x.offset() + sp.start * st[sp.axis];
    st[sp.axis] *= sp.step;
    return detail::make_view(x, s, st, off);
  };
  return d;
}()));

// expand: attr "shape" (target shape; -1 keeps a dim). Broadcast dims get stride 0.
MS_REGISTRATION(const OpDef& expand_op, registry().add([] {
  OpDef d;
  d.name = "expand";
  d.category = Category::view;
  d.doc = "broadcasts size-1 dims to a larger shape without copying (a view)";
  d.attr_names = {"shape"};
  d.cpu_dtypes = kStorageTypes;
  d.infer = [](const OpDef& op, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    const IntList& req = a.ints("shape");
    const Shape& s = in[0].shape;
    int r = static_cast<int>(req.size()), lead = r - s.rank();
    MS_CHECK(lead >= 0, ShapeError, "{}: cannot expand {} to {} (fewer dims)", op.name, shape_str(s),
             detail::ints_str(req));
    Shape o;
    for (int i = 0; i < r; ++i) {
      std::int64_t want = req[i], have = i < lead ? 1 : s[i - lead];
      if (want == -1) {
        MS_CHECK(i >= lead, ShapeError, "{}: -1 is not allowed for a new leading dim in {}", op.name,
                 detail::ints_str(req));
        want = have;
      }
      MS_CHECK(have == want || have == 1, ShapeError, "{}: cannot expand {} to {}", op.name, shape_str(s),
               detail::ints_str(req));
      o.push_back(want);
    }
    out.push_back({in[0].dtype, o});
  };
  d.view = [](const AnyTensor& x, const Attrs& a) {
    const IntList& req = a.ints("shape");
    int r = static_cast<int>(req.size()), lead = r - x.dim();
    Shape s, st;
    for (int i = 0; i < r; ++i) {
      std::int64_t have = i < lead ? 1 : x.shape()[i - lead];
      std::int64_t want = req[i] == -1 ? have : req[i];
      s.push_back(want);
      st.push_back(i < lead || (have == 1 && want != 1) ? 0 : x.strides()[i - lead]);
    }
    return detail::make_view(x, s, st, x.offset());
  };
  return d;
}()));

#if MS_KERNEL_BODIES  // core/linkage.hpp
namespace fx {
struct Identity : NoParams {
  using NoParams::NoParams;
  template <class V>
  V operator()(V x) const { return x; }
};
}  // namespace fx
#endif

// copy: a contiguous copy of any layout (serves contiguous() and clone()).
MS_REGISTRATION(const OpDef& copy_op, registry().add([] {
  OpDef d = make_elementwise_op<fx::Identity, 1, kAllTypes>({.name = "copy", .doc = "contiguous copy of the input", .flops = 0});
  d.category = Category::movement;
  d.cpu_dtypes = kStorageTypes;
  d.elementwise.block[static_cast<int>(DType::f16)] = &detail::block_kernel<fx::Identity, half, half, 1>;
  d.elementwise.block[static_cast<int>(DType::bf16)] = &detail::block_kernel<fx::Identity, bfloat16, bfloat16, 1>;
  return d;
}()));

#if MS_KERNEL_BODIES
namespace detail {
/// x rounded to float with round-to-odd (truncate, then set the lowest bit when inexact).
/// Rounding that to a 16-bit float gives the correctly rounded result; two round-to-nearest
/// steps (double -> float -> half) do not: 1 + 2^-11 + 2^-40 would become 1, not 1 + 2^-10.
template <class I>
inline float to_float_round_odd(I x) {
  // long double holds every int64 exactly on x86 (elsewhere it may round once more).
  using W = std::conditional_t<std::is_same_v<I, std::int64_t>, long double, double>;
  W w = static_cast<W>(x);
  if (w != w) return std::numeric_limits<float>::quiet_NaN();
  float f = static_cast<float>(w);
  if (static_cast<W>(f) == w) return f;
  if (std::fabs(static_cast<W>(f)) > std::fabs(w)) f = std::nextafter(f, 0.0f);  // toward zero (inf -> max)
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(f) | 1u);
}

/// Converts one value between element types: bool is x != 0 (NaN is true); float -> int
/// truncates and saturates (NaN -> 0); int -> int wraps; to float16/bfloat16 rounds once.
template <class O, class I>
inline O convert(I x) {
  if constexpr (std::is_same_v<O, I>) return x;
  else if constexpr (std::is_same_v<O, bool>) {
    // Compare in the source type: a double 1e-50 is nonzero though it is 0 as a float.
    if constexpr (std::is_same_v<I, half> || std::is_same_v<I, bfloat16>) return static_cast<float>(x) != 0.0f;
    else return x != I(0);
  } else if constexpr (std::is_integral_v<O>) {
    if constexpr (std::is_integral_v<I>) return static_cast<O>(x);
    else {
      double v = static_cast<double>(static_cast<float>(x) == static_cast<float>(x) ? static_cast<double>(x) : 0.0);
      if (v != v) return O(0);
      if (v <= static_cast<double>(std::numeric_limits<O>::lowest())) return std::numeric_limits<O>::lowest();
      if (v >= static_cast<double>(std::numeric_limits<O>::max())) return std::numeric_limits<O>::max();
      return static_cast<O>(v);
    }
  } else if constexpr (std::is_same_v<O, double>) {
    if constexpr (std::is_same_v<I, half> || std::is_same_v<I, bfloat16>) return static_cast<double>(static_cast<float>(x));
    else return static_cast<double>(x);
  } else if constexpr (std::is_same_v<I, half> || std::is_same_v<I, bfloat16> || std::is_same_v<I, bool>) {
    return static_cast<O>(static_cast<float>(x));
  } else if constexpr ((std::is_same_v<O, half> || std::is_same_v<O, bfloat16>) &&
                       (std::is_same_v<I, double> || std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>)) {
    return static_cast<O>(to_float_round_odd(x));
  } else {
    return static_cast<O>(x);
  }
}
}  // namespace detail
#endif  // MS_KERNEL_BODIES

// cast: attr "dtype".
MS_REGISTRATION(const OpDef& cast_op, registry().add([] {
  OpDef d;
  d.name = "cast";
  d.category = Category::movement;
  d.doc = "converts to another dtype (float->int truncates toward zero and saturates)";
  d.attr_names = {"dtype"};
  d.cpu_dtypes = kStorageTypes;
  d.nondiff_reason = "";
  d.infer = [](const OpDef&, std::span<const TensorMeta> in, const Attrs& a, MetaList& out) {
    out.push_back({a.dtype("dtype"), in[0].shape});
  };
  d.kernel = [](const KernelArgs& k) {
    const AnyTensor& x = k.in[0];
    const AnyTensor& y = k.out[0];
    visit_dtype(x.dtype(), [&]<class I>() {
      visit_dtype(y.dtype(), [&]<class O>() {
        const I* src = static_cast<const I*>(x.raw_data());
        O* dst = static_cast<O*>(y.raw_data());
        if (x.is_contiguous()) {
          std::int64_t n = x.numel();
          parallel_for(n, kParallelGrain, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) dst[i] = detail::convert<O>(src[i]);
          });
        } else {
          std::int64_t i = 0;
          ms::detail::for_each_offset(x.shape(), x.strides(), [&](std::int64_t off) { dst[i++] = detail::convert<O>(src[off]); });
        }
      });
    });
  };
  return d;
}()));

namespace detail {
/// A contiguous version of x for use INSIDE kernels (no dispatch, nothing recorded):
/// returns x itself when already contiguous, else a fresh contiguous copy.
MS_IMPL AnyTensor contiguous_raw(const AnyTensor& x);
/// y (contiguous, dtype `to`) <- x converted, with the cast op's kernel (no dispatch).
MS_IMPL void cast_into_raw(const AnyTensor& x, const AnyTensor& y);
/// Runs `kernel` (which computes in float32) for an op called with 16-bit floats, the way
/// PyTorch's CPU kernels do: float16/bfloat16 inputs are converted to float32, the kernel
/// computes float32 results, and each is rounded once to its output's dtype. Inputs and
/// outputs of other dtypes (indices, masks) pass through unchanged.
MS_IMPL void run_upcast_f32(const KernelArgs& k, KernelFn kernel);
}  // namespace detail

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
namespace detail {
MS_IMPL AnyTensor contiguous_raw(const AnyTensor& x) {
  if (x.is_contiguous()) return x;
  AnyTensor out = AnyTensor::empty(x.shape(), x.dtype());
  const AnyTensor in[1] = {x};
  run_elementwise(copy_op.elementwise.block[static_cast<int>(x.dtype())], in, out, nullptr);
  return out;
}

MS_IMPL void cast_into_raw(const AnyTensor& x, const AnyTensor& y) {
  const Attrs a{{"dtype", y.dtype()}};
  const AnyTensor in[1] = {x};
  AnyTensor out[1] = {y};
  cast_op.kernel(KernelArgs{cast_op, in, out, a});
}

MS_IMPL void run_upcast_f32(const KernelArgs& k, KernelFn kernel) {
  std::vector<AnyTensor> in(k.in.begin(), k.in.end()), out(k.out.begin(), k.out.end());
  for (AnyTensor& t : in) {
    if (!t.defined() || !is_half_float(t.dtype())) continue;
    AnyTensor f = AnyTensor::empty(t.shape(), DType::f32);
    cast_into_raw(t, f);
    t = f;
  }
  for (AnyTensor& t : out)
    if (t.defined() && is_half_float(t.dtype())) t = AnyTensor::empty(t.shape(), DType::f32);
  kernel(KernelArgs{k.op, in, out, k.attrs});
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!k.out[i].defined() || !is_half_float(k.out[i].dtype())) continue;
    MS_CHECK(k.out[i].is_contiguous(), BackendError, "{}: a {} output must be contiguous, got strides {}", k.op.name,
             k.out[i].dtype(), shape_str(k.out[i].strides()));
    cast_into_raw(out[i], k.out[i]);
  }
}
}  // namespace detail
#endif  // MS_IMPL_BODIES

// ---- untyped API ----------------------------------------------------------------------------

inline AnyTensor contiguous(const AnyTensor& x) { return x.is_contiguous() ? x : call1(copy_op, {x}); }
inline AnyTensor clone(const AnyTensor& x) { return call1(copy_op, {x}); }
inline AnyTensor reshape(const AnyTensor& x, const IntList& shape) {
  AnyTensor c = contiguous(x);
  return call1(reshape_op, {c}, Attrs{{"shape", detail::resolve_shape("reshape", x.shape(), shape).vec()}});
}
inline AnyTensor view(const AnyTensor& x, const IntList& shape) {
  MS_CHECK(x.is_contiguous(), ShapeError,
           "view: input {} with strides {} is not contiguous; use reshape() (which copies)", shape_str(x.shape()),
           shape_str(x.strides()));
  return call1(reshape_op, {x}, Attrs{{"shape", detail::resolve_shape("view", x.shape(), shape).vec()}});
}
inline AnyTensor permute(const AnyTensor& x, const IntList& perm) { return call1(permute_op, {x}, Attrs{{"perm", perm}}); }
inline AnyTensor transpose(const AnyTensor& x, std::int64_t a, std::int64_t b) {
  int r = x.dim();
  int ia = normalize_axis(a, r, "transpose"), ib = normalize_axis(b, r, "transpose");
  IntList p(r);
  for (int i = 0; i < r; ++i) p[i] = i;
  std::swap(p[ia], p[ib]);
  return permute(x, p);
}
/// x[start:end:step] along `dim` (Python rules: negative indices count from the end; an omitted
/// start or end, std::nullopt or ms::end, means the whole extent in the step's direction).
inline AnyTensor slice(const AnyTensor& x, std::int64_t dim, std::optional<std::int64_t> start,
                       std::optional<std::int64_t> end = std::nullopt, std::int64_t step = 1) {
  Attrs a{{"axis", dim}};  // the attribute names (axis, stop) of the frozen-model format
  if (start) a.set("start", *start);
  if (end) a.set("stop", *end);
  a.set("step", step);
  return call1(slice_op, {x}, a);
}
inline AnyTensor expand(const AnyTensor& x, const IntList& shape) { return call1(expand_op, {x}, Attrs{{"shape", shape}}); }
inline AnyTensor unsqueeze(const AnyTensor& x, std::int64_t axis) {
  int ax = normalize_axis(axis, x.dim() + 1, "unsqueeze");
  IntList s = x.shape().vec();
  s.insert(s.begin() + ax, 1);
  return reshape(x, s);
}
inline AnyTensor squeeze(const AnyTensor& x, std::int64_t axis) {
  int ax = normalize_axis(axis, x.dim(), "squeeze");
  MS_CHECK(x.shape()[ax] == 1, ShapeError, "squeeze: axis {} of shape {} has size {}, not 1", axis,
           shape_str(x.shape()), x.shape()[ax]);
  IntList s = x.shape().vec();
  s.erase(s.begin() + ax);
  return reshape(x, s);
}
inline AnyTensor squeeze(const AnyTensor& x) {
  IntList s;
  for (auto d : x.shape()) if (d != 1) s.push_back(d);
  return reshape(x, s);
}
inline AnyTensor flatten(const AnyTensor& x, std::int64_t start = 0, std::int64_t end = -1) {
  if (x.dim() == 0) return reshape(x, {1});
  int b = normalize_axis(start, x.dim(), "flatten"), e = normalize_axis(end, x.dim(), "flatten");
  MS_CHECK(b <= e, IndexError, "flatten: start axis {} is after end axis {}", start, end);
  IntList s;
  for (int i = 0; i < b; ++i) s.push_back(x.shape()[i]);
  std::int64_t m = 1;
  for (int i = b; i <= e; ++i) m *= x.shape()[i];
  s.push_back(m);
  for (int i = e + 1; i < x.dim(); ++i) s.push_back(x.shape()[i]);
  return reshape(x, s);
}
inline AnyTensor cast(const AnyTensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return call1(cast_op, {x}, Attrs{{"dtype", dtype}});
}

}  // namespace ms::ops

namespace ms {
/// "To the end" for slice: x.slice(0, 2, ms::end) is x[2:] (what Python writes x[2:]).
inline constexpr std::nullopt_t end = std::nullopt;

/// Converts a tensor to element type U (returns the input when it already is U).
template <Element U, Element T>
Tensor<U> cast(const Tensor<T>& x) { return ops::cast(x, dtype_v<U>); }
/// Broadcasts to `shape` without copying.
template <Element T>
Tensor<T> broadcast_to(const Tensor<T>& x, const Shape& shape) { return ops::expand(x, shape.vec()); }
}  // namespace ms
