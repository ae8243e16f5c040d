// Inference latency of an imported ONNX model: a ResNet-style network (conv, batch norm,
// ReLU, max and average pooling, residual adds with a strided 1x1 projection, global
// average pooling, a Gemm head) on 3 x 32 x 32 images, written as an ONNX file by
// ms::onnx::save, loaded with ms::onnx::load and compiled for inference (InferenceModel),
// against the same network with the same weights in LibTorch (eager, inference mode).
//
//   ms_onnx_infer/<batch>/<threads>     one InferenceModel::run of the imported model
//   torch_infer/<batch>/<threads>       LibTorch's forward of the same network, when found
//
// Batches 1 and 32, on 1 and 2 threads. Before timing, each side's output is checked
// against ms's eager forward (max |difference| printed; over 1e-3 is an error), and each
// side runs three untimed warm-up calls.

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <ms/ms.hpp>

#include "bench_common.hpp"

#if defined(MS_HAVE_ONNX)
#include <ms/onnx.hpp>

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

namespace ops = ms::ops;
using ms::AnyTensor;
using ms::DType;
using ms::Shape;

/// Weights of one conv + batch norm (eval) pair.
struct ConvBn {
  AnyTensor w, gamma, beta, mean, var;
  ConvBn(std::int64_t cin, std::int64_t cout, std::int64_t k, std::uint64_t seed) {
    const double scale = std::sqrt(2.0 / static_cast<double>(cin * k * k));
    w = ops::mul(ops::randn(Shape{cout, cin, k, k}, DType::f32, seed), scale);
    gamma = ops::add(ops::rand(Shape{cout}, DType::f32, seed + 1), 0.5);
    beta = ops::mul(ops::randn(Shape{cout}, DType::f32, seed + 2), 0.1);
    mean = ops::mul(ops::randn(Shape{cout}, DType::f32, seed + 3), 0.1);
    var = ops::add(ops::rand(Shape{cout}, DType::f32, seed + 4), 0.5);
  }
  AnyTensor operator()(const AnyTensor& x, std::int64_t stride) const {
    const std::int64_t pad = w.shape()[2] / 2;
    return ops::batch_norm(ops::conv2d(x, w, AnyTensor(), stride, pad), gamma, beta, mean, var, false);
  }
};

/// stem: conv 3->32 + BN + ReLU, max pool 2 (16 x 16); block 1: two 3x3 convs 32->32 and the
/// identity; block 2: 32->64 at stride 2 (8 x 8) with a 1x1 projection shortcut; average pool 2
/// (4 x 4), global average pool, Gemm 64 -> 10.
struct Net {
  ConvBn stem{3, 32, 3, 100}, a1{32, 32, 3, 110}, a2{32, 32, 3, 120}, b1{32, 64, 3, 130}, b2{64, 64, 3, 140},
      proj{32, 64, 1, 150};
  AnyTensor fc = ops::mul(ops::randn(Shape{10, 64}, DType::f32, 160), 0.1);
  AnyTensor fcb = ops::mul(ops::randn(Shape{10}, DType::f32, 161), 0.1);
  AnyTensor operator()(const AnyTensor& x) const {
    AnyTensor h = ops::max_pool2d(ops::relu(stem(x, 1)), 2);
    AnyTensor r = a2(ops::relu(a1(h, 1)), 1);
    h = ops::relu(ops::add(h, r));
    r = b2(ops::relu(b1(h, 2)), 1);
    h = ops::relu(ops::add(proj(h, 2), r));
    h = ops::flatten(ops::adaptive_avg_pool2d(ops::avg_pool2d(h, 2), 1), 1);
    return ops::linear(h, fc, fcb);
  }
};

const Net& net() {
  static const Net n;
  return n;
}

AnyTensor image(std::int64_t batch) { return ops::randn(Shape{batch, 3, 32, 32}, DType::f32, 7); }

double max_diff(const AnyTensor& a, const AnyTensor& b) {
  const ms::Tensor<float> x(a), y(b);
  double m = 0;
  const auto u = x.to_vector(), v = y.to_vector();
  for (std::size_t i = 0; i < u.size(); ++i) m = std::max(m, std::abs(static_cast<double>(u[i]) - v[i]));
  return u.size() == v.size() ? m : INFINITY;
}

/// The network captured at `batch`, written as ONNX, imported and compiled for inference.
ms::InferenceModel imported_model(std::int64_t batch) {
  const AnyTensor x = image(batch);
  const Net& n = net();  // the weights are made before the capture: they become initializers
  ms::graph::Graph g;
  {
    ms::graph::Capture cap;
    cap.input(x, "image");
    cap.output(n(x));
    g = cap.finish();
  }
  const auto path = std::filesystem::temp_directory_path() / ("ms_onnx_infer_" + std::to_string(::getpid()) + "_" +
                                                              std::to_string(batch) + ".onnx");
  ms::onnx::save(g, path);
  ms::onnx::Model m = ms::onnx::load(path);
  std::filesystem::remove(path);
  return ms::InferenceModel::from_graph(std::move(m.graph));
}

