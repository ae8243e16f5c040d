// Tests of the creation ops (ops/factory.hpp): fill (zeros/ones/full), arange, linspace,
// eye, rand, randn, randint against reference values, their errors, and the host-side
// constructors from_vector, from_blob and scalar.

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_util.hpp"

MS_TEST_COVERS("fill", "arange", "linspace", "eye", "rand", "randn", "randint");

using ms::DType;
using ms_test::require_shape;
using ms_test::require_values;
using ms_test::values;  // elements as doubles (half/bfloat16 too)

TEST_CASE("creation ops are registered as zero-input creation ops", "[op]") {
  for (const char* name : {"fill", "arange", "linspace", "eye", "rand", "randn", "randint"}) {
    const auto& op = ms::ops::registry().get(name);
    INFO(name);
    CHECK(op.category == ms::ops::Category::creation);
    CHECK(op.num_inputs == 0);
    CHECK(op.kernel != nullptr);
    CHECK_FALSE(op.differentiable());
    CHECK_FALSE(op.nondiff_reason.empty());
    bool random = std::string(name).rfind("rand", 0) == 0;
    CHECK(op.is_random == random);
  }
  // Cost: output bytes, no flops for fill.
  ms::ops::TensorMeta m{DType::f32, ms::Shape{2, 3}};
  auto c = ms::ops::op_cost(ms::ops::fill_op, {}, std::span(&m, 1), {});
  CHECK(c.bytes == 24);
  CHECK(c.flops == 0);
}

TEMPLATE_TEST_CASE("fill: zeros, ones, full for every storage dtype", "[op]", float, double, std::int32_t,
                   std::int64_t, std::uint8_t, bool, ms::half, ms::bfloat16) {
  using T = TestType;
  auto z = ms::zeros<T>({2, 3});
  require_shape(z, {2, 3});
  CHECK(z.dtype() == ms::dtype_v<T>);
  CHECK(z.is_contiguous());
  CHECK(values(z) == std::vector<double>(6, 0.0));
  CHECK(values(ms::ones<T>({4})) == std::vector<double>(4, 1.0));
  double v = std::is_same_v<T, bool> ? 1.0 : 3.0;
  CHECK(values(ms::full<T>({2, 2}, v)) == std::vector<double>(4, v));
  // 0-d and 0-size.
  require_shape(ms::zeros<T>({}), {});
  CHECK(ms::zeros<T>({}).numel() == 1);
  require_shape(ms::ones<T>({0, 5}), {0, 5});
  CHECK(ms::ones<T>({0, 5}).numel() == 0);
}

TEST_CASE("fill: values beyond 2^53 stay exact, fractional and half values", "[op]") {
  const std::int64_t big = (std::int64_t{1} << 62) + 1;
  CHECK(ms::full<std::int64_t>({2}, big).to_vector() == std::vector<std::int64_t>{big, big});
  CHECK(ms::full<std::int64_t>({1}, std::numeric_limits<std::int64_t>::min()).to_vector()[0] ==
        std::numeric_limits<std::int64_t>::min());
  require_values(ms::full<float>({3}, 2.5), {2.5, 2.5, 2.5});
  require_values(ms::full<ms::half>({1}, ms::half(1.5f)).to<float>(), {1.5});
  require_values(ms::full<double>({1}, -std::numeric_limits<double>::infinity()), {-INFINITY});
  require_values(ms::full<float>({1}, NAN), {NAN});
  // Integer-valued doubles are fine for integer dtypes.
  CHECK(ms::full<std::int32_t>({1}, 7.0).to_vector()[0] == 7);
  CHECK(ms::full<bool>({2}, 0).to_vector() == std::vector<bool>{false, false});
  // The untyped API and the *_like helpers.
  auto a = ms::ops::full(ms::Shape{2}, 4, DType::i32);
  CHECK(a.dtype() == DType::i32);
  CHECK(a.as<std::int32_t>().to_vector() == std::vector<std::int32_t>{4, 4});
  auto x = ms::arange<double>(6).reshape({2, 3});
  auto zl = ms::zeros_like(x), ol = ms::ones_like(x), fl = ms::full_like(x, 9);
  require_shape(zl, {2, 3});
  CHECK(zl.dtype() == DType::f64);
  require_values(zl, {0, 0, 0, 0, 0, 0});
  require_values(ol, {1, 1, 1, 1, 1, 1});
  require_values(fl, {9, 9, 9, 9, 9, 9});
  CHECK(ms::empty<float>({3, 2}).shape() == ms::Shape{3, 2});
}

