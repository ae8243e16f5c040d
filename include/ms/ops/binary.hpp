#pragma once
// Elementwise binary operators with NumPy broadcasting (arithmetic, maximum/minimum,
// comparisons to bool, logical and/or), `where`, scalar operands on either side,
// and the C++ operators (+ - * / unary -, == != < <= > >=) on Tensor<T>.

#include <limits>

#include "elementwise.hpp"
#include "unary.hpp"  // neg and logical_not, behind unary - and !

namespace ms::ops {

#if MS_KERNEL_BODIES  // the formulas are kernels: core/linkage.hpp
namespace fx {
inline namespace MS_ISA_NS {
using simd::c;
#define MS_FORMULA2(Name, expr)                     \
  struct Name : NoParams {                          \
    using NoParams::NoParams;                       \
    template <class V>                              \
    auto operator()(V a, V b) const { return expr; } \
  };
MS_FORMULA2(Add, simd::add(a, b))
MS_FORMULA2(Sub, simd::sub(a, b))
MS_FORMULA2(Mul, simd::mul(a, b))
MS_FORMULA2(Div, a / b)
MS_FORMULA2(Pow, simd::pow(a, b))
// NaN in either operand propagates (NumPy maximum/minimum).
MS_FORMULA2(Maximum, simd::select(simd::isnan(a), a, simd::max(a, b)))
MS_FORMULA2(Minimum, simd::select(simd::isnan(a), a, simd::min(a, b)))
MS_FORMULA2(Eq, a == b)
// As !(a == b): xsimd's batch != is an ordered compare, false for NaN, where C++ and NumPy give true.
MS_FORMULA2(Ne, !(a == b))
MS_FORMULA2(Lt, a < b)
MS_FORMULA2(Le, a <= b)
MS_FORMULA2(Gt, a > b)
MS_FORMULA2(Ge, a >= b)
MS_FORMULA2(LogicalAnd, a && b)
MS_FORMULA2(LogicalOr, a || b)
#undef MS_FORMULA2

// fmod keeps the dividend's sign (C, ONNX Mod fmod=1); remainder the divisor's (Python,
// NumPy, ONNX Mod fmod=0). Integer division by zero gives 0 (NumPy's result) instead of a
// trap, and so does x % -1 (INT_MIN % -1 overflows in C). Batches go lane by lane: std::fmod
// is exact, a - trunc(a / b) * b is not.
template <class T>
inline T fmod_scalar(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return std::fmod(a, b);
  else if constexpr (std::is_unsigned_v<T>) return b == 0 ? T(0) : static_cast<T>(a % b);
  else return b == 0 || b == T(-1) ? T(0) : static_cast<T>(a % b);
}
template <class T>
inline T remainder_scalar(T a, T b) {
  T r = fmod_scalar(a, b);
  if constexpr (std::is_floating_point_v<T>) {
    if (r == 0) return std::copysign(T(0), b);  // NumPy: a zero result takes the divisor's sign
    if ((r < 0) != (b < 0)) r += b;             // NaN stays NaN
  } else if constexpr (std::is_signed_v<T>) {
    if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
  }
  return r;
}
template <class V, class F>
inline V per_lane2(const V& a, const V& b, F f) {
  if constexpr (simd::is_batch_v<V>) {
    alignas(64) simd::scalar_t<V> x[V::size], y[V::size];
    a.store_aligned(x);
    b.store_aligned(y);
    for (std::size_t i = 0; i < V::size; ++i) x[i] = f(x[i], y[i]);
    return V::load_aligned(x);
  } else {
    return f(a, b);
  }
}
struct Fmod : NoParams {
  using NoParams::NoParams;
  template <class V>
  V operator()(V a, V b) const { return per_lane2(a, b, [](auto x, auto y) { return fmod_scalar(x, y); }); }
};
struct Remainder : NoParams {
  using NoParams::NoParams;
  template <class V>
  V operator()(V a, V b) const { return per_lane2(a, b, [](auto x, auto y) { return remainder_scalar(x, y); }); }
};
}  // namespace MS_ISA_NS
}  // namespace fx
#endif  // MS_KERNEL_BODIES

/// A 0-d tensor holding `v` in `dtype`; throws ValueError when v is not representable.
inline AnyTensor scalar_tensor(double v, DType dtype, std::string_view op = "scalar") {
  AnyTensor t = AnyTensor::empty(Shape{}, dtype);
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      MS_CHECK(v == std::floor(v) && v >= static_cast<double>(std::numeric_limits<T>::lowest()) &&
                   v <= static_cast<double>(std::numeric_limits<T>::max()),
               ValueError, "{}: scalar {} is not representable as {} (convert the tensor with ms::cast)", op, v,
               dtype);
    }
    *static_cast<T*>(t.raw_data()) = static_cast<T>(v);
  });
  return t;
}

