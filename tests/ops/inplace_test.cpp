// In-place writes (ops/inplace.hpp): the copy_ op and the Tensor<T> methods add_, sub_,
// mul_, div_, fill_, copy_. Checks values, that views see the writes, strided and
// broadcast destinations, overlapping source and destination, and the exact errors.

#include "test_util.hpp"

MS_TEST_COVERS("copy_");

namespace {

using ms::Tensor;
using ms_test::CountingTracer;
using ms_test::iota;
using ms_test::require_shape;
using ms_test::require_values;

}  // namespace

TEST_CASE("copy_ is registered as a side-effecting movement op", "[op]") {
  const auto& op = ms::ops::registry().get("copy_");
  CHECK(op.category == ms::ops::Category::movement);
  CHECK(op.num_inputs == 2);
  CHECK(op.is_view());  // a movement-category view op: graph passes treat it as a side effect
  CHECK(op.kernel == nullptr);
  CHECK(!op.is_random);
  CHECK(op.doc.find("side effect") != std::string::npos);
  CHECK(op.cpu_dtypes.contains(ms::DType::f16));
}

TEST_CASE("copy_ op: writes into the destination and returns it", "[op]") {
  auto dst = iota<float>({2, 3});
  Tensor<float> src{10, 20, 30};
  auto out = ms::ops::copy_(dst, src);  // broadcast over rows
  CHECK(out.is_same(dst));
  require_values(dst, {10, 20, 30, 10, 20, 30});

  // Through the generic call (what ms-op and graphs use).
  auto d2 = iota<double>({2});
  const ms::AnyTensor in[2] = {d2, Tensor<double>{7, 8}};
  auto outs = ms::ops::call(ms::ops::registry().get("copy_"), in);
  REQUIRE(outs.size() == 1);
  CHECK(outs[0].is_same(d2));
  require_values(d2, {7, 8});
}

TEST_CASE("copy_: strided destination, strided source, every storage dtype class", "[op]") {
  auto x = iota<float>({3, 4});
  auto cols = x.slice(1, 0, 4, 2);  // columns 0 and 2 (a view)
  cols.copy_(Tensor<float>{{-1, -2}, {-3, -4}, {-5, -6}});
  require_values(x, {-1, 1, -2, 3, -3, 5, -4, 7, -5, 9, -6, 11});

  auto y = iota<std::int32_t>({2, 3});
  auto src = iota<std::int32_t>({3, 2}, 100).t();  // (2, 3) transposed: 100 102 104 / 101 103 105
  y.copy_(src);
  require_values(y, {100, 102, 104, 101, 103, 105});

  auto h = ms::cast<ms::half>(iota<float>({2, 2}));
  h.t().copy_(ms::cast<ms::half>(Tensor<float>{{1, 2}, {3, 4}}));  // writes the transpose
  require_values(h, {1, 3, 2, 4});

  auto b = ms::cast<bool>(Tensor<float>{0, 0, 0});
  b.slice(0, 2, -4, -2).copy_(ms::cast<bool>(Tensor<float>{1, 1}));  // elements 2 and 0
  CHECK(b.to_vector() == std::vector<bool>{true, false, true});

  auto i64 = iota<std::int64_t>({2, 2});
  i64.copy_(Tensor<std::int64_t>{9});
  require_values(i64, {9, 9, 9, 9});
}

TEST_CASE("copy_: overlapping source and destination", "[op]") {
  auto x = iota<float>({6});
  x.slice(0, 1, 6).copy_(x.slice(0, 0, 5));  // shift right by one
  require_values(x, {0, 0, 1, 2, 3, 4});
  auto y = iota<float>({5});
  y.copy_(y.slice(0, 4, -6, -1));  // reverse in place
  require_values(y, {4, 3, 2, 1, 0});
  auto m = iota<float>({3, 3});
  m.copy_(m.t());  // in-place transpose
  require_values(m, {0, 3, 6, 1, 4, 7, 2, 5, 8});
}

TEST_CASE("copy_: 0-d, 0-size and large tensors", "[op]") {
  Tensor<float> s = ms::AnyTensor::empty({}, ms::DType::f32);
  Tensor<float> three = ms::AnyTensor::empty({}, ms::DType::f32);
  three.data()[0] = 3;
  s.copy_(three);
  CHECK(s.item() == 3);
  MS_REQUIRE_THROWS_MSG(s.copy_(Tensor<float>{3}), ms::ShapeError,  // as in PyTorch: (1,) does not broadcast to ()
                        "[ms.shape_error] copy_: cannot broadcast the source (1,) to the destination ()");
  auto e = iota<float>({0, 4});
  e.copy_(Tensor<float>{1, 2, 3, 4});
  require_shape(e, {0, 4});
  auto big = iota<float>({400, 300});
  big.t().copy_(iota<float>({300, 400}));  // transposed destination, parallel path
  auto v = big.to_vector();
  CHECK(v[0] == 0);
  CHECK(v[1] == 400);
  CHECK(v[300] == 1);
  CHECK(v[399 * 300 + 299] == 299 * 400 + 399);
  // A contiguous copy is one run that the threads split between them (boundaries at
  // multiples of 64 elements, a tail of 3): every element lands once, in its place.
  ms_test::ThreadGuard tg;
  for (int threads : {1, 2}) {
    ms::set_num_threads(threads);
    auto dst = ms::zeros<float>({100003});
    dst.copy_(iota<float>({100003}));
    auto w = dst.to_vector();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < w.size(); ++i) wrong += w[i] != static_cast<float>(i);
    CHECK(wrong == 0);
  }
}

