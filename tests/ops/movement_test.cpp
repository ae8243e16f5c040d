// Movement ops (ops/movement.hpp): concat, stack, split, gather, index_select, one_hot
// against reference values, for every dtype class, negative axes, 0-size and 0-d tensors,
// non-contiguous inputs (transposed, stepped, reversed, broadcast) and exact error messages.

#include <numeric>

#include "test_util.hpp"

MS_TEST_COVERS("concat", "stack", "split", "gather", "index_select", "one_hot");

namespace {

using ms::Tensor;
using ms_test::CountingTracer;  // to check that kernels never dispatch other ops
using ms_test::iota;
using ms_test::require_shape;
using ms_test::require_values;
using ms_test::values;

std::vector<double> seq(double start, int n) {
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST_CASE("movement ops are registered with their metadata", "[op]") {
  auto& r = ms::ops::registry();
  for (const char* n : {"concat", "stack", "split", "gather", "index_select", "one_hot"}) {
    const auto& op = r.get(n);
    INFO(n);
    CHECK(op.category == ms::ops::Category::movement);
    CHECK(op.kernel != nullptr);
    CHECK(op.view == nullptr);
    CHECK(!op.doc.empty());
  }
  CHECK(r.get("concat").num_inputs == -1);
  CHECK(r.get("stack").num_inputs == -1);
  CHECK(r.get("gather").num_inputs == 2);
  CHECK(r.get("one_hot").nondiff_reason != "");
  CHECK(r.get("concat").cpu_dtypes.contains(ms::DType::bf16));
  // Movement costs bytes, not flops.
  ms::ops::TensorMeta m{ms::DType::f32, ms::Shape{2, 3}}, o{ms::DType::f32, ms::Shape{4, 3}};
  ms::ops::TensorMeta ins[2] = {m, m};
  auto c = ms::ops::op_cost(r.get("concat"), ins, std::span(&o, 1), {});
  CHECK(c.flops == 0);
  CHECK(c.bytes == 2 * 24 + 48);
}

// ---- concat ---------------------------------------------------------------------------------

TEST_CASE("concat: reference values along each axis", "[op]") {
  Tensor<float> a{{1, 2, 3}, {4, 5, 6}};
  auto b = Tensor<float>{7, 8, 9}.reshape({1, 3});
  auto y = ms::concat({a, b}, 0);
  require_shape(y, {3, 3});
  require_values(y, {1, 2, 3, 4, 5, 6, 7, 8, 9});

  auto c = Tensor<float>{10, 20}.reshape({2, 1});
  auto z = ms::concat({a, c, a}, 1);
  require_shape(z, {2, 7});
  require_values(z, {1, 2, 3, 10, 1, 2, 3, 4, 5, 6, 20, 4, 5, 6});
  // Negative axis counts from the end.
  require_values(ms::concat({a, c, a}, -1), values(z));
}

TEST_CASE("concat: 1-D, single input, 3-D middle axis", "[op]") {
  require_values(ms::concat({Tensor<int>{1, 2}, Tensor<int>{3}, Tensor<int>{4, 5, 6}}), {1, 2, 3, 4, 5, 6});
  Tensor<int> one{7, 8};
  auto same = ms::concat({one});
  require_values(same, {7, 8});
  CHECK(!same.shares_storage(one));  // always a copy

  auto a = iota<double>({2, 2, 3});       // 0..11
  auto b = iota<double>({2, 1, 3}, 100);  // 100..105
  auto y = ms::concat(std::vector<Tensor<double>>{a, b}, 1);
  require_shape(y, {2, 3, 3});
  require_values(y, {0, 1, 2, 3, 4, 5, 100, 101, 102, 6, 7, 8, 9, 10, 11, 103, 104, 105});
}

TEMPLATE_TEST_CASE("concat: every storage dtype", "[op]", float, double, std::int32_t, std::int64_t, std::uint8_t,
                   ms::half, ms::bfloat16) {
  auto a = ms::cast<TestType>(Tensor<float>{{1, 2}, {3, 4}});
  auto b = ms::cast<TestType>(Tensor<float>{{5, 6}});
  auto y = ms::concat({a, b}, 0);
  CHECK(y.dtype() == ms::dtype_v<TestType>);
  require_values(y, {1, 2, 3, 4, 5, 6});
  require_values(ms::concat({a, a}, 1), {1, 2, 1, 2, 3, 4, 3, 4});
}

TEST_CASE("concat: bool", "[op]") {
  auto a = ms::cast<bool>(Tensor<float>{1, 0});
  auto b = ms::cast<bool>(Tensor<float>{0, 0, 1});
  auto v = ms::concat({a, b}).to_vector();
  CHECK(v == std::vector<bool>{true, false, false, false, true});
}

TEST_CASE("concat: non-contiguous inputs", "[op]") {
  auto x = iota<float>({3, 4});  // [[0..3],[4..7],[8..11]]
  auto t = x.t();                // (4, 3), transposed strides
  auto s = x.slice(1, 0, 4, 2);  // (3, 2): columns 0 and 2
  auto r = x.slice(1, 3, -5, -1).slice(0, 0, 1);  // (1, 4): row 0 reversed
  CHECK(!t.is_contiguous());
  require_values(ms::concat({t, t.slice(0, 1, 2)}, 0), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11, 1, 5, 9});
  require_values(ms::concat({s, x}, 1), {0, 2, 0, 1, 2, 3, 4, 6, 4, 5, 6, 7, 8, 10, 8, 9, 10, 11});
  require_values(ms::concat({r, x}, 0), {3, 2, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  // A broadcast (stride 0) input.
  auto e = Tensor<float>{1, 2}.unsqueeze(0).expand({3, 2});
  require_values(ms::concat({e, s}, 1), {1, 2, 0, 2, 1, 2, 4, 6, 1, 2, 8, 10});
}

TEST_CASE("concat: 0-size inputs", "[op]") {
  auto empty_rows = iota<float>({0, 3});
  Tensor<float> a{{1, 2, 3}};
  auto y = ms::concat({empty_rows, a, empty_rows}, 0);
  require_shape(y, {1, 3});
  require_values(y, {1, 2, 3});
  auto z = ms::concat({iota<float>({2, 0}), iota<float>({2, 0})}, 0);
  require_shape(z, {4, 0});
  require_shape(ms::concat({iota<float>({2, 0}), iota<float>({2, 2})}, 1), {2, 2});
}

TEST_CASE("concat: large input uses the parallel path", "[op]") {
  auto a = iota<float>({300, 257});
  auto b = iota<float>({300, 3}, 1e6);
  auto y = ms::concat({a.t(), b.t()}, 0);  // transposed inputs: strided rows
  require_shape(y, {260, 300});
  auto v = y.to_vector();
  CHECK(v[0] == 0);
  CHECK(v[1] == 257);
  CHECK(v[256 * 300 + 299] == 299 * 257 + 256);
  CHECK(v[257 * 300 + 1] == 1e6 + 3);
  CHECK(v[259 * 300 + 299] == 1e6 + 299 * 3 + 2);
}

TEST_CASE("concat: errors", "[op]") {
  Tensor<float> a{{1, 2, 3}, {4, 5, 6}};
  MS_REQUIRE_THROWS_MSG(ms::concat({a, iota<float>({4, 5})}, 1), ms::ShapeError,
                        "[ms.shape_error] concat: tensors must match except along axis 1: (2, 3) vs (4, 5)");
  MS_REQUIRE_THROWS_MSG(ms::concat({a, Tensor<float>{1, 2, 3}}, 0), ms::ShapeError,
                        "[ms.shape_error] concat: tensors must match except along axis 0: (2, 3) vs (3,)");
  MS_REQUIRE_THROWS_MSG(ms::ops::concat({a, Tensor<int>{1, 2, 3}.reshape({1, 3})}, 0), ms::DTypeError,
                        "[ms.dtype_error] concat: dtype mismatch: input 0 is float32 but input 1 is int32; convert "
                        "with ms::cast");
  MS_REQUIRE_THROWS_MSG(ms::concat({a, a}, 2), ms::IndexError,
                        "[ms.index_error] concat: axis 2 is out of range for a tensor of rank 2");
  MS_REQUIRE_THROWS_MSG(ms::concat({a, a}, -3), ms::IndexError,
                        "[ms.index_error] concat: axis -3 is out of range for a tensor of rank 2");
  MS_REQUIRE_THROWS_MSG(ms::concat(std::vector<Tensor<float>>{}), ms::ValueError,
                        "[ms.value_error] concat: expects at least one tensor");
  Tensor<float> s = ms::AnyTensor::empty({}, ms::DType::f32);
  MS_REQUIRE_THROWS_MSG(ms::concat({s, s}), ms::ShapeError,
                        "[ms.shape_error] concat: zero-dimensional tensors cannot be joined (input 0 has shape ())");
}

// ---- stack ----------------------------------------------------------------------------------

TEST_CASE("stack: reference values on each axis", "[op]") {
  Tensor<float> a{{1, 2, 3}, {4, 5, 6}};
  Tensor<float> b{{7, 8, 9}, {10, 11, 12}};
  auto y0 = ms::stack({a, b}, 0);
  require_shape(y0, {2, 2, 3});
  require_values(y0, seq(1, 12));
  auto y1 = ms::stack({a, b}, 1);
  require_shape(y1, {2, 2, 3});
  require_values(y1, {1, 2, 3, 7, 8, 9, 4, 5, 6, 10, 11, 12});
  auto y2 = ms::stack({a, b}, -1);
  require_shape(y2, {2, 3, 2});
  require_values(y2, {1, 7, 2, 8, 3, 9, 4, 10, 5, 11, 6, 12});
  require_values(ms::stack({a, b}, 2), values(y2));
}

TEST_CASE("stack: 0-d, 0-size, dtypes, non-contiguous", "[op]") {
  Tensor<std::int64_t> s = ms::AnyTensor::empty({}, ms::DType::i64);
  s.data()[0] = 42;
  auto y = ms::stack({s, s, s});
  require_shape(y, {3});
  require_values(y, {42, 42, 42});
  require_shape(ms::stack({iota<float>({0, 2}), iota<float>({0, 2})}, 1), {0, 2, 2});
  require_shape(ms::stack(std::vector<Tensor<float>>{iota<float>({2})}, 0), {1, 2});

  auto h = ms::cast<ms::bfloat16>(Tensor<float>{{1, 2}, {3, 4}});
  require_values(ms::stack({h, h.t()}, 0), {1, 2, 3, 4, 1, 3, 2, 4});
  auto x = iota<std::int32_t>({2, 6}).slice(1, 5, -7, -2);  // (2, 3): 5 3 1 / 11 9 7
  require_values(ms::stack({x, x}, 1), {5, 3, 1, 5, 3, 1, 11, 9, 7, 11, 9, 7});
}

TEST_CASE("stack: errors", "[op]") {
  Tensor<float> a{{1, 2, 3}, {4, 5, 6}};
  MS_REQUIRE_THROWS_MSG(ms::stack({a, a.t().contiguous()}), ms::ShapeError,
                        "[ms.shape_error] stack: all tensors must have the same shape: (2, 3) vs (3, 2) (input 1)");
  MS_REQUIRE_THROWS_MSG(ms::stack({a, a}, 3), ms::IndexError,
                        "[ms.index_error] stack: axis 3 is out of range for a tensor of rank 3");
  MS_REQUIRE_THROWS_MSG(ms::ops::stack({a, ms::cast<double>(a)}), ms::DTypeError,
                        "[ms.dtype_error] stack: dtype mismatch: input 0 is float32 but input 1 is float64; convert "
                        "with ms::cast");
  MS_REQUIRE_THROWS_MSG(ms::stack(std::vector<Tensor<float>>{}), ms::ValueError,
                        "[ms.value_error] stack: expects at least one tensor");
}

// ---- split ----------------------------------------------------------------------------------

TEST_CASE("split: sizes along an axis", "[op]") {
  auto x = iota<float>({2, 5});
  auto parts = ms::split(x, {2, 0, 3}, 1);
  REQUIRE(parts.size() == 3);
  require_shape(parts[0], {2, 2});
  require_shape(parts[1], {2, 0});
  require_shape(parts[2], {2, 3});
  require_values(parts[0], {0, 1, 5, 6});
  require_values(parts[2], {2, 3, 4, 7, 8, 9});
  CHECK(parts[0].is_contiguous());
  CHECK(!parts[0].shares_storage(x));

  auto rows = ms::split(x, {1, 1}, -2);
  require_values(rows[0], {0, 1, 2, 3, 4});
  require_values(rows[1], {5, 6, 7, 8, 9});

  // Non-contiguous input and a 16-bit dtype.
  auto t = ms::cast<ms::half>(x).t();  // (5, 2)
  auto p = ms::split(t, {3, 2}, 0);
  require_values(p[0], {0, 5, 1, 6, 2, 7});
  require_values(p[1], {3, 8, 4, 9});
  // Zero-size axis: all-zero sizes.
  auto z = ms::split(iota<float>({0, 2}), {0, 0}, 0);
  REQUIRE(z.size() == 2);
  require_shape(z[1], {0, 2});
}

TEST_CASE("split_equal: equal parts", "[op]") {
  auto x = iota<std::int64_t>({3, 4});
  auto p = ms::split_equal(x, 2, 1);
  REQUIRE(p.size() == 2);
  require_values(p[0], {0, 1, 4, 5, 8, 9});
  require_values(p[1], {2, 3, 6, 7, 10, 11});
  auto q = ms::split_equal(x, 3, 0);
  REQUIRE(q.size() == 3);
  require_values(q[2], {8, 9, 10, 11});
  auto b = ms::split_equal(ms::cast<bool>(Tensor<float>{1, 0, 0, 1}), 4);
  CHECK(b[3].item() == true);
  CHECK(b[1].item() == false);
}

TEST_CASE("split: errors", "[op]") {
  auto x = iota<float>({2, 5});
  MS_REQUIRE_THROWS_MSG(ms::split(x, {2, 2}, 1), ms::ShapeError,
                        "[ms.shape_error] split: sizes [2, 2] add up to 4 but axis 1 of shape (2, 5) has size 5");
  MS_REQUIRE_THROWS_MSG(ms::split(x, {6, -1}, 1), ms::ValueError,
                        "[ms.value_error] split: sizes [6, -1] contain a negative size");
  MS_REQUIRE_THROWS_MSG(ms::split(x, {}, 1), ms::ValueError, "[ms.value_error] split: sizes must not be empty");
  MS_REQUIRE_THROWS_MSG(ms::split(x, {5}, 2), ms::IndexError,
                        "[ms.index_error] split: axis 2 is out of range for a tensor of rank 2");
  MS_REQUIRE_THROWS_MSG(ms::split_equal(x, 2, 1), ms::ShapeError,
                        "[ms.shape_error] split_equal: axis 1 of shape (2, 5) has size 5, which is not divisible by 2");
  MS_REQUIRE_THROWS_MSG(ms::split_equal(x, 0, 1), ms::ValueError,
                        "[ms.value_error] split_equal: parts must be >= 1, got 0");
  Tensor<float> s = ms::AnyTensor::empty({}, ms::DType::f32);
  MS_REQUIRE_THROWS_MSG(ms::split(s, {1}, 0), ms::ShapeError,
                        "[ms.shape_error] split: cannot split a zero-dimensional tensor");
}

// ---- gather ---------------------------------------------------------------------------------

TEST_CASE("gather: torch.gather reference values", "[op]") {
  Tensor<float> t{{1, 2}, {3, 4}};
  // torch.gather(t, 1, [[0, 0], [1, 0]]) == [[1, 1], [4, 3]]
  Tensor<std::int64_t> i1{{0, 0}, {1, 0}};
  require_values(ms::gather(t, 1, i1), {1, 1, 4, 3});
  require_values(ms::gather(t, -1, i1), {1, 1, 4, 3});
  // axis 0: out[i][j] = t[index[i][j]][j]
  Tensor<std::int64_t> i0{{1, 0}, {1, 1}, {0, 0}};
  auto y = ms::gather(t, 0, i0);
  require_shape(y, {3, 2});
  require_values(y, {3, 2, 3, 4, 1, 2});
  // The index may be smaller than the input on the other axes.
  auto x = iota<double>({3, 4});
  auto i2 = Tensor<std::int32_t>{3, 0}.reshape({2, 1});
  require_values(ms::gather(x, 1, i2), {3, 4});
}

TEST_CASE("gather: 3-D, every dtype class, non-contiguous input and index", "[op]") {
  auto x = iota<std::int64_t>({2, 3, 4});
  Tensor<std::int64_t> idx = Tensor<std::int64_t>{2, 0, 1, 2, 1, 1, 0, 0}.reshape({2, 1, 4});
  auto y = ms::gather(x, 1, idx);
  require_shape(y, {2, 1, 4});
  // y[i][0][k] = x[i][idx[i][0][k]][k]
  require_values(y, {8, 1, 6, 11, 16, 17, 14, 15});

  auto xb = ms::cast<ms::bfloat16>(iota<float>({3, 3}));
  Tensor<std::int64_t> ib{{2, 1, 0}, {0, 0, 0}};
  require_values(ms::gather(xb, 0, ib), {6, 4, 2, 0, 1, 2});
  auto xbool = ms::cast<bool>(Tensor<float>{0, 1, 0});
  auto g = ms::gather(xbool, 0, Tensor<std::int64_t>{1, 1, 0});
  CHECK(g.to_vector() == std::vector<bool>{true, true, false});

  // Transposed input and a reversed (negative-stride) index.
  auto xt = iota<float>({3, 3}).t();  // [[0,3,6],[1,4,7],[2,5,8]]
  auto it = Tensor<std::int64_t>{{0, 1, 2}, {2, 2, 2}}.slice(1, 2, -4, -1);  // [[2,1,0],[2,2,2]]
  require_values(ms::gather(xt, 1, it), {6, 3, 0, 7, 7, 7});
  // An expanded (stride 0) index.
  auto ie = Tensor<std::int64_t>{1}.unsqueeze(0).expand({3, 2});
  require_values(ms::gather(xt, 1, ie), {3, 3, 4, 4, 5, 5});
}

TEST_CASE("gather: 0-d and 0-size", "[op]") {
  Tensor<float> s = ms::AnyTensor::empty({}, ms::DType::f32);
  s.data()[0] = 5;
  Tensor<std::int64_t> i = ms::AnyTensor::empty({}, ms::DType::i64);
  i.data()[0] = 0;
  auto y = ms::gather(s, 0, i);
  CHECK(y.dim() == 0);
  CHECK(y.item() == 5);
  auto e = ms::gather(iota<float>({2, 3}), 1, iota<std::int64_t>({2, 0}));
  require_shape(e, {2, 0});
  // An empty index is fine even along an empty axis.
  require_shape(ms::gather(iota<float>({2, 0}), 1, iota<std::int64_t>({2, 0})), {2, 0});
}

TEST_CASE("gather: errors", "[op]") {
  Tensor<float> t{{1, 2}, {3, 4}};
  MS_REQUIRE_THROWS_MSG(ms::gather(t, 1, Tensor<std::int64_t>{{0, 2}, {1, 0}}), ms::IndexError,
                        "[ms.index_error] gather: index 2 is out of range for axis 1 with size 2");
  MS_REQUIRE_THROWS_MSG(ms::gather(t, 0, Tensor<std::int32_t>{0, -1}.reshape({1, 2})), ms::IndexError,
                        "[ms.index_error] gather: index -1 is out of range for axis 0 with size 2");
  MS_REQUIRE_THROWS_MSG(ms::gather(t, 1, Tensor<std::int64_t>{0, 1}), ms::ShapeError,
                        "[ms.shape_error] gather: index (2,) must have the same rank as the input (2, 2)");
  MS_REQUIRE_THROWS_MSG(ms::gather(t, 1, Tensor<std::int64_t>{0, 1, 0}.reshape({3, 1})), ms::ShapeError,
                        "[ms.shape_error] gather: index (3, 1) is larger than the input (2, 2) on axis 0 (only axis 1 "
                        "may be larger)");
  MS_REQUIRE_THROWS_MSG(ms::ops::gather(t, 1, Tensor<float>{0, 1}.reshape({2, 1})), ms::DTypeError,
                        "[ms.dtype_error] gather: index must be int64 or int32, got float32 (shape (2, 1))");
  MS_REQUIRE_THROWS_MSG(ms::gather(t, 2, Tensor<std::int64_t>{0, 1}.reshape({2, 1})), ms::IndexError,
                        "[ms.index_error] gather: axis 2 is out of range for a tensor of rank 2");
  // Out-of-range indices are caught before the parallel part, also on big inputs.
  auto big = iota<float>({70000, 1});
  auto bad = ms::cast<std::int64_t>(iota<float>({70000, 1}));
  MS_REQUIRE_THROWS_MSG(ms::gather(big, 1, bad), ms::IndexError,
                        "[ms.index_error] gather: index 1 is out of range for axis 1 with size 1");
}

// ---- index_select ---------------------------------------------------------------------------

TEST_CASE("index_select: reference values", "[op]") {
  auto x = iota<float>({3, 4});
  auto r = ms::index_select(x, 0, Tensor<std::int64_t>{2, 0});
  require_shape(r, {2, 4});
  require_values(r, {8, 9, 10, 11, 0, 1, 2, 3});
  auto c = ms::index_select(x, -1, Tensor<std::int32_t>{3, 3, 0});
  require_shape(c, {3, 3});
  require_values(c, {3, 3, 0, 7, 7, 4, 11, 11, 8});
  // Non-contiguous input and index; 3-D middle axis; an integer dtype.
  auto xt = x.t();  // (4, 3)
  auto idx = Tensor<std::int64_t>{0, 1, 2, 3}.slice(0, 3, -5, -2);  // [3, 1]
  require_values(ms::index_select(xt, 0, idx), {3, 7, 11, 1, 5, 9});
  auto x3 = iota<std::int32_t>({2, 3, 2});
  require_values(ms::index_select(x3, 1, Tensor<std::int64_t>{1}), {2, 3, 8, 9});
  // Empty index; 16-bit dtype.
  require_shape(ms::index_select(x, 1, iota<std::int64_t>({0})), {3, 0});
  auto h = ms::cast<ms::half>(x);
  require_values(ms::index_select(h, 0, Tensor<std::int64_t>{1}), {4, 5, 6, 7});
}

TEST_CASE("index_select: errors", "[op]") {
  auto x = iota<float>({3, 4});
  MS_REQUIRE_THROWS_MSG(ms::index_select(x, 0, Tensor<std::int64_t>{0, 3}), ms::IndexError,
                        "[ms.index_error] index_select: index 3 is out of range for axis 0 with size 3");
  MS_REQUIRE_THROWS_MSG(ms::index_select(x, 1, Tensor<std::int64_t>{0, 1}.reshape({1, 2})), ms::ShapeError,
                        "[ms.shape_error] index_select: index must be 1-D, got shape (1, 2)");
  MS_REQUIRE_THROWS_MSG(ms::ops::index_select(x, 1, Tensor<double>{0}), ms::DTypeError,
                        "[ms.dtype_error] index_select: index must be int64 or int32, got float64 (shape (1,))");
  MS_REQUIRE_THROWS_MSG(ms::index_select(x, -3, Tensor<std::int64_t>{0}), ms::IndexError,
                        "[ms.index_error] index_select: axis -3 is out of range for a tensor of rank 2");
}

// ---- one_hot --------------------------------------------------------------------------------

TEST_CASE("one_hot: reference values", "[op]") {
  auto y = ms::one_hot(Tensor<std::int64_t>{0, 2, 1}, 3);
  static_assert(std::is_same_v<decltype(y), Tensor<std::int64_t>>);
  require_shape(y, {3, 3});
  require_values(y, {1, 0, 0, 0, 0, 1, 0, 1, 0});
  auto f = ms::one_hot<float>(Tensor<std::int32_t>{1, 0}.reshape({2, 1}), 2);
  require_shape(f, {2, 1, 2});
  require_values(f, {0, 1, 1, 0});
  auto b = ms::one_hot<bool>(Tensor<std::int64_t>{1}, 2);
  CHECK(b.to_vector() == std::vector<bool>{false, true});
  // Non-contiguous index, 0-d index, empty index.
  auto idx = Tensor<std::int64_t>{{0, 1}, {2, 0}}.t();  // [[0, 2], [1, 0]]
  require_values(ms::one_hot<double>(idx, 3), {1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0});
  Tensor<std::int64_t> s = ms::AnyTensor::empty({}, ms::DType::i64);
  s.data()[0] = 1;
  auto o = ms::one_hot(s, 2);
  require_shape(o, {2});
  require_values(o, {0, 1});
  require_shape(ms::one_hot(iota<std::int64_t>({0}), 4), {0, 4});
  auto h = ms::one_hot<ms::half>(Tensor<std::int64_t>{1, 0}, 2);
  require_values(h, {0, 1, 1, 0});
}

TEST_CASE("one_hot: errors", "[op]") {
  MS_REQUIRE_THROWS_MSG(ms::one_hot(Tensor<std::int64_t>{0, 3, 1}, 3), ms::IndexError,
                        "[ms.index_error] one_hot: class index 3 is out of range for num_classes 3");
  MS_REQUIRE_THROWS_MSG(ms::one_hot(Tensor<std::int64_t>{-1}, 3), ms::IndexError,
                        "[ms.index_error] one_hot: class index -1 is out of range for num_classes 3");
  MS_REQUIRE_THROWS_MSG(ms::one_hot(Tensor<std::int64_t>{0}, -1), ms::ValueError,
                        "[ms.value_error] one_hot: num_classes must be >= 0, got -1 (it is not inferred from the data)");
  MS_REQUIRE_THROWS_MSG(ms::ops::one_hot(Tensor<float>{0}, 2), ms::DTypeError,
                        "[ms.dtype_error] one_hot: unsupported dtype float32 (supported: int32, int64)");
}

// ---- dispatch behaviour ---------------------------------------------------------------------

TEST_CASE("movement kernels record exactly one op each (they never dispatch)", "[op]") {
  auto x = iota<float>({4, 6}).t();
  auto gi = Tensor<std::int64_t>{1, 2}.reshape({1, 2});
  CountingTracer tr;
  (void)ms::concat({x, x}, 0);
  (void)ms::stack({x, x}, 1);
  (void)ms::split(x, {1, 5}, 0);
  (void)ms::gather(x, 0, gi);
  (void)ms::index_select(x, 1, Tensor<std::int64_t>{1, 2});
  (void)ms::one_hot(Tensor<std::int64_t>{1, 2}, 3);
  CHECK(tr.names == std::vector<std::string>{"concat", "stack", "split", "gather", "index_select", "one_hot"});
}

TEST_CASE("split through the generic call returns one output per piece", "[op]") {
  auto x = iota<float>({6});
  const ms::AnyTensor in[1] = {x};
  auto outs = ms::ops::call(ms::ops::registry().get("split"), in,
                            ms::ops::Attrs{{"sizes", ms::ops::IntList{1, 2, 3}}, {"axis", std::int64_t{0}}});
  REQUIRE(outs.size() == 3);
  require_values(outs[2].as<float>(), {3, 4, 5});
}
