// User-defined ops and frozen models on a device backend, tested on the Ascend adapter
// against the emulator: a custom op without a device kernel runs through its CPU kernel
// with the copies (eagerly and in device graphs); a registered device kernel
// (backend::register_device_kernel, OpBuilder::device_kernel) runs on ai_core, eagerly
// and in device graphs (captured too); and a frozen MLP loaded with
// InferenceModel{.backend = "ascend"} gives the original graph's device results bit for bit.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <unistd.h>

#include <ms/ms.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>
#include <ms/backend/device_executor.hpp>
#include <ms/inference.hpp>

#include "../ascend_emulator/ms_emulator.h"
#include "emu_fixture.hpp"
#include "../test_util.hpp"
#include "../../examples/custom_op.hpp"

#ifndef MS_ASCEND_EMULATOR_PATH

TEST_CASE("Ascend custom op and inference tests", "[ascend]") {
  WARN("SKIPPED: MS_ASCEND_EMULATOR_PATH is not defined, so the Ascend emulator was not built; "
       "the [ascend] custom op and inference tests did not run");
}

#else

// A namespace of its own: these helpers must not meet the other test files of the unit.
namespace device_custom_inference_test {
namespace {

using namespace ms;
using backend::ascend::AscendBackend;
using Catch::Matchers::Contains;
using ms_test::same_bits;
namespace fs = std::filesystem;
namespace nn = ms::nn;

const Device kNpu = Device::ascend(0);

using ms_emu_test::counters;
using ms_emu_test::ctl;
using ms_emu_test::emu;
using ms_emu_test::EmuFixture;

/// Every element within tol relative (plus tol absolute) of the reference.
void require_close(const AnyTensor& got, const AnyTensor& want, double tol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  auto g = Tensor<float>(backend::to(got, Device::cpu())).to_vector();
  auto w = Tensor<float>(want).to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << w[i]);
    CHECK(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
  }
}

using ms_emu_test::dump_line;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

Tensor<float> normal(std::vector<std::int64_t> shape, std::uint64_t seed) {
  manual_seed(seed);
  return ms::randn<float>(Shape(shape));
}

// x * 2 as x + x; the device kernel takes float32 only, so float64 calls run on the host.
const CustomOp twice_f32 =
    OpBuilder("test_dev_twice")
        .doc("x + x (device kernel for float32 only)")
        .inputs(1)
        .infer([](std::span<const ops::TensorMeta> in, const ops::Attrs&) { return in[0]; })
        .compute([](std::span<const AnyTensor> in, const ops::Attrs&) { return ops::add(in[0], in[0]); })
        .nondiff("a test op")
        .add();
const bool twice_on_ascend = backend::register_device_kernel(
    "test_dev_twice", DeviceType::ascend,
    [](const backend::DeviceKernelArgs& k) { k.launch("add", {k.in[0], k.in[0]}, k.out[0]); },
    [](const backend::Backend&, std::span<const ops::TensorMeta> in, const ops::Attrs&) {
      return in[0].dtype == DType::f32;
    });

// A device kernel that launches an op the device has no kernel for.
const CustomOp bad_device_kernel =
    OpBuilder("test_dev_bad_kernel")
        .doc("sin(x), with a device kernel that cannot run")
        .inputs(1)
        .infer([](std::span<const ops::TensorMeta> in, const ops::Attrs&) { return in[0]; })
        .compute([](std::span<const AnyTensor> in, const ops::Attrs&) { return ops::sin(in[0]); })
        .nondiff("a test op")
        .device_kernel(DeviceType::ascend,
                       [](const backend::DeviceKernelArgs& k) { k.launch("sin", {k.in[0]}, k.out[0]); })
        .add();

/// The inference forward pass of a module, its parameters named as in its state_dict.
graph::Graph capture_inference(nn::Module& m, const Tensor<float>& x) {
  m.eval();
  NoGradGuard no_grad;
  graph::Capture cap;
  cap.input(x, "x");
  for (auto& [name, p] : m.named_parameters()) cap.param(p, name);
  Tensor<float> y = m(x);
  cap.output(y);
  return cap.finish();
}

fs::path temp_model_dir() {
  auto d = fs::temp_directory_path() / fmt::format("ms_device_inference_test_{}", ::getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("device custom op: without a device kernel it runs through its CPU kernel, with copies", "[ascend][custom]") {
  EmuFixture fx;
  Tensor<float> x{{-2.0f, -0.5f, 0.0f}, {0.25f, 1.0f, 3.0f}};
  Tensor<float> d = x.to(kNpu);
  // softsign (a formula) and running_sum (an explicit kernel): one copy down, one copy up, no kernel.
  for (const CustomOp* op : {&guide::softsign, &guide::running_sum}) {
    INFO(op->name());
    auto c0 = counters();
    Tensor<float> y = (*op)(d);
    auto c1 = counters();
    CHECK(y.device() == kNpu);
    CHECK(c1.d2h_copies - c0.d2h_copies == 1);
    CHECK(c1.h2d_copies - c0.h2d_copies == 1);
    CHECK(c1.launches == c0.launches);
    // The same CPU kernel on the same bits.
    CHECK(same_bits(y.to(Device::cpu()), (*op)(x)));
    CHECK(contains(emu().fallback_ops(), op->name()));
    CHECK_FALSE(emu().supports(op->def(), std::vector<ops::TensorMeta>{{DType::f32, x.shape()}}, {}));
  }
  // Attributes reach the host kernel.
  Tensor<float> r = guide::running_sum(d, {{"axis", std::int64_t{0}}, {"reverse", true}});
  CHECK(same_bits(r.to(Device::cpu()), guide::running_sum(x, {{"axis", std::int64_t{0}}, {"reverse", true}})));
  // Neither has a device kernel; the registered ones are listed.
  const auto with_kernels = backend::device_kernel_ops(DeviceType::ascend);
  CHECK_FALSE(contains(with_kernels, "softsign"));
  CHECK_FALSE(contains(with_kernels, "running_sum"));
  CHECK(contains(with_kernels, "scaled_tanh"));
  CHECK(contains(with_kernels, "test_dev_twice"));
}

TEST_CASE("device custom op: a device graph runs it on the host between device kernels", "[ascend][custom]") {
  EmuFixture fx;
  Tensor<float> x = normal({4, 6}, 5), w = normal({6, 6}, 6);
  auto f = [&](const Tensor<float>& a) { return ms::relu(guide::running_sum(guide::softsign(ms::matmul(a, w)))); };
  Tensor<float> want = f(x);
  backend::DeviceExecutable ex = backend::compile_for_device(backend::trace(f, x), emu());
  const std::string d = ex.dump();
  INFO(d);
  CHECK_THAT(dump_line(d, "matmul_0"), Contains("@ai_core"));
  CHECK_THAT(dump_line(d, "softsign_0"), Contains("@host_cpu (no device mapping, 1 copies in"));
  CHECK_THAT(dump_line(d, "running_sum_0"), Contains("@host_cpu (no device mapping"));
  CHECK_THAT(d, Contains("host fallback: running_sum, softsign"));
  auto c0 = counters();
  auto out = ex.run({x});
  auto c1 = counters();
  REQUIRE(out.size() == 1);
  require_close(out[0], want);
  // Within the step only the matmul's result moves (down, for softsign): relu after running_sum is
  // cheaper on the host than a copy up. run() adds its staging: the input up, and the result
  // (host-produced here) up into the output slab and down once.
  CHECK_THAT(dump_line(d, "relu_0"), Contains("@host_cpu (cost"));
  CHECK_THAT(d, Contains("per step 0 host->device and 1 device->host copies"));
  CHECK(c1.h2d_copies - c0.h2d_copies == 2);
  CHECK(c1.d2h_copies - c0.d2h_copies == 2);
  Tensor<float> x2 = normal({4, 6}, 7);
  require_close(ex.run({x2})[0], f(x2));
}

TEST_CASE("device custom op: a registered device kernel runs on ai_core eagerly", "[ascend][custom]") {
  EmuFixture fx;
  Tensor<float> x = normal({3, 5}, 11), s = normal({5}, 12);
  Tensor<float> xd = x.to(kNpu), sd = s.to(kNpu);
  Tensor<float> want = guide::scaled_tanh(x, s);
  REQUIRE(want.device().is_cpu());
  CHECK(emu().supports(guide::scaled_tanh.def(), std::vector<ops::TensorMeta>{{DType::f32, x.shape()}, {DType::f32, s.shape()}}, {}));
  CHECK(emu().kernels(guide::scaled_tanh.def()) == "registered device kernel");
  auto c0 = counters();
  Tensor<float> y = guide::scaled_tanh(xd, sd);
  auto c1 = counters();
  CHECK(y.device() == kNpu);
  CHECK(c1.launches - c0.launches == 2);  // tanh, then mul
  CHECK(c1.h2d_copies == c0.h2d_copies);
  CHECK(c1.d2h_copies == c0.d2h_copies);
  require_close(y, want);
  CHECK_FALSE(contains(emu().fallback_ops(), "scaled_tanh"));
  // The same tanh and mul launched by hand give the same bits.
  Tensor<float> by_hand = ms::mul(ms::tanh(xd), sd);
  CHECK(same_bits(y.to(Device::cpu()), by_hand.to(Device::cpu())));

  // A kernel's own supports() decides: float64 is declined and runs on the host, with copies.
  Tensor<float> t = twice_f32(xd);
  require_close(t, ms::add(x, x));
  Tensor<double> x64 = ms::cast<double>(x);
  auto c2 = counters();
  Tensor<double> t64 = twice_f32(x64.to(kNpu));
  auto c3 = counters();
  CHECK(c3.d2h_copies - c2.d2h_copies == 1);
  CHECK(c3.launches - c2.launches == 0);
  CHECK(same_bits(t64.to(Device::cpu()), ms::add(x64, x64)));
  CHECK(contains(emu().fallback_ops(), "test_dev_twice"));
}

TEST_CASE("device custom op: a registered device kernel runs on ai_core in device graphs", "[ascend][custom]") {
  EmuFixture fx;
  Tensor<float> x = normal({4, 8}, 21), w = normal({6, 8}, 22), b = normal({6}, 23), g = normal({6}, 24);
  auto f = [&](const Tensor<float>& a) { return ms::softmax(guide::scaled_tanh(ms::linear(a, w, b), g), 1); };
  Tensor<float> want = f(x);
  for (bool capture : {false, true}) {
    INFO("capture " << capture);
    backend::CompileOptions opt;
    opt.capture = capture;
    backend::DeviceExecutable ex = backend::compile_for_device(backend::trace(f, x), emu(), opt);
    const std::string d = ex.dump();
    INFO(d);
    CHECK_THAT(dump_line(d, "scaled_tanh_0"), Contains("@ai_core stream 0 (device kernel"));
    CHECK_THAT(d, Contains("3 device kernels, 0 host nodes"));
    CHECK(ex.num_host_nodes() == 0);
    auto c0 = counters();
    require_close(ex.run({x})[0], want);
    auto c1 = counters();
    CHECK(c1.d2h_copies - c0.d2h_copies == 1);  // only the result comes back
    // The per-step scratch (tanh's result) is reused by the next run.
    Tensor<float> x2 = normal({4, 8}, 25);
    require_close(ex.run({x2})[0], f(x2));
    CHECK(ex.captured() == (capture && emu().can_capture()));
  }
}

TEST_CASE("device custom op: registration and launch errors name the op and the device", "[ascend][custom]") {
  EmuFixture fx;
  auto noop = [](const backend::DeviceKernelArgs&) {};
  MS_REQUIRE_THROWS_MSG(backend::register_device_kernel("scaled_tanh", DeviceType::ascend, noop), ms::ValueError,
                        "[ms.value_error] register_device_kernel: scaled_tanh already has a device kernel for ascend");
  MS_REQUIRE_THROWS_MSG(backend::register_device_kernel("no_such_op", DeviceType::ascend, noop), ms::ValueError,
                        "[ms.value_error] register_device_kernel: no op named 'no_such_op' is registered (register "
                        "the op first)");
  MS_REQUIRE_THROWS_MSG(backend::register_device_kernel("running_sum", DeviceType::cpu, noop), ms::ValueError,
                        "[ms.value_error] register_device_kernel: running_sum: the CPU runs the op's own kernel; device "
                        "kernels are for other devices");
  CHECK(backend::find_device_kernel(guide::running_sum.def(), DeviceType::ascend) == nullptr);
  Tensor<float> xd = Tensor<float>{0.5f, -1.0f, 2.0f}.to(kNpu);
  MS_REQUIRE_THROWS_MSG(bad_device_kernel(xd), ms::BackendError,
                        "[ms.backend_error] test_dev_bad_kernel on ascend:0 ((3,) float32): test_dev_bad_kernel: its "
                        "device kernel launches sin on ascend:0 ((3,) float32), which that backend does not run "
                        "natively");
  // A CPU call of the same op is untouched.
  require_close(bad_device_kernel(Tensor<float>{0.5f}), ms::sin(Tensor<float>{0.5f}));
}

TEST_CASE("device inference: a frozen MLP on the device equals the original graph bit for bit", "[ascend][freeze]") {
  EmuFixture fx;
  manual_seed(3);
  auto model = nn::mlp(64, {32, 32}, 10);
  Tensor<float> x = normal({8, 1, 8, 8}, 31), x2 = normal({8, 1, 8, 8}, 32);
  graph::Graph g = capture_inference(*model, x);
  const fs::path dir = temp_model_dir(), path = dir / "mlp.msf";
  ms::freeze(g, path, {.metadata = {{"model", "mlp"}}});

  CHECK(contains(ms::inference_backends(), "cpu"));
  CHECK(contains(ms::inference_backends(), "ascend"));
  backend::DeviceExecutable original = backend::compile_for_device(g, emu());
  backend::Executable cpu = backend::compile(g);
  for (const char* name : {"ascend", "ascend:0"}) {
    INFO(name);
    InferenceModel loaded = InferenceModel::load(path, {.backend = name});
    CHECK(loaded.backend_name() == name);
    CHECK(loaded.device() == kNpu);
    CHECK(loaded.on_device());
    CHECK(loaded.metadata().at("model") == "mlp");
    CHECK(loaded.device_executable().num_host_nodes() == 0);
    const std::string d = loaded.compiled_str();
    INFO(d);
    CHECK_THAT(d, Contains("# device graph on ascend:0"));
    CHECK_THAT(dump_line(d, "linear_0"), Contains("@ai_core"));
    CHECK(loaded.compiled_str() == original.dump());
    for (const Tensor<float>& in : {x, x2}) {
      AnyTensor got = loaded.run({in})[0];
      CHECK(got.device().is_cpu());
      CHECK(same_bits(got, original.run({in})[0]));
      require_close(got, cpu.run({in})[0]);
    }
  }
  InferenceModel on_cpu = InferenceModel::load(path);
  CHECK(on_cpu.device() == Device::cpu());
  CHECK_FALSE(on_cpu.on_device());
  MS_REQUIRE_THROWS_MSG(on_cpu.device_executable(), ms::BackendError,
                        "[ms.backend_error] inference: the model runs on the cpu; use executable()");
  InferenceModel on_npu = InferenceModel::load(path, {.backend = "ascend"});
  MS_REQUIRE_THROWS_MSG(on_npu.executable(), ms::BackendError,
                        "[ms.backend_error] inference: the model runs on ascend:0; use device_executable()");
  MS_REQUIRE_THROWS_MSG(on_npu.run({normal({8, 64}, 1)}), ms::ShapeError,
                        "[ms.shape_error] run: input 0 must be float32 (8, 1, 8, 8), got float32 (8, 64)");
  for (const char* bad : {"ascend:x", "ascend0", "npu", "cpu:0"})
    MS_REQUIRE_THROWS_MSG(InferenceModel::load(path, {.backend = bad}), ms::BackendError,
                          fmt::format("[ms.backend_error] inference: backend '{}' is not available in this build "
                                      "(available: cpu, ascend)",
                                      bad));
  fs::remove_all(dir);
}

TEST_CASE("device inference: a frozen graph with user ops places each op as a captured graph does", "[ascend][freeze][custom]") {
  EmuFixture fx;
  Tensor<float> x = normal({4, 6}, 41), w = normal({6, 6}, 42), s = normal({6}, 43);
  graph::Graph g;
  {
    NoGradGuard no_grad;
    graph::Capture cap;
    cap.input(x, "x");
    cap.param(w, "w");
    cap.param(s, "scale");
    Tensor<float> h = guide::scaled_tanh(ms::matmul(x, w), s);
    cap.output(guide::running_sum(guide::softsign(h)));
    cap.output(h);
    g = cap.finish();
  }
  const std::string bytes = ms::freeze_to_bytes(g);
  InferenceModel m =
      InferenceModel::from_graph(ms::load_frozen_from_memory(bytes.data(), bytes.size()), {.backend = "ascend"});
  backend::DeviceExecutable original = backend::compile_for_device(g, emu());
  backend::Executable cpu = backend::compile(g);
  const std::string d = m.compiled_str();
  INFO(d);
  CHECK_THAT(dump_line(d, "scaled_tanh_0"), Contains("@ai_core"));
  CHECK_THAT(dump_line(d, "softsign_0"), Contains("@host_cpu (no device mapping"));
  CHECK_THAT(dump_line(d, "running_sum_0"), Contains("@host_cpu (no device mapping"));
  for (const Tensor<float>& in : {x, normal({4, 6}, 44)}) {
    auto got = m.run({in}), want = original.run({in}), ref = cpu.run({in});
    REQUIRE(got.size() == 2);
    for (std::size_t i = 0; i < 2; ++i) {
      INFO("output " << i);
      CHECK(same_bits(got[i], want[i]));
      require_close(got[i], ref[i]);
    }
  }
}

}  // namespace device_custom_inference_test

#endif
