// Convolution time, float32, on LeNet-5's two layers at batch 64 (the shapes of the
// training step) and two wider layers: the forward pass, the input gradient and the weight
// gradient, each
//   ms_auto_*     ms's default (CpuConv::automatic): per pass, the direct kernels, oneDNN's
//                 primitives or im2col
//   ms_direct_*   ms's direct kernels (MS_CPU_CONV=direct; forward and weight gradient)
//   ms_im2col_*   im2col over blocks of images, GEMMs on oneDNN's sgemm (MS_CPU_CONV=im2col)
//   ms_builtin_*  the same kernels with ms's own GEMM (MS_CPU_GEMM=builtin)
//   ms_dnnl_*     oneDNN's convolution primitives in its blocked layouts (MS_CPU_CONV=dnnl)
// beside LibTorch's convolution and its backward (at::convolution_backward) when found.
// The summary prints the ratios (below 1: faster): the default against LibTorch, and the
// ones that decide the default's rule (ms::conv_prefers_direct, ms::conv_prefers_dnnl).
//
//   ./conv                                 # both layers, 1 and 2 threads
//   ./conv --benchmark_filter='fwd'        # forward passes only

#include <array>
#include <cstdint>
#include <cstdio>
#include <string>

#include "bench_common.hpp"
#include <ms/ms.hpp>

#ifdef MS_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace {

struct Layer {
  std::int64_t n, c, h, w, o, k, pad;
};
// LeNet-5 at batch 64: conv1 1 -> 6 channels, 5 x 5, padding 2, on 28 x 28; conv2 6 -> 16 on 14 x 14.
// Then three more layers at batch 64: a first layer 1 -> 32 (5 x 5 on 28 x 28), a middle
// one 16 -> 32 (3 x 3, padding 1, on 14 x 14), and an RGB first layer 3 -> 16 (3 x 3,
// padding 1, on 32 x 32).
constexpr Layer kLayers[] = {{64, 1, 28, 28, 6, 5, 2},    {64, 6, 14, 14, 16, 5, 0}, {64, 1, 28, 28, 32, 5, 2},
                             {64, 16, 14, 14, 32, 3, 1}, {64, 3, 32, 32, 16, 3, 1}};

enum class Pass { fwd, grad_input, grad_weight };

void ms_conv(benchmark::State& s, Pass pass, ms::CpuGemm path, ms::CpuConv conv) {
  if (!ms::cpu_gemm_available(path) || (conv == ms::CpuConv::dnnl && !ms::cpu_gemm_available(ms::CpuGemm::dnnl))) {
    s.SkipWithError("path not in this build");
    return;
  }
  const Layer& L = kLayers[s.range(0)];
  const ms::CpuGemm saved_path = ms::cpu_gemm();
  const ms::CpuConv saved_conv = ms::cpu_conv();
  const int saved_threads = ms::get_num_threads();
  ms::set_cpu_gemm(path);
  ms::set_cpu_conv(conv);
  ms::set_num_threads(static_cast<int>(s.range(1)));
  ms::manual_seed(0);
  ms::Tensor<float> x = ms::rand<float>({L.n, L.c, L.h, L.w}), w = ms::rand<float>({L.o, L.c, L.k, L.k});
  ms::Tensor<float> b = ms::rand<float>({L.o});
  ms::Tensor<float> y = ms::conv2d(x, w, b, 1, L.pad);
  ms::Tensor<float> g = ms::rand<float>(y.shape());
  ms::ops::Attrs a{{"stride", ms::ops::IntList{1, 1}}, {"padding", ms::ops::IntList{L.pad, L.pad}},
                   {"dilation", ms::ops::IntList{1, 1}}, {"groups", std::int64_t{1}}};
  ms::ops::Attrs ai = a, aw = a;
  ai.set("input_shape", x.shape().vec());
  aw.set("weight_shape", w.shape().vec());
  for (auto _ : s) {
    ms::AnyTensor r;
    switch (pass) {
      case Pass::fwd: r = ms::conv2d(x, w, b, 1, L.pad); break;
      case Pass::grad_input: r = ms::ops::call1(ms::ops::conv2d_grad_input_op, {g, w}, ai); break;
      case Pass::grad_weight: r = ms::ops::call1(ms::ops::conv2d_grad_weight_op, {g, x}, aw); break;
    }
    benchmark::DoNotOptimize(r.raw_data());
  }
  ms::set_num_threads(saved_threads);
  ms::set_cpu_gemm(saved_path);
  ms::set_cpu_conv(saved_conv);
}

