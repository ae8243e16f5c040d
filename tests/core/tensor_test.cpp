// Tensor handles and the core value types: construction, views sharing storage (and writes
// through them), contiguous()/clone(), element access and its errors, to_vector on any
// layout, 0-d and size-0 tensors, Shape and SmallVec, Device parsing, dtype names and sizes.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "test_util.hpp"

namespace {
using ms::AnyTensor;
using ms::DType;
using ms::Shape;
using ms::Tensor;
using i64 = std::int64_t;
using ms_test::require_shape;

/// A (rows, cols) float tensor holding 0, 1, 2, ... in row-major order.
Tensor<float> iota2(i64 rows, i64 cols) {
  Tensor<float> t = AnyTensor::empty(Shape{rows, cols}, DType::f32);
  float* p = t.data();
  for (i64 i = 0; i < rows * cols; ++i) p[i] = static_cast<float>(i);
  return t;
}
const i64 kNone = std::numeric_limits<i64>::min();  // "to the beginning" as a stop for negative steps
}  // namespace

// ---- construction ------------------------------------------------------------------------------

TEST_CASE("tensor: construction from initializer lists", "[core][tensor]") {
  Tensor<float> a{1, 2, 3};
  require_shape(a, {3});
  REQUIRE(a.dtype() == DType::f32);
  REQUIRE(a.dim() == 1);
  REQUIRE(a.numel() == 3);
  REQUIRE(a.nbytes() == 12);
  REQUIRE(a.is_contiguous());
  REQUIRE(a.strides() == Shape({1}));
  REQUIRE(a.offset() == 0);
  REQUIRE(a.device() == ms::Device::cpu());
  REQUIRE(a.to_vector() == std::vector<float>{1, 2, 3});

  Tensor<double> m{{1, 2, 3}, {4, 5, 6}};
  require_shape(m, {2, 3});
  REQUIRE(m.strides() == Shape({3, 1}));
  REQUIRE(m.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});
  REQUIRE(m(1, 0) == 4);
  REQUIRE(m.at({0, 2}) == 3);

  REQUIRE(Tensor<std::int64_t>{5, -6}.to_vector() == std::vector<std::int64_t>{5, -6});
  REQUIRE(Tensor<std::uint8_t>{0, 255}.to_vector() == std::vector<std::uint8_t>{0, 255});
  REQUIRE(Tensor<bool>{true, false}.to_vector() == std::vector<bool>{true, false});
  Tensor<ms::half> h{ms::half(1.5f), ms::half(-2.0f)};
  REQUIRE(h.dtype() == DType::f16);
  REQUIRE(static_cast<float>(h(1)) == -2.0f);
  Tensor<ms::bfloat16> bf{ms::bfloat16(3.0f)};
  REQUIRE(bf.dtype() == DType::bf16);
  REQUIRE(bf.nbytes() == 2);

  Tensor<float> empty1{};
  REQUIRE_FALSE(empty1.defined());
  REQUIRE_FALSE(static_cast<bool>(empty1));
}

TEST_CASE("tensor: a ragged nested list is an error", "[core][tensor]") {
  MS_REQUIRE_THROWS_MSG((Tensor<float>{{1, 2}, {3}}), ms::ShapeError,
                        "[ms.shape_error] tensor: ragged nested list (row of length 1 where 2 was expected)");
  MS_REQUIRE_THROWS_MSG((Tensor<std::int32_t>{{1}, {2, 3}}), ms::ShapeError,
                        "[ms.shape_error] tensor: ragged nested list (row of length 2 where 1 was expected)");
}

