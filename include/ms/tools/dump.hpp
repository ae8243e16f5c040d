#pragma once
// ms::DataDump: MindSpore-style data dump as an OpObserver. Writes the inputs and/or
// outputs of selected ops (eager, and each step of a graph replay) as .npy files, and
// per-iteration statistic.csv files, under
//   {path}/rank_0/{net_name}/{graph_id}/{iteration}/
//     {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}.{input|output}.{slot}.npy
// graph_id is 0 for eager ops and executable id + 1 for replays; task_id counts the ops
// this dump has seen; timestamp is µs since the Unix epoch. The configuration uses
// MindSpore's common_dump_settings keys (see docs/observability.md). With op_debug_mode
// 3 or 4 it detects overflow instead: the float outputs of every op are checked for
// Inf/NaN and the first op producing one is recorded and dumped. Dumping only reads
// tensors: results are bit-identical with dump on or off. Tensors on a device are copied
// back to the host for the dump (a device executor waits for each op while a dump is
// installed: needs_values()). Chains to the observer installed before it (a profiler can
// run at the same time).

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../core/linkage.hpp"
#include "../core/npy.hpp"
#include "../backend/backend.hpp"
#include "../ops/dispatch.hpp"
#include "scope.hpp"

#if MS_IMPL_BODIES  // the configuration parser and the name patterns
#include <regex>

#include <nlohmann/json.hpp>
#endif

namespace ms {

/// Parsed common_dump_settings.
struct DumpConfig {
  enum class Saved { tensor, statistic, full };
  int dump_mode = 0;                ///< 0: all ops; 1: ops listed in kernels
  std::filesystem::path path;       ///< absolute
  std::string net_name = "Net";
  std::string iteration = "all";    ///< "all" or "0|5-8|100-120"
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  ///< parsed iteration; empty = all
  int input_output = 0;             ///< 0: both, 1: inputs, 2: outputs
  std::vector<std::string> kernels; ///< full node names, op types, or "name-regex(...)"
  Saved saved_data = Saved::tensor;
  int op_debug_mode = 0;            ///< 0: off; 3, 4: overflow detection

  bool iteration_selected(std::int64_t it) const {
    if (ranges.empty()) return true;
    for (auto& [a, b] : ranges)
      if (it >= a && it <= b) return true;
    return false;
  }
};

/// The first (and further) ops whose float outputs held Inf or NaN (overflow mode).
struct OverflowRecord {
  std::string op_name;
  std::string op_type;
  std::int64_t iteration = 0;
  std::int64_t task_id = 0;
};

namespace detail::dump {

[[noreturn]] inline void bad(const std::string& msg) { throw ValueError("dump config: " + msg); }

inline const char* kAcceptedKeys =
    "dump_mode, path, net_name, iteration, input_output, kernels, saved_data, op_debug_mode, support_device, "
    "file_format";

inline std::vector<std::pair<std::int64_t, std::int64_t>> parse_iteration(const std::string& s) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  if (s == "all") return out;
  auto fail = [&]() {
    bad(MS_FORMAT("iteration must be \"all\" or ranges like \"0|5-8|100-120\", got \"{}\"", s));
  };
  if (s.empty()) fail();
  auto number = [&](const std::string& t) -> std::int64_t {
    if (t.empty() || t.size() > 15) fail();
    for (char c : t)
      if (c < '0' || c > '9') fail();
    return std::stoll(t);
  };
  std::size_t pos = 0;
  while (true) {
    std::size_t bar = s.find('|', pos);
    std::string item = s.substr(pos, bar == std::string::npos ? std::string::npos : bar - pos);
    std::size_t dash = item.find('-');
    std::int64_t a, b;
    if (dash == std::string::npos) {
      a = b = number(item);
    } else {
      a = number(item.substr(0, dash));
      b = number(item.substr(dash + 1));
      if (a > b) fail();
    }
    out.emplace_back(a, b);
    if (bar == std::string::npos) break;
    pos = bar + 1;
  }
  return out;
}

/// Parses a JSON configuration text (see DataDump::parse_config).
MS_IMPL DumpConfig parse_config(const std::string& json_text);

/// Keeps '/', '\\', '.' and whitespace out of a file-name field.
inline std::string sanitize(std::string_view s) {
  std::string o(s);
  for (char& ch : o)
    if (ch == '/' || ch == '\\' || ch == '.' || ch == ' ' || ch == '\t' || ch == '\n') ch = '_';
  return o;
}

struct Stats {
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
  double mean = std::numeric_limits<double>::quiet_NaN();
  std::int64_t nan = 0, inf = 0;
};

inline bool is_float(DType d) { return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16; }

/// Reads element values as double (exact for float64 and int64 up to 2^53).
template <class F>
void for_each_double(const AnyTensor& t, F&& f) {
  const std::int64_t n = t.numel();
  if (n == 0) return;
  const int rank = t.dim();
  visit_dtype(t.dtype(), [&]<class T>() {
    const T* base = static_cast<const T*>(t.raw_data());
    std::int64_t idx[kMaxDims] = {};
    std::int64_t off = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
        f(static_cast<double>(static_cast<float>(base[off])));
      else
        f(static_cast<double>(base[off]));
      for (int d = rank - 1; d >= 0; --d) {
        if (++idx[d] < t.shape()[d]) {
          off += t.strides()[d];
          break;
        }
        off -= (t.shape()[d] - 1) * t.strides()[d];
        idx[d] = 0;
      }
    }
  });
}

