// Tests of the Ascend adapter (ms/backend/ascend/ascend_backend.hpp) against the
// Ascend emulator: every mapped op equals the CPU backend, copies both ways,
// device errors, the host fallback, streams and events, and every injected
// fault giving a clean BackendError without leaking device resources.
// The build defines MS_ASCEND_EMULATOR_PATH when the emulator target exists;
// without it these tests are skipped with a message.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>

#include <ms/ms.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>
#include <ms/backend/backend.hpp>

#include "../ascend_emulator/ms_emulator.h"
#include "emu_fixture.hpp"

#ifndef MS_ASCEND_EMULATOR_PATH

TEST_CASE("Ascend adapter tests", "[ascend]") {
  WARN("SKIPPED: MS_ASCEND_EMULATOR_PATH is not defined, so the Ascend emulator was not built; "
       "the [ascend] adapter tests did not run");
}

#else

// Everything below lives in a namespace of its own: the emulator helpers and the
// using-directive for ms must not meet the other test files compiled in the same unit.
namespace ascend_backend_test {
namespace {

using namespace ms;
using ms::backend::ascend::AscendBackend;
using Catch::Matchers::Contains;

using ms_emu_test::counters;
using ms_emu_test::ctl;
using ms_emu_test::emu;
using ms_emu_test::EmuFixture;

const Device kAscend = Device::ascend(0);

AnyTensor rand_f32(const Shape& s, double lo = -2, double hi = 2) {
  return AnyTensor(ms::rand<float>(s) * static_cast<float>(hi - lo) + static_cast<float>(lo));
}

void require_close(const AnyTensor& got, const AnyTensor& want, double tol = 1e-5) {
  REQUIRE(got.device().is_cpu());
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  AnyTensor g = ops::call1(ops::registry().get("cast"), {got}, ops::Attrs{{"dtype", DType::f64}});
  AnyTensor w = ops::call1(ops::registry().get("cast"), {want}, ops::Attrs{{"dtype", DType::f64}});
  auto gv = g.as<double>().to_vector(), wv = w.as<double>().to_vector();
  for (std::size_t i = 0; i < gv.size(); ++i) {
    INFO("element " << i << ": device " << gv[i] << ", cpu " << wv[i]);
    CHECK(std::abs(gv[i] - wv[i]) <= tol * (1 + std::abs(wv[i])));
  }
}

/// Runs op `name` on the CPU and on the emulated device and compares the results.
void check_op(const std::string& name, std::vector<AnyTensor> in, const ops::Attrs& attrs = {}, double tol = 1e-5) {
  INFO("op " << name);
  const ops::OpDef& op = ops::registry().get(name);
  AnyTensor want = ops::call1(op, std::span<const AnyTensor>(in), attrs);
  std::vector<AnyTensor> din;
  for (auto& t : in) din.push_back(to(t, kAscend));
  AnyTensor got = ops::call1(op, std::span<const AnyTensor>(din), attrs);
  REQUIRE(got.device() == kAscend);
  require_close(to(got, Device::cpu()), want, tol);
  SmallVec<ops::TensorMeta, 4> metas = ops::input_metas(din);
  CHECK(emu().supports(op, std::span<const ops::TensorMeta>(metas.data(), metas.size()), attrs));
}

/// The message of the E that `f` throws ("(no exception)" when none; other types propagate).
using ms_emu_test::thrown;

}  // namespace

TEST_CASE("ascend: tensors move to the device and back unchanged", "[ascend]") {
  EmuFixture fx;
  Tensor<float> x = ms::arange<float>(0, 12).reshape({3, 4});
  auto c0 = counters();
  Tensor<float> d = x.to(kAscend);
  CHECK(d.device() == kAscend);
  CHECK(counters().h2d_copies - c0.h2d_copies == 1);
  CHECK(counters().h2d_bytes - c0.h2d_bytes == 48);
  // The host cannot read device memory: element access names the device.
  Tensor<float> one = Tensor<float>{1.0f}.to(kAscend);
  REQUIRE_THROWS_MATCHES(one.item(), DeviceError, Catch::Matchers::Message(
      "[ms.device_error] item(): tensor is on ascend:0, copy it to the cpu first"));
  REQUIRE_THROWS_AS(d.to_vector(), DeviceError);
  Tensor<float> back = d.to(Device::cpu());
  CHECK(back.to_vector() == x.to_vector());
  // A transposed view on the device comes back with its layout.
  Tensor<float> dt = d.t();
  CHECK(dt.to(Device::cpu()).to_vector() == x.t().contiguous().to_vector());
  // Same device: the same tensor, no copy.
  CHECK(d.to(kAscend).is_same(d));
}

TEST_CASE("ascend: every mapped op equals the CPU backend", "[ascend]") {
  EmuFixture fx;
  ms::manual_seed(7);
  using A = ops::Attrs;
  const Shape s{3, 5};
  check_op("add", {rand_f32(s), rand_f32(Shape{5})});
  check_op("sub", {rand_f32(s), rand_f32(s)});
  check_op("mul", {rand_f32(s), rand_f32(Shape{3, 1})});
  check_op("div", {rand_f32(s), rand_f32(s, 0.5, 2)});
  check_op("pow", {rand_f32(s, 0.1, 3), rand_f32(s)});
  check_op("gt", {rand_f32(s), rand_f32(s)});
  check_op("where", {ops::call1(ops::registry().get("gt"), {rand_f32(s), rand_f32(s)}), rand_f32(s), rand_f32(Shape{5})});
  check_op("neg", {rand_f32(s)});
  check_op("exp", {rand_f32(s)});
  check_op("log", {rand_f32(s, 0.1, 4)});
  check_op("sqrt", {rand_f32(s, 0, 4)});
  check_op("relu", {rand_f32(s)});
  check_op("sigmoid", {rand_f32(s)});
  check_op("tanh", {rand_f32(s)});
  check_op("gelu", {rand_f32(s)});
  check_op("matmul", {rand_f32(Shape{4, 6}), rand_f32(Shape{6, 3})});
  check_op("matmul", {rand_f32(Shape{2, 4, 6}), rand_f32(Shape{2, 6, 3})});
  check_op("matmul", {rand_f32(Shape{2, 4, 6}), rand_f32(Shape{6, 3})});
  check_op("linear", {rand_f32(Shape{4, 6}), rand_f32(Shape{3, 6}), rand_f32(Shape{3})});
  check_op("linear", {rand_f32(Shape{4, 6}), rand_f32(Shape{3, 6})});
  check_op("softmax", {rand_f32(s)}, A{{"axis", std::int64_t{1}}});
  check_op("softmax", {rand_f32(s)}, A{{"axis", std::int64_t{0}}});
  check_op("sum", {rand_f32(s)}, A{{"axes", ops::IntList{1}}, {"keepdim", false}});
  check_op("sum", {rand_f32(s)}, A{{"axes", ops::IntList{0}}, {"keepdim", true}});
  check_op("sum", {rand_f32(s)}, A{{"axes", ops::IntList{}}, {"keepdim", false}});
  check_op("mean", {rand_f32(s)}, A{{"axes", ops::IntList{-1}}, {"keepdim", false}});
  check_op("cast", {rand_f32(s)}, A{{"dtype", DType::f64}});
  check_op("cast", {AnyTensor(ms::arange<std::int32_t>(0, 6))}, A{{"dtype", DType::f32}});
  Tensor<std::int64_t> target{3, 0, 4, 1};
  const A ce{{"reduction", std::string("mean")}, {"label_smoothing", 0.0}, {"ignore_index", std::int64_t{-100}}};
  check_op("cross_entropy", {rand_f32(Shape{4, 5}), target}, ce);
  check_op("cross_entropy", {rand_f32(Shape{4, 5}), target}, A(ce).set("reduction", std::string("sum")));
  check_op("cross_entropy", {rand_f32(Shape{4, 5}), target}, A(ce).set("reduction", std::string("none")));
  check_op("cross_entropy_grad", {rand_f32(Shape{4, 5}), target, AnyTensor(ms::full<float>({}, 0.5f))}, ce);
  check_op("cross_entropy_grad", {rand_f32(Shape{4, 5}), target, rand_f32(Shape{4})},
           A(ce).set("reduction", std::string("none")));
}

TEST_CASE("ascend: the cross entropy gradient matches a hand-computed value", "[ascend]") {
  EmuFixture fx;
  // logits 0 everywhere: softmax = 1/2 per class; grad = (1/2 - onehot) / N for the mean.
  Tensor<float> logits = ms::zeros<float>({2, 2});
  Tensor<std::int64_t> y{0, 1};
  const ops::Attrs ce{{"reduction", std::string("mean")}, {"label_smoothing", 0.0}, {"ignore_index", std::int64_t{-100}}};
  AnyTensor g = ops::call1(ops::registry().get("cross_entropy_grad"),
                           {to(logits, kAscend), to(y, kAscend), to(ms::ones<float>({}), kAscend)}, ce);
  CHECK(Tensor<float>(to(g, Device::cpu())).to_vector() == std::vector<float>{-0.25f, 0.25f, 0.25f, -0.25f});
  AnyTensor l = ops::call1(ops::registry().get("cross_entropy"), {to(logits, kAscend), to(y, kAscend)}, ce);
  CHECK(Tensor<float>(to(l, Device::cpu())).item() == Approx(std::log(2.0)));
}

TEST_CASE("ascend: mixed devices are an error naming both", "[ascend]") {
  EmuFixture fx;
  Tensor<float> a = ms::ones<float>({2, 2});
  Tensor<float> b = a.to(kAscend);
  REQUIRE_THROWS_MATCHES(ms::add(a, b), DeviceError,
                         Catch::Matchers::Message("[ms.device_error] add: input 0 is on cpu but input 1 is on ascend:0"));
  REQUIRE_THROWS_MATCHES(ms::add(b, a), DeviceError,
                         Catch::Matchers::Message("[ms.device_error] add: input 0 is on ascend:0 but input 1 is on cpu"));
}

TEST_CASE("ascend: unmapped ops run on the host, warned once, with the copies", "[ascend]") {
  EmuFixture fx;
  Tensor<float> x{0.5f, -1.0f, 2.0f};
  Tensor<float> d = x.to(kAscend);
  auto c0 = counters();
  Tensor<float> e = ms::sin(d);  // neither an aclnn nor an AI CPU row for sin
  auto c1 = counters();
  CHECK(e.device() == kAscend);
  CHECK(c1.d2h_copies - c0.d2h_copies == 1);  // the input down
  CHECK(c1.h2d_copies - c0.h2d_copies == 1);  // the result up
  CHECK(c1.launches == c0.launches);          // no device kernel
  auto want = ms::sin(x).to_vector();
  auto got = e.to(Device::cpu()).to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]));
  auto fb = emu().fallback_ops();
  CHECK(std::find(fb.begin(), fb.end(), "sin") != fb.end());
  // A mapped op launches one kernel and copies nothing.
  auto c2 = counters();
  Tensor<float> r = ms::relu(d);
  auto c3 = counters();
  CHECK(c3.launches - c2.launches == 1);
  CHECK(c3.h2d_copies + c3.d2h_copies == c2.h2d_copies + c2.d2h_copies);
  CHECK(r.to(Device::cpu()).to_vector() == std::vector<float>{0.5f, 0.0f, 2.0f});
}