TEST_CASE("fill: errors name the op, value and dtype", "[op]") {
  MS_REQUIRE_THROWS_MSG(ms::full<std::int32_t>({2}, 2.5), ms::ValueError,
                        "[ms.value_error] fill: value 2.5 is not an integer, as int32 requires");
  MS_REQUIRE_THROWS_MSG(ms::full<std::uint8_t>({2}, 300), ms::ValueError,
                        "[ms.value_error] fill: value 300 is out of range for uint8");
  MS_REQUIRE_THROWS_MSG(ms::full<std::uint8_t>({2}, -1), ms::ValueError,
                        "[ms.value_error] fill: value -1 is out of range for uint8");
  MS_REQUIRE_THROWS_MSG(ms::full<std::int64_t>({1}, 1e19), ms::ValueError,
                        "[ms.value_error] fill: value 1e+19 is out of range for int64");
  MS_REQUIRE_THROWS_MSG(ms::full<std::int32_t>({1}, NAN), ms::ValueError,
                        "[ms.value_error] fill: value nan is not an integer, as int32 requires");
  MS_REQUIRE_THROWS_MSG(ms::full<ms::half>({1}, 1e6), ms::ValueError,
                        "[ms.value_error] fill: value 1000000 overflows float16");
  MS_REQUIRE_THROWS_MSG(ms::full<float>({1}, 1e300), ms::ValueError,
                        "[ms.value_error] fill: value 1e+300 overflows float32");
  MS_REQUIRE_THROWS_MSG(ms::zeros<float>({2, -1}), ms::ShapeError,
                        "[ms.shape_error] fill: negative dimension -1 in shape [2, -1]");
  MS_REQUIRE_THROWS_MSG(ms::zeros<double>({std::int64_t{1} << 40, std::int64_t{1} << 30}), ms::ShapeError,
                        "[ms.shape_error] fill: shape [1099511627776, 1073741824] has too many elements");
}

