#pragma once
// ONNX op rows, tensors: shapes and data movement (Reshape .. Pad), constants and generators, and
// Resize/Upsample as the interpolate op where it is exact, elsewhere as taps of index_select
// times weights.
#include "convert_base.hpp"

namespace ms::onnx::detail::conv {

namespace o = ms::ops;

// ---- shapes and data movement -----------------------------------------------------------------

inline std::vector<AnyTensor> Reshape(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList s = c.opset() < 5 ? c.aints("shape") : c.ints(1);
  const bool allowzero = c.ai("allowzero", 0) != 0;
  for (std::size_t i = 0; i < s.size(); ++i)
    if (s[i] == 0 && !allowzero) {
      if (static_cast<int>(i) >= x.dim()) c.fail("a 0 in shape beyond the input's rank");
      s[i] = x.shape()[static_cast<int>(i)];
    }
  return one(o::reshape(x, s));
}
inline std::vector<AnyTensor> Flatten(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  std::int64_t axis = c.ai("axis", 1);
  if (axis < -x.dim() || axis > x.dim()) c.fail(MS_FORMAT("axis {} is out of range for rank {}", axis, x.dim()));
  if (axis < 0) axis += x.dim();
  std::int64_t a = 1, b = 1;
  for (int i = 0; i < x.dim(); ++i) (i < axis ? a : b) *= x.shape()[i];
  return one(o::reshape(x, {a, b}));
}
inline std::vector<AnyTensor> Transpose(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList p = c.aints("perm");
  if (p.empty())
    for (int i = x.dim() - 1; i >= 0; --i) p.push_back(i);
  return one(o::permute(x, p));
}
inline IntList axes_input(const NodeCtx& c) {
  if (c.opset() >= 13) return c.has(1) ? c.ints(1) : IntList{};
  return c.aints("axes");
}
inline std::vector<AnyTensor> Squeeze(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList axes = axes_input(c);
  if (axes.empty()) return one(o::squeeze(x));
  for (auto& a : axes) a = axis_of(c, a, x.dim());
  IntList s;
  for (int i = 0; i < x.dim(); ++i) {
    const bool drop = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (drop && x.shape()[i] != 1) c.fail(MS_FORMAT("axis {} of shape {} is not 1", i, shape_str(x.shape())));
    if (!drop) s.push_back(x.shape()[i]);
  }
  return one(o::reshape(x, s));
}
inline std::vector<AnyTensor> Unsqueeze(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList axes = axes_input(c);
  const int r = x.dim() + static_cast<int>(axes.size());
  for (auto& a : axes) a = axis_of(c, a, r);
  std::sort(axes.begin(), axes.end());
  IntList s = x.shape().vec();
  for (auto a : axes) s.insert(s.begin() + a, 1);
  return one(o::reshape(x, s));
}
inline std::vector<AnyTensor> Concat(const NodeCtx& c) {
  std::vector<AnyTensor> xs;
  for (std::size_t i = 0; i < c.num_inputs(); ++i) xs.push_back(c.in(i));
  if (xs.empty()) c.fail("no inputs");
  return one(o::concat(xs, axis_of(c, c.ai("axis", c.opset() < 4 ? 1 : 0), xs[0].dim())));
}
inline std::vector<AnyTensor> Split(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, c.ai("axis", 0), x.dim());
  IntList sizes = c.opset() >= 13 ? (c.has(1) ? c.ints(1) : IntList{}) : c.aints("split");
  const auto n = static_cast<std::int64_t>(c.num_outputs());
  if (n < 1) c.fail("no outputs");
  if (sizes.empty()) {
    const std::int64_t len = x.shape()[axis];
    if (len % n != 0) c.fail(MS_FORMAT("axis of size {} does not split into {} equal parts", len, n));
    sizes.assign(static_cast<std::size_t>(n), len / n);
  }
  return o::split(x, sizes, axis);
}
inline std::vector<AnyTensor> Slice(const NodeCtx& c) {
  AnyTensor x = c.in(0);
  IntList starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = c.aints("starts");
    ends = c.aints("ends");
    axes = c.aints("axes");
  } else {
    starts = c.ints(1);
    ends = c.ints(2);
    if (c.has(3)) axes = c.ints(3);
    if (c.has(4)) steps = c.ints(4);
  }
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const int a = axis_of(c, axes[i], x.dim());
    const std::int64_t n = x.shape()[a];
    // ONNX clamps like NumPy; keep the bounds inside int64 after ms adds n to negatives.
    std::int64_t b = std::clamp<std::int64_t>(starts[i], -n - 1, n + 1);
    std::int64_t e = std::clamp<std::int64_t>(ends[i], -n - 1, n + 1);
    if (steps[i] == 0) c.fail("a step of 0");
    x = o::slice(x, a, b, e, steps[i]);
  }
  return one(x);
}
inline std::vector<AnyTensor> Expand(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList s = c.ints(1);
  const int r = std::max<int>(x.dim(), static_cast<int>(s.size()));
  IntList out(static_cast<std::size_t>(r));
  for (int i = 0; i < r; ++i) {
    const int xi = i - (r - x.dim()), si = i - (r - static_cast<int>(s.size()));
    const std::int64_t a = xi >= 0 ? x.shape()[xi] : 1, b = si >= 0 ? s[static_cast<std::size_t>(si)] : 1;
    if (a != b && a != 1 && b != 1) c.fail(MS_FORMAT("cannot broadcast {} to [{}]", shape_str(x.shape()), ::ms::detail::join_text(s, ", ")));
    out[static_cast<std::size_t>(i)] = a == 1 ? b : a;
  }
  return one(o::contiguous(o::expand(x, out)));
}
inline std::vector<AnyTensor> Tile(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList rep = c.ints(1);
  if (static_cast<int>(rep.size()) != x.dim()) c.fail("repeats must have one entry per axis");
  return one(o::tile(x, rep));
}
/// Indices with negatives wrapped (n + i), as int64.
inline AnyTensor wrap_index(const NodeCtx& c, std::size_t i, std::int64_t n) {
  AnyTensor idx = c.in(i);
  if (idx.dtype() != DType::i64 && idx.dtype() != DType::i32) c.fail(MS_FORMAT("indices of dtype {}", idx.dtype()));
  if (c.is_const(i)) {
    IntList v = c.ints(i);
    for (auto& k : v) {
      if (k < -n || k >= n) c.fail(MS_FORMAT("index {} is out of range for an axis of size {}", k, n));
      if (k < 0) k += n;
    }
    AnyTensor t = i64_tensor(v);
    return o::reshape(t, idx.shape().vec());
  }
  idx = o::cast(idx, DType::i64);
  return o::where(o::lt(idx, 0.0), o::add(idx, static_cast<double>(n)), idx);
}
inline std::vector<AnyTensor> Gather(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, c.ai("axis", 0), x.dim());
  AnyTensor idx = wrap_index(c, 1, x.shape()[axis]);
  AnyTensor flat = o::index_select(x, axis, o::reshape(idx, {idx.numel()}));
  IntList s;
  for (int i = 0; i < axis; ++i) s.push_back(x.shape()[i]);
  for (auto d : idx.shape()) s.push_back(d);
  for (int i = axis + 1; i < x.dim(); ++i) s.push_back(x.shape()[i]);
  return one(o::reshape(flat, s));
}
inline std::vector<AnyTensor> GatherElements(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, c.ai("axis", 0), x.dim());
  return one(o::gather(x, axis, wrap_index(c, 1, x.shape()[axis])));
}
inline std::vector<AnyTensor> Shape_(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int r = x.dim();
  std::int64_t b = c.ai("start", 0), e = c.ai("end", r);
  if (b < 0) b += r;
  if (e < 0) e += r;
  b = std::clamp<std::int64_t>(b, 0, r);
  e = std::clamp<std::int64_t>(e, 0, r);
  IntList v;
  for (std::int64_t i = b; i < e; ++i) v.push_back(x.shape()[static_cast<int>(i)]);
  return one(i64_tensor(v));
}
inline std::vector<AnyTensor> Size(const NodeCtx& c) { return one(i64_tensor({c.in(0).numel()}, true)); }
inline std::vector<AnyTensor> Constant(const NodeCtx& c) {
  const pb::NodeProto& n = c.node();
  if (n.attribute_size() != 1) c.fail("a Constant needs exactly one value attribute");
  const pb::AttributeProto& a = n.attribute(0);
  if (a.name() == "value") return one(to_tensor(a.t()));
  if (a.name() == "value_float") return one(o::full(Shape{}, static_cast<double>(a.f()), DType::f32));
  if (a.name() == "value_int") return one(i64_tensor({a.i()}, true));
  if (a.name() == "value_ints") return one(i64_tensor(IntList(a.ints().begin(), a.ints().end())));
  if (a.name() == "value_floats") {
    AnyTensor t = AnyTensor::empty(Shape{a.floats_size()}, DType::f32);
    std::copy(a.floats().begin(), a.floats().end(), static_cast<float*>(t.raw_data()));
    return one(t);
  }
  c.fail(MS_FORMAT("attribute {}", a.name()));
}
inline std::vector<AnyTensor> ConstantOfShape(const NodeCtx& c) {
  IntList s = c.ints(0);
  AnyTensor v = c.has_attr("value") ? to_tensor(c.attr("value")->t()) : o::zeros(Shape{1}, DType::f32);
  if (v.numel() != 1) c.fail("value must hold one element");
  AnyTensor out = AnyTensor::empty(Shape(s), v.dtype());
  const std::size_t es = dtype_size(v.dtype());
  for (std::int64_t i = 0; i < out.numel(); ++i)
    std::memcpy(static_cast<char*>(out.raw_data()) + i * static_cast<std::int64_t>(es), v.raw_data(), es);
  return one(out);
}
inline std::vector<AnyTensor> Range(const NodeCtx& c) {
  const AnyTensor& s = c.in(0);
  const double a = c.scalar(0), b = c.scalar(1), d = c.scalar(2);
  if (d == 0) c.fail("delta 0");
  const auto n = static_cast<std::int64_t>(std::max(0.0, std::ceil((b - a) / d)));
  AnyTensor out = AnyTensor::empty(Shape{n}, s.dtype());
  visit_dtype(s.dtype(), [&]<class T>() {
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      T* p = static_cast<T*>(out.raw_data());
      for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<T>(a) + static_cast<T>(i) * static_cast<T>(d));
    } else {
      c.fail(MS_FORMAT("dtype {}", s.dtype()));
    }
  });
  return one(out);
}
inline std::vector<AnyTensor> OneHot(const NodeCtx& c) {
  const std::int64_t depth = static_cast<std::int64_t>(c.scalar(1));
  AnyTensor idx = c.in(0);
  if (!is_float(idx.dtype())) idx = o::cast(idx, DType::i64);
  else idx = o::cast(idx, DType::i64);
  idx = o::where(o::lt(idx, 0.0), o::add(idx, static_cast<double>(depth)), idx);
  // Out-of-range indices give all-off rows: map them to an extra class that is cut away.
  AnyTensor bad = o::logical_or(o::lt(idx, 0.0), o::ge(idx, static_cast<double>(depth)));
  idx = o::where(bad, o::full(Shape{}, static_cast<double>(depth), DType::i64), idx);
  AnyTensor oh = o::slice(o::one_hot(idx, depth + 1, DType::b8), -1, 0, depth);
  const AnyTensor& vals = c.in(2);
  AnyTensor off = o::slice(vals, 0, 0, 1), on = o::slice(vals, 0, 1, 2);
  AnyTensor y = o::where(oh, o::reshape(on, {}), o::reshape(off, {}));
  const int r = y.dim();
  const int axis = axis_of(c, c.ai("axis", -1), r);
  if (axis != r - 1) {
    IntList p;
    for (int i = 0; i < r - 1; ++i) p.push_back(i);
    p.insert(p.begin() + axis, r - 1);
    y = o::contiguous(o::permute(y, p));
  }
  return one(y);
}
inline std::vector<AnyTensor> Trilu(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  if (x.dim() < 2) c.fail("input of rank < 2");
  const std::int64_t k = c.has(1) ? static_cast<std::int64_t>(c.scalar(1)) : 0;
  return one(c.ai("upper", 1) != 0 ? o::triu(x, k) : o::tril(x, k));
}
inline std::vector<AnyTensor> CumSum(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, static_cast<std::int64_t>(c.scalar(1)), x.dim());
  return one(o::cumsum(x, axis, c.ai("exclusive", 0) != 0, c.ai("reverse", 0) != 0));
}
/// Pad's modes on ms's pad: "edge" is ms's "replicate".
inline std::vector<AnyTensor> Pad(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const std::string mode = c.as("mode", "constant");
  IntList pads = c.opset() < 11 ? c.aints("pads") : c.ints(1);
  double value = c.opset() < 11 ? c.af("value", 0.0) : (c.has(2) ? c.scalar(2) : 0.0);
  if (c.has(3)) c.fail("the axes input");
  const int r = x.dim();
  if (static_cast<int>(pads.size()) != 2 * r) c.fail(MS_FORMAT("{} pads for rank {}", pads.size(), r));
  IntList b(pads.begin(), pads.begin() + r), e(pads.begin() + r, pads.end());
  if (mode == "constant") return one(o::pad_dims(x, b, e, "constant", value));
  if (mode == "edge") return one(o::pad_dims(x, b, e, "replicate"));
  if (mode == "reflect") return one(o::pad_dims(x, b, e, "reflect"));
  c.fail(MS_FORMAT("mode \"{}\"", mode));
}
inline std::vector<AnyTensor> DepthToSpace(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  if (x.dim() != 4) c.fail("input of rank other than 4");
  const std::int64_t b = c.ai("blocksize", 0), N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (b <= 0 || C % (b * b)) c.fail("blocksize must divide the channels");
  const bool crd = c.as("mode", "DCR") == "CRD";
  AnyTensor t = crd ? o::permute(o::reshape(x, {N, C / (b * b), b, b, H, W}), {0, 1, 4, 2, 5, 3})
                    : o::permute(o::reshape(x, {N, b, b, C / (b * b), H, W}), {0, 3, 4, 1, 5, 2});
  return one(o::reshape(t, {N, C / (b * b), H * b, W * b}));
}
inline std::vector<AnyTensor> SpaceToDepth(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  if (x.dim() != 4) c.fail("input of rank other than 4");
  const std::int64_t b = c.ai("blocksize", 0), N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (b <= 0 || H % b || W % b) c.fail("blocksize must divide height and width");
  AnyTensor t = o::permute(o::reshape(x, {N, C, H / b, b, W / b, b}), {0, 3, 5, 1, 2, 4});
  return one(o::reshape(t, {N, C * b * b, H / b, W / b}));
}
inline std::vector<AnyTensor> EyeLike(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  if (x.dim() != 2) c.fail("input of rank other than 2");
  DType d = x.dtype();
  if (c.has_attr("dtype")) {
    auto dd = dtype_from_onnx(static_cast<int>(c.ai("dtype", 1)));
    if (!dd) c.fail("dtype without an ms equivalent");
    d = *dd;
  }
  const std::int64_t k = c.ai("k", 0), n = x.shape()[0], m = x.shape()[1];
  AnyTensor mask = AnyTensor::empty(Shape{n, m}, DType::b8);
  bool* p = static_cast<bool*>(mask.raw_data());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) p[i * m + j] = j - i == k;
  Untraced u;
  return one(o::cast(mask, d));
}

