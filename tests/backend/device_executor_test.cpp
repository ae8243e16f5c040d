// Tests of graph compilation for a device (ms/backend/device_executor.hpp) on the
// Ascend adapter against the emulator: results equal the CPU, engine assignment
// (aclnn, AI CPU, host fallback, cost, pinning) visible in the IR dump, two independent
// branches overlapping on two streams, loop sinking with host<->device
// interactions == ceil(steps / sink_size), capture/replay, faults during a sunk
// run, and an MLP trained on the device reaching the CPU's accuracy.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>

#include <ms/ms.hpp>
#include <nlohmann/json.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>
#include <ms/backend/device_executor.hpp>

#include "../ascend_emulator/ms_emulator.h"
#include "emu_fixture.hpp"
#include "../test_util.hpp"

#ifndef MS_ASCEND_EMULATOR_PATH

TEST_CASE("Ascend device graph tests", "[ascend]") {
  WARN("SKIPPED: MS_ASCEND_EMULATOR_PATH is not defined, so the Ascend emulator was not built; "
       "the [ascend] device graph tests did not run");
}

#else

// Everything below lives in a namespace of its own: the emulator helpers and the
// using-directive for ms must not meet the other test files compiled in the same unit.
namespace device_executor_test {
namespace {

using namespace ms;
using backend::ascend::AscendBackend;
using Catch::Matchers::Contains;
namespace nn = ms::nn;

using ms_emu_test::counters;
using ms_emu_test::ctl;
using ms_emu_test::emu;
using ms_emu_test::EmuFixture;

void require_close(const AnyTensor& got, const AnyTensor& want, double tol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  auto g = Tensor<float>(got).to_vector(), w = Tensor<float>(want).to_vector();
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i);
    CHECK(std::abs(g[i] - w[i]) <= tol * (1 + std::abs(w[i])));
  }
}

using ms_emu_test::dump_line;

using ms_emu_test::thrown;

std::shared_ptr<nn::Sequential> small_mlp(std::int64_t in, std::int64_t hidden, std::int64_t out) {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(in, hidden), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(hidden, out)});
}

/// A model, its optimizer and its training step (forward, loss, gradients, Adam update).
struct Trainer {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::Adam> opt;
  std::vector<AnyTensor> params;
  Trainer(std::int64_t in, std::int64_t hidden, std::int64_t out, double lr) {
    manual_seed(0);
    model = small_mlp(in, hidden, out);
    opt = std::make_unique<optim::Adam>(model->parameters(), lr);
    params = model->parameters_any();
  }
  auto step_fn() {
    return [this](const Tensor<float>& x, const Tensor<std::int64_t>& y) {
      Tensor<float> logits = (*model)(x);
      Tensor<float> loss = ms::cross_entropy(logits, y);
      opt->step(ms::autograd::grad(loss, params));
      return std::make_tuple(loss, logits);
    };
  }
};

Tensor<float> rows(const Tensor<float>& t, std::int64_t a, std::int64_t b) { return t.slice(0, a, b).contiguous(); }
Tensor<std::int64_t> rows(const Tensor<std::int64_t>& t, std::int64_t a, std::int64_t b) {
  return t.slice(0, a, b).contiguous();
}

}  // namespace

TEST_CASE("device graph: results equal the CPU and the dump shows the engines", "[ascend]") {
  EmuFixture fx;
  Tensor<float> x = ms::randn<float>({4, 6}), w = ms::randn<float>({3, 6}), b = ms::randn<float>({3});
  auto f = [&](const Tensor<float>& xx) { return ms::softmax(ms::relu(ms::linear(xx, w, b)), 1); };
  Tensor<float> want = f(x);
  backend::DeviceExecutable ex = backend::compile_for_device(backend::trace(f, x), emu());
  auto out = ex.run({x});
  REQUIRE(out.size() == 1);
  CHECK(out[0].device().is_cpu());
  require_close(out[0], want);
  const std::string d = ex.dump();
  INFO(d);
  CHECK_THAT(d, Contains("# device graph on ascend:0: 3 device kernels, 0 host nodes"));
  CHECK_THAT(dump_line(d, "linear_0"), Contains("@ai_core stream 0 (aclnn"));
  CHECK_THAT(dump_line(d, "softmax_0"), Contains("@ai_core stream 0 (aclnn"));
  // A second run with other data reuses the compiled buffers.
  Tensor<float> x2 = ms::randn<float>({4, 6});
  require_close(ex.run({x2})[0], f(x2));
}

