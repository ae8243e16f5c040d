#pragma once
// GraphEngine-style compilation of a captured graph for a device backend:
// engine assignment by cost among the backend's engines and the host CPU
// (counting the copies a placement implies), stream
// assignment (independent branches on separate streams joined by events), and
// loop sinking (run_sunk: N steps per host round trip, inputs staged on the
// device, results returned once per sink). The IR dump shows every decision.
// Must not know about a particular device API: it talks to backend::Backend.
//
// Memory: every value gets its device (or host) memory at compile time, so each
// node's operands are fixed and iterations can be launched back to back (or captured
// once and replayed). On one stream the intermediates of device nodes share one device
// arena placed by plan_values (backend/memory_plan.hpp), as the CPU executable's do;
// graph outputs, host-side values and graphs on several streams get buffers of their own.
// Graph inputs are device slots refilled from a staging slab per step; params and
// constants are uploaded once and params are written back on sync_params_to_host().

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>

#include "../graph/capture.hpp"
#include "../graph/passes.hpp"
#include "../ops/inplace.hpp"
#include "backend.hpp"
#include "compiled_graph.hpp"
#include "device_placement.hpp"

namespace ms::backend {

/// Options of run_sunk.
struct SinkOptions {
  std::int64_t sink_size = 0;   ///< steps per host round trip; 0: all of them (one epoch)
  /// Called once per sink with that sink's results (host tensors, one row per step).
  std::function<void(std::int64_t first_step, std::int64_t steps, const std::vector<AnyTensor>& outputs)> on_sink;
};

struct SunkResult {
  std::vector<AnyTensor> outputs;  ///< per graph output: (steps, ...) on the host
  std::int64_t steps = 0;
  std::int64_t sinks = 0;
  std::uint64_t interactions = 0;  ///< host<->device synchronizations performed
};

namespace detail {
struct DeviceStepBuilder;
}  // namespace detail

/// A graph compiled for a device backend (see the top of this file).
class DeviceExecutable final : public CompiledGraph {
 public:
  DeviceExecutable(DeviceExecutable&&) = default;
  DeviceExecutable& operator=(DeviceExecutable&&) = default;

  /// One step: host inputs in, host outputs out.
  MS_IMPL std::vector<AnyTensor> run(std::span<const AnyTensor> inputs) override;
  using CompiledGraph::run;  // run({x, y})

  /// Runs as many steps as `data` holds: data[i] stacks the steps' values of graph input i
  /// along axis 0 (shape (steps * b, ...) for an input of shape (b, ...)). Each sink stages
  /// its inputs on the device (one copy per input), launches its steps without waiting,
  /// and synchronizes once to bring back the results.
  MS_IMPL SunkResult run_sunk(std::span<const AnyTensor> data, const SinkOptions& opt = {});

  /// Copies the device values of the params (weights, optimizer state) into their host tensors.
  MS_IMPL void sync_params_to_host();

  Device device() const override { return be_->device(); }
  const graph::Graph& graph() const override { return graph_; }
  const std::vector<Placement>& placements() const { return place_; }
  /// The plan of the device arena that holds the intermediates of device nodes: planned
  /// peak and lower bound (the largest live set). Null when the graph was not planned
  /// (several streams, or CompileOptions::plan_memory off).
  const MemoryPlan* memory_plan() const { return arena_ ? &value_plan_.memory : nullptr; }
  const MemoryPlan* planned_memory() const override { return memory_plan(); }
  /// The IR dump with each node's engine, stream, waits and copies.
  MS_IMPL std::string dump() const override;
  int num_streams() const { return static_cast<int>(streams_.size()); }
  std::size_t num_host_nodes() const {
    return static_cast<std::size_t>(std::count_if(place_.begin(), place_.end(), [](const Placement& p) {
      return p.engine == Engine::host_cpu;
    }));
  }
  /// Host<->device synchronizations since compile (the extra waits of an observed run not counted).
  std::uint64_t interactions() const { return interactions_; }
  /// Identifies this executable in profiles and dumps (OpCallInfo::graph_id).
  int id() const override { return id_; }
  bool captured() const { return captured_; }

 private:
  friend DeviceExecutable compile_for_device(graph::Graph g, Backend& be, const CompileOptions& opt);
  friend struct detail::DeviceStepBuilder;
  DeviceExecutable() = default;

