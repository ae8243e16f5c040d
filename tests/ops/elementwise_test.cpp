// Reference-value tests of the elementwise ops (unary, binary, compare, logical, where),
// of copy and cast, and of the view ops they run on. Every op is run for EVERY dtype its
// OpDef::cpu_dtypes lists; a supported dtype without a reference here fails the test.
//
// References are computed in this file with <cmath> in double precision (NumPy semantics)
// from the exact input values, then rounded once to the tensor's dtype. Integer add, sub,
// mul, neg, abs, square and pow wrap around modulo 2^bits like NumPy. Float tolerances are
// stated per op in ulps of the result's dtype (plus an absolute floor only where the
// formula itself cancels); exact ops are checked with 0 ulps.

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "test_util.hpp"

MS_TEST_COVERS("neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "square", "reciprocal",
               "erf", "sin", "cos", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "softplus", "leaky_relu",
               "elu", "hardsigmoid", "clamp", "floor", "ceil", "round", "pow_scalar", "logical_not");
MS_TEST_COVERS("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
               "logical_and", "logical_or", "where");
MS_TEST_COVERS("copy", "cast", "reshape", "permute", "slice", "expand");

namespace {

using ms::AnyTensor;
using ms::bfloat16;
using ms::DType;
using ms::half;
using ms::Shape;
using ms::Tensor;
using ms_test::kInf;
using ms_test::kNaN;
using ms_test::ThreadGuard;
namespace ops = ms::ops;
using i64 = std::int64_t;
using u64 = std::uint64_t;

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
template <class T>
inline constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// ---- building and reading tensors -------------------------------------------------------------

template <class T>
Tensor<T> make(const std::vector<T>& v, const Shape& shape) {
  REQUIRE(ms::numel(shape) == static_cast<i64>(v.size()));
  Tensor<T> t = AnyTensor::empty(shape, ms::dtype_v<T>);
  T* p = static_cast<T*>(t.raw_data());
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = v[i];
  return t;
}
template <class T>
Tensor<T> make(const std::vector<T>& v) {
  return make(v, Shape{static_cast<i64>(v.size())});
}

template <class T>
double to_d(T x) {
  if constexpr (is_half_v<T>) return static_cast<double>(static_cast<float>(x));
  else return static_cast<double>(x);
}
template <class T>
std::string str(T x) {
  if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
  else if constexpr (std::is_integral_v<T>) return std::to_string(static_cast<i64>(x));
  else return fmt::format("{:.17g}", to_d(x));
}

// ---- comparison ---------------------------------------------------------------------------------

struct Tol {
  int ulps = 0;      ///< allowed distance in units in the last place of the result dtype
  double atol = 0;   ///< or an absolute difference up to this (only where the formula cancels)
};

/// Distance in ulps between two finite values of the same floating type.
template <class T>
__int128 ulp_dist(T a, T b) {
  using I = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  auto key = [](T x) -> __int128 {
    I i = std::bit_cast<I>(x);
    return i < 0 ? static_cast<__int128>(std::numeric_limits<I>::min()) - i : static_cast<__int128>(i);
  };
  __int128 d = key(a) - key(b);
  return d < 0 ? -d : d;
}

template <class T>
bool matches(T got, T exp, Tol tol) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(exp)) return std::isnan(got);
    if (std::isnan(got)) return false;
    if (got == exp) return true;
    if (std::isinf(exp) || std::isinf(got)) return false;
    if (std::abs(static_cast<double>(got) - static_cast<double>(exp)) <= tol.atol) return true;
    return ulp_dist(got, exp) <= tol.ulps;
  } else if constexpr (is_half_v<T>) {
    // 16-bit floats compute in float32 and round once; the reference rounds its double
    // result to float, then to T: the two may differ by one unit of T at a rounding boundary.
    const double g = static_cast<float>(got), e = static_cast<float>(exp);
    if (std::isnan(e)) return std::isnan(g);
    if (std::isnan(g)) return false;
    if (g == e) return true;
    if (std::isinf(e) || std::isinf(g)) return false;
    constexpr int digits = std::is_same_v<T, half> ? 11 : 8;
    const double tiny = std::is_same_v<T, half> ? std::ldexp(1.0, -24) : std::ldexp(1.0, -133);
    return std::abs(g - e) <= std::max({std::ldexp(std::abs(e), 1 - digits), tiny, tol.atol});
  } else {
    return got == exp;
  }
}

/// Checks every element of `got` (row-major) against `exp`; on failure lists the first few
/// mismatches with the input that produced them.
template <class T>
void check_values(const std::string& what, const ms::Tensor<T>& got, const std::vector<T>& exp, Tol tol = {},
                  const std::function<std::string(std::size_t)>& input = {}) {
  INFO(what);
  std::vector<T> g = got.to_vector();
  REQUIRE(g.size() == exp.size());
  std::string bad;
  std::size_t nbad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (matches<T>(g[i], exp[i], tol)) continue;
    if (++nbad <= 8)
      bad += fmt::format("\n  [{}]{}: got {}, expected {}", i, input ? " input " + input(i) : std::string(),
                         str<T>(g[i]), str<T>(exp[i]));
  }
  if (nbad) FAIL_CHECK(fmt::format("{} of {} elements differ (tolerance {} ulp, atol {}):{}", nbad, g.size(), tol.ulps,
                                   tol.atol, bad));
  else SUCCEED();
}

/// True when two tensors are contiguous and hold the same bytes in the same shape (bitwise,
/// NaN included). Stricter than ms_test::same_bits: a non-contiguous result fails.
bool same_contiguous_bits(const AnyTensor& a, const AnyTensor& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype() || !a.is_contiguous() || !b.is_contiguous()) return false;
  return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// ---- value grids --------------------------------------------------------------------------------

/// 0, ±small, ±large, ±inf, NaN, halves (for rounding), and a dense sweep of ordinary values.
std::vector<double> float_grid() {
  std::vector<double> v = {0.0,   -0.0,  1e-30, -1e-30, 1e-7, -1e-7, 0.1,  -0.1, 0.5,   -0.5,  1,    -1,
                           1.5,   -1.5,  2,     -2,     2.5,  -2.5,  3,    -3,   4.7,   -4.7,  10,   -10,
                           50,    -50,   100,   -100,   1e10, -1e10, 1e30, -1e30, kInf, -kInf, kNaN, 0.75,
                           -0.75, 3.5,   -3.5,  5.5,    1e-3, -1e-3, 7.25, 20,   -20,   88,    -88,  0.25};
  for (int i = 0; i <= 80; ++i) v.push_back(-12.0 + 0.3 * i);
  return v;
}

template <class T>
std::vector<T> grid() {
  if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
    std::vector<T> out;
    for (double d : float_grid()) out.push_back(static_cast<T>(static_cast<float>(d)));
    if constexpr (std::is_same_v<T, double>) {
      for (double d : {1e-300, -1e-300, 1e300, -1e300, 700.0, -700.0, 0.1, 1.0 / 3}) out.push_back(d);
    }
    return out;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    constexpr T mx = std::numeric_limits<T>::max(), mn = std::numeric_limits<T>::min();
    return {0, 1, -1, 2, -2, 3, -3, 5, 7, -7, 10, -10, 46341, -46341, 100, -100, 12345, -12345,
            mx, mn, mx - 1, mn + 1, 65536, -65536, 31};
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    constexpr T mx = std::numeric_limits<T>::max(), mn = std::numeric_limits<T>::min();
    return {0, 1, -1, 2, -2, 3, -3, 5, 7, -7, 100, -100, 3037000500LL, -3037000500LL, mx, mn, mx - 1, mn + 1,
            i64{1} << 40, -(i64{1} << 40), 2147483648LL, -2147483649LL, 63};
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return {0, 1, 2, 3, 5, 7, 15, 16, 100, 127, 128, 200, 254, 255, 17, 64};
  } else {
    return {false, true, true, false};
  }
}

/// A smaller grid for binary ops (all pairs are taken).
template <class T>
std::vector<T> pair_grid() {
  if constexpr (std::is_floating_point_v<T> || is_half_v<T>) {
    std::vector<T> out;
    for (double d : {0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1.0, -1.0, 2.0, -2.5, 3.0, 7.0, 1e30, -1e30, kInf, -kInf,
                     kNaN, 0.1})
      out.push_back(static_cast<T>(static_cast<float>(d)));
    return out;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    constexpr T mx = std::numeric_limits<T>::max(), mn = std::numeric_limits<T>::min();
    return {0, 1, -1, 2, -3, 7, 31, 100, -100, 46341, mx, mn, mx - 1};
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    constexpr T mx = std::numeric_limits<T>::max(), mn = std::numeric_limits<T>::min();
    return {0, 1, -1, 2, -3, 7, 63, 100, -100, 3037000500LL, mx, mn, mx - 1};
  } else if constexpr (std::is_same_v<T, std::uint8_t>) {
    return {0, 1, 2, 3, 7, 16, 100, 127, 128, 200, 255};
  } else {
    return {false, true};
  }
}

/// A big input (> 100k elements, so the kernel takes the multi-threaded path): a sweep over
/// [-lo, lo] with the special values sprinkled in.
template <class T>
std::vector<T> big_values(std::size_t n) {
  std::vector<T> g = grid<T>();
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 997 == 0) { v[i] = g[(i / 997) % g.size()]; continue; }
    if constexpr (std::is_floating_point_v<T>) v[i] = static_cast<T>(-15.0 + 30.0 * static_cast<double>(i % 10007) / 10007.0);
    else if constexpr (std::is_same_v<T, bool>) v[i] = (i * 7) % 3 == 0;
    else if constexpr (std::is_same_v<T, std::uint8_t>) v[i] = static_cast<T>(i * 31);
    else v[i] = static_cast<T>(static_cast<i64>(i % 20011) - 10005);
  }
  return v;
}

// ---- integer reference helpers (modular arithmetic like NumPy) ----------------------------------