TEST_CASE("device graph: engine assignment by support, cost and pinning", "[ascend]") {
  EmuFixture fx;
  Tensor<float> x = ms::randn<float>({8, 8}), w = ms::randn<float>({8, 8});
  // sin has neither an aclnn nor an AI CPU row: host. neg of its result is cheaper on the
  // host than a copy up. The matmul reads only device values: device. relu is pinned to the host.
  auto f = [&](const Tensor<float>& xx) {
    Tensor<float> a = ms::neg(ms::sin(xx));
    Tensor<float> m = ms::matmul(xx, w);
    return ms::add(ms::relu(m), a);
  };
  Tensor<float> want = f(x);
  backend::CompileOptions opt;
  opt.pin_ops = {"relu"};
  backend::DeviceExecutable ex = backend::compile_for_device(backend::trace(f, x), emu(), opt);
  const std::string d = ex.dump();
  INFO(d);
  CHECK_THAT(dump_line(d, "sin_0"), Contains("@host_cpu (no device mapping, 1 copies in"));
  CHECK_THAT(dump_line(d, "neg_0"), Contains("@host_cpu (cost"));
  CHECK_THAT(dump_line(d, "matmul_0"), Contains("@ai_core"));
  CHECK_THAT(dump_line(d, "relu_0"), Contains("@host_cpu (pinned, 1 copies in"));
  CHECK_THAT(d, Contains("host fallback: sin"));
  CHECK(ex.num_host_nodes() == 4);  // sin, neg, relu, and add (its inputs are both on the host)
  auto c0 = counters();
  require_close(ex.run({x})[0], want);
  auto c1 = counters();
  // One sync before the host stretch (sin, neg), one before relu's, one at the end.
  CHECK(ex.interactions() == 3);
  CHECK(c1.syncs - c0.syncs >= 3);
}

TEST_CASE("device graph: independent branches overlap on two streams", "[ascend]") {
  EmuFixture fx;
  Tensor<float> x = ms::randn<float>({4, 4}), y = ms::randn<float>({4, 4});
  auto f = [](const Tensor<float>& a, const Tensor<float>& b) {
    Tensor<float> p = ms::tanh(ms::tanh(ms::tanh(ms::tanh(a))));
    Tensor<float> q = ms::sigmoid(ms::sigmoid(ms::sigmoid(ms::sigmoid(b))));
    return ms::add(p, q);
  };
  Tensor<float> want = f(x, y);
  backend::CompileOptions one, two;
  one.max_streams = 1;
  two.max_streams = 2;
  auto serial = backend::compile_for_device(backend::trace(f, x, y), emu(), one);
  auto parallel = backend::compile_for_device(backend::trace(f, x, y), emu(), two);
  CHECK(serial.num_streams() == 1);
  REQUIRE(parallel.num_streams() == 2);
  const std::string d = parallel.dump();
  INFO(d);
  CHECK_THAT(dump_line(d, "tanh_0"), Contains("stream 0"));
  CHECK_THAT(dump_line(d, "sigmoid_0"), Contains("stream 1"));
  CHECK_THAT(dump_line(d, "add_0"), Contains("waits [sigmoid_3]"));
  // 20 ms per kernel (80 ms per branch), so that a kernel of one branch is still executing
  // when the other branch's kernels start; the emulator counts the most kernels executing
  // at once (a count, not a clock, so the check holds on a loaded machine).
  ctl().SetLatency(20'000'000, 0, 0, 0);
  auto peak = [&](backend::DeviceExecutable& ex) {
    ctl().ResetCounters();
    auto out = ex.run({x, y});
    require_close(out[0], want);
    return counters().peak_concurrent_kernels;
  };
  CHECK(peak(serial) == 1);
  CHECK(peak(parallel) == 2);
}

