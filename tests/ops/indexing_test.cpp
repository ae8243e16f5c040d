// tile, cumsum, topk, triu/tril, remainder/fmod and pad (ops/indexing.hpp, ops/pad.hpp,
// ops/binary.hpp) against hand-computed NumPy/PyTorch/ONNX references for several shapes,
// dims, options and dtypes; their errors; their gradients against central differences;
// and a captured run that equals the eager one.

#include "../test_util.hpp"

namespace indexing_test {

using ms::AnyTensor;
using ms::Tensor;
using ms_test::iota;
using ms_test::require_values;
using i64 = std::int64_t;
namespace ops = ms::ops;

/// Autodiff gradient of sum(fn(x) * w) against central differences, element by element
/// (float64): |autodiff - numeric| <= tol * (1 + |numeric|), w uniform in [-1, 1).
void gradcheck(const std::function<AnyTensor(const AnyTensor&)>& fn, Tensor<double> x, double tol = 1e-6) {
  ms_test::check_gradients(fn, x, {.rtol = tol, .atol = tol, .seed = 7, .lo = -1, .hi = 1});
}



MS_TEST_COVERS("tile", "cumsum", "topk", "triu", "tril", "remainder", "fmod", "pad", "pad_grad");

TEST_CASE("tile repeats the whole tensor like numpy.tile", "[op][indexing]") {
  Tensor<float> x{{1, 2, 3}, {4, 5, 6}};
  auto t = ms::tile(x, {2, 2});
  ms_test::require_shape(t, {4, 6});
  require_values(t, {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  // reps shorter than the rank: padded with 1s in front (np.tile(x, 2) -> (2, 6))
  require_values(ms::tile(x, {2}), {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  // reps longer than the rank: x gains a leading dim of size 1 (np.tile(x, (2, 1, 1)) -> (2, 2, 3))
  auto t3 = ms::tile(x, {2, 1, 1});
  ms_test::require_shape(t3, {2, 2, 3});
  require_values(t3, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  // a transposed (strided) input, int64, and a zero count
  Tensor<i64> xi = iota<i64>({2, 3});
  require_values(ms::tile(Tensor<i64>(ops::transpose(xi, 0, 1)), {1, 2}), {0, 3, 0, 3, 1, 4, 1, 4, 2, 5, 2, 5});
  ms_test::require_shape(ms::tile(xi, {0, 3}), {0, 9});
  // bool and a 0-d input
  require_values(ms::tile(Tensor<bool>{true, false}, {3}), {1, 0, 1, 0, 1, 0});
  require_values(ms::tile(Tensor<double>(ops::scalar_tensor(2.5, ms::DType::f64)), {3}), {2.5, 2.5, 2.5});
  // the runtime-typed form gives the same
  CHECK(ms_test::same_bits(ms::tile(AnyTensor(x), {2, 2}), t));
  MS_REQUIRE_THROWS_MSG(ms::tile(x, {2, -1}), ms::ValueError,
                        "[ms.value_error] tile: reps [2, -1] hold a negative count (input (2, 3) float32)");
}

TEST_CASE("cumsum: inclusive, exclusive, reverse, along each dim", "[op][indexing]") {
  Tensor<double> x{{1, 2, 3}, {4, 5, 6}};
  require_values(ms::cumsum(x, 1), {1, 3, 6, 4, 9, 15});
  require_values(ms::cumsum(x, 0), {1, 2, 3, 5, 7, 9});
  require_values(ms::cumsum(x, -1, true), {0, 1, 3, 0, 4, 9});
  require_values(ms::cumsum(x, 1, false, true), {6, 5, 3, 15, 11, 6});
  require_values(ms::cumsum(x, 1, true, true), {5, 3, 0, 11, 6, 0});
  require_values(ms::cumsum(x, 0, true, true), {4, 5, 6, 0, 0, 0});
  // a 3-d input along the middle dim, on a strided view, in int32
  Tensor<std::int32_t> y = iota<std::int32_t>({2, 2, 2});  // [[[0,1],[2,3]],[[4,5],[6,7]]]
  require_values(ms::cumsum(y, 1), {0, 1, 2, 4, 4, 5, 10, 12});
  require_values(ms::cumsum(Tensor<std::int32_t>(ops::transpose(y, 0, 2)), 0), {0, 4, 2, 6, 1, 9, 5, 13});
  require_values(ms::cumsum(Tensor<std::uint8_t>{200, 100, 1}, 0), {200, 44, 45});  // uint8 wraps like NumPy
  CHECK(ms_test::same_bits(ms::cumsum(AnyTensor(x), 1, true), ms::cumsum(x, 1, true)));
  MS_REQUIRE_THROWS_MSG(ms::cumsum(x, 2), ms::IndexError,
                        "[ms.index_error] cumsum: axis 2 is out of range for a tensor of rank 2");
  MS_REQUIRE_THROWS_MSG(ms::cumsum(Tensor<bool>{true}, 0), ms::DTypeError,
                        "[ms.dtype_error] cumsum: unsupported dtype bool (supported: float32, float64, int32, int64, uint8)");
}

TEST_CASE("topk: values and indices, ties to the lower index", "[op][indexing]") {
  Tensor<float> x{{3, 1, 3, 2}, {0, 5, 5, 1}};
  auto [v, i] = ms::topk(x, 2);
  require_values(v, {3, 3, 5, 5});
  require_values(i, {0, 2, 1, 2});
  auto [vs, is] = ms::topk(x, 3, 1, false);  // smallest
  require_values(vs, {1, 2, 3, 0, 1, 5});
  require_values(is, {1, 3, 0, 0, 3, 1});
  auto [v0, i0] = ms::topk(x, 1, 0);  // along dim 0
  require_values(v0, {3, 5, 5, 2});
  require_values(i0, {0, 1, 1, 0});
  // sorted = false: the same elements in index order
  auto [vu, iu] = ms::topk(Tensor<double>{1, 9, 4, 7}, 3, 0, true, false);
  require_values(vu, {9, 4, 7});
  require_values(iu, {1, 2, 3});
  // NaN counts as the largest value; int64 input; k = 0 and k = n
  auto [vn, in] = ms::topk(Tensor<double>{1, ms_test::kNaN, 3}, 2);
  require_values(vn, {ms_test::kNaN, 3});
  require_values(in, {1, 2});
  auto [vi, ii] = ms::topk(Tensor<i64>{{5, -2, 7}}, 3);
  require_values(vi, {7, 5, -2});
  require_values(ii, {2, 0, 1});
  ms_test::require_shape(ms::topk(x, 0).first, {2, 0});
  // the runtime-typed form
  auto [va, ia] = ms::topk(AnyTensor(x), 2);
  CHECK(ms_test::same_bits(va, v));
  CHECK(ia.dtype() == ms::DType::i64);
  MS_REQUIRE_THROWS_MSG(ms::topk(x, 5), ms::ValueError,
                        "[ms.value_error] topk: k=5 is out of range for axis 1 of size 4 (input (2, 4) float32)");
  MS_REQUIRE_THROWS_MSG(ms::topk(Tensor<float>(ops::scalar_tensor(1.0, ms::DType::f32)), 1), ms::ShapeError,
                        "[ms.shape_error] topk: input must have at least 1 dim, got () float32");
}

TEST_CASE("triu and tril keep a triangle of the last two dims, batched", "[op][indexing]") {
  Tensor<float> x = iota<float>({3, 4}, 1);  // 1..12
  require_values(ms::triu(x), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12});
  require_values(ms::triu(x, 1), {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12});
  require_values(ms::triu(x, -1), {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12});
  require_values(ms::tril(x), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0});
  require_values(ms::tril(x, 2), {1, 2, 3, 0, 5, 6, 7, 8, 9, 10, 11, 12});
  require_values(ms::tril(x, -5), std::vector<double>(12, 0.0));
  // a batch of 2 (3, 2) matrices, int64, transposed view input
  Tensor<i64> b = iota<i64>({2, 2, 3});  // transposed to (2, 3, 2)
  require_values(ms::tril(Tensor<i64>(ops::transpose(b, 1, 2))), {0, 0, 1, 4, 2, 5, 6, 0, 7, 10, 8, 11});
  require_values(ms::triu(Tensor<bool>{{true, true}, {true, true}}), {1, 1, 0, 1});
  CHECK(ms_test::same_bits(ms::triu(AnyTensor(x), 1), ms::triu(x, 1)));
  MS_REQUIRE_THROWS_MSG(ms::triu(Tensor<float>{1, 2}), ms::ShapeError,
                        "[ms.shape_error] triu: input must have at least 2 dims (a batch of matrices), got (2,) float32");
}

TEST_CASE("remainder takes the divisor's sign, fmod the dividend's", "[op][indexing]") {
  Tensor<double> a{-7, 7, -7, 7, 5.5, -0.0, 6};
  Tensor<double> b{3, -3, -3, 3, 2, 3, 3};
  require_values(ms::remainder(a, b), {2, -2, -1, 1, 1.5, 0, 0});  // Python's %
  require_values(ms::fmod(a, b), {-1, 1, -1, 1, 1.5, 0, 0});       // C's fmod
  // NumPy: a zero remainder takes the divisor's sign
  CHECK(std::signbit(Tensor<double>(ms::remainder(Tensor<double>{6}, Tensor<double>{-3})).item()));
  require_values(ms::remainder(Tensor<float>{1, 2}, Tensor<float>{0, 0}), {ms_test::kNaN, ms_test::kNaN});
  // integers, with broadcasting and a scalar operand; division by zero gives 0 (NumPy)
  Tensor<std::int32_t> ai{{-7, 7, 0}, {9, -9, 4}};
  Tensor<std::int32_t> bi{3, -3, 0};
  require_values(ms::remainder(ai, bi), {2, -2, 0, 0, 0, 0});
  require_values(ms::fmod(ai, bi), {-1, 1, 0, 0, 0, 0});
  require_values(ms::remainder(Tensor<i64>{-5, 5, std::numeric_limits<i64>::min()}, i64{-1}), {0, 0, 0});
  require_values(ms::remainder(Tensor<i64>{-5, 5, 13}, 4), {3, 1, 1});
  require_values(ms::fmod(Tensor<std::uint8_t>{250, 7}, Tensor<std::uint8_t>{7, 0}), {5, 0});
  // long rows go through the batch kernels (and their tails) like short ones
  Tensor<float> la = ms_test::random_floats({37}, 1, -10, 10), lb = ms_test::random_floats({37}, 2, 0.5f, 4);
  auto lr = Tensor<float>(ms::remainder(la, lb)).to_vector(), lf = Tensor<float>(ms::fmod(la, lb)).to_vector();
  for (std::size_t k = 0; k < lr.size(); ++k) {
    const float x = la.to_vector()[k], y = lb.to_vector()[k];
    CHECK(lf[k] == std::fmod(x, y));
    float r = std::fmod(x, y);
    if (r != 0 && (r < 0) != (y < 0)) r += y;
    CHECK(lr[k] == r);
  }
  CHECK(ms_test::same_bits(ms::remainder(AnyTensor(a), AnyTensor(b)), ms::remainder(a, b)));
  MS_REQUIRE_THROWS_MSG(ms::ops::fmod(ai, AnyTensor(b)), ms::DTypeError,
                        "[ms.dtype_error] fmod: dtype mismatch int32 vs float64 (shapes (2, 3) and (7,)); convert one "
                        "side with ms::cast");
}

TEST_CASE("pad: constant, reflect and replicate, in PyTorch's and per-dim order", "[op][indexing]") {
  Tensor<float> x{{1, 2, 3}, {4, 5, 6}};
  // F.pad(x, (1, 2)): the last dim only
  require_values(ms::pad(x, {1, 2}), {0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0});
  require_values(ms::pad(x, {1, 2}, "reflect"), {2, 1, 2, 3, 2, 1, 5, 4, 5, 6, 5, 4});
  require_values(ms::pad(x, {1, 2}, "replicate"), {1, 1, 2, 3, 3, 3, 4, 4, 5, 6, 6, 6});
  // F.pad(x, (0, 1, 1, 0), value=9): last dim (0, 1), first dim (1, 0)
  auto c = ms::pad(x, {0, 1, 1, 0}, "constant", 9);
  ms_test::require_shape(c, {3, 4});
  require_values(c, {9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6, 9});
  require_values(ms::pad(x, {1, 1, 1, 1}, "reflect"), {5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2});
  // negative pads crop; the per-dim form (ONNX order split in halves) on int64
  require_values(ms::pad(x, {-1, 1}), {2, 3, 0, 5, 6, 0});
  require_values(ms::pad_dims(iota<i64>({2, 2}), {1, 0}, {0, 1}, "replicate"), {0, 1, 1, 0, 1, 1, 2, 3, 3});
  // a 3-d strided input, padded on its first dim
  Tensor<double> y = iota<double>({2, 1, 2});
  require_values(ms::pad_dims(Tensor<double>(ops::transpose(y, 0, 2)), {1, 0, 0}, {0, 0, 0}, "reflect"),
                 {1, 3, 0, 2, 1, 3});
  CHECK(ms_test::same_bits(ms::pad(AnyTensor(x), {1, 1}, "reflect"), ms::pad(x, {1, 1}, "reflect")));
  MS_REQUIRE_THROWS_MSG(ms::pad(x, {3, 0}, "reflect"), ms::ValueError,
                        "[ms.value_error] pad: reflect pads 3 and 0 of dim 1 must be less than its size 3 (input (2, 3) float32)");
  MS_REQUIRE_THROWS_MSG(ms::pad(x, {1, 1}, "circular"), ms::ValueError,
                        "[ms.value_error] pad: mode \"circular\" is not one of \"constant\", \"reflect\", \"replicate\"");
  MS_REQUIRE_THROWS_MSG(ms::pad(x, {1, 1, 1}), ms::ValueError,
                        "[ms.value_error] pad: pads [1, 1, 1] must hold (before, after) pairs for at most the 2 dims of "
                        "the input (2, 3) float32");
  MS_REQUIRE_THROWS_MSG(ms::pad(x, {-2, -2}), ms::ShapeError,
                        "[ms.shape_error] pad: pads -2 and -2 leave dim 1 of the input (2, 3) with size -1");
  MS_REQUIRE_THROWS_MSG(ms::pad(iota<i64>({2}), {1, 0}, "constant", 0.5), ms::ValueError,
                        "[ms.value_error] pad: scalar 0.5 is not representable as int64 (convert the tensor with ms::cast)");
}

TEST_CASE("gradcheck: tile, cumsum, topk, triu, tril, remainder, fmod, pad", "[op][grad][indexing]") {
  Tensor<double> x{{0.3, -0.7, 1.1}, {-1.4, 0.9, 0.45}};
  gradcheck([](const AnyTensor& v) { return ops::tile(v, {2, 3}); }, x);
  gradcheck([](const AnyTensor& v) { return ops::tile(v, {2, 1, 2}); }, x);
  gradcheck([](const AnyTensor& v) { return ops::tile(v, {3}); }, x);
  for (bool excl : {false, true})
    for (bool rev : {false, true}) {
      INFO("exclusive " << excl << ", reverse " << rev);
      gradcheck([&](const AnyTensor& v) { return ops::cumsum(v, 1, excl, rev); }, x);
      gradcheck([&](const AnyTensor& v) { return ops::cumsum(v, 0, excl, rev); }, x);
    }
  gradcheck([](const AnyTensor& v) { return ops::topk(v, 2, 1)[0]; }, x);
  gradcheck([](const AnyTensor& v) { return ops::topk(v, 1, 0, false)[0]; }, x);
  gradcheck([](const AnyTensor& v) { return ops::triu(v, 1); }, x);
  gradcheck([](const AnyTensor& v) { return ops::tril(ops::reshape(v, {1, 3, 2}), 0); }, x);
  Tensor<double> b{0.4, -0.33, 0.25};  // broadcast over rows; no quotient near an integer
  gradcheck([&](const AnyTensor& v) { return ops::remainder(v, b); }, x);
  gradcheck([&](const AnyTensor& v) { return ops::fmod(v, b); }, x);
  gradcheck([&](const AnyTensor& v) { return ops::remainder(x, v); }, b);
  gradcheck([&](const AnyTensor& v) { return ops::fmod(x, v); }, b);
  for (const char* mode : {"constant", "reflect", "replicate"}) {
    INFO(mode);
    gradcheck([&](const AnyTensor& v) { return ops::pad(v, {2, 1, 1, 0}, mode, 0.5); }, x);
    gradcheck([&](const AnyTensor& v) { return ops::pad(v, {-1, 2}, mode); }, x);
  }
  // pad_grad is linear; its own gradient is pad (second order)
  Tensor<double> g = ms_test::random<double>({4, 6}, 3);
  gradcheck([&](const AnyTensor& v) {
    return ops::call1(ops::pad_grad_op, {v}, ops::Attrs{{"begin", ops::IntList{1, 1}}, {"end", ops::IntList{1, 2}},
                                                         {"mode", std::string("reflect")}, {"input_shape", ops::IntList{2, 3}}});
  }, g);
}

TEST_CASE("tile, cumsum, topk, triu, remainder and pad captured and replayed equal eager", "[op][graph][indexing]") {
  auto f = [](const Tensor<float>& x) {
    Tensor<float> t = ms::tile(x, {1, 2});                               // (2, 6)
    Tensor<float> c = ms::cumsum(t, 1, true, false);
    Tensor<float> k = ms::topk(c, 3).first;                              // (2, 3)
    Tensor<float> u = ms::triu(ms::pad(k, {1, 0, 0, 1}, "replicate"));  // (3, 4)
    return ms::remainder(u, 1.5f) + ms::fmod(ms::tril(u, -1), -2.0f);
  };
  Tensor<float> x = ms_test::random_floats({2, 3}, 11);
  Tensor<float> eager = f(x);
  auto jf = ms::jit(f);
  jf(x);
  Tensor<float> replay = jf(x);
  REQUIRE(jf.num_replays() == 1);
  CHECK(ms_test::same_bits(replay, eager));
  Tensor<float> x2 = ms_test::random_floats({2, 3}, 12);  // new inputs: the replay recomputes
  CHECK(ms_test::same_bits(jf(x2), f(x2)));
}

}  // namespace indexing_test
