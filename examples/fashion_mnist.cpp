// Trains an MLP (784-256-256-10, ReLU) or LeNet-5 on Fashion-MNIST. The whole
// training step — forward, loss, backward and the optimizer update — is captured
// once by ms::jit into one graph, fused, memory-planned and replayed for every batch.
//
//   fashion_mnist [DATA_DIR] [--model mlp|lenet] [--epochs N] [--batch B] [--lr X]
//                 [--eager] [--constant-lr] [--threads T] [--limit N]
//                 [--profile TRACE.json] [--dump CONFIG.json] [--save MODEL.safetensors]
//                 [--gemm-precision f32|bf16]
//
// Data-parallel on several processes: `mpirun -np 2 fashion_mnist` (or
// `scripts/demo.sh --ranks 2`; build with the ms::dist CMake target, i.e. with MPI). --batch
// is the global batch: each rank takes batch / ranks rows of its shard of the training set
// (ms::dist::DataParallel, DataLoader::set_shard), the captured step averages the gradients
// across ranks, and only rank 0 prints and writes --save. Started without mpirun, or built
// without MPI, it is one process, as before.
//
// --profile records every op of the first epoch (each replayed graph node, fused
// nodes with their members' names), prints the per-op-type table and writes a Chrome
// trace-event timeline (open it in ui.perfetto.dev or chrome://tracing).
// --dump (or the environment variable MS_DUMP_CONFIG) dumps op inputs/outputs as
// .npy files chosen by a MindSpore-style JSON config, one iteration per training
// step, plus every parameter and its gradient for the selected iterations (see
// docs/observability.md and examples/dump_fc1.json).
//
// The learning rate follows a cosine schedule over the epochs (--constant-lr: it does
// not); the schedule updates the captured step's lr tensor, no re-trace.
// DATA_DIR defaults to $MS_FASHION_MNIST_DIR or Debian's /usr/share/datasets/fashion-mnist
// (package dataset-fashion-mnist). --eager trains without capture (for comparison).

#include <ms/dist.hpp>
#include <ms/ms.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

using ms::Tensor;
namespace nn = ms::nn;