TEST_CASE("device graph: sunk training takes ceil(steps / sink_size) interactions", "[ascend]") {
  EmuFixture fx;
  const std::int64_t B = 8, steps = 10;
  Tensor<float> X = ms::randn<float>({steps * B, 1, 4, 4});
  Tensor<std::int64_t> Y = ms::randint<std::int64_t>(0, 3, {steps * B});
  // Reference: the CPU replays the same training step.
  Trainer cpu(16, 8, 3, 0.01);
  auto jit = ms::jit(cpu.step_fn());
  std::vector<float> cpu_loss;
  for (std::int64_t s = 0; s < steps; ++s) cpu_loss.push_back(std::get<0>(jit(rows(X, s * B, (s + 1) * B), rows(Y, s * B, (s + 1) * B))).item());

  for (std::int64_t sink : {std::int64_t{1}, std::int64_t{3}, std::int64_t{0}}) {
    INFO("sink_size " << sink);
    Trainer dev(16, 8, 3, 0.01);
    auto step = dev.step_fn();
    // Tracing runs step 0 on the host; the device runs steps 1..9.
    graph::Graph g = backend::trace(step, rows(X, 0, B), rows(Y, 0, B));
    auto ex = backend::compile_for_device(std::move(g), emu());
    CHECK(ex.num_host_nodes() == 0);
    const std::int64_t n = steps - 1;
    std::vector<std::int64_t> reported;
    backend::SinkOptions so;
    so.sink_size = sink;
    so.on_sink = [&](std::int64_t first, std::int64_t k, const std::vector<AnyTensor>& outs) {
      reported.push_back(first);
      CHECK(outs[0].shape() == Shape{k});
    };
    auto c0 = counters();
    auto r = ex.run_sunk(std::vector<AnyTensor>{rows(X, B, steps * B), rows(Y, B, steps * B)}, so);
    auto c1 = counters();
    const std::int64_t sinks = sink == 0 ? 1 : (n + sink - 1) / sink;
    CHECK(r.sinks == sinks);
    CHECK(r.interactions == static_cast<std::uint64_t>(sinks));
    CHECK(c1.syncs - c0.syncs == static_cast<std::uint64_t>(sinks));
    CHECK(c1.h2d_copies - c0.h2d_copies == static_cast<std::uint64_t>(2 * sinks));  // x and y, once per sink
    CHECK(c1.d2h_copies - c0.d2h_copies == static_cast<std::uint64_t>(2 * sinks));  // loss and logits
    CHECK(reported.size() == static_cast<std::size_t>(sinks));
    REQUIRE(r.outputs[0].shape() == Shape{n});
    auto dl = Tensor<float>(r.outputs[0]).to_vector();
    for (std::int64_t s = 0; s < n; ++s) CHECK(dl[static_cast<std::size_t>(s)] == Approx(cpu_loss[static_cast<std::size_t>(s + 1)]).epsilon(1e-4));
    // The trained weights come back to the host model and equal the CPU's.
    ex.sync_params_to_host();
    for (std::size_t p = 0; p < dev.params.size(); ++p) require_close(dev.params[p], cpu.params[p], 1e-4);
  }
}

TEST_CASE("device graph: a captured iteration replays once per step", "[ascend]") {
  EmuFixture fx;
  const std::int64_t B = 4, steps = 6;
  Tensor<float> X = ms::randn<float>({steps * B, 1, 2, 3});
  Tensor<std::int64_t> Y = ms::randint<std::int64_t>(0, 2, {steps * B});
  std::vector<float> plain, replayed;
  for (bool capture : {false, true}) {
    Trainer t(6, 5, 2, 0.05);
    auto step = t.step_fn();
    backend::CompileOptions opt;
    opt.capture = capture;
    opt.max_streams = 1;
    auto ex = backend::compile_for_device(backend::trace(step, rows(X, 0, B), rows(Y, 0, B)), emu(), opt);
    auto c0 = counters();
    auto r = ex.run_sunk(std::vector<AnyTensor>{rows(X, B, steps * B), rows(Y, B, steps * B)});
    auto c1 = counters();
    // Without capture on the SoC (Atlas training series) the same run goes uncaptured.
    const bool captured = capture && emu().can_capture();
    CHECK(ex.captured() == captured);
    CHECK(c1.capture_replays - c0.capture_replays == (captured ? static_cast<std::uint64_t>(steps - 1) : 0u));
    if (captured) CHECK(c1.launches == c0.launches);  // only the captured kernels ran
    (capture ? replayed : plain) = Tensor<float>(r.outputs[0]).to_vector();
  }
  REQUIRE(plain.size() == replayed.size());
  for (std::size_t i = 0; i < plain.size(); ++i) CHECK(replayed[i] == Approx(plain[i]).epsilon(1e-6));
}