TEST_CASE("tensor: empty() checks its shape, typed handles check their dtype", "[core][tensor]") {
  MS_REQUIRE_THROWS_MSG(AnyTensor::empty(Shape{2, -1}, DType::f32), ms::ShapeError,
                        "[ms.shape_error] empty: negative dimension in shape (2, -1)");
  // Two negative dims multiply to a positive count; still an error.
  MS_REQUIRE_THROWS_MSG(AnyTensor::empty(Shape{-2, -3}, DType::f32), ms::ShapeError,
                        "[ms.shape_error] empty: negative dimension in shape (-2, -3)");
  AnyTensor f = AnyTensor::empty(Shape{2}, DType::f32);
  MS_REQUIRE_THROWS_MSG(f.as<std::int32_t>(), ms::DTypeError,
                        "[ms.dtype_error] cannot view a float32 tensor as Tensor<int32>");
  REQUIRE_THROWS_AS(Tensor<double>(f), ms::DTypeError);
  REQUIRE(f.as<float>().is_same(f));
  Tensor<float> copy = f;  // copies the handle, not the data
  REQUIRE(copy.is_same(f));
}

// ---- views share storage -------------------------------------------------------------------------

TEST_CASE("tensor: views share storage and writes through them reach the base", "[core][tensor][view]") {
  Tensor<float> base = iota2(3, 4);

  SECTION("reshape and view") {
    Tensor<float> r = base.reshape(Shape{2, 6});
    Tensor<float> v = base.view(Shape{-1});
    REQUIRE(r.shares_storage(base));
    REQUIRE(v.shares_storage(base));
    require_shape(r, {2, 6});
    require_shape(v, {12});
    r(1, 0) = 100;  // element 6 = base(1, 2)
    REQUIRE(base(1, 2) == 100);
    v(-1) = -1;
    REQUIRE(base(2, 3) == -1);
  }
  SECTION("permute, transpose and t()") {
    Tensor<float> p = base.permute(Shape{1, 0});
    Tensor<float> t = base.transpose(0, 1);
    Tensor<float> tt = base.t();
    for (const Tensor<float>* x : {&p, &t, &tt}) {
      REQUIRE(x->shares_storage(base));
      require_shape(*x, {4, 3});
      REQUIRE(x->strides() == Shape({1, 4}));
      REQUIRE_FALSE(x->is_contiguous());
    }
    t(3, 1) = 42;
    REQUIRE(base(1, 3) == 42);
    REQUIRE(tt(3, 1) == 42);
    REQUIRE(p.to_vector() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 42, 11});
    REQUIRE(Tensor<float>{1, 2}.t().to_vector() == std::vector<float>{1, 2});  // t() of 1-D is itself
    Tensor<float> cube = AnyTensor::empty(Shape{2, 3, 4}, DType::f32);
    MS_REQUIRE_THROWS_MSG(cube.t(), ms::ShapeError,
                          "[ms.shape_error] t: expects a tensor of at most 2 dims, got shape (2, 3, 4)");
    REQUIRE(cube.transpose(-1, 0).shape() == Shape({4, 3, 2}));
    MS_REQUIRE_THROWS_MSG(cube.transpose(0, 3), ms::IndexError,
                          "[ms.index_error] transpose: axis 3 is out of range for a tensor of rank 3");
  }
  SECTION("slice with positive and negative steps") {
    Tensor<float> s = base.slice(1, 1, 4, 2);  // columns 1, 3
    REQUIRE(s.shares_storage(base));
    require_shape(s, {3, 2});
    REQUIRE(s.offset() == 1);
    REQUIRE(s.strides() == Shape({4, 2}));
    REQUIRE(s.to_vector() == std::vector<float>{1, 3, 5, 7, 9, 11});
    s(2, 1) = 77;
    REQUIRE(base(2, 3) == 77);
    Tensor<float> r = base.slice(0, -1, kNone, -1);  // rows reversed
    REQUIRE(r.shares_storage(base));
    REQUIRE(r.offset() == 8);
    REQUIRE(r.strides() == Shape({-4, 1}));
    REQUIRE(r.to_vector() == std::vector<float>{8, 9, 10, 77, 4, 5, 6, 7, 0, 1, 2, 3});
    r(0, 0) = -8;
    REQUIRE(base(2, 0) == -8);
    Tensor<float> rr = base.slice(1, 3, kNone, -2).slice(0, 2, kNone, -2);  // rows 2, 0; cols 3, 1
    REQUIRE(rr.to_vector() == std::vector<float>{77, 9, 3, 1});
    rr(1, 1) = 55;
    REQUIRE(base(0, 1) == 55);
  }
  SECTION("squeeze, unsqueeze and flatten") {
    Tensor<float> u = base.unsqueeze(0);
    require_shape(u, {1, 3, 4});
    REQUIRE(u.shares_storage(base));
    REQUIRE(base.unsqueeze(-1).shape() == Shape({3, 4, 1}));
    REQUIRE(base.unsqueeze(1).shape() == Shape({3, 1, 4}));
    Tensor<float> sq = u.squeeze(0);
    require_shape(sq, {3, 4});
    REQUIRE(sq.shares_storage(base));
    Tensor<float> sq_all = base.unsqueeze(0).unsqueeze(2).squeeze();
    require_shape(sq_all, {3, 4});
    MS_REQUIRE_THROWS_MSG(base.squeeze(1), ms::ShapeError, "[ms.shape_error] squeeze: axis 1 of shape (3, 4) has size 4, not 1");
    Tensor<float> f = base.flatten();
    require_shape(f, {12});
    REQUIRE(f.shares_storage(base));
    f(5) = 500;
    REQUIRE(base(1, 1) == 500);
    sq(0, 0) = -3;
    REQUIRE(base(0, 0) == -3);
    Tensor<float> cube = AnyTensor::empty(Shape{2, 3, 4}, DType::f32);
    REQUIRE(cube.flatten(1).shape() == Shape({2, 12}));
    REQUIRE(cube.flatten(0, 1).shape() == Shape({6, 4}));
    REQUIRE(cube.flatten(-2, -1).shape() == Shape({2, 12}));
    REQUIRE(Tensor<float>(AnyTensor::empty(Shape{}, DType::f32)).flatten().shape() == Shape({1}));
    MS_REQUIRE_THROWS_MSG(cube.flatten(2, 1), ms::IndexError, "[ms.index_error] flatten: start axis 2 is after end axis 1");
  }
  SECTION("expand") {
    Tensor<float> col = base.slice(1, 0, 1);  // (3, 1)
    Tensor<float> e = col.expand(Shape{2, 3, 5});
    require_shape(e, {2, 3, 5});
    REQUIRE(e.shares_storage(base));
    REQUIRE(e.strides() == Shape({0, 4, 0}));
    REQUIRE(e.to_vector() == std::vector<float>{0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 8, 8, 8, 8, 8,
                                                0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 8, 8, 8, 8, 8});
    e(1, 2, 4) = 88;  // the one element behind the broadcast row
    REQUIRE(base(2, 0) == 88);
    REQUIRE(e(0, 2, 0) == 88);
    REQUIRE(col.expand(Shape{-1, 7}).shape() == Shape({3, 7}));
  }
  SECTION("view() of a non-contiguous tensor is an error; reshape() copies") {
    Tensor<float> t = base.t();
    MS_REQUIRE_THROWS_MSG(t.view(Shape{12}), ms::ShapeError,
                          "[ms.shape_error] view: input (4, 3) with strides (1, 4) is not contiguous; use reshape() (which copies)");
    Tensor<float> r = t.reshape(Shape{12});
    REQUIRE_FALSE(r.shares_storage(base));
    REQUIRE(r.to_vector() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  }
}

