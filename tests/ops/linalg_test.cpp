// Reference-value tests of matmul and linear. The reference is NumPy's matmul written as
// plain loops in double over the logical values of the operands (1-D promotion, broadcast
// batch dims), so every layout the kernel maps without a copy (transposed, column slices,
// broadcast batches) and every layout it copies (steps, reversed axes) is checked against
// the same definition, for each dtype the ops list.

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../test_util.hpp"

MS_TEST_COVERS("matmul", "linear");

namespace {

using ms::AnyTensor;
using ms::Shape;
using ms::Tensor;
using ms_test::random;  // uniform in [-1, 1) for floats, integers in [-4, 4] for integer dtypes
using ms_test::require_shape;
using ms_test::require_values;
using ms_test::ThreadGuard;
using ms_test::values;
namespace ops = ms::ops;
using i64 = std::int64_t;

/// NumPy matmul of logical values; writes the result's shape to `out_shape`.
std::vector<double> ref_matmul(const std::vector<double>& a, Shape sa, const std::vector<double>& b, Shape sb,
                               Shape& out_shape) {
  const bool a1 = sa.rank() == 1, b1 = sb.rank() == 1;
  if (a1) sa = Shape{1, sa[0]};
  if (b1) sb = Shape{sb[0], 1};
  const i64 M = sa[sa.rank() - 2], K = sa[sa.rank() - 1], N = sb[sb.rank() - 1];
  REQUIRE(K == sb[sb.rank() - 2]);
  const int ra = sa.rank() - 2, rb = sb.rank() - 2, r = std::max(ra, rb);
  Shape batch;
  for (int i = 0; i < r; ++i) {
    i64 da = i < r - ra ? 1 : sa[i - (r - ra)], db = i < r - rb ? 1 : sb[i - (r - rb)];
    REQUIRE((da == db || da == 1 || db == 1));
    batch.push_back(da == 1 ? db : da);
  }
  std::vector<double> out;
  for (i64 bi = 0; bi < ms::numel(batch); ++bi) {
    i64 oa = 0, ob = 0, rem = bi, stride_a = M * K, stride_b = K * N;
    for (int i = r - 1; i >= 0; --i) {
      i64 idx = rem % batch[i];
      rem /= batch[i];
      int ia = i - (r - ra), ib = i - (r - rb);
      if (ia >= 0) {
        if (sa[ia] != 1) oa += idx * stride_a;
        stride_a *= sa[ia];
      }
      if (ib >= 0) {
        if (sb[ib] != 1) ob += idx * stride_b;
        stride_b *= sb[ib];
      }
    }
    for (i64 m = 0; m < M; ++m)
      for (i64 n = 0; n < N; ++n) {
        long double s = 0;
        for (i64 k = 0; k < K; ++k) s += a[oa + m * K + k] * b[ob + k * N + n];
        out.push_back(static_cast<double>(s));
      }
  }
  out_shape = batch;
  if (!a1) out_shape.push_back(M);
  if (!b1) out_shape.push_back(N);
  return out;
}

template <class T>
void check_matmul(const Tensor<T>& a, const Tensor<T>& b, double tol) {
  INFO(ms::shape_str(a.shape()) << " @ " << ms::shape_str(b.shape()) << " strides " << ms::shape_str(a.strides())
                                << " / " << ms::shape_str(b.strides()));
  Shape want_shape;
  std::vector<double> want = ref_matmul(values(a), a.shape(), values(b), b.shape(), want_shape);
  Tensor<T> y = ms::matmul(a, b);
  REQUIRE(y.shape() == want_shape);
  REQUIRE(y.dtype() == ms::dtype_v<T>);
  require_values(y, want, tol, tol);
}

/// x @ w^T + b from logical values.
std::vector<double> ref_linear(const Tensor<double>& x, const Tensor<double>& w, const Tensor<double>* b) {
  Shape s;
  std::vector<double> y = ref_matmul(values(x), x.shape(), values(Tensor<double>(w.t().contiguous())),
                                     Shape{w.shape()[1], w.shape()[0]}, s);
  if (b) {
    std::vector<double> bv = values(*b);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += bv[i % bv.size()];
  }
  return y;
}

}  // namespace

