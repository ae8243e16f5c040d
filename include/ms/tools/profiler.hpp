#pragma once
// ms::Profiler: an OpObserver that times every op executed on this thread, eager or in a
// graph replay (one record per replay step; a fused node is one record whose type is its
// "fused[mul+add]" label). Ops on a device are timed with the device's events (their
// executor passes OpCallInfo::timing), each on the track of its stream; host ops with
// the steady clock. Summaries by op name and by op type (calls, total/mean/min/max
// time, share of the total, GFLOP/s and GB/s from ops::op_cost), a text table, and a
// Chrome trace-event JSON timeline that Perfetto (ui.perfetto.dev) and chrome://tracing open.
// Chains to the observer installed before it, so a profiler and a data dump can run together.
//
//   ms::Profiler prof;
//   { ms::ProfilerScope on(prof); y = model(x); }
//   std::cout << prof.table();
//   prof.write_chrome_trace("/tmp/trace.json");

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../core/atomic_file.hpp"
#include "../core/linkage.hpp"
#include "../ops/dispatch.hpp"
#include "../ops/dnnl.hpp"
#include "scope.hpp"

#if MS_IMPL_BODIES  // Profiler::chrome_trace
#include <nlohmann/json.hpp>
#endif

namespace ms {

/// One executed op.
struct ProfileEvent {
  std::string name;        ///< graph node name in a replay ("mul_3"), else "<op>_<n>" (n counts calls of that op)
  std::string type;        ///< OpCallInfo::label: the op name or "fused[mul+add]"
  std::int64_t start_ns = 0;  ///< steady_clock, ns since the profiler's first start()
  std::int64_t end_ns = 0;
  int thread = 0;          ///< small index of the calling thread (0 = first thread seen)
  int stream = 0;
  std::string engine;
  int graph_id = -1;       ///< -1 for eager ops
  double flops = 0;
  double bytes = 0;
  std::int64_t duration_ns() const { return end_ns - start_ns; }
};

/// One row of a summary table.
struct ProfileSummaryRow {
  std::string key;
  std::int64_t calls = 0;
  std::int64_t total_ns = 0;
  double mean_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  double percent = 0;  ///< share of the summed duration of all events
  double flops = 0;
  double bytes = 0;
  double gflops_per_s = 0;
  double gbytes_per_s = 0;
};

class Profiler : public ops::OpObserver {
 public:
  Profiler() = default;
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;
  ~Profiler() override { stop(); }

  /// Installs the profiler on this thread (it forwards to the observer installed before).
  void start();
  /// Uninstalls it (restores the previous observer). Stop observers in reverse order of start.
  void stop() { uninstall(); }
  /// Forgets the recorded events (the time origin is kept).
  void clear();

  std::vector<ProfileEvent> events() const;

  /// Timing needs no values: device executors launch as usual and report afterwards.
  bool needs_values() const override { return prev_ != nullptr && prev_->needs_values(); }

  std::uint64_t begin(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
                      const ops::OpCallInfo& info) override;

  void end(std::uint64_t token, const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
           std::span<const AnyTensor> out, const ops::OpCallInfo& info) override;

  /// Rows grouped by event name (one row per graph node across replays; one per eager call).
  std::vector<ProfileSummaryRow> summary_by_op() const;
  /// Rows grouped by op type (op name or fused[...] label).
  std::vector<ProfileSummaryRow> summary_by_type() const;
  /// Sum of all event durations (ns).
  std::int64_t total_ns() const;

  /// Both summaries as fixed-width text tables (rows sorted by total time, largest first).
  std::string table() const;

  /// The CPU GEMM and convolution paths, oneDNN's ISA and its primitive cache, e.g. "CPU GEMM:
  /// dnnl (avx512_core_bf16), convolutions auto; primitive cache 6/256, 1194 hits, 6 misses (99.5%)".
  static std::string cpu_gemm_line();

  /// Chrome trace-event JSON (ts/dur in µs; one track per thread and stream; otherData names
  /// the CPU GEMM and convolution paths, oneDNN's ISA, the CPU kernels' level and the primitive cache).
  MS_IMPL std::string chrome_trace() const;

  /// Writes chrome_trace() to `path` atomically (a temporary file next to it, then a rename).
  void write_chrome_trace(const std::filesystem::path& path) const {
    write_file_atomically(path, chrome_trace(), "write_chrome_trace");
  }

 private:
  struct Frame {
    std::chrono::steady_clock::time_point start{};
    std::uint64_t prev_token = 0;
  };

  int thread_index();

