// Tests of the AI CPU engine of the Ascend adapter against the emulator: every op
// of the AI CPU mapping (ms/backend/ascend/aicpu_ops.hpp) equals the CPU backend
// eagerly, a device graph with an AI CPU node between AI Core nodes runs without
// host copies or host nodes, engine assignment by cost and pinning, profiling,
// injected faults giving a clean BackendError with no leaked handle, and a
// runtime without the single-operator API falling back to the host.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <ms/ms.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>
#include <ms/backend/device_executor.hpp>

#include "../ascend_emulator/ms_emulator.h"
#include "emu_fixture.hpp"
#include "../test_util.hpp"

#ifndef MS_ASCEND_EMULATOR_PATH

TEST_CASE("Ascend AI CPU tests", "[ascend]") {
  WARN("SKIPPED: MS_ASCEND_EMULATOR_PATH is not defined, so the Ascend emulator was not built; "
       "the [ascend] AI CPU tests did not run");
}

#else

// Everything below lives in a namespace of its own: the emulator helpers and the
// using-directive for ms must not meet the other test files compiled in the same unit.
namespace ascend_aicpu_test {
namespace {

using namespace ms;
using backend::Engine;
using backend::ascend::AscendBackend;
using Catch::Matchers::Contains;

using ms_emu_test::counters;
using ms_emu_test::ctl;
using ms_emu_test::emu;
using ms_emu_test::EmuFixture;

const Device kAscend = Device::ascend(0);

// The AI CPU engine needs the single-operator API, which the newest chips (Atlas A3,
// MS_EMU_SOC=Ascend910_93) do not support; there these tests have nothing to run.
#define MS_SKIP_WITHOUT_AICPU()                                                                 \
  if (!emu().api().has_aicpu()) {                                                               \
    WARN("skipped: " << emu().soc().name << " has no single-operator API, so no AI CPU engine"); \
    return;                                                                                     \
  }

/// The values of a tensor (host or device, any numeric dtype) as doubles.
std::vector<double> values(const AnyTensor& t) {
  AnyTensor h = backend::to(t, Device::cpu());
  return Tensor<double>(ops::cast(h, DType::f64)).to_vector();
}

void require_equal_values(const AnyTensor& got, const AnyTensor& want, double tol) {
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.shape() == want.shape());
  const auto g = values(got), w = values(want);
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << w[i]);
    if (std::isnan(w[i])) CHECK(std::isnan(g[i]));
    else CHECK(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
  }
}

using ms_emu_test::thrown;

using ms_emu_test::dump_line;

AnyTensor uniform(const Shape& s, DType dt, double lo, double hi) {
  AnyTensor f = AnyTensor(ms::rand<float>(s) * static_cast<float>(hi - lo) + static_cast<float>(lo));
  return ops::cast(f, dt);
}

struct Case {
  std::string name;
  AnyTensor x;
  std::function<AnyTensor(const AnyTensor&)> f;
  double tol = 1e-6;
};