namespace {


/// Number of rows of `logits` whose argmax equals the label.
std::int64_t correct(const Tensor<float>& logits, const Tensor<std::int64_t>& labels) {
  auto pred = ms::argmax(logits, 1);
  return ms::sum(ms::cast<std::int64_t>(pred == labels)).item();
}

void progress(int epoch, std::size_t done, std::size_t total, double loss, double acc, double steps_per_s) {
  const int width = 30;
  int filled = static_cast<int>(width * done / std::max<std::size_t>(total, 1));
  std::printf("\repoch %2d [%.*s%*s] %5zu/%zu  loss %.4f  acc %.2f%%  %.0f steps/s", epoch, filled,
              "==============================", width - filled, "", done, total, loss, 100 * acc, steps_per_s);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  ms::dist::Context ctx(&argc, &argv);  // one process unless started by mpirun
  const int world = ms::dist::world_size();
  const bool main_rank = ms::dist::is_main_rank();
  std::string dir, model_name = "mlp";
  int epochs = 10, threads = 0;
  std::int64_t batch = 64, limit = 0;
  double lr = 1e-3;
  bool eager = false, cosine = true;
  std::string profile_path, dump_config, save_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (a == "--model") model_name = next();
    else if (a == "--epochs") epochs = std::stoi(next());
    else if (a == "--batch") batch = std::stoll(next());
    else if (a == "--lr") lr = std::stod(next());
    else if (a == "--threads") threads = std::stoi(next());
    else if (a == "--limit") limit = std::stoll(next());
    else if (a == "--eager") eager = true;
    else if (a == "--constant-lr") cosine = false;
    else if (a == "--profile") profile_path = next();
    else if (a == "--dump") dump_config = next();
    else if (a == "--save") save_path = next();
    else if (a == "--gemm-precision") {  // bf16: float32 GEMMs on the bfloat16 units (AMX / AVX512-BF16)
      const std::string p = next();
      if (p != "f32" && p != "bf16") {
        std::fprintf(stderr, "--gemm-precision: expected f32 or bf16, got '%s'\n", p.c_str());
        return 2;
      }
      ms::set_cpu_gemm_precision(p == "bf16" ? ms::GemmPrecision::bf16 : ms::GemmPrecision::f32);
    }
    else if (a == "-h" || a == "--help") {
      std::printf("usage: %s [DATA_DIR] [--model mlp|lenet] [--epochs N] [--batch B] [--lr X] [--eager] [--constant-lr] [--threads T] [--limit N] [--profile TRACE.json] [--dump CONFIG.json] [--save MODEL.safetensors] [--gemm-precision f32|bf16]\n", argv[0]);
      return 0;
    } else dir = a;
  }
  // Several ranks on one machine share its cores.
  if (threads == 0 && world > 1) threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / world);
  if (threads > 0) ms::set_num_threads(threads);
  if (batch % world != 0) {
    std::fprintf(stderr, "--batch %lld is not divisible by the %d ranks\n", static_cast<long long>(batch), world);
    return 2;
  }
  const std::int64_t local_batch = batch / world;
  if (dir.empty()) {
    auto found = ms::data::find_fashion_mnist();
    if (!found) {
      std::fprintf(stderr, "Fashion-MNIST not found: pass its directory or install dataset-fashion-mnist\n");
      return 2;
    }
    dir = found->string();
  }
  try {
    ms::manual_seed(0);
    auto train = ms::data::load_fashion_mnist(dir, true, true);
    auto test = ms::data::load_fashion_mnist(dir, false, true);
    if (limit > 0) {
      train.images = train.images.slice(0, 0, limit).contiguous();
      train.labels = train.labels.slice(0, 0, limit).contiguous();
    }
    if (main_rank)
      std::printf("Fashion-MNIST: %lld training and %lld test images from %s\n", static_cast<long long>(train.size()),
                static_cast<long long>(test.size()), dir.c_str());

    auto model = model_name == "lenet" ? nn::lenet5(10) : nn::mlp(784, {256, 256}, 10);
    // Several ranks: rank 0's initial parameters everywhere, gradients averaged per bucket.
    std::optional<ms::dist::DataParallel> dp;
    if (world > 1) dp.emplace(model);
    if (main_rank) {
      std::printf("model: %s, %zu parameter tensors, batch %lld, Adam lr %g%s, %s, %d threads\n", model_name.c_str(),
                  model->parameters().size(), static_cast<long long>(batch), lr, cosine ? " (cosine schedule)" : "",
                  eager ? "eager" : "captured training step", ms::get_num_threads());
      if (ms::cpu_gemm_precision() == ms::GemmPrecision::bf16)
        std::printf("float32 GEMMs at bfloat16 precision: %s\n",
                    ms::dnnl_bf16_native() && ms::cpu_gemm() == ms::CpuGemm::dnnl
                        ? "on the CPU's bfloat16 units"
                        : "not available on this CPU or GEMM path, float32 is used");
      if (world > 1)
        std::printf("data parallel: %d ranks x batch %lld, %zu gradient bucket(s)\n", world,
                    static_cast<long long>(local_batch), dp->buckets().size());
    }
    ms::optim::Adam opt(model->parameters(), lr);
    std::optional<ms::optim::CosineAnnealingLR> schedule;
    if (cosine) schedule.emplace(opt, epochs);
    std::vector<ms::AnyTensor> params = model->parameters_any();

    std::unique_ptr<ms::DataDump> dump =
        dump_config.empty() ? ms::DataDump::from_env() : ms::DataDump::from_file(dump_config);
    if (!main_rank) dump.reset();  // one dump, from rank 0
    std::vector<std::string> param_names;
    for (const auto& [name, p] : model->named_parameters()) param_names.push_back(name);

    // One training step: forward, loss, gradients, update. Returns (loss, logits, gradients).
    auto train_step = [&](const Tensor<float>& x, const Tensor<std::int64_t>& y) {
      Tensor<float> logits = (*model)(x);
      Tensor<float> loss = ms::cross_entropy(logits, y);
      std::vector<ms::AnyTensor> grads = ms::autograd::grad(loss, params);
      if (dp) grads = dp->reduce_gradients(grads);
      opt.step(grads);
      return std::make_tuple(loss, logits, grads);
    };
    auto captured = ms::jit(train_step);
    auto evaluate = ms::jit([&](const Tensor<float>& x) {
      ms::NoGradGuard no_grad;
      return (*model)(x);
    });

    ms::data::DataLoader loader(train.images, train.labels, local_batch, /*shuffle=*/true, /*seed=*/0,
                                /*drop_last=*/true);
    if (world > 1) loader.set_shard(ms::dist::rank(), world);
    ms::Profiler profiler;
    if (dump) dump->start();
    for (int epoch = 1; epoch <= epochs; ++epoch) {
      model->train();
      if (epoch == 1 && !profile_path.empty() && main_rank) profiler.start();
      double loss_sum = 0;
      std::int64_t right = 0, seen = 0;
      std::size_t done = 0;
      auto t0 = std::chrono::steady_clock::now();
      for (const ms::data::Batch& b : loader) {
        auto [loss, logits, grads] = eager ? train_step(b.images, b.labels) : captured(b.images, b.labels);
        if (dump) {  // parameters (after the update) and their gradients, then the next iteration
          for (std::size_t i = 0; i < params.size(); ++i) {
            dump->dump_tensor(param_names[i], params[i]);
            dump->dump_tensor(param_names[i] + ".grad", grads[i]);
          }
          dump->next_iteration();
        }
        loss_sum += loss.item();
        right += correct(logits, b.labels);
        seen += b.size();
        ++done;
        if (done % 50 == 0 || done == loader.size()) {  // every rank takes the same number of steps
          double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const double all_loss = ms::dist::reduce_value(loss_sum, ms::dist::ReduceOp::mean);
          const std::int64_t all_right = ms::dist::reduce_value(right), all_seen = ms::dist::reduce_value(seen);
          if (main_rank)
            progress(epoch, done, loader.size(), all_loss / static_cast<double>(done),
                     static_cast<double>(all_right) / static_cast<double>(all_seen), static_cast<double>(done) / secs);
        }
      }
      if (dp) dp->sync_buffers();
      if (main_rank) std::printf("\n");
      if (schedule) schedule->step();
      if (profiler.running()) {
        profiler.stop();
        std::printf("%s", profiler.table().c_str());
        profiler.write_chrome_trace(profile_path);
        std::printf("timeline of epoch 1 (%zu ops) written to %s\n", profiler.events().size(), profile_path.c_str());
      }
    }
    if (!save_path.empty()) {
      ms::dist::save_checkpoint(*model, save_path);  // rank 0 writes, atomically; the others wait
      if (main_rank) std::printf("model saved to %s\n", save_path.c_str());
    }
    if (dump) {
      dump->stop();
      std::printf("data dump: %lld .npy files under %s\n", static_cast<long long>(dump->files_written()),
                  dump->config().path.c_str());
    }
    model->eval();
    std::int64_t right = 0, chunk = 0;
    for (std::int64_t s = 0; s < test.size(); s += 1000, ++chunk) {
      if (chunk % world != ms::dist::rank()) continue;  // each rank evaluates its share of the test set
      std::int64_t e = std::min<std::int64_t>(s + 1000, test.size());
      Tensor<float> x = test.images.slice(0, s, e).contiguous();
      Tensor<std::int64_t> y = test.labels.slice(0, s, e).contiguous();
      right += correct(evaluate(x), y);
    }
    right = ms::dist::reduce_value(right);
    double acc = static_cast<double>(right) / static_cast<double>(test.size());
    if (main_rank)
      std::printf("test accuracy: %.2f%% (%lld/%lld)\n", 100 * acc, static_cast<long long>(right),
                static_cast<long long>(test.size()));
    if (!eager && main_rank)
      std::printf("captured step: %zu trace(s), %zu replays; graph of %zu nodes, arena %.1f KiB (lower bound %.1f KiB)\n",
                  captured.num_traces(), captured.num_replays(), captured.executable()->graph().num_nodes(),
                  static_cast<double>(captured.executable()->memory_plan().peak) / 1024.0,
                  static_cast<double>(captured.executable()->memory_plan().lower_bound) / 1024.0);
    return 0;
  } catch (const ms::Error& e) {
    if (world > 1) throw;  // names the rank and ends the whole job (the others would wait for it)
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