  template <class Key>
  std::vector<ProfileSummaryRow> summarize(Key key) const {
    std::lock_guard lk(mu_);
    std::vector<ProfileSummaryRow> rows;
    std::unordered_map<std::string, std::size_t> at;
    std::int64_t all = 0;
    for (auto& e : events_) {
      const std::string& k = key(e);
      auto [it, fresh] = at.emplace(k, rows.size());
      if (fresh) {
        rows.push_back(ProfileSummaryRow{});
        rows.back().key = k;
        rows.back().min_ns = e.duration_ns();
        rows.back().max_ns = e.duration_ns();
      }
      auto& r = rows[it->second];
      std::int64_t d = e.duration_ns();
      r.calls++;
      r.total_ns += d;
      r.min_ns = std::min(r.min_ns, d);
      r.max_ns = std::max(r.max_ns, d);
      r.flops += e.flops;
      r.bytes += e.bytes;
      all += d;
    }
    for (auto& r : rows) {
      r.mean_ns = static_cast<double>(r.total_ns) / static_cast<double>(r.calls);
      r.percent = all > 0 ? 100.0 * static_cast<double>(r.total_ns) / static_cast<double>(all) : 0.0;
      r.gflops_per_s = r.total_ns > 0 ? r.flops / static_cast<double>(r.total_ns) : 0.0;  // flop/ns = GFLOP/s
      r.gbytes_per_s = r.total_ns > 0 ? r.bytes / static_cast<double>(r.total_ns) : 0.0;
    }
    std::stable_sort(rows.begin(), rows.end(),
                     [](const ProfileSummaryRow& a, const ProfileSummaryRow& b) { return a.total_ns > b.total_ns; });
    return rows;
  }

  static std::string format_table(std::string_view title, const std::vector<ProfileSummaryRow>& rows);

  mutable std::mutex mu_;
  std::vector<ProfileEvent> events_;
  std::vector<Frame> pending_;
  std::unordered_map<std::string, std::int64_t> counters_;
  std::unordered_map<std::thread::id, int> threads_;
  std::chrono::steady_clock::time_point t0_{};
  bool started_once_ = false;
};

/// Runs a Profiler for the lifetime of the scope.
using ProfilerScope = ToolScope<Profiler>;

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
MS_IMPL std::string Profiler::chrome_trace() const {
  std::lock_guard lk(mu_);
  nlohmann::json evs = nlohmann::json::array();
  std::map<std::pair<int, int>, int> tracks;
  auto track = [&](const ProfileEvent& e) {
    auto key = std::pair(e.thread, e.stream);
    auto it = tracks.find(key);
    if (it != tracks.end()) return it->second;
    int tid = static_cast<int>(tracks.size()) + 1;
    tracks.emplace(key, tid);
    return tid;
  };
  for (auto& e : events_) {
    nlohmann::json j;
    j["name"] = e.name;
    j["cat"] = e.type;
    j["ph"] = "X";
    j["ts"] = static_cast<double>(e.start_ns) / 1000.0;
    j["dur"] = static_cast<double>(e.duration_ns()) / 1000.0;
    j["pid"] = 1;
    j["tid"] = track(e);
    j["args"] = {{"type", e.type}, {"flops", e.flops}, {"bytes", e.bytes}, {"graph_id", e.graph_id},
                 {"stream", e.stream}, {"engine", e.engine}};
    evs.push_back(std::move(j));
  }
  evs.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0}, {"args", {{"name", "ms"}}}});
  for (auto& [key, tid] : tracks)
    evs.push_back({{"name", "thread_name"},
                   {"ph", "M"},
                   {"pid", 1},
                   {"tid", tid},
                   {"args", {{"name", MS_FORMAT("thread {} / stream {}", key.first, key.second)}}}});
  const DnnlCacheStats c = dnnl_cache_stats();
  nlohmann::json other{{"cpu_gemm", std::string(cpu_gemm_name(cpu_gemm()))},
                       {"cpu_conv", std::string(cpu_conv_name(cpu_conv()))},
                       {"dnnl_isa", dnnl_cpu_isa()},
                       {"cpu_isa", std::string(cpu::isa_name(cpu::isa()))},
                       {"dnnl_cache", {{"size", c.size}, {"capacity", c.capacity}, {"hits", c.hits}, {"misses", c.misses}}},
                       {"backends", ops::summary_lines()}};
  return nlohmann::json{{"traceEvents", std::move(evs)}, {"displayTimeUnit", "ms"}, {"otherData", std::move(other)}}
      .dump();
}
#endif  // MS_IMPL_BODIES

}  // namespace ms

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms {
MS_IMPL void Profiler::start() {
  if (running_) return;
  if (!started_once_) {
    t0_ = std::chrono::steady_clock::now();
    started_once_ = true;
  }
  install();
}

MS_IMPL void Profiler::clear() {
  std::lock_guard lk(mu_);
  events_.clear();
  counters_.clear();
}

MS_IMPL std::vector<ProfileEvent> Profiler::events() const {
  std::lock_guard lk(mu_);
  return events_;
}

MS_IMPL std::uint64_t Profiler::begin(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
                      const ops::OpCallInfo& info) {
  Frame f;
  if (prev_) f.prev_token = prev_->begin(op, in, attrs, info);
  std::lock_guard lk(mu_);
  pending_.push_back(f);
  std::uint64_t token = pending_.size() - 1;
  pending_.back().start = std::chrono::steady_clock::now();  // last: the chained observer's work is not timed
  return token;
}

MS_IMPL void Profiler::end(std::uint64_t token, const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
           std::span<const AnyTensor> out, const ops::OpCallInfo& info) {
  auto t_end = std::chrono::steady_clock::now();  // first: the chained observer's work is not timed
  Frame f;
  {
    std::lock_guard lk(mu_);
    if (token < pending_.size()) {
      f = pending_[token];
      pending_.resize(token);  // calls nest: drop this frame and any left open inside it
    } else {
      f.start = t_end;
    }
    ProfileEvent e;
    e.type = std::string(info.label.empty() ? std::string_view(op.name) : info.label);
    if (!info.node_name.empty()) {
      e.name = std::string(info.node_name);
    } else {
      e.name = MS_FORMAT("{}_{}", op.name, counters_[op.name]++);
    }
    // Device ops come with their executor's event timing; host ops are timed here.
    const auto t_start = info.timing ? info.timing->start : f.start;
    const auto t_stop = info.timing ? info.timing->end : t_end;
    e.start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t_start - t0_).count();
    e.end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t_stop - t0_).count();
    e.thread = thread_index();
    e.stream = info.stream;
    e.engine = std::string(info.engine);
    e.graph_id = info.graph_id;
    auto im = ops::input_metas(in);
    SmallVec<ops::TensorMeta, 4> om;
    for (auto& t : out)
      if (t.defined()) om.push_back(ops::TensorMeta{t.dtype(), t.shape()});
    ops::Cost c = ops::op_cost(op, std::span<const ops::TensorMeta>(im.data(), im.size()),
                               std::span<const ops::TensorMeta>(om.data(), om.size()), attrs);
    e.flops = c.flops;
    e.bytes = c.bytes;
    events_.push_back(std::move(e));
  }
  if (prev_) prev_->end(f.prev_token, op, in, attrs, out, info);
}