inline constexpr DTypeSet kBoolOnly{DType::b8};

}  // namespace ms::ops

#define MS_BINARY(NAME, F, Types, Cmp, FLOPS, DOC)                                                         \
  namespace ops {                                                                                          \
  MS_ELEMENTWISE_REGISTRATION(const OpDef& NAME##_op, make_elementwise_op<fx::F, 2, Types, Cmp>({.name = #NAME, .doc = DOC, .flops = FLOPS, .formula = "ms::ops::fx::" #F})); \
  inline AnyTensor NAME(const AnyTensor& a, const AnyTensor& b) { return call1(NAME##_op, {a, b}); }       \
  inline AnyTensor NAME(const AnyTensor& a, double b) { return NAME(a, scalar_tensor(b, a.dtype(), #NAME)); } \
  inline AnyTensor NAME(double a, const AnyTensor& b) { return NAME(scalar_tensor(a, b.dtype(), #NAME), b); } \
  }

namespace ms {
MS_BINARY(add, Add, kNumericTypes, false, 1, "a + b")
MS_BINARY(sub, Sub, kNumericTypes, false, 1, "a - b")
MS_BINARY(mul, Mul, kNumericTypes, false, 1, "a * b")
MS_BINARY(div, Div, kFloatTypes, false, 1, "a / b (floating dtypes)")
MS_BINARY(maximum, Maximum, kNumericTypes, false, 1, "elementwise max; NaN propagates")
MS_BINARY(minimum, Minimum, kNumericTypes, false, 1, "elementwise min; NaN propagates")
MS_BINARY(eq, Eq, kAllTypes, true, 1, "a == b (bool)")
MS_BINARY(ne, Ne, kAllTypes, true, 1, "a != b (bool)")
MS_BINARY(lt, Lt, kNumericTypes, true, 1, "a < b (bool)")
MS_BINARY(le, Le, kNumericTypes, true, 1, "a <= b (bool)")
MS_BINARY(gt, Gt, kNumericTypes, true, 1, "a > b (bool)")
MS_BINARY(ge, Ge, kNumericTypes, true, 1, "a >= b (bool)")
MS_BINARY(logical_and, LogicalAnd, ops::kBoolOnly, false, 1, "a and b (bool)")
MS_BINARY(logical_or, LogicalOr, ops::kBoolOnly, false, 1, "a or b (bool)")
MS_BINARY(remainder, Remainder, kNumericTypes, false, 4, "a mod b with the sign of b (Python %, numpy.remainder, ONNX Mod)")
MS_BINARY(fmod, Fmod, kNumericTypes, false, 4, "a mod b with the sign of a (C fmod, torch.fmod, ONNX Mod fmod=1)")
#undef MS_BINARY

namespace ops {
// pow with a tensor exponent; a scalar exponent goes to pow_scalar (ops/unary.hpp).
MS_ELEMENTWISE_REGISTRATION(const OpDef& pow_op, make_elementwise_op<fx::Pow, 2, kNumericTypes>({.name = "pow", .doc = "a ^ b", .flops = 10, .formula = "ms::ops::fx::Pow"}));
inline AnyTensor pow(const AnyTensor& a, const AnyTensor& b) { return call1(pow_op, {a, b}); }
inline AnyTensor pow(double a, const AnyTensor& b) { return pow(scalar_tensor(a, b.dtype(), "pow"), b); }
}  // namespace ops

namespace ops {
#if MS_KERNEL_BODIES  // core/linkage.hpp
namespace detail {
inline namespace MS_ISA_NS {
template <class Row>
constexpr void fill_where_table(Row& t) {
  t[static_cast<int>(DType::f32)] = &where_block<float>;
  t[static_cast<int>(DType::f64)] = &where_block<double>;
  t[static_cast<int>(DType::i32)] = &where_block<std::int32_t>;
  t[static_cast<int>(DType::i64)] = &where_block<std::int64_t>;
  t[static_cast<int>(DType::u8)] = &where_block<std::uint8_t>;
  t[static_cast<int>(DType::b8)] = &where_block<bool>;
}
#if !defined(MS_ISA_LEVEL)
inline OpDef make_where_op() {
  OpDef d;
  d.name = "where";
  d.doc = "cond ? a : b, with broadcasting";
  d.category = Category::ternary;
  d.num_inputs = 3;
  d.infer = &infer_where;
  d.kernel = &elementwise_kernel;
  d.cpu_dtypes = kAllTypes | DTypeSet{DType::f16, DType::bf16};  // 16-bit floats via float32
  d.elementwise.dispatch_input = 1;
  fill_where_table(d.elementwise.block);
  return d;
}
#else
constexpr IsaKernelRow make_where_op() {
  IsaKernelRow r{};
  r.level = MS_ISA_LEVEL;
  r.name = "where";
  fill_where_table(r.block);
  return r;
}
#endif
}  // namespace MS_ISA_NS
}  // namespace detail
#endif  // MS_KERNEL_BODIES
MS_ELEMENTWISE_REGISTRATION(const OpDef& where_op, detail::make_where_op());
inline AnyTensor where(const AnyTensor& cond, const AnyTensor& a, const AnyTensor& b) {
  return call1(where_op, {cond, a, b});
}
}  // namespace ops

// ---- typed API ------------------------------------------------------------------------------

template <class S>
concept Scalar = std::is_arithmetic_v<S>;

#define MS_TYPED_BINARY(name, Out)                                                               \
  template <Element T>                                                                           \
  Tensor<Out> name(const Tensor<T>& a, const Tensor<T>& b) { return ops::name(a, b); }           \
  template <Element T, Scalar S>                                                                 \
  Tensor<Out> name(const Tensor<T>& a, S b) { return ops::name(a, static_cast<double>(b)); }     \
  template <Element T, Scalar S>                                                                 \
  Tensor<Out> name(S a, const Tensor<T>& b) { return ops::name(static_cast<double>(a), b); }
MS_TYPED_BINARY(add, T)
MS_TYPED_BINARY(sub, T)
MS_TYPED_BINARY(mul, T)
MS_TYPED_BINARY(div, T)
template <Element T>
Tensor<T> pow(const Tensor<T>& a, const Tensor<T>& b) { return ops::pow(a, b); }
template <Element T, Scalar S>
Tensor<T> pow(S a, const Tensor<T>& b) { return ops::pow(static_cast<double>(a), b); }
MS_TYPED_BINARY(maximum, T)
MS_TYPED_BINARY(minimum, T)
MS_TYPED_BINARY(eq, bool)
MS_TYPED_BINARY(ne, bool)
MS_TYPED_BINARY(lt, bool)
MS_TYPED_BINARY(le, bool)
MS_TYPED_BINARY(gt, bool)
MS_TYPED_BINARY(ge, bool)
MS_TYPED_BINARY(remainder, T)
MS_TYPED_BINARY(fmod, T)
#undef MS_TYPED_BINARY

/// Elementwise and of two bool tensors.
inline Tensor<bool> logical_and(const Tensor<bool>& a, const Tensor<bool>& b) { return ops::logical_and(a, b); }
/// Elementwise or of two bool tensors.
inline Tensor<bool> logical_or(const Tensor<bool>& a, const Tensor<bool>& b) { return ops::logical_or(a, b); }
/// cond ? a : b elementwise, with broadcasting.
template <Element T>
Tensor<T> where(const Tensor<bool>& cond, const Tensor<T>& a, const Tensor<T>& b) { return ops::where(cond, a, b); }

#define MS_OPERATOR(sym, name)                                                                        \
  template <Element T>                                                                                \
  auto operator sym(const Tensor<T>& a, const Tensor<T>& b) { return name(a, b); }                    \
  template <Element T, Scalar S>                                                                      \
  auto operator sym(const Tensor<T>& a, S b) { return name(a, b); }                                   \
  template <Element T, Scalar S>                                                                      \
  auto operator sym(S a, const Tensor<T>& b) { return name(a, b); }
MS_OPERATOR(+, add)
MS_OPERATOR(-, sub)
MS_OPERATOR(*, mul)
MS_OPERATOR(/, div)
MS_OPERATOR(==, eq)
MS_OPERATOR(!=, ne)
MS_OPERATOR(<, lt)
MS_OPERATOR(<=, le)
MS_OPERATOR(>, gt)
MS_OPERATOR(>=, ge)
#undef MS_OPERATOR

template <Element T>
Tensor<T> operator-(const Tensor<T>& a) { return neg(a); }
inline Tensor<bool> operator!(const Tensor<bool>& a) { return logical_not(a); }
inline Tensor<bool> operator&&(const Tensor<bool>& a, const Tensor<bool>& b) { return logical_and(a, b); }
inline Tensor<bool> operator||(const Tensor<bool>& a, const Tensor<bool>& b) { return logical_or(a, b); }

}  // namespace ms