TEST_CASE("ascend ai_cpu: every op of the AI CPU mapping equals the CPU backend", "[ascend][aicpu]") {
  EmuFixture fx;
  MS_SKIP_WITHOUT_AICPU();
  REQUIRE(emu().engines() == std::vector<Engine>{Engine::ai_core, Engine::ai_cpu});
  AnyTensor with_nan = Tensor<float>{1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f, -1.0f, 7.0f, 0.5f}.reshape({2, 3});
  std::vector<Case> cases = {
      {"erf f32 (7,)", uniform({7}, DType::f32, -2, 2), [](const AnyTensor& x) { return ops::erf(x); }},
      {"erf f32 (3, 4)", uniform({3, 4}, DType::f32, -2, 2), [](const AnyTensor& x) { return ops::erf(x); }},
      {"erf f32 (2, 3, 5)", uniform({2, 3, 5}, DType::f32, -3, 3), [](const AnyTensor& x) { return ops::erf(x); }},
      {"erf f64 (4, 4)", uniform({4, 4}, DType::f64, -2, 2), [](const AnyTensor& x) { return ops::erf(x); }, 1e-12},
      {"leaky_relu f32 slope 0.2", uniform({3, 4}, DType::f32, -2, 2),
       [](const AnyTensor& x) { return ops::leaky_relu(x, 0.2); }},
      // The slope travels as a float attribute (aclopSetAttrFloat), so f64 agrees to float precision.
      {"leaky_relu f64 default slope", uniform({5}, DType::f64, -2, 2),
       [](const AnyTensor& x) { return ops::leaky_relu(x); }, 1e-7},
      {"argmax f32 axis 1", uniform({2, 3, 4}, DType::f32, -2, 2),
       [](const AnyTensor& x) { return ops::argmax(x, 1, false); }, 0},
      {"argmax f32 axis -1 keepdim", uniform({2, 3, 4}, DType::f32, -2, 2),
       [](const AnyTensor& x) { return ops::argmax(x, -1, true); }, 0},
      {"argmax f32 flattened", uniform({3, 5}, DType::f32, -2, 2),
       [](const AnyTensor& x) { return ops::argmax(x, std::nullopt, false); }, 0},
      {"argmax i32 axis 0 (ties: the first)", uniform({6, 3}, DType::i32, -3, 3),
       [](const AnyTensor& x) { return ops::argmax(x, 0, false); }, 0},
      {"argmax f32 NaN is the maximum", with_nan, [](const AnyTensor& x) { return ops::argmax(x, 1, false); }, 0},
      {"argmin i64 axis 1 keepdim", uniform({4, 5}, DType::i64, -9, 9),
       [](const AnyTensor& x) { return ops::argmin(x, 1, true); }, 0},
      {"argmin f64 flattened keepdim", uniform({2, 2, 3}, DType::f64, -2, 2),
       [](const AnyTensor& x) { return ops::argmin(x, std::nullopt, true); }, 0},
      {"argmin f32 NaN is the minimum", with_nan, [](const AnyTensor& x) { return ops::argmin(x, 1, false); }, 0},
      {"prod f32 axis 1 keepdim", uniform({3, 4, 2}, DType::f32, 0.5, 1.5),
       [](const AnyTensor& x) { return ops::prod(x, {1}, true); }, 1e-5},
      {"prod f32 all axes", uniform({3, 4}, DType::f32, 0.5, 1.5),
       [](const AnyTensor& x) { return ops::prod(x, {}, false); }, 1e-5},
      {"prod i64 axes (0, -1)", uniform({2, 3, 2}, DType::i64, -3, 4),
       [](const AnyTensor& x) { return ops::prod(x, {0, -1}, false); }, 0},
      {"prod f64 axis 0", uniform({4, 3}, DType::f64, -2, 2),
       [](const AnyTensor& x) { return ops::prod(x, {0}, false); }, 1e-12},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    AnyTensor want = c.f(c.x);
    AnyTensor xd = backend::to(c.x, kAscend);
    emu().synchronize_all();
    const auto c0 = counters();
    AnyTensor got = c.f(xd);
    const auto c1 = counters();
    CHECK(got.device() == kAscend);
    // The kernels' dtype rows: ArgMaxD/ArgMinD take float16/float only, ReduceProdD no double
    // or int64; the others go the host way (one copy each way) with the same values.
    const std::string name = c.name;
    const bool arg = name.rfind("arg", 0) == 0, reduce = arg || name.rfind("prod", 0) == 0;
    if (!reduce || c.x.dtype() == DType::f32) {
      CHECK(c1.aicpu_launches - c0.aicpu_launches == 1);             // one AI CPU operator
      CHECK(c1.launches - c0.launches == (arg ? 1u : 0u));           // + aclnnCast of int32 indices
      CHECK(c1.h2d_copies + c1.d2h_copies == c0.h2d_copies + c0.d2h_copies);  // no host round trip
    } else {
      CHECK(c1.aicpu_launches == c0.aicpu_launches);
      CHECK(c1.d2h_copies - c0.d2h_copies == 1);
    }
    require_equal_values(got, want, c.tol);
  }
}