i64 wrap_neg(i64 x) { return static_cast<i64>(u64{0} - static_cast<u64>(x)); }
i64 wrap_mul(i64 a, i64 b) { return static_cast<i64>(static_cast<u64>(a) * static_cast<u64>(b)); }
i64 wrap_add(i64 a, i64 b) { return static_cast<i64>(static_cast<u64>(a) + static_cast<u64>(b)); }
i64 wrap_sub(i64 a, i64 b) { return static_cast<i64>(static_cast<u64>(a) - static_cast<u64>(b)); }
/// a^b modulo 2^64 for b >= 0; for b < 0 the library's rule: 1^b = 1, (-1)^b = ±1, else 0.
i64 int_pow(i64 a, i64 b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? (b % 2 ? -1 : 1) : 0);
  u64 r = 1, base = static_cast<u64>(a);
  for (; b > 0; b >>= 1, base *= base)
    if (b & 1) r *= base;
  return static_cast<i64>(r);
}
/// Round half to even, written out (NumPy's round).
double round_half_even(double x) {
  if (!std::isfinite(x)) return x;
  double f = std::floor(x), d = x - f;
  double r = d > 0.5 ? f + 1 : (d < 0.5 ? f : (std::fmod(f, 2.0) == 0 ? f : f + 1));
  return r == 0 ? std::copysign(0.0, x) : r;
}

// ---- unary ops ----------------------------------------------------------------------------------

struct UnaryCase {
  std::string op;  ///< registry name
  std::string label;
  std::function<AnyTensor(const AnyTensor&)> run;
  std::function<double(double)> ref;          ///< floating dtypes
  std::function<i64(i64)> iref;               ///< integer dtypes (result wraps to the dtype)
  std::function<bool(bool)> bref;             ///< bool
  Tol f32, f64;
  /// float32 reference when it differs (pow_scalar: NumPy rounds a Python-float exponent to float32 first)
  std::function<double(double)> ref32;
  /// Dtypes this variant runs on (within the op's cpu_dtypes); e.g. pow_scalar(0.5) is float-only
  /// because integer tensors reject a fractional exponent.
  ms::DTypeSet only = ms::kStorageTypes;
};

/// The dtypes a case runs on: the op's cpu_dtypes, narrowed by the case.
ms::DTypeSet case_dtypes(const ms::ops::OpDef& op, const UnaryCase& c) {
  ms::DTypeSet s;
  s.bits = op.cpu_dtypes.bits & c.only.bits;
  return s;
}

double relu_ref(double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); }
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double clamp_ref(double x, double lo, double hi) { return std::isnan(x) ? x : std::min(hi, std::max(lo, x)); }
i64 clamp_iref(i64 x, double lo, double hi) {
  // Integer tensors clamp to the integers inside [lo, hi].
  double v = static_cast<double>(x);
  if (v < std::ceil(lo)) return static_cast<i64>(std::ceil(lo));
  if (v > std::floor(hi)) return static_cast<i64>(std::floor(hi));
  return x;
}

std::vector<UnaryCase> unary_cases() {
  // Tolerances are against the correctly rounded double reference. xsimd's transcendentals
  // are 1-2 ulp off (measured over dense ranges); the scalar tail uses glibc (< 1 ulp). Ops
  // composed of several roundings get a few more. 1 + erf(x/sqrt2) and 1 + tanh(..) cancel
  // for x << 0, hence gelu's absolute floor (0.5 |x| ulp(1) at most). xsimd's float exp
  // flushes results below FLT_MIN to zero, hence the 1e-37 floors of exp-based float ops.
  const Tol exact{0, 0}, t1{1, 0}, t2{2, 0}, t4{4, 0};
  std::vector<UnaryCase> c;
  auto add = [&](std::string op, auto run, std::function<double(double)> ref, std::function<i64(i64)> iref, Tol f32,
                 Tol f64, std::string label = {}, ms::DTypeSet only = ms::kStorageTypes,
                 std::function<double(double)> ref32 = {}) {
    c.push_back({op, label.empty() ? op : label, run, ref, iref, {}, f32, f64, ref32, only});
  };
  add("neg", [](const AnyTensor& x) { return ops::neg(x); }, [](double x) { return -x; }, wrap_neg, exact, exact);
  add("abs", [](const AnyTensor& x) { return ops::abs(x); }, [](double x) { return std::fabs(x); },
      [](i64 x) { return x < 0 ? wrap_neg(x) : x; }, exact, exact);
  add("sign", [](const AnyTensor& x) { return ops::sign(x); },
      [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); }, [](i64 x) { return i64{x > 0} - i64{x < 0}; },
      exact, exact);
  add("exp", [](const AnyTensor& x) { return ops::exp(x); }, [](double x) { return std::exp(x); }, {},
      Tol{2, 1e-37}, t2);  // xsimd's float exp flushes results below FLT_MIN to 0
  add("log", [](const AnyTensor& x) { return ops::log(x); }, [](double x) { return std::log(x); }, {}, t2, t2);
  add("log1p", [](const AnyTensor& x) { return ops::log1p(x); }, [](double x) { return std::log1p(x); }, {}, t2, t2);
  add("expm1", [](const AnyTensor& x) { return ops::expm1(x); }, [](double x) { return std::expm1(x); }, {}, t2, t2);
  add("sqrt", [](const AnyTensor& x) { return ops::sqrt(x); }, [](double x) { return std::sqrt(x); }, {}, exact,
      exact);
  add("rsqrt", [](const AnyTensor& x) { return ops::rsqrt(x); }, [](double x) { return 1.0 / std::sqrt(x); }, {},
      t1, t1);
  add("square", [](const AnyTensor& x) { return ops::square(x); }, [](double x) { return x * x; },
      [](i64 x) { return wrap_mul(x, x); }, exact, exact);
  add("reciprocal", [](const AnyTensor& x) { return ops::reciprocal(x); }, [](double x) { return 1.0 / x; }, {},
      exact, exact);
  add("erf", [](const AnyTensor& x) { return ops::erf(x); }, [](double x) { return std::erf(x); }, {}, t2, t1);
  add("sin", [](const AnyTensor& x) { return ops::sin(x); }, [](double x) { return std::sin(x); }, {}, t2, t2);
  add("cos", [](const AnyTensor& x) { return ops::cos(x); }, [](double x) { return std::cos(x); }, {}, t2, t2);
  // float tanh is Eigen's rational approximation: 5 ulp at most over all floats.
  add("tanh", [](const AnyTensor& x) { return ops::tanh(x); }, [](double x) { return std::tanh(x); }, {}, Tol{5, 0},
      t2);
  add("sigmoid", [](const AnyTensor& x) { return ops::sigmoid(x); }, sigmoid_ref, {}, Tol{4, 1e-37}, t4);
  add("relu", [](const AnyTensor& x) { return ops::relu(x); }, relu_ref, [](i64 x) { return x > 0 ? x : 0; },
      exact, exact);
  add("gelu", [](const AnyTensor& x) { return ops::gelu(x); }, gelu_ref, {}, Tol{4, 4e-7}, Tol{4, 1e-15});
  add("gelu_tanh", [](const AnyTensor& x) { return ops::gelu_tanh(x); }, gelu_tanh_ref, {}, Tol{4, 4e-7},
      Tol{4, 1e-15});
  add("silu", [](const AnyTensor& x) { return ops::silu(x); }, [](double x) { return x / (1.0 + std::exp(-x)); }, {},
      Tol{4, 1e-37}, t4);
  add("softplus", [](const AnyTensor& x) { return ops::softplus(x); },
      [](double x) { return std::log1p(std::exp(-std::fabs(x))) + std::max(0.0, x); }, {}, Tol{4, 1e-37}, t4);
  add("leaky_relu", [](const AnyTensor& x) { return ops::leaky_relu(x); },
      [](double x) { return x > 0 ? x : x * 0.01; }, {}, t1, t1, "leaky_relu(slope=0.01)");
  add("leaky_relu", [](const AnyTensor& x) { return ops::leaky_relu(x, 0.25); },
      [](double x) { return x > 0 ? x : x * 0.25; }, {}, exact, exact, "leaky_relu(slope=0.25)");
  add("elu", [](const AnyTensor& x) { return ops::elu(x); }, [](double x) { return x > 0 ? x : std::expm1(x); }, {},
      t2, t2, "elu(alpha=1)");
  add("elu", [](const AnyTensor& x) { return ops::elu(x, 0.5); },
      [](double x) { return x > 0 ? x : 0.5 * std::expm1(x); }, {}, t2, t2, "elu(alpha=0.5)");
  add("hardsigmoid", [](const AnyTensor& x) { return ops::hardsigmoid(x); },
      [](double x) { return clamp_ref((x + 3.0) / 6.0, 0.0, 1.0); }, {}, t1, t1);
  add("clamp", [](const AnyTensor& x) { return ops::clamp(x, -2.5, 7.0); },
      [](double x) { return clamp_ref(x, -2.5, 7.0); }, [](i64 x) { return clamp_iref(x, -2.5, 7.0); }, exact,
      exact, "clamp(-2.5, 7)");
  add("clamp", [](const AnyTensor& x) { return ops::clamp(x, 2.5, 100.5); },
      [](double x) { return clamp_ref(x, 2.5, 100.5); }, [](i64 x) { return clamp_iref(x, 2.5, 100.5); }, exact,
      exact, "clamp(2.5, 100.5)");
  add("clamp", [](const AnyTensor& x) { return ops::clamp(x, -kInf, 3.0); },
      [](double x) { return clamp_ref(x, -kInf, 3.0); }, [](i64 x) { return clamp_iref(x, -kInf, 3.0); }, exact,
      exact, "clamp(-inf, 3)");
  add("floor", [](const AnyTensor& x) { return ops::floor(x); }, [](double x) { return std::floor(x); }, {}, exact,
      exact);
  add("ceil", [](const AnyTensor& x) { return ops::ceil(x); }, [](double x) { return std::ceil(x); }, {}, exact,
      exact);
  add("round", [](const AnyTensor& x) { return ops::round(x); }, round_half_even, {}, exact, exact);
  for (double e : {2.0, 3.0, 0.0, 1.0}) {
    add("pow_scalar", [e](const AnyTensor& x) { return ops::pow(x, e); }, [e](double x) { return std::pow(x, e); },
        [e](i64 x) { return int_pow(x, static_cast<i64>(e)); }, t2, t2, fmt::format("pow_scalar({})", e));
  }
  for (double e : {0.5, -1.0, -2.0, 1.0 / 3}) {
    add("pow_scalar", [e](const AnyTensor& x) { return ops::pow(x, e); }, [e](double x) { return std::pow(x, e); },
        {}, t2, t2, fmt::format("pow_scalar({})", e), ms::kFloatTypes,
        [e](double x) { return std::pow(x, static_cast<double>(static_cast<float>(e))); });
  }
  c.push_back({"logical_not", "logical_not", [](const AnyTensor& x) { return ops::logical_not(x); }, {}, {},
               [](bool b) { return !b; }, exact, exact, {}, ms::kStorageTypes});
  return c;
}