TEST_CASE("matmul by hand", "[op][linalg]") {
  Tensor<float> a{{1, 2}, {3, 4}};
  Tensor<float> b{{5, 6}, {7, 8}};
  require_values(ms::matmul(a, b), {19, 22, 43, 50});
  Tensor<float> d = ms::matmul(Tensor<float>{1, 2, 3}, Tensor<float>{4, 5, 6});
  require_shape(d, {});
  require_values(d, {32});
  require_values(ms::matmul(Tensor<float>{1, 1}, a), {4, 6});
  require_values(ms::matmul(a, Tensor<float>{1, 1}), {3, 7});
  require_values(ms::linear(a, b, Tensor<float>{100, 200}), {117, 223, 139, 253});
  require_values(ms::linear(a, b), {17, 23, 39, 53});
}

TEMPLATE_TEST_CASE("matmul shapes: 1-D promotion, batches, broadcasting, zero sizes", "[op][linalg]", float, double,
                   std::int32_t, std::int64_t) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-5 : (std::is_same_v<T, double> ? 1e-12 : 0);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},       {{4}, {4}},           {{4}, {4, 5}},          {{3, 4}, {4}},
      {{2, 3, 4}, {4}},       {{4}, {2, 4, 5}},     {{2, 1, 3, 4}, {5, 4, 6}}, {{3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {2, 4, 5}}, {{1, 3}, {3, 1}},     {{0, 4}, {4, 5}},       {{3, 0}, {0, 5}},
      {{3, 4}, {4, 0}},       {{0, 3, 4}, {4, 5}},  {{0}, {0}},             {{67, 45}, {45, 53}},
      {{130, 257}, {257, 129}}, {{6, 9, 7}, {1, 7, 8}}, {{1, 200}, {200, 300}}, {{300, 200}, {200, 1}},
  };
  unsigned seed = 1;
  for (auto& [sa, sb] : cases) {
    check_matmul(random<T>(sa, seed), random<T>(sb, seed + 100), tol * std::sqrt(sa[sa.rank() - 1] + 1.0));
    ++seed;
  }
  Tensor<T> k0 = ms::matmul(random<T>({3, 0}, 1), random<T>({0, 5}, 2));
  require_values(k0, std::vector<double>(15, 0.0));  // empty inner dim: zeros, not garbage
}

TEMPLATE_TEST_CASE("matmul of non-contiguous operands", "[op][linalg]", float, double, std::int32_t) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-5 : (std::is_same_v<T, double> ? 1e-12 : 0);
  Tensor<T> a = random<T>({8, 6}, 1), b = random<T>({6, 8}, 2), c = random<T>({2, 6, 5}, 3);
  check_matmul(a.t(), a, tol);                          // column-major left
  check_matmul(a, b.t().t(), tol);                      // row-major both
  check_matmul(b.t(), b, tol);                          // column-major left
  check_matmul(a, a.t(), tol);                          // column-major right
  check_matmul(b.t(), a.t(), tol);                      // both column-major
  check_matmul(a.slice(1, 1, 5), b.slice(0, 2, 6), tol);  // column slice: outer stride > cols
  check_matmul(a.slice(0, 0, 8, 2), b, tol);            // row step: still row-major with a larger ld
  check_matmul(a.slice(1, 0, 6, 2), b.slice(0, 0, 6, 2), tol);  // column step: copied
  check_matmul(a.slice(1, -1, -7, -1), b, tol);         // reversed columns: copied
  check_matmul(c.transpose(1, 2), random<T>({6, 4}, 4), tol);  // batched transposed
  check_matmul(random<T>({1, 5, 6}, 5).expand({3, 5, 6}), c.slice(0, 0, 1).expand({3, 6, 5}), tol);  // stride-0 batches
  check_matmul(random<T>({12}, 6).slice(0, 0, 12, 2), b, tol);  // strided 1-D left operand
  check_matmul(a, random<T>({18}, 7).slice(0, 0, 18, 3), tol);  // strided 1-D right operand
  check_matmul(random<T>({12}, 8).slice(0, 0, 12, 2), random<T>({18}, 9).slice(0, 0, 18, 3), tol);  // strided dot
}

