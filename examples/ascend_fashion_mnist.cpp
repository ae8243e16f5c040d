// Trains the Fashion-MNIST MLP (784-256-256-10, ReLU, Adam) on an Ascend device
// with loop sinking: the training step is traced once, compiled for the device
// (engines and streams in the IR dump), and every epoch runs as sinks of
// sink_size steps that meet the host once each. Then the weights come back to
// the host and the test set is scored on the CPU; with --compare the same
// training also runs on the CPU (ms::jit) for the reference accuracy.
//
//   ascend_fashion_mnist [DATA_DIR] [--epochs N] [--batch B] [--lr X] [--limit N]
//                        [--sink-size S] [--hidden H] [--capture] [--compare] [--dump]
//
// The Ascend libraries come from $MS_ASCEND_LIBS (CANN's by default). Without an
// NPU, point it at the Ascend emulator built with the tests:
//   MS_ASCEND_LIBS=build/tests/ascend_emulator/libms_ascend_emulator.so ascend_fashion_mnist --limit 6000
// (the emulator computes each kernel in double on one host thread: slow, but exact).

#include <ms/ms.hpp>
#include <ms/backend/ascend/ascend_backend.hpp>
#include <ms/backend/device_executor.hpp>

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <string>

using ms::Tensor;
namespace nn = ms::nn;

namespace {

struct Run {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<ms::optim::Adam> opt;
  std::vector<ms::AnyTensor> params;
  Run(std::int64_t hidden, double lr) {
    ms::manual_seed(0);
    model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, hidden), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(hidden, hidden), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(hidden, 10)});
    opt = std::make_unique<ms::optim::Adam>(model->parameters(), lr);
    params = model->parameters_any();
  }
  auto step() {
    return [this](const Tensor<float>& x, const Tensor<std::int64_t>& y) {
      Tensor<float> logits = (*model)(x);
      Tensor<float> loss = ms::cross_entropy(logits, y);
      opt->step(ms::autograd::grad(loss, params));
      return loss;
    };
  }
};

double accuracy(nn::Sequential& m, const ms::data::Dataset& test) {
  ms::NoGradGuard ng;
  m.eval();
  std::int64_t right = 0;
  for (std::int64_t s = 0; s < test.size(); s += 1000) {
    std::int64_t e = std::min<std::int64_t>(s + 1000, test.size());
    Tensor<float> x = test.images.slice(0, s, e).contiguous();
    Tensor<std::int64_t> y = test.labels.slice(0, s, e).contiguous();
    right += ms::sum(ms::cast<std::int64_t>(ms::argmax(m(x), 1) == y)).item();
  }
  return static_cast<double>(right) / static_cast<double>(test.size());
}