template <class T>
T expect_unary(const UnaryCase& c, T x) {
  if constexpr (std::is_same_v<T, float>) return static_cast<T>((c.ref32 ? c.ref32 : c.ref)(static_cast<double>(x)));
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(c.ref(static_cast<double>(x)));
  else if constexpr (is_half_v<T>) return static_cast<T>(static_cast<float>(c.ref(to_d(x))));
  else if constexpr (std::is_same_v<T, bool>) return c.bref(x);
  else return static_cast<T>(c.iref(static_cast<i64>(x)));
}

/// True when the case has a reference for T (a supported dtype without one fails the test).
template <class T>
bool has_ref(const UnaryCase& c) {
  if constexpr (std::is_floating_point_v<T> || is_half_v<T>) return static_cast<bool>(c.ref);
  else if constexpr (std::is_same_v<T, bool>) return static_cast<bool>(c.bref);
  else if constexpr (is_int_v<T>) return static_cast<bool>(c.iref);
  else return false;
}

/// Calls f.template operator()<T>() for every dtype in `set`.
template <class F>
void for_each_dtype(ms::DTypeSet set, F&& f) {
  for (int i = 0; i < ms::kNumDTypes; ++i) {
    DType d = static_cast<DType>(i);
    if (set.contains(d)) ms::visit_dtype(d, f);
  }
}

template <class T>
void run_unary_case(const UnaryCase& c, const std::vector<T>& xs, const AnyTensor& input, const std::string& where) {
  Tol tol = std::is_same_v<T, double> ? c.f64 : c.f32;
  Tensor<T> y = c.run(input);
  REQUIRE(y.shape() == input.shape());
  std::vector<T> exp;
  for (T x : xs) exp.push_back(expect_unary<T>(c, x));
  check_values<T>(fmt::format("{} on {} {}", c.label, ms::dtype_v<T>, where), y, exp, tol,
                  [&](std::size_t i) { return str<T>(xs[i]); });
}

// ---- binary ops ---------------------------------------------------------------------------------

struct BinaryCase {
  std::string op;
  std::function<AnyTensor(const AnyTensor&, const AnyTensor&)> run;
  std::function<double(double, double)> ref;  ///< floating dtypes (compare ops: 0 or 1)
  std::function<i64(i64, i64)> iref;         ///< integer dtypes (compare ops: 0 or 1)
  std::function<bool(bool, bool)> bref;       ///< bool
  bool compare = false;                       ///< the result is bool
  Tol f32, f64;
};

double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }
double nan_min(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }

std::vector<BinaryCase> binary_cases() {
  const Tol exact{}, t2{2, 0};
  std::vector<BinaryCase> c;
  c.push_back({"add", [](auto& a, auto& b) { return ops::add(a, b); }, [](double a, double b) { return a + b; },
               wrap_add, {}, false, exact, exact});
  c.push_back({"sub", [](auto& a, auto& b) { return ops::sub(a, b); }, [](double a, double b) { return a - b; },
               wrap_sub, {}, false, exact, exact});
  c.push_back({"mul", [](auto& a, auto& b) { return ops::mul(a, b); }, [](double a, double b) { return a * b; },
               wrap_mul, {}, false, exact, exact});
  c.push_back({"div", [](auto& a, auto& b) { return ops::div(a, b); }, [](double a, double b) { return a / b; }, {},
               {}, false, exact, exact});
  c.push_back({"pow", [](auto& a, auto& b) { return ops::pow(a, b); },
               [](double a, double b) { return std::pow(a, b); }, int_pow, {}, false, t2, t2});
  c.push_back({"maximum", [](auto& a, auto& b) { return ops::maximum(a, b); }, nan_max,
               [](i64 a, i64 b) { return std::max(a, b); }, {}, false, exact, exact});
  c.push_back({"minimum", [](auto& a, auto& b) { return ops::minimum(a, b); }, nan_min,
               [](i64 a, i64 b) { return std::min(a, b); }, {}, false, exact, exact});
#define MS_CMP_CASE(NAME, OP)                                                                                     \
  c.push_back({#NAME, [](auto& a, auto& b) { return ops::NAME(a, b); },                                           \
               [](double a, double b) { return double(a OP b); }, [](i64 a, i64 b) { return i64(a OP b); },       \
               [](bool a, bool b) { return a OP b; }, true, exact, exact});
  MS_CMP_CASE(eq, ==)
  MS_CMP_CASE(ne, !=)
  MS_CMP_CASE(lt, <)
  MS_CMP_CASE(le, <=)
  MS_CMP_CASE(gt, >)
  MS_CMP_CASE(ge, >=)
#undef MS_CMP_CASE
  c.push_back({"logical_and", [](auto& a, auto& b) { return ops::logical_and(a, b); }, {}, {},
               [](bool a, bool b) { return a && b; }, false, exact, exact});
  c.push_back({"logical_or", [](auto& a, auto& b) { return ops::logical_or(a, b); }, {}, {},
               [](bool a, bool b) { return a || b; }, false, exact, exact});
  return c;
}

template <class T>
bool has_ref(const BinaryCase& c) {
  if constexpr (std::is_floating_point_v<T> || is_half_v<T>) return static_cast<bool>(c.ref);
  else if constexpr (std::is_same_v<T, bool>) return static_cast<bool>(c.bref);
  else if constexpr (is_int_v<T>) return static_cast<bool>(c.iref);
  else return false;
}

/// Reference of a binary case for one pair; O is T, or bool for comparisons.
template <class O, class T>
O expect_binary(const BinaryCase& c, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<O>(c.ref(static_cast<double>(a), static_cast<double>(b)));
  else if constexpr (is_half_v<T>) return static_cast<O>(static_cast<float>(c.ref(to_d(a), to_d(b))));
  else if constexpr (std::is_same_v<T, bool>) return static_cast<O>(c.bref(a, b));
  else return static_cast<O>(c.iref(static_cast<i64>(a), static_cast<i64>(b)));
}

/// Runs `c` on inputs a, b (any layout) whose row-major values, broadcast to the output
/// shape, are av and bv; checks against the reference.
template <class T>
void run_binary_case(const BinaryCase& c, const AnyTensor& a, const AnyTensor& b, const std::vector<T>& av,
                     const std::vector<T>& bv, const std::string& where) {
  auto body = [&]<class O>() {
    Tol tol = c.compare ? Tol{} : (std::is_same_v<T, double> ? c.f64 : c.f32);
    Tensor<O> y = c.run(a, b);
    std::vector<O> exp;
    for (std::size_t i = 0; i < av.size(); ++i) exp.push_back(expect_binary<O, T>(c, av[i], bv[i]));
    check_values<O>(fmt::format("{} on {} {}", c.op, ms::dtype_v<T>, where), y, exp, tol,
                    [&](std::size_t i) { return "(" + str<T>(av[i]) + ", " + str<T>(bv[i]) + ")"; });
  };
  if (c.compare) body.template operator()<bool>();
  else body.template operator()<T>();
}

/// For each element of `out`, the row-major index of the element of `in` that NumPy broadcasting reads.
std::vector<i64> broadcast_index(const Shape& out, const Shape& in) {
  std::vector<i64> idx;
  i64 n = ms::numel(out);
  int r = out.rank(), lead = r - in.rank();
  Shape in_strides = ms::contiguous_strides(in);
  for (i64 flat = 0; flat < n; ++flat) {
    i64 rem = flat, off = 0;
    for (int d = r - 1; d >= 0; --d) {
      i64 k = rem % out[d];
      rem /= out[d];
      int sd = d - lead;
      if (sd >= 0 && in[sd] != 1) off += k * in_strides[sd];
    }
    idx.push_back(off);
  }
  return idx;
}

template <class T>
std::vector<T> take(const std::vector<T>& v, const std::vector<i64>& idx) {
  std::vector<T> out;
  for (i64 i : idx) out.push_back(v[static_cast<std::size_t>(i)]);
  return out;
}

/// n values cycling through the pair grid, offset by `shift` (so two operands differ).
template <class T>
std::vector<T> cycle_values(std::size_t n, std::size_t shift) {
  std::vector<T> g = pair_grid<T>();
  std::vector<T> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(g[(i * 5 + shift) % g.size()]);
  return v;
}

// ---- cast reference -----------------------------------------------------------------------------

/// The exact value of x as a long double (exact for every dtype here on x86).
template <class T>
long double exact_value(T x) {
  if constexpr (is_half_v<T>) return static_cast<long double>(static_cast<float>(x));
  else return static_cast<long double>(x);
}

template <class H>
H half_from_bits(std::uint16_t b) {
  return Eigen::numext::bit_cast<H>(b);
}

/// The 16-bit float H nearest to v (ties to even), computed independently of the library:
/// the candidates around a first guess are compared in long double.
template <class H>
H nearest_16bit(long double v) {
  if (std::isnan(v)) return static_cast<H>(std::numeric_limits<float>::quiet_NaN());
  bool neg = std::signbit(v);
  long double a = std::fabs(v);
  const std::uint16_t inf_bits = std::is_same_v<H, half> ? 0x7c00 : 0x7f80;
  long double maxv = static_cast<long double>(static_cast<float>(half_from_bits<H>(inf_bits - 1)));
  long double ulp_max = maxv - static_cast<long double>(static_cast<float>(half_from_bits<H>(inf_bits - 2)));
  std::uint16_t best;
  if (a >= maxv + ulp_max / 2) {
    best = inf_bits;  // rounds to infinity (the tie goes to the even infinity)
  } else {
    float guess = static_cast<float>(a);
    std::uint16_t g = Eigen::numext::bit_cast<std::uint16_t>(static_cast<H>(guess));
    if (g >= inf_bits) g = inf_bits - 1;
    best = g;
    long double best_d = -1;
    for (int k = -2; k <= 2; ++k) {
      int cb = static_cast<int>(g) + k;
      if (cb < 0 || cb >= inf_bits) continue;
      long double cv = static_cast<long double>(static_cast<float>(half_from_bits<H>(static_cast<std::uint16_t>(cb))));
      long double d = std::fabs(cv - a);
      if (best_d < 0 || d < best_d || (d == best_d && (cb % 2) == 0)) {
        best = static_cast<std::uint16_t>(cb);
        best_d = d;
      }
    }
  }
  if (neg) best |= 0x8000;
  return half_from_bits<H>(best);
}

