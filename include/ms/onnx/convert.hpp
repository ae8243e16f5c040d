#pragma once
// ONNX op -> ms ops: one row per ONNX op type, each a function that builds the op from registered
// ms ops (ms::ops::add, conv2d, reshape, ...) on the node's inputs. The importer (onnx/import.hpp)
// runs the rows inside a graph capture, so what a row computes is what the graph records; a row
// whose inputs are all constants runs untraced, and its results become constants (shape arithmetic
// of exported models folds away at load). A row that meets an attribute, mode or dtype ms cannot
// honour throws UnsupportedError with the reason: never a silent approximation.

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
    if (!has(i)) fail(fmt::format("input {} is required", i));
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
    else fail(fmt::format("input {} must be int32 or int64, got {}", i, t.dtype()));
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
    if (v.size() != 1) fail(fmt::format("input {} must hold one value, has {}", i, v.size()));
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
    if (ai(key, want) != want) fail(fmt::format("attribute {}={} is not supported", key, ai(key, want)));
  }

  const AnyTensor& need_const(std::size_t i) const {
    if (!has(i)) fail(fmt::format("input {} is required", i));
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
  if (a < -rank || a >= rank) c.fail(fmt::format("axis {} is out of range for rank {}", a, rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}
inline AnyTensor i64_tensor(const IntList& v, bool as_scalar = false) {
  AnyTensor t = AnyTensor::empty(as_scalar ? Shape{} : Shape{static_cast<std::int64_t>(v.size())}, DType::i64);
  std::copy(v.begin(), v.end(), static_cast<std::int64_t*>(t.raw_data()));
  return t;
}
inline bool is_float(DType d) { return d == DType::f32 || d == DType::f64; }
inline void need_float(const NodeCtx& c, const AnyTensor& x) {
  if (!is_float(x.dtype())) c.fail(fmt::format("dtype {} is not supported (float32 and float64 are)", x.dtype()));
}
inline std::vector<AnyTensor> one(AnyTensor t) { return {std::move(t)}; }
/// Requires input i to have rank r (lo..hi with the second form).
inline void need_rank(const NodeCtx& c, std::size_t i, int lo, int hi = -1) {
  const int r = c.in(i).dim();
  if (r < lo || r > (hi < 0 ? lo : hi))
    c.fail(fmt::format("input {} has rank {} (expected {})", i, r, hi < 0 || hi == lo ? fmt::format("{}", lo) : fmt::format("{} to {}", lo, hi)));
}
/// Reshapes a per-channel (C,) tensor to (C, 1, ...) for broadcasting against rank `rank` from axis 1.
inline AnyTensor channel(const AnyTensor& v, int rank) {
  IntList s{v.numel()};
  for (int i = 2; i < rank; ++i) s.push_back(1);
  return o::reshape(v, s);
}

/// Pads `x` with `value` (negative pads crop): begins[k], ends[k] for axis k.
inline AnyTensor pad_constant(AnyTensor x, const IntList& begins, const IntList& ends, double value) {
  for (int a = 0; a < x.dim(); ++a) {
    std::int64_t b = begins[a], e = ends[a];
    if (b < 0) { x = o::slice(x, a, -b, x.shape()[a]); b = 0; }
    if (e < 0) { x = o::slice(x, a, 0, x.shape()[a] + e); e = 0; }
    if (b == 0 && e == 0) continue;
    std::vector<AnyTensor> parts;
    IntList s = x.shape().vec();
    if (b > 0) { s[a] = b; parts.push_back(o::full(Shape(s), value, x.dtype())); }
    parts.push_back(x);
    if (e > 0) { s[a] = e; parts.push_back(o::full(Shape(s), value, x.dtype())); }
    x = o::concat(parts, a);
  }
  return x;
}
/// Pads by repeating the edge ("edge") or mirroring without the edge ("reflect").
inline AnyTensor pad_border(const NodeCtx& c, AnyTensor x, const IntList& begins, const IntList& ends, bool reflect) {
  for (int a = 0; a < x.dim(); ++a) {
    std::int64_t b = begins[a], e = ends[a];
    if (b < 0 || e < 0) c.fail("negative pads are supported in constant mode only");
    if (b == 0 && e == 0) continue;
    const std::int64_t n = x.shape()[a];
    if (n == 0) c.fail("padding an empty axis in edge or reflect mode");
    if (reflect && (b >= n || e >= n)) c.fail(fmt::format("reflect pads {} and {} must be less than the size {}", b, e, n));
    std::vector<AnyTensor> parts;
    auto rep = [&](std::int64_t at, std::int64_t k) {
      IntList s = x.shape().vec();
      s[a] = k;
      return o::expand(o::slice(x, a, at, at + 1), s);
    };
    if (b > 0) parts.push_back(reflect ? o::slice(x, a, b, 0, -1) : rep(0, b));
    parts.push_back(x);
    // A negative stop would count from the end: -(n + 1) stops before index 0.
    if (e > 0) parts.push_back(reflect ? o::slice(x, a, n - 2, n - 2 - e >= 0 ? n - 2 - e : -(n + 1), -1) : rep(n - 1, e));
    x = o::concat(parts, a);
  }
  return x;
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
      c.fail(fmt::format("auto_pad \"{}\"", ap));
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

// ---- elementwise ------------------------------------------------------------------------------

/// atan from registered ops: two half-angle steps, atan(x) = 2 atan(x / (1 + sqrt(1 + x^2))), bring
/// |t| under tan(pi/16) ~ 0.2, where the odd series to t^11 is exact to ~1e-10 (|x| < 1e18).
inline AnyTensor atan(const AnyTensor& x) {
  AnyTensor t = x;
  for (int i = 0; i < 2; ++i) t = o::div(t, o::add(o::sqrt(o::add(o::mul(t, t), 1.0)), 1.0));
  AnyTensor t2 = o::mul(t, t), acc = o::full(Shape{}, -1.0 / 11, x.dtype());
  for (int k = 9; k >= 1; k -= 2) acc = o::add(o::mul(acc, t2), (k % 4 == 1 ? 1.0 : -1.0) / k);
  return o::mul(o::mul(acc, t), 4.0);
}
#define MS_ONNX_UNARY(Name, expr)                                  \
  inline std::vector<AnyTensor> Name(const NodeCtx& c) {          \
    const AnyTensor& x = c.in(0);                                  \
    (void)x;                                                       \
    return one(expr);                                              \
  }
MS_ONNX_UNARY(Abs, o::abs(x))
MS_ONNX_UNARY(Neg, o::neg(x))
MS_ONNX_UNARY(Sign, o::sign(x))
MS_ONNX_UNARY(Exp, o::exp(x))
MS_ONNX_UNARY(Log, o::log(x))
MS_ONNX_UNARY(Sqrt, o::sqrt(x))
MS_ONNX_UNARY(Reciprocal, o::reciprocal(x))
MS_ONNX_UNARY(Erf, o::erf(x))
MS_ONNX_UNARY(Sin, o::sin(x))
MS_ONNX_UNARY(Cos, o::cos(x))
MS_ONNX_UNARY(Tan, o::div(o::sin(x), o::cos(x)))
MS_ONNX_UNARY(Sinh, o::mul(o::sub(o::exp(x), o::exp(o::neg(x))), 0.5))
MS_ONNX_UNARY(Cosh, o::mul(o::add(o::exp(x), o::exp(o::neg(x))), 0.5))
MS_ONNX_UNARY(Asinh, o::log(o::add(x, o::sqrt(o::add(o::mul(x, x), 1.0)))))
MS_ONNX_UNARY(Acosh, o::log(o::add(x, o::sqrt(o::sub(o::mul(x, x), 1.0)))))
MS_ONNX_UNARY(Atanh, o::mul(o::log(o::div(o::add(x, 1.0), o::sub(1.0, x))), 0.5))
MS_ONNX_UNARY(Atan, atan(x))
MS_ONNX_UNARY(Asin, o::mul(atan(o::div(x, o::add(o::sqrt(o::sub(1.0, o::mul(x, x))), 1.0))), 2.0))
MS_ONNX_UNARY(Acos, o::sub(1.57079632679489661923,
                           o::mul(atan(o::div(x, o::add(o::sqrt(o::sub(1.0, o::mul(x, x))), 1.0))), 2.0)))
MS_ONNX_UNARY(Tanh, o::tanh(x))
MS_ONNX_UNARY(Sigmoid, o::sigmoid(x))
MS_ONNX_UNARY(Relu, o::relu(x))
MS_ONNX_UNARY(Floor, o::floor(x))
MS_ONNX_UNARY(Ceil, o::ceil(x))
MS_ONNX_UNARY(Round, o::round(x))
MS_ONNX_UNARY(Not, o::logical_not(x))
MS_ONNX_UNARY(Softplus, o::softplus(x))
MS_ONNX_UNARY(Softsign, o::div(x, o::add(o::abs(x), 1.0)))
MS_ONNX_UNARY(IsNaN, o::ne(x, x))
MS_ONNX_UNARY(Mish, o::mul(x, o::tanh(o::softplus(x))))
#undef MS_ONNX_UNARY

inline std::vector<AnyTensor> Identity(const NodeCtx& c) { return one(c.in(0)); }
inline std::vector<AnyTensor> LeakyRelu(const NodeCtx& c) { return one(o::leaky_relu(c.in(0), c.af("alpha", 0.01))); }
inline std::vector<AnyTensor> Elu(const NodeCtx& c) { return one(o::elu(c.in(0), c.af("alpha", 1.0))); }
inline std::vector<AnyTensor> Selu(const NodeCtx& c) {
  return one(o::mul(o::elu(c.in(0), c.af("alpha", 1.67326319217681884765625)), c.af("gamma", 1.05070102214813232421875)));
}
inline std::vector<AnyTensor> Celu(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const double a = c.af("alpha", 1.0);
  return one(o::add(o::relu(x), o::minimum(o::mul(o::expm1(o::div(x, a)), a), 0.0)));
}
inline std::vector<AnyTensor> ThresholdedRelu(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  return one(o::where(o::gt(x, c.af("alpha", 1.0)), x, o::zeros(Shape{}, x.dtype())));
}
inline std::vector<AnyTensor> HardSigmoid(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  return one(o::clamp(o::add(o::mul(x, c.af("alpha", 0.2)), c.af("beta", 0.5)), 0.0, 1.0));
}
inline std::vector<AnyTensor> HardSwish(const NodeCtx& c) { return one(o::mul(c.in(0), o::hardsigmoid(c.in(0)))); }
inline std::vector<AnyTensor> Shrink(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const double l = c.af("lambd", 0.5), b = c.af("bias", 0.0);
  AnyTensor zero = o::zeros(Shape{}, x.dtype());
  return one(o::where(o::lt(x, -l), o::add(x, b), o::where(o::gt(x, l), o::sub(x, b), zero)));
}
inline std::vector<AnyTensor> PRelu(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  AnyTensor slope = c.in(1);
  // Before opset 7 a (C,) slope applied per channel (axis 1), not by NumPy broadcasting.
  if (c.opset() < 7 && slope.dim() == 1 && x.dim() > 2 && slope.shape()[0] == x.shape()[1] && slope.shape()[0] != 1)
    slope = channel(slope, x.dim());
  return one(o::where(o::lt(x, 0.0), o::mul(x, slope), x));
}
inline std::vector<AnyTensor> IsInf(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  const bool pos = c.ai("detect_positive", 1) != 0, neg = c.ai("detect_negative", 1) != 0;
  const double inf = std::numeric_limits<double>::infinity();
  AnyTensor p = o::eq(x, inf), n = o::eq(x, -inf);
  if (pos && neg) return one(o::logical_or(p, n));
  if (pos) return one(p);
  if (neg) return one(n);
  return one(o::ne(x, x));  // neither: all false (x != x only for NaN, never both flags off in practice)
}

/// Input 1 of a binary op; before opset 7 with broadcast=1 and `axis`, B's dims align with A's
/// from `axis` on (B gets trailing 1s), else from the right as in NumPy.
inline AnyTensor legacy_broadcast(const NodeCtx& c) {
  const AnyTensor& a = c.in(0);
  AnyTensor b = c.in(1);
  if (!c.has_attr("axis") || c.opset() >= 7) return b;
  const int axis = axis_of(c, c.ai("axis", 0), a.dim());
  IntList s = b.shape().vec();
  while (static_cast<int>(s.size()) + axis < a.dim()) s.push_back(1);
  return o::reshape(b, s);
}
#define MS_ONNX_BINARY(Name, fn)                                                      \
  inline std::vector<AnyTensor> Name(const NodeCtx& c) {                             \
    if (c.ai("broadcast", 1) == 0 && c.in(0).shape() != c.in(1).shape())               \
      c.fail("broadcast=0 with different shapes");                                     \
    return one(fn(c.in(0), legacy_broadcast(c)));                                       \
  }
MS_ONNX_BINARY(Add, o::add)
MS_ONNX_BINARY(Sub, o::sub)
MS_ONNX_BINARY(Mul, o::mul)
MS_ONNX_BINARY(Equal, o::eq)
MS_ONNX_BINARY(Greater, o::gt)
MS_ONNX_BINARY(Less, o::lt)
MS_ONNX_BINARY(GreaterOrEqual, o::ge)
MS_ONNX_BINARY(LessOrEqual, o::le)
MS_ONNX_BINARY(And, o::logical_and)
MS_ONNX_BINARY(Or, o::logical_or)
MS_ONNX_BINARY(Xor, o::ne)
#undef MS_ONNX_BINARY

/// Integer division truncates toward zero (C, ONNX): computed exactly in float64.
inline AnyTensor trunc_div(const AnyTensor& a, const AnyTensor& b) {
  AnyTensor q = o::div(o::cast(a, DType::f64), o::cast(b, DType::f64));
  return o::mul(o::sign(q), o::floor(o::abs(q)));
}
inline std::vector<AnyTensor> Div(const NodeCtx& c) {
  const AnyTensor& a = c.in(0);
  const AnyTensor b = legacy_broadcast(c);
  if (is_float(a.dtype())) return one(o::div(a, b));
  if (a.dtype() != b.dtype()) c.fail(fmt::format("operands of dtypes {} and {}", a.dtype(), b.dtype()));
  if (a.dtype() != DType::i32 && a.dtype() != DType::i64 && a.dtype() != DType::u8)
    c.fail(fmt::format("dtype {} is not supported", a.dtype()));
  return one(o::cast(trunc_div(a, b), a.dtype()));
}
inline std::vector<AnyTensor> Mod(const NodeCtx& c) {
  const AnyTensor &a = c.in(0), &b = c.in(1);
  const bool fmod = c.ai("fmod", 0) != 0;
  if (a.dtype() != b.dtype()) c.fail(fmt::format("operands of dtypes {} and {}", a.dtype(), b.dtype()));
  if (a.dtype() != DType::i32 && a.dtype() != DType::i64 && a.dtype() != DType::u8 && !is_float(a.dtype()))
    c.fail(fmt::format("dtype {} is not supported", a.dtype()));
  AnyTensor fa = o::cast(a, DType::f64), fb = o::cast(b, DType::f64);
  AnyTensor q = o::div(fa, fb);
  q = fmod ? o::mul(o::sign(q), o::floor(o::abs(q))) : o::floor(q);
  return one(o::cast(o::sub(fa, o::mul(q, fb)), a.dtype()));
}
inline std::vector<AnyTensor> Pow(const NodeCtx& c) {
  const AnyTensor& a = c.in(0);
  AnyTensor b = legacy_broadcast(c);
  if (b.dtype() != a.dtype()) b = o::cast(b, a.dtype());
  return one(o::pow(a, b));
}
inline std::vector<AnyTensor> Where(const NodeCtx& c) { return one(o::where(c.in(0), c.in(1), c.in(2))); }

template <AnyTensor (*F)(const AnyTensor&, const AnyTensor&)>
std::vector<AnyTensor> variadic(const NodeCtx& c) {
  AnyTensor acc = c.in(0);
  for (std::size_t i = 1; i < c.num_inputs(); ++i) acc = F(acc, c.in(i));
  if (c.num_inputs() == 1) acc = o::clone(acc);
  return one(acc);
}
inline std::vector<AnyTensor> Mean(const NodeCtx& c) {
  AnyTensor s = variadic<o::add>(c)[0];
  return one(o::div(s, static_cast<double>(c.num_inputs())));
}
inline std::vector<AnyTensor> Clip(const NodeCtx& c) {
  AnyTensor x = c.in(0);
  if (c.opset() < 11) return one(o::clamp(x, c.af("min", -3.4028234663852886e38), c.af("max", 3.4028234663852886e38)));
  const double inf = std::numeric_limits<double>::infinity();
  if ((!c.has(1) || c.is_const(1)) && (!c.has(2) || c.is_const(2))) {
    const double lo = c.has(1) ? c.scalar(1) : -inf, hi = c.has(2) ? c.scalar(2) : inf;
    if (lo > hi) return one(o::full(x.shape(), hi, x.dtype()));  // ONNX: all values become max
    return one(o::clamp(x, lo, hi));
  }
  if (c.has(1)) x = o::maximum(x, c.in(1));
  if (c.has(2)) x = o::minimum(x, c.in(2));
  return one(x);
}
inline std::vector<AnyTensor> Cast(const NodeCtx& c) {
  const std::int64_t to = c.ai("to", 0);
  auto d = dtype_from_onnx(static_cast<int>(to));
  if (!d) c.fail(fmt::format("cast to {} (no ms dtype)", onnx_type_name(static_cast<int>(to))));
  return one(o::cast(c.in(0), *d));
}
inline std::vector<AnyTensor> CastLike(const NodeCtx& c) { return one(o::cast(c.in(0), c.in(1).dtype())); }

// ---- reductions -------------------------------------------------------------------------------

/// The axes of a Reduce* node (attribute, or input 1 from opset 13 for ReduceSum); empty: all,
/// or none with noop_with_empty_axes (then `noop` is set).
inline IntList reduce_axes(const NodeCtx& c, const AnyTensor& x, bool& noop) {
  IntList axes;
  noop = false;
  if (c.has_attr("axes")) axes = c.aints("axes");
  else if (c.has(1)) axes = c.ints(1);
  if (axes.empty()) {
    if (c.ai("noop_with_empty_axes", 0)) noop = true;
    for (int i = 0; i < x.dim(); ++i) axes.push_back(i);
  }
  for (auto& a : axes) a = axis_of(c, a, x.dim());
  return axes;
}
template <int Kind>
std::vector<AnyTensor> reduce(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  bool noop = false;
  IntList axes = reduce_axes(c, x, noop);
  const bool kd = c.ai("keepdims", 1) != 0;
  if (noop) return one(o::clone(x));
  switch (Kind) {
    case 0: return one(o::sum(x, axes, kd));
    case 1: return one(o::mean(x, axes, kd));
    case 2: return one(o::max(x, axes, kd));
    case 3: return one(o::min(x, axes, kd));
    case 4: return one(o::prod(x, axes, kd));
    case 5: return one(o::sum(o::abs(x), axes, kd));
    case 6: return one(o::sqrt(o::sum(o::mul(x, x), axes, kd)));
    case 7: return one(o::sum(o::mul(x, x), axes, kd));
    case 8: return one(o::log(o::sum(x, axes, kd)));
    default: {  // log-sum-exp, shifted by the max for range
      AnyTensor m = o::max(x, axes, true);
      AnyTensor m_finite = o::where(o::eq(o::abs(m), std::numeric_limits<double>::infinity()),
                                    o::zeros(Shape{}, x.dtype()), m);
      AnyTensor s = o::log(o::sum(o::exp(o::sub(x, m_finite)), axes, true));
      AnyTensor r = o::add(s, m_finite);
      if (!kd) {
        IntList shape;
        for (int i = 0; i < x.dim(); ++i)
          if (std::find(axes.begin(), axes.end(), i) == axes.end()) shape.push_back(x.shape()[i]);
        r = o::reshape(r, shape);
      }
      return one(r);
    }
  }
}
template <bool Max>
std::vector<AnyTensor> arg_reduce(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, c.ai("axis", 0), x.dim());
  const bool kd = c.ai("keepdims", 1) != 0;
  if (c.ai("select_last_index", 0)) {
    const std::int64_t n = x.shape()[axis];
    AnyTensor r = o::slice(x, axis, n - 1, -n - 1, -1);
    AnyTensor i = Max ? o::argmax(r, axis, kd) : o::argmin(r, axis, kd);
    return one(o::sub(static_cast<double>(n - 1), i));
  }
  return one(Max ? o::argmax(x, axis, kd) : o::argmin(x, axis, kd));
}

// ---- linear algebra, convolution, pooling, normalization --------------------------------------

inline std::vector<AnyTensor> MatMul(const NodeCtx& c) { return one(o::matmul(c.in(0), c.in(1))); }
inline std::vector<AnyTensor> Gemm(const NodeCtx& c) {
  need_rank(c, 0, 2);
  need_rank(c, 1, 2);
  AnyTensor a = c.in(0), b = c.in(1);
  const double alpha = c.af("alpha", 1.0), beta = c.af("beta", 1.0);
  const bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
  if (!ta && tb && alpha == 1.0 && (!c.has(2) || (beta == 1.0 && c.in(2).dim() == 1 && c.in(2).shape()[0] == b.shape()[0])))
    return one(o::linear(a, b, c.has(2) ? c.in(2) : AnyTensor()));
  if (ta) a = o::transpose(a, 0, 1);
  if (tb) b = o::transpose(b, 0, 1);
  AnyTensor y = o::matmul(a, b);
  if (alpha != 1.0) y = o::mul(y, alpha);
  if (c.has(2)) {
    AnyTensor cc = c.in(2);
    if (beta != 1.0) cc = o::mul(cc, beta);
    y = o::add(y, cc);
  }
  return one(y);
}

/// A 3-d convolution as kD 2-d ones: depth slice kd of every output window, batched with N,
/// convolved with the kernel's plane kd, summed over kd.
inline AnyTensor conv3d(const NodeCtx& c, const AnyTensor& x0, const AnyTensor& w, const Window& g) {
  AnyTensor x = pad_constant(x0, {0, 0, g.pb[0], g.pb[1], g.pb[2]}, {0, 0, g.pe[0], g.pe[1], g.pe[2]}, 0.0);
  const std::int64_t N = x.shape()[0], C = x.shape()[1], D = x.shape()[2], H = x.shape()[3], W = x.shape()[4];
  const std::int64_t M = w.shape()[0], kD = w.shape()[2];
  const std::int64_t oD = (D - ((kD - 1) * g.d[0] + 1)) / g.s[0] + 1;
  if (oD <= 0) c.fail("the kernel is larger than the padded input");
  AnyTensor acc;
  for (std::int64_t kd = 0; kd < kD; ++kd) {
    const std::int64_t b = kd * g.d[0];
    AnyTensor xs = o::slice(x, 2, b, b + (oD - 1) * g.s[0] + 1, g.s[0]);
    xs = o::reshape(o::permute(xs, {0, 2, 1, 3, 4}), {N * oD, C, H, W});
    AnyTensor wk;
    {
      std::optional<Untraced> u;
      if (c.is_const(1)) u.emplace();
      wk = o::reshape(o::slice(w, 2, kd, kd + 1), {M, w.shape()[1], w.shape()[3], w.shape()[4]});
    }
    AnyTensor y = o::conv2d(xs, wk, AnyTensor(), o::Int2(g.s[1], g.s[2]), 0, o::Int2(g.d[1], g.d[2]), c.ai("group", 1));
    acc = acc.defined() ? o::add(acc, y) : y;
  }
  acc = o::permute(o::reshape(acc, {N, oD, M, acc.shape()[2], acc.shape()[3]}), {0, 2, 1, 3, 4});
  if (c.has(2)) acc = o::add(acc, o::reshape(c.in(2), {M, 1, 1, 1}));
  return o::contiguous(acc);
}

inline std::vector<AnyTensor> Conv(const NodeCtx& c) {
  AnyTensor x = c.in(0), w = c.in(1);
  const int nd = x.dim() - 2;
  if (nd < 1 || nd > 3) c.fail(fmt::format("{}-d convolution (1-d to 3-d are supported)", nd));
  IntList ks = c.aints("kernel_shape");
  if (ks.empty()) for (int i = 2; i < w.dim(); ++i) ks.push_back(w.shape()[i]);
  if (w.dim() != x.dim()) c.fail(fmt::format("weight of rank {} for an input of rank {}", w.dim(), x.dim()));
  Window g = window(c, x.shape(), ks, nd);
  if (nd == 3) return one(conv3d(c, x, w, g));
  if (nd == 1) {  // as a 2-d convolution of height 1
    x = o::unsqueeze(x, 2);
    w = o::unsqueeze(w, 2);
    g.k.insert(g.k.begin(), 1); g.s.insert(g.s.begin(), 1); g.d.insert(g.d.begin(), 1);
    g.pb.insert(g.pb.begin(), 0); g.pe.insert(g.pe.begin(), 0);
  }
  o::Int2 pad(0);
  if (g.pb == g.pe) {
    pad = o::Int2(g.pb[0], g.pb[1]);
  } else {
    x = pad_constant(x, {0, 0, g.pb[0], g.pb[1]}, {0, 0, g.pe[0], g.pe[1]}, 0.0);
  }
  AnyTensor y = o::conv2d(x, w, c.has(2) ? c.in(2) : AnyTensor(), o::Int2(g.s[0], g.s[1]), pad,
                          o::Int2(g.d[0], g.d[1]), c.ai("group", 1));
  if (nd == 1) y = o::squeeze(y, 2);
  return one(y);
}

/// ConvTranspose as a convolution: zeros inserted between the input's elements (stride), the
/// borders padded by dilation * (kernel - 1) - pads, and the kernel flipped with its channel
/// axes swapped per group.
inline std::vector<AnyTensor> ConvTranspose(const NodeCtx& c) {
  AnyTensor x = c.in(0), w = c.in(1);
  const int nd = x.dim() - 2;
  if (nd != 1 && nd != 2) c.fail(fmt::format("{}-d transposed convolution (1-d and 2-d are supported)", nd));
  if (w.dim() != x.dim()) c.fail(fmt::format("weight of rank {} for an input of rank {}", w.dim(), x.dim()));
  const std::int64_t g = c.ai("group", 1);
  if (g < 1) c.fail(fmt::format("group {}", g));
  IntList ks = c.aints("kernel_shape");
  if (ks.empty()) for (int i = 2; i < w.dim(); ++i) ks.push_back(w.shape()[i]);
  IntList s = c.aints("strides", IntList(nd, 1)), d = c.aints("dilations", IntList(nd, 1));
  IntList pads = c.aints("pads", IntList(2 * nd, 0)), op = c.aints("output_padding", IntList(nd, 0));
  IntList oshape = c.aints("output_shape");
  const std::string ap = c.as("auto_pad", "NOTSET");
  if (static_cast<int>(ks.size()) != nd || static_cast<int>(s.size()) != nd || static_cast<int>(d.size()) != nd ||
      static_cast<int>(pads.size()) != 2 * nd || static_cast<int>(op.size()) != nd)
    c.fail("kernel_shape, strides, dilations, pads or output_padding do not match the spatial rank");
  if (!oshape.empty() && static_cast<int>(oshape.size()) != nd) {
    if (static_cast<int>(oshape.size()) == nd + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
    else c.fail("output_shape does not match the spatial rank");
  }
  IntList pb(pads.begin(), pads.begin() + nd), pe(pads.begin() + nd, pads.end());
  for (int i = 0; i < nd; ++i) {
    const std::int64_t in = x.shape()[2 + i];
    const std::int64_t full = s[i] * (in - 1) + op[i] + (ks[i] - 1) * d[i] + 1;
    std::int64_t want = -1;
    if (!oshape.empty()) want = oshape[i];
    else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") want = in * s[i];
    else if (ap == "VALID") pb[i] = pe[i] = 0;
    else if (ap != "NOTSET") c.fail(fmt::format("auto_pad \"{}\"", ap));
    if (want >= 0) {
      const std::int64_t total = full - want;
      // Floor division: a negative total (a larger output_shape) extends the end.
      const std::int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (ap == "SAME_UPPER") { pb[i] = half; pe[i] = total - half; }
      else { pb[i] = total - half; pe[i] = half; }
    }
  }
  if (nd == 1) {
    x = o::unsqueeze(x, 2);
    w = o::unsqueeze(w, 2);
    for (IntList* v : {&ks, &s, &d, &pb, &pe, &op}) v->insert(v->begin(), v == &ks || v == &s || v == &d ? 1 : 0);
  }
  const std::int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  if (s[0] > 1 || s[1] > 1) {  // zeros between the elements
    AnyTensor t = o::reshape(x, {N, C, H, 1, W, 1});
    t = pad_constant(t, {0, 0, 0, 0, 0, 0}, {0, 0, 0, s[0] - 1, 0, s[1] - 1}, 0.0);
    t = o::reshape(t, {N, C, H * s[0], W * s[1]});
    x = o::slice(o::slice(t, 2, 0, (H - 1) * s[0] + 1), 3, 0, (W - 1) * s[1] + 1);
  }
  x = pad_constant(x, {0, 0, d[0] * (ks[0] - 1) - pb[0], d[1] * (ks[1] - 1) - pb[1]},
                   {0, 0, d[0] * (ks[0] - 1) - pe[0] + op[0], d[1] * (ks[1] - 1) - pe[1] + op[1]}, 0.0);
  auto flip = [&] {
    const std::int64_t Ci = w.shape()[0], Co = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
    if (Ci % g) c.fail(fmt::format("group {} does not divide the {} input channels", g, Ci));
    AnyTensor f = o::slice(o::slice(w, 2, kh - 1, -(kh + 1), -1), 3, kw - 1, -(kw + 1), -1);
    f = o::permute(o::reshape(f, {g, Ci / g, Co, kh, kw}), {0, 2, 1, 3, 4});
    return o::reshape(f, {g * Co, Ci / g, kh, kw});
  };
  AnyTensor wf;
  if (c.is_const(1)) {
    Untraced u;
    wf = flip();
  } else {
    wf = flip();
  }
  AnyTensor y = o::conv2d(x, wf, c.has(2) ? c.in(2) : AnyTensor(), 1, 0, o::Int2(d[0], d[1]), g);
  if (nd == 1) y = o::squeeze(y, 2);
  return one(y);
}
inline std::vector<AnyTensor> GatherND(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  AnyTensor idx = c.in(1);
  if (idx.dtype() != DType::i64) c.fail(fmt::format("indices of dtype {}", idx.dtype()));
  const int b = static_cast<int>(c.ai("batch_dims", 0));
  const int q = idx.dim();
  if (q < 1) c.fail("indices of rank 0");
  const std::int64_t k = idx.shape()[q - 1];
  if (b < 0 || b >= q || b + k > x.dim()) c.fail("batch_dims or the index depth do not fit the data's rank");
  // Row-major strides of the indexed axes, and wrapped negatives.
  IntList strides(static_cast<std::size_t>(k));
  std::int64_t block = 1;
  for (std::int64_t j = k - 1; j >= 0; --j) {
    strides[static_cast<std::size_t>(j)] = block;
    block *= x.shape()[static_cast<int>(b + j)];
  }
  IntList dims;
  for (std::int64_t j = 0; j < k; ++j) dims.push_back(x.shape()[static_cast<int>(b + j)]);
  AnyTensor dimt = i64_tensor(dims), st = i64_tensor(strides);
  idx = o::where(o::lt(idx, 0.0), o::add(idx, dimt), idx);
  AnyTensor lin = o::sum(o::mul(idx, st), {q - 1}, false);  // batch dims + the rest
  std::int64_t nb = 1;
  IntList bshape;
  for (int i = 0; i < b; ++i) { nb *= x.shape()[i]; bshape.push_back(x.shape()[i]); }
  if (b > 0) {
    IntList offs(static_cast<std::size_t>(nb));
    for (std::int64_t i = 0; i < nb; ++i) offs[static_cast<std::size_t>(i)] = i * block;
    IntList os = bshape;
    for (int i = b; i < q - 1; ++i) os.push_back(1);
    lin = o::add(lin, o::reshape(i64_tensor(offs), os));
  }
  IntList flat{nb * block}, out;
  for (int i = static_cast<int>(b + k); i < x.dim(); ++i) flat.push_back(x.shape()[i]);
  for (int i = 0; i < q - 1; ++i) out.push_back(idx.shape()[i]);
  for (int i = static_cast<int>(b + k); i < x.dim(); ++i) out.push_back(x.shape()[i]);
  AnyTensor picked = o::index_select(o::reshape(x, flat), 0, o::reshape(lin, {lin.numel()}));
  return one(o::reshape(picked, out));
}

/// Pooling of any spatial rank and dilation as the maximum (sum) of strided slices of the padded
/// input, one per kernel offset; averages divide by the count of cells the divisor includes.
inline AnyTensor pool_slices(const AnyTensor& x, const Window& g, const Window& user, bool max, bool include_pad) {
  const int nd = x.dim() - 2;
  IntList b(static_cast<std::size_t>(x.dim()), 0), e(static_cast<std::size_t>(x.dim()), 0), out(static_cast<std::size_t>(nd));
  for (int i = 0; i < nd; ++i) {
    b[static_cast<std::size_t>(2 + i)] = g.pb[i];
    e[static_cast<std::size_t>(2 + i)] = g.pe[i];
    out[static_cast<std::size_t>(i)] =
        (x.shape()[2 + i] + g.pb[i] + g.pe[i] - ((g.k[i] - 1) * g.d[i] + 1)) / g.s[i] + 1;
  }
  auto reduce = [&](const AnyTensor& xp, bool take_max) {
    AnyTensor acc;
    IntList off(static_cast<std::size_t>(nd), 0);
    for (;;) {
      AnyTensor t = xp;
      for (int i = 0; i < nd; ++i) {
        const std::int64_t st = off[static_cast<std::size_t>(i)] * g.d[i];
        t = o::slice(t, 2 + i, st, st + (out[static_cast<std::size_t>(i)] - 1) * g.s[i] + 1, g.s[i]);
      }
      acc = !acc.defined() ? t : take_max ? o::maximum(acc, t) : o::add(acc, t);
      int i = nd - 1;
      while (i >= 0 && ++off[static_cast<std::size_t>(i)] == g.k[i]) off[static_cast<std::size_t>(i--)] = 0;
      if (i < 0) break;
    }
    return acc;
  };
  if (max) return o::contiguous(reduce(pad_constant(x, b, e, -std::numeric_limits<double>::infinity()), true));
  AnyTensor count;
  {
    Untraced u;
    IntList ms(static_cast<std::size_t>(x.dim()), 1);
    for (int i = 0; i < nd; ++i) ms[static_cast<std::size_t>(2 + i)] = x.shape()[2 + i];
    AnyTensor m = o::ones(Shape(ms), x.dtype());
    IntList ub(b.size(), 0), ue(e.size(), 0), rb = b, re = e;
    if (include_pad)
      for (int i = 0; i < nd; ++i) {
        ub[static_cast<std::size_t>(2 + i)] = user.pb[i];
        ue[static_cast<std::size_t>(2 + i)] = user.pe[i];
        rb[static_cast<std::size_t>(2 + i)] -= user.pb[i];
        re[static_cast<std::size_t>(2 + i)] -= user.pe[i];
      }
    m = pad_constant(pad_constant(m, ub, ue, 1.0), rb, re, 0.0);
    count = o::contiguous(reduce(m, false));
  }
  return o::div(reduce(pad_constant(x, b, e, 0.0), false), count);
}

template <bool Max>
std::vector<AnyTensor> Pool(const NodeCtx& c) {
  AnyTensor x = c.in(0);
  const int nd = x.dim() - 2;
  if (nd < 1 || nd > 3) c.fail(fmt::format("{}-d pooling (1-d to 3-d are supported)", nd));
  need_float(c, x);
  IntList ks = c.aints("kernel_shape");
  if (static_cast<int>(ks.size()) != nd) c.fail("kernel_shape is missing or does not match the spatial rank");
  Window g = window(c, x.shape(), ks, nd, c.ai("ceil_mode", 0) != 0);
  Window user = window(c, x.shape(), ks, nd, false);  // without the extra cells of ceil_mode
  const bool want_indices = Max && c.wants_output(1);
  if (want_indices && c.ai("storage_order", 0) != 0) c.fail("the Indices output with storage_order=1");
  const bool include_pad0 = c.ai("count_include_pad", 0) != 0;
  if (nd == 3 || std::any_of(g.d.begin(), g.d.end(), [](std::int64_t d) { return d != 1; })) {
    if (want_indices) c.fail("the Indices output of a dilated or 3-d pooling");
    return one(pool_slices(x, g, user, Max, include_pad0));
  }
  if (nd == 1) {
    x = o::unsqueeze(x, 2);
    for (Window* w : {&g, &user}) {
      w->k.insert(w->k.begin(), 1); w->s.insert(w->s.begin(), 1);
      w->pb.insert(w->pb.begin(), 0); w->pe.insert(w->pe.begin(), 0);
    }
  }
  const o::Int2 k(g.k[0], g.k[1]), s(g.s[0], g.s[1]);
  const bool symmetric = g.pb == g.pe && 2 * g.pb[0] <= g.k[0] && 2 * g.pb[1] <= g.k[1];
  const bool include_pad = include_pad0;
  AnyTensor y;
  if (symmetric) {
    const o::Int2 p(g.pb[0], g.pb[1]);
    if (want_indices) {
      // ms gives the index within the (H, W) plane; ONNX counts over the whole (N, C, H, W) tensor.
      auto [v, i] = o::max_pool2d_with_indices(x, k, s, p);
      const std::int64_t N = x.shape()[0], C = x.shape()[1], plane = x.shape()[2] * x.shape()[3];
      IntList offs(static_cast<std::size_t>(N * C));
      for (std::int64_t j = 0; j < N * C; ++j) offs[static_cast<std::size_t>(j)] = j * plane;
      AnyTensor idx = o::add(i, o::reshape(i64_tensor(offs), {N, C, 1, 1}));
      if (nd == 1) return {o::squeeze(v, 2), o::squeeze(idx, 2)};
      return {v, idx};
    }
    y = Max ? o::max_pool2d(x, k, s, p) : o::avg_pool2d(x, k, s, p, include_pad);
  } else if (want_indices) {
    c.fail("the Indices output with asymmetric or ceil-mode padding");
  } else if (Max) {
    y = o::max_pool2d(pad_constant(x, {0, 0, g.pb[0], g.pb[1]}, {0, 0, g.pe[0], g.pe[1]},
                                   -std::numeric_limits<double>::infinity()), k, s, 0);
  } else {
    // Sum of the real elements over the count of what the divisor includes: the user's pads
    // with count_include_pad, never the extra cells of ceil_mode.
    AnyTensor mask;
    {
      Untraced u;
      AnyTensor ones = o::ones(Shape{1, 1, x.shape()[2], x.shape()[3]}, x.dtype());
      AnyTensor m = include_pad ? pad_constant(ones, {0, 0, user.pb[0], user.pb[1]}, {0, 0, user.pe[0], user.pe[1]}, 1.0)
                                : ones;
      const IntList b0 = include_pad ? IntList{0, 0, g.pb[0] - user.pb[0], g.pb[1] - user.pb[1]}
                                     : IntList{0, 0, g.pb[0], g.pb[1]};
      const IntList e0 = include_pad ? IntList{0, 0, g.pe[0] - user.pe[0], g.pe[1] - user.pe[1]}
                                     : IntList{0, 0, g.pe[0], g.pe[1]};
      m = pad_constant(m, b0, e0, 0.0);
      mask = o::avg_pool2d(m, k, s, 0, true);
    }
    AnyTensor xp = pad_constant(x, {0, 0, g.pb[0], g.pb[1]}, {0, 0, g.pe[0], g.pe[1]}, 0.0);
    y = o::div(o::avg_pool2d(xp, k, s, 0, true), mask);
  }
  if (nd == 1) y = o::squeeze(y, 2);
  return one(y);
}
template <bool Max>
std::vector<AnyTensor> GlobalPool(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList axes;
  for (int i = 2; i < x.dim(); ++i) axes.push_back(i);
  return one(Max ? o::max(x, axes, true) : o::mean(x, axes, true));
}
inline std::vector<AnyTensor> BatchNormalization(const NodeCtx& c) {
  if (c.ai("training_mode", 0)) {
    // Batch statistics (biased variance); the running ones blend in with `momentum`.
    const AnyTensor& x = c.in(0);
    need_float(c, x);
    IntList axes{0}, cs(static_cast<std::size_t>(x.dim()), 1);
    for (int i = 2; i < x.dim(); ++i) axes.push_back(i);
    cs[1] = x.shape()[1];
    const double mom = c.af("momentum", 0.9), eps = c.af("epsilon", 1e-5);
    AnyTensor m = o::mean(x, axes, false), v = o::var(x, axes, false, 0);
    AnyTensor y = o::mul(o::sub(x, o::reshape(m, cs)), o::rsqrt(o::add(o::reshape(v, cs), eps)));
    y = o::add(o::mul(y, o::reshape(c.in(1), cs)), o::reshape(c.in(2), cs));
    return {y, o::add(o::mul(c.in(3), mom), o::mul(m, 1 - mom)), o::add(o::mul(c.in(4), mom), o::mul(v, 1 - mom))};
  }
  for (int i = 1; i < static_cast<int>(c.num_outputs()); ++i)
    if (c.wants_output(i)) c.fail("the running statistics outputs (training)");
  if (c.opset() < 9 && c.ai("spatial", 1) == 0) c.fail("spatial=0");
  const AnyTensor& x = c.in(0);
  if (x.dim() < 2) c.fail("input of rank < 2");
  return one(o::batch_norm(x, c.in(1), c.in(2), c.in(3), c.in(4), false, 0.1, c.af("epsilon", 1e-5)));
}
inline std::vector<AnyTensor> InstanceNormalization(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  IntList axes;
  for (int i = 2; i < x.dim(); ++i) axes.push_back(i);
  AnyTensor m = o::mean(x, axes, true);
  AnyTensor v = o::var(x, axes, true, 0);
  AnyTensor y = o::mul(o::sub(x, m), o::rsqrt(o::add(v, c.af("epsilon", 1e-5))));
  return one(o::add(o::mul(y, channel(c.in(1), x.dim())), channel(c.in(2), x.dim())));
}
inline std::vector<AnyTensor> LayerNormalization(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  const int axis = axis_of(c, c.ai("axis", -1), x.dim());
  const double eps = c.af("epsilon", 1e-5);
  IntList norm_shape, axes;
  for (int i = axis; i < x.dim(); ++i) { norm_shape.push_back(x.shape()[i]); axes.push_back(i); }
  const bool stats = c.wants_output(1) || c.wants_output(2);
  if (!stats && c.in(1).shape().vec() == norm_shape && (!c.has(2) || c.in(2).shape().vec() == norm_shape))
    return one(o::layer_norm(x, norm_shape, c.in(1), c.has(2) ? c.in(2) : AnyTensor(), eps));
  AnyTensor m = o::mean(x, axes, true);
  AnyTensor inv = o::rsqrt(o::add(o::var(x, axes, true, 0), eps));
  AnyTensor y = o::mul(o::mul(o::sub(x, m), inv), c.in(1));
  if (c.has(2)) y = o::add(y, c.in(2));
  return {y, m, inv};
}
inline std::vector<AnyTensor> MeanVarianceNormalization(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList axes = c.aints("axes", {0, 2, 3});
  for (auto& a : axes) a = axis_of(c, a, x.dim());
  AnyTensor m = o::mean(x, axes, true);
  AnyTensor d = o::sub(x, m);
  return one(o::div(d, o::add(o::sqrt(o::mean(o::mul(d, d), axes, true)), 1e-9)));
}
inline std::vector<AnyTensor> LpNormalization(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, c.ai("axis", -1), x.dim());
  const std::int64_t p = c.ai("p", 2);
  AnyTensor n;
  if (p == 1) n = o::sum(o::abs(x), {axis}, true);
  else if (p == 2) n = o::sqrt(o::sum(o::mul(x, x), {axis}, true));
  else c.fail(fmt::format("p={}", p));
  return one(o::div(x, n));
}
inline std::vector<AnyTensor> LRN(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  const std::int64_t size = c.ai("size", 0);
  if (size <= 0) c.fail("size must be positive");
  const double alpha = c.af("alpha", 1e-4), beta = c.af("beta", 0.75), bias = c.af("bias", 1.0);
  IntList b(x.dim(), 0), e(x.dim(), 0);
  b[1] = (size - 1) / 2;
  e[1] = size - 1 - b[1];
  AnyTensor sq = pad_constant(o::mul(x, x), b, e, 0.0);
  const std::int64_t C = x.shape()[1];
  AnyTensor s = o::slice(sq, 1, 0, C);
  for (std::int64_t k = 1; k < size; ++k) s = o::add(s, o::slice(sq, 1, k, k + C));
  return one(o::div(x, o::pow(o::add(o::mul(s, alpha / static_cast<double>(size)), bias), beta)));
}
inline std::vector<AnyTensor> Dropout(const NodeCtx& c) {
  if (c.opset() >= 12 && c.has(2) && c.scalar(2) != 0 && (!c.has(1) || c.scalar(1) != 0))
    c.fail("training_mode=true (random)");
  if (c.opset() < 7 && c.ai("is_test", 0) == 0) c.fail("is_test=0 (random)");
  const AnyTensor& x = c.in(0);
  std::vector<AnyTensor> r{o::clone(x)};
  if (c.wants_output(1)) r.push_back(o::full(x.shape(), 1, DType::b8));
  return r;
}

/// Softmax-like ops: from opset 13 over one axis; before, over the trailing dims from `axis`
/// (default 1), flattened to 2-d.
template <int Kind>
std::vector<AnyTensor> softmax_like(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  auto apply = [&](const AnyTensor& t, int axis) -> AnyTensor {
    if (Kind == 0) return o::softmax(t, axis);
    if (Kind == 1) return o::log_softmax(t, axis);
    // Hardmax: one-hot of the (first) maximum
    const int r = t.dim();
    AnyTensor tt = axis == r - 1 ? t : o::transpose(t, axis, r - 1);
    AnyTensor oh = o::one_hot(o::argmax(tt, r - 1, false), tt.shape()[r - 1], t.dtype());
    return axis == r - 1 ? oh : o::contiguous(o::transpose(oh, axis, r - 1));
  };
  if (c.opset() >= 13) return one(apply(x, axis_of(c, c.ai("axis", -1), x.dim())));
  const int axis = axis_of(c, c.ai("axis", 1), std::max(x.dim(), 1));
  std::int64_t a = 1, b = 1;
  for (int i = 0; i < x.dim(); ++i) (i < axis ? a : b) *= x.shape()[i];
  return one(o::reshape(apply(o::reshape(x, {a, b}), 1), x.shape().vec()));
}

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
  if (axis < -x.dim() || axis > x.dim()) c.fail(fmt::format("axis {} is out of range for rank {}", axis, x.dim()));
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
    if (drop && x.shape()[i] != 1) c.fail(fmt::format("axis {} of shape {} is not 1", i, shape_str(x.shape())));
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
    if (len % n != 0) c.fail(fmt::format("axis of size {} does not split into {} equal parts", len, n));
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
    if (a != b && a != 1 && b != 1) c.fail(fmt::format("cannot broadcast {} to [{}]", shape_str(x.shape()), fmt::join(s, ", ")));
    out[static_cast<std::size_t>(i)] = a == 1 ? b : a;
  }
  return one(o::contiguous(o::expand(x, out)));
}
inline std::vector<AnyTensor> Tile(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList rep = c.ints(1);
  if (static_cast<int>(rep.size()) != x.dim()) c.fail("repeats must have one entry per axis");
  IntList inter, big, out;
  for (int i = 0; i < x.dim(); ++i) {
    inter.push_back(1); inter.push_back(x.shape()[i]);
    big.push_back(rep[i]); big.push_back(x.shape()[i]);
    out.push_back(rep[i] * x.shape()[i]);
  }
  return one(o::reshape(o::expand(o::reshape(x, inter), big), out));
}
/// Indices with negatives wrapped (n + i), as int64.
inline AnyTensor wrap_index(const NodeCtx& c, std::size_t i, std::int64_t n) {
  AnyTensor idx = c.in(i);
  if (idx.dtype() != DType::i64 && idx.dtype() != DType::i32) c.fail(fmt::format("indices of dtype {}", idx.dtype()));
  if (c.is_const(i)) {
    IntList v = c.ints(i);
    for (auto& k : v) {
      if (k < -n || k >= n) c.fail(fmt::format("index {} is out of range for an axis of size {}", k, n));
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
  c.fail(fmt::format("attribute {}", a.name()));
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
      c.fail(fmt::format("dtype {}", s.dtype()));
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
  const bool upper = c.ai("upper", 1) != 0;
  const std::int64_t n = x.shape()[x.dim() - 2], m = x.shape()[x.dim() - 1];
  AnyTensor mask = AnyTensor::empty(Shape{n, m}, DType::b8);
  bool* p = static_cast<bool*>(mask.raw_data());
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) p[i * m + j] = upper ? j - i >= k : j - i <= k;
  return one(o::where(mask, x, o::zeros(Shape{}, x.dtype())));
}
inline std::vector<AnyTensor> CumSum(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  const int axis = axis_of(c, static_cast<std::int64_t>(c.scalar(1)), x.dim());
  const bool excl = c.ai("exclusive", 0) != 0, rev = c.ai("reverse", 0) != 0;
  const std::int64_t n = x.shape()[axis];
  // cumsum along the last axis is x @ U with U[i][j] = 1 where i contributes to j
  AnyTensor u = AnyTensor::empty(Shape{n, n}, x.dtype());
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      T* p = static_cast<T*>(u.raw_data());
      for (std::int64_t i = 0; i < n; ++i)
        for (std::int64_t j = 0; j < n; ++j)
          p[i * n + j] = (rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j)) ? T(1) : T(0);
    }
  });
  const int r = x.dim();
  AnyTensor t = axis == r - 1 ? x : o::transpose(x, axis, r - 1);
  AnyTensor y = o::matmul(t, u);
  return one(axis == r - 1 ? y : o::contiguous(o::transpose(y, axis, r - 1)));
}
inline std::vector<AnyTensor> Pad(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const std::string mode = c.as("mode", "constant");
  IntList pads = c.opset() < 11 ? c.aints("pads") : c.ints(1);
  double value = c.opset() < 11 ? c.af("value", 0.0) : (c.has(2) ? c.scalar(2) : 0.0);
  if (c.has(3)) c.fail("the axes input");
  const int r = x.dim();
  if (static_cast<int>(pads.size()) != 2 * r) c.fail(fmt::format("{} pads for rank {}", pads.size(), r));
  IntList b(pads.begin(), pads.begin() + r), e(pads.begin() + r, pads.end());
  if (mode == "constant") return one(pad_constant(x, b, e, value));
  if (mode == "edge" || mode == "reflect") return one(pad_border(c, x, b, e, mode == "reflect"));
  c.fail(fmt::format("mode \"{}\"", mode));
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
    } else c.fail(fmt::format("coordinate_transformation_mode \"{}\"", r.coord));
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
      else c.fail(fmt::format("nearest_mode \"{}\"", r.nearest));
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
    c.fail(fmt::format("mode \"{}\"", r.mode));
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
inline std::vector<AnyTensor> resize_common(const NodeCtx& c, const std::vector<double>& scales_in, const IntList& sizes,
                                            const std::vector<double>& roi, const ResizeSpec& r) {
  AnyTensor x = c.in(0);
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
      if (!(scale > 0)) c.fail(fmt::format("scale {} must be positive", scale));
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

// ---- losses -----------------------------------------------------------------------------------

/// NegativeLogLikelihoodLoss on log-probabilities x (N, C, d...) and targets (N, d...): picks
/// -x[n, t, d...], weighted by weight[t] and 0 at ignore_index; mean divides by the weights' sum.
inline AnyTensor nll(const NodeCtx& c, const AnyTensor& x, const AnyTensor& target, const AnyTensor& weight) {
  if (x.dim() < 2) c.fail("input of rank < 2");
  const std::string red = c.as("reduction", "mean");
  if (red != "mean" && red != "sum" && red != "none") c.fail(fmt::format("reduction \"{}\"", red));
  AnyTensor t = o::cast(target, DType::i64);
  AnyTensor keep;
  if (c.has_attr("ignore_index")) {
    keep = o::ne(t, static_cast<double>(c.ai("ignore_index", 0)));
    t = o::where(keep, t, o::zeros(Shape{}, DType::i64));
  }
  AnyTensor picked = o::squeeze(o::gather(x, 1, o::unsqueeze(t, 1)), 1);
  AnyTensor w;
  if (weight.defined()) w = o::reshape(o::index_select(weight, 0, o::reshape(t, {t.numel()})), t.shape().vec());
  if (keep.defined()) {
    AnyTensor k = o::cast(keep, x.dtype());
    w = w.defined() ? o::mul(w, k) : k;
  }
  AnyTensor loss = o::neg(picked);
  if (w.defined()) loss = o::mul(loss, w);
  if (red == "none") return loss;
  if (red == "sum") return o::sum(loss);
  return w.defined() ? o::div(o::sum(loss), o::sum(w)) : o::mean(loss);
}
inline std::vector<AnyTensor> NegativeLogLikelihoodLoss(const NodeCtx& c) {
  return one(nll(c, c.in(0), c.in(1), c.has(2) ? c.in(2) : AnyTensor()));
}
inline std::vector<AnyTensor> SoftmaxCrossEntropyLoss(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  AnyTensor lp = o::log_softmax(x, 1);
  std::vector<AnyTensor> r{nll(c, lp, c.in(1), c.has(2) ? c.in(2) : AnyTensor())};
  if (c.wants_output(1)) r.push_back(lp);
  return r;
}

// ---- scatter, selection, einsum ----------------------------------------------------------------

/// ScatterElements (and Scatter before opset 11) on ms's scatter_add: "add" is scatter_add itself;
/// "none" takes the scattered values where an index lands and the data elsewhere.
inline std::vector<AnyTensor> ScatterElements(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  const int axis = axis_of(c, c.ai("axis", 0), x.dim());
  const std::string red = c.as("reduction", "none");
  AnyTensor idx = wrap_index(c, 1, x.shape()[axis]);
  const AnyTensor& upd = c.in(2);
  if (red == "add") return one(o::scatter_add(x, axis, idx, upd));
  if (red != "none") c.fail(fmt::format("reduction \"{}\"", red));
  AnyTensor hits = o::scatter_add(o::zeros(x.shape(), DType::f32), axis, idx, o::ones(upd.shape(), DType::f32));
  AnyTensor vals = o::scatter_add(o::zeros(x.shape(), x.dtype()), axis, idx, upd);
  return one(o::where(o::gt(hits, 0.0), vals, x));
}
/// ScatterND: the indexed axes flattened to one, then index_add along it.
inline std::vector<AnyTensor> ScatterND(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  AnyTensor idx = c.in(1);
  const AnyTensor& upd = c.in(2);
  const std::string red = c.as("reduction", "none");
  if (red != "none" && red != "add") c.fail(fmt::format("reduction \"{}\"", red));
  if (idx.dtype() != DType::i64) c.fail(fmt::format("indices of dtype {}", idx.dtype()));
  const int q = idx.dim();
  if (q < 1) c.fail("indices of rank 0");
  const std::int64_t k = idx.shape()[q - 1];
  if (k > x.dim()) c.fail("the index depth exceeds the data's rank");
  IntList strides(static_cast<std::size_t>(k)), dims;
  std::int64_t block = 1;
  for (std::int64_t j = k - 1; j >= 0; --j) {
    strides[static_cast<std::size_t>(j)] = block;
    block *= x.shape()[static_cast<int>(j)];
  }
  for (std::int64_t j = 0; j < k; ++j) dims.push_back(x.shape()[static_cast<int>(j)]);
  idx = o::where(o::lt(idx, 0.0), o::add(idx, i64_tensor(dims)), idx);
  AnyTensor lin = o::sum(o::mul(idx, i64_tensor(strides)), {q - 1}, false);
  lin = o::reshape(lin, {lin.numel()});
  IntList flat{block}, uflat{lin.numel()};
  for (int i = static_cast<int>(k); i < x.dim(); ++i) { flat.push_back(x.shape()[i]); uflat.push_back(x.shape()[i]); }
  AnyTensor xf = o::reshape(x, flat), uf = o::reshape(upd, uflat);
  if (red == "add") return one(o::reshape(o::index_add(xf, 0, lin, uf), x.shape().vec()));
  IntList ms(flat.size(), 1);
  ms[0] = block;
  AnyTensor hits = o::index_add(o::zeros(Shape{block}, DType::f32), 0, lin, o::ones(Shape{lin.numel()}, DType::f32));
  AnyTensor vals = o::index_add(o::zeros(Shape(flat), x.dtype()), 0, lin, uf);
  return one(o::reshape(o::where(o::gt(o::reshape(hits, ms), 0.0), vals, xf), x.shape().vec()));
}
/// TopK as k rounds of argmax (argmin) that mask what they found: ties go to the lower index,
/// the results come sorted. For small k (at most 64).
inline std::vector<AnyTensor> TopK(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  const std::int64_t k = c.opset() < 10 ? c.ai("k", 0) : static_cast<std::int64_t>(c.scalar(1));
  if (x.dim() == 0) c.fail("input of rank 0");
  const int axis = axis_of(c, c.ai("axis", -1), x.dim());
  const bool largest = c.ai("largest", 1) != 0;
  const std::int64_t n = x.shape()[axis];
  if (k < 0 || k > n) c.fail(fmt::format("k={} for an axis of size {}", k, n));
  if (k > 64) c.fail(fmt::format("k={} (at most 64)", k));
  IntList iota(static_cast<std::size_t>(n)), ishape(static_cast<std::size_t>(x.dim()), 1);
  std::iota(iota.begin(), iota.end(), 0);
  ishape[static_cast<std::size_t>(axis)] = n;
  AnyTensor pos = o::reshape(i64_tensor(iota), ishape);
  AnyTensor fill = o::full(Shape{}, largest ? -std::numeric_limits<double>::infinity()
                                             : std::numeric_limits<double>::infinity(), x.dtype());
  AnyTensor cur = x;
  std::vector<AnyTensor> vs, is;
  for (std::int64_t j = 0; j < k; ++j) {
    AnyTensor i = largest ? o::argmax(cur, axis, true) : o::argmin(cur, axis, true);
    vs.push_back(o::gather(x, axis, i));
    is.push_back(i);
    if (j + 1 < k) cur = o::where(o::eq(pos, i), fill, cur);
  }
  if (k == 0) {
    IntList s = x.shape().vec();
    s[static_cast<std::size_t>(axis)] = 0;
    return {o::zeros(Shape(s), x.dtype()), o::zeros(Shape(s), DType::i64)};
  }
  return {o::concat(vs, axis), o::concat(is, axis)};
}
/// Einsum without repeated letters in one operand: every operand permuted and broadcast to the
/// letters of the whole equation, multiplied, and summed over the letters the output lacks.
inline std::vector<AnyTensor> Einsum(const NodeCtx& c) {
  std::string eq;
  for (char ch : c.as("equation", "")) if (ch != ' ') eq += ch;
  const auto arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), rhs;
  std::vector<std::string> terms;
  for (std::size_t b = 0;;) {
    const auto e = lhs.find(',', b);
    terms.push_back(lhs.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  if (terms.size() != c.num_inputs()) c.fail(fmt::format("equation \"{}\" names {} operands, the node has {}", eq, terms.size(), c.num_inputs()));
  // Ellipsis dims become letters '0', '1', ... counted from the right (they broadcast).
  int ell = 0;
  std::vector<std::string> sub(terms.size());
  for (std::size_t t = 0; t < terms.size(); ++t) {
    const std::string& s = terms[t];
    const auto dots = s.find("...");
    const int named = static_cast<int>(s.size()) - (dots == std::string::npos ? 0 : 3);
    const int rank = c.in(t).dim();
    if (dots == std::string::npos) {
      if (named != rank) c.fail(fmt::format("operand {} has rank {}, \"{}\" names {}", t, rank, s, named));
      sub[t] = s;
    } else {
      const int ne = rank - named;
      if (ne < 0) c.fail(fmt::format("operand {} has rank {}, fewer than \"{}\" names", t, rank, s));
      ell = std::max(ell, ne);
      std::string e;
      for (int j = ne - 1; j >= 0; --j) e += static_cast<char>('0' + j);
      sub[t] = s.substr(0, dots) + e + s.substr(dots + 3);
    }
  }
  std::string ell_letters;
  for (int j = ell - 1; j >= 0; --j) ell_letters += static_cast<char>('0' + j);
  if (arrow != std::string::npos) {
    rhs = eq.substr(arrow + 2);
    const auto dots = rhs.find("...");
    if (dots != std::string::npos) rhs = rhs.substr(0, dots) + ell_letters + rhs.substr(dots + 3);
  } else {
    std::map<char, int> count;
    for (auto& s : sub) for (char ch : s) count[ch]++;
    rhs = ell_letters;
    for (auto& [ch, n] : count) if (n == 1 && !std::isdigit(static_cast<unsigned char>(ch))) rhs += ch;
  }
  std::string all = rhs;
  for (auto& s : sub) for (char ch : s) if (all.find(ch) == std::string::npos) all += ch;
  AnyTensor prod;
  for (std::size_t t = 0; t < sub.size(); ++t) {
    const std::string& s = sub[t];
    for (std::size_t a = 0; a < s.size(); ++a)
      if (s.find(s[a], a + 1) != std::string::npos) c.fail(fmt::format("a repeated index '{}' in one operand (a diagonal)", s[a]));
    IntList perm, shape;
    std::string order;
    for (char ch : all) if (s.find(ch) != std::string::npos) { perm.push_back(static_cast<std::int64_t>(s.find(ch))); order += ch; }
    AnyTensor x = o::permute(c.in(t), perm);
    for (char ch : all) shape.push_back(order.find(ch) != std::string::npos ? c.in(t).shape()[static_cast<int>(s.find(ch))] : 1);
    x = o::reshape(x, shape);
    prod = prod.defined() ? o::mul(prod, x) : x;
  }
  IntList axes;
  for (std::size_t a = rhs.size(); a < all.size(); ++a) axes.push_back(static_cast<std::int64_t>(a));
  if (!axes.empty()) prod = o::sum(prod, axes, false);
  return one(o::contiguous(prod));
}
inline std::vector<AnyTensor> Compress(const NodeCtx& c) {
  AnyTensor x = c.in(0);
  const std::vector<double> cond = c.doubles(1);
  int axis;
  if (c.has_attr("axis")) axis = axis_of(c, c.ai("axis", 0), x.dim());
  else { x = o::reshape(x, {x.numel()}); axis = 0; }
  IntList idx;
  for (std::size_t i = 0; i < cond.size() && static_cast<std::int64_t>(i) < x.shape()[axis]; ++i)
    if (cond[i] != 0) idx.push_back(static_cast<std::int64_t>(i));
  return one(o::index_select(x, axis, i64_tensor(idx)));
}
inline std::vector<AnyTensor> NonZero(const NodeCtx& c) {
  const AnyTensor& x = c.need_const(0);  // the output's shape depends on the values
  std::vector<double> v = c.doubles(0);
  const int r = std::max(x.dim(), 1);
  std::vector<IntList> rows(static_cast<std::size_t>(r));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0) continue;
    std::int64_t rem = static_cast<std::int64_t>(i);
    for (int a = x.dim() - 1; a >= 0; --a) {
      rows[static_cast<std::size_t>(a)].push_back(rem % x.shape()[a]);
      rem /= x.shape()[a];
    }
    if (x.dim() == 0) rows[0].push_back(0);
  }
  IntList flat;
  for (auto& rw : rows) flat.insert(flat.end(), rw.begin(), rw.end());
  return one(o::reshape(i64_tensor(flat), {r, static_cast<std::int64_t>(rows[0].size())}));
}
inline std::vector<AnyTensor> BitShift(const NodeCtx& c) {
  const AnyTensor &x = c.in(0), &y = c.in(1);
  if (x.dtype() != DType::u8 || y.dtype() != DType::u8) c.fail(fmt::format("dtype {} (uint8 is supported)", x.dtype()));
  const std::string dir = c.as("direction", "");
  AnyTensor p = o::pow(2.0, o::cast(y, DType::f64));
  AnyTensor xf = o::cast(x, DType::f64);
  AnyTensor r;
  if (dir == "LEFT") {
    r = o::mul(xf, p);
    r = o::sub(r, o::mul(o::floor(o::div(r, 256.0)), 256.0));  // uint8 wraps
  } else if (dir == "RIGHT") {
    r = o::floor(o::div(xf, p));
  } else {
    c.fail(fmt::format("direction \"{}\"", dir));
  }
  return one(o::cast(r, DType::u8));
}