void ms_onnx_infer(benchmark::State& state) {
  const std::int64_t batch = state.range(0);
  const int saved = ms::get_num_threads();
  ms::set_num_threads(static_cast<int>(state.range(1)));
  auto model = imported_model(batch);
  const AnyTensor x = image(batch);
  const double diff = max_diff(model.run({x})[0], net()(x));
  state.counters["max_abs_diff"] = diff;
  if (!(diff <= 1e-3)) state.SkipWithError("the imported model's output differs from the eager forward");
  for (int i = 0; i < 3; ++i) model.run({x});  // warm-up, like the peer's
  for (auto _ : state) {
    auto y = model.run({x});
    benchmark::DoNotOptimize(y[0].raw_data());
  }
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
  ms::set_num_threads(saved);
}

void infer_args(benchmark::internal::Benchmark* b) {
  for (int batch : {1, 32})
    for (int threads : {1, 2}) b->Args({batch, threads});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(ms_onnx_infer)->Apply(infer_args);

#ifdef MS_HAVE_TORCH
torch::Tensor to_torch(const AnyTensor& t) {
  const AnyTensor c = ops::contiguous(t);
  std::vector<std::int64_t> dims(c.shape().begin(), c.shape().end());
  return torch::from_blob(const_cast<void*>(c.raw_data()), dims, torch::kFloat32).clone();
}

struct TorchConvBn {
  torch::Tensor w, gamma, beta, mean, var;
  explicit TorchConvBn(const ConvBn& c)
      : w(to_torch(c.w)), gamma(to_torch(c.gamma)), beta(to_torch(c.beta)), mean(to_torch(c.mean)),
        var(to_torch(c.var)) {}
  torch::Tensor operator()(const torch::Tensor& x, std::int64_t stride) const {
    const std::int64_t pad = w.size(2) / 2;
    torch::Tensor y = torch::conv2d(x, w, {}, stride, pad);
    return torch::batch_norm(y, gamma, beta, mean, var, false, 0.1, 1e-5, false);
  }
};

struct TorchNet {
  TorchConvBn stem{net().stem}, a1{net().a1}, a2{net().a2}, b1{net().b1}, b2{net().b2}, proj{net().proj};
  torch::Tensor fc = to_torch(net().fc), fcb = to_torch(net().fcb);
  torch::Tensor operator()(const torch::Tensor& x) const {
    torch::Tensor h = torch::max_pool2d(torch::relu(stem(x, 1)), 2);
    torch::Tensor r = a2(torch::relu(a1(h, 1)), 1);
    h = torch::relu(h + r);
    r = b2(torch::relu(b1(h, 2)), 1);
    h = torch::relu(proj(h, 2) + r);
    h = torch::adaptive_avg_pool2d(torch::avg_pool2d(h, 2), {1, 1}).flatten(1);
    return torch::linear(h, fc, fcb);
  }
};

void torch_infer(benchmark::State& state) {
  const std::int64_t batch = state.range(0);
  const int saved = torch::get_num_threads();
  torch::set_num_threads(static_cast<int>(state.range(1)));
  torch::InferenceMode guard;
  const TorchNet tn;
  const AnyTensor x = image(batch);
  const torch::Tensor tx = to_torch(x);
  const torch::Tensor ty = tn(tx).contiguous();
  const AnyTensor want = net()(x);
  double diff = 0;
  const float* tp = ty.data_ptr<float>();
  const auto wv = ms::Tensor<float>(want).to_vector();
  for (std::size_t i = 0; i < wv.size(); ++i) diff = std::max(diff, std::abs(static_cast<double>(tp[i]) - wv[i]));
  state.counters["max_abs_diff"] = diff;
  if (!(diff <= 1e-3)) state.SkipWithError("LibTorch's output differs from ms's eager forward");
  for (int i = 0; i < 3; ++i) tn(tx);  // warm-up: LibTorch prepares its kernels on the first calls
  for (auto _ : state) {
    torch::Tensor y = tn(tx);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["images_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
  torch::set_num_threads(saved);
}
BENCHMARK(torch_infer)->Apply(infer_args);
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef MS_HAVE_TORCH
  ms_bench::compare("ms_onnx_infer", "torch_infer", "onnx_infer");
#endif
  return ms_bench::main(argc, argv);
}
#else
int main() {
  std::puts("onnx_infer: built without ms::onnx (ONNX and protobuf not found): nothing to measure");
  return 0;
}
#endif