  enum class StepKind { device, host, to_host, to_device, view };
  struct Step {
    StepKind kind;
    int node = -1;       ///< graph node (device/host/view)
    graph::ValueId value = -1;  ///< transfers
    int stream = 0;
    std::vector<AnyTensor> in, out;
    std::vector<int> wait_events;  ///< indices into events_
    int record_event = -1;
    std::vector<std::shared_ptr<Storage>> scratch;  ///< per-step device scratch, reused every iteration
    std::size_t scratch_next = 0;
  };
  const ops::TensorMeta& out_meta(std::size_t i) const { return graph_.value(graph_.outputs()[i]).meta; }
  MS_IMPL void run_iteration();
  MS_IMPL void run_iteration_observed(ops::OpObserver& obs);
  MS_IMPL void begin_iteration();
  MS_IMPL void end_iteration();
  ops::OpCallInfo call_info(const Step& s, const Placement& p) const {
    const graph::Node& n = graph_.nodes()[static_cast<std::size_t>(s.node)];
    return ops::OpCallInfo{labels_[static_cast<std::size_t>(s.node)], n.name, id_, p.engine == Engine::host_cpu ? 0 : s.stream,
                           engine_name(p.engine)};
  }
  MS_IMPL void run_sinks(SunkResult& r, const std::vector<AnyTensor>& host_data,
                 const std::vector<std::shared_ptr<Storage>>& stage_in,
                 const std::vector<std::shared_ptr<Storage>>& stage_out, std::int64_t steps, std::int64_t sink,
                 const SinkOptions& opt);
  void* step_scratch(Step& s, std::size_t n) {
    if (s.scratch_next < s.scratch.size() && s.scratch[s.scratch_next]->nbytes >= n)
      return s.scratch[s.scratch_next++]->data;
    auto st = be_->allocate(n);
    if (s.scratch_next < s.scratch.size()) s.scratch[s.scratch_next] = st;
    else s.scratch.push_back(st);
    ++s.scratch_next;
    return st->data;
  }
  MS_IMPL void launch_device(Step& s, const std::pair<Event, Event>* timing = nullptr);
  /// A synchronous host<->device copy (the device has been waited for).
  void run_copy(Step& s) {
    if (s.kind == StepKind::to_host) be_->copy_to_host(s.out[0].raw_data(), s.in[0].raw_data(), s.in[0].nbytes());
    else be_->copy_to_device(s.out[0].raw_data(), s.in[0].raw_data(), s.in[0].nbytes());
  }
  /// A node on the host CPU: its kernel, or copy_ (a writing view) into a host value.
  void run_host(Step& s) {
    const graph::Node& n = graph_.nodes()[static_cast<std::size_t>(s.node)];
    if (n.op->is_view()) s.out[0] = n.op->view(s.in[0], n.attrs);
    else n.op->kernel(ops::KernelArgs{*n.op, s.in, s.out, n.attrs});
  }
  void host_sync() {
    for (auto& st : streams_) be_->synchronize(st);
    ++interactions_;
  }

  graph::Graph graph_;
  Backend* be_ = nullptr;
  std::vector<Placement> place_;
  std::vector<Step> steps_;
  std::vector<Stream> streams_;
  std::vector<Event> events_;
  std::vector<Event> fence_;          ///< per stream: its end of the iteration
  Event start_;                       ///< recorded on stream 0 at the start of an iteration
  std::vector<AnyTensor> dev_, host_; ///< per value
  std::vector<bool> dev_home_;        ///< per value: the device copy is the one graph outputs read
  std::uint64_t interactions_ = 0;
  bool captured_ = false, want_capture_ = false;
  std::shared_ptr<void> model_;       ///< the captured iteration (aclmdlRI) when captured_
  int id_ = ops::detail::next_graph_id();
  std::vector<std::string> labels_;   ///< per node: op name or fused[...] label
  // Observed runs: a reference event and a start/end pair per step (created on first use).
  Event ref_event_;
  std::vector<std::pair<Event, Event>> step_events_;
  ValuePlan value_plan_;              ///< where device intermediates live in arena_ (planned graphs)
  std::shared_ptr<Storage> arena_;    ///< the device arena (null: not planned)
};

/// Places `g` on backend `be` (engines and streams) and allocates its buffers.
MS_IMPL DeviceExecutable compile_for_device(graph::Graph g, Backend& be, const CompileOptions& opt = {});

/// graph::trace (graph/capture.hpp), by the name the device path has always used.
using graph::trace;

// ====================================================================== implementation

#if MS_IMPL_BODIES  // compiled once: core/linkage.hpp
MS_IMPL std::vector<AnyTensor> DeviceExecutable::run(std::span<const AnyTensor> inputs) {
  check_inputs(graph_, inputs);  // exactly one step (run_sunk takes stacked steps)
  SunkResult r = run_sunk(inputs, SinkOptions{1, {}});
  std::vector<AnyTensor> outs;
  for (std::size_t i = 0; i < r.outputs.size(); ++i) {
    AnyTensor o = r.outputs[i];
    outs.push_back(AnyTensor::view_of(o.storage(), out_meta(i).shape, contiguous_strides(out_meta(i).shape), 0,
                                      o.dtype()));
  }
  return outs;
}

namespace detail {

inline AnyTensor device_tensor(Backend& be, const ops::TensorMeta& m) {
  auto st = be.allocate(std::max<std::size_t>(m.nbytes(), 1));
  return AnyTensor::view_of(std::move(st), m.shape, contiguous_strides(m.shape), 0, m.dtype);
}

}  // namespace detail

namespace detail {
/// Builds the steps of a DeviceExecutable node by node, with the transfers each placement
/// implies, tracking which copy of each value (host, device) is valid within an iteration:
/// inputs and parameters live on the device, constants on both sides.
struct DeviceStepBuilder {
  using SK = DeviceExecutable::StepKind;
  DeviceExecutable& ex;
  Backend& be;
  const graph::Graph& G;
  const std::vector<graph::ValueId>& root;
  std::vector<bool> dev_valid, host_valid;
  std::vector<int> event_of;