TEMPLATE_TEST_CASE("linear with and without bias", "[op][linalg]", float, double, std::int32_t, std::int64_t) {
  using T = TestType;
  const double tol = std::is_same_v<T, float> ? 1e-5 : (std::is_same_v<T, double> ? 1e-12 : 0);
  auto check = [&](const Tensor<T>& x, const Tensor<T>& w, const Tensor<T>* b) {
    INFO("x " << ms::shape_str(x.shape()) << " strides " << ms::shape_str(x.strides()) << ", w "
              << ms::shape_str(w.shape()) << " strides " << ms::shape_str(w.strides()) << (b ? ", bias" : ""));
    Tensor<T> y = b ? ms::linear(x, w, *b) : ms::linear(x, w);
    Shape want = x.shape();
    want[want.rank() - 1] = w.shape()[0];
    REQUIRE(y.shape() == want);
    Tensor<double> xd = ms::cast<double>(x), wd = ms::cast<double>(w);
    Tensor<double> bd = b ? ms::cast<double>(*b) : Tensor<double>();
    require_values(y, ref_linear(xd, wd, b ? &bd : nullptr), tol, tol);
  };
  Tensor<T> x = random<T>({5, 4}, 1), w = random<T>({3, 4}, 2), b = random<T>({3}, 3);
  check(x, w, &b);
  check(x, w, nullptr);
  check(random<T>({4}, 4), w, &b);                            // 1-D input
  check(random<T>({2, 5, 4}, 5), w, &b);                      // batched input
  check(x, random<T>({4, 3}, 6).t(), &b);                     // transposed weight (no copy)
  check(random<T>({4, 5}, 7).t(), w, &b);                     // transposed input: copied
  check(random<T>({5, 2, 4}, 8).transpose(0, 1), w, &b);      // leading dims that do not merge
  check(random<T>({3, 8, 4}, 9).slice(1, 0, 8, 2), w, &b);    // leading dims that merge with a step
  check(x, w, nullptr);
  Tensor<T> b6 = random<T>({6}, 10);
  Tensor<T> bs = b6.slice(0, 0, 6, 2);
  check(x, w, &bs);                                           // strided bias
  check(random<T>({64, 300}, 11), random<T>({70, 300}, 12), nullptr);
  Tensor<T> b70 = random<T>({70}, 13);
  check(random<T>({2, 33, 300}, 14), random<T>({300, 70}, 15).t(), &b70);
  // Zero-size: K = 0 leaves the bias; M = 0 gives an empty result.
  Tensor<T> yk = ms::linear(random<T>({2, 0}, 16), random<T>({3, 0}, 17), b);
  require_values(yk, [&] {
    std::vector<double> v = values(b);
    v.insert(v.end(), v.begin(), v.end());
    return v;
  }());
  require_shape(ms::linear(random<T>({0, 4}, 18), w, b), {0, 3});
}

TEST_CASE("large GEMM matches a double reference and is stable across threads", "[op][linalg]") {
  ThreadGuard guard;
  Tensor<float> a = random<float>({300, 200}, 1), b = random<float>({200, 250}, 2);
  check_matmul(a, b, 1e-5);
  check_matmul(a.t().contiguous().t(), b, 1e-5);
  ms::set_num_threads(1);
  Tensor<float> y1 = ms::matmul(a, b);
  Tensor<float> l1 = ms::linear(a, b.t(), random<float>({250}, 3));
  Tensor<float> s1 = ms::matmul(random<float>({16, 20, 30}, 4), random<float>({30, 10}, 5));
  ms::set_num_threads(2);
  Tensor<float> y2 = ms::matmul(a, b);
  Tensor<float> l2 = ms::linear(a, b.t(), random<float>({250}, 3));
  Tensor<float> s2 = ms::matmul(random<float>({16, 20, 30}, 4), random<float>({30, 10}, 5));
  // Eigen may block the inner dimension differently per thread count: equal within rounding.
  require_values(y2, values(y1), 1e-5, 1e-5);
  require_values(l2, values(l1), 1e-5, 1e-5);
  require_values(s2, values(s1), 1e-5, 1e-5);
}

TEST_CASE("matmul keeps transposed and column-sliced operands in place", "[op][linalg]") {
  // The layout classifier behind the zero-copy Eigen maps.
  ops::detail::MatRef m;
  CHECK(ops::detail::mat_ref(4, 3, 3, 1, m));  // contiguous
  CHECK((!m.col_major && m.ld == 3));
  CHECK(ops::detail::mat_ref(4, 3, 1, 4, m));  // transposed
  CHECK((m.col_major && m.ld == 4));
  CHECK(ops::detail::mat_ref(4, 3, 8, 1, m));  // column slice of a wider matrix
  CHECK((!m.col_major && m.ld == 8));
  CHECK(ops::detail::mat_ref(1, 5, 0, 7, m));  // strided row vector
  CHECK((m.col_major && m.ld == 7));
  CHECK_FALSE(ops::detail::mat_ref(4, 3, 6, 2, m));   // no unit stride
  CHECK_FALSE(ops::detail::mat_ref(4, 3, 1, -4, m));  // runs backwards
  CHECK_FALSE(ops::detail::mat_ref(4, 3, 0, 1, m));   // broadcast rows overlap
}