/// min/max/mean over the non-NaN elements (Inf included); NaN and Inf counted.
inline Stats stats(const AnyTensor& t) {
  Stats s;
  double sum = 0;
  std::int64_t cnt = 0;
  for_each_double(t, [&](double v) {
    if (std::isnan(v)) {
      ++s.nan;
      return;
    }
    if (std::isinf(v)) ++s.inf;
    if (cnt == 0) s.min = s.max = v;
    else {
      s.min = std::min(s.min, v);
      s.max = std::max(s.max, v);
    }
    sum += v;
    ++cnt;
  });
  if (cnt > 0) s.mean = sum / static_cast<double>(cnt);
  return s;
}

/// `t` itself when it is on the host, else a host copy (device tensors are copied back).
inline AnyTensor on_host(const AnyTensor& t) {
  if (!t.defined() || t.device().is_cpu()) return t;
  return backend::to(t, Device::cpu());
}

inline bool has_inf_or_nan(const AnyTensor& dt) {
  if (!dt.defined() || !is_float(dt.dtype())) return false;
  const AnyTensor t = on_host(dt);
  bool bad_value = false;
  for_each_double(t, [&](double v) { bad_value = bad_value || !std::isfinite(v); });
  return bad_value;
}

/// A compiled "name-regex(...)" pattern (a std::regex, compiled once in the kernel unit).
struct Pattern;
/// Compiles `regex` (from the kernels entry `entry`); ValueError naming both when invalid.
MS_IMPL std::shared_ptr<const Pattern> compile_pattern(const std::string& entry, const std::string& regex);
MS_IMPL bool pattern_search(const Pattern& p, const std::string& name);

}  // namespace detail::dump

class DataDump : public ops::OpObserver {
 public:
  explicit DataDump(DumpConfig cfg) : cfg_(std::move(cfg)) {
    for (auto& k : cfg_.kernels) {
      static constexpr std::string_view pre = "name-regex(";
      if (k.size() > pre.size() && k.compare(0, pre.size(), pre) == 0 && k.back() == ')') {
        regexes_.push_back(detail::dump::compile_pattern(k, k.substr(pre.size(), k.size() - pre.size() - 1)));
      } else {
        names_.insert(k);
      }
    }
  }
  DataDump(const DataDump&) = delete;
  DataDump& operator=(const DataDump&) = delete;
  ~DataDump() override { stop(); }