TEST_CASE("tensor: contiguous() and clone()", "[core][tensor]") {
  Tensor<float> base = iota2(2, 3);
  Tensor<float> c = base.contiguous();
  REQUIRE(c.is_same(base));  // already contiguous: the same tensor
  Tensor<float> sliced_row = base.slice(0, 1, 2);
  REQUIRE(sliced_row.is_contiguous());
  REQUIRE(sliced_row.contiguous().is_same(sliced_row));

  Tensor<float> t = base.t();
  Tensor<float> tc = t.contiguous();
  REQUIRE(tc.is_contiguous());
  REQUIRE_FALSE(tc.shares_storage(base));
  REQUIRE(tc.to_vector() == std::vector<float>{0, 3, 1, 4, 2, 5});
  REQUIRE(tc.strides() == Shape({2, 1}));

  Tensor<float> k = base.clone();
  REQUIRE_FALSE(k.shares_storage(base));
  REQUIRE(k.to_vector() == base.to_vector());
  k(0, 0) = 99;
  REQUIRE(base(0, 0) == 0);
  base(1, 1) = -1;
  REQUIRE(k(1, 1) == 4);
  Tensor<float> kt = t.clone();
  REQUIRE(kt.is_contiguous());
  REQUIRE(kt.to_vector() == std::vector<float>{0, 3, 1, -1, 2, 5});
}

