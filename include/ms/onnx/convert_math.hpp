#pragma once
// ONNX op rows, math: elementwise ops (with the legacy broadcast of opsets < 7), the variadic ones,
// Clip, Cast, and the Reduce* / ArgMax family. See convert_base.hpp for what a row is.
#include "convert_base.hpp"

namespace ms::onnx::detail::conv {

namespace o = ms::ops;

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
  if (a.dtype() != b.dtype()) c.fail(MS_FORMAT("operands of dtypes {} and {}", a.dtype(), b.dtype()));
  if (a.dtype() != DType::i32 && a.dtype() != DType::i64 && a.dtype() != DType::u8)
    c.fail(MS_FORMAT("dtype {} is not supported", a.dtype()));
  return one(o::cast(trunc_div(a, b), a.dtype()));
}
/// Mod on ms's remainder (fmod=0: the divisor's sign) and fmod (fmod=1: the dividend's). float16
/// goes through float32: the result of either is exact, so it rounds back to itself.
inline std::vector<AnyTensor> Mod(const NodeCtx& c) {
  AnyTensor a = c.in(0), b = c.in(1);
  if (a.dtype() != b.dtype()) c.fail(MS_FORMAT("operands of dtypes {} and {}", a.dtype(), b.dtype()));
  const DType d = a.dtype();
  if (d == DType::f16) a = o::cast(a, DType::f32), b = o::cast(b, DType::f32);
  else if (d != DType::i32 && d != DType::i64 && d != DType::u8 && !is_float(d))
    c.fail(MS_FORMAT("dtype {} is not supported", d));
  AnyTensor y = c.ai("fmod", 0) != 0 ? o::fmod(a, b) : o::remainder(a, b);
  return one(d == DType::f16 ? o::cast(y, d) : y);
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
  if (!d) c.fail(MS_FORMAT("cast to {} (no ms dtype)", onnx_type_name(static_cast<int>(to))));
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

}  // namespace ms::onnx::detail::conv