TEST_CASE("matmul and linear errors name the op, shapes and dtypes", "[op][linalg]") {
  Tensor<float> a = random<float>({2, 3}, 1);
  MS_REQUIRE_THROWS_MSG(ms::matmul(a, random<float>({4, 5}, 2)), ms::ShapeError,
                        "[ms.shape_error] matmul: inner dimensions differ: (2, 3) @ (4, 5)");
  MS_REQUIRE_THROWS_MSG(ms::matmul(random<float>({3}, 1), random<float>({4}, 2)), ms::ShapeError,
                        "[ms.shape_error] matmul: inner dimensions differ: (3,) @ (4,)");
  MS_REQUIRE_THROWS_MSG(ops::matmul(a, random<double>({3, 4}, 2)), ms::DTypeError,
                        "[ms.dtype_error] matmul: dtype mismatch float32 vs float64 (shapes (2, 3) and (3, 4)); "
                        "convert one side with ms::cast");
  MS_REQUIRE_THROWS_MSG(ms::matmul(random<float>(Shape{}, 1), random<float>({3}, 2)), ms::ShapeError,
                        "[ms.shape_error] matmul: both operands need at least 1 dimension: () @ (3,)");
  MS_REQUIRE_THROWS_MSG(ms::matmul(random<float>({2, 3, 4}, 1), random<float>({3, 4, 5}, 2)), ms::ShapeError,
                        "[ms.shape_error] matmul: cannot broadcast batch dimensions (2,) and (3,): (2, 3, 4) @ (3, 4, 5)");
  MS_REQUIRE_THROWS_MSG(ms::matmul(Tensor<bool>{true}, Tensor<bool>{true}), ms::DTypeError,
                        "[ms.dtype_error] matmul: unsupported dtype bool (supported: float32, float64, int32, int64, float16, bfloat16)");
  Tensor<float> w = random<float>({4, 5}, 3);
  MS_REQUIRE_THROWS_MSG(ms::linear(random<float>({2, 5}, 1), w, random<float>({3}, 2)), ms::ShapeError,
                        "[ms.shape_error] linear: bias shape (3,) does not match out_features 4 of weight (4, 5)");
  MS_REQUIRE_THROWS_MSG(ms::linear(random<float>({2, 5}, 1), w, random<float>({1, 4}, 2)), ms::ShapeError,
                        "[ms.shape_error] linear: bias shape (1, 4) does not match out_features 4 of weight (4, 5)");
  MS_REQUIRE_THROWS_MSG(ms::linear(a, w), ms::ShapeError,
                        "[ms.shape_error] linear: last dimension 3 of input (2, 3) does not match in_features 5 of "
                        "weight (4, 5)");
  MS_REQUIRE_THROWS_MSG(ms::linear(a, random<float>({5}, 2)), ms::ShapeError,
                        "[ms.shape_error] linear: weight must be 2-D (out_features, in_features), got shape (5,)");
  MS_REQUIRE_THROWS_MSG(ops::linear(random<float>({2, 5}, 1), w, random<double>({4}, 2)), ms::DTypeError,
                        "[ms.dtype_error] linear: dtype mismatch float32 vs float64 (shapes (2, 5) and (4,)); "
                        "convert one side with ms::cast");
  const AnyTensor one[1] = {a};
  MS_REQUIRE_THROWS_MSG(ops::call1(ops::linear_op, one), ms::ValueError,
                        "[ms.value_error] linear: expected 2 or 3 inputs (x, weight[, bias]), got 1");
}

TEST_CASE("matmul and linear registration and cost", "[op][linalg]") {
  CHECK(ops::registry().get("matmul").category == ops::Category::linalg);
  CHECK(ops::registry().get("linear").num_inputs == -1);
  const ops::TensorMeta in[2] = {{ms::DType::f32, Shape{2, 3, 4}}, {ms::DType::f32, Shape{4, 5}}};
  const ops::TensorMeta out[1] = {{ms::DType::f32, Shape{2, 3, 5}}};
  ops::Cost c = ops::op_cost(ops::matmul_op, in, out, ops::Attrs{});
  CHECK(c.flops == 2.0 * 2 * 3 * 5 * 4);
  CHECK(c.bytes == 4.0 * (24 + 20 + 30));
  const ops::TensorMeta lin[3] = {{ms::DType::f32, Shape{6, 4}}, {ms::DType::f32, Shape{5, 4}},
                                  {ms::DType::f32, Shape{5}}};
  const ops::TensorMeta lout[1] = {{ms::DType::f32, Shape{6, 5}}};
  CHECK(ops::op_cost(ops::linear_op, lin, lout, ops::Attrs{}).flops == 2.0 * 6 * 5 * 4 + 30);
}