// ---- windows, quantization, sequences --------------------------------------------------------

/// Hann, Hamming and Blackman windows: computed at load from the (constant) size.
template <int Kind>
std::vector<AnyTensor> window_fn(const NodeCtx& c) {
  const auto n = static_cast<std::int64_t>(c.scalar(0));
  if (n < 0) c.fail("a negative size");
  const bool periodic = c.ai("periodic", 1) != 0;
  auto dt = dtype_from_onnx(static_cast<int>(c.ai("output_datatype", pb::TensorProto::FLOAT)));
  if (!dt || !is_float(*dt)) c.fail("output_datatype other than float or double");
  AnyTensor out = AnyTensor::empty(Shape{n}, DType::f64);
  const double den = static_cast<double>(periodic ? n : n - 1), pi = 3.14159265358979323846;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = den > 0 ? 2 * pi * static_cast<double>(i) / den : 0;
    double v;
    if (Kind == 0) v = 0.5 - 0.5 * std::cos(a);
    else if (Kind == 1) v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(a);
    else v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    static_cast<double*>(out.raw_data())[i] = v;
  }
  return one(o::cast(out, *dt));
}
/// y = saturate(round_half_even(x / scale) + zero_point), to uint8 (int8 has no ms dtype).
inline std::vector<AnyTensor> QuantizeLinear(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  need_float(c, x);
  AnyTensor scale = c.in(1), zp = c.has(2) ? c.in(2) : o::zeros(Shape{}, DType::u8);
  if (zp.dtype() != DType::u8) c.fail(fmt::format("zero point of dtype {} (uint8 is supported)", zp.dtype()));
  if (scale.dim() == 1 && x.dim() > 1) {  // per axis
    const int axis = axis_of(c, c.ai("axis", 1), x.dim());
    IntList s(static_cast<std::size_t>(x.dim()), 1);
    s[static_cast<std::size_t>(axis)] = scale.numel();
    scale = o::reshape(scale, s);
    zp = o::reshape(zp, s);
  }
  AnyTensor y = o::add(o::round(o::div(x, o::cast(scale, x.dtype()))), o::cast(zp, x.dtype()));
  return one(o::cast(o::clamp(y, 0, 255), DType::u8));
}
inline std::vector<AnyTensor> DequantizeLinear(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  if (x.dtype() != DType::u8 && x.dtype() != DType::i32) c.fail(fmt::format("input of dtype {}", x.dtype()));
  AnyTensor scale = c.in(1), zp = c.has(2) ? c.in(2) : o::zeros(Shape{}, x.dtype());
  if (scale.dim() == 1 && x.dim() > 1) {
    const int axis = axis_of(c, c.ai("axis", 1), x.dim());
    IntList s(static_cast<std::size_t>(x.dim()), 1);
    s[static_cast<std::size_t>(axis)] = scale.numel();
    scale = o::reshape(scale, s);
    zp = o::reshape(zp, s);
  }
  return one(o::mul(o::sub(o::cast(x, scale.dtype()), o::cast(zp, scale.dtype())), scale));
}
/// DynamicQuantizeLinear: uint8 with the scale and zero point of x's range (which includes 0).
inline std::vector<AnyTensor> DynamicQuantizeLinear(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  if (x.dtype() != DType::f32) c.fail(fmt::format("input of dtype {}", x.dtype()));
  AnyTensor lo = o::minimum(o::min(x), 0.0), hi = o::maximum(o::max(x), 0.0);
  AnyTensor scale = o::div(o::sub(hi, lo), 255.0);
  AnyTensor zpf = o::clamp(o::round(o::sub(0.0, o::div(lo, scale))), 0, 255);
  AnyTensor y = o::clamp(o::add(o::round(o::div(x, scale)), zpf), 0, 255);
  return {o::cast(y, DType::u8), scale, o::cast(zpf, DType::u8)};
}
/// ReverseSequence: the first lengths[b] steps of each batch entry reversed (constant lengths).
inline std::vector<AnyTensor> ReverseSequence(const NodeCtx& c) {
  const AnyTensor& x = c.in(0);
  IntList len = c.ints(1);
  const int ta = axis_of(c, c.ai("time_axis", 0), x.dim()), ba = axis_of(c, c.ai("batch_axis", 1), x.dim());
  const std::int64_t T = x.shape()[ta], B = x.shape()[ba];
  if (static_cast<std::int64_t>(len.size()) != B) c.fail("sequence_lens must have one entry per batch entry");
  AnyTensor idx = AnyTensor::empty(Shape{T, B}, DType::i64);
  auto* p = static_cast<std::int64_t*>(idx.raw_data());
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t l = std::clamp<std::int64_t>(len[static_cast<std::size_t>(b)], 0, T);
      p[t * B + b] = t < l ? l - 1 - t : t;
    }
  IntList s(static_cast<std::size_t>(x.dim()), 1);
  s[static_cast<std::size_t>(ta)] = T;
  s[static_cast<std::size_t>(ba)] = B;
  AnyTensor i2 = ta < ba ? idx : o::contiguous(o::transpose(idx, 0, 1));
  AnyTensor full = o::contiguous(o::expand(o::reshape(i2, s), x.shape().vec()));
  return one(o::gather(x, ta, full));
}