/// NumPy-style conversion: bool is x != 0 (NaN is true); float -> int truncates toward zero
/// and saturates (NaN -> 0, like the library documents); int -> int wraps; to a 16-bit float
/// the nearest value (ties to even).
template <class O, class I>
O ref_convert(I x) {
  if constexpr (std::is_same_v<O, bool>) {
    if constexpr (is_half_v<I> || std::is_floating_point_v<I>) {
      long double v = exact_value(x);
      return std::isnan(v) || v != 0;
    } else {
      return x != I(0);
    }
  } else if constexpr (is_int_v<O>) {
    if constexpr (is_half_v<I> || std::is_floating_point_v<I>) {
      long double v = exact_value(x);
      if (std::isnan(v)) return O(0);
      if (v <= static_cast<long double>(std::numeric_limits<O>::lowest())) return std::numeric_limits<O>::lowest();
      if (v >= static_cast<long double>(std::numeric_limits<O>::max())) return std::numeric_limits<O>::max();
      return static_cast<O>(std::trunc(v));
    } else {
      return static_cast<O>(x);  // modular (C++20)
    }
  } else if constexpr (is_half_v<O>) {
    return nearest_16bit<O>(exact_value(x));
  } else {
    return static_cast<O>(exact_value(x));  // one rounding from the exact value
  }
}

/// Source values for casts: the grid plus values that expose double rounding on the way
/// to 16-bit floats, and values at the edges of the integer ranges.
template <class T>
std::vector<T> cast_inputs() {
  std::vector<T> v = grid<T>();
  if constexpr (std::is_same_v<T, double>) {
    for (double d : {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40),
                     65519.99, 65520.0, 2147483647.5, 2147483648.0, -2147483648.5, -2147483649.0, 9.3e18, -9.3e18,
                     9223372036854775808.0, 255.9, 256.0, -0.9, 3.4e38, 3.5e38, 1e-50, -1e-50, 1e-45})
      v.push_back(d);
  } else if constexpr (std::is_same_v<T, float>) {
    for (float f : {2147483520.0f, 2147483648.0f, -2147483648.0f, -2147483904.0f, 65504.0f, 65520.0f, 255.5f,
                    1.00390625f /* 1 + 2^-8: a bf16 tie */, 1.01171875f, 3.4e38f, 1e-40f})
      v.push_back(f);
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    for (std::int32_t i : {16842753, 16842752, 65519, 65520, 65535, 2049, 2051, 256, -129})
      v.push_back(i);  // 2^24 + 2^16 + 1 double-rounds to bf16 through float
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    for (i64 i : {i64{16842753}, (i64{1} << 53) + 1, (i64{1} << 62) + (i64{1} << 38) + 1, i64{4294967296}, i64{-129}})
      v.push_back(i);
  } else if constexpr (std::is_same_v<T, half>) {
    v.push_back(half(65504.0f));
    v.push_back(half(-65504.0f));
    v.push_back(Eigen::numext::bit_cast<half>(std::uint16_t{1}));  // smallest subnormal
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    v.push_back(bfloat16(3.0e38f));
    v.push_back(bfloat16(-2.5e9f));
  }
  return v;
}

}  // namespace

// =================================================================================================
// Unary ops
// =================================================================================================

TEST_CASE("unary ops match the double reference for every supported dtype", "[op][elementwise]") {
  for (const UnaryCase& c : unary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for_each_dtype(case_dtypes(op, c), [&]<class T>() {
      INFO(c.label << " on " << ms::dtype_name(ms::dtype_v<T>));
      REQUIRE(has_ref<T>(c));  // a supported dtype without a reference here
      {  // 16-bit floats too: computed in float32, rounded once
        std::vector<T> xs = grid<T>();
        run_unary_case<T>(c, xs, make(xs), "(contiguous grid)");
      }
    });
  }
}

TEST_CASE("unary ops reject the dtypes they do not support", "[op][elementwise]") {
  for (const UnaryCase& c : unary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for (int i = 0; i < ms::kNumDTypes; ++i) {
      DType d = static_cast<DType>(i);
      if (op.cpu_dtypes.contains(d)) continue;
      INFO(c.label << " on " << ms::dtype_name(d));
      AnyTensor x = AnyTensor::empty(Shape{3}, d);
      std::memset(x.raw_data(), 0, x.nbytes());
      REQUIRE_THROWS_AS(c.run(x), ms::DTypeError);
    }
  }
  MS_REQUIRE_THROWS_MSG(ops::exp(Tensor<std::int32_t>{1, 2}), ms::DTypeError,
                        "[ms.dtype_error] exp: unsupported dtype int32 (supported: float32, float64, float16, bfloat16)");
  MS_REQUIRE_THROWS_MSG(ops::clamp(Tensor<float>{1}, 2.0, 1.0), ms::ValueError,
                        "[ms.value_error] clamp: min (2) is greater than max (1)");
  MS_REQUIRE_THROWS_MSG(ops::pow(Tensor<std::int32_t>{1}, 0.5), ms::ValueError,
                        "[ms.value_error] pow: integer tensors (int32) need a non-negative integer exponent, got 0.5");
}

TEST_CASE("unary ops: known values (round half to even, sign, relu of NaN, typed API)", "[op][elementwise]") {
  using ms_test::require_values;
  Tensor<float> x{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, -3.5f};
  require_values(ms::round(x), {-2, -2, -0.0, 0, 2, 2, 4, 4, 6, -4}, 0, 0);
  require_values(ms::round(Tensor<double>{0.5, 1.5, 2.5, -0.5}), {0, 2, 2, -0.0}, 0, 0);
  require_values(ms::sign(Tensor<float>{-3, 0, 2, NAN}), {-1, 0, 1, kNaN}, 0, 0);
  require_values(ms::relu(Tensor<float>{-1, NAN, 2}), {0, kNaN, 2}, 0, 0);
  require_values(ms::abs(Tensor<std::int32_t>{std::numeric_limits<std::int32_t>::min(), -3}),
                 {static_cast<double>(std::numeric_limits<std::int32_t>::min()), 3}, 0, 0);
  require_values(ms::neg(Tensor<std::int64_t>{std::numeric_limits<std::int64_t>::min(), 5}),
                 {static_cast<double>(std::numeric_limits<std::int64_t>::min()), -5}, 0, 0);
  require_values(ms::square(Tensor<std::uint8_t>{16, 200}), {0, 64}, 0, 0);
  require_values(ms::pow(Tensor<std::int32_t>{2, 3, -2}, 3.0), {8, 27, -8}, 0, 0);
  require_values(ms::gelu(Tensor<double>{1.0}, "tanh"), {gelu_tanh_ref(1.0)}, 1e-15, 0);
  require_values(ms::gelu(Tensor<double>{1.0}, "none"), {gelu_ref(1.0)}, 1e-15, 0);
  REQUIRE_THROWS_AS(ms::gelu(Tensor<double>{1.0}, "fast"), ms::ValueError);
  require_values(ms::leaky_relu(Tensor<double>{-2, 2}, 0.1), {-0.2, 2}, 1e-15, 0);
  require_values(ms::elu(Tensor<double>{-kInf, 1}, 2.0), {-2, 1}, 0, 0);
  require_values(ms::clamp(Tensor<std::uint8_t>{0, 100, 255}, -5.0, 1000.0), {0, 100, 255}, 0, 0);
  require_values(ms::clamp(Tensor<std::int64_t>{0, 5, 9}, 1.5, 7.9), {2, 5, 7}, 0, 0);
  Tensor<bool> b{true, false};
  REQUIRE(ms::logical_not(b).to_vector() == std::vector<bool>{false, true});
  REQUIRE((!b).to_vector() == std::vector<bool>{false, true});
  require_values(-Tensor<float>{1, -2}, {-1, 2}, 0, 0);
}

TEST_CASE("float32 exp: within 2 ulp over a sweep of every normal result, 0 / inf / NaN at the edges",
          "[op][elementwise]") {
  // Every 499th float whose exp is a normal float (about 4.5M inputs), through the SIMD
  // kernel of the level in force (MS_CPU_ISA), against the correctly rounded double result.
  std::vector<float> xs;
  for (std::uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 499) {
    const float v = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    if (v >= -87.3f && v <= 88.3f) xs.push_back(v);
  }
  xs.resize(xs.size() / 64 * 64);  // whole SIMD batches: no scalar tail
  const std::vector<float> got = ms::exp(make(xs)).to_vector();
  __int128 worst = 0;
  float worst_x = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const __int128 d = ulp_dist(got[i], static_cast<float>(std::exp(static_cast<double>(xs[i]))));
    if (d > worst) worst = d, worst_x = xs[i];
  }
  INFO("inputs " << xs.size() << ", worst at x = " << worst_x);
  REQUIRE(xs.size() > 4'000'000);
  REQUIRE(static_cast<int>(worst) <= 2);
  // The edges, 16 times each so that every lane of every level sees them: NaN stays NaN,
  // overflow gives inf, underflow 0 (results below FLT_MIN flush to 0 or stay within 1e-37).
  constexpr float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> edge{nan, inf, -inf, 89.0f, 1000.0f, -88.5f, -100.0f, -1000.0f, 0.0f, -0.0f, 1.0f,
                                -1.0f, 10.0f, -10.0f, 88.0f, -87.0f};
  std::vector<float> in;
  for (int r = 0; r < 16; ++r) in.insert(in.end(), edge.begin(), edge.end());
  const std::vector<float> out = ms::exp(make(in)).to_vector();
  for (std::size_t i = 0; i < in.size(); ++i) {
    const float x = in[i], y = out[i];
    INFO("exp(" << x << ") = " << y);
    if (std::isnan(x)) REQUIRE(std::isnan(y));
    else if (x >= 89.0f) REQUIRE(y == inf);
    else if (x <= -88.5f) REQUIRE((y >= 0.0f && y <= 1e-37f));
    else REQUIRE(ulp_dist(y, static_cast<float>(std::exp(static_cast<double>(x)))) <= 2);
  }
}