  /// Parses a JSON configuration (either {"common_dump_settings": {...}} or the settings object itself).
  static DumpConfig parse_config(const std::string& json_text) { return detail::dump::parse_config(json_text); }
  static std::unique_ptr<DataDump> from_json(const std::string& json_text) {
    return std::make_unique<DataDump>(parse_config(json_text));
  }
  static std::unique_ptr<DataDump> from_file(const std::filesystem::path& file);
  /// The dump configured by the file named in MS_DUMP_CONFIG; nullptr when it is unset or empty.
  static std::unique_ptr<DataDump> from_env();

  const DumpConfig& config() const { return cfg_; }

  void start() { install(); }
  void stop() { uninstall(); }

  void set_iteration(std::int64_t it);
  void next_iteration();
  std::int64_t iteration() const;
  /// The directory of the current iteration for graph_dir (0: eager / parameters).
  std::filesystem::path iteration_dir(int graph_dir = 0) const;

  /// First op whose float outputs held Inf/NaN (overflow mode), if any.
  std::optional<OverflowRecord> first_overflow() const;
  std::vector<OverflowRecord> overflows() const;
  /// Number of .npy files written.
  std::int64_t files_written() const;

  /// Dumps a parameter or gradient as Parameter.{name}.0.0.{timestamp}.output.0.npy in the
  /// current iteration's eager directory (graph 0). Returns false when the iteration is not selected.
  bool dump_tensor(std::string_view name, const AnyTensor& t);

  std::uint64_t begin(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
                      const ops::OpCallInfo& info) override;

  void end(std::uint64_t token, const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
           std::span<const AnyTensor> out, const ops::OpCallInfo& info) override;

 private:
  struct Frame {
    std::uint64_t prev_token = 0;
    std::int64_t task_id = 0;
    std::int64_t timestamp = 0;
    std::string type, name;
    int graph_dir = 0;
    int stream = 0;
    bool selected = false;
  };

  static std::int64_t now_us();

  std::filesystem::path dir_for(int graph_dir, std::int64_t it) const {
    return cfg_.path / "rank_0" / cfg_.net_name / std::to_string(graph_dir) / std::to_string(it);
  }

  bool selected(const ops::OpDef& op, const Frame& f) const;

  void write_io(const std::filesystem::path& dir, const Frame& f, const char* io, std::size_t slot,
                const AnyTensor& t);

  void write_tensor(const std::filesystem::path& dir, const std::string& type, const std::string& name,
                    std::int64_t task, int stream, std::int64_t ts, const char* io, std::size_t slot,
                    const AnyTensor& dt);

  DumpConfig cfg_;
  std::set<std::string> names_;
  std::vector<std::shared_ptr<const detail::dump::Pattern>> regexes_;
  mutable std::mutex mu_;
  std::int64_t iteration_ = 0;
  std::int64_t task_ = 0;
  std::int64_t files_ = 0;
  std::vector<Frame> pending_;
  std::unordered_map<std::string, std::int64_t> counters_;
  std::vector<OverflowRecord> overflows_;
};