TEST_CASE("ascend ai_cpu: eager calls outside the AI CPU mapping take the host way", "[ascend][aicpu]") {
  EmuFixture fx;
  MS_SKIP_WITHOUT_AICPU();
  // A strided view: AI CPU operators take dense tensors, so the host runs it (one copy each way).
  Tensor<float> x = ms::randn<float>({3, 4});
  Tensor<float> xd = x.to(kAscend);
  Tensor<float> t = xd.t();
  emu().synchronize_all();
  auto c0 = counters();
  Tensor<float> e = ms::erf(t);
  auto c1 = counters();
  CHECK(c1.aicpu_launches == c0.aicpu_launches);
  CHECK(c1.d2h_copies - c0.d2h_copies == 1);
  CHECK(c1.h2d_copies - c0.h2d_copies == 1);
  require_equal_values(e, ms::erf(x.t()), 1e-6);
  // The same op on a dense device tensor runs on AI CPU; so does an integer reduction.
  auto c2 = counters();
  Tensor<float> dense = ms::erf(xd);
  Tensor<std::int32_t> p = ms::prod(Tensor<std::int32_t>{3, 1, 4, 1, 5}.to(kAscend));
  auto c3 = counters();
  CHECK(c3.aicpu_launches - c2.aicpu_launches == 2);
  require_equal_values(dense, ms::erf(x), 1e-6);
  CHECK(values(p) == std::vector<double>{60.0});
}

TEST_CASE("device graph: an AI CPU op between AI Core ops stays on the device", "[ascend][aicpu]") {
  EmuFixture fx;
  MS_SKIP_WITHOUT_AICPU();
  Tensor<float> x = ms::randn<float>({4, 6}), w = ms::randn<float>({3, 6}), b = ms::randn<float>({3});
  auto f = [&](const Tensor<float>& xx) { return ms::sigmoid(ms::erf(ms::linear(xx, w, b))); };
  Tensor<float> want = f(x);
  backend::DeviceExecutable ex = backend::compile_for_device(backend::trace(f, x), emu());
  const std::string d = ex.dump();
  INFO(d);
  CHECK_THAT(d, Contains("# device graph on ascend:0: 3 device kernels, 0 host nodes"));
  CHECK_THAT(d, Contains("per step 0 host->device and 0 device->host copies; 1 of the device kernels on ai_cpu"));
  CHECK_THAT(dump_line(d, "linear_0"), Contains("@ai_core stream 0 (aclnn"));
  CHECK_THAT(dump_line(d, "erf_0"), Contains("@ai_cpu stream 0 (aicpu, ~"));
  CHECK_THAT(dump_line(d, "sigmoid_0"), Contains("@ai_core stream 0 (aclnn"));
  CHECK(ex.num_host_nodes() == 0);
  // The placement's cost is the backend's AI CPU estimate, with no copies.
  for (std::size_t i = 0; i < ex.graph().nodes().size(); ++i) {
    const auto& n = ex.graph().nodes()[i];
    if (n.op->name != "erf") continue;
    const auto& p = ex.placements()[i];
    CHECK(p.engine == Engine::ai_cpu);
    CHECK(p.copies_in == 0);
    const ops::TensorMeta m{DType::f32, Shape{4, 3}};
    CHECK(p.cost_us == Approx(emu().cost_us(Engine::ai_cpu, *n.op, std::span(&m, 1), std::span(&m, 1), n.attrs)));
  }
  // Four steps in one sink: one staging copy each way, four AI CPU launches, one sync.
  Tensor<float> X = ms::randn<float>({4 * 4, 6});
  auto c0 = counters();
  backend::SunkResult r = ex.run_sunk(std::vector<AnyTensor>{X}, backend::SinkOptions{4, {}});
  auto c1 = counters();
  CHECK(r.interactions == 1);
  CHECK(c1.aicpu_launches - c0.aicpu_launches == 4);
  CHECK(c1.launches - c0.launches == 12);  // linear (Matmul, Add) and sigmoid per step
  CHECK(c1.h2d_copies - c0.h2d_copies == 1);
  CHECK(c1.d2h_copies - c0.d2h_copies == 1);
  require_equal_values(r.outputs[0], AnyTensor(f(X).reshape({4, 4, 3})), 1e-5);
  require_equal_values(ex.run({x})[0], want, 1e-5);
}