// ---- resizing ---------------------------------------------------------------------------------

/// Resize along one axis: each output coordinate maps to a source coordinate (the coordinate
/// transformation mode), read as taps of the input (index_select) times per-output weights.
struct ResizeSpec {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
};
inline AnyTensor resize_axis(const NodeCtx& c, const AnyTensor& x, int axis, std::int64_t out, double scale,
                             double roi_start, double roi_end, const ResizeSpec& r) {
  const std::int64_t in = x.shape()[axis];
  if (in == 0 || out == 0) c.fail("resizing an empty axis");
  std::vector<double> src(static_cast<std::size_t>(out));
  std::vector<bool> outside(static_cast<std::size_t>(out), false);
  // The resized length in the formulas is in * scale, unrounded (the ONNX reference).
  const double len = static_cast<double>(in) * scale;
  for (std::int64_t i = 0; i < out; ++i) {
    const double xr = static_cast<double>(i);
    double xo;
    if (r.coord == "half_pixel") xo = (xr + 0.5) / scale - 0.5;
    else if (r.coord == "pytorch_half_pixel") xo = len > 1 ? (xr + 0.5) / scale - 0.5 : 0;
    else if (r.coord == "align_corners") xo = len == 1 ? 0 : xr * static_cast<double>(in - 1) / (len - 1);
    else if (r.coord == "asymmetric") xo = xr / scale;
    else if (r.coord == "tf_half_pixel_for_nn") xo = (xr + 0.5) / scale;
    else if (r.coord == "tf_crop_and_resize") {
      xo = len > 1 ? roi_start * static_cast<double>(in - 1) +
                         xr * (roi_end - roi_start) * static_cast<double>(in - 1) / (len - 1)
                   : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
      outside[static_cast<std::size_t>(i)] = xo < 0 || xo > static_cast<double>(in - 1);
    } else c.fail(MS_FORMAT("coordinate_transformation_mode \"{}\"", r.coord));
    src[static_cast<std::size_t>(i)] = xo;
  }
  auto clampi = [&](std::int64_t k) { return std::clamp<std::int64_t>(k, 0, in - 1); };
  std::vector<IntList> idx;
  std::vector<std::vector<double>> wts;
  if (r.mode == "nearest") {
    IntList k(static_cast<std::size_t>(out));
    for (std::int64_t i = 0; i < out; ++i) {
      const double xo = src[static_cast<std::size_t>(i)];
      double v;
      if (r.nearest == "round_prefer_floor") v = xo == std::floor(xo) + 0.5 ? std::floor(xo) : std::round(xo);
      else if (r.nearest == "round_prefer_ceil") v = std::round(xo);
      else if (r.nearest == "floor") v = std::floor(xo);
      else if (r.nearest == "ceil") v = std::ceil(xo);
      else c.fail(MS_FORMAT("nearest_mode \"{}\"", r.nearest));
      k[static_cast<std::size_t>(i)] = clampi(static_cast<std::int64_t>(v));
    }
    idx.push_back(k);
    wts.push_back(std::vector<double>(static_cast<std::size_t>(out), 1.0));
  } else if (r.mode == "linear" || r.mode == "cubic") {
    const bool cubic = r.mode == "cubic";
    const int taps = cubic ? 4 : 2;
    idx.assign(static_cast<std::size_t>(taps), IntList(static_cast<std::size_t>(out)));
    wts.assign(static_cast<std::size_t>(taps), std::vector<double>(static_cast<std::size_t>(out)));
    const double A = r.cubic_a;
    for (std::int64_t i = 0; i < out; ++i) {
      const double xo = src[static_cast<std::size_t>(i)];
      const double f = std::floor(xo), t = xo - f;
      const auto base = static_cast<std::int64_t>(f) - (cubic ? 1 : 0);
      double w[4];
      if (cubic) {
        w[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
        w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
        w[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
        w[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
      } else {
        w[0] = 1 - t;
        w[1] = t;
      }
      double total = 0;
      for (int k = 0; k < taps; ++k) {
        const std::int64_t j = base + k;
        if (r.exclude_outside && (j < 0 || j >= in)) w[k] = 0;
        total += w[k];
      }
      for (int k = 0; k < taps; ++k) {
        idx[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)] = clampi(base + k);
        wts[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)] = r.exclude_outside && total != 0 ? w[k] / total : w[k];
      }
    }
  } else {
    c.fail(MS_FORMAT("mode \"{}\"", r.mode));
  }
  IntList wshape(static_cast<std::size_t>(x.dim()), 1);
  wshape[static_cast<std::size_t>(axis)] = out;
  auto vec = [&](const std::vector<double>& v) {
    AnyTensor t = AnyTensor::empty(Shape(wshape), x.dtype());
    visit_dtype(x.dtype(), [&]<class T>() {
      if constexpr (std::is_floating_point_v<T>)
        for (std::size_t k = 0; k < v.size(); ++k) static_cast<T*>(t.raw_data())[k] = static_cast<T>(v[k]);
    });
    return t;
  };
  AnyTensor y;
  for (std::size_t k = 0; k < idx.size(); ++k) {
    AnyTensor tap = o::index_select(x, axis, i64_tensor(idx[k]));
    if (r.mode != "nearest") tap = o::mul(tap, vec(wts[k]));
    y = y.defined() ? o::add(y, tap) : tap;
  }
  if (r.coord == "tf_crop_and_resize" && std::find(outside.begin(), outside.end(), true) != outside.end()) {
    AnyTensor m = AnyTensor::empty(Shape(wshape), DType::b8);
    for (std::size_t k = 0; k < outside.size(); ++k) static_cast<bool*>(m.raw_data())[k] = outside[k];
    y = o::where(m, o::full(Shape{}, r.extrapolation, x.dtype()), y);
  }
  return y;
}
/// The interpolate op for the resizings that are exactly PyTorch's: of the last two axes of
/// a float NCHW tensor, nearest with asymmetric coordinates and floor rounding, linear with
/// half_pixel (pytorch_half_pixel when no axis shrinks to one element) or align_corners
/// (when the resized lengths are whole). Empty when the node is not one of those.
inline std::optional<AnyTensor> resize_as_interpolate(const NodeCtx& c, const AnyTensor& x,
                                                      const std::vector<double>& scales, const IntList& sizes,
                                                      const ResizeSpec& r) {
  if (x.dim() != 4 || !is_float(x.dtype()) || c.ai("antialias", 0) != 0 || r.exclude_outside) return std::nullopt;
  if (!scales.empty() && scales.size() != 4) return std::nullopt;
  if (!sizes.empty() && sizes.size() != 4) return std::nullopt;
  if (scales.empty() == sizes.empty()) return std::nullopt;
  std::int64_t out[4];
  for (int a = 0; a < 4; ++a) {
    const std::int64_t in = x.shape()[a];
    if (in < 1) return std::nullopt;
    if (!sizes.empty()) {
      out[a] = sizes[static_cast<std::size_t>(a)];
    } else {
      const double sc = scales[static_cast<std::size_t>(a)];
      if (!(sc > 0) || !std::isfinite(sc)) return std::nullopt;
      out[a] = static_cast<std::int64_t>(std::floor(static_cast<double>(in) * sc));
      if (a < 2 && sc != 1.0) return std::nullopt;
      // torch copies when the size stays (and halves indices when it doubles) whatever the scale
      if ((out[a] == in && sc != 1.0) || (r.mode == "nearest" && out[a] == 2 * in && sc != 2.0)) return std::nullopt;
    }
    if (out[a] < 1 || (a < 2 && out[a] != in)) return std::nullopt;
  }
  bool align = false;
  if (r.mode == "nearest") {
    if (r.coord != "asymmetric" || r.nearest != "floor") return std::nullopt;
  } else if (r.mode == "linear") {
    if (r.coord == "align_corners") {
      align = true;
      for (int a = 2; a < 4 && !scales.empty(); ++a)
        if (static_cast<double>(x.shape()[a]) * scales[static_cast<std::size_t>(a)] != static_cast<double>(out[a]))
          return std::nullopt;
    } else if (r.coord == "pytorch_half_pixel") {
      if (out[2] < 2 || out[3] < 2) return std::nullopt;
    } else if (r.coord != "half_pixel") {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  const char* mode = r.mode == "nearest" ? "nearest" : "bilinear";
  if (align) return o::interpolate(x, o::Int2(out[2], out[3]), std::nullopt, mode, true);
  if (!sizes.empty()) return o::interpolate(x, o::Int2(out[2], out[3]), std::nullopt, mode);
  return o::interpolate(x, std::nullopt, o::Scale2(scales[2], scales[3]), mode);
}
inline std::vector<AnyTensor> resize_common(const NodeCtx& c, const std::vector<double>& scales_in, const IntList& sizes,
                                            const std::vector<double>& roi, const ResizeSpec& r) {
  AnyTensor x = c.in(0);
  if (r.coord != "tf_crop_and_resize")
    if (std::optional<AnyTensor> y = resize_as_interpolate(c, x, scales_in, sizes, r)) return one(*y);
  if (!is_float(x.dtype()) && r.mode != "nearest") need_float(c, x);
  if (!is_float(x.dtype()) && r.mode == "nearest" && x.dtype() != DType::i32 && x.dtype() != DType::i64)
    need_float(c, x);
  const int rank = x.dim();
  if (!scales_in.empty() && static_cast<int>(scales_in.size()) != rank) c.fail("scales must have one entry per axis");
  if (!sizes.empty() && static_cast<int>(sizes.size()) != rank) c.fail("sizes must have one entry per axis");
  if (scales_in.empty() && sizes.empty()) c.fail("neither scales nor sizes is given");
  for (int a = 0; a < rank; ++a) {
    const std::int64_t in = x.shape()[a];
    std::int64_t out;
    double scale;
    if (!sizes.empty()) {
      out = sizes[static_cast<std::size_t>(a)];
      scale = static_cast<double>(out) / static_cast<double>(in);
    } else {
      scale = scales_in[static_cast<std::size_t>(a)];
      if (!(scale > 0)) c.fail(MS_FORMAT("scale {} must be positive", scale));
      out = static_cast<std::int64_t>(std::floor(static_cast<double>(in) * scale));
    }
    const double rs = roi.empty() ? 0 : roi[static_cast<std::size_t>(a)];
    const double re = roi.empty() ? 1 : roi[static_cast<std::size_t>(a + rank)];
    if (out == in && scale == 1.0 && r.coord != "tf_crop_and_resize") continue;
    x = resize_axis(c, x, a, out, scale, rs, re, r);
  }
  return one(x);
}
inline std::vector<AnyTensor> Resize(const NodeCtx& c) {
  ResizeSpec r;
  r.mode = c.as("mode", "nearest");
  r.coord = c.as("coordinate_transformation_mode", c.opset() < 11 ? "asymmetric" : "half_pixel");
  r.nearest = c.as("nearest_mode", c.opset() < 11 ? "floor" : "round_prefer_floor");
  r.cubic_a = c.af("cubic_coeff_a", -0.75);
  r.exclude_outside = c.ai("exclude_outside", 0) != 0;
  r.extrapolation = c.af("extrapolation_value", 0.0);
  if (c.opset() < 11) return resize_common(c, c.doubles(1), {}, {}, r);
  std::vector<double> roi, scales;
  IntList sizes;
  if (c.has(1) && c.in(1).numel() > 0) roi = c.doubles(1);
  if (c.has(2) && c.in(2).numel() > 0) scales = c.doubles(2);
  if (c.has(3) && c.in(3).numel() > 0) sizes = c.ints(3);
  if (!roi.empty() && static_cast<int>(roi.size()) != 2 * c.in(0).dim()) c.fail("roi must have 2 entries per axis");
  return resize_common(c, scales, sizes, r.coord == "tf_crop_and_resize" ? roi : std::vector<double>{}, r);
}
inline std::vector<AnyTensor> Upsample(const NodeCtx& c) {
  ResizeSpec r;
  r.mode = c.as("mode", "nearest");
  r.coord = "asymmetric";
  r.nearest = "floor";
  return resize_common(c, c.opset() < 9 ? c.afloats("scales") : c.doubles(1), {}, {}, r);
}

}  // namespace ms::onnx::detail::conv