/// Runs a DataDump for the lifetime of the scope.
using DumpScope = ToolScope<DataDump>;

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
namespace detail::dump {

inline int get_int(const nlohmann::json& v, const char* key, std::initializer_list<int> ok, const char* what) {
  if (v.is_number_integer()) {
    auto x = v.get<std::int64_t>();
    for (int o : ok)
      if (x == o) return o;
  }
  bad(MS_FORMAT("{} must be {}, got {}", key, what, v.dump()));
}

inline DumpConfig parse(const nlohmann::json& root) {
  MS_CHECK(root.is_object(), ValueError, "dump config: expected a JSON object, got {}", root.type_name());
  const nlohmann::json* s = &root;
  if (root.contains("common_dump_settings")) {
    for (auto& [k, v] : root.items())
      if (k != "common_dump_settings" && k != "e2e_dump_settings" && k != "async_dump_settings")
        bad(MS_FORMAT("unknown key \"{}\" (accepted at the top level: common_dump_settings, e2e_dump_settings, "
                        "async_dump_settings)",
                        k));
    s = &root["common_dump_settings"];
    MS_CHECK(s->is_object(), ValueError, "dump config: common_dump_settings must be an object, got {}",
             s->type_name());
  }
  DumpConfig c;
  for (auto& [k, v] : s->items()) {
    if (k == "dump_mode") {
      c.dump_mode = get_int(v, "dump_mode", {0, 1}, "0 (all ops) or 1 (ops listed in kernels)");
    } else if (k == "path") {
      if (!v.is_string() || v.get<std::string>().empty() || !std::filesystem::path(v.get<std::string>()).is_absolute())
        bad(MS_FORMAT("path must be an absolute directory path, got {}", v.dump()));
      c.path = v.get<std::string>();
    } else if (k == "net_name") {
      if (!v.is_string() || v.get<std::string>().empty() ||
          v.get<std::string>().find_first_of("/\\") != std::string::npos)
        bad(MS_FORMAT("net_name must be a non-empty name without '/', got {}", v.dump()));
      c.net_name = v.get<std::string>();
    } else if (k == "iteration") {
      if (!v.is_string())
        bad(MS_FORMAT("iteration must be \"all\" or ranges like \"0|5-8|100-120\", got {}", v.dump()));
      c.iteration = v.get<std::string>();
      c.ranges = parse_iteration(c.iteration);
    } else if (k == "input_output") {
      c.input_output = get_int(v, "input_output", {0, 1, 2}, "0 (inputs and outputs), 1 (inputs) or 2 (outputs)");
    } else if (k == "kernels") {
      if (!v.is_array()) bad(MS_FORMAT("kernels must be a list of strings, got {}", v.dump()));
      for (auto& e : v) {
        if (!e.is_string()) bad(MS_FORMAT("kernels must be a list of strings, got {}", v.dump()));
        c.kernels.push_back(e.get<std::string>());
      }
    } else if (k == "saved_data") {
      std::string x = v.is_string() ? v.get<std::string>() : "";
      if (x == "tensor") c.saved_data = DumpConfig::Saved::tensor;
      else if (x == "statistic") c.saved_data = DumpConfig::Saved::statistic;
      else if (x == "full") c.saved_data = DumpConfig::Saved::full;
      else bad(MS_FORMAT("saved_data must be \"tensor\", \"statistic\" or \"full\", got {}", v.dump()));
    } else if (k == "op_debug_mode") {
      c.op_debug_mode = get_int(v, "op_debug_mode", {0, 3, 4}, "0 (off), 3 or 4 (overflow detection)");
    } else if (k == "support_device") {
      // accepted for MindSpore compatibility; this dump runs on the calling thread's device
    } else if (k == "file_format") {
      if (!(v.is_string() && v.get<std::string>() == "npy"))
        bad(MS_FORMAT("file_format must be \"npy\", got {}", v.dump()));
    } else {
      bad(MS_FORMAT("unknown key \"{}\" (accepted: {})", k, kAcceptedKeys));
    }
  }
  if (!s->contains("path")) bad("missing required key \"path\"");
  if (c.dump_mode == 1 && c.kernels.empty()) bad("dump_mode 1 needs a non-empty kernels list");
  return c;
}

struct Pattern {
  std::regex re;
};

MS_IMPL std::shared_ptr<const Pattern> compile_pattern(const std::string& entry, const std::string& regex) {
  try {
    return std::make_shared<const Pattern>(Pattern{std::regex(regex)});
  } catch (const std::regex_error& e) {
    bad(MS_FORMAT("kernels: invalid regular expression in \"{}\": {}", entry, e.what()));
  }
}

MS_IMPL bool pattern_search(const Pattern& p, const std::string& name) { return std::regex_search(name, p.re); }

MS_IMPL DumpConfig parse_config(const std::string& json_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    bad(MS_FORMAT("invalid JSON: {}", e.what()));
  }
  return parse(j);
}

}  // namespace detail::dump
#endif  // MS_IMPL_BODIES

}  // namespace ms