TEST_CASE("unary ops on 0-d, size-0 and non-contiguous inputs", "[op][elementwise]") {
  for (const UnaryCase& c : unary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for_each_dtype(case_dtypes(op, c), [&]<class T>() {
      if constexpr (!is_half_v<T>) {
        INFO(c.label << " on " << ms::dtype_name(ms::dtype_v<T>));
        std::vector<T> g = grid<T>();
        // 0-d
        std::vector<T> one{g[g.size() / 2]};
        run_unary_case<T>(c, one, make(one, Shape{}), "(0-d)");
        // size 0
        Tensor<T> empty = make(std::vector<T>{}, Shape{3, 0});
        Tensor<T> ye = c.run(empty);
        REQUIRE(ye.shape() == Shape({3, 0}));
        // 8 x 12 base from the grid, then views of it
        std::vector<T> base_v;
        for (std::size_t i = 0; i < 96; ++i) base_v.push_back(g[(i * 7) % g.size()]);
        Tensor<T> base = make(base_v, Shape{8, 12});
        Tensor<T> views[] = {base.t(), base.slice(1, 1, 12, 3), base.slice(0, 7, -100, -2),
                             base.slice(1, 10, -100, -1).t(), base.slice(0, 2, 3).expand(Shape{5, 12}),
                             base.slice(1, 4, 5).expand(Shape{8, 6}), base.slice(0, 3, 4).squeeze(0)};
        const char* names[] = {"transposed", "slice step 3", "slice step -2", "negative step + transpose",
                               "expanded row", "expanded column", "sliced row"};
        for (int k = 0; k < 7; ++k) run_unary_case<T>(c, views[k].to_vector(), views[k], names[k]);
      }
    });
  }
}

TEST_CASE("unary ops on big inputs: multi-threaded result equals the reference and 1 thread", "[op][elementwise]") {
  ThreadGuard guard;
  // Above 3 parallel grains (ms::kParallelGrain): two threads get a chunk each.
  constexpr std::size_t rows = ms_test::kSanitized ? 14286 : 42858, n = rows * 7;
  STATIC_REQUIRE(static_cast<std::int64_t>(n) > 3 * ms::kParallelGrain);
  for (const UnaryCase& c : unary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for_each_dtype(case_dtypes(op, c), [&]<class T>() {
      if constexpr (!is_half_v<T>) {
        INFO(c.label << " on " << ms::dtype_name(ms::dtype_v<T>));
        std::vector<T> xs = big_values<T>(n);
        Tensor<T> x = make(xs);
        ms::set_num_threads(2);
        AnyTensor y2 = c.run(x);
        run_unary_case<T>(c, xs, x, "(big, 2 threads)");
        ms::set_num_threads(1);
        AnyTensor y1 = c.run(x);
        REQUIRE(same_contiguous_bits(y1, y2));
        // A big transposed input takes the strided (gathering) path, split by rows.
        Tensor<T> xt = make(xs, Shape{static_cast<std::int64_t>(rows), 7}).t();
        ms::set_num_threads(2);
        AnyTensor t2 = c.run(xt);
        ms::set_num_threads(1);
        AnyTensor t1 = c.run(xt);
        REQUIRE(same_contiguous_bits(t1, t2));
        std::vector<T> xtv = xt.to_vector();
        run_unary_case<T>(c, xtv, xt, "(big transposed)");
      }
    });
  }
}

// =================================================================================================
// Binary ops
// =================================================================================================

TEST_CASE("binary ops match the reference on all pairs of special values, every dtype", "[op][elementwise]") {
  for (const BinaryCase& c : binary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for_each_dtype(op.cpu_dtypes, [&]<class T>() {
      INFO(c.op << " on " << ms::dtype_name(ms::dtype_v<T>));
      REQUIRE(has_ref<T>(c));
      {  // 16-bit floats too: computed in float32, rounded once
        std::vector<T> g = pair_grid<T>();
        std::vector<T> av, bv;
        for (T a : g)
          for (T b : g) { av.push_back(a); bv.push_back(b); }
        run_binary_case<T>(c, make(av), make(bv), av, bv, "(all pairs)");
        // one operand a single element on either side (stride-0 fast path), and 0-d with 0-d
        std::vector<T> s1{g[3 % g.size()]};
        run_binary_case<T>(c, make(av), make(s1, Shape{}), av, std::vector<T>(av.size(), s1[0]), "(tensor, 0-d)");
        run_binary_case<T>(c, make(s1, Shape{1}), make(bv), std::vector<T>(bv.size(), s1[0]), bv, "((1,), tensor)");
        std::vector<T> s2{g[2 % g.size()]};
        run_binary_case<T>(c, make(s1, Shape{}), make(s2, Shape{}), s1, s2, "(0-d, 0-d)");
        AnyTensor y = c.run(make(s1, Shape{}), make(s2, Shape{}));
        REQUIRE(y.dim() == 0);
      }
    });
  }
}

TEST_CASE("binary ops reject unsupported and mismatched dtypes", "[op][elementwise]") {
  for (const BinaryCase& c : binary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for (int i = 0; i < ms::kNumDTypes; ++i) {
      DType d = static_cast<DType>(i);
      if (op.cpu_dtypes.contains(d)) continue;
      INFO(c.op << " on " << ms::dtype_name(d));
      AnyTensor x = AnyTensor::empty(Shape{2}, d);
      std::memset(x.raw_data(), 0, x.nbytes());
      REQUIRE_THROWS_AS(c.run(x, x), ms::DTypeError);
    }
  }
  MS_REQUIRE_THROWS_MSG(ops::div(Tensor<std::int32_t>{1}, Tensor<std::int32_t>{1}), ms::DTypeError,
                        "[ms.dtype_error] div: unsupported dtype int32 (supported: float32, float64, float16, bfloat16)");
  MS_REQUIRE_THROWS_MSG(
      ops::add(Tensor<float>{1, 2}, Tensor<double>{1, 2}), ms::DTypeError,
      "[ms.dtype_error] add: dtype mismatch float32 vs float64 (shapes (2,) and (2,)); convert one side with ms::cast");
  MS_REQUIRE_THROWS_MSG(ops::lt(Tensor<std::int32_t>{1}, Tensor<std::int64_t>{1}), ms::DTypeError,
                        "[ms.dtype_error] lt: dtype mismatch int32 vs int64 (shapes (1,) and (1,)); convert one side "
                        "with ms::cast");
}

TEST_CASE("binary ops broadcast like NumPy", "[op][elementwise]") {
  struct ShapePair {
    Shape a, b, out;
  };
  const ShapePair pairs[] = {
      {Shape{}, Shape{3, 4}, Shape{3, 4}},        {Shape{3, 4}, Shape{}, Shape{3, 4}},
      {Shape{4}, Shape{3, 4}, Shape{3, 4}},       {Shape{3, 4}, Shape{1, 4}, Shape{3, 4}},
      {Shape{3, 1}, Shape{3, 4}, Shape{3, 4}},    {Shape{3, 4}, Shape{3, 1}, Shape{3, 4}},
      {Shape{3, 1}, Shape{1, 4}, Shape{3, 4}},    {Shape{1, 4}, Shape{3, 1}, Shape{3, 4}},
      {Shape{2, 1, 4}, Shape{3, 1}, Shape{2, 3, 4}}, {Shape{5, 1, 1}, Shape{1, 3, 1}, Shape{5, 3, 1}},
      {Shape{1}, Shape{1}, Shape{1}},             {Shape{0, 4}, Shape{4}, Shape{0, 4}},
      {Shape{3, 0}, Shape{3, 1}, Shape{3, 0}},    {Shape{0}, Shape{}, Shape{0}},
      {Shape{2, 1, 3, 1}, Shape{4, 1, 5}, Shape{2, 4, 3, 5}}, {Shape{1, 1}, Shape{}, Shape{1, 1}},
      {Shape{40, 1}, Shape{1, 300}, Shape{40, 300}},
  };
  for (const BinaryCase& c : binary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for_each_dtype(op.cpu_dtypes, [&]<class T>() {
      if constexpr (!is_half_v<T>) {
        for (const ShapePair& p : pairs) {
          INFO(c.op << " on " << ms::dtype_name(ms::dtype_v<T>) << ": " << ms::shape_str(p.a) << " with " << ms::shape_str(p.b));
          std::vector<T> av = cycle_values<T>(static_cast<std::size_t>(ms::numel(p.a)), 0);
          std::vector<T> bv = cycle_values<T>(static_cast<std::size_t>(ms::numel(p.b)), 7);
          Tensor<T> a = make(av, p.a), b = make(bv, p.b);
          AnyTensor y = c.run(a, b);
          REQUIRE(y.shape() == p.out);
          run_binary_case<T>(c, a, b, take(av, broadcast_index(p.out, p.a)), take(bv, broadcast_index(p.out, p.b)),
                             "(broadcast)");
        }
      }
    });
  }
  MS_REQUIRE_THROWS_MSG(ops::add(Tensor<float>{{1, 2, 3, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}}, Tensor<float>{1, 2, 3, 4, 5}),
                        ms::ShapeError, "[ms.shape_error] add: cannot broadcast (3, 4) with (5,)");
  MS_REQUIRE_THROWS_MSG(ops::eq(make(std::vector<float>(6, 0.f), Shape{2, 3}), make(std::vector<float>(2, 0.f), Shape{2})),
                        ms::ShapeError, "[ms.shape_error] eq: cannot broadcast (2, 3) with (2,)");
  MS_REQUIRE_THROWS_MSG(ops::add(make(std::vector<float>{}, Shape{0}), make(std::vector<float>{1, 2}, Shape{2})),
                        ms::ShapeError, "[ms.shape_error] add: cannot broadcast (0,) with (2,)");
}

TEST_CASE("binary ops on non-contiguous inputs", "[op][elementwise]") {
  for (const BinaryCase& c : binary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for_each_dtype(op.cpu_dtypes, [&]<class T>() {
      if constexpr (!is_half_v<T>) {
        INFO(c.op << " on " << ms::dtype_name(ms::dtype_v<T>));
        Tensor<T> a = make(cycle_values<T>(96, 0), Shape{8, 12});
        Tensor<T> b = make(cycle_values<T>(96, 3), Shape{12, 8});
        Tensor<T> row = make(cycle_values<T>(12, 5), Shape{1, 12});
        struct V {
          Tensor<T> x, y;
          const char* name;
        };
        V cases[] = {
            {a, b.t(), "contiguous with transposed"},
            {b.t(), a, "transposed with contiguous"},
            {a.slice(1, 0, 12, 2), b.t().slice(1, 11, -100, -2), "step 2 with step -2"},
            {a.slice(0, 7, -100, -1), row.expand(Shape{8, 12}), "negative step with expanded"},
            {a.slice(1, 3, 4).expand(Shape{8, 12}), b.t(), "expanded column with transposed"},
            {a.t().slice(0, 1, 12, 5), b.slice(0, 0, 3), "transposed slice with slice"},
        };
        for (auto& v : cases) {
          REQUIRE(v.x.shape() == v.y.shape());
          run_binary_case<T>(c, v.x, v.y, v.x.to_vector(), v.y.to_vector(), v.name);
        }
      }
    });
  }
}