  DeviceStepBuilder(DeviceExecutable& e, Backend& b, const std::vector<graph::ValueId>& r)
      : ex(e), be(b), G(e.graph_), root(r), event_of(e.graph_.nodes().size(), -1) {
    const std::size_t nv = G.values().size();
    dev_valid.assign(nv, false);
    host_valid.assign(nv, false);
    for (std::size_t v = 0; v < nv; ++v) {
      const auto k = G.values()[v].kind;
      if (k != graph::ValueKind::node) dev_valid[v] = true;
      if (k == graph::ValueKind::constant) host_valid[v] = true;
    }
  }

  /// Device copies of the inputs (slots), parameters and constants, uploaded once.
  void upload_fixed_values() {
    const std::size_t nv = G.values().size();
    ex.dev_.assign(nv, AnyTensor());
    ex.host_.assign(nv, AnyTensor());
    ex.dev_home_.assign(nv, false);
    for (std::size_t v = 0; v < nv; ++v) {
      const graph::Value& val = G.values()[v];
      if (val.kind == graph::ValueKind::node) continue;
      ex.dev_home_[v] = true;
      if (val.kind == graph::ValueKind::input) {
        ex.dev_[v] = device_tensor(be, val.meta);
      } else if (val.uses > 0 || val.kind == graph::ValueKind::param) {
        AnyTensor src = val.data.is_contiguous() ? val.data : ops::detail::contiguous_raw(val.data);
        ex.dev_[v] = device_tensor(be, val.meta);
        be.copy_to_device(ex.dev_[v].raw_data(), src.raw_data(), src.nbytes());
        if (val.kind == graph::ValueKind::constant) ex.host_[v] = src;
      }
    }
  }

  AnyTensor& host_buf(graph::ValueId v) {
    auto& h = ex.host_[static_cast<std::size_t>(v)];
    if (!h.defined()) h = AnyTensor::empty(G.value(v).meta.shape, G.value(v).meta.dtype);
    return h;
  }
  /// A value's device memory: its slot in the planned arena, or a buffer of its own.
  AnyTensor& dev_buf(graph::ValueId v) {
    const auto vi = static_cast<std::size_t>(v);
    auto& d = ex.dev_[vi];
    if (d.defined()) return d;
    const auto& meta = G.value(v).meta;
    const ValuePlan& vp = ex.value_plan_;
    d = ex.arena_ && vp.home[vi] == ValueHome::arena && vp.buffer[vi] >= 0 ? arena_view(ex.arena_, vp, v, meta)
                                                                           : device_tensor(be, meta);
    return d;
  }
  int event_for(int node) {
    auto& e = event_of[static_cast<std::size_t>(node)];
    if (e < 0) {
      e = static_cast<int>(ex.events_.size());
      ex.events_.push_back(be.create_event());
    }
    return e;
  }

