#pragma once
// Eager dispatch: run one op now (infer, allocate, kernel), and tell whoever is
// listening: the active graph capture (Tracer), autodiff (grad recorder), the
// profiler and data dump (OpObserver). Each hook costs one predictable branch
// when unused. Must not know about graphs: capture implements Tracer elsewhere.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "registry.hpp"

namespace ms::ops {

/// Receives every op executed eagerly on this thread while installed (graph capture).
class Tracer {
 public:
  virtual ~Tracer() = default;
  virtual void record(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs,
                      std::span<const AnyTensor> out) = 0;
};

/// When an op ran, measured by its executor: device ops are timed with device events
/// (mapped onto the host's steady clock), so their times are the device's, not the launch's.
struct OpTiming {
  std::chrono::steady_clock::time_point start{}, end{};
};

/// Where an observed op call runs.
struct OpCallInfo {
  std::string_view label;      ///< display name: the op name, or "fused[mul+add]" for fused nodes
  std::string_view node_name;  ///< the graph node's unique name in a replay ("mul_3"); empty in eager mode
  int graph_id = -1;           ///< id of the executable replaying it; -1 in eager mode
  int stream = 0;              ///< stream the op is launched on
  std::string_view engine = "cpu";
  /// Set in end() when the executor timed the op itself (device events); else null and an
  /// observer times the call with its own clock between begin() and end().
  const OpTiming* timing = nullptr;
};

/// Observes op execution (profiler, data dump), eager and in graph replays. begin() returns
/// a token passed to end(). Observers chain: install with ObserverScope, which forwards
/// to the observer that was active before.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual std::uint64_t begin(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs,
                              const OpCallInfo& info) = 0;
  virtual void end(std::uint64_t token, const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs,
                   std::span<const AnyTensor> out, const OpCallInfo& info) = 0;
  /// True when the observer reads tensor values (a dump): a device executor then runs op by
  /// op, waiting for each, so that begin() sees the inputs and end() the outputs. False (a
  /// profiler alone): ops are launched as usual and reported, with their device timing,
  /// once the iteration has run.
  virtual bool needs_values() const { return true; }
  /// Whether this observer is installed (between install() and uninstall()).
  bool running() const { return running_; }

 protected:
  /// Installs this observer for the ops this thread runs, in front of the one installed
  /// before (prev_, to which begin() and end() forward); false when it was installed already.
  bool install();
  /// Uninstalls it; the observer it replaced comes back if this one is still in front.
  void uninstall();

  OpObserver* prev_ = nullptr;
  bool running_ = false;
};

/// How an eager op on a device ran, filled in by the device runner when run_op asks for it
/// (while an observer is installed) and passed to the observer's end().
struct DeviceCall {
  bool timed = false;
  OpTiming timing;
  std::string_view engine = "cpu";
  int stream = 0;
};

namespace detail {
/// A fresh id for an executable (OpCallInfo::graph_id), unique across backends.
inline int next_graph_id() {
  static std::atomic<int> n{0};
  return n++;
}
inline thread_local Tracer* tracer = nullptr;
inline thread_local OpObserver* observer = nullptr;

/// The functions whose lines end the profiler's summary (ms::Profiler::table()): a backend
/// adds one for what no single op shows, e.g. its device memory pool's reuse statistics.
inline std::mutex summary_lines_mu;
inline std::vector<std::string (*)()>& summary_line_fns() {
  static std::vector<std::string (*)()> v;
  return v;
}
inline thread_local bool grad_mode = true;
/// Called by the executing thread between two ops of a backward pass and between two steps
/// of a graph replay while non-null: lets work started earlier and left running (a
/// non-blocking collective, dist/ops.hpp) progress during computation. Installed by whoever
/// started such work, on its thread, and removed once it is done.
using ProgressFn = void (*)();
inline thread_local ProgressFn progress = nullptr;
inline void make_progress() {
  if (progress) [[unlikely]] progress();
}
/// Installed once by autograd/ when included: records the backward edge of an op call.
using GradRecorder = void (*)(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs,
                              std::span<const AnyTensor> out);
inline GradRecorder grad_recorder = nullptr;
/// Installed by a backend for its device type: runs an op whose inputs live on that device.
/// `call` is non-null while an observer is installed: the runner then times the kernel
/// (device events) and fills it in.
using DeviceRunner = void (*)(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs,
                              std::span<AnyTensor> out, const MetaList& metas, DeviceCall* call);
inline std::array<DeviceRunner, 4> device_runners{};

/// True when some input takes part in autodiff (a leaf requiring grad or a result of one).
inline bool any_requires_grad(std::span<const AnyTensor> in) {
  for (auto& t : in) {
    auto& m = t.impl()->autograd;
    if (m && (m->requires_grad || m->grad_fn)) return true;
  }
  return false;
}
}  // namespace detail