TEST_CASE("binary ops on big inputs: multi-threaded result equals the reference and 1 thread", "[op][elementwise]") {
  ThreadGuard guard;
  // Above 3 parallel grains (ms::kParallelGrain), as a rows x 400 matrix too.
  constexpr std::int64_t rows = ms_test::kSanitized ? 300 : 600, cols = 400;
  constexpr std::size_t n = static_cast<std::size_t>(rows * cols);
  STATIC_REQUIRE(rows * cols > 3 * ms::kParallelGrain);
  for (const BinaryCase& c : binary_cases()) {
    const ms::ops::OpDef& op = ms::ops::registry().get(c.op);
    for_each_dtype(op.cpu_dtypes, [&]<class T>() {
      if constexpr (!is_half_v<T>) {
        INFO(c.op << " on " << ms::dtype_name(ms::dtype_v<T>));
        std::vector<T> av = big_values<T>(n), bv = big_values<T>(n + 13);
        bv.erase(bv.begin(), bv.begin() + 13);
        if constexpr (is_int_v<T>) {
          if (c.op == "pow") for (auto& b : bv) b = static_cast<T>(static_cast<i64>(b) & 7);  // keep the loop short
        }
        Tensor<T> a = make(av), b = make(bv);
        ms::set_num_threads(2);
        AnyTensor y2 = c.run(a, b);
        run_binary_case<T>(c, a, b, av, bv, "(big, 2 threads)");
        ms::set_num_threads(1);
        AnyTensor y1 = c.run(a, b);
        REQUIRE(same_contiguous_bits(y1, y2));
        // broadcast (rows, 400) with a row and a column; transposed big operand
        Tensor<T> m = make(av, Shape{rows, cols});
        Tensor<T> r = make(std::vector<T>(bv.begin(), bv.begin() + cols), Shape{cols});
        Tensor<T> col = make(std::vector<T>(bv.begin(), bv.begin() + rows), Shape{rows, 1});
        Tensor<T> mt = make(bv, Shape{cols, rows}).t();
        for (auto [x, y, name] : {std::tuple{m, r, "row"}, std::tuple{col, m, "column"}, std::tuple{m, mt, "transposed"}}) {
          ms::set_num_threads(2);
          AnyTensor z2 = c.run(x, y);
          ms::set_num_threads(1);
          AnyTensor z1 = c.run(x, y);
          INFO(name);
          REQUIRE(same_contiguous_bits(z1, z2));
          Shape out = z1.shape();
          run_binary_case<T>(c, x, y, take(x.to_vector(), broadcast_index(out, x.shape())),
                             take(y.to_vector(), broadcast_index(out, y.shape())), std::string("(big ") + name + ")");
        }
      }
    });
  }
}

TEST_CASE("integer add/sub/mul wrap around on overflow", "[op][elementwise]") {
  using L32 = std::numeric_limits<std::int32_t>;
  using L64 = std::numeric_limits<std::int64_t>;
  Tensor<std::int32_t> a{L32::max(), L32::min(), 65536}, b{1, 1, 65536};
  REQUIRE((a + b).to_vector() == std::vector<std::int32_t>{L32::min(), L32::min() + 1, 131072});
  REQUIRE((a - b).to_vector() == std::vector<std::int32_t>{L32::max() - 1, L32::max(), 0});
  REQUIRE((a * b).to_vector() == std::vector<std::int32_t>{L32::max(), L32::min(), 0});
  Tensor<std::int64_t> c{L64::max(), L64::min()};
  REQUIRE((c + std::int64_t{1}).to_vector() == std::vector<std::int64_t>{L64::min(), L64::min() + 1});
  REQUIRE((c * 2).to_vector() == std::vector<std::int64_t>{-2, 0});
  Tensor<std::uint8_t> u{250, 3, 0};
  REQUIRE((u + Tensor<std::uint8_t>{10, 255, 0}).to_vector() == std::vector<std::uint8_t>{4, 2, 0});
  REQUIRE((u - Tensor<std::uint8_t>{251, 4, 1}).to_vector() == std::vector<std::uint8_t>{255, 255, 255});
  REQUIRE((u * Tensor<std::uint8_t>{2, 100, 7}).to_vector() == std::vector<std::uint8_t>{244, 44, 0});
}

TEST_CASE("scalar operands on either side", "[op][elementwise]") {
  using ms_test::require_values;
  Tensor<float> x{1, 2, -4};
  require_values(x + 1.5, {2.5, 3.5, -2.5}, 0, 0);
  require_values(1.5f + x, {2.5, 3.5, -2.5}, 0, 0);
  require_values(x - 1, {0, 1, -5}, 0, 0);
  require_values(10 - x, {9, 8, 14}, 0, 0);
  require_values(x * 2, {2, 4, -8}, 0, 0);
  require_values(3 * x, {3, 6, -12}, 0, 0);
  require_values(x / 4, {0.25, 0.5, -1}, 0, 0);
  require_values(1 / x, {1, 0.5, -0.25}, 0, 0);
  require_values(ms::pow(x, 2.0), {1, 4, 16}, 0, 0);
  require_values(ms::pow(2.0, x), {2, 4, 0.0625}, 0, 0);
  require_values(ms::maximum(x, 1.5), {1.5, 2, 1.5}, 0, 0);
  require_values(ms::minimum(0, x), {0, 0, -4}, 0, 0);
  REQUIRE((x > 1).to_vector() == std::vector<bool>{false, true, false});
  REQUIRE((1 < x).to_vector() == std::vector<bool>{false, true, false});
  REQUIRE((x == 2.0).to_vector() == std::vector<bool>{false, true, false});
  REQUIRE((-4 == x).to_vector() == std::vector<bool>{false, false, true});
  REQUIRE((x != 1).to_vector() == std::vector<bool>{false, true, true});
  REQUIRE((x <= 2).to_vector() == std::vector<bool>{true, true, true});
  REQUIRE((x >= 2).to_vector() == std::vector<bool>{false, true, false});
  REQUIRE((3 >= x).to_vector() == std::vector<bool>{true, true, true});
  Tensor<std::int32_t> i{1, 2, 3};
  REQUIRE((i * 3).to_vector() == std::vector<std::int32_t>{3, 6, 9});
  REQUIRE((7 - i).to_vector() == std::vector<std::int32_t>{6, 5, 4});
  REQUIRE(ops::sub(7.0, i).dtype() == DType::i32);
  // A scalar the tensor's dtype cannot hold is an error, not a silent truncation.
  MS_REQUIRE_THROWS_MSG(i + 2.5, ms::ValueError,
                        "[ms.value_error] add: scalar 2.5 is not representable as int32 (convert the tensor with ms::cast)");
  MS_REQUIRE_THROWS_MSG(Tensor<std::uint8_t>{1} * 300, ms::ValueError,
                        "[ms.value_error] mul: scalar 300 is not representable as uint8 (convert the tensor with ms::cast)");
  REQUIRE_THROWS_AS(Tensor<std::uint8_t>{1} - (-1), ms::ValueError);
  REQUIRE_THROWS_AS(i + std::nan(""), ms::ValueError);
  // The result of a scalar op keeps the tensor's shape.
  Tensor<double> m = make(std::vector<double>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  REQUIRE((m + 1.0).shape() == Shape({2, 3}));
  REQUIRE((2.0 * m).shape() == Shape({2, 3}));
}

TEMPLATE_TEST_CASE("comparisons write one bool per element over whole SIMD batches and tails", "[op][elementwise]",
                   float, double) {
  // 1,003 elements: many full batches at every ISA level, then a tail; ties and NaNs mixed in,
  // both operands contiguous, and each side a broadcast scalar.
  const std::int64_t n = 1003;
  std::vector<TestType> av(static_cast<std::size_t>(n)), bv(static_cast<std::size_t>(n));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> d(-3, 3);
  for (std::size_t i = 0; i < av.size(); ++i) {
    av[i] = static_cast<TestType>(d(rng));
    bv[i] = i % 37 == 5 ? static_cast<TestType>(NAN) : static_cast<TestType>(d(rng));
  }
  Tensor<TestType> a = make(av, Shape{n}), b = make(bv, Shape{n});
  const TestType s = 1;
  auto check = [&](const Tensor<bool>& got, auto ref, const char* what) {
    INFO(what);
    const std::vector<bool> g = got.to_vector();
    REQUIRE(g.size() == av.size());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < av.size(); ++i) bad += g[i] != ref(i);
    CHECK(bad == 0);
  };
  check(a > b, [&](std::size_t i) { return av[i] > bv[i]; }, "a > b");
  check(a >= b, [&](std::size_t i) { return av[i] >= bv[i]; }, "a >= b");
  check(a < b, [&](std::size_t i) { return av[i] < bv[i]; }, "a < b");
  check(a <= b, [&](std::size_t i) { return av[i] <= bv[i]; }, "a <= b");
  check(a == b, [&](std::size_t i) { return av[i] == bv[i]; }, "a == b");
  check(a != b, [&](std::size_t i) { return av[i] != bv[i]; }, "a != b");
  Tensor<TestType> sc = make(std::vector<TestType>{s}, Shape{1});
  check(ms::gt(b, sc), [&](std::size_t i) { return bv[i] > s; }, "b > scalar");
  check(ms::gt(sc, b), [&](std::size_t i) { return s > bv[i]; }, "scalar > b");
}

TEST_CASE("C++ operators on Tensor<T>", "[op][elementwise]") {
  using ms_test::require_values;
  Tensor<double> a{1, -2, 3, NAN}, b{4, 5, 3, 1};
  require_values(a + b, {5, 3, 6, kNaN}, 0, 0);
  require_values(a - b, {-3, -7, 0, kNaN}, 0, 0);
  require_values(a * b, {4, -10, 9, kNaN}, 0, 0);
  require_values(a / b, {0.25, -0.4, 1, kNaN}, 0, 0);
  require_values(-a, {-1, 2, -3, kNaN}, 0, 0);
  REQUIRE((a == b).to_vector() == std::vector<bool>{false, false, true, false});
  REQUIRE((a != b).to_vector() == std::vector<bool>{true, true, false, true});
  REQUIRE((a < b).to_vector() == std::vector<bool>{true, true, false, false});
  REQUIRE((a <= b).to_vector() == std::vector<bool>{true, true, true, false});
  REQUIRE((a > b).to_vector() == std::vector<bool>{false, false, false, false});
  REQUIRE((a >= b).to_vector() == std::vector<bool>{false, false, true, false});
  Tensor<bool> p{true, true, false, false}, q{true, false, true, false};
  REQUIRE((p && q).to_vector() == std::vector<bool>{true, false, false, false});
  REQUIRE((p || q).to_vector() == std::vector<bool>{true, true, true, false});
  REQUIRE((!p).to_vector() == std::vector<bool>{false, false, true, true});
  REQUIRE(((a < b) && !(a == b)).to_vector() == std::vector<bool>{true, true, false, false});
  REQUIRE((p == q).to_vector() == std::vector<bool>{true, false, false, true});
  REQUIRE((p != q).to_vector() == std::vector<bool>{false, true, true, false});
  Tensor<std::int64_t> i{5, -6};
  REQUIRE((i + i * i - i).to_vector() == std::vector<std::int64_t>{25, 36});
  REQUIRE((-i).to_vector() == std::vector<std::int64_t>{-5, 6});
  // The typed result of a comparison is Tensor<bool>.
  static_assert(std::is_same_v<decltype(a < b), Tensor<bool>>);
  static_assert(std::is_same_v<decltype(a + b), Tensor<double>>);
  static_assert(std::is_same_v<decltype(!p), Tensor<bool>>);
}

