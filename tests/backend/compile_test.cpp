// Tests of the one compile entry (ms/compile.hpp): the same captured graph and the
// same CompileOptions compiled for the CPU backend and for a device backend (the Ascend
// adapter on the emulator) through backend::compile(graph, backend, options); both give
// the eager results, report their device, planned memory and dump through CompiledGraph,
// check their inputs the same way, and read the options that apply to them.

#include <catch2/catch.hpp>

#include <cmath>
#include <type_traits>

#include <ms/ms.hpp>
#include <ms/compile.hpp>

#ifdef MS_ASCEND_EMULATOR_PATH
#include "emu_fixture.hpp"
#endif
#include "../test_util.hpp"

namespace compile_test {
namespace {

using namespace ms;
using Catch::Matchers::Contains;

void require_close(const AnyTensor& got, const AnyTensor& want, double tol = 1e-5) {
  REQUIRE(got.device().is_cpu());
  REQUIRE(got.shape() == want.shape());
  auto g = Tensor<float>(got).to_vector(), w = Tensor<float>(want).to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
  }
}

struct Net {
  Tensor<float> w1 = ms::randn<float>({16, 8}), b1 = ms::randn<float>({16}), w2 = ms::randn<float>({4, 16});
  Tensor<float> operator()(const Tensor<float>& x) const {
    return ms::softmax(ms::linear(ms::relu(ms::linear(x, w1, b1)) * 0.5f, w2), 1);
  }
};

/// Runs the compiled graph on two inputs and compares with eager; checks what every backend reports.
void check_compiled(backend::CompiledGraph& exe, const Net& net, Device want_device) {
  CHECK(exe.device() == want_device);
  for (int k = 0; k < 2; ++k) {
    Tensor<float> x = ms::randn<float>({5, 8});
    auto out = exe.run({x});
    REQUIRE(out.size() == 1);
    require_close(out[0], net(x));
  }
  REQUIRE(exe.planned_memory() != nullptr);
  CHECK(exe.planned_memory()->peak >= exe.planned_memory()->lower_bound);
  CHECK(exe.planned_memory()->lower_bound > 0);
  CHECK_THAT(exe.dump(), Contains("linear"));
  CHECK(exe.graph().inputs().size() == 1);
  CHECK(exe.id() >= 0);
  // The same typed errors on every backend.
  const Tensor<float> bad_shape = ms::randn<float>({4, 8});
  const Tensor<double> bad_dtype = ms::randn<double>({5, 8});
  CHECK_THROWS_AS(exe.run({bad_shape}), ShapeError);
  CHECK_THROWS_WITH(exe.run({bad_shape}), Contains("run: input 0 must be float32 (5, 8), got float32 (4, 8)"));
  CHECK_THROWS_AS(exe.run({bad_dtype}), DTypeError);
  CHECK_THROWS_AS(exe.run({}), ValueError);
  CHECK_THROWS_WITH(exe.run({}), Contains("the graph takes 1 inputs, got 0"));
}

static_assert(std::is_same_v<backend::DeviceCompileOptions, backend::CompileOptions>,
              "the old name of the device options is the one CompileOptions");

}  // namespace

TEST_CASE("compile: one entry compiles a graph for the CPU backend", "[compile]") {
  manual_seed(3);
  Net net;
  backend::CompileOptions opt;
  opt.max_streams = 1;  // a device field: the CPU ignores it
  auto exe = backend::compile(graph::trace(net, ms::randn<float>({5, 8})), backend::backend_for(Device::cpu()), opt);
  REQUIRE(dynamic_cast<backend::Executable*>(exe.get()) != nullptr);
  check_compiled(*exe, net, Device::cpu());
  // The CPU fuses (relu * 0.5 is a GEMM epilogue) and its plan is the executable's own.
  const auto& cpu = dynamic_cast<backend::Executable&>(*exe);
  CHECK(cpu.pass_report().get("fuse") + cpu.pass_report().get("fuse_epilogue") > 0);
  CHECK(exe->planned_memory() == &cpu.memory_plan());
}

TEST_CASE("compile: the CPU's options reach its executable through the one entry", "[compile]") {
  manual_seed(4);
  Net net;
  backend::CompileOptions plain;
  plain.optimize = false;
  auto exe = backend::compile(graph::trace(net, ms::randn<float>({5, 8})), backend::backend_for(Device::cpu()), plain);
  // Without the pass pipeline no node is fused: every captured op is a node of its own.
  CHECK(exe->graph().nodes().size() >= 5);
  CHECK_THAT(exe->dump(), !Contains("fused"));
  check_compiled(*exe, net, Device::cpu());
}

#ifdef MS_ASCEND_EMULATOR_PATH
TEST_CASE("compile: one entry compiles the same graph for a device backend", "[compile][ascend]") {
  ms_emu_test::EmuFixture fx;
  manual_seed(3);
  Net net;
  backend::CompileOptions opt;
  opt.max_streams = 1;
  opt.pin_ops = {"softmax"};  // a device field: softmax runs on the host
  auto exe = backend::compile(graph::trace(net, ms::randn<float>({5, 8})), ms_emu_test::emu(), opt);
  auto* dev = dynamic_cast<backend::DeviceExecutable*>(exe.get());
  REQUIRE(dev != nullptr);
  check_compiled(*exe, net, Device::parse("ascend:0"));
  CHECK(dev->num_streams() == 1);
  INFO(exe->dump());
  CHECK_THAT(ms_emu_test::dump_line(exe->dump(), "softmax_0"), Contains("@host_cpu (pinned"));
  // The CPU's default pass pipeline fuses; on a device fusion is off (fused programs are a
  // host kernel), so the linear layers stay device kernels.
  CHECK_THAT(exe->dump(), !Contains("fused"));
  CHECK_THAT(ms_emu_test::dump_line(exe->dump(), "linear_0"), Contains("@ai_core"));
}

TEST_CASE("compile: InferenceModel runs through the one entry on the CPU and a device", "[compile][ascend]") {
  ms_emu_test::EmuFixture fx;
  manual_seed(5);
  Net net;
  graph::Graph g = graph::trace(net, ms::randn<float>({5, 8}));
  (void)ms_emu_test::emu();  // registers the ascend backend
  auto cpu = InferenceModel::from_graph(g);
  auto npu = InferenceModel::from_graph(g, {.backend = "ascend:0"});
  CHECK_FALSE(cpu.on_device());
  CHECK(npu.on_device());
  CHECK(cpu.compiled().device() == Device::cpu());
  CHECK(npu.compiled().device() == Device::parse("ascend:0"));
  CHECK_THROWS_AS(cpu.device_executable(), BackendError);
  CHECK_THROWS_AS(npu.executable(), BackendError);
  Tensor<float> x = ms::randn<float>({5, 8});
  require_close(cpu.run({x})[0], net(x));
  require_close(npu.run({x})[0], net(x));
  CHECK_THROWS_AS(npu.run({ms::randn<float>({2, 8})}), ShapeError);
}
#endif

}  // namespace compile_test