#if MS_IMPL_BODIES  // compiled once with the kernels: core/linkage.hpp
namespace ms {
MS_IMPL std::unique_ptr<DataDump> DataDump::from_file(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  MS_CHECK(f.good(), IOError, "dump config: cannot read '{}'", file.string());
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return from_json(text);
}

MS_IMPL std::unique_ptr<DataDump> DataDump::from_env() {
  const char* p = std::getenv("MS_DUMP_CONFIG");
  if (!p || !*p) return nullptr;
  return from_file(p);
}

MS_IMPL void DataDump::set_iteration(std::int64_t it) {
  std::lock_guard lk(mu_);
  iteration_ = it;
}

MS_IMPL void DataDump::next_iteration() {
  std::lock_guard lk(mu_);
  ++iteration_;
}

MS_IMPL std::int64_t DataDump::iteration() const {
  std::lock_guard lk(mu_);
  return iteration_;
}

MS_IMPL std::filesystem::path DataDump::iteration_dir(int graph_dir) const {
  std::lock_guard lk(mu_);
  return dir_for(graph_dir, iteration_);
}

MS_IMPL std::optional<OverflowRecord> DataDump::first_overflow() const {
  std::lock_guard lk(mu_);
  if (overflows_.empty()) return std::nullopt;
  return overflows_.front();
}

MS_IMPL std::vector<OverflowRecord> DataDump::overflows() const {
  std::lock_guard lk(mu_);
  return overflows_;
}

MS_IMPL std::int64_t DataDump::files_written() const {
  std::lock_guard lk(mu_);
  return files_;
}

MS_IMPL bool DataDump::dump_tensor(std::string_view name, const AnyTensor& t) {
  std::lock_guard lk(mu_);
  if (!cfg_.iteration_selected(iteration_)) return false;
  write_tensor(dir_for(0, iteration_), "Parameter", detail::dump::sanitize(name), 0, 0, now_us(), "output", 0, t);
  return true;
}

MS_IMPL std::uint64_t DataDump::begin(const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
                      const ops::OpCallInfo& info) {
  std::uint64_t prev_token = prev_ ? prev_->begin(op, in, attrs, info) : 0;
  std::lock_guard lk(mu_);
  Frame f;
  f.prev_token = prev_token;
  f.task_id = task_++;
  f.timestamp = now_us();
  f.type = std::string(info.label.empty() ? std::string_view(op.name) : info.label);
  f.name = info.node_name.empty() ? MS_FORMAT("{}_{}", op.name, counters_[op.name]++) : std::string(info.node_name);
  f.graph_dir = info.graph_id < 0 ? 0 : info.graph_id + 1;
  f.stream = info.stream;
  f.selected = cfg_.op_debug_mode == 0 && cfg_.iteration_selected(iteration_) && selected(op, f);
  // Inputs are dumped before the kernel runs (an in-place op changes them).
  if (f.selected && cfg_.input_output != 2) {
    auto dir = dir_for(f.graph_dir, iteration_);
    for (std::size_t i = 0; i < in.size(); ++i) write_io(dir, f, "input", i, in[i]);
  }
  pending_.push_back(std::move(f));
  return pending_.size() - 1;
}

MS_IMPL void DataDump::end(std::uint64_t token, const ops::OpDef& op, std::span<const AnyTensor> in, const ops::Attrs& attrs,
           std::span<const AnyTensor> out, const ops::OpCallInfo& info) {
  std::uint64_t prev_token = 0;
  {
    std::lock_guard lk(mu_);
    Frame f;
    if (token < pending_.size()) {
      f = std::move(pending_[token]);
      pending_.resize(token);
    }
    prev_token = f.prev_token;
    if (f.selected && cfg_.input_output != 1) {
      auto dir = dir_for(f.graph_dir, iteration_);
      for (std::size_t i = 0; i < out.size(); ++i) write_io(dir, f, "output", i, out[i]);
    }
    if (cfg_.op_debug_mode != 0) {
      bool overflow = false;
      for (auto& t : out) overflow = overflow || detail::dump::has_inf_or_nan(t);
      if (overflow) {
        overflows_.push_back(OverflowRecord{f.name, f.type, iteration_, f.task_id});
        if (overflows_.size() == 1) {  // dump the first overflowing op (its inputs as they are now)
          auto dir = dir_for(f.graph_dir, iteration_);
          for (std::size_t i = 0; i < in.size(); ++i) write_io(dir, f, "input", i, in[i]);
          for (std::size_t i = 0; i < out.size(); ++i) write_io(dir, f, "output", i, out[i]);
        }
      }
    }
  }
  if (prev_) prev_->end(prev_token, op, in, attrs, out, info);
}

MS_IMPL std::int64_t DataDump::now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

MS_IMPL bool DataDump::selected(const ops::OpDef& op, const Frame& f) const {
  if (cfg_.dump_mode == 0) return true;
  if (names_.count(f.name) || names_.count(f.type) || names_.count(std::string(op.name))) return true;
  for (auto& r : regexes_)
    if (detail::dump::pattern_search(*r, f.name)) return true;
  return false;
}

MS_IMPL void DataDump::write_io(const std::filesystem::path& dir, const Frame& f, const char* io, std::size_t slot,
                const AnyTensor& t) {
  write_tensor(dir, detail::dump::sanitize(f.type), detail::dump::sanitize(f.name), f.task_id, f.stream,
               f.timestamp, io, slot, t);
}

MS_IMPL void DataDump::write_tensor(const std::filesystem::path& dir, const std::string& type, const std::string& name,
                    std::int64_t task, int stream, std::int64_t ts, const char* io, std::size_t slot,
                    const AnyTensor& dt) {
  if (!dt.defined()) return;
  AnyTensor copied;  // a host copy of a device tensor
  if (!dt.device().is_cpu()) copied = detail::dump::on_host(dt);
  const AnyTensor& t = copied.defined() ? copied : dt;
  std::filesystem::create_directories(dir);
  bool tensor = cfg_.saved_data != DumpConfig::Saved::statistic;
  bool stat = cfg_.saved_data != DumpConfig::Saved::tensor;
  if (tensor && t.dtype() != DType::bf16) {  // NumPy has no bfloat16: statistics only
    save_npy(dir / MS_FORMAT("{}.{}.{}.{}.{}.{}.{}.npy", type, name, task, stream, ts, io, slot), t);
    ++files_;
  }
  if (stat) {
    auto csv = dir / "statistic.csv";
    bool fresh = !std::filesystem::exists(csv);
    std::ofstream f(csv, std::ios::app);
    MS_CHECK(f.good(), IOError, "dump: cannot write '{}'", csv.string());
    if (fresh)
      f << "Op Type,Op Name,Task ID,Stream ID,Timestamp,IO,Slot,Shape,Data Type,Min Value,Max Value,Avg Value,"
           "NaN Count,Inf Count\n";
    auto s = detail::dump::stats(t);
    f << MS_FORMAT("{},{},{},{},{},{},{},\"{}\",{},{},{},{},{},{}\n", type, name, task, stream, ts, io, slot,
                     shape_str(t.shape()), t.dtype(), s.min, s.max, s.mean, s.nan, s.inf);
  }
}
}  // namespace ms
#endif