TEST_CASE("device graph: a device fault in a sunk run is a BackendError and leaks nothing", "[ascend]") {
  EmuFixture fx;
  const std::int64_t B = 4, steps = 5;
  Tensor<float> X = ms::randn<float>({steps * B, 1, 2, 3});
  Tensor<std::int64_t> Y = ms::randint<std::int64_t>(0, 2, {steps * B});
  emu().synchronize_all();
  auto base = ms_emu_test::baseline();
  {
    Trainer t(6, 5, 2, 0.05);
    auto step = t.step_fn();
    auto ex = backend::compile_for_device(backend::trace(step, rows(X, 0, B), rows(Y, 0, B)), emu());
    ctl().InjectFault(MS_EMU_FAULT_STREAM, 30);
    CHECK_THAT(thrown<BackendError>([&] { ex.run_sunk(std::vector<AnyTensor>{X, Y}); }),
               Contains("aclrtSynchronizeStream failed with code 507015"));
    ctl().InjectFault(MS_EMU_FAULT_OP_LAUNCH, 3);
    CHECK_THAT(thrown<BackendError>([&] { ex.run_sunk(std::vector<AnyTensor>{X, Y}); }),
               Contains("failed with code 361001"));
  }
  emu().empty_cache();  // blocks the executable gave back wait in the adapter's pool
  auto c = counters();
  CHECK(c.live_allocations == base.live_allocations);
  CHECK(c.live_streams == base.live_streams);
  CHECK(c.live_events == base.live_events);
  CHECK(c.live_tensors == base.live_tensors);
  CHECK(c.live_executors == base.live_executors);
}

TEST_CASE("device graph: an MLP trained on the device with sinking reaches the CPU accuracy", "[ascend][slow]") {
  auto dir = data::find_fashion_mnist();
  if (!dir) {
    WARN("SKIPPED: Fashion-MNIST not found (install dataset-fashion-mnist or set MS_FASHION_MNIST_DIR)");
    return;
  }
  EmuFixture fx;
  auto train = data::load_fashion_mnist(*dir, true, true);
  auto test = data::load_fashion_mnist(*dir, false, true);
  const std::int64_t B = 50, steps = 40, epochs = 3;  // 2000 images, 3 epochs
  Tensor<float> X = rows(train.images, 0, steps * B);
  Tensor<std::int64_t> Y = rows(train.labels, 0, steps * B);
  Tensor<float> TX = rows(test.images, 0, 1000);
  Tensor<std::int64_t> TY = rows(test.labels, 0, 1000);
  auto accuracy = [&](nn::Sequential& m) {
    NoGradGuard ng;
    Tensor<std::int64_t> pred = ms::argmax(m(TX), 1);
    return static_cast<double>(ms::sum(ms::cast<std::int64_t>(pred == TY)).item()) / 1000.0;
  };
  Trainer cpu(784, 32, 10, 2e-3);
  auto jit = ms::jit(cpu.step_fn());
  for (std::int64_t e = 0; e < epochs; ++e)
    for (std::int64_t s = 0; s < steps; ++s) jit(rows(X, s * B, (s + 1) * B), rows(Y, s * B, (s + 1) * B));
  const double cpu_acc = accuracy(*cpu.model);

  Trainer dev(784, 32, 10, 2e-3);
  auto step = dev.step_fn();
  auto ex = backend::compile_for_device(backend::trace(step, rows(X, 0, B), rows(Y, 0, B)), emu());
  auto c0 = counters();
  // Epoch 1 continues after the traced step; the others run whole. sink_size: one epoch.
  ex.run_sunk(std::vector<AnyTensor>{rows(X, B, steps * B), rows(Y, B, steps * B)});
  for (std::int64_t e = 1; e < epochs; ++e) ex.run_sunk(std::vector<AnyTensor>{X, Y});
  auto c1 = counters();
  CHECK(c1.syncs - c0.syncs == static_cast<std::uint64_t>(epochs));
  ex.sync_params_to_host();
  const double dev_acc = accuracy(*dev.model);
  INFO("cpu accuracy " << cpu_acc << ", device accuracy " << dev_acc);
  CHECK(cpu_acc > 0.6);
  CHECK(std::abs(dev_acc - cpu_acc) <= 0.01);
}