  /// The step of node i, after the copies its operands need.
  void add_node(std::size_t i) {
    const graph::Node& n = G.nodes()[i];
    const Placement& p = ex.place_[i];
    const bool host = p.engine == Engine::host_cpu;
    DeviceExecutable::Step s{host ? SK::host : (n.op->is_pure_view() ? SK::view : SK::device), static_cast<int>(i), -1,
                             std::max(p.stream, 0), {}, {}, {}, -1, {}, 0};
    for (auto v : n.inputs) {
      const auto vi = static_cast<std::size_t>(v);
      if (host && !host_valid[vi]) {
        ex.steps_.push_back({SK::to_host, -1, v, 0, {dev_buf(v)}, {host_buf(v)}, {}, -1, {}, 0});
        host_valid[vi] = true;
      } else if (!host && !dev_valid[vi]) {
        ex.steps_.push_back({SK::to_device, -1, v, 0, {host_buf(v)}, {dev_buf(v)}, {}, -1, {}, 0});
        dev_valid[vi] = true;
      }
      s.in.push_back(host ? host_buf(v) : dev_buf(v));
    }
    for (int w : p.waits) s.wait_events.push_back(event_of[static_cast<std::size_t>(w)]);
    s.record_event = event_of[i];
    if (n.op->is_pure_view()) {  // layout only: no data is touched, nothing to do at run time
      AnyTensor o = n.op->view(s.in[0], n.attrs);
      const auto out = static_cast<std::size_t>(n.outputs[0]);
      (host ? ex.host_[out] : ex.dev_[out]) = o;
      (host ? host_valid[out] : dev_valid[out]) = true;
      return;
    }
    for (std::size_t k = 0; k < n.outputs.size(); ++k) {
      const auto v = n.outputs[k];
      const auto vi = static_cast<std::size_t>(v);
      if (n.op->is_writing_view()) (host ? ex.host_[vi] : ex.dev_[vi]) = s.in[0];  // input 0, written in place
      s.out.push_back(host ? host_buf(v) : dev_buf(v));
      host_valid[vi] = host;
      dev_valid[vi] = !host;
    }
    ex.steps_.push_back(std::move(s));
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      if (n.op->writes_input(n.attrs, n.inputs.size(), k)) wrote(n, k, host);
  }

