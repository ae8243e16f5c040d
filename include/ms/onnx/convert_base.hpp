#pragma once
// ONNX op -> ms ops, the shared part: what a conversion row sees of its node (NodeCtx), constant
// folding (Untraced) and the helpers of several rows (padding, window geometry). The rows live in
// convert_math/nn/tensor/index.hpp and the table that names them in convert.hpp; each row builds
// its ONNX op from registered ms ops (ms::ops::add, conv2d, reshape, ...) on the node's inputs.

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "../ms.hpp"
#include "proto.hpp"

namespace ms::onnx {

using ops::IntList;

/// A value of the ONNX graph while importing: the tensor standing for it (traced, or a host
/// constant whose contents are known at load time).
struct Val {
  AnyTensor t;
  bool is_const = false;
};

/// Runs ms ops without recording them (constant folding during import).
class Untraced {
 public:
  Untraced() : tracer_(ops::detail::tracer), hook_(ms::detail::host_read_hook) {
    ops::detail::tracer = nullptr;
    ms::detail::host_read_hook = nullptr;
  }
  ~Untraced() {
    ops::detail::tracer = tracer_;
    ms::detail::host_read_hook = hook_;
  }
  Untraced(const Untraced&) = delete;
  Untraced& operator=(const Untraced&) = delete;

 private:
  ops::Tracer* tracer_;
  ms::detail::HostReadHook hook_;
};

/// What a conversion row sees: the node, its opset, its inputs and attributes.
class NodeCtx {
 public:
  NodeCtx(const pb::NodeProto& node, int opset, std::vector<const Val*> inputs, std::string name)
      : node_(node), opset_(opset), in_(std::move(inputs)), name_(std::move(name)) {}

  int opset() const { return opset_; }
  const pb::NodeProto& node() const { return node_; }
  const std::string& name() const { return name_; }
  std::size_t num_inputs() const { return in_.size(); }
  std::size_t num_outputs() const { return static_cast<std::size_t>(node_.output_size()); }
  /// True when output i is used (named).
  bool wants_output(int i) const { return i < node_.output_size() && !node_.output(i).empty(); }
  bool has(std::size_t i) const { return i < in_.size() && in_[i] != nullptr; }
  const AnyTensor& in(std::size_t i) const {
    if (!has(i)) fail(MS_FORMAT("input {} is required", i));
    return in_[i]->t;
  }
  bool is_const(std::size_t i) const { return has(i) && in_[i]->is_const; }

  /// The values of a constant integer input (int32 or int64, any shape, row-major).
  IntList ints(std::size_t i) const {
    const AnyTensor& t = need_const(i);
    IntList v(static_cast<std::size_t>(t.numel()));
    const AnyTensor c = ops::detail::contiguous_raw(t);
    if (t.dtype() == DType::i64) std::copy_n(static_cast<const std::int64_t*>(c.raw_data()), v.size(), v.begin());
    else if (t.dtype() == DType::i32) std::copy_n(static_cast<const std::int32_t*>(c.raw_data()), v.size(), v.begin());
    else fail(MS_FORMAT("input {} must be int32 or int64, got {}", i, t.dtype()));
    return v;
  }
  /// The values of a constant numeric input as doubles.
  std::vector<double> doubles(std::size_t i) const {
    const AnyTensor& t = need_const(i);
    const AnyTensor c = ops::detail::contiguous_raw(t);
    std::vector<double> v(static_cast<std::size_t>(t.numel()));
    visit_dtype(t.dtype(), [&]<class T>() {
      if constexpr (std::is_arithmetic_v<T>) {
        const T* p = static_cast<const T*>(c.raw_data());
        for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(p[k]);
      } else {
        const T* p = static_cast<const T*>(c.raw_data());
        for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<double>(static_cast<float>(p[k]));
      }
    });
    return v;
  }
  double scalar(std::size_t i) const {
    auto v = doubles(i);
    if (v.size() != 1) fail(MS_FORMAT("input {} must hold one value, has {}", i, v.size()));
    return v[0];
  }

  const pb::AttributeProto* attr(std::string_view key) const {
    for (const auto& a : node_.attribute())
      if (a.name() == key) return &a;
    return nullptr;
  }
  bool has_attr(std::string_view key) const { return attr(key) != nullptr; }
  std::int64_t ai(std::string_view key, std::int64_t dflt) const {
    const auto* a = attr(key);
    return a ? a->i() : dflt;
  }
  double af(std::string_view key, double dflt) const {
    const auto* a = attr(key);
    return a ? static_cast<double>(a->f()) : dflt;
  }
  IntList aints(std::string_view key, IntList dflt = {}) const {
    const auto* a = attr(key);
    if (!a) return dflt;
    return IntList(a->ints().begin(), a->ints().end());
  }
  std::vector<double> afloats(std::string_view key) const {
    const auto* a = attr(key);
    if (!a) return {};
    return std::vector<double>(a->floats().begin(), a->floats().end());
  }
  std::string as(std::string_view key, std::string dflt) const {
    const auto* a = attr(key);
    return a ? a->s() : dflt;
  }

  /// Throws UnsupportedError naming this node.
  [[noreturn]] void fail(const std::string& reason) const {
    throw UnsupportedError(name_, node_.op_type(), opset_, reason);
  }
  /// Requires that attribute `key` is absent or has value `want` (int attributes).
  void only(std::string_view key, std::int64_t want) const {
    if (ai(key, want) != want) fail(MS_FORMAT("attribute {}={} is not supported", key, ai(key, want)));
  }