// ---- observability on the device: profiler timing by device events, dump of device tensors

TEST_CASE("device graph: the profiler times kernels with device events, one track per stream", "[ascend][profiler]") {
  EmuFixture fx;
  Tensor<float> x = ms::randn<float>({4, 4}), y = ms::randn<float>({4, 4});
  auto f = [](const Tensor<float>& a, const Tensor<float>& b) {
    Tensor<float> p = ms::tanh(ms::tanh(ms::tanh(a)));
    Tensor<float> q = ms::sigmoid(ms::sigmoid(ms::sigmoid(b)));
    return ms::add(p, q);
  };
  backend::CompileOptions two;
  two.max_streams = 2;
  auto ex = backend::compile_for_device(backend::trace(f, x, y), emu(), two);
  REQUIRE(ex.num_streams() == 2);
  const std::vector<float> plain = Tensor<float>(ex.run({x, y})[0]).to_vector();
  ctl().SetLatency(10'000'000, 0, 0, 0);  // every kernel takes at least 10 ms on its stream
  ms::Profiler prof;
  std::vector<float> profiled;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ms::ProfilerScope on(prof);
    profiled = Tensor<float>(ex.run({x, y})[0]).to_vector();
  }
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(profiled == plain);  // profiling never changes results
  auto ev = prof.events();
  REQUIRE(ev.size() == 7);  // 7 kernels, one event each
  std::map<int, std::vector<ms::ProfileEvent>> by_stream;
  for (auto& e : ev) {
    INFO(e.name << " " << e.type << " on stream " << e.stream);
    CHECK(e.engine == "ai_core");
    CHECK(e.graph_id == ex.id());
    // The device's time of the kernel, not of its launch (which takes microseconds).
    CHECK(e.duration_ns() >= 9'000'000);
    CHECK(e.duration_ns() <= static_cast<std::int64_t>(wall_ms * 1e6));
    by_stream[e.stream].push_back(e);
  }
  REQUIRE(by_stream.size() == 2);
  CHECK(by_stream[0].size() == 4);  // tanh x3 and the add that joins them
  CHECK(by_stream[1].size() == 3);
  for (auto& [s, list] : by_stream) {  // in-order streams: events on one stream never overlap
    std::sort(list.begin(), list.end(), [](auto& a, auto& b) { return a.start_ns < b.start_ns; });
    for (std::size_t i = 1; i < list.size(); ++i) CHECK(list[i].start_ns >= list[i - 1].end_ns);
  }
  // The two branches ran at the same time: the first sigmoid starts before the last tanh ends.
  const auto first_sigmoid = by_stream[1].front(), third_tanh = by_stream[0][2];
  CHECK(first_sigmoid.type == "sigmoid");
  CHECK(third_tanh.type == "tanh");
  CHECK(first_sigmoid.start_ns < third_tanh.end_ns);
  // The timeline has one track per stream, named so.
  auto j = nlohmann::json::parse(prof.chrome_trace());
  std::set<std::string> tracks;
  for (auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
  CHECK(tracks == std::set<std::string>{"thread 0 / stream 0", "thread 0 / stream 1"});
}

TEST_CASE("device graph: sunk steps and eager device ops are profiled too", "[ascend][profiler]") {
  EmuFixture fx;
  ctl().SetLatency(2'000'000, 0, 0, 0);
  Tensor<float> x = ms::randn<float>({3, 5});
  auto f = [](const Tensor<float>& a) { return ms::exp(ms::relu(a)); };
  backend::CompileOptions one;
  one.max_streams = 1;
  one.capture = true;  // an observed run times each kernel instead of replaying the capture
  auto ex = backend::compile_for_device(backend::trace(f, x), emu(), one);
  Tensor<float> X = ms::randn<float>({4 * 3, 5});
  Tensor<float> want = ms::exp(ms::relu(X)).reshape({4, 3, 5}), want_tanh = ms::tanh(x);
  Tensor<float> xd = x.to(emu().device());
  ms::Profiler prof;
  backend::SunkResult r;
  Tensor<float> yd;
  {
    ms::ProfilerScope on(prof);
    r = ex.run_sunk(std::vector<AnyTensor>{X}, backend::SinkOptions{2, {}});
    yd = ms::tanh(xd);  // eager: an op on a device tensor is timed on the device too
  }
  require_close(r.outputs[0], want);
  require_close(yd.to(Device::cpu()), want_tanh);
  auto rows = prof.summary_by_type();
  std::map<std::string, ms::ProfileSummaryRow> by;
  for (auto& r : rows) by[r.key] = r;
  CHECK(by["relu"].calls == 4);  // one per sunk step
  CHECK(by["exp"].calls == 4);
  REQUIRE(by.count("tanh"));
  CHECK(by["tanh"].calls == 1);
  CHECK(by["tanh"].min_ns >= 1'800'000);
  CHECK(by["relu"].min_ns >= 1'800'000);
  for (auto& e : prof.events())
    if (e.type == "tanh") {
      CHECK(e.engine == "ai_core");
      CHECK(e.graph_id == -1);
    }
}

