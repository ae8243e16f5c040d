// Loop sinking on the Ascend adapter: steps/s of an MLP training loop (forward,
// cross entropy, backward, Adam) compiled for the device and run one epoch per
// benchmark iteration, with sink_size 1 (the host meets the device after every
// step) against sink_size = one epoch (once per epoch), and the same with each
// step replaying one captured iteration. Also counts the host<->device
// interactions (synchronizations) and copies per epoch.
//
// Runs against the Ascend emulator with its default latency model (5 us per
// launch, 20 us per synchronization, 10 us + 100 ps/byte per copy), found
// through $MS_ASCEND_LIBS, or else next to this program's build tree
// (../tests/ascend_emulator/libms_ascend_emulator.so). On a machine with CANN,
// point $MS_ASCEND_LIBS at its libraries: the adapter code is the same (the
// counters then read zero, as only the emulator has them).
//
// The peer figure is the same loop with sink_size 1: the `ratio` line is
// sunk/unsunk epoch time (below 1: sinking is faster).

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <ms/ms.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>
#include <ms/backend/device_executor.hpp>

#include "../tests/ascend_emulator/ms_emulator.h"
#include "bench_common.hpp"

namespace {

namespace nn = ms::nn;
using ms::Tensor;

constexpr std::int64_t kBatch = 32, kHidden = 32, kSteps = 50;  // one epoch = 50 steps of 32 images

std::string emulator_path() {
  if (const char* env = std::getenv("MS_ASCEND_LIBS"); env && *env) return env;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  auto p = exe.parent_path().parent_path() / "tests" / "ascend_emulator" / "libms_ascend_emulator.so";
  return p.string();
}

struct Setup {
  bool ok = false;
  std::string why;
  msEmuApi emu{};
  bool have_counters = false;
  Tensor<float> X;
  Tensor<std::int64_t> Y;
};

Setup& setup() {
  static Setup s = [] {
    Setup st;
    const std::string libs = emulator_path();
    setenv("MS_ASCEND_LIBS", libs.c_str(), 1);
    try {
      ms::backend::ascend::ascend_backend(0).warn_on_fallback = false;
    } catch (const ms::Error& e) {
      st.why = e.what();
      return st;
    }
    st.have_counters = msEmuLoadApi(libs.c_str(), &st.emu) == 0;
    if (st.have_counters) st.emu.ResetLatency();  // the default latency model
    ms::manual_seed(1);
    st.X = ms::rand<float>({kSteps * kBatch, 1, 28, 28});
    st.Y = ms::randint<std::int64_t>(0, 10, {kSteps * kBatch});
    st.ok = true;
    return st;
  }();
  return s;
}

struct Model {
  std::shared_ptr<nn::Sequential> net;
  std::unique_ptr<ms::optim::Adam> opt;
  std::vector<ms::AnyTensor> params;
  Model() {
    ms::manual_seed(0);
    net = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, kHidden), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(kHidden, 10)});
    opt = std::make_unique<ms::optim::Adam>(net->parameters(), 1e-3);
    params = net->parameters_any();
  }
};

/// One benchmark iteration = one epoch of kSteps training steps on the device.
void train_epochs(benchmark::State& state, std::int64_t sink_size, bool capture) {
  Setup& s = setup();
  if (!s.ok) {
    state.SkipWithError(("Ascend backend unavailable: " + s.why).c_str());
    return;
  }
  Model m;
  auto step = [&](const Tensor<float>& x, const Tensor<std::int64_t>& y) {
    Tensor<float> logits = (*m.net)(x);
    Tensor<float> loss = ms::cross_entropy(logits, y);
    m.opt->step(ms::autograd::grad(loss, m.params));
    return loss;
  };
  ms::backend::CompileOptions opt;
  opt.capture = capture;
  if (capture) opt.max_streams = 1;
  auto ex = ms::backend::compile_for_device(
      ms::backend::trace(step, Tensor<float>(s.X.slice(0, 0, kBatch).contiguous()),
                         Tensor<std::int64_t>(s.Y.slice(0, 0, kBatch).contiguous())),
      ms::backend::ascend::ascend_backend(0), opt);
  const std::vector<ms::AnyTensor> data{s.X, s.Y};
  ms::backend::SinkOptions so;
  so.sink_size = sink_size;
  double loss_sum = 0;
  so.on_sink = [&](std::int64_t, std::int64_t, const std::vector<ms::AnyTensor>& outs) {
    for (float l : Tensor<float>(outs[0]).to_vector()) loss_sum += l;  // loss reporting once per sink
  };
  ex.run_sunk(data, so);  // warm-up: the first capture and allocations
  msEmuCounters c0{}, c1{};
  if (s.have_counters) s.emu.GetCounters(&c0);
  const std::uint64_t i0 = ex.interactions();
  for (auto _ : state) ex.run_sunk(data, so);
  if (s.have_counters) s.emu.GetCounters(&c1);
  const double epochs = static_cast<double>(state.iterations());
  state.counters["steps_per_s"] = benchmark::Counter(epochs * kSteps, benchmark::Counter::kIsRate);
  state.counters["interactions_per_epoch"] = static_cast<double>(ex.interactions() - i0) / epochs;
  state.counters["syncs_per_epoch"] = static_cast<double>(c1.syncs - c0.syncs) / epochs;
  state.counters["copies_per_epoch"] =
      static_cast<double>(c1.h2d_copies + c1.d2h_copies - c0.h2d_copies - c0.d2h_copies) / epochs;
  state.counters["streams"] = ex.num_streams();
  benchmark::DoNotOptimize(loss_sum);
}

void sink_1(benchmark::State& st) { train_epochs(st, 1, false); }
void sink_epoch(benchmark::State& st) { train_epochs(st, 0, false); }
void sink_1_capture(benchmark::State& st) { train_epochs(st, 1, true); }
void sink_epoch_capture(benchmark::State& st) { train_epochs(st, 0, true); }

}  // namespace

BENCHMARK(sink_epoch)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(sink_1)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(sink_epoch_capture)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);
BENCHMARK(sink_1_capture)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

int main(int argc, char** argv) {
  ms_bench::counter_unit("steps_per_s", "steps/s");
  ms_bench::counter_unit("interactions_per_epoch", "1");
  ms_bench::counter_unit("syncs_per_epoch", "1");
  ms_bench::counter_unit("copies_per_epoch", "1");
  ms_bench::counter_unit("streams", "1");
  ms_bench::compare("sink_epoch", "sink_1", "ascend_sink_epoch_vs_1");
  ms_bench::compare("sink_epoch_capture", "sink_1_capture", "ascend_sink_epoch_vs_1_captured");
  return ms_bench::main(argc, argv);
}
