// Memory bandwidth of an eager elementwise op: ms::mul on 16M floats (3 x 4 x N bytes per op:
// two reads, one write) against a STREAM-style copy loop (2 x 4 x N bytes: one read, one
// write) over the same number of floats, with 1 and 2 threads (ms::set_num_threads for ms,
// OpenMP for the copy), measured in the same run. Prints GB/s for each and the ratio
// ours/peer of the two bandwidths (target: at least 0.8). memcpy is shown for reference.
#include <cstring>
#include <vector>

#include <ms/ms.hpp>

#include "bench_common.hpp"

namespace {
constexpr std::int64_t kN = std::int64_t{16} << 20;

ms::Tensor<float> filled(float start) {
  ms::Tensor<float> t = ms::AnyTensor::empty(ms::Shape{kN}, ms::DType::f32);
  float* p = t.data();
  for (std::int64_t i = 0; i < kN; ++i) p[i] = start + static_cast<float>(i % 1000) * 0.001f;
  return t;
}

void set_gbps(benchmark::State& state, double bytes_per_iter) {
  state.counters["GB/s"] = benchmark::Counter(bytes_per_iter / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void ms_mul(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int saved = ms::get_num_threads();
  ms::set_num_threads(threads);
  ms::Tensor<float> a = filled(1), b = filled(2);
  { ms::Tensor<float> warm = ms::mul(a, b); }  // the output block is then a cache hit, already faulted in
  for (auto _ : state) {
    ms::Tensor<float> c = ms::mul(a, b);
    benchmark::DoNotOptimize(c.raw_data());
    benchmark::ClobberMemory();
  }
  set_gbps(state, 3.0 * 4.0 * static_cast<double>(kN));
  ms::set_num_threads(saved);
}

void copy_loop(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> src(static_cast<std::size_t>(kN), 1.0f), dst(static_cast<std::size_t>(kN), 0.0f);
  float* __restrict s = src.data();
  float* __restrict d = dst.data();
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < kN; ++i) d[i] = s[i];
    benchmark::DoNotOptimize(d);
    benchmark::ClobberMemory();
  }
  set_gbps(state, 2.0 * 4.0 * static_cast<double>(kN));
}

void memcpy_copy(benchmark::State& state) {
  std::vector<float> src(static_cast<std::size_t>(kN), 1.0f), dst(static_cast<std::size_t>(kN), 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), static_cast<std::size_t>(kN) * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_gbps(state, 2.0 * 4.0 * static_cast<double>(kN));
}

}  // namespace

BENCHMARK(ms_mul)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(copy_loop)->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(memcpy_copy)->UseRealTime()->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  ms_bench::counter_unit("GB/s", "GB/s");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ms_bench::Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  ms_bench::print_summary(reporter);
  // Bandwidth ratios (above 1: ours moves bytes faster than the copy does).
  std::printf("# ratio name ours/peer bandwidth-ratio (GB/s of ms_mul over GB/s of the copy; target >= 0.8)\n");
  for (const char* t : {"1", "2"}) {
    auto ours = reporter.results().find(std::string("ms_mul/threads:") + t);
    auto peer = reporter.results().find(std::string("copy_loop/threads:") + t);
    if (ours == reporter.results().end() || peer == reporter.results().end()) continue;
    double o = ours->second.counters.at("GB/s").value, p = peer->second.counters.at("GB/s").value;
    std::printf("ratio mul_vs_copy_bandwidth/threads:%s ours/peer %.2f\n", t, o / p);
  }
  return 0;
}