TEST_CASE("device graph: data dump copies device tensors back, results unchanged", "[ascend][dump]") {
  EmuFixture fx;
  ms_test::TempDir dir;
  Tensor<float> x = ms::randn<float>({4, 6}), w = ms::randn<float>({3, 6}), b = ms::randn<float>({3});
  auto f = [&](const Tensor<float>& xx) { return ms::sigmoid(ms::relu(ms::linear(xx, w, b))); };
  // sin has no device mapping: one host node among the device kernels.
  auto g = [&](const Tensor<float>& xx) { return ms::sin(f(xx)); };
  auto ex = backend::compile_for_device(backend::trace(g, x), emu());
  const std::vector<float> plain = Tensor<float>(ex.run({x})[0]).to_vector();
  auto dump = ms::DataDump::from_json(fmt::format(
      R"({{"common_dump_settings": {{"path": "{}", "net_name": "Dev", "dump_mode": 0, "input_output": 0}}}})",
      dir.path.string()));
  std::vector<float> dumped;
  Tensor<float> xd = x.to(emu().device());
  {
    ms::DumpScope on(*dump);
    dumped = Tensor<float>(ex.run({x})[0]).to_vector();
    Tensor<float> yd = ms::tanh(xd);  // eager, on the device: dumped too (graph dir 0)
  }
  CHECK(dumped == plain);  // bit for bit
  {
    const auto edir = dir.path / "rank_0" / "Dev" / "0" / "0";
    std::filesystem::path in, out;
    for (auto& e : std::filesystem::directory_iterator(edir)) {
      const std::string n = e.path().filename().string();
      if (n.starts_with("tanh.tanh_") && n.ends_with(".input.0.npy")) in = e.path();
      if (n.starts_with("tanh.tanh_") && n.ends_with(".output.0.npy")) out = e.path();
    }
    REQUIRE(!in.empty());
    REQUIRE(!out.empty());
    require_close(ms::load_npy(in), x, 0);
    require_close(ms::load_npy(out), ms::tanh(x));
  }
  const auto gdir = dir.path / "rank_0" / "Dev" / std::to_string(ex.id() + 1) / "0";
  REQUIRE(std::filesystem::exists(gdir));
  std::map<std::string, std::filesystem::path> files;  // "{type}.{name}.{io}.{slot}" -> file
  std::regex re(R"(^([^.]+)\.([^.]+)\.(\d+)\.(\d+)\.(\d+)\.(input|output)\.(\d+)\.npy$)");
  for (auto& e : std::filesystem::directory_iterator(gdir)) {
    std::smatch m;
    const std::string fname = e.path().filename().string();
    if (!std::regex_match(fname, m, re)) continue;
    files[m[1].str() + "." + m[2].str() + "." + m[6].str() + "." + m[7].str()] = e.path();
  }
  INFO(files.size() << " files");
  // linear: 3 inputs + 1 output; relu, sigmoid, sin: 1 + 1 each.
  CHECK(files.size() == 10);
  REQUIRE(files.count("linear.linear_0.output.0"));
  REQUIRE(files.count("relu.relu_0.output.0"));
  REQUIRE(files.count("sin.sin_0.output.0"));
  Tensor<float> lin = ms::linear(x, w, b);
  require_close(ms::load_npy(files["linear.linear_0.output.0"]), lin);
  require_close(ms::load_npy(files["relu.relu_0.input.0"]), lin);
  require_close(ms::load_npy(files["relu.relu_0.output.0"]), ms::relu(lin));
  require_close(ms::load_npy(files["linear.linear_0.input.1"]), w);
  require_close(ms::load_npy(files["sin.sin_0.output.0"]), Tensor<float>(g(x)));
}