using ms::CpuConv;
using ms::CpuGemm;
void ms_auto_fwd(benchmark::State& s) { ms_conv(s, Pass::fwd, CpuGemm::dnnl, CpuConv::automatic); }
void ms_auto_grad_input(benchmark::State& s) { ms_conv(s, Pass::grad_input, CpuGemm::dnnl, CpuConv::automatic); }
void ms_auto_grad_weight(benchmark::State& s) { ms_conv(s, Pass::grad_weight, CpuGemm::dnnl, CpuConv::automatic); }
void ms_direct_fwd(benchmark::State& s) { ms_conv(s, Pass::fwd, CpuGemm::dnnl, CpuConv::direct); }
void ms_direct_grad_weight(benchmark::State& s) { ms_conv(s, Pass::grad_weight, CpuGemm::dnnl, CpuConv::direct); }
void ms_im2col_fwd(benchmark::State& s) { ms_conv(s, Pass::fwd, CpuGemm::dnnl, CpuConv::im2col); }
void ms_im2col_grad_input(benchmark::State& s) { ms_conv(s, Pass::grad_input, CpuGemm::dnnl, CpuConv::im2col); }
void ms_im2col_grad_weight(benchmark::State& s) { ms_conv(s, Pass::grad_weight, CpuGemm::dnnl, CpuConv::im2col); }
void ms_builtin_fwd(benchmark::State& s) { ms_conv(s, Pass::fwd, CpuGemm::builtin, CpuConv::im2col); }
void ms_builtin_grad_input(benchmark::State& s) { ms_conv(s, Pass::grad_input, CpuGemm::builtin, CpuConv::im2col); }
void ms_builtin_grad_weight(benchmark::State& s) { ms_conv(s, Pass::grad_weight, CpuGemm::builtin, CpuConv::im2col); }
void ms_dnnl_fwd(benchmark::State& s) { ms_conv(s, Pass::fwd, CpuGemm::dnnl, CpuConv::dnnl); }
void ms_dnnl_grad_input(benchmark::State& s) { ms_conv(s, Pass::grad_input, CpuGemm::dnnl, CpuConv::dnnl); }
void ms_dnnl_grad_weight(benchmark::State& s) { ms_conv(s, Pass::grad_weight, CpuGemm::dnnl, CpuConv::dnnl); }

#ifdef MS_HAVE_TORCH
void torch_conv(benchmark::State& s, Pass pass) {
  const Layer& L = kLayers[s.range(0)];
  const int saved = torch::get_num_threads();
  torch::set_num_threads(static_cast<int>(s.range(1)));
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  torch::Tensor x = torch::rand({L.n, L.c, L.h, L.w}), w = torch::rand({L.o, L.c, L.k, L.k}), b = torch::rand({L.o});
  torch::Tensor y = torch::conv2d(x, w, b, 1, L.pad);
  torch::Tensor g = torch::rand_like(y);
  const std::array<bool, 3> mask{pass == Pass::grad_input, pass == Pass::grad_weight, false};
  for (auto _ : s) {
    if (pass == Pass::fwd) {
      torch::Tensor r = torch::conv2d(x, w, b, 1, L.pad);
      benchmark::DoNotOptimize(r.data_ptr());
    } else {
      auto r = at::convolution_backward(g, x, w, c10::nullopt, {1, 1}, {L.pad, L.pad}, {1, 1}, false, {0, 0}, 1, mask);
      benchmark::DoNotOptimize(pass == Pass::grad_input ? std::get<0>(r).data_ptr() : std::get<1>(r).data_ptr());
    }
  }
  torch::set_num_threads(saved);
}
void torch_fwd(benchmark::State& s) { torch_conv(s, Pass::fwd); }
void torch_grad_input(benchmark::State& s) { torch_conv(s, Pass::grad_input); }
void torch_grad_weight(benchmark::State& s) { torch_conv(s, Pass::grad_weight); }
#endif

}  // namespace

int main(int argc, char** argv) {
  std::printf("conv: oneDNN ISA %s\n", ms::dnnl_cpu_isa().c_str());
  for (int threads : {1, 2})
    for (int layer : {0, 1, 2, 3, 4}) {
      auto add = [&](const char* name, void (*fn)(benchmark::State&)) {
        benchmark::RegisterBenchmark(name, fn)
            ->Args({layer, threads})
            ->ArgNames({"layer", "threads"})
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      };
      add("ms_auto_fwd", ms_auto_fwd);
      add("ms_direct_fwd", ms_direct_fwd);
      add("ms_im2col_fwd", ms_im2col_fwd);
      add("ms_builtin_fwd", ms_builtin_fwd);
      add("ms_dnnl_fwd", ms_dnnl_fwd);
      add("ms_auto_grad_input", ms_auto_grad_input);
      add("ms_im2col_grad_input", ms_im2col_grad_input);
      add("ms_builtin_grad_input", ms_builtin_grad_input);
      add("ms_dnnl_grad_input", ms_dnnl_grad_input);
      add("ms_auto_grad_weight", ms_auto_grad_weight);
      add("ms_direct_grad_weight", ms_direct_grad_weight);
      add("ms_im2col_grad_weight", ms_im2col_grad_weight);
      add("ms_builtin_grad_weight", ms_builtin_grad_weight);
      add("ms_dnnl_grad_weight", ms_dnnl_grad_weight);
#ifdef MS_HAVE_TORCH
      add("torch_fwd", torch_fwd);
      add("torch_grad_input", torch_grad_input);
      add("torch_grad_weight", torch_grad_weight);
#endif
    }
  for (std::string p : {"fwd", "grad_input", "grad_weight"}) {
    ms_bench::compare("ms_auto_" + p, "torch_" + p, "conv " + p + " ms vs LibTorch");
    ms_bench::compare("ms_im2col_" + p, "ms_builtin_" + p, "conv " + p + " im2col: oneDNN sgemm vs the built-in GEMM");
    ms_bench::compare("ms_dnnl_" + p, "ms_im2col_" + p, "conv " + p + " oneDNN primitive vs im2col");
    if (p != "grad_input") {
      ms_bench::compare("ms_direct_" + p, "ms_im2col_" + p, "conv " + p + " direct vs im2col");
      ms_bench::compare("ms_direct_" + p, "ms_dnnl_" + p, "conv " + p + " direct vs oneDNN primitive");
    }
  }
  return ms_bench::main(argc, argv);
}