TEST_CASE("copy_: errors", "[op]") {
  auto x = iota<float>({2, 2});
  MS_REQUIRE_THROWS_MSG(x.copy_(Tensor<float>{1, 2, 3}), ms::ShapeError,
                        "[ms.shape_error] copy_: cannot broadcast the source (3,) to the destination (2, 2)");
  MS_REQUIRE_THROWS_MSG(x.copy_(iota<float>({2, 2, 2})), ms::ShapeError,
                        "[ms.shape_error] copy_: cannot broadcast the source (2, 2, 2) to the destination (2, 2)");
  MS_REQUIRE_THROWS_MSG(ms::ops::copy_(x, Tensor<int>{1, 2}), ms::DTypeError,
                        "[ms.dtype_error] copy_: dtype mismatch: destination (2, 2) is float32 but source (2,) is "
                        "int32; convert the source with ms::cast");
  auto bcast = Tensor<float>{1, 2}.unsqueeze(0).expand({3, 2});
  MS_REQUIRE_THROWS_MSG(bcast.copy_(iota<float>({3, 2})), ms::ValueError,
                        "[ms.value_error] copy_: the destination (3, 2) with strides (0, 1) is a broadcast view "
                        "(several elements share one memory location); write into a contiguous tensor instead");
}

TEST_CASE("add_/sub_/mul_/div_: values, broadcasting, views see the change", "[op]") {
  auto x = iota<float>({2, 3});
  auto row1 = x.slice(0, 1, 2);  // a view taken before the update
  auto& r = x.add_(Tensor<float>{10, 20, 30});
  CHECK(&r == &x);
  require_values(x, {10, 21, 32, 13, 24, 35});
  require_values(row1, {13, 24, 35});
  x.sub_(1.0).mul_(2.0).div_(Tensor<float>{2, 4, 8});
  require_values(x, {9, 10, 7.75, 12, 11.5, 8.5});
  x.mul_(x);
  require_values(x, {81, 100, 60.0625, 144, 132.25, 72.25});
  x.sub_(x.slice(0, 0, 1));  // broadcast from a view of itself: the out-of-place result is fresh
  require_values(x, {0, 0, 0, 63, 32.25, 12.1875});
  x.div_(0.5);
  require_values(x, {0, 0, 0, 126, 64.5, 24.375});
}

TEST_CASE("in-place methods on views write through to the base", "[op]") {
  auto x = iota<double>({3, 4});
  x.slice(1, 0, 4, 2).add_(100);           // columns 0 and 2
  x.t().slice(0, 3, 4).mul_(-1.0);         // column 3 through a transpose
  x.slice(0, 2, 3).sub_(Tensor<double>{1, 1, 1, 1});  // last row
  require_values(x, {100, 1, 102, -3, 104, 5, 106, -7, 107, 8, 109, -12});
  auto s = iota<double>({4}).slice(0, 3, -5, -1);  // reversed view
  s.add_(Tensor<double>{0, 10, 20, 30});
  require_values(s, {3, 12, 21, 30});
}

TEST_CASE("in-place integer arithmetic and fill_ for each dtype class", "[op]") {
  auto i = iota<std::int32_t>({3});
  i.add_(5).mul_(Tensor<std::int32_t>{1, 2, 3}).sub_(1);
  require_values(i, {4, 11, 20});
  auto l = iota<std::int64_t>({2});
  l.fill_(-7);
  require_values(l, {-7, -7});
  auto u = iota<std::uint8_t>({2});
  u.add_(250);
  require_values(u, {250, 251});
  auto f = iota<float>({2, 2});
  f.t().slice(0, 1, 2).fill_(0.5);  // column 1
  require_values(f, {0, 0.5, 2, 0.5});
  auto b = ms::cast<bool>(Tensor<float>{0, 1});
  b.fill_(1);
  CHECK(b.to_vector() == std::vector<bool>{true, true});
  auto h = ms::cast<ms::bfloat16>(iota<float>({3}));
  h.fill_(2.5);
  require_values(h, {2.5, 2.5, 2.5});
  Tensor<double> s = ms::AnyTensor::empty({}, ms::DType::f64);
  s.fill_(1.5).add_(1);
  CHECK(s.item() == 2.5);
  auto e = iota<float>({0});
  e.fill_(1).add_(1);
  require_shape(e, {0});
}