inline bool OpObserver::install() {
  if (running_) return false;
  prev_ = detail::observer;
  detail::observer = this;
  running_ = true;
  return true;
}
inline void OpObserver::uninstall() {
  if (!running_) return;
  if (detail::observer == this) detail::observer = prev_;
  running_ = false;
}

/// Metas of the inputs of a call.
inline SmallVec<TensorMeta, 4> input_metas(std::span<const AnyTensor> in) {
  SmallVec<TensorMeta, 4> m;
  for (auto& t : in) m.push_back(TensorMeta{t.dtype(), t.shape()});
  return m;
}

namespace detail {
/// The bound of OutputElementLimit on this thread (0: none), and who set it.
inline thread_local std::int64_t output_element_limit = 0;
inline thread_local const char* output_element_limit_owner = "";
}  // namespace detail

/// While it lives, an op on this thread whose inferred output would have more than `n`
/// elements fails with a ShapeError before anything is allocated: for code that runs ops on
/// shapes it did not choose (the ONNX importer runs a model once on zeros, and a corrupted or
/// hostile file can ask a Conv for pads of millions). `owner` names the setting in the message.
class OutputElementLimit {
 public:
  OutputElementLimit(std::int64_t n, const char* owner)
      : saved_(detail::output_element_limit), saved_owner_(detail::output_element_limit_owner) {
    detail::output_element_limit = n;
    detail::output_element_limit_owner = owner;
  }
  ~OutputElementLimit() {
    detail::output_element_limit = saved_;
    detail::output_element_limit_owner = saved_owner_;
  }
  OutputElementLimit(const OutputElementLimit&) = delete;
  OutputElementLimit& operator=(const OutputElementLimit&) = delete;

 private:
  std::int64_t saved_;
  const char* saved_owner_;
};

/// Checks inputs (defined, one device, supported dtype) and infers the outputs' metas.
MS_IMPL MetaList infer_outputs(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs);
/// Runs `op` on already-inferred outputs: allocation, kernel and hooks. `out` has metas.size() slots.
/// On the CPU, a slot that already holds a tensor receives that output in place of a new
/// allocation (an `out=` argument): it must be a contiguous CPU tensor of the output's shape
/// and dtype, and it may share storage with an input only where the op allows that (an
/// index-aligned op such as adam_update, whose kernel reads each element before writing it).
MS_IMPL void run_op(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs, const MetaList& metas,
                    std::span<AnyTensor> out);
/// Runs an op with any number of outputs.
MS_IMPL std::vector<AnyTensor> call(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs = {});
/// Runs a single-output op (the common, allocation-light path).
MS_IMPL AnyTensor call1(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs = {});

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
MS_IMPL MetaList infer_outputs(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs) {
  MS_CHECK(op.num_inputs < 0 || static_cast<int>(in.size()) == op.num_inputs, ValueError,
           "{}: expected {} inputs, got {}", op.name, op.num_inputs, in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    MS_CHECK(in[i].defined(), ValueError, "{}: input {} is an undefined tensor", op.name, i);
    MS_CHECK(in[i].device() == in[0].device(), DeviceError, "{}: input 0 is on {} but input {} is on {}", op.name,
             in[0].device(), i, in[i].device());
  }
  if (!in.empty()) {
    int k = std::min<int>(op.elementwise.dispatch_input, static_cast<int>(in.size()) - 1);
    DType d = in[k].dtype();
    if (!op.cpu_dtypes.contains(d)) [[unlikely]] {
      std::string ok;
      for (int i = 0; i < kNumDTypes; ++i)
        if (op.cpu_dtypes.contains(static_cast<DType>(i)))
          ok += (ok.empty() ? "" : ", ") + std::string(dtype_name(static_cast<DType>(i)));
      if (k < static_cast<int>(op.input_names.size()))
        MS_THROW(DTypeError, "{}: unsupported dtype {} for '{}' (input {}; supported: {})", op.name, d,
                 op.input_names[k], k, ok);
      MS_THROW(DTypeError, "{}: unsupported dtype {} (supported: {})", op.name, d, ok);
    }
  }
  auto metas = input_metas(in);
  MetaList out;
  op.infer(op, std::span<const TensorMeta>(metas.data(), metas.size()), attrs, out);
  if (const std::int64_t limit = detail::output_element_limit; limit > 0) [[unlikely]] {
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int64_t count = 1;  // the product, saturated at limit + 1 (no overflow)
      for (std::int64_t d : out[i].shape) count = d > 0 && count > limit / d ? limit + 1 : count * d;
      MS_CHECK(count <= limit, ShapeError, "{}: output {} of shape {} ({}) has more than {} elements ({})", op.name, i,
               out[i].shape, out[i].dtype, limit, detail::output_element_limit_owner);
    }
  }
  return out;
}