// ---- element access ------------------------------------------------------------------------------

TEST_CASE("tensor: item(), at() and operator() with negative indices and errors", "[core][tensor]") {
  Tensor<std::int32_t> m{{1, 2, 3}, {4, 5, 6}};
  REQUIRE(m(0, 0) == 1);
  REQUIRE(m(-1, -1) == 6);
  REQUIRE(m(-2, 1) == 2);
  REQUIRE(m.at({1, -3}) == 4);
  m(1, -2) = 50;
  REQUIRE(m.to_vector() == std::vector<std::int32_t>{1, 2, 3, 4, 50, 6});
  MS_REQUIRE_THROWS_MSG(m(2, 0), ms::IndexError, "[ms.index_error] index: index 2 is out of range for axis 0 with size 2");
  MS_REQUIRE_THROWS_MSG(m(0, -4), ms::IndexError, "[ms.index_error] index: index -4 is out of range for axis 1 with size 3");
  MS_REQUIRE_THROWS_MSG(m(0), ms::IndexError, "[ms.index_error] index: 1 indices given for a tensor of rank 2 (shape (2, 3))");
  MS_REQUIRE_THROWS_MSG(m.at({0, 0, 0}), ms::IndexError,
                        "[ms.index_error] index: 3 indices given for a tensor of rank 2 (shape (2, 3))");
  MS_REQUIRE_THROWS_MSG(m.item(), ms::ValueError,
                        "[ms.value_error] item: a tensor with 6 elements (shape (2, 3)) cannot be converted to a scalar");

  Tensor<double> one = Tensor<double>{7.5}.reshape(Shape{1, 1});  // (Tensor<double>{{7.5}} is ambiguous: 1-D or 2-D)
  REQUIRE(one.item() == 7.5);
  Tensor<double> s = AnyTensor::empty(Shape{}, DType::f64);
  s() = 2.25;  // 0-d: no indices
  REQUIRE(s.item() == 2.25);
  REQUIRE(s.at({}) == 2.25);
  // Element access through a view uses the view's strides and offset.
  Tensor<std::int32_t> v = m.slice(1, 2, kNone, -1).t();  // (3, 2): columns reversed, transposed
  REQUIRE(v(0, 1) == 6);
  REQUIRE(v(2, 0) == 1);
  REQUIRE(v.slice(0, 1, 2).slice(1, 0, 1).item() == 2);
  REQUIRE(*m.data() == 1);
  REQUIRE(m.slice(0, 1, 2).data() == m.data() + 3);
}