  /// Node n wrote into its input k: the other side's copy of that memory is stale; a host
  /// write into device-resident state (a parameter, batch_norm's running statistics) goes
  /// back up at once.
  void wrote(const graph::Node& n, std::size_t k, bool host) {
    const graph::ValueId in = n.inputs[k];
    const graph::ValueId r = root[static_cast<std::size_t>(in)];
    const bool state = G.value(r).kind != graph::ValueKind::node;
    if (host && state) ex.steps_.push_back({SK::to_device, -1, in, 0, {host_buf(in)}, {dev_buf(in)}, {}, -1, {}, 0});
    const graph::ValueId self = n.op->is_writing_view() ? n.outputs[0] : -1;
    for (std::size_t v = 0; v < root.size(); ++v)
      if (root[v] == r && static_cast<graph::ValueId>(v) != self) {
        if (host) dev_valid[v] = state;
        else host_valid[v] = false;
      }
  }
};
}  // namespace detail

MS_IMPL DeviceExecutable compile_for_device(graph::Graph g, Backend& be, const CompileOptions& opt) {
  MS_CHECK(!be.device().is_cpu(), DeviceError, "compile_for_device: {} is the host; use backend::compile", be.device());
  DeviceExecutable ex;
  ex.be_ = &be;
  // Ops the device runs on no engine but that are built from other ops (adam_update) run
  // as those ops, on the device, rather than on the host.
  graph::expand_nodes(g, [&](const graph::Node& n) {
    if (opt.pin_ops.count(n.op->name) || opt.pin_nodes.count(n.name)) return false;
    SmallVec<ops::TensorMeta, 8> in;
    for (auto v : n.inputs) in.push_back(g.value(v).meta);
    const std::span<const ops::TensorMeta> ins(in.data(), in.size());
    for (Engine e : be.engines())
      if (be.supports(e, *n.op, ins, n.attrs)) return false;
    return true;
  });
  if (opt.optimize) {
    graph::PassOptions passes = opt.passes;
    passes.fuse = false;  // fused programs are a host kernel: keep the ops the device maps
    graph::optimize(g, passes);
  }
  g.compact();
  graph::verify(g);
  ex.graph_ = std::move(g);
  const graph::Graph& G = ex.graph_;
  const auto& nodes = G.nodes();
  const std::size_t nv = G.values().size();
  ex.place_ = assign_engines(G, be, opt);
  const NodeDeps nd = node_dependencies(G);
  const int num_streams = assign_streams(G, nd, opt.max_streams, ex.place_);
  for (int s = 0; s < num_streams; ++s) {
    ex.streams_.push_back(be.create_stream());
    ex.fence_.push_back(be.create_event());
  }
  ex.start_ = be.create_event();

  detail::DeviceStepBuilder sb(ex, be, nd.root);
  sb.upload_fixed_values();
  // ---- memory: device intermediates in one arena (one stream: the schedule is the order
  // in which they run, so the CPU's planner applies as it is). No in-place reuse: a device
  // kernel may not read and write one buffer.
  if (opt.plan_memory && num_streams == 1) {
    ValuePlanOptions popt;
    popt.inplace = false;
    popt.exclude.assign(nv, true);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (ex.place_[i].engine != Engine::host_cpu)
        for (auto v : nodes[i].outputs) popt.exclude[static_cast<std::size_t>(v)] = false;
    ex.value_plan_ = plan_values(G, popt);
    ex.arena_ = be.allocate(std::max<std::size_t>(ex.value_plan_.memory.peak, 1));
  }
  for (std::size_t i = 0; i < nodes.size(); ++i)
    for (int w : ex.place_[i].waits) sb.event_for(w);
  for (std::size_t i = 0; i < nodes.size(); ++i) sb.add_node(i);
  // Graph outputs are read from the device unless a host node produced them last.
  for (auto v : G.outputs()) {
    const auto vi = static_cast<std::size_t>(v);
    ex.dev_home_[vi] = sb.dev_valid[vi];
    if (!sb.dev_valid[vi]) sb.host_buf(v);
    MS_CHECK(!sb.dev_valid[vi] || ex.dev_[vi].is_contiguous(), DeviceError,
             "compile_for_device: graph output %{} is a non-contiguous view on the device", v);
  }
  ex.want_capture_ = opt.capture && ex.streams_.size() == 1 && ex.num_host_nodes() == 0;
  for (const auto& n : nodes) ex.labels_.push_back(graph::node_label(n));
  return ex;
}

MS_IMPL void DeviceExecutable::launch_device(Step& s, const std::pair<Event, Event>* timing) {
  const graph::Node& n = graph_.nodes()[static_cast<std::size_t>(s.node)];
  const Stream& st = streams_[static_cast<std::size_t>(s.stream)];
  for (int e : s.wait_events) be_->wait(st, events_[static_cast<std::size_t>(e)]);
  if (timing) be_->record(timing->first, st);  // after the waits: when the kernel can start
  s.scratch_next = 0;
  Backend::ScratchFn scratch = [this, &s](std::size_t bytes) { return step_scratch(s, bytes); };
  be_->launch(place_[static_cast<std::size_t>(s.node)].engine, *n.op, s.in, s.out, n.attrs, st, scratch);
  if (timing) be_->record(timing->second, st);
  if (s.record_event >= 0) be_->record(events_[static_cast<std::size_t>(s.record_event)], st);
}

MS_IMPL void DeviceExecutable::begin_iteration() {
  // Side streams start after stream 0 reaches this iteration (so they never overwrite what
  // the previous iteration still reads); stream 0 ends after every side stream.
  if (streams_.size() > 1) {
    be_->record(start_, streams_[0]);
    for (std::size_t k = 1; k < streams_.size(); ++k) be_->wait(streams_[k], start_);
  }
}

MS_IMPL void DeviceExecutable::end_iteration() {
  if (streams_.size() > 1) {
    for (std::size_t k = 1; k < streams_.size(); ++k) {
      be_->record(fence_[k], streams_[k]);
      be_->wait(streams_[0], fence_[k]);
    }
  }
}

MS_IMPL void DeviceExecutable::run_iteration() {
  if (ops::OpObserver* obs = ops::detail::observer) [[unlikely]] {
    run_iteration_observed(*obs);
    return;
  }
  begin_iteration();
  if (captured_) {
    be_->replay(model_.get(), streams_[0]);  // the kernels captured in run_sunk
  } else {
    // Host work waits for the device once per stretch of host steps: synchronous copies are
    // not ordered after queued kernels, which may still read the buffers they overwrite.
    bool synced = false;
    for (Step& s : steps_) {
      if (s.kind != StepKind::device && s.kind != StepKind::view && !synced) {
        host_sync();
        synced = true;
      }
      switch (s.kind) {
        case StepKind::view: break;
        case StepKind::device:
          launch_device(s);
          synced = false;
          break;
        case StepKind::to_host:
        case StepKind::to_device: run_copy(s); break;
        case StepKind::host: run_host(s); break;
      }
    }
  }
  end_iteration();
}

// An iteration under a profiler or dump (ops::detail::observer). Every kernel is bracketed
// by two device events. For a profiler alone the kernels are launched as usual (streams
// still overlap) and reported once the iteration has run, each with its device start and
// end; for an observer that reads values (a dump) each kernel is waited for, so begin()
// sees its inputs before it runs and end() its outputs after. Device times are mapped onto
// the host clock through a reference event recorded on drained streams. The captured
// replay is bypassed: its kernels cannot be timed one by one.
MS_IMPL void DeviceExecutable::run_iteration_observed(ops::OpObserver& obs) {
  const bool values = obs.needs_values();
  if (!ref_event_) ref_event_ = be_->create_event();
  if (step_events_.size() != steps_.size()) step_events_.resize(steps_.size());
  for (auto& st : streams_) be_->synchronize(st);
  const auto host0 = std::chrono::steady_clock::now();
  be_->record(ref_event_, streams_[0]);
  begin_iteration();
  auto drain = [&] {
    for (auto& st : streams_) be_->synchronize(st);
  };
  auto device_timing = [&](const std::pair<Event, Event>& ev) {
    using D = std::chrono::steady_clock::duration;
    const auto at = [&](const Event& e) {
      return host0 + std::chrono::duration_cast<D>(std::chrono::duration<double, std::milli>(be_->elapsed_ms(ref_event_, e)));
    };
    return ops::OpTiming{at(ev.first), at(ev.second)};
  };
  std::vector<std::size_t> deferred;  // device steps reported after the iteration (profiler only)
  bool synced = true;
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    if (s.kind != StepKind::device && s.kind != StepKind::view && !synced) {
      drain();
      synced = true;
    }
    switch (s.kind) {
      case StepKind::view: break;
      case StepKind::device: {
        auto& ev = step_events_[i];
        if (!ev.first) ev = {be_->create_event(), be_->create_event()};
        if (!values) {
          launch_device(s, &ev);
          deferred.push_back(i);
          synced = false;
          break;
        }
        const graph::Node& n = graph_.nodes()[static_cast<std::size_t>(s.node)];
        ops::OpCallInfo info = call_info(s, place_[static_cast<std::size_t>(s.node)]);
        drain();  // its inputs, from any stream, are final
        const std::uint64_t token = obs.begin(*n.op, s.in, n.attrs, info);
        launch_device(s, &ev);
        be_->synchronize(streams_[static_cast<std::size_t>(s.stream)]);
        const ops::OpTiming t = device_timing(ev);
        info.timing = &t;
        obs.end(token, *n.op, s.in, n.attrs, s.out, info);
        synced = true;
        break;
      }
      case StepKind::to_host:
      case StepKind::to_device: run_copy(s); break;
      case StepKind::host: {
        const graph::Node& n = graph_.nodes()[static_cast<std::size_t>(s.node)];
        const ops::OpCallInfo info = call_info(s, place_[static_cast<std::size_t>(s.node)]);
        const std::uint64_t token = obs.begin(*n.op, s.in, n.attrs, info);
        run_host(s);
        obs.end(token, *n.op, s.in, n.attrs, s.out, info);
        break;
      }
    }
  }
  end_iteration();
  if (!deferred.empty()) {
    drain();
    for (std::size_t i : deferred) {
      Step& s = steps_[i];
      const graph::Node& n = graph_.nodes()[static_cast<std::size_t>(s.node)];
      ops::OpCallInfo info = call_info(s, place_[static_cast<std::size_t>(s.node)]);
      const ops::OpTiming t = device_timing(step_events_[i]);
      const std::uint64_t token = obs.begin(*n.op, s.in, n.attrs, info);
      info.timing = &t;
      obs.end(token, *n.op, s.in, n.attrs, s.out, info);
    }
  }
}