#endif  // MS_ASCEND_EMULATOR_PATH

TEST_CASE("device graph: on one stream the intermediates share one planned device arena", "[ascend]") {
  EmuFixture fx;
  const std::int64_t B = 16, steps = 4;
  Tensor<float> X = ms::randn<float>({steps * B, 1, 8, 8});
  Tensor<std::int64_t> Y = ms::randint<std::int64_t>(0, 10, {steps * B});
  std::vector<float> losses[2];
  std::vector<AnyTensor> params[2];
  std::uint64_t device_bytes[2] = {0, 0};
  for (int planned : {0, 1}) {
    INFO("plan_memory " << planned);
    Trainer t(64, 128, 10, 0.01);
    auto step = t.step_fn();
    backend::CompileOptions opt;
    opt.max_streams = 1;
    opt.plan_memory = planned != 0;
    emu().synchronize_all();
    const std::uint64_t before = counters().live_device_bytes;
    auto ex = backend::compile_for_device(backend::trace(step, rows(X, 0, B), rows(Y, 0, B)), emu(), opt);
    device_bytes[planned] = counters().live_device_bytes - before;
    CHECK(ex.num_host_nodes() == 0);
    const backend::MemoryPlan* mp = ex.memory_plan();
    if (planned) {
      REQUIRE(mp != nullptr);
      CHECK(mp->lower_bound > 0);
      CHECK(mp->peak >= mp->lower_bound);
      // The training step's planned peak over its lower bound (reported in docs/backends.md).
      CHECK(mp->ratio() <= 1.5);
      WARN("device MLP step: planned arena " << mp->peak << " bytes, lower bound " << mp->lower_bound
                                              << " bytes, ratio " << mp->ratio());
    } else {
      CHECK(mp == nullptr);
    }
    auto r = ex.run_sunk(std::vector<AnyTensor>{rows(X, B, steps * B), rows(Y, B, steps * B)});
    losses[planned] = Tensor<float>(r.outputs[0]).to_vector();
    ex.sync_params_to_host();
    params[planned] = t.params;
  }
  // The same arithmetic on the same inputs: bit-identical losses and parameters.
  CHECK(losses[0] == losses[1]);
  for (std::size_t p = 0; p < params[0].size(); ++p) CHECK(ms_test::same_bits(params[0][p], params[1][p]));
  // Sharing memory between intermediates whose lifetimes do not overlap takes less device memory.
  CHECK(device_bytes[1] < device_bytes[0]);
  // Several streams: no plan (concurrent branches could overwrite what another still reads).
  Trainer t(64, 128, 10, 0.01);
  auto step = t.step_fn();
  backend::CompileOptions two;
  two.max_streams = 4;
  auto ex = backend::compile_for_device(backend::trace(step, rows(X, 0, B), rows(Y, 0, B)), emu(), two);
  if (ex.num_streams() > 1) CHECK(ex.memory_plan() == nullptr);
}

TEST_CASE("device graph: batch_norm's running statistics are updated by every replay", "[ascend]") {
  EmuFixture fx;
  Tensor<float> x0 = ms::randn<float>({8, 3, 2, 2}), x1 = ms::randn<float>({8, 3, 2, 2});
  Tensor<float> w = ms::ones<float>({3}), b = ms::zeros<float>({3});
  Tensor<float> rm_e = ms::zeros<float>({3}), rv_e = ms::ones<float>({3});
  Tensor<float> rm_d = ms::zeros<float>({3}), rv_d = ms::ones<float>({3});
  auto f = [&](Tensor<float>& rm, Tensor<float>& rv) {
    return [&](const Tensor<float>& x) { return ms::relu(ms::batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5)); };
  };
  auto eager = f(rm_e, rv_e);
  (void)eager(x0);
  (void)eager(x1);
  (void)eager(x1);
  auto dev = f(rm_d, rv_d);
  auto ex = backend::compile_for_device(backend::trace(dev, x0), emu());  // the trace runs step 1
  (void)ex.run({x1});
  (void)ex.run({x1});
  ex.sync_params_to_host();
  require_close(rm_d, rm_e, 1e-5);
  require_close(rv_d, rv_e, 1e-5);
}

}  // namespace device_executor_test