TEST_CASE("maximum/minimum propagate NaN from either side", "[op][elementwise]") {
  using ms_test::require_values;
  for (int n : {3, 19}) {  // scalar tail and SIMD body
    std::vector<float> av(n, 1.f), bv(n, 2.f);
    av[0] = NAN;
    bv[1] = NAN;
    Tensor<float> a = make(av), b = make(bv);
    std::vector<double> mx(n, 2.0), mn(n, 1.0);
    mx[0] = mx[1] = mn[0] = mn[1] = kNaN;
    require_values(ms::maximum(a, b), mx, 0, 0);
    require_values(ms::maximum(b, a), mx, 0, 0);
    require_values(ms::minimum(a, b), mn, 0, 0);
    require_values(ms::minimum(b, a), mn, 0, 0);
  }
}

// =================================================================================================
// where
// =================================================================================================

TEST_CASE("where selects with broadcasting for every dtype", "[op][elementwise]") {
  const ms::ops::OpDef& op = ms::ops::registry().get("where");
  for_each_dtype(op.cpu_dtypes, [&]<class T>() {
    if constexpr (!is_half_v<T>) {
      INFO("where on " << ms::dtype_name(ms::dtype_v<T>));
      struct S3 {
        Shape c, a, b, out;
      };
      const S3 shapes[] = {{Shape{37}, Shape{37}, Shape{37}, Shape{37}},
                           {Shape{3, 4}, Shape{}, Shape{3, 4}, Shape{3, 4}},
                           {Shape{3, 1}, Shape{1, 4}, Shape{}, Shape{3, 4}},
                           {Shape{4}, Shape{3, 1}, Shape{2, 1, 1}, Shape{2, 3, 4}},
                           {Shape{}, Shape{5}, Shape{5}, Shape{5}},
                           {Shape{37}, Shape{37}, Shape{}, Shape{37}},  // relu's gradient: where(x > 0, g, 0)
                           {Shape{0, 3}, Shape{3}, Shape{1}, Shape{0, 3}}};
      for (const S3& s : shapes) {
        INFO(ms::shape_str(s.c) << ", " << ms::shape_str(s.a) << ", " << ms::shape_str(s.b));
        std::vector<bool> cv;
        for (i64 i = 0; i < ms::numel(s.c); ++i) cv.push_back((i * 3) % 5 < 2);
        std::vector<T> av = cycle_values<T>(static_cast<std::size_t>(ms::numel(s.a)), 1);
        std::vector<T> bv = cycle_values<T>(static_cast<std::size_t>(ms::numel(s.b)), 4);
        Tensor<bool> cond = make(cv, s.c);
        Tensor<T> a = make(av, s.a), b = make(bv, s.b);
        Tensor<T> y = ms::where(cond, a, b);
        REQUIRE(y.shape() == s.out);
        auto ci = broadcast_index(s.out, s.c), ai = broadcast_index(s.out, s.a), bi = broadcast_index(s.out, s.b);
        std::vector<T> exp;
        for (std::size_t i = 0; i < ci.size(); ++i) exp.push_back(cv[ci[i]] ? av[ai[i]] : bv[bi[i]]);
        check_values<T>("where", y, exp);
      }
      // non-contiguous operands
      Tensor<T> m = make(cycle_values<T>(48, 2), Shape{6, 8});
      Tensor<bool> cm = make(big_values<bool>(48), Shape{8, 6}).t();
      Tensor<T> y = ms::where(cm, m.slice(0, 5, -100, -1), m.slice(1, 2, 3).expand(Shape{6, 8}));
      std::vector<bool> cv = cm.to_vector();
      std::vector<T> av = m.slice(0, 5, -100, -1).to_vector(), bv = m.slice(1, 2, 3).expand(Shape{6, 8}).to_vector();
      std::vector<T> exp;
      for (std::size_t i = 0; i < cv.size(); ++i) exp.push_back(cv[i] ? av[i] : bv[i]);
      check_values<T>("where (non-contiguous)", y, exp);
      // big, 1 vs 2 threads
      ThreadGuard guard;
      std::vector<T> big_a = big_values<T>(200003), big_b = big_values<T>(200010);
      big_b.resize(200003);
      std::vector<bool> big_c = big_values<bool>(200003);
      Tensor<bool> bc = make(big_c);
      Tensor<T> ba = make(big_a), bb = make(big_b);
      ms::set_num_threads(2);
      Tensor<T> y2 = ms::where(bc, ba, bb);
      ms::set_num_threads(1);
      Tensor<T> y1 = ms::where(bc, ba, bb);
      REQUIRE(same_contiguous_bits(y1, y2));
      std::vector<T> bexp;
      for (std::size_t i = 0; i < big_c.size(); ++i) bexp.push_back(big_c[i] ? big_a[i] : big_b[i]);
      check_values<T>("where (big)", y2, bexp);
    }
  });
  MS_REQUIRE_THROWS_MSG(ops::where(Tensor<float>{1}, Tensor<float>{1}, Tensor<float>{2}), ms::DTypeError,
                        "[ms.dtype_error] where: condition must be bool, got float32 (shape (1,))");
  REQUIRE_THROWS_AS(ops::where(Tensor<bool>{true}, Tensor<float>{1}, Tensor<double>{2}), ms::DTypeError);
  MS_REQUIRE_THROWS_MSG(ops::where(Tensor<bool>{true, false}, Tensor<float>{1, 2, 3}, Tensor<float>{2}),
                        ms::ShapeError, "[ms.shape_error] where: cannot broadcast (2,) with (3,)");
}

// =================================================================================================
// copy and cast
// =================================================================================================

TEST_CASE("copy (clone/contiguous) of every storage dtype and layout", "[op][elementwise]") {
  const ms::ops::OpDef& op = ms::ops::registry().get("copy");
  for_each_dtype(op.cpu_dtypes, [&]<class T>() {
    INFO("copy on " << ms::dtype_name(ms::dtype_v<T>));
    std::vector<T> g = cast_inputs<T>();
    std::vector<T> v;
    for (std::size_t i = 0; i < 60; ++i) v.push_back(g[(i * 11) % g.size()]);
    Tensor<T> base = make(v, Shape{6, 10});
    Tensor<T> layouts[] = {base, base.t(), base.slice(1, 9, -100, -3), base.slice(0, 2, 3).expand(Shape{4, 10}),
                           make(std::vector<T>{}, Shape{0, 3}), make(std::vector<T>{v[5]}, Shape{})};
    for (Tensor<T>& x : layouts) {
      Tensor<T> c = x.clone();
      REQUIRE(c.is_contiguous());
      REQUIRE(c.shape() == x.shape());
      REQUIRE_FALSE(c.shares_storage(x));
      check_values<T>("clone", c, x.to_vector());
      Tensor<T> k = x.contiguous();
      REQUIRE(k.is_contiguous());
      check_values<T>("contiguous", k, x.to_vector());
      if (x.is_contiguous()) REQUIRE(k.is_same(x));
      else REQUIRE_FALSE(k.shares_storage(x));
    }
    // Transposed operands run in tiles of 64 x 64 (run_unary_transposed): partial tiles, a
    // batch of transposes, a merged permute, reversed rows.
    {
      std::vector<T> w;
      for (std::size_t i = 0; i < 3 * 37 * 70; ++i) w.push_back(g[(i * 7) % g.size()]);
      Tensor<T> cube = make(w, Shape{3, 37, 70});
      Tensor<T> mat = cube.slice(0, 1, 2).reshape(Shape{37, 70});
      Tensor<T> moved[] = {cube.permute(Shape{0, 2, 1}), cube.permute(Shape{2, 0, 1}),
                           mat.slice(0, 36, -100, -1).t(), cube.permute(Shape{1, 2, 0})};
      for (Tensor<T>& x : moved) {
        INFO("shape " << ms::shape_str(x.shape()) << ", strides " << ms::shape_str(x.strides()));
        check_values<T>("contiguous (transposed)", x.contiguous(), x.to_vector());
      }
    }
    // big, 1 vs 2 threads, strided source
    if constexpr (!is_half_v<T>) {
      ThreadGuard guard;
      Tensor<T> big = make(big_values<T>(400 * 700), Shape{400, 700}).t();
      ms::set_num_threads(2);
      AnyTensor c2 = ops::clone(big);
      ms::set_num_threads(1);
      AnyTensor c1 = ops::clone(big);
      REQUIRE(same_contiguous_bits(c1, c2));
      check_values<T>("clone (big transposed)", Tensor<T>(c2), big.to_vector());
    }
  });
}

TEST_CASE("cast between all dtypes matches the NumPy-style reference", "[op][elementwise]") {
  const ms::ops::OpDef& op = ms::ops::registry().get("cast");
  for_each_dtype(op.cpu_dtypes, [&]<class I>() {
    std::vector<I> xs = cast_inputs<I>();
    Tensor<I> x = make(xs);
    // A non-contiguous view of the same values (reversed) takes the strided path.
    Tensor<I> xr = x.slice(0, -1, std::numeric_limits<i64>::min(), -1);
    std::vector<I> xrv(xs.rbegin(), xs.rend());
    for_each_dtype(ms::kStorageTypes, [&]<class O>() {
      INFO("cast " << ms::dtype_name(ms::dtype_v<I>) << " -> " << ms::dtype_name(ms::dtype_v<O>));
      Tensor<O> y = ms::cast<O>(x);
      REQUIRE(y.shape() == x.shape());
      std::vector<O> exp;
      for (I v : xs) exp.push_back(ref_convert<O, I>(v));
      check_values<O>("cast", y, exp, {}, [&](std::size_t i) { return str<I>(xs[i]); });
      std::vector<O> expr;
      for (I v : xrv) expr.push_back(ref_convert<O, I>(v));
      check_values<O>("cast (reversed view)", ms::cast<O>(xr), expr, {}, [&](std::size_t i) { return str<I>(xrv[i]); });
      if constexpr (std::is_same_v<I, O>) REQUIRE(y.is_same(x));  // same dtype: no copy
      else REQUIRE_FALSE(y.shares_storage(x));
    });
  });
}

