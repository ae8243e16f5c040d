// The elementwise work of benchmarks/isa.sh, at every CPU level this program holds and the
// CPU runs (ms::cpu::set_isa), on one thread:
//   chain   y = tanh(x*0.5 + 0.1)*1.5 - x/(1 + exp(x)) on 16M floats, through ms::jit
//           (one fused node, the block interpreter);
//   add     eager a + b on 16M floats (bandwidth), and on 1024 floats (per-call cost);
//   sum     eager sum of all 16M floats (one pairwise run per chunk), and over the first
//           axis of a 4096 x 4096 view of them (columns);
//   softmax softmax along the rows of that 4096 x 4096 view;
//   xent    cross_entropy of 4096 x 1000 logits (its forward pass);
//   adam    optim::Adam's step over the Fashion-MNIST MLP's six parameters (269,322 floats),
//           captured by ms::jit (six adam_update nodes);
//   and the kernels that stay in the program's own unit, to show what the level would buy:
//   transpose (a 4096 x 4096 transposed copy), gather (index_select of 4096 rows of 1024),
//   isum (sum of 16M int32), mse / nll (losses over 4096 x 1000), embedding (4096 rows of
//   256 from 50,000), dropout (16M floats), resize (bilinear 64 x 16 x 32 x 32 -> 64 x 64),
//   gemm_builtin (the built-in GEMM, the path without oneDNN and OpenBLAS, 256 x 784 x 64).
// Prints `isa <level> <name> <median> ms` lines (median of the repetitions).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include <ms/ms.hpp>

namespace {

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  f();  // warm-up: allocations, first-call tracing
  for (int r = 0; r < reps; ++r) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

ms::Tensor<float> input(std::int64_t n) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = std::sin(0.001f * static_cast<float>(i)) * 4.0f;
  return ms::from_vector(v, {n});
}

}  // namespace

