#pragma once
// Elementwise unary operators, each one functor (a generic formula over scalars
// and xsimd batches) plus one registration line. The functor serves the eager
// kernel, fusion and the op list alike. Gradients are attached in autograd/rules.hpp.

#include <limits>
#include <optional>

#include "elementwise.hpp"

namespace ms::ops {

#if MS_KERNEL_BODIES  // the formulas are kernels: core/linkage.hpp
namespace fx {  // the formulas
inline namespace MS_ISA_NS {
using simd::c;
#define MS_FORMULA1(Name, expr)                          \
  struct Name : NoParams {                               \
    using NoParams::NoParams;                            \
    template <class V>                                   \
    V operator()(V x) const { return expr; }             \
  };
MS_FORMULA1(Neg, simd::sub(c<V>(0), x))
MS_FORMULA1(Abs, simd::abs(x))
MS_FORMULA1(Sign, simd::select(x > c<V>(0), c<V>(1), simd::select(x < c<V>(0), c<V>(-1), x)))
MS_FORMULA1(Exp, simd::exp(x))
MS_FORMULA1(Log, simd::log(x))
MS_FORMULA1(Log1p, simd::log1p(x))
MS_FORMULA1(Expm1, simd::expm1(x))
MS_FORMULA1(Sqrt, simd::sqrt(x))
MS_FORMULA1(Rsqrt, c<V>(1) / simd::sqrt(x))
MS_FORMULA1(Square, simd::mul(x, x))
MS_FORMULA1(Reciprocal, c<V>(1) / x)
MS_FORMULA1(Erf, simd::erf(x))
MS_FORMULA1(Sin, simd::sin(x))
MS_FORMULA1(Cos, simd::cos(x))
MS_FORMULA1(Tanh, simd::tanh(x))
MS_FORMULA1(Sigmoid, c<V>(1) / (c<V>(1) + simd::exp(-x)))
MS_FORMULA1(Relu, simd::max(c<V>(0), x))  // NaN propagates: max returns its second operand
MS_FORMULA1(Gelu, c<V>(0.5) * x * (c<V>(1) + simd::erf(x * c<V>(0.70710678118654752440))))
// 1 + tanh(u) cancels for u << 0: the exp-based tanh keeps the small difference there.
MS_FORMULA1(GeluTanh, c<V>(0.5) * x *
                          (c<V>(1) + simd::tanh_exp(c<V>(0.79788456080286535588) * (x + c<V>(0.044715) * x * x * x))))
MS_FORMULA1(Silu, x / (c<V>(1) + simd::exp(-x)))
MS_FORMULA1(Softplus, simd::log1p(simd::exp(-simd::abs(x))) + simd::max(c<V>(0), x))  // stable for large |x|
// (x + 3) / 6 rounds twice; x / 6 + 1/2 loses up to 3 ulp to cancellation near x = -3.
MS_FORMULA1(Hardsigmoid, simd::min(c<V>(1), simd::max(c<V>(0), (x + c<V>(3)) / c<V>(6))))
MS_FORMULA1(Floor, simd::floor(x))
MS_FORMULA1(Ceil, simd::ceil(x))
MS_FORMULA1(Round, simd::nearbyint(x))
MS_FORMULA1(LogicalNot, !x)
#undef MS_FORMULA1

/// Functors with numeric attributes read them from params[] at construction.
struct LeakyRelu {
  double slope;
  explicit LeakyRelu(const double* p) : slope(p[0]) {}
  template <class V>
  V operator()(V x) const { return simd::select(x > c<V>(0), x, x * c<V>(slope)); }
};
struct Elu {
  double alpha;
  explicit Elu(const double* p) : alpha(p[0]) {}
  template <class V>
  V operator()(V x) const { return simd::select(x > c<V>(0), x, c<V>(alpha) * simd::expm1(x)); }
};
struct Clamp {
  double lo, hi;
  double ilo, ihi;  ///< for integer tensors: the integers inside [lo, hi] (2.5 clamps up to 3, not down to 2)
  explicit Clamp(const double* p) : lo(p[0]), hi(p[1]), ilo(std::ceil(p[0])), ihi(std::floor(p[1])) {}
  template <class V>
  V operator()(V x) const {
    using S = simd::scalar_t<V>;
    if constexpr (std::is_integral_v<S>) {
      S l = saturate<S>(ilo), h = saturate<S>(ihi);
      return x < l ? l : (x > h ? h : x);
    } else {
      return simd::min(c<V>(hi), simd::max(c<V>(lo), x));
    }
  }
  /// Converts a bound to S without overflow (infinite bounds become S's limits).
  template <class S>
  static S saturate(double d) {
    if (!(d > static_cast<double>(std::numeric_limits<S>::lowest()))) return std::numeric_limits<S>::lowest();
    if (!(d < static_cast<double>(std::numeric_limits<S>::max()))) return std::numeric_limits<S>::max();
    return static_cast<S>(d);
  }
};
struct PowScalar {
  double e;
  explicit PowScalar(const double* p) : e(p[0]) {}
  template <class V>
  V operator()(V x) const {
    // Common exponents take exact or twice-rounded forms instead of the general pow.
    if (e == 2) return simd::mul(x, x);
    if (e == 1) return x;
    if (e == 0) return c<V>(1);  // even for NaN, like pow
    if (e == 3) return simd::mul(simd::mul(x, x), x);
    if constexpr (!std::is_integral_v<simd::scalar_t<V>>) {
      if (e == -1) return c<V>(1) / x;
      if (e == 0.5)  // pow(-0, 0.5) is +0 and pow(-inf, 0.5) is +inf, unlike sqrt
        return simd::select(x == c<V>(-std::numeric_limits<double>::infinity()),
                            c<V>(std::numeric_limits<double>::infinity()), simd::sqrt(x) + c<V>(0));
    }
    return simd::pow(x, c<V>(e));
  }
};
}  // namespace MS_ISA_NS
}  // namespace fx
#endif  // MS_KERNEL_BODIES

inline constexpr DTypeSet kSignedNumeric{DType::f32, DType::f64, DType::i32, DType::i64};

#define MS_UNARY(NAME, F, Types, FLOPS, DOC)                                                        \
  namespace ops {                                                                                   \
  MS_ELEMENTWISE_REGISTRATION(const OpDef& NAME##_op, make_elementwise_op<fx::F, 1, Types>({.name = #NAME, .doc = DOC, .flops = FLOPS, .formula = "ms::ops::fx::" #F})); \
  inline AnyTensor NAME(const AnyTensor& x) { return call1(NAME##_op, {x}); }                       \
  }                                                                                                 \
  template <Element T>                                                                              \
  Tensor<T> NAME(const Tensor<T>& x) {                                                              \
    return ops::NAME(x);                                                                            \
  }

}  // namespace ms::ops

namespace ms {
MS_UNARY(neg, Neg, kSignedNumeric, 1, "-x")
MS_UNARY(abs, Abs, kNumericTypes, 1, "|x|")
MS_UNARY(sign, Sign, kSignedNumeric, 2, "-1, 0 or 1 by the sign of x (NaN stays NaN)")
MS_UNARY(exp, Exp, kFloatTypes, 10, "e^x")
MS_UNARY(log, Log, kFloatTypes, 10, "natural logarithm")
MS_UNARY(log1p, Log1p, kFloatTypes, 10, "log(1 + x), accurate near 0")
MS_UNARY(expm1, Expm1, kFloatTypes, 10, "e^x - 1, accurate near 0")
MS_UNARY(sqrt, Sqrt, kFloatTypes, 4, "square root")
MS_UNARY(rsqrt, Rsqrt, kFloatTypes, 5, "1 / sqrt(x)")
MS_UNARY(square, Square, kNumericTypes, 1, "x * x")
MS_UNARY(reciprocal, Reciprocal, kFloatTypes, 1, "1 / x")
MS_UNARY(erf, Erf, kFloatTypes, 15, "error function")
MS_UNARY(sin, Sin, kFloatTypes, 15, "sine")
MS_UNARY(cos, Cos, kFloatTypes, 15, "cosine")
MS_UNARY(tanh, Tanh, kFloatTypes, 15, "hyperbolic tangent")
MS_UNARY(sigmoid, Sigmoid, kFloatTypes, 12, "1 / (1 + e^-x)")
MS_UNARY(relu, Relu, kSignedNumeric, 1, "max(x, 0)")
MS_UNARY(gelu, Gelu, kFloatTypes, 20, "x * Phi(x) (exact erf form)")
MS_UNARY(gelu_tanh, GeluTanh, kFloatTypes, 20, "GELU, tanh approximation")
MS_UNARY(silu, Silu, kFloatTypes, 12, "x * sigmoid(x)")
MS_UNARY(softplus, Softplus, kFloatTypes, 20, "log(1 + e^x), stable form")
MS_UNARY(hardsigmoid, Hardsigmoid, kFloatTypes, 3, "clamp(x / 6 + 1/2, 0, 1)")
MS_UNARY(floor, Floor, kFloatTypes, 1, "round toward -inf")
MS_UNARY(ceil, Ceil, kFloatTypes, 1, "round toward +inf")
MS_UNARY(round, Round, kFloatTypes, 1, "round half to even (like NumPy)")
MS_UNARY(logical_not, LogicalNot, DTypeSet{DType::b8}, 1, "not x (bool)")
#undef MS_UNARY

namespace ops {
MS_ELEMENTWISE_REGISTRATION(const OpDef& leaky_relu_op, make_elementwise_op<fx::LeakyRelu, 1, kFloatTypes>(
    {.name = "leaky_relu", .doc = "x if x > 0 else slope * x", .flops = 2, .attr_names = {"slope"},
     .params = [](const Attrs& a, double* p) { p[0] = a.f("slope", 0.01); }, .formula = "ms::ops::fx::LeakyRelu"}));
MS_ELEMENTWISE_REGISTRATION(const OpDef& elu_op, make_elementwise_op<fx::Elu, 1, kFloatTypes>(
    {.name = "elu", .doc = "x if x > 0 else alpha * (e^x - 1)", .flops = 10, .attr_names = {"alpha"},
     .params = [](const Attrs& a, double* p) { p[0] = a.f("alpha", 1.0); }, .formula = "ms::ops::fx::Elu"}));
MS_ELEMENTWISE_REGISTRATION(const OpDef& clamp_op, make_elementwise_op<fx::Clamp, 1, kNumericTypes>(
    {.name = "clamp", .doc = "min(max(x, lo), hi)", .flops = 2, .attr_names = {"lo", "hi"},
     .params = [](const Attrs& a, double* p) {
       p[0] = a.f("lo", -std::numeric_limits<double>::infinity());
       p[1] = a.f("hi", std::numeric_limits<double>::infinity());
     }, .formula = "ms::ops::fx::Clamp"}));
MS_ELEMENTWISE_REGISTRATION(const OpDef& pow_scalar_op, make_elementwise_op<fx::PowScalar, 1, kNumericTypes>(
    {.name = "pow_scalar", .doc = "x ^ exponent (a scalar)", .flops = 10, .attr_names = {"exponent"},
     .params = [](const Attrs& a, double* p) { p[0] = a.f("exponent"); }, .formula = "ms::ops::fx::PowScalar"}));

inline AnyTensor leaky_relu(const AnyTensor& x, double slope = 0.01) {
  return call1(leaky_relu_op, {x}, Attrs{{"slope", slope}});
}
inline AnyTensor elu(const AnyTensor& x, double alpha = 1.0) { return call1(elu_op, {x}, Attrs{{"alpha", alpha}}); }
/// Limits every element to [min, max]; an omitted bound (std::nullopt) leaves that side open.
/// The attributes keep the names lo and hi of the frozen-model format.
inline AnyTensor clamp(const AnyTensor& x, std::optional<double> min, std::optional<double> max = std::nullopt) {
  MS_CHECK(min || max, ValueError, "clamp: at least one of min and max must be given");
  const double lo = min.value_or(-std::numeric_limits<double>::infinity());
  const double hi = max.value_or(std::numeric_limits<double>::infinity());
  MS_CHECK(!(lo > hi), ValueError, "clamp: min ({}) is greater than max ({})", lo, hi);
  return call1(clamp_op, {x}, Attrs{{"lo", lo}, {"hi", hi}});
}
/// max(x, min): clamp with a lower bound only.
inline AnyTensor clamp_min(const AnyTensor& x, double min) { return clamp(x, min, std::nullopt); }
/// min(x, max): clamp with an upper bound only.
inline AnyTensor clamp_max(const AnyTensor& x, double max) { return clamp(x, std::nullopt, max); }
inline AnyTensor pow(const AnyTensor& x, double exponent) {
  if (is_integral(x.dtype()))
    MS_CHECK(exponent == std::floor(exponent) && exponent >= 0, ValueError,
             "pow: integer tensors ({}) need a non-negative integer exponent, got {}", x.dtype(), exponent);
  return call1(pow_scalar_op, {x}, Attrs{{"exponent", exponent}});
}
}  // namespace ops

/// x if x > 0 else slope * x.
template <Element T>
Tensor<T> leaky_relu(const Tensor<T>& x, double slope = 0.01) { return ops::leaky_relu(x, slope); }
/// x if x > 0 else alpha * (e^x - 1).
template <Element T>
Tensor<T> elu(const Tensor<T>& x, double alpha = 1.0) { return ops::elu(x, alpha); }
/// Limits every element to [min, max] (torch.clamp); std::nullopt leaves a side open.
template <Element T>
Tensor<T> clamp(const Tensor<T>& x, std::optional<double> min, std::optional<double> max = std::nullopt) {
  return ops::clamp(x, min, max);
}
/// max(x, min) elementwise (torch.clamp_min).
template <Element T>
Tensor<T> clamp_min(const Tensor<T>& x, double min) { return ops::clamp_min(x, min); }
/// min(x, max) elementwise (torch.clamp_max).
template <Element T>
Tensor<T> clamp_max(const Tensor<T>& x, double max) { return ops::clamp_max(x, max); }
/// x raised to a scalar power.
template <Element T>
Tensor<T> pow(const Tensor<T>& x, double exponent) { return ops::pow(x, exponent); }
/// GELU; approximate = "tanh" selects the tanh form.
template <Element T>
Tensor<T> gelu(const Tensor<T>& x, std::string_view approximate) {
  MS_CHECK(approximate == "none" || approximate == "tanh", ValueError,
           "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  return approximate == "tanh" ? gelu_tanh(x) : gelu(x);
}

}  // namespace ms