MS_IMPL void run_op(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs, const MetaList& metas,
                    std::span<AnyTensor> out) {
  OpObserver* obs = detail::observer;
  std::uint64_t token = 0;
  if (obs) [[unlikely]] token = obs->begin(op, in, attrs, OpCallInfo{op.name});
  DeviceCall call;
  Device dev = in.empty() ? Device::cpu() : in[0].device();
  // A view op that writes into its input (copy_): on a device, its backend does that.
  if (op.view && (dev.is_cpu() || !op.writes_input(attrs, in.size(), 0))) {
    MS_CHECK(!out[0].defined(), ValueError, "{}: returns a view of its input and takes no preset output", op.name);
    out[0] = op.view(in[0], attrs);
  } else if (dev.is_cpu()) [[likely]] {
    for (std::size_t i = 0; i < metas.size(); ++i) {
      if (!out[i].defined()) {
        out[i] = AnyTensor::empty(metas[i].shape, metas[i].dtype);
        continue;
      }
      MS_CHECK(out[i].device().is_cpu() && out[i].is_contiguous() && out[i].shape() == metas[i].shape &&
                   out[i].dtype() == metas[i].dtype,
               ShapeError, "{}: output {} must be a contiguous CPU tensor {} {}, got {} {} on {}{}", op.name, i,
               metas[i].dtype, shape_str(metas[i].shape), out[i].dtype(), shape_str(out[i].shape()), out[i].device(),
               out[i].is_contiguous() ? "" : " (not contiguous)");
    }
    op.kernel(KernelArgs{op, in, out, attrs});
  } else {
    for (std::size_t i = 0; i < out.size(); ++i)
      MS_CHECK(!out[i].defined(), DeviceError, "{}: preset outputs are for CPU kernels; output {} is preset on {}",
               op.name, i, dev);
    auto runner = detail::device_runners[static_cast<int>(dev.type)];
    MS_CHECK(runner != nullptr, DeviceError, "{}: no backend is loaded for device {}", op.name, dev);
    runner(op, in, attrs, out, metas, obs ? &call : nullptr);
  }
  std::span<const AnyTensor> cout(out.data(), out.size());
  if (obs) [[unlikely]] {
    OpCallInfo info{op.name};
    if (call.timed) {  // a device runner timed the kernel
      info.timing = &call.timing;
      info.engine = call.engine;
      info.stream = call.stream;
    }
    obs->end(token, op, in, attrs, cout, info);
  }
  if (detail::tracer) [[unlikely]] detail::tracer->record(op, in, attrs, cout);
  if (detail::grad_recorder && detail::grad_mode && op.grad && detail::any_requires_grad(in)) [[unlikely]]
    detail::grad_recorder(op, in, attrs, cout);
}

MS_IMPL std::vector<AnyTensor> call(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs) {
  MetaList metas = infer_outputs(op, in, attrs);
  std::vector<AnyTensor> out(metas.size());
  run_op(op, in, attrs, metas, out);
  return out;
}

MS_IMPL AnyTensor call1(const OpDef& op, std::span<const AnyTensor> in, const Attrs& attrs) {
  MetaList metas = infer_outputs(op, in, attrs);
  MS_CHECK(metas.size() == 1, ValueError, "{}: expected one output, inference gave {}", op.name, metas.size());
  AnyTensor out;
  run_op(op, in, attrs, metas, std::span<AnyTensor>(&out, 1));
  return out;
}
#endif  // MS_IMPL_BODIES

inline AnyTensor call1(const OpDef& op, std::initializer_list<AnyTensor> in, const Attrs& attrs = {}) {
  return call1(op, std::span<const AnyTensor>(in.begin(), in.size()), attrs);
}

/// Installs an observer on this thread for its lifetime; the previous one (if any) is
/// returned by previous() so an observer can forward to it.
class ObserverScope {
 public:
  explicit ObserverScope(OpObserver* o) : prev_(detail::observer) { detail::observer = o; }
  ~ObserverScope() { detail::observer = prev_; }
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;
  OpObserver* previous() const { return prev_; }

 private:
  OpObserver* prev_;
};

/// Adds `fn` (once) to the lines that end the profiler's summary; see detail::summary_line_fns.
inline void add_summary_line(std::string (*fn)()) {
  std::lock_guard lk(detail::summary_lines_mu);
  auto& v = detail::summary_line_fns();
  if (std::find(v.begin(), v.end(), fn) == v.end()) v.push_back(fn);
}
/// The current lines of every function added with add_summary_line, in the order added.
inline std::vector<std::string> summary_lines() {
  std::vector<std::string (*)()> fns;
  {
    std::lock_guard lk(detail::summary_lines_mu);
    fns = detail::summary_line_fns();
  }
  std::vector<std::string> out;
  for (auto fn : fns) out.push_back(fn());
  return out;
}

/// Disables gradient recording on this thread for its lifetime (like torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(detail::grad_mode) { detail::grad_mode = false; }
  ~NoGradGuard() { detail::grad_mode = prev_; }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace ms::ops

namespace ms {
using NoGradGuard = ops::NoGradGuard;
}