int main() {
  ms::set_num_threads(1);
  const std::int64_t n = std::int64_t{1} << 24;
  const auto x = input(n), y = input(n) * 0.5f;
  const auto xs = input(1024), ys = input(1024);
  const auto x2d = x.reshape({4096, 4096});
  const auto logits = input(4096 * 1000).reshape({4096, 1000});
  std::vector<std::int64_t> label_values(4096);
  for (std::size_t i = 0; i < label_values.size(); ++i) label_values[i] = static_cast<std::int64_t>(i * 7 % 1000);
  const auto labels = ms::from_vector(label_values, {4096});
  std::vector<ms::Tensor<float>> params, grads;
  for (std::int64_t n : {256 * 784, 256, 256 * 256, 256, 10 * 256, 10}) {
    params.push_back(input(n));
    params.back().requires_grad_(true);
    grads.push_back(input(n) * 0.01f);
  }
  ms::optim::Adam opt(params, 1e-3);
  std::vector<std::int32_t> iv(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<std::int32_t>(i % 1000) - 500;
  const auto ints = ms::from_vector(iv, {n});
  std::vector<std::int64_t> rows(4096), tokens(4096);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i] = static_cast<std::int64_t>(i * 2654435761u % 16384);
    tokens[i] = static_cast<std::int64_t>(i * 40503u % 50000);
  }
  const auto row_index = ms::from_vector(rows, {4096});
  const auto token_index = ms::from_vector(tokens, {4096});
  const auto table = input(50000 * 256).reshape({50000, 256});
  const auto x16k = x.reshape({16384, 1024});
  const auto logits2 = logits * 0.5f;
  const auto images = input(64 * 16 * 32 * 32).reshape({64, 16, 32, 32});
  const auto ga = input(256 * 784).reshape({256, 784}), gb = input(784 * 64).reshape({784, 64});
  using T = const ms::Tensor<float>&;
  auto adam_step = ms::jit([&](T g0, T g1, T g2, T g3, T g4, T g5) {
    opt.step({g0, g1, g2, g3, g4, g5});
    return std::vector<ms::Tensor<float>>{};
  });
  auto adam = [&] { adam_step(grads[0], grads[1], grads[2], grads[3], grads[4], grads[5]); };
  std::printf("isa: CPU kernels %s\n", ms::cpu::isa_summary().c_str());
  for (ms::cpu::Isa level : ms::cpu::compiled_isas()) {
    if (static_cast<int>(level) > static_cast<int>(ms::cpu::detected_isa())) continue;
    ms::cpu::set_isa(level);
    const auto name = ms::cpu::isa_name(level);
    auto chain = ms::jit([](const ms::Tensor<float>& v) {
      return ms::tanh(v * 0.5f + 0.1f) * 1.5f - v / (ms::exp(v) + 1.0f);
    });
    double sink = 0;
    const double chain_ms = median_ms(15, [&] { sink += chain(x).data()[0]; });
    const double add_ms = median_ms(15, [&] { sink += (x + y).data()[0]; });
    const double add_small_us = 1000.0 * median_ms(2001, [&] { sink += (xs + ys).data()[0]; });
    std::printf("isa %.*s chain_16M %.3f ms\n", static_cast<int>(name.size()), name.data(), chain_ms);
    std::printf("isa %.*s eager_add_16M %.3f ms\n", static_cast<int>(name.size()), name.data(), add_ms);
    std::printf("isa %.*s eager_add_1k %.3f us\n", static_cast<int>(name.size()), name.data(), add_small_us);
    const double sum_ms = median_ms(15, [&] { sink += ms::sum(x).data()[0]; });
    const double sum_cols_ms = median_ms(15, [&] { sink += ms::sum(x2d, {0}).data()[0]; });
    std::printf("isa %.*s sum_16M %.3f ms\n", static_cast<int>(name.size()), name.data(), sum_ms);
    std::printf("isa %.*s sum_cols_16M %.3f ms\n", static_cast<int>(name.size()), name.data(), sum_cols_ms);
    const double softmax_ms = median_ms(15, [&] { sink += ms::softmax(x2d, -1).data()[0]; });
    const double xent_ms = median_ms(15, [&] { sink += ms::cross_entropy(logits, labels).data()[0]; });
    std::printf("isa %.*s softmax_16M %.3f ms\n", static_cast<int>(name.size()), name.data(), softmax_ms);
    std::printf("isa %.*s xent_4096x1000 %.3f ms\n", static_cast<int>(name.size()), name.data(), xent_ms);
    const double adam_us = 1000.0 * median_ms(201, [&] { adam(); });
    std::printf("isa %.*s adam_269k %.3f us\n", static_cast<int>(name.size()), name.data(), adam_us);
    const double transpose_ms = median_ms(15, [&] { sink += x2d.transpose(0, 1).contiguous().data()[0]; });
    const double gather_ms = median_ms(15, [&] { sink += ms::index_select(x16k, 0, row_index).data()[0]; });
    const double isum_ms = median_ms(15, [&] { sink += static_cast<double>(ms::sum(ints).data()[0]); });
    const double mse_ms = median_ms(15, [&] { sink += ms::mse_loss(logits, logits2).data()[0]; });
    const double nll_ms = median_ms(15, [&] { sink += ms::nll_loss(logits, labels).data()[0]; });
    const double embed_ms = median_ms(15, [&] { sink += ms::embedding(table, token_index).data()[0]; });
    const double dropout_ms = median_ms(15, [&] { sink += ms::dropout(x, 0.5, true, 7).data()[0]; });
    const double resize_ms = median_ms(15, [&] {
      sink += ms::interpolate(images, ms::Int2{64, 64}, std::nullopt, "bilinear").data()[0];
    });
    const ms::CpuGemm gemm_path = ms::cpu_gemm();
    ms::set_cpu_gemm(ms::CpuGemm::builtin);
    const double gemm_us = 1000.0 * median_ms(201, [&] { sink += ms::matmul(ga, gb).data()[0]; });
    ms::set_cpu_gemm(gemm_path);
    const std::pair<const char*, double> more[] = {
        {"transpose_16M", transpose_ms}, {"gather_4096x1024", gather_ms}, {"isum_16M", isum_ms},
        {"mse_4096x1000", mse_ms},       {"nll_4096x1000", nll_ms},       {"embedding_4096x256", embed_ms},
        {"dropout_16M", dropout_ms},     {"resize_bilinear", resize_ms}};
    for (const auto& [what, t] : more)
      std::printf("isa %.*s %s %.3f ms\n", static_cast<int>(name.size()), name.data(), what, t);
    std::printf("isa %.*s gemm_builtin_256x784x64 %.3f us\n", static_cast<int>(name.size()), name.data(), gemm_us);
    if (sink == 12345.678) std::printf("\n");
  }
  return 0;
}