TEST_CASE("device graph: AI CPU reductions feed AI Core ops, integer results come back", "[ascend][aicpu]") {
  EmuFixture fx;
  MS_SKIP_WITHOUT_AICPU();
  Tensor<float> x = ms::rand<float>({5, 4}) + 0.5f;
  auto f = [](const Tensor<float>& xx) {
    Tensor<float> p = ms::prod(ms::exp(xx), {1}, false);  // AI Core, then AI CPU
    Tensor<std::int64_t> i = ms::argmax(ms::leaky_relu(ms::neg(xx), 0.1), 1);
    return std::make_tuple(ms::sqrt(p), i);
  };
  auto [want_p, want_i] = f(x);
  backend::DeviceExecutable ex = backend::compile_for_device(backend::trace(f, x), emu());
  const std::string d = ex.dump();
  INFO(d);
  CHECK(ex.num_host_nodes() == 0);
  CHECK_THAT(dump_line(d, "prod_0"), Contains("@ai_cpu"));
  CHECK_THAT(dump_line(d, "leaky_relu_0"), Contains("@ai_cpu"));
  CHECK_THAT(dump_line(d, "argmax_0"), Contains("@ai_cpu"));
  CHECK_THAT(dump_line(d, "sqrt_0"), Contains("@ai_core"));
  auto out = ex.run({x});
  REQUIRE(out.size() == 2);
  require_equal_values(out[0], want_p, 1e-5);
  require_equal_values(out[1], want_i, 0);
}

TEST_CASE("device graph: pinning and cost decide against AI CPU", "[ascend][aicpu]") {
  EmuFixture fx;
  MS_SKIP_WITHOUT_AICPU();
  Tensor<float> x = ms::randn<float>({4});
  SECTION("pinned") {
    auto f = [](const Tensor<float>& xx) { return ms::exp(ms::erf(xx)); };
    backend::CompileOptions opt;
    opt.pin_ops = {"erf"};
    auto ex = backend::compile_for_device(backend::trace(f, x), emu(), opt);
    const std::string d = ex.dump();
    INFO(d);
    CHECK_THAT(dump_line(d, "erf_0"), Contains("@host_cpu (pinned, 1 copies in"));
    require_equal_values(ex.run({x})[0], f(x), 1e-6);
  }
  SECTION("operands already on the host: a tiny erf is cheaper there than a copy up") {
    // sin has no device mapping and runs on the host; erf of its result would need a copy up
    // plus an AI CPU launch, against half a microsecond on the host.
    auto f = [](const Tensor<float>& xx) { return ms::erf(ms::sin(xx)); };
    auto ex = backend::compile_for_device(backend::trace(f, x), emu());
    const std::string d = ex.dump();
    INFO(d);
    CHECK_THAT(dump_line(d, "sin_0"), Contains("@host_cpu (no device mapping, 1 copies in"));
    CHECK_THAT(dump_line(d, "erf_0"), Contains("@host_cpu (cost"));
    require_equal_values(ex.run({x})[0], f(x), 1e-6);
  }
  SECTION("a slower AI CPU model sends device operands down instead") {
    auto& model = emu().cost_model;
    const double saved = model.aicpu_launch_us;
    model.aicpu_launch_us = 1e6;
    auto f = [](const Tensor<float>& xx) { return ms::exp(ms::erf(ms::exp(xx))); };
    auto ex = backend::compile_for_device(backend::trace(f, x), emu());
    model.aicpu_launch_us = saved;
    const std::string d = ex.dump();
    INFO(d);
    CHECK_THAT(dump_line(d, "erf_0"), Contains("@host_cpu (cost, 1 copies in"));
    require_equal_values(ex.run({x})[0], f(x), 1e-5);
  }
}

TEST_CASE("ascend ai_cpu: profiled AI CPU kernels carry their engine", "[ascend][aicpu][profiler]") {
  EmuFixture fx;
  MS_SKIP_WITHOUT_AICPU();
  ctl().SetAiCpuLatency(2'000'000, 0);
  Tensor<float> x = ms::randn<float>({3, 5});
  auto f = [](const Tensor<float>& a) { return ms::exp(ms::erf(a)); };
  auto ex = backend::compile_for_device(backend::trace(f, x), emu());
  Tensor<float> xd = x.to(kAscend);
  ms::Profiler prof;
  Tensor<float> got, yd;
  {
    ms::ProfilerScope on(prof);
    got = Tensor<float>(ex.run({x})[0]);
    yd = ms::erf(xd);  // eager, on AI CPU: timed with device events too
  }
  require_equal_values(got, f(x), 1e-6);
  require_equal_values(yd, ms::erf(x), 1e-6);
  int erf_events = 0;
  for (auto& e : prof.events()) {
    if (e.type == "erf") {
      ++erf_events;
      CHECK(e.engine == "ai_cpu");
      CHECK(e.end_ns - e.start_ns >= 1'800'000);
    }
    if (e.type == "exp") CHECK(e.engine == "ai_core");
  }
  CHECK(erf_events == 2);
}