TEST_CASE("tensor: to_vector on non-contiguous layouts", "[core][tensor]") {
  Tensor<float> b = iota2(3, 4);
  REQUIRE(b.t().to_vector() == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  REQUIRE(b.slice(1, 3, kNone, -1).to_vector() == std::vector<float>{3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8});
  REQUIRE(b.slice(0, 0, 3, 2).slice(1, 1, 4, 2).to_vector() == std::vector<float>{1, 3, 9, 11});
  REQUIRE(b.slice(0, 1, 2).expand(Shape{2, 4}).to_vector() == std::vector<float>{4, 5, 6, 7, 4, 5, 6, 7});
  REQUIRE(b.unsqueeze(1).permute(Shape{2, 1, 0}).to_vector() == b.t().to_vector());
  Tensor<float> cube = AnyTensor::empty(Shape{2, 3, 4}, DType::f32);
  for (i64 i = 0; i < 24; ++i) cube.data()[i] = static_cast<float>(i);
  std::vector<float> p = cube.permute(Shape{1, 2, 0}).to_vector();  // p[j][k][i] = 12i + 4j + k
  std::vector<float> expect;
  for (i64 j = 0; j < 3; ++j)
    for (i64 k = 0; k < 4; ++k)
      for (i64 i = 0; i < 2; ++i) expect.push_back(static_cast<float>(12 * i + 4 * j + k));
  REQUIRE(p == expect);
}

TEST_CASE("tensor: 0-d and size-0 tensors", "[core][tensor]") {
  AnyTensor s = AnyTensor::empty(Shape{}, DType::i64);
  REQUIRE(s.dim() == 0);
  REQUIRE(s.numel() == 1);
  REQUIRE(s.nbytes() == 8);
  REQUIRE(s.is_contiguous());
  REQUIRE(s.strides() == Shape{});
  Tensor<std::int64_t> st = s;
  st() = 9;
  REQUIRE(st.to_vector() == std::vector<std::int64_t>{9});
  REQUIRE(st.reshape(Shape{1, 1}).to_vector() == std::vector<std::int64_t>{9});
  REQUIRE(st.unsqueeze(0).shape() == Shape({1}));
  REQUIRE(st.expand(Shape{2, 3}).to_vector() == std::vector<std::int64_t>(6, 9));
  REQUIRE(st.clone().item() == 9);

  Tensor<float> z = AnyTensor::empty(Shape{0, 3}, DType::f32);
  REQUIRE(z.numel() == 0);
  REQUIRE(z.nbytes() == 0);
  REQUIRE(z.is_contiguous());
  REQUIRE(z.to_vector().empty());
  REQUIRE(z.reshape(Shape{3, 0}).shape() == Shape({3, 0}));
  REQUIRE(z.reshape(Shape{-1, 3}).shape() == Shape({0, 3}));
  REQUIRE_THROWS_AS(z.reshape(Shape{-1, 0}), ms::ShapeError);  // -1 is ambiguous with 0 elements (NumPy too)
  REQUIRE(z.t().shape() == Shape({3, 0}));
  REQUIRE(z.t().to_vector().empty());
  REQUIRE(z.clone().numel() == 0);
  REQUIRE(z.slice(1, 1, 2).shape() == Shape({0, 1}));
  MS_REQUIRE_THROWS_MSG(z.item(), ms::ValueError,
                        "[ms.value_error] item: a tensor with 0 elements (shape (0, 3)) cannot be converted to a scalar");
  Tensor<float> z1 = AnyTensor::empty(Shape{0}, DType::f32);
  REQUIRE((z1 + 1.0f).shape() == Shape({0}));
  REQUIRE(Tensor<float>(AnyTensor::empty(Shape{4, 0, 2}, DType::f32)).permute(Shape{2, 0, 1}).shape() ==
          Shape({2, 4, 0}));
}

// ---- Shape and SmallVec ----------------------------------------------------------------------------

TEST_CASE("shape: construction, editing, printing, strides", "[core][shape]") {
  Shape s{3, 4};
  REQUIRE(s.rank() == 2);
  REQUIRE(s.size() == 2);
  REQUIRE_FALSE(s.empty());
  REQUIRE(s[0] == 3);
  REQUIRE(s.back() == 4);
  s.push_back(5);
  REQUIRE(s == Shape({3, 4, 5}));
  s.insert(0, 2);
  REQUIRE(s == Shape({2, 3, 4, 5}));
  s.insert(4, 6);
  REQUIRE(s == Shape({2, 3, 4, 5, 6}));
  s.erase(1);
  REQUIRE(s == Shape({2, 4, 5, 6}));
  s.erase(3);
  REQUIRE(s.vec() == std::vector<i64>{2, 4, 5});
  REQUIRE_FALSE(s == Shape({2, 4}));
  REQUIRE(Shape(std::vector<i64>{1, 2}) == Shape({1, 2}));
  REQUIRE(Shape::filled(3, 7) == Shape({7, 7, 7}));
  REQUIRE(Shape{}.empty());
  REQUIRE(Shape{}.rank() == 0);

  REQUIRE(ms::numel(Shape{}) == 1);
  REQUIRE(ms::numel(Shape{3, 0, 2}) == 0);
  REQUIRE(ms::numel(Shape{2, 3, 4}) == 24);
  REQUIRE(ms::contiguous_strides(Shape{2, 3, 4}) == Shape({12, 4, 1}));
  REQUIRE(ms::contiguous_strides(Shape{}) == Shape{});
  REQUIRE(ms::contiguous_strides(Shape{2, 0, 4}) == Shape({4, 4, 1}));

  REQUIRE(ms::shape_str(Shape{3, 4}) == "(3, 4)");
  REQUIRE(ms::shape_str(Shape{5}) == "(5,)");
  REQUIRE(ms::shape_str(Shape{}) == "()");
  REQUIRE(fmt::format("{}", Shape{1, 2, 3}) == "(1, 2, 3)");

  Shape eight = Shape::filled(8, 1);
  MS_REQUIRE_THROWS_MSG(eight.push_back(1), ms::ShapeError, "[ms.shape_error] tensors have at most 8 dimensions, got 9");
  MS_REQUIRE_THROWS_MSG((Shape{1, 1, 1, 1, 1, 1, 1, 1, 1}), ms::ShapeError,
                        "[ms.shape_error] tensors have at most 8 dimensions, got 9");
  REQUIRE_THROWS_AS(eight.insert(0, 1), ms::ShapeError);
  REQUIRE_THROWS_AS(Shape::filled(9, 1), ms::ShapeError);
}

TEST_CASE("shape: NumPy broadcasting and axis normalization", "[core][shape]") {
  REQUIRE(ms::broadcast_shapes(Shape{3, 1}, Shape{1, 4}, "add") == Shape({3, 4}));
  REQUIRE(ms::broadcast_shapes(Shape{}, Shape{2, 3}, "add") == Shape({2, 3}));
  REQUIRE(ms::broadcast_shapes(Shape{5, 1, 3}, Shape{4, 1}, "add") == Shape({5, 4, 3}));
  REQUIRE(ms::broadcast_shapes(Shape{0, 1}, Shape{1, 3}, "add") == Shape({0, 3}));
  REQUIRE(ms::broadcast_shapes(Shape{1}, Shape{0}, "add") == Shape({0}));
  Shape out;
  REQUIRE_FALSE(ms::try_broadcast(Shape{2}, Shape{3}, out));
  REQUIRE(ms::try_broadcast(Shape{2, 1}, Shape{2}, out));
  REQUIRE(out == Shape({2, 2}));
  MS_REQUIRE_THROWS_MSG(ms::broadcast_shapes(Shape{3, 4}, Shape{5}, "mul"), ms::ShapeError,
                        "[ms.shape_error] mul: cannot broadcast (3, 4) with (5,)");

  REQUIRE(ms::normalize_axis(-1, 3, "sum") == 2);
  REQUIRE(ms::normalize_axis(0, 3, "sum") == 0);
  REQUIRE(ms::normalize_axis(-3, 3, "sum") == 0);
  REQUIRE(ms::normalize_axis(0, 0, "sum") == 0);   // a 0-d tensor accepts axis 0 and -1 (NumPy)
  REQUIRE(ms::normalize_axis(-1, 0, "sum") == 0);
  MS_REQUIRE_THROWS_MSG(ms::normalize_axis(3, 3, "sum"), ms::IndexError,
                        "[ms.index_error] sum: axis 3 is out of range for a tensor of rank 3");
  MS_REQUIRE_THROWS_MSG(ms::normalize_axis(-4, 3, "sum"), ms::IndexError,
                        "[ms.index_error] sum: axis -4 is out of range for a tensor of rank 3");
  REQUIRE_THROWS_AS(ms::normalize_axis(1, 0, "sum"), ms::IndexError);

  AnyTensor t = AnyTensor::empty(Shape{2, 5}, DType::f32);
  REQUIRE(t.shape(-1) == 5);
  REQUIRE(t.shape(0) == 2);
  REQUIRE_THROWS_AS(t.shape(2), ms::IndexError);
}

TEST_CASE("smallvec: inline storage, growth to the heap, deep copies", "[core][shape]") {
  ms::SmallVec<int, 2> v;
  REQUIRE(v.empty());
  REQUIRE(v.capacity() == 2);
  v.push_back(1);
  v.push_back(2);
  REQUIRE(v.capacity() == 2);  // still inline
  const int* inline_ptr = v.data();
  v.push_back(3);             // moves to the heap
  REQUIRE(v.capacity() >= 3);
  REQUIRE(v.data() != inline_ptr);
  for (int i = 4; i <= 100; ++i) v.push_back(i);
  REQUIRE(v.size() == 100);
  REQUIRE(v.back() == 100);
  int sum = 0;
  for (int x : v) sum += x;
  REQUIRE(sum == 5050);

  ms::SmallVec<int, 2> c = v;  // deep copy
  REQUIRE(c.size() == 100);
  REQUIRE(c.data() != v.data());
  c[0] = -1;
  REQUIRE(v[0] == 1);
  ms::SmallVec<int, 2> d{7, 8};
  d = v;
  REQUIRE(d.size() == 100);
  REQUIRE(d[99] == 100);
  d = d;  // self-assignment keeps the contents
  REQUIRE(d.size() == 100);
  REQUIRE(d[50] == 51);
  ms::SmallVec<int, 2> e{1, 2, 3, 4, 5};
  e = ms::SmallVec<int, 2>{9};
  REQUIRE(e.size() == 1);
  REQUIRE(e[0] == 9);

  ms::SmallVec<double, 4> r(3, 1.5);
  REQUIRE(r.size() == 3);
  REQUIRE(r[2] == 1.5);
  r.resize(6, 2.5);
  REQUIRE(r.size() == 6);
  REQUIRE(r[5] == 2.5);
  REQUIRE(r[0] == 1.5);
  r.resize(2);
  REQUIRE(r.size() == 2);
  r.clear();
  REQUIRE(r.empty());
  std::vector<int> src{4, 5, 6};
  ms::SmallVec<int, 8> it(src.begin(), src.end());
  REQUIRE(it.size() == 3);
  REQUIRE(it[2] == 6);
  r.reserve(50);
  REQUIRE(r.capacity() >= 50);
}

// ---- Device and dtype ------------------------------------------------------------------------------

TEST_CASE("device: parsing and printing", "[core][device]") {
  using ms::Device;
  REQUIRE(Device::parse("cpu") == Device::cpu());
  REQUIRE(Device::parse("ascend") == Device::ascend(0));
  REQUIRE(Device::parse("ascend:3") == Device::ascend(3));
  REQUIRE(Device::parse("ascend:12").index == 12);
  REQUIRE(Device::parse("ascend:0").type == ms::DeviceType::ascend);
  REQUIRE(Device::cpu().is_cpu());
  REQUIRE_FALSE(Device::ascend().is_cpu());
  REQUIRE(Device::cpu().str() == "cpu");
  REQUIRE(Device::ascend(2).str() == "ascend:2");
  REQUIRE(fmt::format("{}", Device::ascend(1)) == "ascend:1");
  REQUIRE_FALSE(Device::ascend(0) == Device::ascend(1));
  for (const char* bad : {"gpu", "", "ascend:", "ascend:x", "ascend3", "ascend:-1", "ascend:1x", "CPU",
                          "ascend:99999999999"}) {
    INFO(bad);
    REQUIRE_THROWS_AS(Device::parse(bad), ms::ValueError);
  }
  MS_REQUIRE_THROWS_MSG(Device::parse("gpu"), ms::ValueError,
                        "[ms.value_error] bad device string 'gpu' (expected cpu or ascend:N)");
}

TEST_CASE("dtype: names, sizes, parsing, traits", "[core][dtype]") {
  struct Row {
    DType d;
    const char* name;
    std::size_t size;
    bool floating, integral;
  };
  const Row rows[] = {{DType::f32, "float32", 4, true, false}, {DType::f64, "float64", 8, true, false},
                      {DType::i32, "int32", 4, false, true},   {DType::i64, "int64", 8, false, true},
                      {DType::u8, "uint8", 1, false, true},    {DType::b8, "bool", 1, false, false},
                      {DType::f16, "float16", 2, true, false}, {DType::bf16, "bfloat16", 2, true, false}};
  for (const Row& r : rows) {
    INFO(r.name);
    REQUIRE(ms::dtype_name(r.d) == r.name);
    REQUIRE(ms::dtype_size(r.d) == r.size);
    REQUIRE(ms::is_floating(r.d) == r.floating);
    REQUIRE(ms::is_integral(r.d) == r.integral);
    REQUIRE(ms::dtype_from_name(r.name) == r.d);
    REQUIRE(fmt::format("{}", r.d) == r.name);
    REQUIRE(ms::kStorageTypes.contains(r.d));
    // visit_dtype gives the C++ type whose dtype_v is d, with the matching size
    ms::visit_dtype(r.d, [&]<class T>() {
      REQUIRE(ms::dtype_v<T> == r.d);
      REQUIRE(sizeof(T) == r.size);
    });
  }
  REQUIRE(ms::kNumDTypes == 8);
  const std::pair<const char*, DType> aliases[] = {{"f32", DType::f32},  {"float", DType::f32}, {"f64", DType::f64},
                                                   {"double", DType::f64}, {"i32", DType::i32}, {"int", DType::i32},
                                                   {"i64", DType::i64},  {"long", DType::i64}, {"u8", DType::u8},
                                                   {"b8", DType::b8},    {"f16", DType::f16},  {"half", DType::f16},
                                                   {"bf16", DType::bf16}};
  for (auto [name, d] : aliases) REQUIRE(ms::dtype_from_name(name) == d);
  MS_REQUIRE_THROWS_MSG(ms::dtype_from_name("float8"), ms::DTypeError,
                        "[ms.dtype_error] unknown dtype name 'float8' (expected float32, float64, int32, int64, "
                        "uint8, bool, float16, bfloat16)");
  REQUIRE_THROWS_AS(ms::dtype_from_name(""), ms::DTypeError);
  REQUIRE_THROWS_AS(ms::visit_dtype(static_cast<DType>(42), []<class T>() {}), ms::DTypeError);

  static_assert(ms::dtype_v<const float> == DType::f32);
  static_assert(ms::Element<std::int64_t>);
  static_assert(!ms::Element<char>);
  static_assert(!ms::Element<std::int16_t>);
  REQUIRE(ms::kFloatTypes.contains(DType::f64));
  REQUIRE_FALSE(ms::kFloatTypes.contains(DType::f16));
  REQUIRE_FALSE(ms::kNumericTypes.contains(DType::b8));
  REQUIRE(ms::kAllTypes.contains(DType::b8));
  REQUIRE(ms::DTypeSet{}.empty());
  REQUIRE((ms::DTypeSet{DType::u8} | ms::DTypeSet{DType::b8}).bits == ((1u << 4) | (1u << 5)));
}

TEST_CASE("storage: borrowed buffers are viewed without a copy and released through the deleter", "[core][tensor]") {
  std::vector<float> buf{1, 2, 3, 4, 5, 6};
  int released = 0;
  {
    auto st = ms::Storage::borrowed(buf.data(), buf.size() * sizeof(float), ms::Device::cpu(),
                                    [&](void* p) { released += p == buf.data(); });
    Tensor<float> t = AnyTensor::view_of(st, Shape{2, 3}, Shape{3, 1}, 0, DType::f32);
    REQUIRE(t(1, 2) == 6);
    t(0, 0) = 10;  // writes reach the caller's buffer
    REQUIRE(buf[0] == 10);
    buf[5] = 60;
    REQUIRE(t(1, 2) == 60);
    Tensor<float> tv = t.t();
    REQUIRE(tv.shares_storage(t));
    REQUIRE(released == 0);
  }
  REQUIRE(released == 1);
  // A host storage comes from the caching allocator, 64-byte aligned.
  auto h = ms::Storage::host(100);
  REQUIRE(h->allocator == &ms::CachingHostAllocator::instance());
  REQUIRE(reinterpret_cast<std::uintptr_t>(h->data) % 64 == 0);
  REQUIRE(h->nbytes == 100);
  REQUIRE(h->device.is_cpu());
}