  const AnyTensor& need_const(std::size_t i) const {
    if (!has(i)) fail(MS_FORMAT("input {} is required", i));
    if (!in_[i]->is_const) {
      const std::string nm = static_cast<int>(i) < node_.input_size() ? node_.input(static_cast<int>(i)) : "?";
      throw ConstantRequired(name_, node_.op_type(), opset_, nm);
    }
    return in_[i]->t;
  }

 private:
  const pb::NodeProto& node_;
  int opset_;
  std::vector<const Val*> in_;
  std::string name_;
};

using ConvertFn = std::vector<AnyTensor> (*)(const NodeCtx& c);

namespace detail::conv {

namespace o = ms::ops;

inline int axis_of(const NodeCtx& c, std::int64_t a, int rank) {
  if (a < -rank || a >= rank) c.fail(MS_FORMAT("axis {} is out of range for rank {}", a, rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}
inline AnyTensor i64_tensor(const IntList& v, bool as_scalar = false) {
  AnyTensor t = AnyTensor::empty(as_scalar ? Shape{} : Shape{static_cast<std::int64_t>(v.size())}, DType::i64);
  std::copy(v.begin(), v.end(), static_cast<std::int64_t*>(t.raw_data()));
  return t;
}
inline bool is_float(DType d) { return d == DType::f32 || d == DType::f64; }
inline void need_float(const NodeCtx& c, const AnyTensor& x) {
  if (!is_float(x.dtype())) c.fail(MS_FORMAT("dtype {} is not supported (float32 and float64 are)", x.dtype()));
}
inline std::vector<AnyTensor> one(AnyTensor t) { return {std::move(t)}; }
/// Requires input i to have rank r (lo..hi with the second form).
inline void need_rank(const NodeCtx& c, std::size_t i, int lo, int hi = -1) {
  const int r = c.in(i).dim();
  if (r < lo || r > (hi < 0 ? lo : hi))
    c.fail(MS_FORMAT("input {} has rank {} (expected {})", i, r, hi < 0 || hi == lo ? MS_FORMAT("{}", lo) : MS_FORMAT("{} to {}", lo, hi)));
}
/// Reshapes a per-channel (C,) tensor to (C, 1, ...) for broadcasting against rank `rank` from axis 1.
inline AnyTensor channel(const AnyTensor& v, int rank) {
  IntList s{v.numel()};
  for (int i = 2; i < rank; ++i) s.push_back(1);
  return o::reshape(v, s);
}

/// Pads `x` with `value` (negative pads crop): begins[k], ends[k] for axis k.
inline AnyTensor pad_constant(const AnyTensor& x, const IntList& begins, const IntList& ends, double value) {
  if (std::all_of(begins.begin(), begins.end(), [](auto v) { return v == 0; }) &&
      std::all_of(ends.begin(), ends.end(), [](auto v) { return v == 0; }))
    return x;
  return o::pad_dims(x, begins, ends, "constant", value);
}

/// Spatial geometry of Conv and the pools: kernel, strides, dilations and explicit begin/end
/// pads (auto_pad resolved), for the trailing `nd` axes of x.
struct Window {
  IntList k, s, d, pb, pe;
};
inline Window window(const NodeCtx& c, const Shape& xs, const IntList& kernel, int nd, bool ceil_mode = false) {
  Window w;
  w.k = kernel;
  w.s = c.aints("strides", IntList(nd, 1));
  w.d = c.aints("dilations", IntList(nd, 1));
  IntList pads = c.aints("pads", IntList(2 * nd, 0));
  if (static_cast<int>(w.k.size()) != nd || static_cast<int>(w.s.size()) != nd || static_cast<int>(w.d.size()) != nd ||
      static_cast<int>(pads.size()) != 2 * nd)
    c.fail("kernel_shape, strides, dilations or pads do not match the spatial rank");
  w.pb.assign(pads.begin(), pads.begin() + nd);
  w.pe.assign(pads.begin() + nd, pads.end());
  const std::string ap = c.as("auto_pad", "NOTSET");
  for (int i = 0; i < nd; ++i) {
    const std::int64_t in = xs[xs.rank() - nd + i];
    const std::int64_t ek = (w.k[i] - 1) * w.d[i] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const std::int64_t out = (in + w.s[i] - 1) / w.s[i];
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * w.s[i] + ek - in);
      w.pb[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pe[i] = total - w.pb[i];
    } else if (ap == "VALID") {
      w.pb[i] = w.pe[i] = 0;
    } else if (ap != "NOTSET") {
      c.fail(MS_FORMAT("auto_pad \"{}\"", ap));
    }
    if (ceil_mode) {
      const std::int64_t span = in + w.pb[i] + w.pe[i] - ek;
      std::int64_t out = (span + w.s[i] - 1) / w.s[i] + 1;
      // The last window must start inside the input or its left padding (PyTorch, ONNX).
      if ((out - 1) * w.s[i] >= in + w.pb[i]) --out;
      const std::int64_t extra = (out - 1) * w.s[i] + ek - (in + w.pb[i] + w.pe[i]);
      if (extra > 0) w.pe[i] += extra;
    }
  }
  return w;
}

}  // namespace detail::conv
}  // namespace ms::onnx