MS_IMPL SunkResult DeviceExecutable::run_sunk(std::span<const AnyTensor> data, const SinkOptions& opt) {
  const auto& gin = graph_.inputs();
  MS_CHECK(data.size() == gin.size(), ValueError, "run_sunk: the graph takes {} inputs, got {}", gin.size(), data.size());
  std::int64_t steps = -1;
  std::vector<AnyTensor> host_data;
  for (std::size_t i = 0; i < gin.size(); ++i) {
    const auto& m = graph_.value(gin[i]).meta;
    const AnyTensor& d = data[i];
    MS_CHECK(d.defined() && d.device().is_cpu(), DeviceError, "run_sunk: input {} must be a host tensor", i);
    MS_CHECK(d.dtype() == m.dtype, DTypeError, "run_sunk: input {} must be {}, got {}", i, m.dtype, d.dtype());
    const std::int64_t b = m.shape.rank() == 0 ? 1 : m.shape[0];
    const std::int64_t per = numel(m.shape);
    MS_CHECK(per > 0 && d.numel() % per == 0 && (m.shape.rank() == 0 || d.dim() == m.shape.rank() || d.numel() == per),
             ShapeError, "run_sunk: input {} {} does not stack steps of {}", i, shape_str(d.shape()), shape_str(m.shape));
    const std::int64_t k = d.numel() / per;
    (void)b;
    MS_CHECK(steps < 0 || k == steps, ShapeError, "run_sunk: input {} holds {} steps, input 0 holds {}", i, k, steps);
    steps = k;
    host_data.push_back(d.is_contiguous() ? d : ops::detail::contiguous_raw(d));
  }
  if (gin.empty()) steps = 1;
  const std::int64_t sink = opt.sink_size > 0 ? std::min(opt.sink_size, steps) : steps;
  SunkResult r;
  r.steps = steps;
  const std::uint64_t before = interactions_;
  const auto& gout = graph_.outputs();
  for (auto v : gout) {
    Shape s = graph_.value(v).meta.shape;
    std::vector<std::int64_t> dims{steps};
    dims.insert(dims.end(), s.begin(), s.end());
    r.outputs.push_back(AnyTensor::empty(Shape(dims), graph_.value(v).meta.dtype));
  }
  // Device staging for one sink: inputs of `sink` steps, results of `sink` steps.
  std::vector<std::shared_ptr<Storage>> stage_in, stage_out;
  for (auto v : gin) stage_in.push_back(be_->allocate(std::max<std::size_t>(1, graph_.value(v).meta.nbytes() * static_cast<std::size_t>(sink))));
  for (auto v : gout) stage_out.push_back(be_->allocate(std::max<std::size_t>(1, graph_.value(v).meta.nbytes() * static_cast<std::size_t>(sink))));
  const Stream& main = streams_[0];

  if (want_capture_ && !captured_ && be_->can_capture()) {
    // Capture one iteration's kernels on the single stream; each step then replays them.
    be_->capture_begin(main);
    try {
      for (Step& s : steps_)
        if (s.kind == StepKind::device) launch_device(s);
    } catch (...) {
      try {
        be_->destroy_model(be_->capture_end(main));
      } catch (const Error&) {  // the first error is the one to report
      }
      throw;
    }
    Backend* be = be_;
    model_ = std::shared_ptr<void>(be_->capture_end(main), [be](void* m) { be->destroy_model(m); });
    captured_ = true;
  }

  try {
    run_sinks(r, host_data, stage_in, stage_out, steps, sink, opt);
  } catch (...) {
    // Queued work may still use the staging buffers: wait for it (its own error is secondary).
    for (auto& st : streams_) {
      try {
        be_->synchronize(st);
      } catch (const Error&) {
      }
    }
    throw;
  }
  r.interactions = interactions_ - before;
  return r;
}