TEST_CASE("in-place methods record the out-of-place op plus copy_", "[op]") {
  auto x = iota<float>({2});
  Tensor<float> y{1, 1};
  CountingTracer tr;
  x.add_(y);
  x.fill_(3);
  x.copy_(y);
  CHECK(tr.names == std::vector<std::string>{"add", "copy_", "copy_", "copy_"});
}

TEST_CASE("in-place methods: errors", "[op]") {
  Tensor<float> v{1, 2, 3};
  MS_REQUIRE_THROWS_MSG(v.add_(Tensor<float>{{1, 2, 3}, {4, 5, 6}}), ms::ShapeError,
                        "[ms.shape_error] add_: result shape (2, 3) differs from the destination shape (3,)");
  MS_REQUIRE_THROWS_MSG(v.mul_(Tensor<float>{1, 2}), ms::ShapeError,
                        "[ms.shape_error] mul: cannot broadcast (3,) with (2,)");
  auto i = iota<std::int32_t>({2});
  MS_REQUIRE_THROWS_MSG(i.add_(0.5), ms::ValueError,
                        "[ms.value_error] add: scalar 0.5 is not representable as int32 (convert the tensor with "
                        "ms::cast)");
  MS_REQUIRE_THROWS_MSG(i.fill_(1e10), ms::ValueError,
                        "[ms.value_error] fill_: scalar 10000000000 is not representable as int32 (convert the tensor "
                        "with ms::cast)");
  MS_REQUIRE_THROWS_MSG(i.div_(2), ms::DTypeError,
                        "[ms.dtype_error] div: unsupported dtype int32 (supported: float32, float64, float16, bfloat16)");
  auto h = ms::cast<ms::half>(Tensor<float>{1.5f});
  h.add_(1);  // 16-bit floats compute in float32 and round once
  CHECK(static_cast<float>(h.to_vector()[0]) == 2.5f);
  auto flag = Tensor<bool>{true};
  MS_REQUIRE_THROWS_MSG(flag.div_(flag), ms::DTypeError,
                        "[ms.dtype_error] div: unsupported dtype bool (supported: float32, float64, float16, bfloat16)");
  auto bcast = Tensor<float>{1, 2}.unsqueeze(0).expand({2, 2});
  MS_REQUIRE_THROWS_MSG(bcast.fill_(0), ms::ValueError,
                        "[ms.value_error] copy_: the destination (2, 2) with strides (0, 1) is a broadcast view "
                        "(several elements share one memory location); write into a contiguous tensor instead");
  require_values(bcast, {1, 2, 1, 2});  // nothing was written
}

TEST_CASE("in-place methods refuse tensors that take part in autodiff unless grad is off", "[op]") {
  auto w = iota<float>({2});
  w.impl()->autograd = std::make_shared<ms::detail::AutogradMeta>();
  w.impl()->autograd->requires_grad = true;
  const char* msg =
      "[ms.value_error] sub_: in-place ops on tensors that take part in autodiff are not supported; use the "
      "out-of-place form, or run the update under ms::NoGradGuard (as optimizers do)";
  MS_REQUIRE_THROWS_MSG(w.sub_(Tensor<float>{1, 1}), ms::ValueError, msg);
  MS_REQUIRE_THROWS_MSG(w.sub_(1), ms::ValueError, msg);
  auto plain = iota<float>({2});
  MS_REQUIRE_THROWS_MSG(plain.copy_(w), ms::ValueError,
                        "[ms.value_error] copy_: in-place ops on tensors that take part in autodiff are not supported; "
                        "use the out-of-place form, or run the update under ms::NoGradGuard (as optimizers do)");
  {
    ms::NoGradGuard ng;
    w.sub_(Tensor<float>{1, 1}).mul_(2.0);
  }
  require_values(w, {-2, 0});
}

TEST_CASE("copy_ in a captured graph: the write is kept and replayed on every run", "[op][graph]") {
  auto w = iota<float>({3});  // state created outside the capture: 0 1 2
  auto side = iota<float>({2});
  Tensor<float> x{1, 1, 1};
  ms::graph::Capture cap;
  cap.input(x);
  w.add_(x);               // add + copy_; w becomes a parameter the graph writes into
  auto y = w * 2.0f;       // reads the updated w
  side.fill_(7);           // a write whose result nothing reads: must survive DCE
  cap.output(y);
  auto g = cap.finish();
  require_values(w, {1, 2, 3});  // the eager run during capture
  require_values(side, {7, 7});
  side.fill_(0);
  auto ex = ms::backend::compile(std::move(g));
  auto outs = ex.run({Tensor<float>{10, 10, 10}});
  REQUIRE(outs.size() == 1);
  require_values(outs[0].as<float>(), {22, 24, 26});
  require_values(w, {11, 12, 13});
  require_values(side, {7, 7});
  outs = ex.run({Tensor<float>{1, 2, 3}});
  require_values(outs[0].as<float>(), {24, 28, 32});
  require_values(w, {12, 14, 16});
}