TEST_CASE("ascend ai_cpu: injected faults give a BackendError and leak nothing", "[ascend][aicpu]") {
  EmuFixture fx;
  MS_SKIP_WITHOUT_AICPU();
  Tensor<float> h = ms::ones<float>({4, 4});
  Tensor<float> d = h.to(kAscend);
  emu().synchronize_all();
  auto base = ms_emu_test::baseline();
  auto no_leak = [&] { ms_emu_test::check_no_leak(base); };
  SECTION("launch refused") {
    ctl().InjectFault(MS_EMU_FAULT_AICPU_LAUNCH, 0);
    CHECK_THAT(thrown<BackendError>([&] { (void)ms::erf(d); }),
               Contains("[ms.backend_error] erf on ascend:0 ((4, 4) float32): aclopCompileAndExecute(Erf) failed with code "
                        "507018: aclopCompileAndExecute(Erf): emulated AI CPU launch failure (injected fault)"));
  }
  SECTION("an AI CPU exception on the stream surfaces at the next synchronization") {
    ctl().InjectFault(MS_EMU_FAULT_STREAM, 0);
    Tensor<float> r = ms::leaky_relu(d, 0.5);  // enqueued fine; fails on the device
    CHECK_THAT(thrown<BackendError>([&] { (void)r.to(Device::cpu()); }),
               Contains("aclrtSynchronizeStream failed with code 507018"));
  }
  SECTION("in a device graph") {
    auto f = [](const Tensor<float>& a) { return ms::neg(ms::prod(ms::exp(a), {0}, false)); };
    {
      auto ex = backend::compile_for_device(backend::trace(f, h), emu());
      ctl().InjectFault(MS_EMU_FAULT_AICPU_LAUNCH, 1);  // the second step's prod fails
      CHECK_THAT(thrown<BackendError>([&] {
                   (void)ex.run_sunk(std::vector<AnyTensor>{Tensor<float>(ms::ones<float>({12, 4}))},
                                     backend::SinkOptions{3, {}});
                 }),
                 Contains("prod on ascend:0 ((4, 4) float32): aclopCompileAndExecute(ReduceProdD) failed with code 507018"));
      // The executable works again afterwards.
      require_equal_values(ex.run({h})[0], f(h), 1e-5);
    }
  }
  no_leak();
  CHECK(ms::erf(d).to(Device::cpu()).to_vector() == std::vector<float>(16, std::erf(1.0f)));
}

TEST_CASE("ascend ai_cpu: a runtime without the single-operator API has no AI CPU engine", "[ascend][aicpu]") {
  EmuFixture fx;
  (void)emu();  // sets MS_ASCEND_LIBS
  backend::ascend::AclApi api = backend::ascend::load_acl_api(MS_ASCEND_EMULATOR_PATH);
  REQUIRE(api.has_aicpu());
  api.aclopCompileAndExecute = nullptr;  // as a CANN without libacl_op_compiler.so would load
  CHECK_FALSE(api.has_aicpu());
  AscendBackend be(std::move(api), 0);
  be.warn_on_fallback = false;
  CHECK(be.engines() == std::vector<Engine>{Engine::ai_core});
  Tensor<float> x = ms::randn<float>({3, 4});
  const std::vector<ops::TensorMeta> m{{DType::f32, Shape{3, 4}}};
  CHECK_FALSE(be.supports(ops::erf_op, m, {}));
  CHECK_FALSE(be.supports(Engine::ai_cpu, ops::erf_op, m, {}));
  CHECK(be.supports(ops::exp_op, m, {}));
  {
    auto f = [](const Tensor<float>& a) { return ms::exp(ms::erf(a)); };
    auto ex = backend::compile_for_device(backend::trace(f, x), be);
    const std::string d = ex.dump();
    INFO(d);
    CHECK_THAT(dump_line(d, "erf_0"), Contains("@host_cpu (no device mapping, 1 copies in"));
    CHECK_THAT(d, Contains("host fallback: erf"));
    auto c0 = counters();
    require_equal_values(ex.run({x})[0], f(x), 1e-6);
    auto c1 = counters();
    CHECK(c1.aicpu_launches == c0.aicpu_launches);
  }
  be.synchronize_all();
}

}  // namespace
}  // namespace ascend_aicpu_test

#endif  // MS_ASCEND_EMULATOR_PATH