/// The emulator's counters (msEmuGetCounters) when the Ascend libraries are the emulator:
/// h2d, d2h copies and syncs, or nothing on CANN. Read through dlsym, so a CANN build is unaffected.
struct Copies {
  unsigned long long h2d = 0, d2h = 0, syncs = 0;
  bool known = false;
};
Copies emulator_copies() {
  Copies c;
  // The counters struct starts with launches, captured_tasks, h2d, d2h, d2d, h2h, 3 byte counts,
  // memsets, syncs (ms_emulator.h: fields are only ever appended).
  using Get = void (*)(void*);
  if (auto get = reinterpret_cast<Get>(::dlsym(RTLD_DEFAULT, "msEmuGetCounters"))) {
    std::uint64_t raw[64] = {};
    get(raw);
    c.h2d = raw[2];
    c.d2h = raw[3];
    c.syncs = raw[10];
    c.known = true;
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int epochs = 3;
  std::int64_t batch = 64, limit = 0, sink_size = 0, hidden = 256;
  double lr = 1e-3;
  bool capture = false, compare = false, dump = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--epochs") epochs = std::stoi(next());
    else if (a == "--batch") batch = std::stoll(next());
    else if (a == "--lr") lr = std::stod(next());
    else if (a == "--limit") limit = std::stoll(next());
    else if (a == "--sink-size") sink_size = std::stoll(next());
    else if (a == "--hidden") hidden = std::stoll(next());
    else if (a == "--capture") capture = true;
    else if (a == "--compare") compare = true;
    else if (a == "--dump") dump = true;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [DATA_DIR] [--epochs N] [--batch B] [--lr X] [--limit N] [--sink-size S] [--hidden H] "
                  "[--capture] [--compare] [--dump]\n", argv[0]);
      return 0;
    } else dir = a;
  }
  if (dir.empty()) {
    auto found = ms::data::find_fashion_mnist();
    if (!found) {
      std::fprintf(stderr, "Fashion-MNIST not found: pass its directory or install dataset-fashion-mnist\n");
      return 2;
    }
    dir = found->string();
  }
  try {
    auto train = ms::data::load_fashion_mnist(dir, true, true);
    auto test = ms::data::load_fashion_mnist(dir, false, true);
    std::int64_t n = limit > 0 ? std::min(limit, train.size()) : train.size();
    const std::int64_t steps = n / batch;
    n = steps * batch;
    Tensor<float> X = train.images.slice(0, 0, n).contiguous();
    Tensor<std::int64_t> Y = train.labels.slice(0, 0, n).contiguous();
    std::printf("Fashion-MNIST: %lld training images (%lld steps of %lld per epoch), %lld test images\n",
                static_cast<long long>(n), static_cast<long long>(steps), static_cast<long long>(batch),
                static_cast<long long>(test.size()));

    auto& be = ms::backend::ascend::ascend_backend(0);
    std::printf("Ascend libraries: %s (SoC %s, matmul cubeMathType %d, capture %s)\n", be.api().libraries.c_str(),
                be.soc().name.c_str(), static_cast<int>(be.cube_math_type()), be.can_capture() ? "yes" : "no");
    Run dev(hidden, lr);
    ms::backend::CompileOptions opt;
    opt.capture = capture;
    if (capture) opt.max_streams = 1;
    auto step = dev.step();
    // Tracing runs the first step on the host; the device continues from there.
    auto ex = ms::backend::compile_for_device(
        ms::backend::trace(step, Tensor<float>(X.slice(0, 0, batch).contiguous()),
                           Tensor<std::int64_t>(Y.slice(0, 0, batch).contiguous())),
        be, opt);
    if (dump) std::printf("%s", ex.dump().c_str());
    else std::printf("%s", ex.dump().substr(0, ex.dump().find('\n') + 1).c_str());

    ms::backend::SinkOptions so;
    so.sink_size = sink_size;
    const Copies c0 = emulator_copies();
    std::int64_t trained_steps = 0;
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      double loss_sum = 0;
      std::int64_t seen = 0;
      so.on_sink = [&](std::int64_t, std::int64_t k, const std::vector<ms::AnyTensor>& outs) {
        for (float l : Tensor<float>(outs[0]).to_vector()) loss_sum += l;  // once per sink
        seen += k;
      };
      auto t0 = std::chrono::steady_clock::now();
      std::vector<ms::AnyTensor> data{X, Y};
      if (epoch == 1) data = {Tensor<float>(X.slice(0, batch, n).contiguous()), Tensor<std::int64_t>(Y.slice(0, batch, n).contiguous())};
      auto r = ex.run_sunk(data, so);
      trained_steps += r.steps;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("epoch %d: loss %.4f, %.1f steps/s, %lld sink(s), %llu host<->device interactions\n", epoch,
                  loss_sum / static_cast<double>(std::max<std::int64_t>(seen, 1)), static_cast<double>(r.steps) / secs,
                  static_cast<long long>(r.sinks), static_cast<unsigned long long>(r.interactions));
    }
    const Copies c1 = emulator_copies();
    ex.sync_params_to_host();
    const double dev_acc = accuracy(*dev.model, test);
    std::printf("test accuracy (trained on %s): %.2f%%\n", be.device().str().c_str(), 100 * dev_acc);
    // What the run cost in host round trips, and what did not run on the device.
    const double per = static_cast<double>(std::max<std::int64_t>(trained_steps, 1));
    if (c1.known)
      std::printf("per step: %.3f host->device copies, %.3f device->host copies, %.3f syncs (emulator counters)\n",
                  static_cast<double>(c1.h2d - c0.h2d) / per, static_cast<double>(c1.d2h - c0.d2h) / per,
                  static_cast<double>(c1.syncs - c0.syncs) / per);
    std::string fallbacks;
    for (const auto& op : be.fallback_ops()) fallbacks += (fallbacks.empty() ? "" : ", ") + op;
    std::printf("host fallback ops: %s; %zu device graph host nodes\n", fallbacks.empty() ? "none" : fallbacks.c_str(),
                static_cast<std::size_t>(ex.num_host_nodes()));
    if (const ms::backend::MemoryPlan* mp = ex.memory_plan())
      std::printf("device arena: %.1f KiB planned for the step's intermediates (lower bound %.1f KiB, %.2fx)\n",
                  static_cast<double>(mp->peak) / 1024.0, static_cast<double>(mp->lower_bound) / 1024.0, mp->ratio());
    const auto ms_ = be.memory_stats();
    std::printf("device memory: %llu runtime allocations, %llu reuses, %llu frees deferred for queued work\n",
                static_cast<unsigned long long>(ms_.mallocs), static_cast<unsigned long long>(ms_.reuses),
                static_cast<unsigned long long>(ms_.deferred));

    if (compare) {
      Run cpu(hidden, lr);
      auto jit = ms::jit(cpu.step());
      for (int epoch = 1; epoch <= epochs; ++epoch)
        for (std::int64_t s = 0; s < steps; ++s)
          jit(Tensor<float>(X.slice(0, s * batch, (s + 1) * batch).contiguous()),
              Tensor<std::int64_t>(Y.slice(0, s * batch, (s + 1) * batch).contiguous()));
      const double cpu_acc = accuracy(*cpu.model, test);
      std::printf("test accuracy (trained on cpu): %.2f%%  (difference %.2f points)\n", 100 * cpu_acc,
                  100 * (dev_acc - cpu_acc));
    }
    return 0;
  } catch (const ms::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