MS_IMPL void DeviceExecutable::run_sinks(SunkResult& r, const std::vector<AnyTensor>& host_data,
                                        const std::vector<std::shared_ptr<Storage>>& stage_in,
                                        const std::vector<std::shared_ptr<Storage>>& stage_out, std::int64_t steps,
                                        std::int64_t sink, const SinkOptions& opt) {
  const auto& gin = graph_.inputs();
  const auto& gout = graph_.outputs();
  const Stream& main = streams_[0];
  for (std::int64_t first = 0; first < steps; first += sink) {
    const std::int64_t n = std::min(sink, steps - first);
    for (std::size_t i = 0; i < gin.size(); ++i) {
      const std::size_t bytes = graph_.value(gin[i]).meta.nbytes();
      be_->copy_to_device_async(stage_in[i]->data, static_cast<const char*>(host_data[i].raw_data()) + bytes * static_cast<std::size_t>(first),
                                bytes * static_cast<std::size_t>(n), main);
    }
    for (std::int64_t k = 0; k < n; ++k) {
      for (std::size_t i = 0; i < gin.size(); ++i) {
        const std::size_t bytes = graph_.value(gin[i]).meta.nbytes();
        be_->copy_on_device_async(dev_[static_cast<std::size_t>(gin[i])].raw_data(),
                                  static_cast<char*>(stage_in[i]->data) + bytes * static_cast<std::size_t>(k), bytes, main);
      }
      run_iteration();
      for (std::size_t j = 0; j < gout.size(); ++j) {
        const auto v = static_cast<std::size_t>(gout[j]);
        const std::size_t bytes = graph_.value(gout[j]).meta.nbytes();
        char* dst = static_cast<char*>(stage_out[j]->data) + bytes * static_cast<std::size_t>(k);
        if (dev_home_[v]) be_->copy_on_device_async(dst, dev_[v].raw_data(), bytes, main);
        else be_->copy_to_device(dst, host_[v].raw_data(), bytes);  // host-produced: already synchronized
      }
    }
    for (std::size_t j = 0; j < gout.size(); ++j) {
      const std::size_t bytes = graph_.value(gout[j]).meta.nbytes();
      be_->copy_to_host_async(static_cast<char*>(r.outputs[j].raw_data()) + bytes * static_cast<std::size_t>(first),
                              stage_out[j]->data, bytes * static_cast<std::size_t>(n), main);
    }
    be_->synchronize(main);  // the one host<->device meeting of this sink
    ++interactions_;
    ++r.sinks;
    if (opt.on_sink) {
      std::vector<AnyTensor> part;
      for (auto& o : r.outputs) {
        Shape s = o.shape();
        s[0] = n;
        const std::int64_t row = o.numel() / std::max<std::int64_t>(1, o.shape()[0]);
        part.push_back(AnyTensor::view_of(o.storage(), s, contiguous_strides(s), first * row, o.dtype()));
      }
      opt.on_sink(first, n, part);
    }
  }
}