TEST_CASE("ascend: copy_ writes into device memory", "[ascend]") {
  EmuFixture fx;
  Tensor<float> dst = ms::zeros<float>({2, 3}).to(kAscend);
  Tensor<float> src = ms::arange<float>(0, 6).reshape({2, 3}).to(kAscend);
  auto c0 = counters();
  ops::copy_(dst, src);
  CHECK(counters().d2d_copies - c0.d2d_copies == 1);
  CHECK(dst.to(Device::cpu()).to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
  // A broadcast source has no device copy: it goes through the host and back.
  Tensor<float> row = Tensor<float>{7, 8, 9}.to(kAscend);
  ops::copy_(dst, row);
  CHECK(dst.to(Device::cpu()).to_vector() == std::vector<float>{7, 8, 9, 7, 8, 9});
}

TEST_CASE("ascend: streams run in order and events order them across streams", "[ascend]") {
  EmuFixture fx;
  ctl().SetLatency(2'000'000, 0, 0, 0);  // 2 ms per kernel
  AscendBackend& be = emu();
  backend::Stream s1 = be.create_stream(), s2 = be.create_stream();
  backend::Event e = be.create_event(), t0 = be.create_event(), t1 = be.create_event();
  Tensor<float> x = Tensor<float>{1, 2, 3}.to(kAscend);
  Tensor<float> y = Tensor<float>{0, 0, 0}.to(kAscend);
  Tensor<float> z = Tensor<float>{0, 0, 0}.to(kAscend);
  const ops::OpDef& neg = ops::registry().get("neg");
  const ops::OpDef& exp = ops::registry().get("exp");
  be.record(t0, s1);
  std::vector<AnyTensor> in{x}, out{y};
  be.launch(neg, in, out, {}, s1);  // y = -x on s1 (2 ms)
  be.record(e, s1);
  be.wait(s2, e);
  std::vector<AnyTensor> in2{y}, out2{z};
  be.launch(exp, in2, out2, {}, s2);  // z = exp(y) on s2, after y
  be.record(t1, s2);
  be.synchronize(s2);
  be.synchronize(t1);
  CHECK(be.elapsed_ms(t0, t1) >= 3.5f);  // two kernels, one after the other
  auto got = z.to(Device::cpu()).to_vector();
  CHECK(got[2] == Approx(std::exp(-3.0)));
}

TEST_CASE("ascend: injected faults give a BackendError and leak nothing", "[ascend]") {
  EmuFixture fx;
  Tensor<float> h = ms::ones<float>({4, 4});
  Tensor<float> d = h.to(kAscend);
  emu().synchronize_all();
  auto base = ms_emu_test::baseline();
  auto no_leak = [&] { ms_emu_test::check_no_leak(base); };
  SECTION("allocation") {
    ctl().InjectFault(MS_EMU_FAULT_ALLOC, 0);
    CHECK_THAT(thrown<BackendError>([&] { (void)ms::relu(d); }),
               Contains("relu on ascend:0 ((4, 4) float32): aclrtMalloc failed with code 207001"));
  }
  SECTION("workspace phase") {
    ctl().InjectFault(MS_EMU_FAULT_OP_WORKSPACE, 0);
    CHECK_THAT(thrown<BackendError>([&] { (void)ms::add(d, d); }), Contains("add on ascend:0 ((4, 4) float32, (4, 4) float32): "
                                                             "aclnnAddGetWorkspaceSize failed with code 561000"));
  }
  SECTION("launch phase, second kernel of a composite op") {
    ctl().InjectFault(MS_EMU_FAULT_OP_LAUNCH, 1);  // linear: Matmul passes, Add fails
    Tensor<float> b = ms::ones<float>({4}).to(kAscend);
    CHECK_THAT(thrown<BackendError>([&] { (void)ms::linear(d, d, b); }), Contains("aclnnAdd failed with code 361001"));
  }
  SECTION("a stream fault surfaces at the next synchronization") {
    ctl().InjectFault(MS_EMU_FAULT_STREAM, 0);
    Tensor<float> r = ms::exp(d);  // enqueued fine; fails on the device
    CHECK_THAT(thrown<BackendError>([&] { (void)r.to(Device::cpu()); }), Contains("aclrtSynchronizeStream failed with code 507015"));
  }
  SECTION("copy") {
    ctl().InjectFault(MS_EMU_FAULT_MEMCPY, 0);
    CHECK_THAT(thrown<BackendError>([&] { (void)h.to(kAscend); }), Contains("aclrtMemcpy failed with code 507052"));
  }
  no_leak();
  // The device works again afterwards.
  CHECK(ms::neg(d).to(Device::cpu()).to_vector() == std::vector<float>(16, -1.0f));
}

}  // namespace ascend_backend_test

#endif  // MS_ASCEND_EMULATOR_PATH