/// Unique of a constant tensor (its output shape depends on the values): the distinct values or
/// slices along `axis`, sorted or in order of first occurrence, with their first indices, the
/// inverse indices and the counts.
inline std::vector<AnyTensor> Unique(const NodeCtx& c) {
  AnyTensor x = c.need_const(0);
  const std::vector<double> v = c.doubles(0);
  const bool sorted = c.ai("sorted", 1) != 0;
  int axis = -1;
  if (c.has_attr("axis")) axis = axis_of(c, c.ai("axis", 0), x.dim());
  else x = o::reshape(x, {x.numel()});
  const int ax = axis < 0 ? 0 : axis;
  const std::int64_t n = x.shape()[ax];
  // Slice k of the axis as a vector of values, for comparing.
  std::int64_t inner = 1, outer = 1;
  for (int i = ax + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  for (int i = 0; i < ax; ++i) outer *= x.shape()[i];
  std::vector<std::vector<double>> sl(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k)
    for (std::int64_t o_ = 0; o_ < outer; ++o_)
      for (std::int64_t i = 0; i < inner; ++i)
        sl[static_cast<std::size_t>(k)].push_back(v[static_cast<std::size_t>((o_ * n + k) * inner + i)]);
  IntList first, inverse(static_cast<std::size_t>(n)), counts;
  for (std::int64_t k = 0; k < n; ++k) {
    auto it = std::find_if(first.begin(), first.end(), [&](std::int64_t f) { return sl[static_cast<std::size_t>(f)] == sl[static_cast<std::size_t>(k)]; });
    if (it == first.end()) { first.push_back(k); counts.push_back(1); }
    else counts[static_cast<std::size_t>(it - first.begin())]++;
  }
  IntList order(first.size());
  std::iota(order.begin(), order.end(), 0);
  if (sorted)
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      return sl[static_cast<std::size_t>(first[static_cast<std::size_t>(a)])] < sl[static_cast<std::size_t>(first[static_cast<std::size_t>(b)])];
    });
  IntList idx, cnt;
  for (auto o_ : order) { idx.push_back(first[static_cast<std::size_t>(o_)]); cnt.push_back(counts[static_cast<std::size_t>(o_)]); }
  for (std::int64_t k = 0; k < n; ++k)
    for (std::size_t j = 0; j < idx.size(); ++j)
      if (sl[static_cast<std::size_t>(idx[j])] == sl[static_cast<std::size_t>(k)]) inverse[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(j);
  return {o::index_select(x, ax, i64_tensor(idx)), i64_tensor(idx), i64_tensor(inverse), i64_tensor(cnt)};
}

