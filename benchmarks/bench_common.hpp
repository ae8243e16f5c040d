// Shared main() for the ms benchmarks, on top of Google Benchmark.
//
// After the usual console table, every benchmark program prints one line per
// measurement in the form `name value unit`, and for each pair of benchmarks
// registered with ms_bench::compare() (ours against a peer such as Eigen or
// LibTorch, measured in the same run) a line `ratio name ours/peer X.XX`.
// Nothing from ms is needed here; this header only knows Google Benchmark.
//
//   #include "bench_common.hpp"
//   static void ms_add(benchmark::State& s) { ... }
//   static void torch_add(benchmark::State& s) { ... }
//   BENCHMARK(ms_add)->Arg(1 << 20);
//   BENCHMARK(torch_add)->Arg(1 << 20);
//   int main(int argc, char** argv) {
//     ms_bench::compare("ms_add", "torch_add", "add");
//     return ms_bench::main(argc, argv);
//   }
//
// or, with no pairs to register, just `MS_BENCH_MAIN()`.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ms_bench {

/// One measurement: a value and its unit.
struct Measure {
  double value = 0;
  std::string unit;
};

/// What one benchmark instance (e.g. "ms_add/1048576") measured.
struct Result {
  double seconds_per_iter = 0;  ///< real time per iteration, in seconds
  double time = 0;              ///< the same, in the benchmark's own time unit
  std::string time_unit;        ///< "ns", "us", "ms" or "s"
  std::map<std::string, Measure> counters;
  int rank = 0;  ///< which run it came from: 1 iteration, 2 mean, 3 median
};

namespace detail {

struct Pair {
  std::string ours;
  std::vector<std::string> peers;  ///< the ratio is taken against the fastest of them
  std::string label;
};

inline std::vector<Pair>& pairs() {
  static std::vector<Pair> p;
  return p;
}

inline std::map<std::string, std::string>& counter_units() {
  static std::map<std::string, std::string> u;
  return u;
}

template <class Run>
bool failed(const Run& r) {
  if constexpr (requires { r.error_occurred; }) {
    return r.error_occurred;  // Google Benchmark <= 1.7
  } else {
    return static_cast<bool>(r.skipped);  // Google Benchmark >= 1.8
  }
}

inline std::string unit_of(const std::string& counter, const benchmark::Counter& c) {
  if (auto it = counter_units().find(counter); it != counter_units().end()) return it->second;
  if (counter == "bytes_per_second") return "B/s";
  if (counter == "items_per_second") return "items/s";
  if (c.flags & benchmark::Counter::kIsRate) return "/s";
  return "1";
}

}  // namespace detail

/// Registers a pair: a benchmark of ours and the peer's benchmark of the same
/// work. Instances pair by argument suffix: ours "ms_add/1024" goes with peer
/// "torch_add/1024". `label` (default: ours) names the pair in the ratio line.
inline void compare(std::string ours, std::string peer, std::string label = {}) {
  if (label.empty()) label = ours;
  detail::pairs().push_back({std::move(ours), {std::move(peer)}, std::move(label)});
}

/// Registers ours against the fastest of several peers measured in the same run (per
/// argument suffix): the ratio line names that peer, e.g. "ratio gemm/64/1 ours/fastest
/// 0.97 (openblas_gemm)". A floor (the step's GEMMs alone on each library) works the same.
inline void compare_fastest(std::string ours, std::vector<std::string> peers, std::string label) {
  detail::pairs().push_back({std::move(ours), std::move(peers), std::move(label)});
}

/// Sets the unit printed for a user counter that is not a plain rate
/// (e.g. counter_unit("GFLOPS", "GFLOP/s")). Unknown counters print unit "1".
inline void counter_unit(std::string counter, std::string unit) {
  detail::counter_units()[std::move(counter)] = std::move(unit);
}

/// The console reporter of Google Benchmark that also keeps every result.
class Reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) record(r);
  }

  const std::map<std::string, Result>& results() const { return results_; }
  const std::vector<std::string>& order() const { return order_; }

 private:
  void record(const Run& r) {
    if (detail::failed(r)) return;
    int rank = 1;
    if (r.run_type == Run::RT_Aggregate) {
      // With --benchmark_repetitions, summarize by the median (else the mean).
      if (r.aggregate_name == "median") rank = 3;
      else if (r.aggregate_name == "mean") rank = 2;
      else return;
    }
    const std::string name = r.run_name.str();
    auto [it, fresh] = results_.try_emplace(name);
    if (fresh) order_.push_back(name);
    Result& res = it->second;
    if (rank < res.rank) return;
    res.rank = rank;
    res.time = r.GetAdjustedRealTime();
    res.time_unit = benchmark::GetTimeUnitString(r.time_unit);
    res.seconds_per_iter = res.time / benchmark::GetTimeUnitMultiplier(r.time_unit);
    res.counters.clear();
    for (const auto& [cname, c] : r.counters) {
      res.counters[cname] = {static_cast<double>(c), detail::unit_of(cname, c)};
    }
  }

  std::map<std::string, Result> results_;
  std::vector<std::string> order_;
};

/// Prints the `name value unit` lines and the ratio lines for what `rep` saw.
inline void print_summary(const Reporter& rep, std::FILE* out = stdout) {
  std::fprintf(out, "\n# name value unit\n");
  for (const std::string& name : rep.order()) {
    const Result& r = rep.results().at(name);
    std::fprintf(out, "%s %.6g %s\n", name.c_str(), r.time, r.time_unit.c_str());
    for (const auto& [cname, m] : r.counters) {
      std::fprintf(out, "%s:%s %.6g %s\n", name.c_str(), cname.c_str(), m.value, m.unit.c_str());
    }
  }
  bool header = false;
  for (const detail::Pair& p : detail::pairs()) {
    for (const std::string& name : rep.order()) {
      std::string suffix;
      if (name == p.ours) {
        suffix = "";
      } else if (name.size() > p.ours.size() && name.compare(0, p.ours.size(), p.ours) == 0 &&
                 name[p.ours.size()] == '/') {
        suffix = name.substr(p.ours.size());
      } else {
        continue;
      }
      const Result* best = nullptr;
      std::string best_name;
      for (const std::string& peer_name : p.peers) {
        auto peer = rep.results().find(peer_name + suffix);
        if (peer == rep.results().end() || peer->second.seconds_per_iter <= 0) continue;
        if (!best || peer->second.seconds_per_iter < best->seconds_per_iter) best = &peer->second, best_name = peer_name;
      }
      if (!best) continue;
      if (!header) {
        std::fprintf(out, "# ratio name ours/peer time-ratio (below 1: ours is faster)\n");
        header = true;
      }
      const double ratio = rep.results().at(name).seconds_per_iter / best->seconds_per_iter;
      if (p.peers.size() == 1)
        std::fprintf(out, "ratio %s%s ours/peer %.2f\n", p.label.c_str(), suffix.c_str(), ratio);
      else
        std::fprintf(out, "ratio %s%s ours/fastest %.2f (%s)\n", p.label.c_str(), suffix.c_str(), ratio,
                     best_name.c_str());
    }
  }
  std::fflush(out);
}

/// Runs the benchmarks selected on the command line, then prints the summary.
inline int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  print_summary(reporter);
  return 0;
}

}  // namespace ms_bench

/// Defines main() for a benchmark program that registers no pairs.
#define MS_BENCH_MAIN() \
  int main(int argc, char** argv) { return ::ms_bench::main(argc, argv); }