TEST_CASE("arange: integer ranges follow NumPy's length rule", "[op]") {
  CHECK(ms::arange<std::int32_t>(5).to_vector() == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(ms::arange<std::int64_t>(2, 11, 3).to_vector() == std::vector<std::int64_t>{2, 5, 8});
  CHECK(ms::arange<std::int64_t>(2, 12, 3).to_vector() == std::vector<std::int64_t>{2, 5, 8, 11});
  CHECK(ms::arange<std::int32_t>(10, 0, -3).to_vector() == std::vector<std::int32_t>{10, 7, 4, 1});
  CHECK(ms::arange<std::int32_t>(0, 10, -1).numel() == 0);
  CHECK(ms::arange<std::int32_t>(3, 3).numel() == 0);
  CHECK(ms::arange<std::uint8_t>(250, 256).to_vector() == std::vector<std::uint8_t>{250, 251, 252, 253, 254, 255});
  // No overflow at the ends of int64.
  const auto mx = std::numeric_limits<std::int64_t>::max(), mn = std::numeric_limits<std::int64_t>::min();
  CHECK(ms::arange<std::int64_t>(mx - 2, mx).to_vector() == std::vector<std::int64_t>{mx - 2, mx - 1});
  CHECK(ms::arange<std::int64_t>(mn, mn + 4, 2).to_vector() == std::vector<std::int64_t>{mn, mn + 2});
  CHECK(ms::arange<std::int64_t>(mx, mn, mn).to_vector() == std::vector<std::int64_t>{mx, -1});
  // Integer-valued floating arguments are accepted for integer dtypes.
  CHECK(ms::arange<std::int32_t>(1.0, 4.0).to_vector() == std::vector<std::int32_t>{1, 2, 3});
  require_shape(ms::arange<std::int32_t>(4), {4});
}

TEST_CASE("arange: floating ranges", "[op]") {
  require_values(ms::arange<float>(1, 4), {1, 2, 3});
  require_values(ms::arange<double>(0, 1, 0.25), {0, 0.25, 0.5, 0.75});
  require_values(ms::arange<double>(1, 0, -0.5), {1, 0.5});
  // NumPy's rule ceil((stop - start) / step): (2.2 - 1) / 0.3 = 4.000000000000001 gives 5 points.
  auto t = ms::arange<double>(1, 2.2, 0.3);
  REQUIRE(t.numel() == 5);
  auto v = t.to_vector();
  for (int i = 0; i < 5; ++i) CHECK(v[static_cast<std::size_t>(i)] == 1 + i * 0.3);  // start + i * step in double
  // float32 values are the double values rounded once.
  auto f = ms::arange<float>(0, 1, 0.1).to_vector();
  REQUIRE(f.size() == 10);
  for (int i = 0; i < 10; ++i) CHECK(f[static_cast<std::size_t>(i)] == static_cast<float>(i * 0.1));
  require_values(ms::arange<ms::half>(0, 3).to<float>(), {0, 1, 2});
  require_values(ms::arange<ms::bfloat16>(0.5, 2).to<float>(), {0.5, 1.5});
  CHECK(ms::arange<float>(5, 1).numel() == 0);
}

TEST_CASE("arange: errors", "[op]") {
  MS_REQUIRE_THROWS_MSG(ms::arange<float>(0, 5, 0), ms::ValueError, "[ms.value_error] arange: step must be nonzero");
  MS_REQUIRE_THROWS_MSG(ms::arange<std::int32_t>(0, 5, 0), ms::ValueError,
                        "[ms.value_error] arange: step must be nonzero");
  MS_REQUIRE_THROWS_MSG(ms::arange<std::int32_t>(0, 2.5), ms::ValueError,
                        "[ms.value_error] arange: stop 2.5 is not an integer, as an integer dtype requires");
  MS_REQUIRE_THROWS_MSG(ms::arange<std::uint8_t>(0, 300), ms::ValueError,
                        "[ms.value_error] arange: last value 299 is out of range for uint8");
  MS_REQUIRE_THROWS_MSG(ms::arange<std::uint8_t>(-1, 3), ms::ValueError,
                        "[ms.value_error] arange: start -1 is out of range for uint8");
  MS_REQUIRE_THROWS_MSG(ms::arange<double>(0, INFINITY), ms::ValueError,
                        "[ms.value_error] arange: start, stop and step must be finite, got 0, inf, 1");
  MS_REQUIRE_THROWS_MSG(ms::arange<double>(0, 1e300, 1e-300), ms::ValueError,
                        "[ms.value_error] arange: [0, 1e+300) with step 1e-300 has too many elements");
  MS_REQUIRE_THROWS_MSG(ms::ops::arange(0, 3, 1, DType::b8), ms::DTypeError,
                        "[ms.dtype_error] arange: unsupported dtype bool (supported: float32, float64, int32, int64, "
                        "uint8, float16, bfloat16)");
}

TEST_CASE("linspace: endpoints included, NumPy's formula", "[op]") {
  require_values(ms::linspace<double>(0, 1, 5), {0, 0.25, 0.5, 0.75, 1});
  require_values(ms::linspace<float>(-1, 1, 3), {-1, 0, 1});
  require_values(ms::linspace<double>(2, -2, 2), {2, -2});
  require_values(ms::linspace<double>(3, 7, 1), {3});
  CHECK(ms::linspace<double>(3, 7, 0).numel() == 0);
  require_shape(ms::linspace<float>(0, 1, 7), {7});
  // Interior points are start + i * step in double; the last is exactly stop.
  auto v = ms::linspace<double>(0.1, 0.7, 7).to_vector();
  double step = (0.7 - 0.1) / 6;
  for (int i = 0; i < 6; ++i) CHECK(v[static_cast<std::size_t>(i)] == 0.1 + i * step);
  CHECK(v[6] == 0.7);
  require_values(ms::linspace<ms::half>(0, 1, 3).to<float>(), {0, 0.5, 1});
  require_values(ms::linspace<ms::bfloat16>(0, 2, 3).to<float>(), {0, 1, 2});

  MS_REQUIRE_THROWS_MSG(ms::linspace<float>(0, 1, -1), ms::ValueError,
                        "[ms.value_error] linspace: num must be non-negative, got -1");
  MS_REQUIRE_THROWS_MSG(ms::linspace<std::int32_t>(0, 1, 3), ms::DTypeError,
                        "[ms.dtype_error] linspace: unsupported dtype int32 (supported: float32, float64, float16, "
                        "bfloat16)");
}

TEST_CASE("eye: square, rectangular, every storage dtype", "[op]") {
  require_values(ms::eye<float>(3), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  require_shape(ms::eye<float>(3), {3, 3});
  auto r = ms::eye<std::int32_t>(2, 3);
  require_shape(r, {2, 3});
  CHECK(r.to_vector() == std::vector<std::int32_t>{1, 0, 0, 0, 1, 0});
  CHECK(ms::eye<std::int64_t>(3, 2).to_vector() == std::vector<std::int64_t>{1, 0, 0, 1, 0, 0});
  CHECK(ms::eye<bool>(2).to_vector() == std::vector<bool>{true, false, false, true});
  CHECK(ms::eye<std::uint8_t>(2).to_vector() == std::vector<std::uint8_t>{1, 0, 0, 1});
  require_values(ms::eye<ms::half>(2).to<float>(), {1, 0, 0, 1});
  require_values(ms::eye<ms::bfloat16>(2).to<float>(), {1, 0, 0, 1});
  require_shape(ms::eye<double>(0), {0, 0});
  require_shape(ms::eye<double>(2, 0), {2, 0});
  MS_REQUIRE_THROWS_MSG(ms::eye<float>(-1), ms::ShapeError,
                        "[ms.shape_error] eye: n and m must be non-negative, got n=-1, m=-1");
  MS_REQUIRE_THROWS_MSG(ms::eye<float>(2, -3), ms::ShapeError,
                        "[ms.shape_error] eye: n and m must be non-negative, got n=2, m=-3");
}

TEST_CASE("rand/randn/randint: pinned values after manual_seed(42)", "[op][random]") {
  // The kernels draw in row-major order: rand<float> uses 24 bits per value, rand<double> 53.
  ms::manual_seed(42);
  auto a = ms::rand<float>({2, 2});
  require_shape(a, {2, 2});
  CHECK(a.to_vector() == std::vector<float>{0.0838629603f, 0.378980219f, 0.680043399f, 0.924692929f});
  ms::manual_seed(42);
  CHECK(ms::rand<double>({2}).to_vector() == std::vector<double>{0.083862971059882163, 0.37898025066266861});
  ms::manual_seed(42);
  require_values(ms::randn<double>({4}), {-0.30326306467873798, 0.28846173882942383, 1.3438117634372806, -0.6879751798977497},
                 1e-14, 0);
  ms::manual_seed(42);
  require_values(ms::randn<float>({2}), {-0.30326306467873798, 0.28846173882942383}, 1e-7, 0);
  ms::manual_seed(42);
  CHECK(ms::randint(0, 10, {6}).to_vector() == std::vector<std::int64_t>{2, 2, 9, 3, 6, 4});
  ms::manual_seed(42);
  CHECK(ms::randint<std::int32_t>(0, 10, {3}).to_vector() == std::vector<std::int32_t>{2, 2, 9});
  ms::manual_seed(42);
  require_values(ms::randint<double>(0, 10, {3}), {2, 2, 9});
  // The default dtypes: float for rand/randn, int64 for randint.
  CHECK(ms::rand({2}).dtype() == DType::f32);
  CHECK(ms::randn({2}).dtype() == DType::f32);
  CHECK(ms::randint(0, 2, {2}).dtype() == DType::i64);
}

TEST_CASE("random ops draw when the kernel runs, a seed attribute pins them", "[op][random]") {
  using namespace ms::ops;
  Attrs attrs{{"shape", IntList{8}}, {"dtype", DType::f32}};
  ms::manual_seed(123);
  auto a = ms::Tensor<float>(call1(rand_op, {}, attrs)).to_vector();
  auto b = ms::Tensor<float>(call1(rand_op, {}, attrs)).to_vector();
  CHECK(a != b);  // same op, same attributes: new numbers
  // Running the kernel directly, as a graph replay does, also draws from the default generator.
  ms::manual_seed(123);
  ms::AnyTensor outs[1] = {ms::AnyTensor::empty(ms::Shape{8}, DType::f32)};
  rand_op.kernel(KernelArgs{rand_op, {}, outs, attrs});
  CHECK(ms::Tensor<float>(outs[0]).to_vector() == a);
  rand_op.kernel(KernelArgs{rand_op, {}, outs, attrs});
  CHECK(ms::Tensor<float>(outs[0]).to_vector() == b);
  // With a seed the op owns its generator: the same numbers every run, the default one untouched.
  ms::manual_seed(5);
  auto before = ms::default_generator()->state();
  auto s1 = ms::Tensor<double>(randn({5}, DType::f64, 42)).to_vector();
  auto s2 = ms::Tensor<double>(randn({5}, DType::f64, 42)).to_vector();
  CHECK(s1 == s2);
  CHECK(s1[0] == Approx(-0.30326306467873798).epsilon(1e-14));
  CHECK(ms::default_generator()->state() == before);
  CHECK(ms::Tensor<std::int64_t>(randint(0, 10, {3}, DType::i64, 42)).to_vector() == std::vector<std::int64_t>{2, 2, 9});
  CHECK(ms::Tensor<float>(rand({1}, DType::f32, 42)).to_vector()[0] == 0.0838629603f);
}

TEST_CASE("rand/randn/randint: statistics and ranges", "[op][random]") {
  ms::manual_seed(2024);
  auto u = ms::rand<double>({100000}).to_vector();
  double mean = 0, var = 0;
  for (double x : u) {
    REQUIRE(x >= 0.0);
    REQUIRE(x < 1.0);
    mean += x;
  }
  mean /= static_cast<double>(u.size());
  for (double x : u) var += (x - mean) * (x - mean);
  var /= static_cast<double>(u.size() - 1);
  CHECK(mean == Approx(0.5).margin(0.005));
  CHECK(var == Approx(1.0 / 12).margin(0.002));

  auto n = ms::randn<float>({100000}).to_vector();
  mean = var = 0;
  for (float x : n) mean += x;
  mean /= static_cast<double>(n.size());
  for (float x : n) var += (x - mean) * (x - mean);
  var /= static_cast<double>(n.size() - 1);
  CHECK(mean == Approx(0).margin(0.015));
  CHECK(var == Approx(1).margin(0.02));

  for (float x : ms::rand<ms::half>({20000}).to<float>().to_vector()) REQUIRE((x >= 0.0f && x < 1.0f));
  for (float x : ms::rand<ms::bfloat16>({20000}).to<float>().to_vector()) REQUIRE((x >= 0.0f && x < 1.0f));
  require_shape(ms::randn<ms::half>({2, 3}), {2, 3});

  auto k = ms::randint<std::uint8_t>(250, 256, {6000}).to_vector();
  std::vector<int> counts(6, 0);
  for (auto x : k) {
    REQUIRE(x >= 250);
    ++counts[static_cast<std::size_t>(x - 250)];
  }
  for (int c : counts) CHECK(c == Approx(1000).margin(150));
  CHECK(ms::rand<float>({0}).numel() == 0);
  require_shape(ms::randn<double>({}), {});
}

TEST_CASE("random ops: errors", "[op][random]") {
  MS_REQUIRE_THROWS_MSG(ms::rand<std::int32_t>({2}), ms::DTypeError,
                        "[ms.dtype_error] rand: unsupported dtype int32 (supported: float32, float64, float16, "
                        "bfloat16)");
  MS_REQUIRE_THROWS_MSG(ms::randn<bool>({2}), ms::DTypeError,
                        "[ms.dtype_error] randn: unsupported dtype bool (supported: float32, float64, float16, "
                        "bfloat16)");
  MS_REQUIRE_THROWS_MSG(ms::randint(5, 5, {2}), ms::ValueError,
                        "[ms.value_error] randint: low (5) must be less than high (5)");
  MS_REQUIRE_THROWS_MSG(ms::randint<std::uint8_t>(0, 300, {2}), ms::ValueError,
                        "[ms.value_error] randint: largest value 299 is out of range for uint8");
  MS_REQUIRE_THROWS_MSG(ms::randint<float>(0, (std::int64_t{1} << 24) + 2, {2}), ms::ValueError,
                        "[ms.value_error] randint: [0, 16777218) is not exactly representable in float32");
  MS_REQUIRE_THROWS_MSG(ms::randint<ms::half>(0, 2, {2}), ms::DTypeError,
                        "[ms.dtype_error] randint: unsupported dtype float16 (supported: float32, float64, int32, "
                        "int64, uint8)");
  MS_REQUIRE_THROWS_MSG(ms::rand<float>({-2}), ms::ShapeError,
                        "[ms.shape_error] rand: negative dimension -2 in shape [-2]");
}

TEST_CASE("scalar: a 0-d tensor", "[op]") {
  auto s = ms::scalar<float>(2.5);
  require_shape(s, {});
  CHECK(s.item() == 2.5f);
  CHECK(ms::scalar<std::int64_t>(std::numeric_limits<std::int64_t>::max()).item() ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(ms::scalar<bool>(true).item());
  CHECK(static_cast<float>(ms::scalar<ms::half>(0.5).item()) == 0.5f);
  MS_REQUIRE_THROWS_MSG(ms::scalar<std::int32_t>(0.5), ms::ValueError,
                        "[ms.value_error] fill: value 0.5 is not an integer, as int32 requires");
}

TEST_CASE("from_vector: copies values into a new tensor", "[op]") {
  std::vector<float> v{1, 2, 3, 4, 5, 6};
  auto t = ms::from_vector(v, {2, 3});
  require_shape(t, {2, 3});
  require_values(t, {1, 2, 3, 4, 5, 6});
  v[0] = 100;  // a copy: the tensor does not see later changes
  CHECK(t(0, 0) == 1.0f);
  auto b = ms::from_vector<bool>({true, false, true});
  require_shape(b, {3});
  CHECK(b.to_vector() == std::vector<bool>{true, false, true});
  auto s = ms::from_vector<std::int64_t>({7}, {});
  require_shape(s, {});
  CHECK(s.item() == 7);
  require_shape(ms::from_vector<double>({}, {0, 4}), {0, 4});
  MS_REQUIRE_THROWS_MSG(ms::from_vector<float>({1, 2, 3, 4, 5}, {2, 3}), ms::ShapeError,
                        "[ms.shape_error] from_vector: 5 values cannot fill shape (2, 3) (6 elements)");
}

TEST_CASE("from_blob: zero-copy views of a user buffer", "[op]") {
  float buf[6] = {0, 1, 2, 3, 4, 5};
  auto t = ms::from_blob(buf, {2, 3});
  require_shape(t, {2, 3});
  CHECK(t.is_contiguous());
  CHECK(t.raw_data() == buf);
  t(1, 2) = 50;
  CHECK(buf[5] == 50);  // writes through the tensor reach the buffer
  buf[0] = -1;
  CHECK(t(0, 0) == -1);  // and the other way round
  // Custom strides: the first two columns, column-major view.
  auto c = ms::from_blob(buf, {2, 2}, {1, 3});
  CHECK_FALSE(c.is_contiguous());
  require_values(c, {-1, 3, 1, 4});
  CHECK(t.storage()->nbytes == 24);
  CHECK(c.storage()->nbytes == 20);  // elements 0..4
  // The deleter runs once, after the last view is gone.
  int calls = 0;
  void* seen = nullptr;
  {
    auto owner = ms::from_blob(buf, {6}, [&](void* p) { ++calls; seen = p; });
    auto view = owner.slice(0, 1, 4);
    owner = ms::Tensor<float>();
    CHECK(calls == 0);
    require_values(view, {1, 2, 3});
  }
  CHECK(calls == 1);
  CHECK(seen == buf);
  MS_REQUIRE_THROWS_MSG(ms::from_blob(buf, {2, 3}, {1}), ms::ShapeError,
                        "[ms.shape_error] from_blob: strides (1,) do not match shape (2, 3)");
  MS_REQUIRE_THROWS_MSG(ms::from_blob(buf, {2, 3}, {-3, 1}), ms::ValueError,
                        "[ms.value_error] from_blob: negative stride in (-3, 1) (shape (2, 3))");
  MS_REQUIRE_THROWS_MSG(ms::from_blob(static_cast<float*>(nullptr), {2}), ms::ValueError,
                        "[ms.value_error] from_blob: data is null for shape (2,)");
  CHECK(ms::from_blob(static_cast<float*>(nullptr), {0}).numel() == 0);
}
