// Reference-value tests of the reductions (sum, prod, mean, max, min, var, std, argmax,
// argmin) and of softmax / log_softmax. References are computed here by plain loops in
// double precision (NumPy semantics) from the logical values of the input, so every layout
// (transposed, sliced with steps, expanded), every axes combination and every dtype is
// checked against the same definition. Kernel paths covered: contiguous rows, leading-axis
// columns, the middle-axis three-loop form, the permuting copy, long rows split in chunks.

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "../test_util.hpp"

MS_TEST_COVERS("sum", "prod", "mean", "max", "min", "var", "std", "argmax", "argmin", "softmax", "log_softmax");

namespace {

using ms::AnyTensor;
using ms::Shape;
using ms::Tensor;
using ms_test::kInf;
using ms_test::kNaN;
using ms_test::require_shape;
using ms_test::require_values;
using ms_test::ThreadGuard;
using ms_test::values;
namespace ops = ms::ops;
using i64 = std::int64_t;

constexpr float fInf = std::numeric_limits<float>::infinity();  // for float literals
constexpr float fNaN = std::numeric_limits<float>::quiet_NaN();

/// A tensor of dtype T and `shape` holding `v` (row-major), each value cast to T.
template <class T>
Tensor<T> tensor_of(const Shape& shape, const std::vector<double>& v) {
  REQUIRE(ms::numel(shape) == static_cast<i64>(v.size()));
  Tensor<T> t = AnyTensor::empty(shape, ms::dtype_v<T>);
  T* p = static_cast<T*>(t.raw_data());
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
  return t;
}

std::vector<double> uniform(i64 n, double lo, double hi, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

/// Small integers (exact in every dtype) for integer tests; `lo` >= 0 for uint8.
std::vector<double> ints(i64 n, int lo, int hi, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

// ---- the reference --------------------------------------------------------------------------

/// Reduces row-major `v` of `shape` over the axes in `mask` (bit i = axis i) with NumPy's
/// definitions. "argmax"/"argmin" give the row-major index within the reduced axes.
std::vector<double> ref_reduce(const std::vector<double>& v, const Shape& shape, unsigned mask, const std::string& op,
                               int correction = 1) {
  const int r = shape.rank();
  i64 nout = 1;
  for (int i = 0; i < r; ++i)
    if (!((mask >> i) & 1u)) nout *= shape[i];
  std::vector<std::vector<double>> groups(static_cast<std::size_t>(nout));
  for (i64 lin = 0; lin < static_cast<i64>(v.size()); ++lin) {
    i64 rem = lin, o = 0, ostride = 1;
    for (int i = r - 1; i >= 0; --i) {
      i64 idx = rem % shape[i];
      rem /= shape[i];
      if (!((mask >> i) & 1u)) {
        o += idx * ostride;
        ostride *= shape[i];
      }
    }
    groups[o].push_back(v[lin]);
  }
  std::vector<double> out;
  for (auto& g : groups) {
    const double n = static_cast<double>(g.size());
    if (op == "sum" || op == "mean" || op == "var" || op == "std") {
      long double s = 0;
      for (double x : g) s += x;
      double m = static_cast<double>(s / n);
      if (op == "sum") { out.push_back(static_cast<double>(s)); continue; }
      if (op == "mean") { out.push_back(g.empty() ? kNaN : m); continue; }
      long double q = 0;
      for (double x : g) q += (x - m) * (x - m);
      double var = g.empty() ? kNaN : static_cast<double>(q / std::max(0.0, n - correction));
      out.push_back(op == "var" ? var : std::sqrt(var));
    } else if (op == "prod") {
      long double p = 1;
      for (double x : g) p *= x;
      out.push_back(static_cast<double>(p));
    } else if (op == "max" || op == "min") {
      double best = op == "max" ? -kInf : kInf;
      for (double x : g) {
        if (std::isnan(x) || std::isnan(best)) best = kNaN;
        else best = op == "max" ? std::max(best, x) : std::min(best, x);
      }
      out.push_back(best);
    } else {  // argmax / argmin: first NaN, else first extreme
      std::size_t bi = 0;
      for (std::size_t i = 1; i < g.size(); ++i) {
        if (std::isnan(g[bi])) break;
        if (std::isnan(g[i]) || (op == "argmax" ? g[i] > g[bi] : g[i] < g[bi])) bi = i;
      }
      out.push_back(static_cast<double>(bi));
    }
  }
  return out;
}

Shape ref_shape(const Shape& s, unsigned mask, bool keepdim) {
  Shape o;
  for (int i = 0; i < s.rank(); ++i) {
    if (!((mask >> i) & 1u)) o.push_back(s[i]);
    else if (keepdim) o.push_back(1);
  }
  return o;
}

ops::IntList mask_axes(unsigned mask, int rank, bool negative) {
  ops::IntList a;
  for (int i = 0; i < rank; ++i)
    if ((mask >> i) & 1u) a.push_back(negative ? i - rank : i);
  return a;
}

AnyTensor run_op(const std::string& op, const AnyTensor& x, const ops::IntList& axes, bool keepdim, int corr = 1) {
  if (op == "sum") return ops::sum(x, axes, keepdim);
  if (op == "prod") return ops::prod(x, axes, keepdim);
  if (op == "mean") return ops::mean(x, axes, keepdim);
  if (op == "max") return ops::max(x, axes, keepdim);
  if (op == "min") return ops::min(x, axes, keepdim);
  if (op == "var") return ops::var(x, axes, keepdim, corr);
  if (op == "std") return ops::std(x, axes, keepdim, corr);
  FAIL("unknown op " << op);
  return {};
}

/// Checks `op` over every subset of axes (positive and negative spellings, keepdim on/off)
/// of tensor x (any layout) against the reference.
template <class T>
void check_all_axes(const std::string& op, const Tensor<T>& x, double rtol, double atol) {
  const std::vector<double> v = values(x);
  const int r = x.dim();
  for (unsigned mask = 0; mask < (1u << r); ++mask) {
    for (int variant = 0; variant < 2; ++variant) {
      const bool keep = variant == 1;
      // mask 0 is "no axes" = all axes; exercise it as an explicit full list instead.
      const unsigned m = mask == 0 ? (1u << r) - 1u : mask;
      const ops::IntList axes = mask == 0 ? ops::IntList{} : mask_axes(m, r, variant == 1);
      INFO(op << " axes mask " << m << " keepdim " << keep << " shape " << ms::shape_str(x.shape()));
      Tensor<T> y = run_op(op, x, axes, keep);
      REQUIRE(y.shape() == ref_shape(x.shape(), m, keep));
      std::vector<double> want = ref_reduce(v, x.shape(), m, op);
      if constexpr (std::is_integral_v<T>)  // integer sums and products wrap around in T
        for (auto& e : want) e = static_cast<double>(static_cast<T>(static_cast<i64>(e)));
      require_values(y, want, rtol, atol);
    }
  }
}

template <class T>
void check_arg_all_axes(const Tensor<T>& x) {
  const std::vector<double> v = values(x);
  const int r = x.dim();
  for (const std::string op : {"argmax", "argmin"}) {
    for (int ax = -1; ax < r; ++ax) {
      for (bool keep : {false, true}) {
        INFO(op << " axis " << ax << " keepdim " << keep << " shape " << ms::shape_str(x.shape()));
        std::optional<i64> axis;
        if (ax >= 0) axis = ax;
        Tensor<i64> y = op == "argmax" ? ops::argmax(x, axis, keep) : ops::argmin(x, axis, keep);
        unsigned m = ax < 0 ? (1u << r) - 1u : 1u << ax;
        Shape want = ax < 0 ? (keep ? Shape::filled(r, 1) : Shape{}) : ref_shape(x.shape(), m, keep);
        REQUIRE(y.shape() == want);
        require_values(y, ref_reduce(v, x.shape(), m, op), 0, 0);
      }
    }
  }
}

}  // namespace

// ---- values by hand ---------------------------------------------------------------------------

TEST_CASE("reductions of a small matrix by hand", "[op][reduce]") {
  Tensor<float> x{{1, 2, 3}, {4, 5, 6}};
  require_values(ms::sum(x), {21});
  require_shape(ms::sum(x), {});
  require_values(ms::sum(x, {0}), {5, 7, 9});
  require_values(ms::sum(x, {1}), {6, 15});
  require_values(ms::sum(x, {-1}, true), {6, 15});
  require_shape(ms::sum(x, {-1}, true), {2, 1});
  require_shape(ms::sum(x, {}, true), {1, 1});
  require_values(ms::prod(x, {1}), {6, 120});
  require_values(ms::mean(x, {0}), {2.5, 3.5, 4.5});
  require_values(ms::max(x, {0}), {4, 5, 6});
  require_values(ms::min(x, {1}), {1, 4});
  require_values(ms::var(x, {1}), {1, 1});
  require_values(ms::var(x, {1}, false, 0), {2.0 / 3, 2.0 / 3});
  require_values(ms::std(x, {0}), {std::sqrt(4.5), std::sqrt(4.5), std::sqrt(4.5)});
  require_values(ms::var(x), {3.5});
  require_values(ms::argmax(x), {5});
  require_values(ms::argmax(x, 0), {1, 1, 1});
  require_values(ms::argmin(x, -1), {0, 0});
  require_shape(ms::argmin(x, 1, true), {2, 1});
  require_shape(ms::argmax(x, std::nullopt, true), {1, 1});
  // The Tensor methods forward to the same ops.
  require_values(x.sum(), {21});
  require_values(x.mean(), {3.5});
  require_values(x.max(), {6});
  require_values(x.min(), {1});
}

TEST_CASE("reductions keep integer dtypes without promotion", "[op][reduce]") {
  Tensor<std::int32_t> a{{2147483647, 1}, {-5, 7}};
  Tensor<std::int32_t> s = ms::sum(a, {1});
  REQUIRE(s.dtype() == ms::DType::i32);
  require_values(s, {-2147483648.0, 2});  // wraps around like int32 arithmetic
  Tensor<std::uint8_t> u = tensor_of<std::uint8_t>({3}, {200, 100, 1});
  require_values(ms::sum(u), {45});  // 301 mod 256
  require_values(ms::prod(Tensor<std::int64_t>{3, -4, 5}), {-60});
  require_values(ms::max(Tensor<std::int64_t>{-3, -9}), {-3});
  require_values(ms::argmax(tensor_of<std::uint8_t>({4}, {3, 9, 9, 1})), {1});
}

// ---- every op, dtype, axes combination and layout vs the reference ---------------------------

TEMPLATE_TEST_CASE("sum, prod, max, min over every axes combination", "[op][reduce]", float, double, std::int32_t,
                   std::int64_t, std::uint8_t) {
  using T = TestType;
  const bool is_float = std::is_floating_point_v<T>;
  Tensor<T> x = tensor_of<T>({3, 4, 5}, is_float ? uniform(60, -2, 2, 1) : ints(60, 0, 9, 1));
  // prod over up to 60 elements: values near 1 keep it finite (integers: 1 or 2, no overflow in int32).
  std::vector<double> signs = ints(60, 0, 1, 2);  // integers: products of +-1 (no overflow)
  for (auto& s : signs) s = std::is_signed_v<T> ? 2 * s - 1 : 1;
  Tensor<T> p = tensor_of<T>({3, 4, 5}, is_float ? uniform(60, 0.8, 1.25, 2) : signs);
  const double tol = std::is_same_v<T, float> ? 1e-5 : (is_float ? 1e-12 : 0);
  check_all_axes("sum", x, tol, tol);
  check_all_axes("max", x, 0, 0);
  check_all_axes("min", x, 0, 0);
  check_all_axes("prod", p, tol, tol);
  check_arg_all_axes(x);
  Tensor<T> y = tensor_of<T>({2, 3, 2, 3}, is_float ? uniform(36, -2, 2, 3) : ints(36, 0, 5, 3));
  check_all_axes("sum", y, tol, tol);
  check_all_axes("max", y, 0, 0);
  check_arg_all_axes(y);
}

TEMPLATE_TEST_CASE("mean, var, std over every axes combination", "[op][reduce]", float, double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  Tensor<T> x = tensor_of<T>({3, 4, 5}, uniform(60, -3, 5, 4));
  check_all_axes("mean", x, tol, tol);
  check_all_axes("var", x, tol, tol);
  check_all_axes("std", x, tol, tol);
  for (int corr : {0, 2}) {
    Tensor<T> v = ms::var(x, {1}, false, corr);
    require_values(v, ref_reduce(values(x), x.shape(), 2u, "var", corr), tol, tol);
  }
  Tensor<T> y = tensor_of<T>({2, 3, 2, 3}, uniform(36, 10, 11, 5));
  check_all_axes("var", y, 1e-4, 1e-6);
}

TEMPLATE_TEST_CASE("reductions of non-contiguous views", "[op][reduce]", float, std::int32_t) {
  using T = TestType;
  const bool is_float = std::is_floating_point_v<T>;
  Tensor<T> base = tensor_of<T>({4, 5, 6}, is_float ? uniform(120, -1, 1, 6) : ints(120, -50, 50, 6));
  const double tol = is_float ? 1e-5 : 0;
  std::vector<std::pair<std::string, Tensor<T>>> views = {
      {"permute(2,0,1)", base.permute({2, 0, 1})},
      {"transpose(0,2)", base.transpose(0, 2)},
      {"slice step 2", base.slice(1, 0, 5, 2)},
      {"reversed axis", base.slice(2, -1, -7, -1)},
      {"permute+slice", base.permute({1, 2, 0}).slice(0, 1, 5, 3)},
      {"expand", tensor_of<T>({4, 1, 6}, is_float ? uniform(24, -1, 1, 7) : ints(24, -9, 9, 7)).expand({4, 5, 6})},
      {"expand leading", tensor_of<T>({5, 6}, is_float ? uniform(30, -1, 1, 8) : ints(30, -9, 9, 8)).expand({3, 5, 6})},
      {"2-D transpose", tensor_of<T>({7, 9}, is_float ? uniform(63, -1, 1, 9) : ints(63, -9, 9, 9)).t()},
  };
  for (auto& [name, v] : views) {
    INFO("view " << name);
    check_all_axes("sum", v, tol, tol);
    check_all_axes("max", v, 0, 0);
    check_all_axes("min", v, 0, 0);
    check_arg_all_axes(v);
    if constexpr (std::is_floating_point_v<T>) {
      check_all_axes("mean", v, tol, tol);
      check_all_axes("var", v, 1e-4, 1e-5);
    }
  }
}

// ---- edge cases -------------------------------------------------------------------------------

TEST_CASE("reductions over zero-size dims", "[op][reduce]") {
  Tensor<float> e = AnyTensor::empty(Shape{0, 3}, ms::DType::f32);
  require_values(ms::sum(e, {0}), {0, 0, 0});
  require_shape(ms::sum(e, {1}), {0});
  require_values(ms::sum(e), {0});
  require_values(ms::prod(e, {0}), {1, 1, 1});
  require_values(ms::mean(e, {0}), {kNaN, kNaN, kNaN});
  require_values(ms::var(e), {kNaN});
  require_values(ms::std(e, {0}, true), {kNaN, kNaN, kNaN});
  require_shape(ms::std(e, {0}, true), {1, 3});
  require_shape(ms::max(e, {1}), {0});        // nothing to reduce into: fine
  require_shape(ms::argmax(e, 1, true), {0, 1});
  require_values(ms::sum(Tensor<std::int32_t>(AnyTensor::empty(Shape{2, 0}, ms::DType::i32)), {1}), {0, 0});
  MS_REQUIRE_THROWS_MSG(ms::max(e, {0}), ms::ValueError,
                        "[ms.value_error] max: reduction over a zero-size axis has no identity (shape (0, 3), axes [0])");
  MS_REQUIRE_THROWS_MSG(ms::min(e), ms::ValueError,
                        "[ms.value_error] min: reduction over a zero-size axis has no identity (shape (0, 3), axes [0, 1])");
  MS_REQUIRE_THROWS_MSG(ms::argmax(e), ms::ValueError,
                        "[ms.value_error] argmax: reduction over a zero-size axis has no identity (shape (0, 3), axes [0, 1])");
  MS_REQUIRE_THROWS_MSG(ms::argmin(e, 0), ms::ValueError,
                        "[ms.value_error] argmin: reduction over a zero-size axis has no identity (shape (0, 3), axes [0])");
}

TEST_CASE("reductions of 0-d tensors", "[op][reduce]") {
  Tensor<double> s = tensor_of<double>(Shape{}, {2.5});
  for (const ops::IntList& axes : {ops::IntList{}, ops::IntList{0}, ops::IntList{-1}}) {
    require_shape(ms::sum(s, axes), {});
    require_values(ms::sum(s, axes), {2.5});
    require_values(ms::max(s, axes, true), {2.5});
    require_values(ms::mean(s, axes), {2.5});
    require_values(ms::prod(s, axes), {2.5});
  }
  require_values(ms::var(s, {}, false, 0), {0});
  require_values(ms::var(s), {kNaN});  // N - correction = 0
  require_values(ms::argmax(s), {0});
  require_values(ms::argmin(s, 0, true), {0});
  require_shape(ms::argmin(s, 0, true), {});
  MS_REQUIRE_THROWS_MSG(ms::sum(s, {1}), ms::IndexError,
                        "[ms.index_error] sum: axis 1 is out of range for a tensor of rank 0");
}

TEST_CASE("reductions propagate NaN and infinities", "[op][reduce]") {
  // NaN in a SIMD lane, in the tail and in the columns path.
  for (i64 n : {5, 37, 100, 1000, 70000}) {
    for (i64 pos : {i64{0}, n / 3, n - 1}) {
      std::vector<double> v = uniform(n, -1, 1, 11);
      v[pos] = kNaN;
      Tensor<float> x = tensor_of<float>({n}, v);
      INFO("n " << n << " NaN at " << pos);
      require_values(ms::max(x), {kNaN});
      require_values(ms::min(x), {kNaN});
      require_values(ms::sum(x), {kNaN});
      require_values(ms::argmax(x), {static_cast<double>(pos)});
      require_values(ms::argmin(x), {static_cast<double>(pos)});
    }
  }
  Tensor<double> c{{1, kNaN, 3}, {kNaN, 5, -kInf}, {7, 8, 9}};
  require_values(ms::max(c, {0}), {kNaN, kNaN, 9});
  require_values(ms::min(c, {0}), {kNaN, kNaN, -kInf});
  require_values(ms::max(c, {1}), {kNaN, kNaN, 9});
  require_values(ms::argmax(c, 0), {1, 0, 2});
  require_values(ms::argmin(c, 0), {1, 0, 1});
  require_values(ms::argmax(c, 1), {1, 0, 2});
  require_values(ms::sum(Tensor<float>{fInf, 1, 2}), {kInf});
  require_values(ms::sum(Tensor<float>{fInf, -fInf}), {kNaN});
  require_values(ms::max(Tensor<float>{-fInf, -fInf}), {-kInf});
  require_values(ms::min(Tensor<float>{fInf, fInf}), {kInf});
  require_values(ms::argmax(Tensor<float>{-fInf, -fInf}), {0});
  require_values(ms::mean(Tensor<double>{kInf, 1}), {kInf});
  require_values(ms::var(Tensor<double>{kInf, 1}), {kNaN});
  // Ties: the first occurrence, along rows and along columns.
  Tensor<float> t{{3, 7, 7}, {7, 1, 7}};
  require_values(ms::argmax(t), {1});
  require_values(ms::argmax(t, 0), {1, 0, 0});
  require_values(ms::argmin(t, 1), {0, 1});
}

// ---- large inputs: accuracy and threads --------------------------------------------------------

TEST_CASE("large float reductions match a double reference", "[op][reduce]") {
  // 0.1f added a million times: a plain running float sum is off by ~1%.
  const i64 n = 1 << 20;
  Tensor<float> ones_tenth = tensor_of<float>({n}, std::vector<double>(n, 0.1));
  const double exact = static_cast<double>(0.1f) * n;
  CHECK(std::abs(ms::sum(ones_tenth).item() - exact) / exact < 1e-6);
  CHECK(std::abs(ms::mean(ones_tenth).item() - 0.1f) < 1e-7);
  Tensor<float> cols = ones_tenth.reshape({n / 8, 8});
  require_values(ms::sum(cols, {0}), std::vector<double>(8, exact / 8), 1e-6, 0);
  Tensor<float> mid = ones_tenth.reshape({4, n / 32, 8});
  require_values(ms::sum(mid, {1}), std::vector<double>(32, exact / 32), 1e-6, 0);

  // Random data over each kernel path, against the double reference.
  Tensor<float> x = tensor_of<float>({1000003}, uniform(1000003, -1, 3, 12));
  const std::vector<double> v = values(x);  // the float-rounded inputs
  double abs_sum = 0;
  for (double e : v) abs_sum += std::abs(e);
  CHECK(std::abs(ms::sum(x).item() - ref_reduce(v, x.shape(), 1u, "sum")[0]) <= 1e-6 * abs_sum);
  require_values(ms::var(x), ref_reduce(v, x.shape(), 1u, "var"), 1e-5, 0);
  require_values(ms::std(x), ref_reduce(v, x.shape(), 1u, "std"), 1e-5, 0);
  require_values(ms::max(x), ref_reduce(v, x.shape(), 1u, "max"), 0, 0);
  require_values(ms::argmin(x), ref_reduce(v, x.shape(), 1u, "argmin"), 0, 0);

  Tensor<float> m = tensor_of<float>({4099, 257}, uniform(4099 * 257, -1, 1, 13));
  const std::vector<double> w = values(m);
  for (unsigned mask : {1u, 2u}) {
    INFO("mask " << mask);
    require_values(ms::sum(m, mask_axes(mask, 2, false)), ref_reduce(w, m.shape(), mask, "sum"), 1e-4, 1e-4);
    require_values(ms::var(m, mask_axes(mask, 2, false)), ref_reduce(w, m.shape(), mask, "var"), 1e-4, 1e-6);
    require_values(ms::max(m, mask_axes(mask, 2, false)), ref_reduce(w, m.shape(), mask, "max"), 0, 0);
    require_values(ms::argmax(m, mask == 1u ? 0 : 1), ref_reduce(w, m.shape(), mask, "argmax"), 0, 0);
  }
  Tensor<double> d = tensor_of<double>({3, 70001, 5}, uniform(3 * 70001 * 5, -1, 1, 14));
  require_values(ms::sum(d, {1}), ref_reduce(values(d), d.shape(), 2u, "sum"), 1e-10, 1e-10);
  require_values(ms::sum(d.transpose(0, 1), {0}), ref_reduce(values(d), d.shape(), 2u, "sum"), 1e-10, 1e-10);
}

TEST_CASE("reduction results do not depend on the thread count", "[op][reduce]") {
  ThreadGuard guard;
  Tensor<float> x = tensor_of<float>({1 << 20}, uniform(1 << 20, -1, 2, 15));
  Tensor<float> m = x.reshape({2048, 512});
  Tensor<float> c = x.reshape({64, 64, 256});
  auto run = [&] {
    std::vector<AnyTensor> r = {ms::sum(x),          ms::var(x),          ms::max(x),         ms::sum(m, {0}),
                                ms::sum(m, {1}),     ms::mean(c, {0, 2}), ms::var(c, {1}),    ms::argmax(m, 0),
                                ms::argmin(m, 1),    ms::softmax(m),      ms::log_softmax(c, 1), ms::std(m.t(), {1})};
    return r;
  };
  ms::set_num_threads(1);
  auto one = run();
  ms::set_num_threads(2);
  auto two = run();
  for (std::size_t i = 0; i < one.size(); ++i) {
    INFO("result " << i);
    REQUIRE(one[i].shape() == two[i].shape());
    CHECK(std::memcmp(one[i].raw_data(), two[i].raw_data(), one[i].nbytes()) == 0);
  }
}

// ---- errors and registration ------------------------------------------------------------------

TEST_CASE("reduction errors name the op, axes, shapes and dtypes", "[op][reduce]") {
  Tensor<float> x{{1, 2, 3}, {4, 5, 6}};
  MS_REQUIRE_THROWS_MSG(ms::sum(x, {3}), ms::IndexError,
                        "[ms.index_error] sum: axis 3 is out of range for a tensor of rank 2");
  MS_REQUIRE_THROWS_MSG(ms::max(x, {-3}), ms::IndexError,
                        "[ms.index_error] max: axis -3 is out of range for a tensor of rank 2");
  MS_REQUIRE_THROWS_MSG(ms::sum(x, {1, -1}), ms::ValueError,
                        "[ms.value_error] sum: axis 1 appears more than once in axes [1, -1]");
  MS_REQUIRE_THROWS_MSG(ms::var(x, {0, 0}), ms::ValueError,
                        "[ms.value_error] var: axis 0 appears more than once in axes [0, 0]");
  MS_REQUIRE_THROWS_MSG(ms::argmax(x, 2), ms::IndexError,
                        "[ms.index_error] argmax: axis 2 is out of range for a tensor of rank 2");
  Tensor<std::int32_t> i{1, 2};
  MS_REQUIRE_THROWS_MSG(ms::mean(i), ms::DTypeError,
                        "[ms.dtype_error] mean: unsupported dtype int32 (supported: float32, float64, float16, bfloat16)");
  MS_REQUIRE_THROWS_MSG(ms::std(i), ms::DTypeError,
                        "[ms.dtype_error] std: unsupported dtype int32 (supported: float32, float64, float16, bfloat16)");
  MS_REQUIRE_THROWS_MSG(ops::sum(Tensor<bool>{true, false}), ms::DTypeError,
                        "[ms.dtype_error] sum: unsupported dtype bool (supported: float32, float64, int32, int64, uint8, float16, bfloat16)");
}

TEST_CASE("reduction ops are registered once with their metadata", "[op][reduce]") {
  for (const char* name : {"sum", "prod", "mean", "max", "min", "var", "std", "argmax", "argmin"}) {
    const ops::OpDef& op = ops::registry().get(name);
    CHECK(op.category == ops::Category::reduction);
    CHECK(op.kernel != nullptr);
    CHECK(op.num_inputs == 1);
  }
  CHECK(ops::argmax_op.nondiff_reason == "integer output");
  CHECK(ops::argmin_op.nondiff_reason == "integer output");
  CHECK(ops::var_op.attr_names == std::vector<std::string>{"axes", "keepdim", "correction"});
  const ops::TensorMeta in[1] = {{ms::DType::f32, Shape{100, 10}}};
  const ops::TensorMeta out[1] = {{ms::DType::f32, Shape{10}}};
  ops::Cost c = ops::op_cost(ops::sum_op, in, out, ops::Attrs{});
  CHECK(c.flops == 1000);
  CHECK(c.bytes == 4040);
  CHECK(ops::registry().get("softmax").category == ops::Category::softmax);
}

// ---- softmax / log_softmax -------------------------------------------------------------------

namespace {
/// Softmax (or log-softmax) of row-major `v` of `shape` along `axis`, in double.
std::vector<double> ref_softmax(const std::vector<double>& v, const Shape& shape, int axis, bool log) {
  i64 A = 1, R = shape.rank() ? shape[axis] : 1, C = 1;
  for (int i = 0; i < shape.rank(); ++i) {
    if (i < axis) A *= shape[i];
    if (i > axis) C *= shape[i];
  }
  std::vector<double> out(v.size());
  for (i64 a = 0; a < A; ++a)
    for (i64 c = 0; c < C; ++c) {
      double m = -kInf;
      bool nan = false;
      for (i64 r = 0; r < R; ++r) {
        double x = v[(a * R + r) * C + c];
        nan |= std::isnan(x);
        m = std::max(m, x);
      }
      double s = 0;
      for (i64 r = 0; r < R; ++r) s += std::exp(v[(a * R + r) * C + c] - m);
      for (i64 r = 0; r < R; ++r) {
        double x = v[(a * R + r) * C + c];
        out[(a * R + r) * C + c] = nan ? kNaN : (log ? x - m - std::log(s) : std::exp(x - m) / s);
      }
    }
  return out;
}
}  // namespace

TEMPLATE_TEST_CASE("softmax and log_softmax along any axis", "[op][softmax]", float, double) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-13;
  for (const Shape& s : {Shape{7}, Shape{3, 37}, Shape{2, 5, 300}, Shape{4, 1, 9}}) {
    std::vector<double> v = uniform(ms::numel(s), -6, 6, 21);
    Tensor<T> x = tensor_of<T>(s, v);
    for (int ax = 0; ax < s.rank(); ++ax) {
      INFO("shape " << ms::shape_str(s) << " axis " << ax);
      require_values(ms::softmax(x, ax), ref_softmax(v, s, ax, false), tol, tol);
      require_values(ms::log_softmax(x, ax - s.rank()), ref_softmax(v, s, ax, true), tol, tol);
    }
  }
  // Default axis is the last; non-contiguous inputs.
  Tensor<T> m = tensor_of<T>({6, 10}, uniform(60, -3, 3, 22));
  Tensor<T> mt = m.t();  // (10, 6), transposed layout
  require_values(ms::softmax(mt), ref_softmax(values(mt), mt.shape(), 1, false), tol, tol);
  require_values(ms::log_softmax(m.slice(1, 0, 10, 3), 0), ref_softmax(values(m.slice(1, 0, 10, 3)), Shape{6, 4}, 0, true),
                 tol, tol);
}

TEST_CASE("softmax is stable and handles edge cases", "[op][softmax]") {
  Tensor<float> big{1000, 1001, 1002};
  require_values(ms::softmax(big), {0.09003057, 0.24472847, 0.66524096}, 1e-6);
  require_values(ms::log_softmax(big), {-2.40760596, -1.40760596, -0.40760596}, 1e-6);
  require_values(ms::softmax(Tensor<float>{-fInf, 0, 0}), {0, 0.5, 0.5});
  require_values(ms::log_softmax(Tensor<double>{-kInf, 0}), {-kInf, 0});
  require_values(ms::softmax(Tensor<float>{1, fNaN, 2}), {kNaN, kNaN, kNaN});
  require_values(ms::softmax(Tensor<float>{{1, 2}, {fNaN, 0}}, 0),
                 {kNaN, 1 / (1 + std::exp(-2.0)), kNaN, 1 / (1 + std::exp(2.0))});
  // Sums to one along long rows (SIMD body + tail).
  Tensor<float> r = ms::softmax(tensor_of<float>({2, 1003}, uniform(2006, -20, 20, 23)));
  require_values(ms::sum(r, {1}), {1, 1}, 1e-5);
  // 0-d and zero-size.
  Tensor<float> s = tensor_of<float>(Shape{}, {3});
  require_values(ms::softmax(s), {1});
  require_values(ms::log_softmax(s, 0), {0});
  require_shape(ms::softmax(Tensor<float>(AnyTensor::empty(Shape{0, 4}, ms::DType::f32))), {0, 4});
  require_shape(ms::softmax(Tensor<float>(AnyTensor::empty(Shape{3, 0}, ms::DType::f32)), 0), {3, 0});
  // Errors.
  MS_REQUIRE_THROWS_MSG(ms::softmax(Tensor<float>{1, 2}, 1), ms::IndexError,
                        "[ms.index_error] softmax: axis 1 is out of range for a tensor of rank 1");
  MS_REQUIRE_THROWS_MSG(ms::log_softmax(Tensor<std::int32_t>{1, 2}), ms::DTypeError,
                        "[ms.dtype_error] log_softmax: unsupported dtype int32 (supported: float32, float64)");
}