TEST_CASE("cast: float to int saturates, NaN becomes 0, tiny floats are true", "[op][elementwise]") {
  using L32 = std::numeric_limits<std::int32_t>;
  using L64 = std::numeric_limits<std::int64_t>;
  Tensor<float> f{NAN, INFINITY, -INFINITY, 3e9f, -3e9f, 2.9f, -2.9f, -0.5f};
  REQUIRE(ms::cast<std::int32_t>(f).to_vector() ==
          std::vector<std::int32_t>{0, L32::max(), L32::min(), L32::max(), L32::min(), 2, -2, 0});
  REQUIRE(ms::cast<std::int64_t>(f).to_vector() ==
          std::vector<std::int64_t>{0, L64::max(), L64::min(), 3000000000LL, -3000000000LL, 2, -2, 0});
  REQUIRE(ms::cast<std::uint8_t>(f).to_vector() == std::vector<std::uint8_t>{0, 255, 0, 255, 0, 2, 0, 0});
  REQUIRE(ms::cast<bool>(f).to_vector() == std::vector<bool>{true, true, true, true, true, true, true, true});
  REQUIRE(ms::cast<bool>(Tensor<double>{1e-50, 0.0, -0.0, 5e-324}).to_vector() ==
          std::vector<bool>{true, false, false, true});
  REQUIRE(ms::cast<std::int64_t>(Tensor<double>{9.3e18, -9.3e18, 9223372036854775808.0}).to_vector() ==
          std::vector<std::int64_t>{L64::max(), L64::min(), L64::max()});
  REQUIRE(ms::cast<std::uint8_t>(Tensor<std::int32_t>{-1, 256, 300}).to_vector() ==
          std::vector<std::uint8_t>{255, 0, 44});
  REQUIRE(ms::cast<float>(Tensor<bool>{true, false}).to_vector() == std::vector<float>{1, 0});
  // Double rounding through float would give 1.0 here; the nearest half is 1 + 2^-10.
  Tensor<half> h = ms::cast<half>(Tensor<double>{1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)});
  REQUIRE(static_cast<float>(h.item()) == 1.0f + std::ldexp(1.0f, -10));
  Tensor<bfloat16> bf = ms::cast<bfloat16>(Tensor<std::int32_t>{16842753});
  REQUIRE(static_cast<float>(bf.item()) == 16908288.0f);
  // typed conversions
  REQUIRE(Tensor<double>{1.5, -1.5}.to<std::int32_t>().to_vector() == std::vector<std::int32_t>{1, -1});
  REQUIRE(ms::cast<float>(Tensor<half>{half(0.5f)}).item() == 0.5f);
}

// =================================================================================================
// View ops
// =================================================================================================

namespace {
/// Values 0..n-1 in dtype T (bool: alternating; uint8 and 16-bit floats: small and exact).
template <class T>
std::vector<T> iota_values(std::size_t n) {
  std::vector<T> v;
  for (std::size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) v.push_back(i % 3 == 1);
    else if constexpr (is_half_v<T>) v.push_back(static_cast<T>(static_cast<float>(i % 200)));
    else v.push_back(static_cast<T>(i % 250));
  }
  return v;
}
/// Element of a row-major (2, 3, 4) array at (i, j, k).
template <class T>
T at3(const std::vector<T>& v, i64 i, i64 j, i64 k) {
  return v[static_cast<std::size_t>(i * 12 + j * 4 + k)];
}
}  // namespace

TEST_CASE("view ops (reshape, permute, slice, expand) give NumPy's values for every storage dtype", "[op][view]") {
  ms::DTypeSet all = ms::ops::registry().get("reshape").cpu_dtypes;
  REQUIRE(all.bits == ms::kStorageTypes.bits);
  for (const char* name : {"permute", "slice", "expand"})
    REQUIRE(ms::ops::registry().get(name).cpu_dtypes.bits == ms::kStorageTypes.bits);
  for_each_dtype(ms::kStorageTypes, [&]<class T>() {
    INFO("views on " << ms::dtype_name(ms::dtype_v<T>));
    std::vector<T> v = iota_values<T>(24);
    Tensor<T> x = make(v, Shape{2, 3, 4});
    // reshape
    Tensor<T> r = x.reshape(Shape{4, -1});
    REQUIRE(r.shape() == Shape({4, 6}));
    REQUIRE(r.shares_storage(x));
    check_values<T>("reshape", r, v);
    check_values<T>("reshape 0-d", make(std::vector<T>{v[1]}, Shape{1, 1}).reshape(Shape{}), std::vector<T>{v[1]});
    // permute (2, 0, 1): y[k, i, j] = x[i, j, k]
    Tensor<T> p = x.permute(Shape{2, 0, -2});
    REQUIRE(p.shape() == Shape({4, 2, 3}));
    std::vector<T> pe;
    for (i64 k = 0; k < 4; ++k)
      for (i64 i = 0; i < 2; ++i)
        for (i64 j = 0; j < 3; ++j) pe.push_back(at3(v, i, j, k));
    check_values<T>("permute", p, pe);
    // reshape of a permuted (non-contiguous) tensor copies in row-major order of the view
    Tensor<T> pr = p.reshape(Shape{24});
    check_values<T>("reshape of permuted", pr, pe);
    // slice x[:, ::-2, 1:4:2]
    Tensor<T> s = x.slice(1, -1, std::numeric_limits<i64>::min(), -2).slice(2, 1, 4, 2);
    REQUIRE(s.shape() == Shape({2, 2, 2}));
    std::vector<T> se;
    for (i64 i = 0; i < 2; ++i)
      for (i64 j : {2, 0})
        for (i64 k : {1, 3}) se.push_back(at3(v, i, j, k));
    check_values<T>("slice", s, se);
    // expand x[:, 1:2, 2:3] (2, 1, 1) -> (3, 2, 5, 1)
    Tensor<T> e = x.slice(1, 1, 2).slice(2, 2, 3).expand(Shape{3, 2, 5, -1});
    REQUIRE(e.shape() == Shape({3, 2, 5, 1}));
    std::vector<T> ee;
    for (int a = 0; a < 3; ++a)
      for (i64 i = 0; i < 2; ++i)
        for (int b = 0; b < 5; ++b) ee.push_back(at3(v, i, 1, 2));
    check_values<T>("expand", e, ee);
    // elementwise copy of a view of every dtype
    check_values<T>("clone of slice", s.clone(), se);
  });
}

TEST_CASE("view ops follow NumPy slicing rules", "[op][view]") {
  Tensor<std::int32_t> x{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto sl = [&](i64 start, i64 stop, i64 step) { return x.slice(0, start, stop, step).to_vector(); };
  using V = std::vector<std::int32_t>;
  const i64 kMin = std::numeric_limits<i64>::min();
  REQUIRE(sl(2, 5, 1) == V{2, 3, 4});
  REQUIRE(sl(-3, 100, 1) == V{7, 8, 9});
  REQUIRE(sl(-100, 2, 1) == V{0, 1});
  REQUIRE(sl(1, 9, 3) == V{1, 4, 7});
  REQUIRE(sl(5, 2, 1).empty());
  REQUIRE(sl(9, kMin, -1) == V{9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
  REQUIRE(sl(-1, -11, -3) == V{9, 6, 3, 0});
  REQUIRE(sl(8, 2, -2) == V{8, 6, 4});
  REQUIRE(sl(100, 6, -1) == V{9, 8, 7});
  REQUIRE(sl(-100, kMin, -1).empty());
  REQUIRE(sl(3, 3, 1).empty());
  REQUIRE(x.slice(0, 2, 5, 1).shares_storage(x));
  MS_REQUIRE_THROWS_MSG(x.slice(0, 0, 5, 0), ms::ValueError, "[ms.value_error] slice: slice step cannot be zero");
  MS_REQUIRE_THROWS_MSG(x.slice(1, 0, 5), ms::IndexError,
                        "[ms.index_error] slice: axis 1 is out of range for a tensor of rank 1");
  Tensor<float> m = make(std::vector<float>(24, 1.f), Shape{2, 3, 4});
  MS_REQUIRE_THROWS_MSG(m.reshape(Shape{5, -1}), ms::ShapeError,
                        "[ms.shape_error] reshape: cannot reshape (2, 3, 4) (24 elements) into [5, -1]");
  MS_REQUIRE_THROWS_MSG(m.reshape(Shape{-1, -1}), ms::ShapeError,
                        "[ms.shape_error] reshape: only one dimension can be -1, got [-1, -1]");
  MS_REQUIRE_THROWS_MSG(m.permute(Shape{1, 1, 0}), ms::ValueError,
                        "[ms.value_error] permute: axis 1 repeats in permutation [1, 1, 0]");
  MS_REQUIRE_THROWS_MSG(m.permute(Shape{1, 0}), ms::ShapeError,
                        "[ms.shape_error] permute: permutation [1, 0] does not match rank 3 of shape (2, 3, 4)");
  MS_REQUIRE_THROWS_MSG(m.expand(Shape{2, 5, 4}), ms::ShapeError,
                        "[ms.shape_error] expand: cannot expand (2, 3, 4) to [2, 5, 4]");
  MS_REQUIRE_THROWS_MSG(m.expand(Shape{3, 4}), ms::ShapeError,
                        "[ms.shape_error] expand: cannot expand (2, 3, 4) to [3, 4] (fewer dims)");
  MS_REQUIRE_THROWS_MSG(m.expand(Shape{-1, 2, 3, 4}), ms::ShapeError,
                        "[ms.shape_error] expand: -1 is not allowed for a new leading dim in [-1, 2, 3, 4]");
  // expand to a size-0 dim, and broadcast_to
  REQUIRE(m.slice(1, 0, 1).expand(Shape{2, 0, 4}).numel() == 0);
  REQUIRE(ms::broadcast_to(Tensor<float>{1, 2}, Shape{3, 2}).to_vector() == std::vector<float>{1, 2, 1, 2, 1, 2});
}