// ---- recurrent layers --------------------------------------------------------------------------

/// RNN (Kind 0), GRU (1) and LSTM (2), unrolled over the (static) sequence: one linear() per gate
/// block and step. Directions forward, reverse and bidirectional; sequence_lens masks the steps
/// past each entry's length (a reverse direction runs on the per-entry reversed sequence).
template <int Kind>
std::vector<AnyTensor> recurrent(const NodeCtx& c) {
  const int G = Kind == 0 ? 1 : Kind == 1 ? 3 : 4;
  AnyTensor X = c.in(0);
  need_float(c, X);
  for (std::size_t i : {0, 1, 2}) need_rank(c, i, 3);
  if (c.has(3)) need_rank(c, 3, 2);
  for (std::size_t i : {5, 6}) if (c.has(i)) need_rank(c, i, 3);
  if (c.has(7)) need_rank(c, 7, 2);
  if (c.has(4)) need_rank(c, 4, 1);
  const bool batch_first = c.ai("layout", 0) != 0;
  if (batch_first) X = o::permute(X, {1, 0, 2});
  const std::int64_t T = X.shape()[0], Bn = X.shape()[1];
  const std::int64_t H = c.ai("hidden_size", c.in(2).shape()[2]);
  const std::string dir = c.as("direction", "forward");
  const int nd = dir == "bidirectional" ? 2 : 1;
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") c.fail(fmt::format("direction \"{}\"", dir));
  if (Kind == 2 && c.ai("input_forget", 0)) c.fail("input_forget=1");
  const double clip = c.af("clip", 0.0);
  // Activations: f (and g, h) per direction; the defaults, or Sigmoid/Tanh/Relu by name.
  std::vector<std::string> acts;
  if (const auto* a = c.attr("activations")) for (const auto& v : a->strings()) acts.push_back(v);
  const std::vector<std::string> dflt = Kind == 0 ? std::vector<std::string>{"Tanh"}
                                      : Kind == 1 ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                  : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (acts.empty()) for (int d = 0; d < nd; ++d) acts.insert(acts.end(), dflt.begin(), dflt.end());
  if (acts.size() != dflt.size() * static_cast<std::size_t>(nd)) c.fail("the activations list does not fit the direction");
  if (c.has_attr("activation_alpha") || c.has_attr("activation_beta")) c.fail("activation_alpha/beta");
  auto act = [&](const std::string& name, AnyTensor v) {
    if (clip > 0) v = o::clamp(v, -clip, clip);
    if (name == "Sigmoid") return o::sigmoid(v);
    if (name == "Tanh") return o::tanh(v);
    if (name == "Relu") return o::relu(v);
    c.fail(fmt::format("activation {}", name));
  };
  IntList lens(static_cast<std::size_t>(Bn), T);
  bool masked = false;
  if (c.has(4)) {
    lens = c.ints(4);
    for (auto l : lens) masked = masked || l != T;
  }
  AnyTensor mask_all;  // (T, B, 1) bool: step t is inside entry b's sequence
  if (masked) {
    mask_all = AnyTensor::empty(Shape{T, Bn, 1}, DType::b8);
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t b = 0; b < Bn; ++b) static_cast<bool*>(mask_all.raw_data())[t * Bn + b] = t < lens[static_cast<std::size_t>(b)];
  }
  auto rev = [&](const AnyTensor& v) {  // per-entry reversal of (T, B, ...) over the first lens[b] steps
    IntList idx;
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t b = 0; b < Bn; ++b) {
        const std::int64_t l = std::clamp<std::int64_t>(lens[static_cast<std::size_t>(b)], 0, T);
        idx.push_back((t < l ? l - 1 - t : t) * Bn + b);
      }
    IntList flat{T * Bn};
    for (int i = 2; i < v.dim(); ++i) flat.push_back(v.shape()[i]);
    return o::reshape(o::index_select(o::reshape(v, flat), 0, i64_tensor(idx)), v.shape().vec());
  };
  auto dir_slice = [&](std::size_t input, int d) {  // input[d] of a (num_directions, ...) input
    AnyTensor t = c.in(input);
    const IntList all = t.shape().vec();
    const IntList s(all.begin() + 1, all.end());
    return o::reshape(o::slice(t, 0, d, d + 1), s);
  };
  auto init = [&](std::size_t input, int d) {
    if (!c.has(input)) return o::zeros(Shape{Bn, H}, X.dtype());
    AnyTensor t = c.in(input);
    if (batch_first) t = o::permute(t, {1, 0, 2});
    return o::reshape(o::slice(t, 0, d, d + 1), {Bn, H});
  };
  std::vector<AnyTensor> ys, hs, cs;
  for (int d = 0; d < nd; ++d) {
    const bool backward = dir == "reverse" || d == 1;
    AnyTensor W = dir_slice(1, d), R = dir_slice(2, d);
    AnyTensor Wb, Rb, P;
    if (c.has(3)) {
      AnyTensor Bd = dir_slice(3, d);
      Wb = o::slice(Bd, 0, 0, G * H);
      Rb = o::slice(Bd, 0, G * H, 2 * G * H);
    }
    if (Kind == 2 && c.has(7)) P = dir_slice(7, d);
    auto gate = [&](const AnyTensor& m, std::int64_t k) { return o::slice(m, 1, k * H, (k + 1) * H); };
    auto wrow = [&](const AnyTensor& w, std::int64_t k) { return o::slice(w, 0, k * H, (k + 1) * H); };
    AnyTensor xs = backward ? rev(X) : X;
    AnyTensor h = init(5, d), cell = Kind == 2 ? init(6, d) : AnyTensor();
    const std::string* a = &acts[static_cast<std::size_t>(d) * dflt.size()];
    std::vector<AnyTensor> steps;
    for (std::int64_t t = 0; t < T; ++t) {
      AnyTensor xt = o::reshape(o::slice(xs, 0, t, t + 1), {Bn, X.shape()[2]});
      AnyTensor gx = o::linear(xt, W, Wb.defined() ? Wb : AnyTensor());
      AnyTensor hn, cn;
      if (Kind == 0) {
        hn = act(a[0], o::add(gx, o::linear(h, R, Rb.defined() ? Rb : AnyTensor())));
      } else if (Kind == 1) {
        // z, r from x and h; the candidate h applies r before or after R (linear_before_reset).
        AnyTensor hz = o::linear(h, wrow(R, 0), Rb.defined() ? wrow(Rb, 0) : AnyTensor());
        AnyTensor hr = o::linear(h, wrow(R, 1), Rb.defined() ? wrow(Rb, 1) : AnyTensor());
        AnyTensor z = act(a[0], o::add(gate(gx, 0), hz)), r = act(a[0], o::add(gate(gx, 1), hr));
        AnyTensor hh;
        if (c.ai("linear_before_reset", 0))
          hh = o::mul(r, o::linear(h, wrow(R, 2), Rb.defined() ? wrow(Rb, 2) : AnyTensor()));
        else
          hh = o::linear(o::mul(r, h), wrow(R, 2), Rb.defined() ? wrow(Rb, 2) : AnyTensor());
        AnyTensor cand = act(a[1], o::add(gate(gx, 2), hh));
        hn = o::add(o::mul(o::sub(1.0, z), cand), o::mul(z, h));
      } else {
        AnyTensor gh = o::add(gx, o::linear(h, R, Rb.defined() ? Rb : AnyTensor()));
        AnyTensor gi = gate(gh, 0), go = gate(gh, 1), gf = gate(gh, 2), gc = gate(gh, 3);
        if (P.defined()) {
          gi = o::add(gi, o::mul(o::slice(P, 0, 0, H), cell));
          gf = o::add(gf, o::mul(o::slice(P, 0, 2 * H, 3 * H), cell));
        }
        AnyTensor i = act(a[0], gi), f = act(a[0], gf), cc = act(a[1], gc);
        cn = o::add(o::mul(f, cell), o::mul(i, cc));
        if (P.defined()) go = o::add(go, o::mul(o::slice(P, 0, H, 2 * H), cn));
        hn = o::mul(act(a[0], go), act(a[2], cn));
      }
      if (masked) {
        // Past an entry's length the state stays and the output is 0.
        AnyTensor m = o::reshape(o::slice(mask_all, 0, t, t + 1), {Bn, 1});
        AnyTensor zero = o::zeros(Shape{}, X.dtype());
        steps.push_back(o::where(m, hn, zero));
        h = o::where(m, hn, h);
        if (Kind == 2) cell = o::where(m, cn, cell);
      } else {
        steps.push_back(hn);
        h = hn;
        if (Kind == 2) cell = cn;
      }
    }
    AnyTensor y = o::stack(steps, 0);  // (T, B, H)
    if (backward) y = rev(y);
    ys.push_back(y);
    hs.push_back(h);
    cs.push_back(cell);
  }
  AnyTensor Y = o::stack(ys, 1);  // (T, nd, B, H)
  AnyTensor Yh = o::stack(hs, 0);  // (nd, B, H)
  if (batch_first) {
    Y = o::contiguous(o::permute(Y, {2, 0, 1, 3}));
    Yh = o::contiguous(o::permute(Yh, {1, 0, 2}));
  }
  std::vector<AnyTensor> r{Y, Yh};
  if (Kind == 2) {
    AnyTensor Yc = o::stack(cs, 0);
    if (batch_first) Yc = o::contiguous(o::permute(Yc, {1, 0, 2}));
    r.push_back(Yc);
  }
  return r;
}