MS_IMPL void DeviceExecutable::sync_params_to_host() {
  for (auto& s : streams_) be_->synchronize(s);
  ++interactions_;
  for (auto v : graph_.params()) {
    const graph::Value& val = graph_.value(v);
    const AnyTensor& d = dev_[static_cast<std::size_t>(v)];
    if (!d.defined()) continue;
    MS_CHECK(val.data.is_contiguous(), DeviceError, "sync_params_to_host: param {} is not contiguous", val.name);
    be_->copy_to_host(val.data.raw_data(), d.raw_data(), d.nbytes());
  }
}

MS_IMPL std::string DeviceExecutable::dump() const {
  const graph::Graph& G = graph_;
  std::size_t dev = 0, aicpu = 0, host = 0, views = 0, events = 0, h2d = 0, d2h = 0;
  std::set<std::string> fallback;
  for (std::size_t i = 0; i < place_.size(); ++i) {
    const auto& p = place_[i];
    if (p.reason == "view") ++views;
    else if (p.engine == Engine::host_cpu) {
      ++host;
      if (p.reason == "no device mapping") fallback.insert(G.nodes()[i].op->name);
    } else {
      ++dev;
      if (p.engine == Engine::ai_cpu) ++aicpu;
    }
    events += p.waits.size();
  }
  for (const auto& s : steps_) {
    if (s.kind == StepKind::to_device) ++h2d;
    if (s.kind == StepKind::to_host) ++d2h;
  }
  std::string out = fmt::format(
      "# device graph on {}: {} device kernels, {} host nodes, {} views; {} stream(s), {} cross-stream waits; "
      "per step {} host->device and {} device->host copies{}{}\n",
      be_->device(), dev, host, views, streams_.size(), events, h2d, d2h,
      aicpu == 0 ? std::string() : MS_FORMAT("; {} of the device kernels on ai_cpu", aicpu),
      fallback.empty() ? std::string() : MS_FORMAT("; host fallback: {}", ::ms::detail::join_text(fallback, ", ")));
  std::string ir = G.str();
  // Annotate each node line ("... # name") with its placement.
  std::size_t node = 0, pos = 0;
  while (pos < ir.size()) {
    std::size_t end = ir.find('\n', pos);
    if (end == std::string::npos) end = ir.size();
    std::string line = ir.substr(pos, end - pos);
    while (node < G.nodes().size() && G.nodes()[node].dead) ++node;
    if (node < G.nodes().size() && line.size() > G.nodes()[node].name.size() &&
        line.ends_with("# " + G.nodes()[node].name)) {
      const auto& p = place_[node];
      std::string where = MS_FORMAT("  @{}", engine_name(p.engine));
      if (p.engine != Engine::host_cpu && p.reason != "view") where += MS_FORMAT(" stream {}", p.stream);
      where += MS_FORMAT(" ({}", p.reason);
      if (p.copies_in) where += MS_FORMAT(", {} copies in", p.copies_in);
      if (p.reason != "view") where += MS_FORMAT(", ~{:.1f} us", p.cost_us);
      where += ")";
      if (!p.waits.empty()) {
        std::vector<std::string> w;
        for (int k : p.waits) w.push_back(G.nodes()[static_cast<std::size_t>(k)].name);
        where += MS_FORMAT(" waits [{}]", ::ms::detail::join_text(w, ", "));
      }
      line += where;
      ++node;
    }
    out += line + "\n";
    pos = end + 1;
  }
  return out;
}

#endif  // MS_IMPL_BODIES

}  // namespace ms::backend