MS_IMPL std::vector<ProfileSummaryRow> Profiler::summary_by_op() const {
  return summarize([](const ProfileEvent& e) -> const std::string& { return e.name; });
}
MS_IMPL std::vector<ProfileSummaryRow> Profiler::summary_by_type() const {
  return summarize([](const ProfileEvent& e) -> const std::string& { return e.type; });
}
MS_IMPL std::int64_t Profiler::total_ns() const {
  std::lock_guard lk(mu_);
  std::int64_t t = 0;
  for (auto& e : events_) t += e.duration_ns();
  return t;
}

MS_IMPL std::string Profiler::table() const {
  std::string s = format_table("By op type", summary_by_type());
  s += "\n";
  s += format_table("By op", summary_by_op());
  s += "\n" + cpu_gemm_line() + "\n";
  s += "CPU kernels: " + cpu::isa_summary() + "\n";
  for (const std::string& line : ops::summary_lines()) s += line + "\n";
  return s;
}

MS_IMPL std::string Profiler::cpu_gemm_line() {
  const DnnlCacheStats c = dnnl_cache_stats();
  return MS_FORMAT("CPU GEMM: {} ({}), convolutions {}; primitive cache {}/{}, {} hits, {} misses ({:.1f}%)",
                     cpu_gemm_name(cpu_gemm()), dnnl_cpu_isa(), cpu_conv_name(cpu_conv()), c.size, c.capacity, c.hits, c.misses,
                     100.0 * c.hit_rate());
}

MS_IMPL int Profiler::thread_index() {  // called under mu_
  auto id = std::this_thread::get_id();
  auto it = threads_.find(id);
  if (it != threads_.end()) return it->second;
  int n = static_cast<int>(threads_.size());
  threads_.emplace(id, n);
  return n;
}

MS_IMPL std::string Profiler::format_table(std::string_view title, const std::vector<ProfileSummaryRow>& rows) {
  std::size_t w = 4;
  for (auto& r : rows) w = std::max(w, r.key.size());
  std::string s = MS_FORMAT("{}\n", title);
  s += MS_FORMAT("{:<{}} {:>7} {:>12} {:>12} {:>12} {:>12} {:>7} {:>10} {:>10}\n", "name", w, "calls",
                   "total(us)", "mean(us)", "min(us)", "max(us)", "%", "GFLOP/s", "GB/s");
  for (auto& r : rows)
    s += MS_FORMAT("{:<{}} {:>7} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>7.2f} {:>10.3f} {:>10.3f}\n", r.key, w,
                     r.calls, r.total_ns / 1e3, r.mean_ns / 1e3, r.min_ns / 1e3, r.max_ns / 1e3, r.percent,
                     r.gflops_per_s, r.gbytes_per_s);
  return s;
}
}  // namespace ms
#endif