#define MS_ONNX_ROW(Name) {#Name, &Name}
/// The conversion table: ONNX op type -> row.
inline const std::map<std::string, ConvertFn, std::less<>>& table() {
  static const std::map<std::string, ConvertFn, std::less<>> t = {
      MS_ONNX_ROW(Abs), MS_ONNX_ROW(Neg), MS_ONNX_ROW(Sign), MS_ONNX_ROW(Exp), MS_ONNX_ROW(Log),
      MS_ONNX_ROW(Sqrt), MS_ONNX_ROW(Reciprocal), MS_ONNX_ROW(Erf), MS_ONNX_ROW(Sin), MS_ONNX_ROW(Cos),
      MS_ONNX_ROW(Tan), MS_ONNX_ROW(Atan), MS_ONNX_ROW(Asin), MS_ONNX_ROW(Acos), MS_ONNX_ROW(Sinh), MS_ONNX_ROW(Cosh), MS_ONNX_ROW(Asinh), MS_ONNX_ROW(Acosh),
      MS_ONNX_ROW(Atanh), MS_ONNX_ROW(Tanh), MS_ONNX_ROW(Sigmoid), MS_ONNX_ROW(Relu), MS_ONNX_ROW(Floor),
      MS_ONNX_ROW(Ceil), MS_ONNX_ROW(Round), MS_ONNX_ROW(Not), MS_ONNX_ROW(Softplus), MS_ONNX_ROW(Softsign),
      MS_ONNX_ROW(IsNaN), MS_ONNX_ROW(IsInf), MS_ONNX_ROW(Mish), MS_ONNX_ROW(Identity), MS_ONNX_ROW(LeakyRelu),
      MS_ONNX_ROW(Elu), MS_ONNX_ROW(Selu), MS_ONNX_ROW(Celu), MS_ONNX_ROW(ThresholdedRelu),
      MS_ONNX_ROW(HardSigmoid), MS_ONNX_ROW(HardSwish), MS_ONNX_ROW(Shrink), MS_ONNX_ROW(PRelu),
      MS_ONNX_ROW(Add), MS_ONNX_ROW(Sub), MS_ONNX_ROW(Mul), MS_ONNX_ROW(Div), MS_ONNX_ROW(Mod), MS_ONNX_ROW(Pow),
      MS_ONNX_ROW(Equal), MS_ONNX_ROW(Greater), MS_ONNX_ROW(Less), MS_ONNX_ROW(GreaterOrEqual),
      MS_ONNX_ROW(LessOrEqual), MS_ONNX_ROW(And), MS_ONNX_ROW(Or), MS_ONNX_ROW(Xor), MS_ONNX_ROW(Where),
      {"Sum", &variadic<o::add>}, {"Max", &variadic<o::maximum>}, {"Min", &variadic<o::minimum>},
      MS_ONNX_ROW(Mean), MS_ONNX_ROW(Clip), MS_ONNX_ROW(Cast), MS_ONNX_ROW(CastLike),
      {"ReduceSum", &reduce<0>}, {"ReduceMean", &reduce<1>}, {"ReduceMax", &reduce<2>}, {"ReduceMin", &reduce<3>},
      {"ReduceProd", &reduce<4>}, {"ReduceL1", &reduce<5>}, {"ReduceL2", &reduce<6>},
      {"ReduceSumSquare", &reduce<7>}, {"ReduceLogSum", &reduce<8>}, {"ReduceLogSumExp", &reduce<9>},
      {"ArgMax", &arg_reduce<true>}, {"ArgMin", &arg_reduce<false>},
      MS_ONNX_ROW(MatMul), MS_ONNX_ROW(Gemm), MS_ONNX_ROW(Conv),
      {"MaxPool", &Pool<true>}, {"AveragePool", &Pool<false>},
      {"GlobalMaxPool", &GlobalPool<true>}, {"GlobalAveragePool", &GlobalPool<false>},
      MS_ONNX_ROW(BatchNormalization), MS_ONNX_ROW(InstanceNormalization), MS_ONNX_ROW(LayerNormalization),
      MS_ONNX_ROW(MeanVarianceNormalization), MS_ONNX_ROW(LpNormalization), MS_ONNX_ROW(LRN), MS_ONNX_ROW(Dropout),
      {"Softmax", &softmax_like<0>}, {"LogSoftmax", &softmax_like<1>}, {"Hardmax", &softmax_like<2>},
      MS_ONNX_ROW(Reshape), MS_ONNX_ROW(Flatten), MS_ONNX_ROW(Transpose), MS_ONNX_ROW(Squeeze),
      MS_ONNX_ROW(Unsqueeze), MS_ONNX_ROW(Concat), MS_ONNX_ROW(Split), MS_ONNX_ROW(Slice), MS_ONNX_ROW(Expand),
      MS_ONNX_ROW(Tile), MS_ONNX_ROW(Gather), MS_ONNX_ROW(GatherElements), {"Shape", &Shape_}, MS_ONNX_ROW(Size),
      MS_ONNX_ROW(Constant), MS_ONNX_ROW(ConstantOfShape), MS_ONNX_ROW(Range), MS_ONNX_ROW(OneHot),
      MS_ONNX_ROW(Trilu), MS_ONNX_ROW(CumSum), MS_ONNX_ROW(Pad), MS_ONNX_ROW(DepthToSpace),
      MS_ONNX_ROW(SpaceToDepth), MS_ONNX_ROW(EyeLike), MS_ONNX_ROW(NegativeLogLikelihoodLoss),
      MS_ONNX_ROW(SoftmaxCrossEntropyLoss), MS_ONNX_ROW(Resize), MS_ONNX_ROW(Upsample),
      MS_ONNX_ROW(ConvTranspose), MS_ONNX_ROW(GatherND), MS_ONNX_ROW(ScatterElements),
      {"Scatter", &ScatterElements}, MS_ONNX_ROW(ScatterND), MS_ONNX_ROW(TopK), MS_ONNX_ROW(Einsum),
      MS_ONNX_ROW(Compress), MS_ONNX_ROW(NonZero), MS_ONNX_ROW(BitShift),
      {"HannWindow", &window_fn<0>}, {"HammingWindow", &window_fn<1>}, {"BlackmanWindow", &window_fn<2>},
      MS_ONNX_ROW(QuantizeLinear), MS_ONNX_ROW(DequantizeLinear), MS_ONNX_ROW(DynamicQuantizeLinear),
      MS_ONNX_ROW(ReverseSequence), {"RNN", &recurrent<0>}, MS_ONNX_ROW(Unique), {"GRU", &recurrent<1>}, {"LSTM", &recurrent<2>},
  };
  return t;
}
#undef MS_ONNX_ROW

}  // namespace detail::conv

/// The ONNX op types the importer converts.
inline std::vector<std::string> supported_op_types() {
  std::vector<std::string> v;
  for (const auto& [k, f] : detail::conv::table()) v.push_back(k);
  return v;
}

}  // namespace ms::onnx
